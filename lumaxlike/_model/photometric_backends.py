"""The empirical photometric functions (`photometric`) on JAX and numba, one kind at a time.

`photometric` is retargeted per kind (its `photometric_function` slot bound to that
kind's function, its geometry to the backend's twin of `equations.geometry_terms`), as
`family` does for the Hapke equations. The forward kernels: `scale_jax` (per pixel, to
be vmapped) and `reflectance_numba` (parallel over pixels).
"""

from __future__ import annotations

import functools

import numpy as np

from .. import _configuration
from . import _backends, _scalar_math, equations, photometric
from ._backends import jax_equations, numba_equations, retarget_to_jax, retarget_to_numba
from .numba_cache import cached_njit, compile_variant

__all__ = [
    "MODULES",
    "jax_photometric_for",
    "numba_photometric_for",
    "kernel_scalars",
    "scale_numba",
    "reflectance_numba",
]

#: The modules the photometric kernels compile in: editing one invalidates their cache.
MODULES = (photometric, equations, _backends, _scalar_math, _configuration)


@functools.cache
def jax_photometric_for(kind: str):
    """`photometric` over jax.numpy with kind `kind` bound (a namespace of functions)."""
    return retarget_to_jax(
        photometric,
        geometry_terms=jax_equations.geometry_terms,
        photometric_function=photometric.KINDS[kind][0],
    )


@functools.cache
def numba_photometric_for(kind: str):
    """`photometric` compiled by numba with kind `kind` bound."""
    return retarget_to_numba(
        photometric,
        geometry_terms=numba_equations.geometry_terms,
        photometric_function=photometric.KINDS[kind][0],
    )


def kernel_scalars(model) -> np.ndarray:
    """A `PhotometricFunction`'s parameters as the numba kernels take them: float64
    (limb_darkening, minnaert_k, mu1, m, mu2, eta)."""
    return np.array([float(v) for v in model.scalars()], dtype=np.float64)


# Module-level name: numba resolves globals (rebound per kind by `compile_variant`).
photometric_scale = numba_photometric_for("lambert").photometric_scale


# Serial: the scale is per pixel, not per band (tens of ns each), and a serial kernel
# compiles in about 1 s per kind against 2.3 s for a parallel one.
@cached_njit(inlines=MODULES, error_model="numpy")
def _scale_kernel(to_sun, to_sensor, normal, scalars, out):
    limb_darkening, minnaert_k, mu1, m, mu2, eta = (
        scalars[0],
        scalars[1],
        scalars[2],
        scalars[3],
        scalars[4],
        scalars[5],
    )
    for pixel in range(to_sun.shape[0]):
        out[pixel] = photometric_scale(
            to_sun[pixel],
            to_sensor[pixel],
            normal[pixel],
            limb_darkening,
            minnaert_k,
            mu1,
            m,
            mu2,
            eta,
        )


@functools.cache
def _scale_kernel_for(kind: str):
    if kind == "lambert":
        return _scale_kernel
    return compile_variant(
        _scale_kernel,
        f"photometric-{kind}",
        photometric_scale=numba_photometric_for(kind).photometric_scale,
    )


def scale_numba(to_sun, to_sensor, normal, model):
    """pht/pi [1/sr] of every pixel, (pixels,) float64, NaN where the geometry is invalid,
    from (pixels, 3) C-contiguous writable float64 geometry (`numba_model.as_kernel_array`).
    The one kernel compiled per kind: the forward model and the inversion are the same
    for every kind given the scale."""
    out = np.empty(to_sun.shape[0], dtype=np.float64)
    _scale_kernel_for(model.kind)(to_sun, to_sensor, normal, kernel_scalars(model), out)
    return out


def reflectance_numba(albedo, to_sun, to_sensor, normal, model):
    """r [1/sr] for albedo (pixels, bands) and geometry (pixels, 3) each, in float64
    (geometry as for `scale_numba`)."""
    return albedo * scale_numba(to_sun, to_sensor, normal, model)[:, None]
