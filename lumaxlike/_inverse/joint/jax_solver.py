"""The JAX solver of joint problems: `numba_solver`'s iteration for a whole chunk at once,
by the shared `ElementwiseLevenbergMarquardt` (`elementwise_lm`, run by
`optx.least_squares`).

Every problem (a pixel: per-band parameters for each band, shared ones for all, as one
flat vector y, `_split`) keeps its own damping, acceptance and convergence (`lm_rules`,
element-wise); converged problems are frozen and the solve ends when all are, or after
`max_iter` steps (a traced bound, `options["max_iterations"]`: every stage of
`chunk`'s solve runs one program). The operation's hooks: its normal equations in arrow
blocks (`_normal_equations`), the damped step by the Schur complement
(`_arrow_subproblem`, `schur.arrow_step_jax`), the cost with its prior rows
(`_joint_cost`) and the linearised decrease in arrow blocks (`_arrow_decrease`). The
model's derivative program (`columns_program.split_columns`, the one numba's solvers
compile) is evaluated in parts as in `fit.jax_solver`: its known part once per pixel and
observation, its step part per pixel and band, its lane part per pixel, band and
observation. The arrow blocks are sums in index order (`ordered_sums.sum_last`), so a
problem's steps do not depend on the batch.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import optimistix as optx

from ..._model.columns_program import split_columns
from ..._model.family import jax_equations_for
from ..._params import PARAMETER_NAMES
from ..._status import Status
from ..albedo import rules as albedo_rules
from ..elementwise_lm import ElementwiseLevenbergMarquardt, Subproblem
from ..ordered_sums import dot_last, sum_last
from .schur import arrow_step_jax

__all__ = ["solve_joint_jax"]

_TOO_FEW = int(Status.TOO_FEW_OBSERVATIONS)


def _normal_equations(y, args, shape, free, key):
    """(residuals, (a_blocks, c_blocks, d_block), (gb, gs)) of every problem at y (n, bands
    x p + s) (`_split`; shape = (bands, p); free: the free names, the per-band ones
    first; key: the model configuration): the residuals as (data rows (n, bands,
    observations), prior rows (n, bands, p) and (n, s)), `_joint_cost`'s; the arrow blocks
    of J^T J and J^T f. args = (inputs, unit) (`solve_joint_jax`)."""
    (rows, refl, use, weight, mean_b, weight_b, mean_s, weight_s), unit = args
    xb, xs = _split(y, shape)
    p = xb.shape[2]
    program = split_columns(free, key, xb.dtype)
    per_band = {name: xb[..., a] for a, name in enumerate(free[:p])}
    per_band.update(
        {name: jnp.broadcast_to(xs[:, None, q], xb.shape[:2]) for q, name in enumerate(free[p:])}
    )
    ordered = [per_band[name] for name in sorted(free, key=PARAMETER_NAMES.index)]
    step = [
        v / unit if jnp.issubdtype(v.dtype, jnp.floating) else v for v in program.step(*ordered)
    ]
    # rows (n, observations), one per observation of every band; step values (n, bands)
    r, *columns = program.lane(
        [row[:, None, :] for row in rows], [v[..., None] for v in step]
    )  # each (n, bands, observations)
    scale = weight[..., None]
    residual = jnp.where(use, (r - refl) * scale, 0.0) / unit
    columns = [jnp.where(use, column * scale, 0.0) / unit for column in columns]
    prior_b = jnp.where(weight_b > 0.0, (xb - mean_b) * weight_b, 0.0)
    prior_s = jnp.where(weight_s > 0.0, (xs - mean_s) * weight_s, 0.0)
    jtj, jtf = _arrow_blocks(columns[:p], columns[p:], residual, (weight_b, weight_s))
    gb, gs = jtf
    return (residual, prior_b, prior_s), jtj, (gb + weight_b * prior_b, gs + weight_s * prior_s)


def _arrow_blocks(band_cols, shared_cols, residual, prior_weights):
    """The arrow blocks ((a_blocks, c_blocks, d_block), (gb, gs)): J^T J with the prior
    precisions on its diagonals, J^T f of the data rows alone (`_normal_equations` adds
    the prior rows'), from the Jacobian's per-band columns (p of (n, bands,
    observations)), shared ones (s) and the residuals; prior_weights = (weight_b (n,
    bands, p), weight_s (n, s))."""
    weight_b, weight_s = prior_weights
    p, s = len(band_cols), len(shared_cols)
    a_entries: list[list[Any]] = [[None] * p for _ in range(p)]
    for a in range(p):
        for b in range(a, p):
            a_entries[a][b] = a_entries[b][a] = dot_last(band_cols[a], band_cols[b])
        a_entries[a][a] = a_entries[a][a] + weight_b[..., a] * weight_b[..., a]
    a_blocks = jnp.stack([jnp.stack(row, axis=-1) for row in a_entries], axis=-2)
    gb = jnp.stack([dot_last(c, residual) for c in band_cols], axis=-1)
    if not s:
        n, n_bands = residual.shape[:2]
        empty = jnp.zeros((n, n_bands, p, 0), residual.dtype)
        return (a_blocks, empty, empty[:, 0, :0]), (gb, empty[:, 0, 0, :])
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
            d_entries[q][t] = d_entries[t][q] = sum_last(dot_last(shared_cols[q], shared_cols[t]))
        d_entries[q][q] = d_entries[q][q] + weight_s[..., q] * weight_s[..., q]
    d_block = jnp.stack([jnp.stack(row, axis=-1) for row in d_entries], axis=-2)
    gs = jnp.stack([sum_last(dot_last(c, residual)) for c in shared_cols], axis=-1)
    return (a_blocks, c_blocks, d_block), (gb, gs)


def _joint_cost(residual):
    """The cost of every problem from `_normal_equations`' residuals (data rows, per-band
    prior rows, shared prior rows): their sum of squares, in index order."""
    data, prior_b, prior_s = residual
    cost = sum_last(dot_last(data, data)) + sum_last(sum_last(prior_b * prior_b))
    if prior_s.shape[-1]:
        cost = cost + sum_last(prior_s * prior_s)
    return cost


def _split(y, shape):
    """(xb (n, bands, p), xs (n, s)) of the flat parameters y (n, bands x p + s), the
    per-band ones first, band by band; shape = (bands, p)."""
    size = shape[0] * shape[1]
    return y[:, :size].reshape(y.shape[:1] + tuple(shape)), y[:, size:]


def _join(xb, xs):
    """`_split`'s inverse: (n, bands x p + s)."""
    return jnp.concatenate([xb.reshape(xb.shape[0], -1), xs], axis=-1)


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


