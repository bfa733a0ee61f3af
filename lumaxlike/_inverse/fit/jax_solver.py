"""The JAX solver of `fit`: the shared `ElementwiseLevenbergMarquardt` (`elementwise_lm`)
on a chunk's (pixel, band) problems.

The Jacobian's p columns come from the model's derivative program (`columns_program`:
one JVP per free parameter, through the model's analytic `custom_jvp` rule for w and
autodiff for the others, the same program numba's `fit` compiles), evaluated in parts
(`jaxpr_split`) so that what depends on the geometry and the fixed parameters alone is
computed once per chunk and the work the columns share once per step. Multi-parameter
fits converge less uniformly (median ~6 steps, a few need `max_iter`): on a CPU
`solve_fit_jax` runs rounds of a few steps over a batch of fixed slots, refilled on the
device between rounds with the chunk's waiting problems as others finish; on an
accelerator it steps the whole chunk in rounds until only a tail is left (`refill`;
compacting the unconverged problems into smaller batches, `compaction.run_compacted`,
is kept as an alternative). Chunks have one fixed shape (the last is padded), so each
(chunk shape, dtype, model configuration) compiles once: the batch's rounds (with their
refills on a CPU), and the tail's round.
Measured rates: README.md, `benchmarks/results/`.
"""

from __future__ import annotations

import math
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
from jaxtyping import Float

from ..._model.columns_program import split_columns
from ..._model.device_precision import default_is_cpu
from ..._model.family import jax_equations_for
from ..._model.jax_executables import compiling_ahead, stored_jit
from ..._params import PARAMETER_NAMES
from ..._status import Status
from ..albedo import rules as albedo_rules
from ..elementwise_lm import ElementwiseLevenbergMarquardt, stacked
from ..ordered_sums import sum_last
from .compaction import ACCELERATOR_BUCKET_BASE, BUCKET_BASE, run_compacted
from .refill import (
    LOCKSTEP_STEPS,
    default_schedule,
    default_sizes,
    refilled_rounds,
    run_lockstep,
    run_refilled,
)
from .residual_columns import residuals_and_columns

__all__ = ["solve_fit_jax", "solve_fit_jax_ahead"]

TOO_FEW_OBSERVATIONS = int(Status.TOO_FEW_OBSERVATIONS)


def _fit_residuals_structure(y, args):
    """The residual function `optx.least_squares` is given: zeros of the residuals' shape
    (problems..., observations) and dtype. `ElementwiseLevenbergMarquardt` with a
    `jacobian` (`residuals_and_columns`) never evaluates it; optimistix traces it in
    every program that calls `optx.least_squares`, for its output's structure alone.
    Tracing the model's residuals there instead took a quarter of a round's trace (and
    no part of the compiled program)."""
    refl = args[1]
    return jnp.zeros(refl.shape, y.dtype)


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
    rows = program.known(*known, *geometry)
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
    # unevaluated: each problem's first step evaluates it at its start, in the round's
    # program (this one then holds no copy of the model's derivative program)
    state = solver.init(
        None,
        start,
        (*inputs, unit),
        {"frozen": ~active, "unevaluated": True},
        jax.ShapeDtypeStruct(inputs[1].shape, refl.dtype),
        None,
        None,
    )
    return status, active, start, state, inputs


def _lm_round_of(y, inputs, state, unit, steps, limit, tol, lower, upper, free_index, key):
    """Up to `steps` steps of `ElementwiseLevenbergMarquardt` through `optx.least_squares`,
    continuing from `state` at `y`, on the problems of `inputs` (`_fit_setup`'s), each
    problem stopped at `limit` iterations of its own (an int, traced: one program for any
    value) unless `limit` is None. Returns (y, state, ok, steps taken): ok False if the
    solve met a non-finite iterate."""
    options = {"state": state}
    if limit is not None:
        options["max_iterations"] = limit
    solution: optx.Solution[Any, Any] = optx.least_squares(
        _fit_residuals_structure,
        _fit_solver(tol, lower, upper, free_index, key),
        y,
        args=(*inputs, unit),
        options=options,
        max_steps=steps,
        throw=False,
    )
    ok = solution.result != optx.RESULTS.nonfinite
    return solution.value, solution.state, ok, solution.stats["num_steps"]


