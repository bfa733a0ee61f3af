"""Write `invert_reference.npz`: `invert`'s outputs, both solvers, on fixed inputs.

Run from the repository root (`PYTHONPATH=$PWD python tests/data/make_invert_reference.py`)
at the commit whose outputs later versions must reproduce bit for bit
(`tests/test_invert_reference.py`). The inputs are stored too, so the test does not
depend on the forward model or the random generator.

Cases: several model configurations (default with FULL_PARAMS, IMSA with the 1981 H, the
exact H with porosity, single HG, Cornette-Shanks, user Legendre coefficients),
float64 and float32 inputs, a given w0, a small max_iter (MAX_ITER statuses), and
problems of every status (NaN reflectance, NaN geometry, source below the local horizon,
reflectance <= 0 and above r(w = 1)).
"""

from __future__ import annotations

import math
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))

from helpers import FULL_PARAMS, random_geometry  # noqa: E402

import lumaxlike  # noqa: E402

N_PIXELS, N_BANDS = 40, 4

# name -> (params, dtype, invert keyword arguments)
CASES = {
    "default_f64": (FULL_PARAMS, np.float64, {}),
    "default_f32": (FULL_PARAMS, np.float32, {}),
    "default_w0_max_iter": (FULL_PARAMS, np.float64, {"w0": "far", "max_iter": 3}),
    # configurations whose numba kernels the rest of the suite compiles anyway
    "imsa_1981": (
        lumaxlike.HapkeParams(
            b=0.3,
            c=0.6,
            roughness=0.3,
            hs=0.08,
            bs0=0.7,
            multiple_scattering="imsa",
            h_function="hapke1981",
        ),
        np.float64,
        {},
    ),
    "exact_porosity": (
        lumaxlike.HapkeParams(
            b=0.25,
            c=0.4,
            roughness=math.radians(25.0),
            hc=0.04,
            bc0=0.6,
            porosity_k=1.4,
            h_function="exact",
        ),
        np.float64,
        {},
    ),
    "hg": (
        lumaxlike.HapkeParams(b=0.0, c=0.0, asymmetry=-0.3, roughness=0.2, phase_function="hg"),
        np.float64,
        {},
    ),
    "cornette_shanks": (
        lumaxlike.HapkeParams(
            b=0.0, c=0.0, asymmetry=0.2, hs=0.05, bs0=0.5, phase_function="cornette_shanks"
        ),
        np.float64,
        {},
    ),
    "legendre_f32": (
        lumaxlike.HapkeParams(
            b=0.3, c=0.2, roughness=0.2, hs=0.05, bs0=0.8, legendre=np.r_[1.0, 0.4, 0.3, 0.1]
        ),
        np.float32,
        {},
    ),
}
FIELDS = ("w", "status", "iterations", "residual", "sigma")


def case_inputs(seed: int, params, dtype):
    """Random geometry and noisy reflectance with problems of every status."""
    rng = np.random.default_rng(seed)
    to_sun, to_sensor, normal = random_geometry(N_PIXELS, rng)
    w_true = rng.uniform(0.02, 0.98, (N_PIXELS, N_BANDS))
    refl = lumaxlike.amsa(w_true, to_sun, to_sensor, normal, params, backend="numba")
    refl = refl * (1.0 + 1e-3 * rng.standard_normal(refl.shape))
    refl[0, 0] = np.nan  # NONFINITE_INPUT
    refl[1, 1] = -0.01  # UNREACHABLE (r <= 0)
    refl[2, 2] = 10.0  # UNREACHABLE (above r(w = 1))
    refl[3, :] = np.nan
    to_sensor[4] = np.nan  # NONFINITE_INPUT (geometry)
    to_sun[5] = (0.0, 0.3, -1.0)  # INVALID_GEOMETRY (source below the horizon)
    refl[6, 3] = 0.0
    return {
        "refl": refl.astype(dtype),
        "to_sun": to_sun.astype(dtype),
        "to_sensor": to_sensor.astype(dtype),
        "normal": normal.astype(dtype),
        # far from w_true in the even bands (MAX_ITER with a small max_iter), 0.5 in the odd ones
        "w0_far": np.where(
            np.arange(N_BANDS) % 2 == 0, np.where(w_true > 0.5, 0.03, 0.97), 0.5
        ).astype(dtype),
    }


def run_case(inputs, params, kwargs, solver):
    kwargs = dict(kwargs)
    if kwargs.get("w0") == "far":
        kwargs["w0"] = inputs["w0_far"]
    geometry = (inputs["to_sun"], inputs["to_sensor"], inputs["normal"])
    return lumaxlike.invert(
        inputs["refl"], *geometry, params, solver=solver, refl_sigma=1e-3, **kwargs
    )


def main() -> None:
    arrays = {}
    for seed, (name, (params, dtype, kwargs)) in enumerate(CASES.items()):
        inputs = case_inputs(seed, params, dtype)
        arrays.update({f"{name}/{key}": value for key, value in inputs.items()})
        for solver in ("jax", "numba"):
            result = run_case(inputs, params, kwargs, solver)
            for field in FIELDS:
                arrays[f"{name}/{solver}/{field}"] = getattr(result, field)
            counts = (
                {str(s): int(n) for s, n in result.counts().items()}
                if hasattr(result, "counts")
                else {}
            )
            print(name, solver, counts)
    np.savez_compressed(HERE / "invert_reference.npz", **arrays)


if __name__ == "__main__":
    main()
