"""One chunk of joint problems (`joint.fit_joint`, `regional_fit.fit_regional`): its
starting values and its solve through the numba or the JAX solver."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from ..._model.forward import precision_scope
from ..._model.numba_jacobian import hoisted_rows, model_columns
from ..._model.numba_model import observation_rows
from ..._params import PARAMETER_NAMES
from ..chunking import pad_pixels
from ..fit.arguments import albedo_start
from .jax_solver import solve_joint_jax
from .numba_solver import solve_joint_numba

__all__ = ["chunk_starts", "solve_chunk"]


def chunk_starts(given, first, last, free, shared, params, pieces, solver, lower, upper):
    """(pixels, bands, p) per-band and (pixels, s) shared starting values of a chunk."""
    refl = pieces[0]
    n, n_bands, _ = refl.shape
    band_columns: list[np.ndarray] = []
    shared_columns: list[np.ndarray] = []
    for j, name in enumerate(free):
        if name in given:
            value = given[name][first:last]
        elif name == "w":
            value = albedo_start(refl, pieces[1:], params, solver, lower[j], upper[j])
        else:
            value = np.full((n,) if name in shared else (n, n_bands), float(getattr(params, name)))
        (shared_columns if name in shared else band_columns).append(value)
    start_b = np.stack(band_columns, axis=-1)
    start_s = np.stack(shared_columns, axis=-1) if shared_columns else np.zeros((n, 0))
    return start_b, start_s


def solve_chunk(solver, arrays, geometry, padded_problems, setup):
    """One chunk's problems through the chosen solver: the dict of `solve_joint_numba`."""
    refl, weight, start_b, start_s, *priors = arrays
    n = refl.shape[0]
    if solver == "numba":
        geometry_rows, valid = observation_rows(*geometry)
        functions = model_columns(setup["free"], setup["key"])
        rows = hoisted_rows(functions, geometry_rows, setup["fixed"])
        p = setup["n_band_free"]
        index = np.array([PARAMETER_NAMES.index(name) for name in setup["free"]], np.int64)
        return solve_joint_numba(
            functions,
            rows,
            valid,
            refl,
            weight,
            start_b,
            start_s,
            priors,
            setup["fixed"],
            index[:p],
            index[p:],
            (setup["lower"], setup["upper"]),
            (setup["min_obs"], setup["max_iter"], setup["tol"]),
        )
    dtype = setup["dtype"]
    # one chunk shape, so the JAX program compiles once; padded problems have no data
    padded = [
        pad_pixels(np.asarray(a), padded_problems, np.nan if i == 0 else 1.0)
        for i, a in enumerate([refl, *geometry])
    ]
    rest = [
        pad_pixels(np.asarray(a), padded_problems, 0.0) for a in (weight, start_b, start_s, *priors)
    ]
    with precision_scope(np.empty(0, dtype)):
        solved = solve_joint_jax(
            *(jnp.asarray(a, dtype) for a in padded),
            jnp.asarray(rest[0], dtype),
            (jnp.asarray(rest[1], dtype), jnp.asarray(rest[2], dtype)),
            tuple(jnp.asarray(a, dtype) for a in rest[3:]),
            jnp.asarray(setup["fixed"], dtype),
            (jnp.asarray(setup["lower"], dtype), jnp.asarray(setup["upper"], dtype)),
            (setup["min_obs"], setup["max_iter"], setup["tol"]),
            free=setup["free"],
            n_band_free=setup["n_band_free"],
            key=setup["key"],
        )
        solved = jax.device_get(solved)
    return {
        name: np.array(value[:n], np.float64 if value.dtype.kind == "f" else value.dtype)
        for name, value in solved.items()
    }
