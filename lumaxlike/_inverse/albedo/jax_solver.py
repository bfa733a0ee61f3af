"""The JAX solver of `invert`: the one-parameter, one-observation Levenberg-Marquardt,
element-wise over a chunk.

`invert` is the one-parameter, one-observation case of the shared
`elementwise_lm.ElementwiseLevenbergMarquardt` (its `one_parameter` field), run by
`_solve_albedo_lm`: `albedo_rules`' `propose` and `update`, the p = 1 case of `lm_rules`
that numba's `invert` kernel runs, applied element-wise, without the linearisation, the
stacked JVPs and the p x p algebra (J^T J = (dr/dw)^2, the damped step one division). With the pixel terms hoisted and a per-pixel table of r and dr/dw
(cubic Hermite interpolation of w(r)) every problem starts close to convergence, so the
`while_loop` is short and lanes waste little waiting for the slowest.
"""

from __future__ import annotations

import functools
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import optimistix as optx
from jaxtyping import Float

from ..._model._backends import retarget_to_jax
from ..._model.family import ModelKey, jax_equations_for
from ..._model.jax_executables import stored_jit
from ..._model.jax_model import pixel_terms, reflectance_core
from ..._params import HapkeParams
from .. import lm_rules
from ..elementwise_lm import ElementwiseLevenbergMarquardt
from . import rules as albedo_rules

__all__ = ["solve_albedo_jax"]

_lm = retarget_to_jax(lm_rules)


@functools.cache
def _rules_for(key: ModelKey):
    """`albedo_rules` over jax.numpy for model configuration `key`."""
    return retarget_to_jax(
        albedo_rules,
        reflectance_and_slope=jax_equations_for(key).reflectance_and_slope,
        **vars(_lm),
    )


def _residual_and_slope(w, args, key):
    """(r(w) - r_obs, dr/dw) of every problem; args = (pixel terms, r_obs, a run-time 1)."""
    terms, refl, one = args
    core = jax.vmap(jax.vmap(partial(reflectance_core, key=key), in_axes=(0, None)), in_axes=(0, 0))
    r, slope = jax.jvp(lambda w: core(w, terms), (w,), (jnp.ones_like(w),))
    # Dividing by a run-time 1 changes no bit, but makes r - r_obs and dr/dw the
    # results of a division, an operation XLA does not duplicate: they are computed
    # once per step and stored. Otherwise XLA:CPU fuses the model's last (cheap)
    # operations into every consumer, recomputing them for each of the step's seven
    # outputs (`lax.optimization_barrier` does not survive XLA:CPU's passes).
    return (r - refl) / one, slope / one


def _solve_albedo_lm(rules, key, args, w, active, tol, lower, upper, max_iter):
    """Levenberg-Marquardt in w for every problem of a chunk at once: the shared
    `ElementwiseLevenbergMarquardt` in its one-parameter case, with `rules`' `propose` and
    `update` (`albedo_rules` over jax.numpy, the p = 1 case of `lm_rules` that numba's
    kernel runs too), so both solvers take the same steps. Problems not `active` start
    converged. Returns (w, the solver's final state)."""
    evaluate = partial(_residual_and_slope, key=key)
    solver = ElementwiseLevenbergMarquardt(
        tol=tol, lower=lower, upper=upper, one_parameter=(evaluate, rules.propose, rules.update)
    )
    solution: optx.Solution[Any, Any] = optx.least_squares(
        lambda w, args: evaluate(w, args)[0],
        solver,
        w,
        args=args,
        options={"frozen": ~active},
        max_steps=max_iter,
        throw=False,
    )
    return solution.value, solution.state


def _count_dtype(max_iter: int):
    """The smallest signed integer type that holds every count up to `max_iter`."""
    return next((t for t in (jnp.int8, jnp.int16) if max_iter <= jnp.iinfo(t).max), jnp.int32)


@stored_jit(static_argnames=("max_iter",))
def solve_albedo_jax(
    refl: Float[jax.Array, "pixels bands"],
    to_sun: Float[jax.Array, "pixels 3"],
    to_sensor: Float[jax.Array, "pixels 3"],
    normal: Float[jax.Array, "pixels 3"],
    params: HapkeParams,
    w_start: Float[jax.Array, "pixels bands"] | None,
    max_iter,
    tol,
    w_bounds,
):
    """Solve every (pixel, band) problem of one chunk (jitted; same contract as numba's).

    Args:
        refl: observed r [1/sr], (pixels, bands).
        to_sun, to_sensor, normal: (pixels, 3) direction vectors.
        params: `HapkeParams` (its configuration is static: one compile per model).
        w_start: (pixels, bands) starting albedos, or None for the per-pixel table.
        max_iter: iteration cap (static); tol: step tolerance in w.
        w_bounds: (w_lower, w_upper), the projection interval inside (0, 1).
    Returns:
        dict of (pixels, bands) arrays: w, status (int8), iterations (the smallest of
        int8, int16, int32 that holds `max_iter`: outputs cross the host link), residual
        (model minus observed, 1/sr), slope (dr/dw at w, 1/sr).
    """
    w_lower, w_upper = w_bounds
    key = params.model_key
    rules = _rules_for(key)
    terms = jax.vmap(pixel_terms, in_axes=(0, 0, 0, None))(to_sun, to_sensor, normal, params)
    table = jax.vmap(rules.albedo_table)(terms)
    geometry_finite = jnp.all(
        jnp.isfinite(to_sun) & jnp.isfinite(to_sensor) & jnp.isfinite(normal), axis=-1
    )
    per_band = partial(jax.vmap, in_axes=(0, None, None, None))
    status = jax.vmap(per_band(rules.problem_status))(
        refl, geometry_finite, terms.scale, table[albedo_rules.N_TABLE - 1]
    )
    active = status == albedo_rules.SOLVING
    if w_start is None:
        w_start = jax.vmap(per_band(rules.starting_albedo), in_axes=(0, 0, None, None))(
            refl, table, w_lower, w_upper
        )
    w_start = jnp.where(active, w_start, 0.5).astype(refl.dtype)
    lower, upper = (jnp.asarray(b, refl.dtype) for b in (w_lower, w_upper))
    one = lower / lower  # 1 (w_lower > 0 in refl's precision), but not a constant XLA could fold
    w, state = _solve_albedo_lm(
        rules, key, (terms, refl, one), w_start, active, tol, lower, upper, max_iter
    )
    nan = jnp.nan
    return {
        "w": jnp.where(active, w, nan),
        "status": jnp.where(
            active,
            jnp.where(state.converged, albedo_rules.CONVERGED, albedo_rules.MAX_ITER),
            status,
        ).astype(jnp.int8),
        "iterations": jnp.where(active, state.iterations, 0).astype(_count_dtype(max_iter)),
        "residual": jnp.where(active, state.residual, nan),
        "slope": jnp.where(
            active, jnp.sqrt(state.slope * state.slope), nan
        ),  # dr/dw > 0, as sqrt(J^T J)
    }