def _arrow_decrease(step, jtj, jtf):
    """`ElementwiseLevenbergMarquardt`'s `linear_decrease` hook: `_linear_decrease` along
    the flat step (n, bands x p + s), J^T J and J^T f in arrow blocks."""
    gb = jtf[0]
    return _linear_decrease(*_split(step, gb.shape[1:]), *jtj, *jtf)


def _arrow_subproblem(y, args, jtj, jtf, damping, *, lower, upper, carried, **_):
    """`ElementwiseLevenbergMarquardt`'s `subproblem` hook: the damped step by the Schur
    complement (`schur.arrow_step_jax`, with the parameters at a bound held there), the
    point y + step clipped to the bounds (lower, upper: y's shape). Of args = (inputs,
    unit) it reads unit; `carried` is passed through; the other flags are not read."""
    shape = jtf[0].shape[1:]
    x, bounds = _split(y, shape), (_split(lower, shape), _split(upper, shape))
    step_b, step_s, solvable = arrow_step_jax(x, *bounds, jtj, jtf, damping)
    step = _join(step_b, step_s)
    # divided by the run-time 1: the same bits, but a value XLA computes once and stores,
    # where it would compute the clip again in each of ~100 fusions that read it (10 %
    # of the solve's time on 64 pixels on a CPU)
    point = jnp.clip(y + step, lower, upper) / args[1]
    return Subproblem(point, step, solvable, carried)


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
    # a run-time 1 (w's lower bound is > 0), not a constant XLA could fold: dividing by it
    # changes no bit but keeps shared values computed once and stored (`fit.jax_solver`)
    unit = lower[0] / lower[0]
    args = ((rows, jnp.where(use, refl, 0.0), use, weight, *priors), unit)
    solver = _joint_solver(bounds, tol, start_b.shape[1:], free, key)
    solution: optx.Solution[Any, Any] = optx.least_squares(
        lambda y, args: solver.normal_equations(y, args)[0],
        solver,
        _join(xb, xs),
        args=args,
        options={"frozen": ~active, "max_iterations": max_iter},
        max_steps=None,  # max_iter, traced: one program for every stage (`chunk`)
        throw=False,
    )
    return _joint_results(solution.value, solution.state, active, status)


