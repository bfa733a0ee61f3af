"""Running many independent iterative problems without waiting for the slowest: rounds
of a few steps over a batch of fixed slots refilled from a queue (`run_refilled`, what
`fit` runs), or over a batch compacted into smaller ones between rounds (`run_compacted`).

A chunk of `fit` problems converges unevenly (the median needs ~6 Levenberg-Marquardt
steps, a few need `max_iter`): stepping the whole chunk until its slowest problem has
converged spends most of the time on problems that are already done. Here the batch
runs `ROUND_STEPS` steps (one jitted call); then, if few enough problems are left, they
are gathered, with their whole solver state, into a batch of one of a few fixed sizes
(`bucket_size`: powers of `BUCKET_BASE`, so each model configuration compiles for a
bounded set of shapes), and the batch continues. The problems that dropped out are
scattered into the chunk's results as they are. Each problem's steps do not depend on
the others', so its result is the same as in the uncompacted batch: to the bit where
the step's arithmetic does not depend on the batch's shape (`jax_solver`).

Every compacted size (and the last round's odd step count) compiles its own round
program, ~6-7 CPU s each on 2 CPU cores (3-4 per chunk shape on benchmarks/bench_fit.py's
scene). `run_refilled` compiles one, or two with a tail: the chunk's problems are a
queue; a batch of `REFILL_SLOTS` slots runs rounds of `ROUND_STEPS` steps (each slot
stopped at `max_iter` steps of its own, a traced bound, so the last round is no new
program); between rounds the slots whose problem has converged or reached `max_iter` are
written to the chunk's results and given the next queued problems at their start (same
shape: no new program). Once the queue is empty and at most `REFILL_TAIL` problems are
left, they go on in a batch of that size (one more program), run to their end in one
round: without it the last problems to enter, up to `max_iter` steps long, would step the
whole batch (2x the warm time), and in rounds of `ROUND_STEPS` the tail's few slow
problems cost a host round trip each 3 steps (~20 rounds per chunk). Measured on benchmarks/bench_fit.py's scene: docs/benchmarks.md.

Device-independent: the drivers take their round, gather and scatter steps as functions
and move only the convergence flags (and the iterations) and a scalar or two to the host
per round.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

__all__ = [
    "ROUND_STEPS",
    "BUCKET_BASE",
    "ACCELERATOR_BUCKET_BASE",
    "SMALLEST_BUCKET",
    "bucket_size",
    "run_compacted",
    "run_refilled",
    "REFILL_SLOTS",
    "REFILL_TAIL",
    "ACCELERATOR_REFILL_SLOTS",
    "ACCELERATOR_REFILL_TAIL",
    "ACCELERATOR_ROUND_STEPS",
]

# Steps per round: a round ends in a host round trip (the convergence flags) and, when it
# pays, a compaction; fewer steps waste less on converged problems, more cost more trips
# and compile more batch sizes. On benchmarks/bench_fit.py's scene (median 6 steps, a tail
# to max_iter), rounds of 3 with buckets of every power of 2 from 128 solved 1.2-1.4x
# faster than rounds of 5 with powers of 4 from 256 (1.25x for rounds of 2, where the
# round trips start to cost), at the price of more compiled sizes: measured in one run,
# README.md. With the default max_iter (50) the 17th round takes the 2 steps left (one
# more compiled length, only where a problem gets that far).
ROUND_STEPS = 3
# On an accelerator a round costs a host round trip and a refill of milliseconds: rounds
# of 5 steps (the scene's 99th percentile) ran bench_accelerator's fit row (1 M problems)
# in 2.26 s warm on a TPU v5e against 2.93 s for rounds of 3, in one run
# (docs/benchmarks.md, "Where the time goes").
ACCELERATOR_ROUND_STEPS = 5
# Compacted batch sizes are powers of this base, from SMALLEST_BUCKET up: a problem
# left costs at most BUCKET_BASE slots, and a chunk compiles for at most
# log_base(chunk / SMALLEST_BUCKET) + 1 shapes (8192 problems: 8192, 4096, ..., 128).
# Slots are problems in `fit`.
BUCKET_BASE = 2
SMALLEST_BUCKET = 128
# On an accelerator, a compiled size costs seconds (4-9 s per round program on a TPU v5e)
# and a step of a larger batch little more than of a smaller one: powers of 8 (a
# 262 k-problem chunk compiles 5 round sizes instead of 12).
ACCELERATOR_BUCKET_BASE = 8
# `run_refilled`'s batch (problems; at most the chunk's) and its tail. On 2 CPU cores, a
# chunk of 8192 problems (bench_fit's scene, 4 free): slots 1024-2048 with a tail of 128
# as fast warm as compaction (within the run-to-run noise, ~5 %), 4096 with 256-512 and
# 2048 with 512 10-25 % slower, no tail 2x slower (docs/benchmarks.md). On a TPU v5e
# (chunks of 8x the problems): 16 384 / 1 024 the fastest of the sizes swept, 32 768 /
# 1 024 and 65 536 / 2 048 ~10 % slower (docs/benchmarks.md).
REFILL_SLOTS = 2048
REFILL_TAIL = SMALLEST_BUCKET
ACCELERATOR_REFILL_SLOTS = 16384
ACCELERATOR_REFILL_TAIL = 1024


def bucket_size(remaining: int, batch: int, base: int = BUCKET_BASE) -> int:
    """Slots of the batch that carries `remaining` unconverged problems on.

    Args:
        remaining: unconverged problems, >= 1.
        batch: slots of the current batch (>= remaining).
        base: the sizes are `SMALLEST_BUCKET` times powers of it.
    Returns:
        The smallest `SMALLEST_BUCKET` times a power of `base` that holds `remaining`,
        if it is smaller than `batch` (compact); else `batch` (go on as is).
    """
    size = SMALLEST_BUCKET
    while size < remaining:
        size *= base
    return size if size < batch else batch


def run_compacted(
    batch: Any,
    converged_of: Callable[[Any], Any],
    run_round: Callable,
    gather: Callable,
    scatter: Callable,
    n_problems: int,
    max_steps: int,
    compact: bool = True,
    sizes: list | None = None,
    bucket_base: int = BUCKET_BASE,
):
    """Step `batch` in rounds until every problem has converged, `max_steps` steps were
    taken, or the solver met a non-finite iterate; return every problem's final state.

    Args:
        batch: the solver's state for all `n_problems` problems (a pytree, problems
            flattened in order along the batch axes).
        converged_of: batch -> converged flags, one per slot (any array shape, flattened
            in slot order).
        run_round: (batch, steps) -> (batch, ok, steps taken): at most `steps` (a few
            distinct values) steps, fewer if all problems converge; ok False if the
            solver met a non-finite iterate (the solve stops there, as the uncompacted
            solve would, though up to one step earlier).
        gather: (batch, slots, padding) -> batch: the slots `slots` (int array) of the
            batch as a new one, the slots where `padding` is True marked converged.
        scatter: (results, batch, origin) -> results: `results` (None at first: then
            the batch itself, which holds every problem) with the problem number
            `origin[slot]` of each slot set from the batch (origin n_problems: none).
        n_problems: problems in the first batch.
        max_steps: the most steps (optimistix's `max_steps`, `max_iter`).
        compact: False runs the rounds on the whole batch throughout.
        sizes: if a list, the slots of every round's batch are appended to it.
        bucket_base: the base of the compacted sizes (`bucket_size`).
    Returns:
        results as `scatter` builds them: every problem's final state.
    """
    origin = np.arange(n_problems)
    results = None
    steps = 0
    while steps < max_steps:
        if sizes is not None:
            sizes.append(len(origin))
        batch, ok, taken = run_round(batch, min(ROUND_STEPS, max_steps - steps))
        steps += int(taken)
        converged = np.asarray(converged_of(batch)).reshape(-1)
        remaining = np.flatnonzero(~converged)
        if remaining.size == 0 or not bool(ok):
            break
        size = bucket_size(remaining.size, len(origin), bucket_base) if compact else len(origin)
        if size == len(origin) or steps >= max_steps:
            continue  # the loop ends, or the batch goes on as it is
        results = scatter(results, batch, origin)
        slots = np.full(size, remaining[0])
        slots[: remaining.size] = remaining
        padding = np.arange(size) >= remaining.size
        batch = gather(batch, slots, padding)
        origin = np.where(padding, n_problems, origin[slots])
    return scatter(results, batch, origin)


def run_refilled(
    chunk: Any,
    progress_of: Callable[[Any], tuple],
    run_round: Callable,
    gather: Callable,
    swap: Callable,
    scatter: Callable,
    n_problems: int,
    max_steps: int,
    slots: int,
    tail: int | None = None,
    sizes: list | None = None,
    round_steps: int = ROUND_STEPS,
):
    """Solve a chunk's problems through one batch of `slots` slots fed from a queue, so
    that every round runs one compiled program: step the batch a round; write the
    problems that have converged or taken `max_steps` steps to the results and put the
    next queued problems, at their start, in their slots; repeat until every problem is
    done.

    Each problem takes its own steps, from its start, however late it enters (the round
    stops a slot at `max_steps` of its own iterations): its result is the one of the
    whole chunk stepped together, to the bit where the step's arithmetic does not depend
    on the batch's shape (`jax_solver`).

    Args:
        chunk: the solver's state of all `n_problems` problems at their start (a pytree,
            problems along the leading axis).
        progress_of: batch -> (converged flags, iterations), host arrays, one per slot.
        run_round: (batch, steps) -> (batch, ok): up to `steps` steps of every slot that
            has neither converged nor taken `max_steps` iterations (fewer if all are done
            first); ok False if the solver met a non-finite iterate (the solve stops
            there, as the uncompacted solve would). `steps` is `round_steps` for the
            batch and `max_steps` for the tail: the tail runs to its end in one round, so
            its few slow problems cost one host round trip, not one per `ROUND_STEPS`.
        gather: (batch, slots, padding) -> batch: the slots `slots` (int array) of
            `batch` (or of the chunk) as a new batch, the `padding` slots marked converged.
        swap: (results, batch, origin, source, take) -> (results, batch): results with
            problem `origin[slot]` set from each slot (origin n_problems: none), and the
            batch with the chunk's problem `source[slot]` in each slot where `take`.
        scatter: (results, batch, origin) -> results: as `swap`'s results; with results
            None, the batch's own (the chunk: every problem).
        n_problems: problems in the chunk.
        max_steps: the most steps of a problem (`max_iter`).
        slots: the batch's size (at most `n_problems`).
        tail: if smaller than `slots`, once the queue is empty and at most `tail` problems
            are left, they go on in a batch of `tail` slots (one more program), in one
            round of up to `max_steps` steps.
        sizes: if a list, the slots of every round's batch are appended to it.
        round_steps: steps of the batch's rounds.
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
    entered = min(size, queue.size)
    in_tail = False
    while True:
        if sizes is not None:
            sizes.append(size)
        batch, ok = run_round(batch, max_steps if in_tail else round_steps)
        converged, iterations = (np.asarray(a).reshape(-1) for a in progress_of(batch))
        if not bool(ok):
            break
        done = (converged | (iterations >= max_steps)) & (origin < n_problems)
        if done.any():
            fill = np.flatnonzero(done)[: queue.size - entered]
            source = np.zeros(size, np.int64)
            source[fill] = queue[entered : entered + fill.size]
            take = np.zeros(size, bool)
            take[fill] = True
            results, batch = swap(results, batch, np.where(done, origin, n_problems), source, take)
            origin = np.where(take, source, np.where(done, n_problems, origin))
            entered += fill.size
        live = np.flatnonzero(origin < n_problems)
        if live.size == 0:
            return results
        if tail is not None and tail < size and entered == queue.size and live.size <= tail:
            picked, padding = _packed(live, tail)
            batch = gather(batch, picked, padding)
            origin = np.where(padding, n_problems, origin[picked])
            size, in_tail = tail, True
    return scatter(results, batch, origin)


def _packed(indices, size):
    """The first `size` of `indices` (int, at least one) as `size` slots: (the indices,
    the first one repeated where there are fewer; the padding: True for those)."""
    picked = np.full(size, indices[0])
    picked[: min(size, indices.size)] = indices[:size]
    return picked, np.arange(size) >= indices.size
