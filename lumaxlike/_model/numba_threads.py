"""The parallel loop of lumaxlike's heaviest numba kernels: a serial kernel over a range
of items, ``kernel(first, last, *args)`` compiled with ``nogil=True``, run over blocks of
the range on Python threads, as many as ``numba.get_num_threads()`` says in the calling
thread (thread-local: the run layer's per-task counts hold).

Why not ``numba.prange``: numba compiles a prange loop into a function of its own and
compiles the loop's callees into it again. Measured on a fresh cache (2-core VM), the
prange loop around `unmix`'s one-step block function took 6.2 s to compile on top of the
block function's 8.4 s, a serial loop around it 1.4 s; the threads run the same machine
code on the same items, so the results are the same bits. The items of one call are
independent (each writes its own rows of the outputs).
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import numba

__all__ = ["BLOCKS_PER_THREAD", "run_in_blocks"]

# Blocks per thread: more than one, so that a thread whose items converge sooner takes
# another block (the problems' iteration counts differ), few enough that the calls'
# dispatch (tens of microseconds each) stays negligible.
BLOCKS_PER_THREAD = 8


def run_in_blocks(kernel, n_items: int, *args) -> None:
    """``kernel(first, last, *args)`` over consecutive blocks covering ``range(n_items)``,
    on up to ``numba.get_num_threads()`` threads; returns when every block is done (a
    block's exception is raised here, and blocks not started are cancelled)."""
    threads = max(1, min(numba.get_num_threads(), n_items))
    if threads == 1:
        kernel(0, n_items, *args)
        return
    n_blocks = min(n_items, threads * BLOCKS_PER_THREAD)
    edges = [n_items * k // n_blocks for k in range(n_blocks + 1)]
    pool = ThreadPoolExecutor(threads, thread_name_prefix="lumaxlike-numba")
    try:
        futures = [pool.submit(kernel, first, last, *args) for first, last in zip(edges, edges[1:])]
        for future in futures:
            future.result()
    finally:
        pool.shutdown(wait=True, cancel_futures=True)
