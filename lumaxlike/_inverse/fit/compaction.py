"""Running many independent iterative problems without waiting for the slowest, by
compaction: rounds of a few steps over a batch compacted into smaller ones between
rounds (`run_compacted`, `fit`'s schedule="compact"), and the sizes of the batches of
both schedules (`fit`'s default, a batch of fixed slots refilled from a queue on the
device, is `refill`).

A chunk of `fit` problems converges unevenly (the median needs ~4-6 Levenberg-Marquardt
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
scene); the refilled schedule compiles two (its rounds with their refills, and its
tail). Measured on benchmarks/bench_fit.py's scene: docs/benchmarks.md.

Device-independent: the driver takes its round, gather and scatter steps as functions
and moves only the convergence flags and a scalar or two to the host per round.
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
