"""Inverting one block of pixels: per-band parameters, solver threads, worker processes.

Shared by the file pipeline (:mod:`lumaxlike._io.file_inversion`) and the xarray API
(:mod:`lumaxlike._xarray`). Everything here works on NumPy arrays in lumaxlike's layout:
reflectance ``(..., bands)`` in r [1/sr], geometry ``(..., 3)``.
"""

from __future__ import annotations

import contextlib
import multiprocessing
import os
import signal
import sys
import threading
import time
from collections import deque
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass

import numpy as np

from .._inverse.invert import SOLVERS, invert
from .._params import HapkeParams
from .._shapes import check_choice
from .._signals import deferred
from .writers import RESULT_FIELDS

__all__ = [
    "SOLVERS",
    "SolverOptions",
    "BlockPool",
    "band_groups",
    "check_solver",
    "invert_block",
    "numba_threads",
    "per_band_params",
]

def check_solver(solver) -> str:
    """Return ``solver`` if it is ``"jax"`` or ``"numba"``, else raise ValueError naming it."""
    check_choice("solver", solver, SOLVERS)
    return solver


@dataclass(frozen=True)
class SolverOptions:
    """How to run :func:`lumaxlike.invert` on a block.

    Attributes:
        solver: ``"jax"`` or ``"numba"``.
        max_iter, tol, chunk_size: passed to :func:`lumaxlike.invert` (None = its default).
        num_threads: threads of the numba solver for this block (None = numba's current
            setting); ignored by the JAX solver.
    """

    solver: str
    max_iter: int | None = None
    tol: float | None = None
    chunk_size: int | None = None
    num_threads: int | None = None

    def __post_init__(self):
        check_solver(self.solver)
        if self.num_threads is not None and int(self.num_threads) < 1:
            raise ValueError(f"num_threads must be a positive integer, got {self.num_threads!r}")


def per_band_params(params, bands: int, name: str = "params") -> list[HapkeParams]:
    """One :class:`lumaxlike.HapkeParams` per band.

    Args:
        params: one ``HapkeParams`` for every band, or a sequence of one per band.
        bands: number of spectral bands of the cube.
        name: argument name for messages.

    Returns:
        list of ``bands`` parameter objects (the same object repeated for shared values).

    Raises:
        ValueError: naming ``name``, when the sequence length differs from ``bands`` or an
            element is not a ``HapkeParams``.
    """
    if isinstance(params, HapkeParams):
        return [params] * bands
    if not isinstance(params, Sequence) or isinstance(params, (str, bytes)):
        raise ValueError(f"{name} must be a lumaxlike.HapkeParams or a sequence of one per band, "
                         f"got {type(params).__name__}")
    if len(params) != bands:
        raise ValueError(f"{name} gives {len(params)} per-band parameter sets for {bands} bands")
    for item in params:
        if not isinstance(item, HapkeParams):
            raise ValueError(f"{name} must hold lumaxlike.HapkeParams, got {type(item).__name__}")
    return list(params)


def band_groups(params: list[HapkeParams]) -> list[tuple[HapkeParams, np.ndarray]]:
    """Bands sharing one parameter object: ``[(params, band indices), ...]``."""
    groups: dict[int, tuple[HapkeParams, list[int]]] = {}
    for band, item in enumerate(params):
        groups.setdefault(id(item), (item, []))[1].append(band)
    return [(item, np.asarray(bands)) for item, bands in groups.values()]


_WORKQUEUE_LOCK = threading.Lock()


def _workqueue_guard():
    """A lock for numba calls from worker threads when numba's threading layer is
    ``workqueue`` (or not chosen yet): that layer aborts the process on concurrent use."""
    import numba

    if threading.current_thread() is threading.main_thread():
        return contextlib.nullcontext()
    try:
        layer = numba.threading_layer()
    except ValueError:  # no parallel kernel has run yet: the layer is still undecided
        layer = None
    return _WORKQUEUE_LOCK if layer in (None, "workqueue") else contextlib.nullcontext()


@contextlib.contextmanager
def numba_threads(count: int | None):
    """Run the enclosed numba calls with ``count`` threads (None: numba's setting).

    ``numba.set_num_threads`` is thread-local; the previous value is restored after.
    """
    import numba

    with _workqueue_guard():
        if count is None:
            yield
            return
        previous = numba.get_num_threads()
        numba.set_num_threads(min(int(count), numba.config.NUMBA_NUM_THREADS))
        try:
            yield
        finally:
            numba.set_num_threads(previous)


