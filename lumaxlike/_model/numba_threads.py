"""The parallel loop of lumaxlike's numba kernels: a serial kernel over a range
of items, ``kernel(first, last, *args)`` compiled with ``nogil=True``, run over blocks of
the range on Python threads, as many as ``numba.get_num_threads()`` says in the calling
thread (thread-local: the run layer's per-task counts hold).

Why not ``numba.prange``: numba compiles a prange loop into a function of its own and
compiles the loop's callees into it again. Measured on a fresh cache (2-core VM), the
prange loop around `unmix`'s one-step block function took 6.2 s to compile on top of the
block function's 8.4 s, a serial loop around it 1.4 s; the threads run the same machine
code on the same items, so the results are the same bits. The items of one call are
independent (each writes its own rows of the outputs). No kernel uses numba's threading
layers, so threads of a caller (dask's threaded scheduler) may run kernels at once.
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor

import numba

from .._signals import deferred

__all__ = ["BLOCKS_PER_THREAD", "run_in_blocks"]

# Blocks per thread: more than one, so that a thread whose items converge sooner takes
# another block (the problems' iteration counts differ); measured on `invert`'s kernel
# (16,384 pixels x 64 bands, 2 threads): 1 block per thread 18.8 ms, 2 16.6 ms (prange's
# 16.5 ms), 8 18.0 ms, 32 18.2 ms.
BLOCKS_PER_THREAD = 2

_local = threading.local()


def _pool(threads: int) -> ThreadPoolExecutor:
    """The calling thread's pool of `threads` workers, kept between calls (starting
    threads costs ~0.8 ms a call); a new one after a fork or a change of count (the old
    one's threads exit once it is collected)."""
    key = (os.getpid(), threads)
    if getattr(_local, "key", None) != key:
        _local.pool = ThreadPoolExecutor(threads, thread_name_prefix="lumaxlike-numba")
        _local.key = key
    return _local.pool


def run_in_blocks(kernel, n_items: int, *args) -> None:
    """``kernel(first, last, *args)`` over consecutive blocks covering ``range(n_items)``,
    on up to ``numba.get_num_threads()`` threads; returns when every block is done. A
    block's exception is raised here (the blocks not started are cancelled, the
    outputs are then partial: the caller discards them)."""
    threads = max(1, min(numba.get_num_threads(), n_items))
    if threads == 1:
        kernel(0, n_items, *args)
        return
    n_blocks = min(n_items, threads * BLOCKS_PER_THREAD)
    edges = [n_items * k // n_blocks for k in range(n_blocks + 1)]
    # a stop signal raised between a worker's start and its registration with Python's
    # exit hook would leave that worker asleep and the exit waiting on it forever: the
    # submissions (which start the workers) only record a signal (`lumaxlike._signals`)
    with deferred():
        pool = _pool(threads)
        futures = [pool.submit(kernel, first, last, *args) for first, last in zip(edges, edges[1:])]
    try:
        for future in futures:
            future.result()
    except BaseException:
        for future in futures:
            future.cancel()
        raise
