"""The JAX solver: element-wise Levenberg-Marquardt as an optimistix least-squares solver.

Why this formulation (the design alternatives and their measured rates are in
`benchmarks/README.md` and the guide): `jax.vmap` over one `optx.least_squares` per
problem runs every lane until the slowest converges with dense linear algebra per lane;
the whole chunk as one least-squares problem has one damping for millions of
independent problems (some diverge). So `ElementwiseLevenbergMarquardt` is an optimistix
solver whose `y` is a whole chunk of independent problems, each with p free parameters
(batch + (p,)) and its own observations, with per-problem damping, acceptance and
convergence. The Jacobian's p columns give J^T J and J^T f of every problem: for `fit`,
from the model's derivative program (`columns_program`: one JVP per free parameter,
through the model's analytic `custom_jvp` rule for w and autodiff for the others, the
same program numba's `fit` compiles), evaluated in parts (`jaxpr_split`) so that what
depends on the geometry and the fixed parameters alone is computed once per chunk and
the work the columns share once per step; for any other residual function, from one
linearisation and p JVPs. The p x p damped systems are solved by an unrolled Cholesky
over lanes of problems. The step, acceptance, damping and convergence
rules are `lm_rules`, the same scalar code the numba solvers run, applied element-wise;
converged problems are frozen, and the solve ends when all are. `invert` is the case
p = 1 with one observation, specialised in `albedo.jax_solver`. Multi-parameter fits
converge less uniformly (median ~6 steps, a few need `max_iter`):
`solve_fit_jax` runs rounds of a few steps and compacts the problems still unconverged
into smaller batches between them (`compaction`). Sums over observations and parameters
are written as additions in index order (`sum_last`), not XLA reductions, whose rounding
depends on the batch's shape: a problem's steps are the same in any chunk or batch.
Chunks have one fixed shape (the last is padded), so each (chunk shape, dtype, model
configuration) compiles once, and each compacted size once more. Measured rates:
README.md, `benchmarks/results/`.
"""

from __future__ import annotations

from functools import partial
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Float

from ..._model._backends import retarget_to_jax
from ..._model.columns_program import split_columns
from ..._model.family import jax_equations_for
from ..._model.jax_executables import stored_jit
from ..._params import PARAMETER_NAMES
from ..._status import Status
from .. import lm_rules
from ..albedo import rules as albedo_rules
from ..ordered_sums import dot_last, sum_last
from .compaction import run_compacted
from .residual_columns import residuals_and_columns

__all__ = ["ElementwiseLevenbergMarquardt", "solve_fit_jax"]

_lm = retarget_to_jax(lm_rules)
TOO_FEW_OBSERVATIONS = int(Status.TOO_FEW_OBSERVATIONS)


def _linear_decrease(step, jtj, jtf):
    """Decrease of the linearised cost along `step`: -(2 step.J^T f + step.J^T J step)."""
    return -(2.0 * sum_last(step * jtf) + sum_last(step * sum_last(jtj * step[..., None, :])))


class _LMState(NamedTuple):
    # a named tuple, not an equinox module: its tree survives pickling, so the programs
    # that return it can be stored compiled (`jax_executables`)
    residual: Any  # batch + (observations,)
    jtj: Any  # batch + (p, p)
    jtf: Any  # batch + (p,)
    damping: Any  # batch: lambda
    growth: Any  # batch: nu, lambda's growth factor on rejection
    converged: Any
    iterations: Any


def _normal_equations(fn, y, args, jacobian):
    """Residuals f, J^T J and J^T f of every problem.

    The Jacobian's columns come from `jacobian` (y, args) -> (f, columns) where given,
    else from one linearisation of `fn` and p JVPs. A column is batch + (observations,)
    (one chunk's, never the whole image's).
    """
    n_free = y.shape[-1]
    if jacobian is None:
        residual, linear = jax.linearize(lambda y: fn(y, args)[0], y)
        columns = [linear(jnp.zeros_like(y).at[..., j].set(1.0)) for j in range(n_free)]
    else:
        residual, columns = jacobian(y, args)
    entries: list[list[Any]] = [[None] * n_free for _ in range(n_free)]
    for a in range(n_free):
        for b in range(a, n_free):
            entries[a][b] = entries[b][a] = dot_last(columns[a], columns[b])
    jtj = jnp.stack([jnp.stack(row, axis=-1) for row in entries], axis=-2)
    jtf = jnp.stack([dot_last(column, residual) for column in columns], axis=-1)
    return residual, jtj, jtf


