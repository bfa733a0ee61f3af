"""How `invert` cuts its problems into chunks for the JAX solver, and how it keeps the
device busy between them: chunk sizes from the device's memory, and a two-deep pipeline
(chunk k + 1 dispatched before chunk k's results are fetched).

Device-independent on purpose: the sizes are a pure function of the device's memory and
the dtype, and the pipeline takes its launch and collect steps as functions, so both are
tested on a CPU.
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "PROBLEMS_PER_CHUNK",
    "ACCELERATOR_MAX_PROBLEMS",
    "BYTES_PER_PROBLEM",
    "chunk_problems",
    "device_memory_bytes",
    "pipelined",
]

# CPU: 262 k problems per chunk, ~40 MB of JAX working buffers in float64; larger chunks
# were no faster on a 2-core CPU (benchmarks/README.md) and cost ~100 MB more peak memory.
PROBLEMS_PER_CHUNK = 1 << 18
# Accelerator: device bytes one problem of a chunk may hold, in units of its float size:
# inputs (r_obs, the per-pixel geometry and terms shared by the bands), the solver's
# state (w, residual, slope, damping, growth, flags, iterations), a step's temporaries and
# the outputs, with a margin (an estimate, not a measurement).
BYTES_PER_PROBLEM = 48
# Two chunks are in flight (the pipeline): each may take this fraction of device memory.
DEVICE_MEMORY_FRACTION = 0.125
# An accelerator chunk larger than this gains nothing (its time is already far above a
# dispatch's) and leaves fewer chunks to overlap transfers with.
ACCELERATOR_MAX_PROBLEMS = 1 << 24


def chunk_problems(dtype, memory_bytes: int | None) -> int:
    """Problems (pixels x bands) per chunk of the JAX solver.

    Args:
        dtype: the computing precision (float32 or float64).
        memory_bytes: the device's memory [bytes]; None for a CPU (no device memory to
            size from: `PROBLEMS_PER_CHUNK`).
    Returns:
        On an accelerator, as many problems as `DEVICE_MEMORY_FRACTION` of its memory
        holds at `BYTES_PER_PROBLEM` floats each, at most `ACCELERATOR_MAX_PROBLEMS` and at
        least `PROBLEMS_PER_CHUNK`'s sixteenth, rounded down to a power of two (a few
        distinct chunk shapes, so few compilations).
    """
    if memory_bytes is None:
        return PROBLEMS_PER_CHUNK
    per_problem = BYTES_PER_PROBLEM * np.dtype(dtype).itemsize
    fitting = int(memory_bytes * DEVICE_MEMORY_FRACTION) // per_problem
    problems = min(max(fitting, PROBLEMS_PER_CHUNK // 16), ACCELERATOR_MAX_PROBLEMS)
    return 1 << (problems.bit_length() - 1)


def device_memory_bytes(device) -> int | None:
    """The memory of a JAX `device` [bytes], None for a CPU or where it is not reported."""
    if device.platform == "cpu":
        return None
    stats = device.memory_stats() or {}
    limit = stats.get("bytes_limit")
    return int(limit) if limit else None


def pipelined(items, launch, collect) -> None:
    """`collect(launch(item))` for every item, with one launch ahead of each collect.

    JAX dispatches asynchronously: `launch` (copy a chunk to the device and start its
    solve) returns at once, `collect` (fetch the results) waits. Launching chunk k + 1
    before collecting chunk k keeps the device computing while the host copies results
    and prepares inputs. Order: launch 0, launch 1, collect 0, launch 2, collect 1, ...,
    collect n - 1. At most two launched items are pending.
    """
    pending = None
    for item in items:
        launched = launch(item)
        if pending is not None:
            collect(pending)
        pending = launched
    if pending is not None:
        collect(pending)
