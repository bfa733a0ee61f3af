"""`_model.numba_threads.run_in_blocks`: the parallel loop of every numba kernel (serial
kernels over blocks of items on threads)."""

import threading

import numba
import numpy as np
import pytest

import lumaxlike
from lumaxlike._model import numba_threads
from lumaxlike._operations.blocks import numba_threads as numba_thread_count
from lumaxlike.testing import default_params, random_geometry


def _recording_kernel():
    calls, lock = [], threading.Lock()

    def kernel(first, last, out):
        with lock:
            calls.append((first, last, threading.get_ident()))
        out[first:last] += 1

    return kernel, calls


@pytest.mark.parametrize("threads", [1, 2, 4])
@pytest.mark.parametrize("n_items", [0, 1, 3, 1000])
def test_blocks_cover_every_item_once_on_at_most_the_thread_count(monkeypatch, threads, n_items):
    # more threads than this machine's numba allows: the thread count is what the
    # calling thread's numba setting says
    monkeypatch.setattr(numba, "get_num_threads", lambda: threads)
    kernel, calls = _recording_kernel()
    out = np.zeros(n_items, np.int64)
    numba_threads.run_in_blocks(kernel, n_items, out)
    assert np.all(out == 1)  # each item in exactly one block
    blocks = sorted((first, last) for first, last, _ in calls)
    assert all(first < last for first, last in blocks) or n_items == 0
    assert len({ident for _, _, ident in calls}) <= threads
    assert len(blocks) <= max(1, threads * numba_threads.BLOCKS_PER_THREAD)
    if threads == 1 or n_items <= 1:  # one call, on the calling thread
        assert [(f, la) for f, la, _ in calls] == [(0, n_items)]
        assert calls[0][2] == threading.get_ident()


def test_a_failing_block_raises_in_the_caller(monkeypatch):
    monkeypatch.setattr(numba, "get_num_threads", lambda: 2)

    def kernel(first, last):
        if first == 0:
            raise ValueError("block 0 failed")

    with pytest.raises(ValueError, match="block 0 failed"):
        numba_threads.run_in_blocks(kernel, 100)


def test_invert_and_fit_give_the_same_bits_on_one_thread_and_on_all():
    """The blocks change which thread solves a pixel, never its arithmetic."""
    rng = np.random.default_rng(3)
    params = default_params()
    geometry = random_geometry(200, rng)
    refl = lumaxlike.amsa(rng.uniform(0.1, 0.9, (200, 2)), *geometry, params, backend="numba")
    refl = refl * (1.0 + 1e-3 * rng.standard_normal(refl.shape))

    def run():
        inverted = lumaxlike.invert(refl, *geometry, params, solver="numba")
        fitted = lumaxlike.fit(
            refl[:, :, None],
            *(g[:, None] for g in geometry),
            params,
            free=("w",),
            solver="numba",
            min_observations=1,
        )
        return inverted.w, fitted.values["w"]

    with numba_thread_count(1):
        serial = run()
    parallel = run()
    for one, many in zip(serial, parallel):
        np.testing.assert_array_equal(one, many)


def test_a_stop_signal_while_workers_start_leaves_every_worker_to_python_exit(monkeypatch):
    """A CLI run's stop signal raises in the block loop wherever the main thread is; one
    raised between a pool worker's start and its registration with Python's exit hook
    left that worker asleep and the process's exit waiting on it (a hung CLI run)."""
    import concurrent.futures.thread as futures_thread
    import os
    import signal

    from lumaxlike._signals import (
        Interrupted,
        interruptible,
        raise_if_interrupted,
        stop_on_signals,
    )

    monkeypatch.setattr(numba, "get_num_threads", lambda: 3)  # a pool of its own
    start = threading.Thread.start

    def start_then_signal(thread):
        start(thread)
        if thread.name.startswith("lumaxlike-numba"):
            os.kill(os.getpid(), signal.SIGTERM)  # handled in this thread, right here

    monkeypatch.setattr(threading.Thread, "start", start_then_signal)
    kernel, calls = _recording_kernel()
    out = np.zeros(30, np.int64)
    with stop_on_signals(), pytest.raises(Interrupted), interruptible():
        numba_threads.run_in_blocks(kernel, 30, out)
        raise_if_interrupted()
    pool = numba_threads._pool(3)
    assert pool._threads and all(t in futures_thread._threads_queues for t in pool._threads)
    assert np.all(out == 1)