def _solve_damped(jtj, jtf, damping, held):
    """The damped step (`lm_rules.damped_diagonal`) of every problem; returns (x, solvable).

    Parameters marked in `held` (batch + (p,), `lm_rules.pinned`) leave the system: their
    step is 0 and the others' is the best with them fixed.

    p is small and static: an unrolled Cholesky over whole lanes of problems (one
    division for p = 1), far faster on CPU than batched LAPACK calls on tiny matrices.
    """
    n_free = jtf.shape[-1]
    largest = jnp.max(jnp.diagonal(jtj, axis1=-2, axis2=-1), axis=-1)
    system = [
        [jnp.where(held[..., a] | held[..., b], 0.0, jtj[..., a, b]) for b in range(n_free)]
        for a in range(n_free)
    ]
    for a in range(n_free):
        damped = _lm.damped_diagonal(jtj[..., a, a], largest, damping)
        system[a][a] = jnp.where(held[..., a], 1.0, damped)
    jtf = jnp.where(held, 0.0, jtf)
    factor: list[list[Any]] = [[None] * n_free for _ in range(n_free)]
    solvable = jnp.ones(jtf.shape[:-1], bool)
    for j in range(n_free):
        pivot = system[j][j] - sum((factor[j][k] * factor[j][k] for k in range(j)), 0.0)
        solvable = solvable & (pivot > 0.0)
        factor[j][j] = jnp.sqrt(jnp.where(pivot > 0.0, pivot, 1.0))
        for i in range(j + 1, n_free):
            value = system[i][j] - sum((factor[i][k] * factor[j][k] for k in range(j)), 0.0)
            factor[i][j] = value / factor[j][j]
    forward: list[Any] = []
    for i in range(n_free):
        value = -jtf[..., i] - sum((factor[i][k] * forward[k] for k in range(i)), 0.0)
        forward.append(value / factor[i][i])
    solution: list[Any] = [None] * n_free
    for i in reversed(range(n_free)):
        value = forward[i] - sum((factor[k][i] * solution[k] for k in range(i + 1, n_free)), 0.0)
        solution[i] = value / factor[i][i]
    step = jnp.stack(solution, axis=-1)
    return jnp.where(solvable[..., None], step, 0.0), solvable


