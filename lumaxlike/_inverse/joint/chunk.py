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
from ..._status import Status
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
    return _solve_jax_in_two(arrays, geometry, padded_problems, setup)


# JAX: steps of the whole chunk before the problems still stepping are carried on in a
# smaller batch, then twice as many per later stage. A chunk's while loop steps until its
# slowest problem is done, and a few problems take max_iter (200) steps where the median
# takes 7-8: on 1500 pixels x 6 bands x 16 observations (h_S 0.01-0.15), 2 of 1500
# pixels took every chunk of 1365 to 200 steps (benchmarks/bench_joint.py, six-band row).
FIRST_STEPS = 10


def _solve_jax_in_two(arrays, geometry, padded_problems, setup):
    """The JAX solve of a chunk in stages: `FIRST_STEPS` steps of all its problems, then
    the ones still stepping carried on from their iterate, gathered into a batch of
    `compaction.bucket_size` (a power of 2 from 128: few compiled shapes), for twice the
    steps of the stage before, until max_iter. A carried problem's damping restarts at
    0 (Levenberg-Marquardt's start); the others' results are those of one
    uninterrupted loop, to the bit."""
    from ..fit.compaction import bucket_size

    max_iter = setup["max_iter"]
    stage = min(FIRST_STEPS, max_iter)
    result = _solve_jax(arrays, geometry, padded_problems, {**setup, "max_iter": stage})
    taken, batch = stage, padded_problems
    refl, weight, _, _, *priors = arrays
    while taken < max_iter:
        left = np.nonzero(result["status"] == Status.MAX_ITER)[0]
        if not len(left):
            break
        stage = min(2 * stage, max_iter - taken)
        carried = [
            refl[left],
            weight[left],
            result["values_b"][left],
            result["values_s"][left],
            *(a[left] for a in priors),
        ]
        batch = bucket_size(len(left), max(batch, len(left)))
        rest = _solve_jax(carried, [g[left] for g in geometry], batch, {**setup, "max_iter": stage})
        rest["iterations"] = rest["iterations"] + taken
        for name, value in rest.items():
            result[name][left] = value
        taken += stage
    return result


def _solve_jax(arrays, geometry, padded_problems, setup):
    """One chunk's problems through `solve_joint_jax`, padded to `padded_problems`."""
    refl, weight, start_b, start_s, *priors = arrays
    n = refl.shape[0]
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