def _joint_solver(bounds, tol, shape, free, key):
    """`ElementwiseLevenbergMarquardt` for `solve_joint_jax`'s problems: y flat (`_split`,
    shape = (bands, p)), its bounds the per-band ones (lower, upper (p + s,)) repeated
    for every band; the normal equations in arrow blocks (`_normal_equations`), the step
    by the Schur complement (`_arrow_subproblem`)."""
    n_bands, p = shape
    flat = [jnp.concatenate([jnp.tile(a[:p], n_bands), a[p:]]) for a in bounds]
    return ElementwiseLevenbergMarquardt(
        tol=tol,
        lower=flat[0],
        upper=flat[1],
        normal_equations=partial(_normal_equations, shape=shape, free=free, key=key),
        subproblem=_arrow_subproblem,
        keep_residuals=False,  # the cost alone
        cost_function=_joint_cost,
        linear_decrease=_arrow_decrease,
    )


def _problem_setup(refl, geometry, fixed, min_observations, free, key):
    """`solve_joint_jax`'s problems: (status (INVALID_GEOMETRY, TOO_FEW_OBSERVATIONS or
    SOLVING), active, the observation rows, the used observations)."""
    free_index = tuple(PARAMETER_NAMES.index(name) for name in free)
    program = split_columns(free, key, refl.dtype)
    equations = jax_equations_for(key)
    geometry = jax.vmap(jax.vmap(equations.geometry_terms))(*geometry)
    known = [fixed[k] for k in range(fixed.shape[0]) if k not in free_index]
    rows = program.known(*known, *geometry)
    use = jnp.isfinite(refl)
    invalid = jnp.any(use & ~geometry.valid[:, None, :], axis=(-2, -1))
    too_few = jnp.any(jnp.sum(use, axis=-1) < min_observations, axis=-1)
    status = jnp.where(
        invalid,
        albedo_rules.INVALID_GEOMETRY,
        jnp.where(too_few, _TOO_FEW, albedo_rules.SOLVING),
    )
    return status, status == albedo_rules.SOLVING, rows, use


def _joint_results(y, state, active, status):
    """`solve_joint_jax`'s dict from the solver's final parameters y (flat, `_split`) and
    state (NaN where not solved)."""
    jtj, jtf = state.jtj, state.jtf
    xb, xs = _split(y, jtf[0].shape[1:])
    nan = jnp.nan
    solved = jnp.where(state.converged, albedo_rules.CONVERGED, albedo_rules.MAX_ITER)

    def masked(a):
        return jnp.where(active.reshape(active.shape + (1,) * (a.ndim - 1)), a, nan)

    return {
        "values_b": masked(xb),
        "values_s": masked(xs),
        "status": jnp.where(active, solved, status).astype(jnp.int8),
        "iterations": jnp.where(active, state.iterations, 0),
        "cost": masked(state.cost),
        "a_blocks": masked(jtj[0]),
        "c_blocks": masked(jtj[1]),
        "d_block": masked(jtj[2]),
        "gb": masked(jtf[0]),
        "gs": masked(jtf[1]),
    }
