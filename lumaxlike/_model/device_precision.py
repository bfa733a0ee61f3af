"""JAX's default platform, and float64 on a device without float64 hardware (a TPU):
refused, with what to do.

A TPU has no float64 unit: XLA emulates float64 there with pairs of float32 numbers.
Measured on one TPU v5e (JAX 0.10.2): `invert` float64 compiled in 192 s and ran at
0.4x its float32 rate, `unmix`'s float64 program compiled in 171 s, and some float64
operations (FFT, `linalg.solve`) do not compile at all. So a JAX computation of
lumaxlike in float64 is refused where JAX's default device is a TPU, with a ValueError
that says what to do instead: float32 on the chip, then float64 on the host where it is
needed (the numba solvers, started from the float32 answer). `EMULATED_FLOAT64_ENV`
set to "1" lets float64 run emulated anyway (for measuring it).

GPUs have float64 hardware (slow on consumer cards, but correct and quick to compile):
they are not refused.
"""

from __future__ import annotations

import os
from collections.abc import Mapping

__all__ = [
    "EMULATED_FLOAT64_ENV",
    "EMULATED_FLOAT64_PLATFORMS",
    "check_float64_platform",
    "default_is_cpu",
    "default_platform",
    "refuse_emulated_float64",
]

# JAX platform names (`jax.default_backend()`) whose float64 is emulated.
EMULATED_FLOAT64_PLATFORMS = ("tpu",)
# Set to "1" to run lumaxlike's float64 JAX programs on such a platform anyway.
EMULATED_FLOAT64_ENV = "LUMAXLIKE_EMULATED_FLOAT64"


def check_float64_platform(platform: str, environ: Mapping[str, str] | None = None) -> None:
    """Refuse a float64 JAX computation on `platform` where float64 is emulated.

    Args:
        platform: JAX's platform name of the device the computation would run on
            (`jax.default_backend()`: "cpu", "gpu", "tpu", ...).
        environ: the environment to read `EMULATED_FLOAT64_ENV` from; default os.environ.
    Raises:
        ValueError: on a TPU (unless the environment allows it), saying what to do.
    """
    environ = os.environ if environ is None else environ
    if platform.lower() not in EMULATED_FLOAT64_PLATFORMS:
        return
    if environ.get(EMULATED_FLOAT64_ENV) == "1":
        return
    raise ValueError(
        f"float64 requested from lumaxlike's JAX path (solver='jax' or backend='jax' with "
        f"float64 arrays, or a JAX solver that computes in float64) on a {platform.upper()}, "
        "which has no float64 hardware: XLA emulates it there (minutes of compilation, "
        "some operations fail). Pass float32 arrays to run on the chip, then refine on the "
        "host where float64 accuracy is needed, e.g. invert(refl.astype('float64'), ..., "
        "solver='numba', w0=result32.w) or fit(..., solver='numba', start=result32.values); "
        "or use solver='numba' (or JAX_PLATFORMS=cpu) for the whole float64 run. "
        f'{EMULATED_FLOAT64_ENV}=1 runs float64 emulated anyway (README: "On a GPU or TPU").'
    )


def default_platform() -> str:
    """JAX's default platform ("cpu", "gpu", "tpu"); initialises JAX's backends."""
    import jax

    return jax.default_backend()


def default_is_cpu() -> bool:
    """Whether JAX's default device is a CPU (else an accelerator: the JAX paths' chunk
    sizes, schedules and layouts differ there); initialises JAX's backends."""
    return default_platform() == "cpu"


def refuse_emulated_float64() -> None:
    """`check_float64_platform` on JAX's default platform (before a float64 JAX call)."""
    check_float64_platform(default_platform())
