"""Forward-model the demo scene's reflectance cube with the package's own AMSA model."""

from __future__ import annotations

import shlex
from typing import Any

import numpy as np

from .._model.forward import amsa
from .._params import HapkeParams
from .scene import Scene

__all__ = [
    "DEMO_HAPKE",
    "command_line",
    "demo_hapke_params",
    "describe_hapke",
    "hapke_cli_args",
    "simulate_reflectance",
]

#: Hapke parameters of the demo surface (roughness in degrees), named like the CLI flags.
DEMO_HAPKE = {
    "b": 0.2,
    "c": 0.4,
    "roughness_deg": 20.0,
    "hs": 0.06,
    "bs0": 1.0,
    "hc": 0.05,
    "bc0": 0.5,
}


def demo_hapke_params() -> HapkeParams:
    """The Hapke parameters of the demo surface, shared by every pixel and band.

    Returns:
        `lumaxlike.HapkeParams` with b = 0.2, c = 0.4, roughness theta-bar = 20 deg
        (stored in rad), h_S = 0.06, B_S0 = 1.0, h_C = 0.05, B_C0 = 0.5: the double
        Henyey-Greenstein phase function, Hapke (1984) roughness and both opposition
        effects (all dimensionless but the roughness).
    """
    values: dict[str, Any] = dict(DEMO_HAPKE)
    roughness = np.deg2rad(values.pop("roughness_deg"))
    return HapkeParams(roughness=float(roughness), **values)


def hapke_cli_args() -> list[str]:
    """The demo's Hapke parameters as ``lumaxlike invert`` flags (``--roughness-deg`` ...)."""
    args = []
    for name, value in DEMO_HAPKE.items():
        short = f"{value:g}"
        args += [f"--{name.replace('_', '-')}", short if float(short) == value else repr(value)]
    return args


def simulate_reflectance(scene: Scene, noise: float = 0.0, backend: str = "jax") -> np.ndarray:
    """Bidirectional reflectance the scene would show, with optional multiplicative noise.

    Incidence and emission are local: the model takes the to-sun and to-sensor vectors
    of the OBS geometry together with each pixel's DTM normal.

    Args:
        scene: the scene (true w, geometry, DTM).
        noise: relative standard deviation of Gaussian noise, ``r * (1 + noise * N(0, 1))``
            [-], drawn from a generator seeded by the scene's seed; 0 for exact data.
        backend: forward-model backend, ``"jax"`` (compiles fastest) or ``"numba"``.

    Returns:
        ndarray of shape ``(rows, cols, bands)``, float64: r [1/sr].
    """
    if not noise >= 0.0:
        raise ValueError(f"noise must be >= 0, got {noise!r}")
    r = np.asarray(
        amsa(
            scene.w,
            scene.to_sun,
            scene.to_sensor,
            scene.normal,
            demo_hapke_params(),
            backend=backend,
        ),
        dtype=np.float64,
    )
    if not np.all(np.isfinite(r) & (r > 0)):
        raise RuntimeError("the demo scene produced non-finite or non-positive reflectance")
    if noise > 0.0:
        rng = np.random.default_rng([scene.config.seed, 1])
        r = r * (1.0 + noise * rng.standard_normal(r.shape))
    return r


def command_line(argv) -> str:
    """``argv`` (after ``lumaxlike``) as a line to paste into a shell."""
    return "lumaxlike " + shlex.join(str(arg) for arg in argv)


def describe_hapke() -> str:
    """The demo's Hapke parameters in one line, e.g. ``b=0.2, c=0.4, roughness=20 deg, ...``."""
    return ", ".join(
        f"roughness={value:g} deg" if name == "roughness_deg" else f"{name}={value:g}"
        for name, value in DEMO_HAPKE.items()
    )
