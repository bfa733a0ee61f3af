"""Where the blocks of a file run are solved: here, or on a dask.distributed cluster.

:class:`BlockPool` takes blocks (a task and its arrays) and gives their results back in
the order they were submitted, so the run's one writer writes them in order; a local
cluster or an existing one (:mod:`lumaxlike._run.cluster`) runs them in parallel.
"""

from __future__ import annotations

from collections import deque
from typing import Any, Protocol

from .._signals import deferred

__all__ = ["BlockPool"]


class _Result(Protocol):
    """What a queued block holds: a distributed future, or `_Done`."""

    def result(self) -> Any: ...


class _Done:
    """An already computed result with the future's ``result`` method."""

    def __init__(self, value):
        self._value = value

    def result(self):
        return self._value


def _run_block(function, numba_thread_count, *args, **kwargs):
    """``function(*args, **kwargs)`` on a cluster worker, with ``numba_thread_count`` numba
    threads in this task's thread (None: the worker's setting)."""
    if numba_thread_count is None:
        return function(*args, **kwargs)
    import numba

    previous = numba.get_num_threads()  # thread-local: this task's thread only
    numba.set_num_threads(
        min(int(numba_thread_count), numba.config.NUMBA_NUM_THREADS)  # type: ignore[attr-defined]  # numba.config sets its options at import
    )
    try:
        return function(*args, **kwargs)
    finally:
        numba.set_num_threads(previous)


class BlockPool:
    """Runs a block task here or on a dask.distributed cluster, results in order.

    With ``workers == 1`` and no ``scheduler``, blocks are inverted here, one at a time.
    With ``workers > 1``, a ``distributed.LocalCluster`` of ``workers`` processes (spawned,
    one task thread and ``cpu_count // workers`` numba threads each, no dashboard, logs
    below ERROR silenced) runs them; its processes end with this one, however it ends.
    With ``scheduler``, blocks go to that existing cluster (its workers need lumaxlike;
    numba's thread count is theirs). At most ``2 *`` the cluster's worker threads blocks
    are in flight, so memory stays bounded by a few blocks. The caller stays the only
    writer: results come back here, in submission order.

    A worker lost mid-run (killed, out of memory) is replaced and its blocks run again
    elsewhere; the run fails with :class:`lumaxlike._run.cluster.ClusterError` when the
    scheduler is lost or a block's task kills every worker that tries it (dask's
    ``distributed.scheduler.allowed-failures``). An exception raised by the task itself
    comes back unchanged.

    Use :meth:`submit`, :meth:`full`, :meth:`pop` and ``len()``; close with :meth:`close`
    or a ``with`` block.

    Args:
        workers: processes of a local cluster (1 = in this process); ignored with
            ``scheduler``.
        scheduler: address of an existing cluster's scheduler (``"tcp://host:8786"``),
            or None.
        function: what a block runs (an operation's block task,
            `lumaxlike._operations.declaration.Operation.block`); it must be importable
            by the workers.
    """

    def __init__(self, workers: int, scheduler: str | None, function):
        if isinstance(workers, bool) or int(workers) != workers or workers < 1:
            raise ValueError(f"workers must be a positive integer, got {workers!r}")
        self.workers = int(workers)
        self.scheduler = scheduler
        self.function = function
        self._pending: deque = deque()
        self._cluster = None
        if scheduler is not None or self.workers > 1:
            from .cluster import open_cluster

            self._cluster = open_cluster(self.workers, scheduler)

    @property
    def max_in_flight(self) -> int:
        """Blocks that may be queued before the caller must collect a result."""
        return 2 * self._cluster.threads if self._cluster is not None else 1

    def submit(self, key, *args, **kwargs) -> None:
        """Queue ``function(*args, **kwargs)``; ``key`` comes back with its result."""
        future: _Result
        if self._cluster is None:
            future = _Done(self.function(*args, **kwargs))
        else:
            import dask

            # the block's arrays travel inside its task (so the scheduler can run it again
            # if its worker dies), bigger than dask's "large graph" warning expects
            with dask.config.set({"distributed.admin.large-graph-warning-threshold": "1 TiB"}):
                future = self._cluster.client.submit(
                    _run_block,
                    self.function,
                    self._cluster.numba_threads,
                    *args,
                    pure=False,
                    **kwargs,
                )
        self._pending.append((key, future))

    def put_done(self, key, result) -> None:
        """Queue a block whose ``result`` is known already (e.g. from a run's journal): it
        comes back from :meth:`pop` in its turn, as if it had been run."""
        self._pending.append((key, _Done(result)))

    def full(self) -> bool:
        """True when the caller should collect a result before submitting more."""
        return len(self._pending) >= self.max_in_flight

    def pop(self):
        """``(key, fields)`` of the oldest submitted block, waiting for it if needed.

        Raises:
            ClusterError: the cluster failed (see the class description).
        """
        key, future = self._pending.popleft()
        if self._cluster is None:
            return key, future.result()
        try:
            return key, future.result()
        except Exception as error:
            from distributed import KilledWorker

            from .cluster import ClusterError

            if future.status == "error" and not isinstance(error, KilledWorker):
                raise  # the task's own exception
            raise ClusterError(
                f"the dask cluster at {self._cluster.address} failed: {_describe(error)}"
            ) from error

    def __len__(self) -> int:
        return len(self._pending)

    def close(self, *, terminate: bool = False) -> None:
        """Stop: pending blocks are cancelled, and a local cluster's processes end.

        ``terminate`` is accepted for the interface's sake: a local cluster's workers are
        stopped the same way either way, and an existing cluster keeps running.
        """
        self._pending.clear()
        if self._cluster is None:
            return
        cluster, self._cluster = self._cluster, None
        cluster.close()

    def __enter__(self) -> BlockPool:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        with deferred():
            self.close(terminate=exc_type is not None)


def _describe(error: BaseException) -> str:
    from distributed import KilledWorker

    if isinstance(error, KilledWorker):
        return f"a block's task ended every worker that ran it ({error})"
    text = " ".join(str(error).split())
    return f"{type(error).__name__}: {text}" if text else type(error).__name__