def invert_block(refl, to_sun, to_sensor, normal, params, options: SolverOptions,
                 refl_sigma=None, w0=None) -> dict[str, np.ndarray]:
    """Invert a block of pixels for w, band groups with their own parameters.

    Args:
        refl: bidirectional reflectance r [1/sr], shape ``pixels + (bands,)``.
        to_sun, to_sensor, normal: direction vectors, shape ``pixels + (3,)``.
        params: list of one :class:`lumaxlike.HapkeParams` per band
            (see :func:`per_band_params`).
        options: solver and its settings.
        refl_sigma: standard uncertainty of r [1/sr], a scalar or an array broadcastable
            to ``refl`` (e.g. per pixel); None for no uncertainty propagation.
        w0: optional starting albedo, broadcastable to ``refl``.

    Returns:
        ``{field: array}`` for :data:`~lumaxlike._io.writers.RESULT_FIELDS`, each of the
        shape of ``refl`` (see :class:`lumaxlike.InversionResult`).
    """
    refl = np.asarray(refl)
    groups = band_groups(params)
    kwargs = {"max_iter": options.max_iter, "tol": options.tol, "chunk_size": options.chunk_size}
    kwargs = {key: value for key, value in kwargs.items() if value is not None}
    # invert takes one refl_sigma per band; a per-pixel one (e.g. REFF converted to r)
    # scales sigma_w = refl_sigma / |dr/dw| linearly, so solve with 1 and scale after.
    sigma_scale = None
    if refl_sigma is not None and np.ndim(refl_sigma) > 0:
        sigma_scale = np.broadcast_to(refl_sigma, refl.shape)
        refl_sigma = 1.0
    if w0 is not None:
        w0 = np.broadcast_to(w0, refl.shape)
    fields: dict[str, np.ndarray] = {}
    solver_context = numba_threads(options.num_threads) if options.solver == "numba" else contextlib.nullcontext()
    with solver_context:
        for group_params, bands in groups:
            whole = len(groups) == 1
            pick = (lambda a: a) if whole else (lambda a: np.ascontiguousarray(a[..., bands]))
            result = invert(
                pick(refl), to_sun, to_sensor, normal, group_params, options.solver,
                w0=None if w0 is None else pick(w0),
                refl_sigma=refl_sigma,
                **kwargs,
            )
            for field in RESULT_FIELDS:
                values = np.asarray(getattr(result, field))
                if whole:
                    fields[field] = values
                else:
                    if field not in fields:
                        fields[field] = np.empty(refl.shape, values.dtype)
                    fields[field][..., bands] = values
    if sigma_scale is not None:
        fields["sigma"] = (fields["sigma"] * sigma_scale).astype(fields["sigma"].dtype, copy=False)
    return fields


PARENT_POLL_SECONDS = 0.5
"""How often a worker process checks that its parent is still alive [s]."""


def _worker_init(num_threads: int, parent_pid: int) -> None:
    """Worker-process start: end with the parent, leave Ctrl-C to it, cap numba's threads.

    A worker ends when its parent ends, however the parent ends (even SIGKILL): on Linux
    the kernel kills it (``prctl(PR_SET_PDEATHSIG)``); everywhere a daemon thread polls
    the parent's id. SIGINT is ignored: a Ctrl-C reaches every process of the terminal's
    group, and the parent stops the workers itself.
    """
    import numba

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    _die_with_parent(parent_pid)
    numba.set_num_threads(min(num_threads, numba.config.NUMBA_NUM_THREADS))


def _die_with_parent(parent_pid: int) -> None:
    if sys.platform.startswith("linux"):
        import ctypes

        PR_SET_PDEATHSIG = 1
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)

    def watch():
        while os.getppid() == parent_pid:
            time.sleep(PARENT_POLL_SECONDS)
        os._exit(1)

    if os.getppid() != parent_pid:  # the parent ended before the kernel was told
        os._exit(1)
    threading.Thread(target=watch, name="lumaxlike-parent-watch", daemon=True).start()


class _Done:
    """An already computed result with the :class:`concurrent.futures.Future` interface."""

    def __init__(self, value):
        self._value = value

    def result(self):
        return self._value


class BlockPool:
    """Runs :func:`invert_block` (or another module-level ``task`` with its signature and
    result) in this process or in spawned worker processes, in order.

    With ``workers == 1`` blocks are inverted here, one at a time. With more, blocks go
    to a pool of processes started with the ``spawn`` method (JAX is not fork-safe), each
    with ``cpu_count // workers`` numba threads; at most ``2 * workers`` blocks are in
    flight, so memory stays bounded by a few blocks.

    Use :meth:`submit` and :meth:`results` (results come back in submission order).
    """

    def __init__(self, workers: int = 1, task=None):
        self.task = task  # None: invert_block, looked up at each call
        if int(workers) != workers or workers < 1:
            raise ValueError(f"workers must be a positive integer, got {workers!r}")
        self.workers = int(workers)
        self._pending: deque = deque()
        self._executor = None
        if self.workers > 1:
            threads = max(1, (os.cpu_count() or 1) // self.workers)
            self._executor = ProcessPoolExecutor(
                max_workers=self.workers,
                mp_context=multiprocessing.get_context("spawn"),
                initializer=_worker_init,
                initargs=(threads, os.getpid()),
            )

    @property
    def max_in_flight(self) -> int:
        """Blocks that may be queued before the caller must collect a result."""
        return 2 * self.workers if self._executor is not None else 1

    def submit(self, key, *args, **kwargs) -> None:
        """Queue ``task(*args, **kwargs)``; ``key`` comes back with its result."""
        task = invert_block if self.task is None else self.task
        if self._executor is None:
            future = _Done(task(*args, **kwargs))
        else:
            future = self._executor.submit(task, *args, **kwargs)
        self._pending.append((key, future))

    def full(self) -> bool:
        """True when the caller should collect a result before submitting more."""
        return len(self._pending) >= self.max_in_flight

    def pop(self):
        """``(key, fields)`` of the oldest submitted block, waiting for it if needed."""
        key, future = self._pending.popleft()
        return key, future.result()

    def __len__(self) -> int:
        return len(self._pending)

    def close(self, *, terminate: bool = False) -> None:
        """Stop the worker processes; pending work is cancelled, and with ``terminate``
        running work too (the workers are killed instead of awaited)."""
        if self._executor is None:
            return
        executor, self._executor = self._executor, None
        self._pending.clear()
        if terminate:
            for process in list((executor._processes or {}).values()):
                process.terminate()
        executor.shutdown(wait=True, cancel_futures=True)

    def __enter__(self) -> "BlockPool":
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        with deferred():
            self.close(terminate=exc_type is not None)
