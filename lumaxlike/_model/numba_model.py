"""The Hapke model in numba: the same equations, compiled, parallel over pixels.

The kernels are compiled for the default configuration (AMSA, Hapke 2002 H, double
Henyey-Greenstein); another
configuration (`family`) gets its own compiled variant of the same kernel code.
"""

from __future__ import annotations

import sys
import types

import numba
import numpy as np

from .. import _configuration
from . import _backends, _exact_h_tables, _scalar_math, equations, family, h_functions
from ._backends import numba_equations
from .family import ModelKey, numba_kernel_for
from .numba_cache import cached_njit
from .numba_threads import run_in_blocks

# Module-level names: numba resolves globals, not attributes of a namespace object.
pixel_terms = numba_equations.pixel_terms
reflectance = numba_equations.reflectance
geometry_terms = numba_equations.geometry_terms

__all__ = [
    "MODEL_MODULES",
    "amsa_pixels",
    "as_kernel_array",
    "kernel_params",
    "model_scalars",
    "observation_rows",
]


#: The modules whose code the model kernels compile in: editing one invalidates their cache
#: (`_configuration` holds N_LEGENDRE, a constant of the equations; this module,
#: `model_scalars`).
MODEL_MODULES: tuple[types.ModuleType, ...] = (
    equations,
    h_functions,
    _exact_h_tables,
    family,
    _backends,
    _scalar_math,
    _configuration,
    sys.modules[__name__],
)


@numba.njit(error_model="numpy", inline="always")
def model_scalars(scalars):
    """The nine scalar parameters packed by `kernel_params` (b, c, roughness, hs, bs0, hc,
    bc0, porosity_k, asymmetry), as a tuple in `pixel_terms`' order: a kernel's per-pixel
    terms are ``pixel_terms(to_sun, to_sensor, normal, *model_scalars(scalars), legendre,
    use_legendre)`` (the numba twin of `jax_model.pixel_terms`; `pixel_terms` stays a
    global of the kernel, so that its variants bind another configuration's)."""
    return (
        scalars[0],
        scalars[1],
        scalars[2],
        scalars[3],
        scalars[4],
        scalars[5],
        scalars[6],
        scalars[7],
        scalars[8],
    )


@cached_njit(inlines=MODEL_MODULES, nogil=True, error_model="numpy")
def _amsa_pixels_kernel(
    first, last, w, to_sun, to_sensor, normal, scalars, legendre, use_legendre, out
):
    """Pixels first to last - 1 (`numba_threads.run_in_blocks`)."""
    n_bands = w.shape[1]
    # the pixel's vectors copied into this block's own arrays: a view of a shared array
    # (to_sun[pixel]) updates that array's one reference count from every thread, and
    # that contention cost the forward model 65 % more CPU time on 2 threads
    sun, sensor, up = np.empty(3), np.empty(3), np.empty(3)
    for pixel in range(first, last):
        for k in range(3):
            sun[k], sensor[k], up[k] = to_sun[pixel, k], to_sensor[pixel, k], normal[pixel, k]
        terms = pixel_terms(sun, sensor, up, *model_scalars(scalars), legendre, use_legendre)
        for band in range(n_bands):
            out[pixel, band] = reflectance(w[pixel, band], terms)


@cached_njit(inlines=MODEL_MODULES, nogil=True, error_model="numpy")
def _observation_rows_kernel(first, last, to_sun, to_sensor, normal, rows):
    """Pixels first to last - 1 (`numba_threads.run_in_blocks`)."""
    n_obs = to_sun.shape[1]
    for pixel in range(first, last):
        for k in range(n_obs):
            geometry = geometry_terms(to_sun[pixel, k], to_sensor[pixel, k], normal[pixel, k])
            # GeometryTerms mixes floats and a bool: no indexing by a variable
            (
                cos_i,
                sin_i,
                cos_e,
                sin_e,
                cos_g,
                tan_half_g,
                cos_psi,
                sin2_half_psi,
                psi,
                f_psi,
                valid,
            ) = geometry
            row = rows[pixel, k]
            row[0], row[1], row[2], row[3], row[4], row[5] = (
                cos_i,
                sin_i,
                cos_e,
                sin_e,
                cos_g,
                tan_half_g,
            )
            row[6], row[7], row[8], row[9], row[10] = (
                cos_psi,
                sin2_half_psi,
                psi,
                f_psi,
                1.0 if valid else 0.0,
            )


def _amsa_pixels_kernel_for(key: ModelKey):
    return numba_kernel_for(_amsa_pixels_kernel, key, ("pixel_terms", "reflectance"))


def observation_rows(to_sun, to_sensor, normal):
    """Every observation's `GeometryTerms` as a float64 row (valid as 1.0 or 0.0).

    Args:
        to_sun, to_sensor, normal: (pixels, observations, 3) direction vectors.
    Returns:
        (rows, valid): (pixels, observations, 11) float64 and (pixels, observations) bool,
        True where cos i > 0 and cos e > 0.
    """
    fields = equations.GeometryTerms._fields
    rows = np.empty(to_sun.shape[:2] + (len(fields),))
    run_in_blocks(
        _observation_rows_kernel,
        rows.shape[0],
        *(as_kernel_array(a) for a in (to_sun, to_sensor, normal)),
        rows,
    )
    return rows, rows[..., fields.index("valid")] != 0.0


def as_kernel_array(array):
    """`array` as C-contiguous, writable float64 (a copy only where needed).

    numba compiles one specialisation per read-only flag (broadcast views are read-only),
    each a full compile of a kernel: passing only writable arrays keeps it to one.
    Inputs are never written to.
    """
    return np.require(array, np.float64, ("C", "W"))


def kernel_params(params):
    """`HapkeParams` as the numba kernels take them.

    Returns:
        (scalars, legendre, use_legendre): float64 array (b, c, roughness, hs, bs0, hc,
        bc0, porosity_k, asymmetry), float64 array of 16 Legendre coefficients, bool.
    """
    legendre, use_legendre = params.legendre_coefficients(np)
    scalars = np.array([float(v) for v in params.scalars()], dtype=np.float64)
    return scalars, as_kernel_array(legendre), bool(use_legendre)


def amsa_pixels(w, to_sun, to_sensor, normal, params):
    """r [1/sr] for w (pixels, bands) and geometry (pixels, 3) each; returns (pixels, bands).

    Computed in float64 (the float32 results are rounded at the end).
    """
    out = np.empty(w.shape, dtype=np.float64)
    geometry = (as_kernel_array(a) for a in (to_sun, to_sensor, normal))
    kernel = _amsa_pixels_kernel_for(params.model_key)
    run_in_blocks(kernel, out.shape[0], as_kernel_array(w), *geometry, *kernel_params(params), out)
    return out