_lm_round = stored_jit(_lm_round_of, static_argnames=("steps", "free_index", "key"))


@stored_jit(static_argnames=("steps", "free_index", "key"))
def _refill_rounds(loop, solver, limit, steps, free_index, key):
    """`refill.refilled_rounds` of `fit`'s batch = (y, state, inputs): rounds of `steps`
    steps (`_lm_round_of`, each problem stopped at `limit` steps) refilled from the
    chunk; loop: `refilled_rounds`' positional arguments (batch, origin, results, chunk,
    queue, n_queue, entered, live_limit); solver: (unit, tol, lower, upper) of
    `_lm_round_of`."""
    unit, tol, lower, upper = solver

    def run_round(batch):
        y, state, inputs = batch
        y, state, ok, _ = _lm_round_of(
            y, inputs, state, unit, steps, limit, tol, lower, upper, free_index, key
        )
        return (y, state, inputs), ok

    return refilled_rounds(
        *loop, run_round=run_round, progress_of=_progress, scatter=_scattered, max_steps=limit
    )


def _progress(batch):
    """(converged, iterations) of batch = (y, state, inputs), flat."""
    return batch[1].converged.reshape(-1), batch[1].iterations.reshape(-1)


def _progress_on_host(batch):
    """`_progress` of a batch on the device, fetched and flattened on the host (where a
    reshape on an accelerator would compile a program of its own)."""
    state = batch[1]
    converged, iterations = jax.device_get((state.converged, state.iterations))
    return converged.reshape(-1), iterations.reshape(-1)


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


def _scattered(results, batch, origin):
    """results (flat (problems, ...) arrays: y, residual, jtj, converged, iterations) with
    problem `origin[slot]` set from each slot of batch (origin out of range: none)."""
    return jax.tree_util.tree_map(
        lambda r, p: r.at[origin].set(p, mode="drop"), results, _results_of(batch)
    )


_scatter = stored_jit(_scattered)


def _results_of(batch):
    """The final state of a batch's problems, flat, as `_scatter` keeps it."""
    y, state, _ = batch
    jtj = stacked(state.jtj, state.jtf)[0]
    return tuple(_flat(a) for a in (y, state.residual, jtj, state.converged, state.iterations))


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
    schedule=None,
    sizes=None,
    refill_sizes=None,
):
    """Solve every (pixel, band) problem of one chunk of `fit`.

    `ElementwiseLevenbergMarquardt` steps a batch of the chunk's problems in rounds of a
    few steps (`optx.least_squares` continuing from the last round's state, each problem
    stopped at `max_iter` of its own steps); between rounds the problems done leave the
    batch and the next waiting ones take their slots (`refill.run_refilled`: one program
    for the rounds and their refills, one for the tail), so the chunk does not keep
    stepping converged problems while it waits for its slowest. The chunk is solved as
    (pixels x bands, 1) problems (`_fit_setup`), the same layout as the batches, each
    with its pixel's rows: what depends on the geometry and the fixed parameters alone, computed once per
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
        schedule: "refill", "lockstep" (the whole chunk stepped in rounds of
            `refill.LOCKSTEP_STEPS` until at most the tail's problems are left, which go
            on in the tail, `refill.run_lockstep`), "compact" (the unconverged problems
            gathered into smaller batches between rounds, `compaction.run_compacted`) or
            "whole" (the whole chunk stepped until its slowest problem is done): the same
            results. None: `refill.default_schedule` for JAX's default device.
        sizes: if a list, the batch size (problems) of every round is appended to it.
        refill_sizes: (slots, tail), "refill"'s batch size and tail size
            (`refill.run_refilled`; a tail of None or at least the slots: none) and
            "lockstep"'s tail; None: `refill.default_sizes` for JAX's default device.
    Returns:
        dict of jax arrays: values (pixels, bands, p), status int8, iterations int32,
        cost (sum of squared residuals), jtj (pixels, bands, p, p) at the solution.
    """
    shape = refl.shape[:2]
    arguments = (refl, to_sun, to_sensor, normal, fixed, start, free_index, bounds)
    setup, unit = _setup_arguments(*arguments, min_observations, key)
    lower, upper = bounds
    status, active, start, state, inputs = _fit_setup(*setup)
    solver = dict(unit=unit, tol=tol, lower=lower, upper=upper, free_index=free_index, key=key)
    schedule_of = partial(
        _run_rounds, schedule, sizes=sizes, refill_sizes=refill_sizes, n_problems=status.size
    )
    results = schedule_of((start, state, inputs), solver, max_iter)
    return _fit_outputs(status, active, results, shape=shape)


