"""Both solvers' closed-form inversion of an empirical photometric function for its
albedo A: `photometric_rules` over JAX (jitted, vmapped) or numba (parallel over pixels),
returning what the Levenberg-Marquardt solvers return (iterations 0)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..._model import _backends, _scalar_math
from ..._model._backends import retarget_to_jax, retarget_to_numba
from ..._model.model_forward import photometric_scale_jax
from ..._model.numba_cache import cached_njit
from ..._model.numba_model import as_kernel_array
from ..._model.numba_threads import run_in_blocks
from ..._model.photometric_backends import scale_numba
from . import photometric_rules

__all__ = ["solve_photometric_jax", "solve_photometric_numba"]

_jax_rules = retarget_to_jax(photometric_rules)
_numba_rules = retarget_to_numba(photometric_rules)
# Module-level names: numba resolves globals.
geometry_finite = _numba_rules.geometry_finite
albedo_closed_form = _numba_rules.albedo_closed_form


def _pixel_jax(refl, to_sun, to_sensor, normal, model):
    scale = photometric_scale_jax(to_sun, to_sensor, normal, model)
    finite = _jax_rules.geometry_finite(to_sun, to_sensor, normal)
    solve = jax.vmap(_jax_rules.albedo_closed_form, in_axes=(0, None, None))
    return solve(refl, finite, scale)


@jax.jit
def _solve_jax(refl, to_sun, to_sensor, normal, model):
    albedo, status, residual, slope = jax.vmap(_pixel_jax, in_axes=(0, 0, 0, 0, None))(
        refl, to_sun, to_sensor, normal, model
    )
    return {"w": albedo, "status": status.astype(jnp.int8), "residual": residual, "slope": slope}


def solve_photometric_jax(refl, to_sun, to_sensor, normal, model):
    """One chunk in JAX: refl (pixels, bands), geometry (pixels, 3), all JAX arrays of one
    float dtype (call inside `precision_scope`). Returns a dict of (pixels, bands) JAX
    arrays w (the albedo A), status (int8), residual, slope (dr/dA [1/sr])."""
    dtype = refl.dtype
    model = jax.tree_util.tree_map(lambda leaf: jnp.asarray(leaf, dtype), model)
    return _solve_jax(refl, to_sun, to_sensor, normal, model)


@cached_njit(inlines=(photometric_rules, _scalar_math, _backends), nogil=True, error_model="numpy")
def _solve_kernel(
    first, last, refl, to_sun, to_sensor, normal, scale, w_out, status_out, residual_out, slope_out
):
    """Pixels first to last - 1 (`numba_threads.run_in_blocks`)."""
    n_bands = refl.shape[1]
    for pixel in range(first, last):
        finite = geometry_finite(to_sun[pixel], to_sensor[pixel], normal[pixel])
        for band in range(n_bands):
            albedo, status, residual, slope = albedo_closed_form(
                refl[pixel, band], finite, scale[pixel]
            )
            w_out[pixel, band] = albedo
            status_out[pixel, band] = status
            residual_out[pixel, band] = residual
            slope_out[pixel, band] = slope


def solve_photometric_numba(refl, to_sun, to_sensor, normal, model):
    """One chunk in numba (float64): refl (pixels, bands), geometry (pixels, 3). Returns
    a dict of (pixels, bands) NumPy arrays w (the albedo A), status (int8), residual,
    slope (dr/dA [1/sr]). The per-pixel scale comes from the kind's kernel
    (`scale_numba`); the closed form is one kernel for every kind."""
    shape = refl.shape
    out = {
        "w": np.empty(shape, np.float64),
        "status": np.empty(shape, np.int8),
        "residual": np.empty(shape, np.float64),
        "slope": np.empty(shape, np.float64),
    }
    to_sun, to_sensor, normal = (as_kernel_array(a) for a in (to_sun, to_sensor, normal))
    scale = scale_numba(to_sun, to_sensor, normal, model)
    run_in_blocks(
        _solve_kernel,
        shape[0],
        as_kernel_array(refl),
        to_sun,
        to_sensor,
        normal,
        scale,
        out["w"],
        out["status"],
        out["residual"],
        out["slope"],
    )
    return out
