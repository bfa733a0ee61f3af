"""Regenerate refmod_reference.npz: refmod's Lambert, Shkuratov and MIMSA on random
geometry, for tests/test_photometric_functions.py. refmod (the closest peer code,
Python/JAX, `pip install refmod`; stored: its version in `refmod_version`, 1.0.0 when generated) is not a lumaxlike
dependency: the tests compare with the stored numbers.

Stored (float64): the geometry `to_sun`, `to_sensor`, `normal` (pixels, 3) (random, a
few pixels below a local horizon, two at zero phase), the albedo `albedo` (pixels,);
`lambert` = refmod.lambert; `shkuratov_<case>` = refmod.shkuratov with the parameters
`shkuratov_<case>_params` = (mu1, eta, m0, mu2) for cases `a` (eta = 0, phase function
only: refmod and the paper agree there) and `b` (eta = 0.5: refmod's exponent eta alpha
(pi - alpha) differs from the paper's eta alpha/(pi - alpha)); `mimsa` = refmod's MIMSA
with Legendre coefficients `mimsa_b_n`, without roughness: with roughness 20 deg refmod's
correction differs from lumaxlike's Hapke (1984) one by up to 12 % in r on these pixels
(refmod's roughness is a separate, known disagreement; see the README's benchmark notes).

Usage: python tests/data/make_refmod_reference.py   (writes next to this file)
"""

from pathlib import Path

import jax
import numpy as np

jax.config.update("jax_enable_x64", True)  # a standalone script: refmod in float64

import refmod  # noqa: E402
from refmod.hapke.mimsa import mimsa  # noqa: E402
from refmod.lambert import lambert  # noqa: E402
from refmod.shkuratov import shkuratov  # noqa: E402


def direction(zenith, azimuth):
    return np.stack(
        [np.sin(zenith) * np.sin(azimuth), np.sin(zenith) * np.cos(azimuth), np.cos(zenith)], -1
    )


def main():
    rng = np.random.default_rng(2011)
    n = 60
    to_sun = direction(np.radians(rng.uniform(0, 80, n)), np.zeros(n))
    to_sensor = direction(np.radians(rng.uniform(0, 70, n)), rng.uniform(0, 2 * np.pi, n))
    normal = direction(np.radians(rng.uniform(0, 30, n)), rng.uniform(0, 2 * np.pi, n))
    to_sensor[:2] = to_sun[:2]  # zero phase
    albedo = rng.uniform(0.05, 0.9, n)
    out = {"to_sun": to_sun, "to_sensor": to_sensor, "normal": normal, "albedo": albedo}
    out["lambert"] = np.asarray(lambert(albedo, to_sun, to_sensor, normal))
    for case, (mu1, eta, m0, mu2) in {"a": (0.6, 0.0, 0.4, 3.0), "b": (0.6, 0.5, 0.4, 3.0)}.items():
        out[f"shkuratov_{case}_params"] = np.array([mu1, eta, m0, mu2])
        out[f"shkuratov_{case}"] = np.asarray(
            shkuratov(albedo, mu1, eta, to_sun, to_sensor, normal, m0, mu2)
        )
    b_n = np.array([1.0, 0.45, 0.3, 0.12, 0.05])
    out["mimsa_b_n"] = b_n
    out["mimsa"] = np.asarray(mimsa(albedo, b_n, to_sun, to_sensor, normal, 0.0))
    out["refmod_version"] = np.array(getattr(refmod, "__version__", "unknown"))
    np.savez(Path(__file__).with_name("refmod_reference.npz"), **out)


if __name__ == "__main__":
    main()