def _setup_arguments(
    refl, to_sun, to_sensor, normal, fixed, start, free_index, bounds, min_observations, key
) -> tuple:
    """(`_fit_setup`'s arguments from `solve_fit_jax`'s, and the unit among them)."""
    unit = np.ones((), refl.dtype)  # an argument, so a value XLA cannot fold
    lower, upper = bounds
    geometry = (to_sun, to_sensor, normal)
    return (
        refl,
        *geometry,
        fixed,
        start,
        unit,
        free_index,
        lower,
        upper,
        min_observations,
        key,
    ), unit


def _run_rounds(schedule, chunk, solver, max_iter, *, sizes, refill_sizes, n_problems):
    """Every problem's final results (`_all_results`' layout) of `solve_fit_jax`'s chunk
    = (start, state, inputs), by `schedule` (`solve_fit_jax`'s arguments); solver: the
    chunk's arguments of `_lm_round` other than (y, inputs, state, steps, limit)."""
    round_of = partial(_lm_round, **solver)

    def run_round(batch, steps, limit=None):
        y, state, inputs = batch
        y, state, ok, taken = round_of(y, inputs, state, steps=steps, limit=limit)
        return (y, state, inputs), ok, taken

    def scatter(results, batch, origin):
        if results is None:
            return _all_results(batch)
        return _scatter(results, batch, origin)

    on_cpu = default_is_cpu()
    steps_needed = max_iter + 1  # a problem's first step evaluates it at its start
    limit = np.int32(max_iter)
    schedule = default_schedule(on_cpu) if schedule is None else schedule
    slots, tail, steps = _refill_sizes(refill_sizes, on_cpu)
    drivers = dict(gather=_gather, scatter=scatter, n_problems=n_problems, sizes=sizes)
    drivers.update(run_tail=lambda batch: run_round(batch, steps_needed, limit)[:2])
    if schedule == "lockstep":
        return run_lockstep(
            chunk,
            progress_of=_progress_on_host,
            run_round=lambda batch: run_round(batch, LOCKSTEP_STEPS, limit)[:2],
            max_steps=max_iter,
            tail=_lockstep_tail(tail, on_cpu, n_problems),
            **drivers,
        )
    if schedule == "refill":
        fixed = dict(
            solver=tuple(solver[k] for k in ("unit", "tol", "lower", "upper")),
            limit=limit,
            steps=steps,
            free_index=solver["free_index"],
            key=solver["key"],
        )
        return run_refilled(
            chunk,
            progress_of=_progress_on_host,
            rounds=lambda *loop: _refill_rounds(loop, **fixed),
            slots=slots,
            tail=tail,
            **drivers,
        )
    return run_compacted(
        chunk,
        converged_of=lambda batch: batch[1].converged,
        run_round=run_round,
        gather=_gather,
        scatter=scatter,
        n_problems=n_problems,
        max_steps=steps_needed,
        compact=schedule == "compact",
        sizes=sizes,
        bucket_base=BUCKET_BASE if on_cpu else ACCELERATOR_BUCKET_BASE,
    )


def _lockstep_tail(tail: int | None, on_cpu: bool, n_problems: int) -> int:
    """The "lockstep" schedule's tail: `tail` (None: the device's default), at most the
    chunk's problems."""
    return min(default_sizes(on_cpu)[1] if tail is None else tail, n_problems)


