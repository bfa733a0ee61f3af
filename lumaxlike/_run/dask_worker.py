"""Preloaded by the worker processes of the local cluster lumaxlike starts (dask's preload
hook: ``dask_setup`` runs in the worker's main thread before it takes tasks).

A Ctrl-C reaches every process of the terminal's group: the workers ignore it, and the
parent stops them itself (a worker process also ends when its parent ends, by dask's
own watch on its parent).
"""

import signal


def dask_setup(worker) -> None:
    """Ignore SIGINT in this worker process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
