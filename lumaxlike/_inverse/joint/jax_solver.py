"""The JAX solver of joint problems: `numba_solver`'s iteration for a whole chunk at once.

Every problem (a pixel: per-band parameters for each band, shared ones for all) keeps its
own damping, acceptance and convergence (`lm_rules`, element-wise); converged problems
are frozen and the `while_loop` ends when all are, or after `max_iter` steps. The model's
derivative program (`columns_program.split_columns`, the one numba's solvers compile) is
evaluated in parts as in `fit.jax_solver`: its known part once per pixel and observation, its
step part per pixel and band, its lane part per pixel, band and observation. The arrow
blocks of the normal equations are sums in index order (`ordered_sums.sum_last`), so a
problem's steps do not depend on the batch; the damped step is `schur.arrow_step_jax`.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp

from ..._model._backends import retarget_to_jax
from ..._model.columns_program import split_columns
from ..._model.family import jax_equations_for
from ..._params import PARAMETER_NAMES
from ..._status import Status
from .. import lm_rules
from ..albedo import rules as albedo_rules
from ..ordered_sums import dot_last, sum_last
from .schur import arrow_step_jax

__all__ = ["solve_joint_jax"]

_lm = retarget_to_jax(lm_rules)
_TOO_FEW = int(Status.TOO_FEW_OBSERVATIONS)


def _normal_equations(xb, xs, inputs, free, key, unit):
    """(cost, a_blocks, c_blocks, d_block, gb, gs) of every problem at (xb, xs)."""
    rows, refl, use, weight, mean_b, weight_b, mean_s, weight_s = inputs
    n_bands, p = xb.shape[1], xb.shape[2]
    s = xs.shape[1]
    program = split_columns(free, key, xb.dtype)
    per_band = {name: xb[..., a] for a, name in enumerate(free[:p])}
    per_band.update(
        {name: jnp.broadcast_to(xs[:, None, q], xb.shape[:2]) for q, name in enumerate(free[p:])}
    )
    ordered = [per_band[name] for name in sorted(free, key=PARAMETER_NAMES.index)]
    step = [
        v / unit if jnp.issubdtype(v.dtype, jnp.floating) else v
        for v in jax.vmap(jax.vmap(program.step))(*ordered)
    ]
    lane = jax.vmap(program.lane, in_axes=(0, None))  # over observations
    lane = jax.vmap(lane, in_axes=(None, 0))  # over bands (one row per observation)
    lane = jax.vmap(lane, in_axes=(0, 0))  # over problems
    r, *columns = lane(rows, step)  # each (n, bands, observations)
    scale = weight[..., None]
    residual = jnp.where(use, (r - refl) * scale, 0.0) / unit
    columns = [jnp.where(use, column * scale, 0.0) / unit for column in columns]
    band_cols, shared_cols = columns[:p], columns[p:]
    cost = sum_last(dot_last(residual, residual))
    prior_b = jnp.where(weight_b > 0.0, (xb - mean_b) * weight_b, 0.0)
    prior_s = jnp.where(weight_s > 0.0, (xs - mean_s) * weight_s, 0.0)
    cost = cost + sum_last(sum_last(prior_b * prior_b))
    if s:
        cost = cost + sum_last(prior_s * prior_s)
    a_entries: list[list[Any]] = [[None] * p for _ in range(p)]
    for a in range(p):
        for b in range(a, p):
            a_entries[a][b] = a_entries[b][a] = dot_last(band_cols[a], band_cols[b])
        a_entries[a][a] = a_entries[a][a] + weight_b[..., a] * weight_b[..., a]
    a_blocks = jnp.stack([jnp.stack(row, axis=-1) for row in a_entries], axis=-2)
    gb = jnp.stack([dot_last(c, residual) for c in band_cols], axis=-1) + weight_b * prior_b
    shape = xb.shape[:1]
    if s:
        c_blocks = jnp.stack(
            [
                jnp.stack([dot_last(band_cols[a], shared_cols[q]) for q in range(s)], axis=-1)
                for a in range(p)
            ],
            axis=-2,
        )
        d_entries: list[list[Any]] = [[None] * s for _ in range(s)]
        for q in range(s):
            for t in range(q, s):
                d_entries[q][t] = d_entries[t][q] = sum_last(
                    dot_last(shared_cols[q], shared_cols[t])
                )
            d_entries[q][q] = d_entries[q][q] + weight_s[..., q] * weight_s[..., q]
        d_block = jnp.stack([jnp.stack(row, axis=-1) for row in d_entries], axis=-2)
        gs = (
            jnp.stack([sum_last(dot_last(c, residual)) for c in shared_cols], axis=-1)
            + weight_s * prior_s
        )
    else:
        c_blocks = jnp.zeros(xb.shape + (0,), xb.dtype)
        d_block = jnp.zeros(shape + (0, 0), xb.dtype)
        gs = jnp.zeros(shape + (0,), xb.dtype)
    del n_bands
    return cost, a_blocks, c_blocks, d_block, gb, gs


def _quadratic(step_b, step_s, a_blocks, c_blocks, d_block):
    """delta^T H delta of every problem, H in arrow blocks."""
    value = sum_last(sum_last(step_b * sum_last(a_blocks * step_b[..., None, :])))
    if step_s.shape[-1]:
        value = value + 2.0 * sum_last(
            sum_last(step_b * sum_last(c_blocks * step_s[:, None, None, :]))
        )
        value = value + sum_last(step_s * sum_last(d_block * step_s[:, None, :]))
    return value


def _linear_decrease(step_b, step_s, a_blocks, c_blocks, d_block, gb, gs):
    """Decrease of the linearised cost along (step_b, step_s): -(2 delta^T g + delta^T H delta)."""
    linear = sum_last(sum_last(step_b * gb))
    if step_s.shape[-1]:
        linear = linear + sum_last(step_s * gs)
    return -(2.0 * linear + _quadratic(step_b, step_s, a_blocks, c_blocks, d_block))


def _largest_step(step_b, step_s):
    size = jnp.max(jnp.abs(step_b), axis=(-2, -1))
    if step_s.shape[-1]:
        size = jnp.maximum(size, jnp.max(jnp.abs(step_s), axis=-1))
    return size


@partial(jax.jit, static_argnames=("free", "n_band_free", "key"))
def solve_joint_jax(
    refl,
    to_sun,
    to_sensor,
    normal,
    weight,
    start,
    priors,
    fixed,
    bounds,
    settings,
    *,
    free,
    n_band_free,
    key,
):
    """Solve one chunk of joint problems (jitted; the same contract as `solve_joint_numba`).

    refl (problems, bands, observations), NaN where left out; to_sun, to_sensor, normal
    (problems, observations, 3), finite; weight (problems, bands); start = (start_b
    (problems, bands, p), start_s (problems, s)); priors (mean_b, weight_b, mean_s,
    weight_s); fixed: the values of `PARAMETER_NAMES`; bounds = (lower, upper) (p + s,);
    settings = (min_observations, max_iter, tol); free: the free parameter names, the
    first `n_band_free` per band (static); key: the model configuration.
    """
    p = n_band_free
    lower, upper = bounds
    min_observations, max_iter, tol = settings
    start_b, start_s = start
    geometry = (to_sun, to_sensor, normal)
    status, active, rows, use = _problem_setup(refl, geometry, fixed, min_observations, free, key)
    inside = (lower + jnp.minimum(upper, lower + 1.0)) / 2.0
    xb = jnp.where(active[:, None, None], start_b, jnp.broadcast_to(inside[:p], start_b.shape))
    xs = jnp.where(active[:, None], start_s, jnp.broadcast_to(inside[p:], start_s.shape))
    inputs = (rows, jnp.where(use, refl, 0.0), use, weight, *priors)
    # a run-time 1 (w's lower bound is > 0), not a constant XLA could fold: dividing by it
    # changes no bit but keeps shared values computed once and stored (`fit.jax_solver`)
    unit = lower[0] / lower[0]
    evaluate = partial(_normal_equations, inputs=inputs, free=free, key=key, unit=unit)
    lower_b, upper_b = (jnp.broadcast_to(a[:p], start_b.shape) for a in (lower, upper))
    lower_s, upper_s = (jnp.broadcast_to(a[p:], start_s.shape) for a in (lower, upper))
    cost, a_blocks, c_blocks, d_block, gb, gs = evaluate(xb, xs)
    n = refl.shape[0]
    state = (
        xb,
        xs,
        cost,
        a_blocks,
        c_blocks,
        d_block,
        gb,
        gs,
        jnp.zeros(n, refl.dtype),
        jnp.full(n, 2.0, refl.dtype),
        ~active | (cost == 0.0),
        jnp.zeros(n, jnp.int32),
        jnp.zeros((), jnp.int32),
    )

    def unfinished(state):
        return ~jnp.all(state[10]) & (state[12] < max_iter)

    box = (lower_b, upper_b, lower_s, upper_s)
    step = partial(_joint_step, evaluate=evaluate, bounds=bounds, box=box, tol=tol)
    return _joint_results(jax.lax.while_loop(unfinished, step, state), active, status)


def _problem_setup(refl, geometry, fixed, min_observations, free, key):
    """`solve_joint_jax`'s problems: (status (INVALID_GEOMETRY, TOO_FEW_OBSERVATIONS or
    SOLVING), active, the observation rows, the used observations)."""
    free_index = tuple(PARAMETER_NAMES.index(name) for name in free)
    program = split_columns(free, key, refl.dtype)
    equations = jax_equations_for(key)
    geometry = jax.vmap(jax.vmap(equations.geometry_terms))(*geometry)
    known = [fixed[k] for k in range(fixed.shape[0]) if k not in free_index]
    rows = jax.vmap(jax.vmap(lambda g: program.known(*known, *g)))(geometry)
    use = jnp.isfinite(refl)
    invalid = jnp.any(use & ~geometry.valid[:, None, :], axis=(-2, -1))
    too_few = jnp.any(jnp.sum(use, axis=-1) < min_observations, axis=-1)
    status = jnp.where(
        invalid,
        albedo_rules.INVALID_GEOMETRY,
        jnp.where(too_few, _TOO_FEW, albedo_rules.SOLVING),
    )
    return status, status == albedo_rules.SOLVING, rows, use


def _joint_step(state, *, evaluate, bounds, box, tol):
    """One Levenberg-Marquardt step of every joint problem of `solve_joint_jax` (its
    while loop's body): `evaluate` the normal equations, bounds = (lower, upper), box =
    (lower_b, upper_b, lower_s, upper_s) broadcast to the parameters' shapes."""
    lower, upper = bounds
    lower_b, upper_b, lower_s, upper_s = box
    (
        xb,
        xs,
        cost,
        a_blocks,
        c_blocks,
        d_block,
        gb,
        gs,
        damping,
        growth,
        done,
        iterations,
        steps,
    ) = state
    step_b, step_s, solvable = arrow_step_jax(
        xb, xs, lower, upper, a_blocks, c_blocks, d_block, gb, gs, damping
    )
    trial_b = jnp.clip(xb + step_b, lower_b, upper_b)
    trial_s = jnp.clip(xs + step_s, lower_s, upper_s)
    trial = evaluate(trial_b, trial_s)
    _, trial_a, trial_c, trial_d, trial_gb, trial_gs = trial
    newton_b, newton_s, newton_ok = arrow_step_jax(
        trial_b,
        trial_s,
        lower,
        upper,
        trial_a,
        trial_c,
        trial_d,
        trial_gb,
        trial_gs,
        jnp.zeros_like(damping),
    )
    newton_size = jnp.where(newton_ok, _largest_step(newton_b, newton_s), jnp.inf)
    newton_decrease = jnp.where(
        newton_ok, _linear_decrease(newton_b, newton_s, *trial[1:]), jnp.inf
    )
    projected_b, projected_s = trial_b - xb, trial_s - xs
    step_size = _largest_step(projected_b, projected_s)
    predicted = _linear_decrease(projected_b, projected_s, a_blocks, c_blocks, d_block, gb, gs)
    accept = _lm.accepted(cost, trial[0]) & solvable
    now_converged = _lm.converged(step_size, predicted, cost, newton_size, accept, damping, tol)
    now_converged = now_converged & solvable
    new_damping, new_growth = _lm.next_damping(
        accept,
        _lm.gain_ratio(cost, trial[0], predicted),
        damping,
        growth,
        newton_decrease,
        trial[0],
    )
    keep = done | ~accept

    def pick(old, new):
        return jnp.where(keep.reshape(keep.shape + (1,) * (old.ndim - 1)), old, new)

    moved = [
        pick(o, t)
        for o, t in zip(
            (xb, xs) + (cost, a_blocks, c_blocks, d_block, gb, gs), (trial_b, trial_s) + trial
        )
    ]
    return (
        *moved,
        jnp.where(done, damping, new_damping),
        jnp.where(done, growth, new_growth),
        done | now_converged,
        iterations + jnp.where(done, 0, 1).astype(jnp.int32),
        steps + 1,
    )


def _joint_results(final, active, status):
    """`solve_joint_jax`'s dict from the while loop's final state (NaN where not solved)."""
    xb, xs, cost, a_blocks, c_blocks, d_block, gb, gs, _, _, done, iterations, _ = final
    nan = jnp.nan
    solved = jnp.where(done, albedo_rules.CONVERGED, albedo_rules.MAX_ITER)

    def masked(a):
        return jnp.where(active.reshape(active.shape + (1,) * (a.ndim - 1)), a, nan)

    return {
        "values_b": masked(xb),
        "values_s": masked(xs),
        "status": jnp.where(active, solved, status).astype(jnp.int8),
        "iterations": jnp.where(active, iterations, 0),
        "cost": masked(cost),
        "a_blocks": masked(a_blocks),
        "c_blocks": masked(c_blocks),
        "d_block": masked(d_block),
        "gb": masked(gb),
        "gs": masked(gs),
    }