class ElementwiseLevenbergMarquardt(optx.AbstractLeastSquaresSolver):
    """Levenberg-Marquardt for many independent small problems at once.

    `y` has shape ``batch + (p,)``: the p free parameters of every problem; the residual
    function maps it to ``batch + (observations,)``, where the residuals of a problem
    depend on that problem's parameters only. Every problem keeps its own damping,
    acceptance and convergence (`lm_rules`); the solve terminates when all problems have
    converged. Problems marked in `options["frozen"]` (a boolean array of shape `batch`)
    are never stepped; `options["state"]`, a final state of an earlier solve at `y`, continues
    that solve (its problems' steps are the same as in one longer solve). The final state
    holds each problem's residuals and J^T J.

    Attributes:
        tol: convergence tolerance on the step of every parameter.
        lower: lower bounds each parameter is projected onto, shape (p,) or a scalar.
        upper: upper bounds, the same way.
        jacobian: None (the Jacobian by `jax.linearize` of the residual function), or a
            function (y, args) -> (residuals, columns) that gives the residuals and the
            p columns of the Jacobian (each batch + (observations,)) together, such as
            `fit`'s, which evaluates the model's derivative program part by part.
    """

    tol: float
    lower: Any
    upper: Any
    jacobian: Any = eqx.field(static=True, default=None)
    # optimistix's abstract attributes, unused: convergence is per problem, on the step
    # (`tol`). Keyword-only: type checkers order a redeclared base field at the base's place.
    rtol: float = eqx.field(default=0.0, kw_only=True)
    atol: float = eqx.field(default=0.0, kw_only=True)
    norm: Any = eqx.field(default=optx.max_norm, kw_only=True)

    def init(self, fn, y, args, options, f_struct, aux_struct, tags):
        resume = (options or {}).get("state")
        if resume is not None:  # a solve continued (`compaction`): its state at `y`
            return resume
        residual, jtj, jtf = _normal_equations(fn, y, args, self.jacobian)
        batch = y.shape[:-1]
        frozen = (options or {}).get("frozen", jnp.zeros(batch, bool))
        return _LMState(
            residual=residual,
            jtj=jtj,
            jtf=jtf,
            damping=jnp.zeros(batch, y.dtype),
            growth=jnp.full(batch, 2.0, y.dtype),
            converged=frozen | jnp.all(residual == 0.0, axis=-1),
            iterations=jnp.zeros(batch, jnp.int32),
        )

    def step(self, fn, y, args, options, state, tags):
        lower, upper = (
            jnp.broadcast_to(jnp.asarray(b, y.dtype), y.shape) for b in (self.lower, self.upper)
        )
        step, solvable = _solve_damped(
            state.jtj, state.jtf, state.damping, _lm.pinned(y, lower, upper, state.jtf)
        )
        trial = jnp.clip(y + step, lower, upper)
        residual_trial, jtj_trial, jtf_trial = _normal_equations(fn, trial, args, self.jacobian)
        held_at_trial = _lm.pinned(trial, lower, upper, jtf_trial)
        newton, newton_solvable = _solve_damped(
            jtj_trial, jtf_trial, jnp.zeros_like(state.damping), held_at_trial
        )
        newton_size = jnp.where(newton_solvable, jnp.max(jnp.abs(newton), axis=-1), jnp.inf)
        newton_decrease = jnp.where(
            newton_solvable, _linear_decrease(newton, jtj_trial, jtf_trial), jnp.inf
        )
        projected = trial - y
        step_size = jnp.max(jnp.abs(projected), axis=-1)
        predicted = _linear_decrease(projected, state.jtj, state.jtf)
        cost = sum_last(state.residual * state.residual)
        cost_trial = sum_last(residual_trial * residual_trial)
        accept = _lm.accepted(cost, cost_trial) & solvable
        converged = _lm.converged(
            step_size, predicted, cost, newton_size, accept, state.damping, self.tol
        )
        converged = converged & solvable
        damping, growth = _lm.next_damping(
            accept,
            _lm.gain_ratio(cost, cost_trial, predicted),
            state.damping,
            state.growth,
            newton_decrease,
            cost_trial,
        )
        keep = state.converged | ~accept  # problems whose point does not move
        new_state = _LMState(
            residual=jnp.where(keep[..., None], state.residual, residual_trial),
            jtj=jnp.where(keep[..., None, None], state.jtj, jtj_trial),
            jtf=jnp.where(keep[..., None], state.jtf, jtf_trial),
            damping=jnp.where(state.converged, state.damping, damping),
            growth=jnp.where(state.converged, state.growth, growth),
            converged=state.converged | converged,
            iterations=state.iterations + jnp.where(state.converged, 0, 1).astype(jnp.int32),
        )
        return jnp.where(keep[..., None], y, trial), new_state, None

    def terminate(self, fn, y, args, options, state, tags):
        return jnp.all(state.converged), optx.RESULTS.successful

    def postprocess(self, fn, y, aux, args, options, state, tags, result):
        return y, aux, {}


def _fit_residuals(y, args, free_index, key):
    """`residuals_and_columns`' residuals alone: the residual function of the
    least-squares problem (its Jacobian comes from `residuals_and_columns`).
    `ElementwiseLevenbergMarquardt` with a `jacobian` never evaluates it: optimistix
    traces it (for the residuals' shape, and to close it over its constants) in every
    program that calls `optx.least_squares`, so it evaluates only the lane equations the
    residuals need, the cheaper to trace."""
    return residuals_and_columns(y, args, free_index, key, with_columns=False)[0]


def _fit_solver(tol, lower, upper, free_index, key):
    return ElementwiseLevenbergMarquardt(
        tol=tol,
        lower=lower,
        upper=upper,
        jacobian=partial(residuals_and_columns, free_index=free_index, key=key),
    )


