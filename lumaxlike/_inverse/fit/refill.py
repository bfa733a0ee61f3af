"""`fit`'s schedules for a chunk's problems: on a CPU, one batch of fixed slots refilled
on the device between rounds, so the host waits once per chunk (`run_refilled`); on an
accelerator, the whole chunk stepped together in rounds until only a tail is left
(`run_lockstep`).

A chunk's problems converge unevenly (most in 3-5 Levenberg-Marquardt steps, a few at
`max_iter`). The chunk's unconverged problems are a queue; a batch of `slots` slots runs
rounds of a few steps (each slot stopped at `max_iter` steps of its own); after each round
the slots whose problem has converged or reached `max_iter` are written to the chunk's
results and given the next queued problems at their start. Rounds and refills are one
`lax.while_loop` in one device program (`refilled_rounds`): no host round trip per round
(on a TPU v5e each cost milliseconds), and the refill compiles with the round. Once the
queue is empty and at most `tail` problems are left, the host gathers them into a batch
of `tail` slots, which runs to its end in one round (a second program): without it the
last problems, up to `max_iter` steps long, would step the whole batch.

On a TPU v5e stepping a problem that has converged costs less than moving it: a step of
65 536 problems took 1.07 ms and one of 16 384 0.30 ms, while the refill's writes and
takes (a scatter and a gather of the solver's state a round) made the refilled rounds of
bench_accelerator's fit row take 39 ms a chunk for ~6 ms of steps. There the whole chunk
runs rounds of `LOCKSTEP_STEPS` (one program, no gather) until at most `tail` problems
are left, which go on in the tail as above (docs/benchmarks.md).

Each problem takes its own steps, from its start, however late it enters: its result is
the one of the whole chunk stepped together, to the bit where the step's arithmetic does
not depend on the batch's shape (`jax_solver`). The driver takes the round, gather and
scatter as functions (`jax_solver` gives `fit`'s; the tests a stand-in that counts steps).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from .compaction import ROUND_STEPS, SMALLEST_BUCKET

__all__ = ["default_schedule", "default_sizes", "refilled_rounds", "run_lockstep", "run_refilled"]

# `run_refilled`'s batch (problems; at most the chunk's) and its tail. On 2 CPU cores, a
# chunk of 8192 problems (bench_fit's scene, 4 free): slots 1024-2048 with a tail of 128
# as fast warm as compaction (within the run-to-run noise, ~5 %), 4096 with 256-512 and
# 2048 with 512 10-25 % slower, no tail 2x slower (docs/benchmarks.md). On a TPU v5e
# (chunks of 8x the problems, the refill then on the host): 16 384 / 1 024 with rounds of
# 5 the fastest measured (2.26 s); with rounds of 3, 32 768 and 65 536 slots beat
# 16 384 (2.64, 2.73 against 2.93 s); 32 768 with rounds of 5 not tried
# (docs/benchmarks.md).
REFILL_SLOTS = 2048
REFILL_TAIL = SMALLEST_BUCKET
ACCELERATOR_REFILL_SLOTS = 16384
ACCELERATOR_REFILL_TAIL = 1024
# Steps per round of the batch on an accelerator: with the refill on the host
# (a round trip and a refill of milliseconds a round), rounds of 5 steps (the scene's
# 99th percentile) ran bench_accelerator's fit row (1 M problems) in 2.26 s warm on a
# TPU v5e against 2.93 s for rounds of 3, in one run (docs/benchmarks.md).
ACCELERATOR_ROUND_STEPS = 5
# `run_lockstep`'s round (the schedule on an accelerator), the first step evaluating each
# problem at its start. bench_accelerator's fit row (1 M problems; 99.8 % converge within
# 6 steps) on a TPU v5e, warm s in one run: refill 1.84; lockstep 6 steps with a tail of
# 1024 1.25, of 512 1.24, of 2048 1.25; 5 steps 1.21, 8 steps 1.27 (docs/benchmarks.md).
# 6 rather than 5: after 5 steps ~1.3 % of the scene's problems are left, near the tail.
LOCKSTEP_STEPS = 6


def default_schedule(on_cpu: bool) -> str:
    """`fit`'s JAX schedule: "refill" (`run_refilled`) on a CPU, where a converged problem
    stepped with the others costs as much as an unconverged one, "lockstep"
    (`run_lockstep`) on an accelerator."""
    return "refill" if on_cpu else "lockstep"


def default_sizes(on_cpu: bool) -> tuple[int, int, int]:
    """(slots, tail, steps per round) of the refilled batch on a CPU or on an
    accelerator."""
    if on_cpu:
        return REFILL_SLOTS, REFILL_TAIL, ROUND_STEPS
    return ACCELERATOR_REFILL_SLOTS, ACCELERATOR_REFILL_TAIL, ACCELERATOR_ROUND_STEPS


def run_refilled(
    chunk: Any,
    progress_of: Callable[[Any], tuple],
    gather: Callable,
    rounds: Callable,
    run_tail: Callable,
    scatter: Callable,
    n_problems: int,
    slots: int,
    tail: int | None = None,
    sizes: list | None = None,
):
    """Solve a chunk's problems through one batch of `slots` slots fed from a queue
    (`refilled_rounds` on the device), then the last ones in a batch of `tail` slots.

    Args:
        chunk: the solver's state of all `n_problems` problems at their start (a pytree,
            problems along the leading axis).
        progress_of: batch -> (converged flags, iterations), one per slot, flat.
        gather: (batch, slots, padding) -> batch: the slots `slots` (int array) of
            `batch` (or of the chunk) as a new batch, the `padding` slots marked converged.
        rounds: (batch, origin, results, chunk, queue, n_queue, entered, live_limit) ->
            (batch, origin, results, entered, ok, rounds run): `refilled_rounds` with the
            operation's functions given, compiled.
        run_tail: batch -> (batch, ok): the batch run until every slot has converged or
            taken its most steps; ok False if the solver met a non-finite iterate.
        scatter: (results, batch, origin) -> results: results with problem `origin[slot]`
            set from each slot (origin n_problems: none); with results None, the
            batch's own (the chunk: every problem).
        n_problems: problems in the chunk.
        slots: the batch's size (at most `n_problems`).
        tail: if smaller than `slots`, once the queue is empty and at most `tail` problems
            are left, they go on in a batch of `tail` slots, in one round.
        sizes: if a list, the slots of every round's batch are appended to it.
    Returns:
        results as `scatter` builds them: every problem's final state.
    """
    converged, _ = progress_of(chunk)
    queue = np.flatnonzero(~np.asarray(converged).reshape(-1))
    results = scatter(None, chunk, None)
    if queue.size == 0:
        return results
    size = min(slots, n_problems)
    picked, padding = _packed(queue, size)
    batch = gather(chunk, picked, padding)
    origin = np.where(padding, n_problems, picked)  # each slot's problem (n_problems: none)
    live_limit = tail if tail is not None and tail < size else 0
    padded_queue = np.zeros(n_problems, np.int32)
    padded_queue[: queue.size] = queue
    batch, origin, results, _, ok, count = rounds(
        batch,
        origin.astype(np.int32),
        results,
        chunk,
        padded_queue,
        np.int32(queue.size),
        np.int32(min(size, queue.size)),
        np.int32(live_limit),
    )
    if sizes is not None:
        sizes.extend([size] * int(count))
    origin = np.asarray(origin)
    live = np.flatnonzero(origin < n_problems)
    if bool(ok) and live.size > 0 and live_limit > 0:
        picked, padding = _packed(live, live_limit)
        batch = gather(batch, picked, padding)
        origin = np.where(padding, n_problems, origin[picked])
        if sizes is not None:
            sizes.append(live_limit)
        batch, _ = run_tail(batch)
    return scatter(results, batch, origin)


def refilled_rounds(
    batch: Any,
    origin: jax.Array,
    results: Any,
    chunk: Any,
    queue: jax.Array,
    n_queue: jax.Array,
    entered: jax.Array,
    live_limit: jax.Array,
    *,
    run_round: Callable,
    progress_of: Callable,
    scatter: Callable,
    max_steps: jax.Array,
):
    """Rounds of the batch with its slots refilled from the queue between them, as one
    `lax.while_loop` (traced): until the queue is empty and at most `live_limit` slots
    hold a problem, or the solver meets a non-finite iterate.

    After each round, the slots whose problem has converged or taken `max_steps` steps
    are written to `results` (`scatter`) and, in slot order, given the next queued
    problems from `chunk` at their start (a slot left without one holds none).

    Args:
        batch: the slots' solver state (a pytree, slots along the leading axis).
        origin: (slots,) int32, each slot's problem of the chunk (n_problems: none).
        results: every problem's results so far (`scatter`'s).
        chunk: every problem at its start, as `batch` holds them.
        queue: (n_problems,) int32, the problems to solve in order, the first `n_queue`
            used; entered: how many of them have entered the batch.
        live_limit: the loop ends once the queue is empty and at most this many slots
            hold a problem.
        run_round: batch -> (batch, ok): the round (ok False: a non-finite iterate).
        progress_of: batch -> (converged, iterations), (slots,) each.
        scatter: (results, batch, origin) -> results.
        max_steps: the most steps of a problem.
    Returns:
        (batch, origin, results, entered, ok, rounds run).
    """
    n_problems = queue.shape[0]
    queue = jnp.asarray(queue)

    def going(carry):
        _, origin, _, entered, ok, _ = carry
        live = jnp.sum(origin < n_problems)
        return ok & ((entered < n_queue) | (live > live_limit))

    def one_round(carry):
        batch, origin, results, entered, _, count = carry
        batch, ok = run_round(batch)
        converged, iterations = progress_of(batch)
        done = (converged | (iterations >= max_steps)) & (origin < n_problems) & ok
        results = scatter(results, batch, jnp.where(done, origin, n_problems))
        position = entered + jnp.cumsum(done) - 1  # the queue entry a done slot takes
        take = done & (position < n_queue)
        source = queue[jnp.clip(position, 0, n_problems - 1)]
        fresh = jax.tree_util.tree_map(lambda a: a[source], chunk)

        def refill(new, old):
            return jnp.where(take.reshape(take.shape + (1,) * (old.ndim - 1)), new, old)

        batch = jax.tree_util.tree_map(refill, fresh, batch)
        origin = jnp.where(take, source, jnp.where(done, n_problems, origin))
        entered = entered + jnp.sum(take, dtype=entered.dtype)
        return batch, origin, results, entered, ok, count + 1

    start = (batch, origin, results, entered, jnp.asarray(True), jnp.int32(0))
    return jax.lax.while_loop(going, one_round, start)


def run_lockstep(
    chunk: Any,
    progress_of: Callable[[Any], tuple],
    run_round: Callable,
    gather: Callable,
    run_tail: Callable,
    scatter: Callable,
    n_problems: int,
    max_steps: int,
    tail: int,
    sizes: list | None = None,
):
    """Solve a chunk's problems by stepping the whole chunk together, a round of a few
    steps at a time, until at most `tail` problems are left, which go on in a batch of
    `tail` slots to their end (`fit`'s schedule on an accelerator, where a step of the
    whole chunk costs little more than one of a batch and each gather or scatter of
    problems costs milliseconds).

    Args:
        chunk, progress_of, gather, run_tail, scatter, n_problems, sizes: as
            `run_refilled`'s.
        run_round: batch -> (batch, ok): one round of the whole chunk.
        max_steps: the most steps of a problem (a problem that took them is done).
        tail: the tail's slots.
    Returns:
        results as `scatter` builds them: every problem's final state.
    """
    while True:
        if sizes is not None:
            sizes.append(n_problems)
        chunk, ok = run_round(chunk)
        converged, iterations = progress_of(chunk)
        left = np.flatnonzero(~(np.asarray(converged) | (np.asarray(iterations) >= max_steps)))
        if left.size == 0 or not bool(ok):
            return scatter(None, chunk, None)
        if left.size <= tail:
            break
    results = scatter(None, chunk, None)
    picked, padding = _packed(left, tail)
    batch, _ = run_tail(gather(chunk, picked, padding))
    if sizes is not None:
        sizes.append(tail)
    return scatter(results, batch, np.where(padding, n_problems, picked).astype(np.int32))


def _packed(indices, size):
    """The first `size` of `indices` (int, at least one) as `size` slots: (the indices,
    the first one repeated where there are fewer; the padding: True for those)."""
    picked = np.full(size, indices[0])
    picked[: min(size, indices.size)] = indices[:size]
    return picked, np.arange(size) >= indices.size
