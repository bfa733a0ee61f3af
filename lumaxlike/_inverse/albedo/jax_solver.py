"""The JAX solver of `invert`: the one-parameter, one-observation Levenberg-Marquardt,
element-wise over a chunk.

`invert` is the p = 1 case of `jax_solver.ElementwiseLevenbergMarquardt` with one
observation, run by `_solve_albedo_lm`: `albedo_rules`' `propose` and `update`, the
p = 1 case of `lm_rules` that numba's `invert` kernel runs, applied element-wise, without
the linearisation, the stacked JVPs and the p x p algebra (J^T J = (dr/dw)^2, the damped
step one division). With the pixel terms hoisted and a per-pixel table of r and dr/dw
(cubic Hermite interpolation of w(r)) every problem starts close to convergence, so the
`while_loop` is short and lanes waste little waiting for the slowest.
"""

from __future__ import annotations

import functools
from functools import partial
from typing import Any

import equinox as eqx
import jax
import jax.numpy as jnp
from jaxtyping import Float

from ..._model._backends import retarget_to_jax
from ..._model.family import ModelKey, jax_equations_for
from ..._model.jax_executables import stored_jit
from ..._model.jax_model import pixel_terms, reflectance_core
from ..._params import HapkeParams
from .. import lm_rules
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


class _AlbedoState(eqx.Module):
    w: Any  # (pixels, bands)
    residual: Any  # r(w) - r_obs
    slope: Any  # dr/dw at w
    damping: Any
    growth: Any
    converged: Any
    iterations: Any
    steps: Any  # scalar: loop steps taken


def _solve_albedo_lm(rules, evaluate, w, active, tol, lower, upper, max_iter):
    """Levenberg-Marquardt in w for every problem of a chunk at once.

    `rules` is `albedo_rules` over jax.numpy: its `propose` and `update`, the p = 1 case of
    `lm_rules` that numba's kernel runs too, are applied element-wise, so both solvers
    take the same steps. `evaluate(w)` returns (r - r_obs, dr/dw) element-wise; problems
    not `active` start converged. Returns the final `_AlbedoState`.
    """
    residual, slope = evaluate(w)
    state = _AlbedoState(
        w=w,
        residual=residual,
        slope=slope,
        damping=jnp.zeros_like(w),
        growth=jnp.full_like(w, 2.0),
        converged=~active | (residual == 0.0),
        iterations=jnp.zeros(w.shape, jnp.int32),
        steps=jnp.zeros((), jnp.int32),
    )

    def unfinished(state):
        return ~jnp.all(state.converged) & (state.steps < max_iter)

    def step(state):
        trial = rules.propose(state.w, state.residual, state.slope, state.damping, lower, upper)
        residual_trial, slope_trial = evaluate(trial)
        w, residual, slope, damping, growth, converged = rules.update(
            state.w,
            state.residual,
            state.slope,
            state.damping,
            state.growth,
            trial,
            residual_trial,
            slope_trial,
            tol,
        )
        done = state.converged
        return _AlbedoState(
            w=jnp.where(done, state.w, w),
            residual=jnp.where(done, state.residual, residual),
            slope=jnp.where(done, state.slope, slope),
            damping=jnp.where(done, state.damping, damping),
            growth=jnp.where(done, state.growth, growth),
            converged=done | converged,
            iterations=state.iterations + jnp.where(done, 0, 1).astype(jnp.int32),
            steps=state.steps + 1,
        )

    return jax.lax.while_loop(unfinished, step, state)


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
        dict of (pixels, bands) arrays: w, status (int8), iterations (int32), residual
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
    core = jax.vmap(jax.vmap(partial(reflectance_core, key=key), in_axes=(0, None)), in_axes=(0, 0))
    lower, upper = (jnp.asarray(b, refl.dtype) for b in (w_lower, w_upper))
    one = lower / lower  # 1 (w_lower > 0 in refl's precision), but not a constant XLA could fold

    def evaluate(w):
        r, slope = jax.jvp(lambda w: core(w, terms), (w,), (jnp.ones_like(w),))
        # Dividing by a run-time 1 changes no bit, but makes r - r_obs and dr/dw the
        # results of a division, an operation XLA does not duplicate: they are computed
        # once per step and stored. Otherwise XLA:CPU fuses the model's last (cheap)
        # operations into every consumer, recomputing them for each of the step's seven
        # outputs (`lax.optimization_barrier` does not survive XLA:CPU's passes).
        return (r - refl) / one, slope / one

    state = _solve_albedo_lm(rules, evaluate, w_start, active, tol, lower, upper, max_iter)
    nan = jnp.nan
    return {
        "w": jnp.where(active, state.w, nan),
        "status": jnp.where(
            active,
            jnp.where(state.converged, albedo_rules.CONVERGED, albedo_rules.MAX_ITER),
            status,
        ).astype(jnp.int8),
        "iterations": jnp.where(active, state.iterations, 0),
        "residual": jnp.where(active, state.residual, nan),
        "slope": jnp.where(
            active, jnp.sqrt(state.slope * state.slope), nan
        ),  # dr/dw > 0, as sqrt(J^T J)
    }
