"""The standard geometry of photometric normalisation and the model evaluated there.

`standard_angles` (`options`, where the option is declared) checks a user's (incidence,
emission, phase) triple; `standard_vectors` turns it into direction vectors on a flat surface; `standard_reflectance` is the one place
the model is evaluated at the standard geometry (r and dr/dw), so another kind of model
is one more branch there.
"""

from __future__ import annotations

import numpy as np

from .._geometry import geometry_from_angles
from .._model._backends import numba_equations
from .._model.family import ModelKey, numba_kernel_for
from .._model.numba_cache import cached_njit
from .._model.numba_model import MODEL_MODULES, as_kernel_array, kernel_params, model_scalars
from .._model.numba_threads import run_in_blocks
from .._params import HapkeParams
from .options import DEFAULT_STANDARD, standard_angles

__all__ = [
    "DEFAULT_STANDARD",
    "differentiated_at_standard",
    "standard_angles",
    "standard_reflectance",
    "standard_vectors",
]

# Module-level names: numba resolves globals, not attributes of a namespace object.
pixel_terms = numba_equations.pixel_terms
reflectance_and_slope = numba_equations.reflectance_and_slope
reflectance = numba_equations.reflectance


def standard_vectors(
    incidence: float, emission: float, phase: float
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(to_sun, to_sensor, normal), each (3,) float64, of a flat surface seen at the standard
    geometry; the relative azimuth psi from cos g = cos i cos e + sin i sin e cos psi
    (0 when i or e is 0, where psi does not matter)."""
    to_sun, to_sensor, normal = geometry_from_angles(incidence, emission, phase=phase)
    return (
        np.asarray(to_sun, np.float64),
        np.asarray(to_sensor, np.float64),
        np.asarray(normal, np.float64),
    )


@cached_njit(inlines=MODEL_MODULES, nogil=True, error_model="numpy")
def _standard_kernel(
    first,
    last,
    w,
    to_sun,
    to_sensor,
    normal,
    scalars,
    legendre,
    use_legendre,
    r_out,
    slope_out,
    with_slope,
):
    # values first to last - 1 (`numba_threads.run_in_blocks`), the terms once per block
    terms = pixel_terms(to_sun, to_sensor, normal, *model_scalars(scalars), legendre, use_legendre)
    for k in range(first, last):
        if with_slope:
            r_out[k], slope_out[k] = reflectance_and_slope(w[k], terms)
        else:
            r_out[k] = reflectance(w[k], terms)


def _kernel_for(key: ModelKey):
    """`_standard_kernel` compiled for configuration `key` (the same code, its equations)."""
    return numba_kernel_for(
        _standard_kernel, key, ("pixel_terms", "reflectance_and_slope", "reflectance")
    )


def standard_reflectance(w, vectors, model, r_out=None, with_slope=True):
    """The model at the standard geometry: r(w) [1/sr] and dr/dw [1/sr], computed in
    float64.

    Args:
        w: albedo, any shape (NaN gives NaN).
        vectors: (to_sun, to_sensor, normal) of the standard geometry, each (3,).
        model: a `HapkeParams` (one compiled numba kernel per configuration; the
            w-independent terms are computed once for all of ``w``) or a
            `PhotometricFunction` (through `differentiated_at_standard`).
        r_out: optional float32 or float64 C-contiguous array of ``w``'s shape to write
            r into, rounded once to its dtype (a caller's spare buffer: no new full-size
            array, whose first touch costs about as much as the evaluation, and no
            float64 copy of a float32 result); used for a `HapkeParams`.
        with_slope: False skips dr/dw (then None) for a `HapkeParams`.
    Returns:
        (r, dr/dw), arrays of ``w``'s shape: r in ``r_out`` when given, else float64;
        dr/dw float64.
    """
    if not isinstance(model, HapkeParams):
        return differentiated_at_standard(w, vectors, model)
    flat = as_kernel_array(np.reshape(w, -1))
    r = np.empty(flat.shape) if r_out is None else _flat_output(r_out)
    slope = np.empty(flat.shape if with_slope else 1)
    run_in_blocks(
        _kernel_for(model.model_key),
        flat.shape[0],
        flat,
        *(as_kernel_array(v) for v in vectors),
        *kernel_params(model),
        r,
        slope,
        bool(with_slope),
    )
    shape = np.shape(w)
    return r.reshape(shape), slope.reshape(shape) if with_slope else None


def _flat_output(array):
    """A 1-D view of a float32 or float64 C-contiguous array (ValueError for anything
    else)."""
    if array.dtype not in (np.float32, np.float64) or not array.flags.c_contiguous:
        raise ValueError("output buffers must be float32 or float64 and C-contiguous")
    return array.reshape(-1)


def differentiated_at_standard(w, vectors, model):
    """r and dr/dw [1/sr] at the standard geometry of any model the public forward model
    evaluates, by `jax.jvp` through it (float64): the path for models without a fused
    kernel, and an independent check of `standard_reflectance`.

    Args and returns: as `standard_reflectance`.
    """
    import jax
    import jax.numpy as jnp

    from .._model.model_forward import reflectance as forward

    to_sun, to_sensor, normal = vectors
    flat = np.reshape(np.asarray(w, np.float64), (1, -1))  # one pixel: the terms once
    with jax.enable_x64(True):
        w_jax = jnp.asarray(flat)
        r, slope = jax.jvp(
            lambda x: forward(x, to_sun, to_sensor, normal, model),
            (w_jax,),
            (jnp.ones_like(w_jax),),
        )
        return np.asarray(r).reshape(np.shape(w)), np.asarray(slope).reshape(np.shape(w))