@stored_jit(static_argnames=("free_index", "key"))
def _fit_setup(
    refl,
    to_sun,
    to_sensor,
    normal,
    fixed,
    start,
    unit,
    free_index,
    lower,
    upper,
    min_observations,
    key,
):
    """A chunk's (pixels, bands) problems as (pixels x bands, 1) problems, every one with
    its pixel's observations, so that compacted batches are computed as the first one is:
    returns status, active, start, the solver's initial state and the inputs (rows,
    refl, use) of `residuals_and_columns`. The rows (the known part of the model's
    derivative program: what depends on the geometry and the fixed parameters alone) are
    computed once per pixel and observation, then repeated per band."""
    n_bands = refl.shape[1]
    program = split_columns(tuple(PARAMETER_NAMES[k] for k in free_index), key, refl.dtype)
    equations = jax_equations_for(key)
    geometry = jax.vmap(jax.vmap(equations.geometry_terms))(
        to_sun, to_sensor, normal
    )  # (pixels, observations)
    known = [fixed[k] for k in range(fixed.shape[0]) if k not in free_index]
    rows = jax.vmap(jax.vmap(lambda g: program.known(*known, *g)))(geometry)
    per_problem = partial(jax.tree_util.tree_map, lambda a: jnp.repeat(a, n_bands, axis=0)[:, None])
    rows, valid = per_problem((rows, geometry.valid))  # (pixels x bands, 1, observations)
    refl, start = (_flat(a)[:, None] for a in (refl, start))
    use = jnp.isfinite(refl)
    inputs = (rows, jnp.where(use, refl, 0.0), use)
    invalid = jnp.any(use & ~valid, axis=-1)
    status = jnp.where(
        invalid,
        albedo_rules.INVALID_GEOMETRY,
        jnp.where(
            jnp.sum(use, axis=-1) < min_observations, TOO_FEW_OBSERVATIONS, albedo_rules.SOLVING
        ),
    )
    active = status == albedo_rules.SOLVING
    inside = jnp.broadcast_to((lower + jnp.minimum(upper, lower + 1.0)) / 2.0, start.shape)
    start = jnp.where(active[..., None], start, inside)
    solver = _fit_solver(0.0, lower, upper, free_index, key)  # init uses neither tol nor bounds
    residuals = partial(_fit_residuals, free_index=free_index, key=key)
    state = solver.init(
        lambda y, args: (residuals(y, args), None),  # (f, aux), as optimistix calls it
        start,
        (*inputs, unit),
        {"frozen": ~active},
        None,
        None,
        None,
    )
    return status, active, start, state, inputs


@stored_jit(static_argnames=("steps", "free_index", "key"))
def _lm_round(y, inputs, state, unit, steps, tol, lower, upper, free_index, key):
    """Up to `steps` steps of `ElementwiseLevenbergMarquardt` through `optx.least_squares`,
    continuing from `state` at `y`, on the problems of `inputs` (`_fit_setup`'s). Returns
    (y, state, ok, steps taken): ok False if the solve met a non-finite iterate."""
    solution: optx.Solution[Any, Any] = optx.least_squares(
        partial(_fit_residuals, free_index=free_index, key=key),
        _fit_solver(tol, lower, upper, free_index, key),
        y,
        args=(*inputs, unit),
        options={"state": state},
        max_steps=steps,
        throw=False,
    )
    ok = solution.result != optx.RESULTS.nonfinite
    return solution.value, solution.state, ok, solution.stats["num_steps"]


def _flat(a):
    """(n, m, ...) -> (n m, ...): problems of (pixels, bands) or (problems, 1) flattened."""
    return a.reshape((-1,) + a.shape[2:])


@stored_jit
def _gather(batch, slots, padding):
    """The problems `slots` of batch = (y, state, inputs), all of shape (problems, 1, ...)
    or (problems, ...), as a new batch, state and inputs with them; the `padding` slots
    frozen (converged)."""
    y, state, inputs = batch
    state = jax.tree_util.tree_map(lambda a: a[slots], state)
    state = state._replace(converged=state.converged | padding[:, None])
    return y[slots], state, jax.tree_util.tree_map(lambda a: a[slots], inputs)


@stored_jit
def _scatter(results, batch, origin):
    """results (flat (problems, ...) arrays: y, residual, jtj, converged, iterations) with
    problem `origin[slot]` set from each slot of batch (origin out of range: none)."""
    return jax.tree_util.tree_map(
        lambda r, p: r.at[origin].set(p, mode="drop"), results, _results_of(batch)
    )


def _results_of(batch):
    """The final state of a batch's problems, flat, as `_scatter` keeps it."""
    y, state, _ = batch
    return tuple(
        _flat(a) for a in (y, state.residual, state.jtj, state.converged, state.iterations)
    )


_all_results = stored_jit(_results_of)  # the first batch's results, which hold every problem