def _refill_sizes(refill_sizes, on_cpu: bool) -> tuple[int, int | None, int]:
    """(slots, tail, steps per round) of the refill schedule: `solve_fit_jax`'s
    ``refill_sizes`` or the device's defaults (`refill.default_sizes`)."""
    default_slots, default_tail, steps = default_sizes(on_cpu)
    slots, tail = (default_slots, default_tail) if refill_sizes is None else refill_sizes
    return slots, tail, steps


def solve_fit_jax_ahead(
    refl,
    to_sun,
    to_sensor,
    normal,
    fixed,
    start,
    free_index,
    bounds,
    min_observations,
    max_iter,
    tol,
    key,
) -> None:
    """Start compiling, on worker threads, every program `solve_fit_jax` runs on a chunk
    of these shapes with its default schedule (`jax_executables.stored_jit`'s
    ``ahead``), so that they compile side by side instead of one after another while
    the caller goes on (e.g. with fit's starting w). Arguments as `solve_fit_jax`'s;
    arrays may be `jax.ShapeDtypeStruct`. Does nothing where programs are not stored
    (`compiling_ahead`). Each ``ahead`` call mirrors one call of `solve_fit_jax` and
    `refill.run_refilled` with arguments of the same shapes and dtypes (a test checks
    that the solve then compiles nothing)."""
    if not compiling_ahead():
        return
    arguments = (refl, to_sun, to_sensor, normal, fixed, start, free_index, bounds)
    setup, unit = _setup_arguments(*arguments, min_observations, key)
    lower, upper = bounds
    status, active, start, state, inputs = _fit_setup.ahead(*setup)
    chunk = (start, state, inputs)
    n_problems = math.prod(status.shape)
    on_cpu = default_is_cpu()
    limit = np.int32(max_iter)
    solver = (unit, tol, lower, upper)
    if default_schedule(on_cpu) == "lockstep":
        results, batch, last_size = _lockstep_ahead(chunk, solver, limit, free_index, key, on_cpu)
    else:
        slots, tail, steps = _refill_sizes(None, on_cpu)
        size = min(slots, n_problems)
        results = _all_results.ahead(chunk)
        batch = _gather.ahead(chunk, np.zeros(size, np.intp), np.zeros(size, bool))
        small = np.int32(0)
        loop = (batch, np.zeros(size, np.int32), results, chunk, np.zeros(n_problems, np.int32))
        batch, _, results, *_ = _refill_rounds.ahead(
            (*loop, small, small, small), solver, limit, steps, free_index, key
        )
        last_size = size  # the slots of the batch written last: the tail's where there is one
        if tail is not None and tail < size:
            last_size = tail
            batch = _tail_ahead(batch, tail, solver, limit, free_index, key)
    _scatter.ahead(results, batch, np.zeros(last_size, np.int32))
    _fit_outputs.ahead(status, active, results, shape=tuple(refl.shape[:2]))


def _lockstep_ahead(chunk, solver, limit, free_index, key, on_cpu):
    """`solve_fit_jax_ahead`'s programs of the "lockstep" schedule: (results, the tail's
    batch, its slots)."""
    unit, tol, lower, upper = solver
    y, state, inputs = chunk
    y, state, _, _ = _lm_round.ahead(
        y, inputs, state, unit, LOCKSTEP_STEPS, limit, tol, lower, upper, free_index, key
    )
    chunk = (y, state, inputs)
    n_problems = y.shape[0]
    tail = _lockstep_tail(None, on_cpu, n_problems)
    return _all_results.ahead(chunk), _tail_ahead(chunk, tail, solver, limit, free_index, key), tail


def _tail_ahead(batch, tail, solver, limit, free_index, key):
    """The tail's gather and round compiled ahead; returns the tail's batch (shapes)."""
    unit, tol, lower, upper = solver
    y, state, inputs = _gather.ahead(batch, np.zeros(tail, np.intp), np.zeros(tail, bool))
    _lm_round.ahead(
        y, inputs, state, unit, int(limit) + 1, limit, tol, lower, upper, free_index, key
    )
    return y, state, inputs
