"""How the solvers cut a call's problems into chunks: the JAX solvers' chunk shapes (each
a compiled program), chunk sizes from a device's memory, padding a chunk to its shape,
and a two-deep pipeline that keeps the device busy between chunks (chunk k + 1
dispatched before chunk k's results are fetched).

Device-independent on purpose: the sizes are a pure function of the pixel count, the
device's memory and the dtype, and the pipeline takes its launch and collect steps as
functions, so all are tested on a CPU.
"""

from __future__ import annotations

import numpy as np

from .._model.numba_threads import run_in_blocks

__all__ = [
    "PROBLEMS_PER_CHUNK",
    "ACCELERATOR_MAX_PROBLEMS",
    "BYTES_PER_PROBLEM",
    "balanced_chunk",
    "call_chunk",
    "chunk_problems",
    "copy_rows",
    "device_memory_bytes",
    "pad_pixels",
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
# A copy of at least this many bytes runs on the run's threads (`copy_rows`).
PARALLEL_COPY_BYTES = 1 << 20
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


def balanced_chunk(n_pixels: int, largest: int) -> int:
    """Pixels per chunk of a call over `n_pixels` pixels whose padded pixels cost as much
    as its compiles (`sample`: each problem is thousands of gradient evaluations).

    The chunks of a call are made equal (a padded slot costs as much as a filled one),
    then rounded up to a power of two up to 64 pixels and to a multiple of 64 above (few
    shapes to compile: calls of nearby sizes share theirs).

    Args:
        n_pixels: pixels of the call (0 counts as 1).
        largest: the most pixels a chunk may hold (memory is bounded by it), >= 1.
    Returns:
        Pixels per chunk, in [1, largest]: ceil(n_pixels / chunks) rounded as above, with
        chunks = ceil(n_pixels / largest); never above `largest`.
    """
    n_chunks = -(-max(n_pixels, 1) // largest)
    balanced = -(-max(n_pixels, 1) // n_chunks)
    rounded = 1 << (balanced - 1).bit_length() if balanced <= 64 else -(-balanced // 64) * 64
    return min(rounded, largest)


def call_chunk(solver: str, n_pixels: int, largest: int) -> int:
    """Pixels per chunk of an `invert`, `fit` or `unmix` call over `n_pixels` pixels with
    `solver` ("jax" or "numba"), at most `largest`.

    JAX compiles a set of programs per chunk shape (`fit`'s take 5-20 s on 2 cores), which
    costs more than solving the pixels a chunk is padded with. A call of at least
    `largest` pixels runs chunks of `largest` (the last padded): one shape for every such
    call, the blocks of a streamed file included. A smaller call is one chunk, rounded up
    as `balanced_chunk` rounds (a power of two up to 64 pixels, a multiple of 64 above,
    at most `largest`), so calls of nearby sizes (regions of interest, a file's short last
    block) share their programs. numba's kernels compile once for any shape: its chunks
    are as large as allowed, never more than the pixels.
    """
    if solver != "jax":
        return min(largest, max(n_pixels, 1))
    return largest if n_pixels >= largest else balanced_chunk(n_pixels, largest)


def pad_pixels(array, n_pixels, value):
    """`array` padded along its first (pixel) axis to `n_pixels` entries of `value`.

    The JAX solvers see one chunk shape, so each compiles once; padded pixels get NaN
    reflectance, which makes them inert (status NONFINITE_INPUT).
    """
    padding = n_pixels - array.shape[0]
    if padding == 0:
        return array
    widths = [(0, padding)] + [(0, 0)] * (array.ndim - 1)
    return np.pad(array, widths, constant_values=value)


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


def copy_rows(target: np.ndarray, source: np.ndarray) -> None:
    """``target[...] = source[: len(target)]`` (arrays of the same trailing shape), split
    by rows over the run's threads (`numba_threads.run_in_blocks`) where it is at least
    `PARALLEL_COPY_BYTES`.

    A result's rows are copied into arrays the call has just allocated, and writing fresh
    memory costs mostly page faults, not bandwidth: measured on the TPU v5e host, storing
    a 1024 x 1024 x 64 `invert`'s 0.87 GB of results from the device's buffers took 1.97
    s of a 2.35 s call on one thread (a copy into memory already written: 0.05 s).
    Faults on several threads proceed in parallel; NumPy's copy releases the GIL.
    """
    if target.nbytes < PARALLEL_COPY_BYTES or target.ndim == 0:
        target[...] = source[: len(target)] if target.ndim else source
        return
    run_in_blocks(_copy_block, target.shape[0], target, source)


def _copy_block(first: int, last: int, target: np.ndarray, source: np.ndarray) -> None:
    target[first:last] = source[first:last]