@stored_jit(static_argnames=("shape",))
def _fit_outputs(status, active, results, shape):
    """The dict `solve_fit_jax` returns, from the flat final results; `shape` is the
    chunk's (pixels, bands)."""
    status, active = status.reshape(shape), active.reshape(shape)
    value, residual, jtj, converged, iterations = (
        a.reshape(status.shape + a.shape[1:]) for a in results
    )
    solved = jnp.where(converged, albedo_rules.CONVERGED, albedo_rules.MAX_ITER)
    nan = jnp.nan
    return {
        "values": jnp.where(active[..., None], value, nan),
        "status": jnp.where(active, solved, status).astype(jnp.int8),
        "iterations": jnp.where(active, iterations, 0),
        "cost": jnp.where(active, sum_last(residual * residual), nan),
        "jtj": jnp.where(active[..., None, None], jtj, nan),
    }


def solve_fit_jax(
    refl: Float[jax.Array, "pixels bands observations"],
    to_sun: Float[jax.Array, "pixels observations 3"],
    to_sensor: Float[jax.Array, "pixels observations 3"],
    normal: Float[jax.Array, "pixels observations 3"],
    fixed,
    start: Float[jax.Array, "pixels bands p"],
    free_index,
    bounds,
    min_observations,
    max_iter,
    tol,
    key,
    *,
    compact=True,
    sizes=None,
):
    """Solve every (pixel, band) problem of one chunk of `fit`.

    `ElementwiseLevenbergMarquardt` steps the chunk in rounds of a few steps
    (`optx.least_squares` continuing from the last round's state); between rounds the
    unconverged problems are compacted into a smaller batch of one of a few sizes
    (`compaction.run_compacted`), so the chunk does not keep stepping converged problems
    while it waits for its slowest. The chunk is solved as (pixels x bands, 1) problems
    (`_fit_setup`), the same layout as the compacted batches, each with its pixel's
    rows: what depends on the geometry and the fixed parameters alone, computed once per
    pixel and observation and stored. The rest of the solver's arithmetic is element-wise
    (`sum_last`): so every problem takes the same steps, to the bit, in any batch and
    any chunk. Memory: the solver's state and the rows (a few tens of values per
    problem and observation), bounded by the chunk.

    Args:
        refl: observed r [1/sr], (pixels, bands, observations); a non-finite value leaves
            its observation out of the problem (a zero residual row).
        to_sun, to_sensor, normal: (pixels, observations, 3) direction vectors, finite.
        fixed: values of `PARAMETER_NAMES` (w, b, c, roughness, hs, bs0, hc, bc0,
            porosity_k, asymmetry; free ones overwritten); the phase function is the
            closed form of `key` (no Legendre coefficients).
        start: (pixels, bands, p) starting values; free_index: static tuple of indices
            into `fixed`; bounds: (lower, upper), (p,) each; min_observations: valid
            observations a problem needs (else TOO_FEW_OBSERVATIONS; a problem using an
            observation whose geometry is not valid is INVALID_GEOMETRY); max_iter,
            tol; key: the model configuration (static).
        compact: False steps the whole chunk until its slowest problem is done (the
            same results, slower; for tests).
        sizes: if a list, the batch size (problems) of every round is appended to it.
    Returns:
        dict of jax arrays: values (pixels, bands, p), status int8, iterations int32,
        cost (sum of squared residuals), jtj (pixels, bands, p, p) at the solution.
    """
    shape = refl.shape[:2]
    unit = np.ones((), refl.dtype)  # an argument, so a value XLA cannot fold
    lower, upper = bounds
    status, active, start, state, inputs = _fit_setup(
        refl,
        to_sun,
        to_sensor,
        normal,
        fixed,
        start,
        unit,
        free_index,
        lower,
        upper,
        min_observations,
        key,
    )
    settings = (tol, lower, upper)

    def run_round(batch, steps):
        y, state, inputs = batch
        y, state, ok, taken = _lm_round(
            y, inputs, state, unit, steps, *settings, free_index=free_index, key=key
        )
        return (y, state, inputs), ok, taken

    def scatter(results, batch, origin):
        if results is None:
            return _all_results(batch)
        return _scatter(results, batch, origin)

    results = run_compacted(
        (start, state, inputs),
        converged_of=lambda batch: batch[1].converged,
        run_round=run_round,
        gather=_gather,
        scatter=scatter,
        n_problems=status.size,
        max_steps=max_iter,
        compact=compact,
        sizes=sizes,
    )
    return _fit_outputs(status, active, results, shape=shape)
