"""dask.distributed clusters for block inversion: a local one, or an existing one.

:class:`lumaxlike._run.pool.BlockPool` sends blocks here when it runs on more
than one process. ``distributed`` is imported only when a cluster is asked for.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # distributed is imported when a cluster is used, not with this module
    from distributed import Client, LocalCluster

__all__ = [
    "CONNECT_TIMEOUT_S",
    "ClusterError",
    "Cluster",
    "check_address",
    "open_cluster",
    "quiet_logs",
]

CONNECT_TIMEOUT_S = 30.0
"""How long to try reaching a scheduler, at the start and after losing it [s]."""

WORKER_SETUP = "lumaxlike._run.dask_worker"
"""Module every worker of a local cluster preloads (see :mod:`lumaxlike._run.dask_worker`)."""


class ClusterError(RuntimeError):
    """The cluster failed during a run: its scheduler was lost, or a block's task kept
    killing the workers that ran it. The run publishes nothing."""


@dataclass
class Cluster:
    """A connected ``distributed.Client`` and what to close after it.

    Attributes:
        client: the client blocks are submitted through.
        local: the ``LocalCluster`` this process started, or None for an existing cluster.
        threads: total worker threads of the cluster when connected.
        numba_threads: numba threads per block (None: the workers' own setting).
        address: the scheduler's address.
    """

    client: Client
    local: LocalCluster | None
    threads: int
    numba_threads: int | None
    address: str

    def close(self) -> None:
        """Close the client and, for a local cluster, its scheduler and worker processes."""
        try:
            self.client.close()
        finally:
            if self.local is not None:
                self.local.close()


def open_cluster(workers: int = 1, scheduler: str | None = None) -> Cluster:
    """Start a local cluster of ``workers`` processes, or connect to ``scheduler``.

    Args:
        workers: worker processes of a local cluster (used when ``scheduler`` is None),
            each with one task thread and ``cpu_count // workers`` numba threads.
        scheduler: address of an existing cluster's scheduler, e.g. ``"tcp://host:8786"``;
            its workers need lumaxlike installed (the same version as here).

    Raises:
        ClusterError: the local cluster failed to start (e.g. a worker was killed).
        ValueError: naming ``scheduler``, when it is not an address, cannot be reached in
            :data:`CONNECT_TIMEOUT_S`, has no worker after as long, or its workers lack
            lumaxlike or run another version of it.
    """
    import distributed

    if scheduler is None:
        numba_threads = max(1, (os.cpu_count() or 1) // workers)
        try:  # a worker killed while starting: one line, not dask's traceback
            local = distributed.LocalCluster(
                n_workers=workers,
                threads_per_worker=1,
                processes=True,
                host="127.0.0.1",
                dashboard_address=None,  # no dashboard, and its bare HTTP server on any free port
                scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                silence_logs=logging.ERROR,
                preload=[WORKER_SETUP],
            )
        except Exception as error:
            raise ClusterError(
                f"the local cluster of {workers} workers failed to start "
                f"({_one_line(error)}); nothing was written"
            ) from error
        try:
            client = distributed.Client(local, set_as_default=False)
        except BaseException as error:
            local.close()
            if isinstance(error, Exception):
                raise ClusterError(
                    f"cannot connect to the local cluster ({_one_line(error)}); nothing was written"
                ) from error
            raise
        return Cluster(client, local, workers, numba_threads, local.scheduler_address)
    if not isinstance(scheduler, str) or not scheduler:
        raise ValueError(
            f"scheduler must be a scheduler address such as 'tcp://host:8786', got {scheduler!r}"
        )
    check_address(scheduler)
    try:
        client = distributed.Client(scheduler, timeout=CONNECT_TIMEOUT_S, set_as_default=False)
    except (OSError, TimeoutError, ValueError, TypeError) as error:
        raise ValueError(f"scheduler {scheduler}: cannot connect ({_one_line(error)})") from None
    try:
        threads = _check_workers(client, scheduler)
    except BaseException:
        client.close()
        raise
    return Cluster(client, None, threads, None, scheduler)


def check_address(scheduler: str) -> None:
    """ValueError naming ``scheduler`` unless it parses as a scheduler address (a tcp/tls
    address needs a host and a port). Checked before any ``distributed.Client`` exists: a
    client built on a malformed address failed, then hung 60 s closing itself and printed
    an "Exception ignored ... TimeoutError" traceback."""
    from distributed.comm.addressing import parse_address, parse_host_port

    try:
        scheme, location = parse_address(scheduler)
        if scheme in ("tcp", "tls", "ws", "wss"):
            host, port = parse_host_port(location)
            if not host or not port:
                raise ValueError("a host and a port are needed")
    except (ValueError, TypeError) as error:
        raise ValueError(
            f"scheduler {scheduler}: not a scheduler address such as "
            f"'tcp://host:8786' ({_one_line(error)})"
        ) from None


def _check_workers(client, scheduler: str) -> int:
    """Total threads of the cluster's workers, once they are known to have lumaxlike."""
    from .. import __version__

    try:  # workers of a batch job may still be starting
        client.wait_for_workers(1, timeout=CONNECT_TIMEOUT_S)
    except TimeoutError:
        raise ValueError(
            f"scheduler {scheduler}: the cluster has no workers "
            f"(none came in {CONNECT_TIMEOUT_S:g} s)"
        ) from None
    versions = client.get_versions(packages=["lumaxlike"])["workers"]
    wrong = {
        address: info["packages"].get("lumaxlike")
        for address, info in versions.items()
        if info["packages"].get("lumaxlike") != __version__
    }
    if wrong:
        found = ", ".join(
            f"{address} ({version or 'not installed'})"
            for address, version in sorted(wrong.items())
        )
        raise ValueError(f"scheduler {scheduler}: workers need lumaxlike {__version__}: {found}")
    return sum(info["nthreads"] for info in client.scheduler_info(n_workers=-1)["workers"].values())


def _one_line(error: BaseException) -> str:
    return " ".join(str(error).split()) or type(error).__name__


def quiet_logs() -> None:
    """Make dask.distributed's loggers in this process write nothing to the console, for
    the rest of the process: for a command line whose own message reports the outcome.

    dask configures a stderr handler on ``distributed`` and on some of its children
    (``distributed.client``, ...), which do not propagate; their levels are raised. Not
    restored: after a lost scheduler, the client still logs its failed reconnection from
    its own thread once the run has failed and closed it.
    """
    import distributed  # noqa: F401 - configures its loggers first

    for name in list(logging.root.manager.loggerDict):
        if name == "distributed" or name.startswith("distributed."):
            for handler in logging.getLogger(name).handlers:
                if isinstance(handler, logging.StreamHandler):
                    handler.setLevel(logging.CRITICAL + 1)
