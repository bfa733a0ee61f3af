"""Memory meters: this process's resident set size (now, its peak inside a block, over its
life), memray's heap peak and the JAX device's peak, all in bytes.

Used by `lumaxlike profile` (`lumaxlike._profile`, in its child processes), the memory
test and the benchmarks. Only the standard library is imported at the top (psutil,
memray and JAX when a meter needs them).
"""

from __future__ import annotations

import contextlib
import gc
import os
import resource
import sys
import threading

__all__ = [
    "PeakRSS",
    "current_rss",
    "device_peak_bytes",
    "lifetime_max_rss",
    "memray_peak",
    "proc_status_kib",
    "release_free_memory",
]


def proc_status_kib(field: str) -> int | None:
    """A field of ``/proc/self/status`` in KiB (``"VmRSS"``, ``"VmHWM"``, ...); None where
    there is none (not Linux)."""
    try:
        with open("/proc/self/status") as status:
            for line in status:
                if line.startswith(field + ":"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


def current_rss() -> int:
    """Resident set size of this process [bytes]."""
    kib = proc_status_kib("VmRSS")
    if kib is not None:
        return kib * 1024
    import psutil

    return psutil.Process().memory_info().rss


def lifetime_max_rss() -> int:
    """Peak RSS over the life of this process [bytes] (``getrusage``; KiB on Linux)."""
    value = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return value if sys.platform == "darwin" else value * 1024


def release_free_memory() -> None:
    """Collect garbage and hand freed heap pages back to the OS (glibc ``malloc_trim``).

    Without it, memory freed while generating the inputs could stay in the heap and be
    reused by the measured call without raising the RSS, hiding its allocations.
    """
    gc.collect()
    with contextlib.suppress(Exception):
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)


class PeakRSS:
    """Context manager: peak resident set size [bytes] of this process inside the block.

    Resets Linux's high-water mark (``VmHWM``, via ``/proc/self/clear_refs``) on entry and
    reads it on exit: exact, no sampling. Elsewhere a thread samples the RSS every
    `interval` seconds (short spikes may be missed). ``method`` says which was used.
    """

    def __init__(self, interval: float = 0.001):
        self.interval = interval
        self.peak = 0
        self.method: str | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def __enter__(self):
        try:
            with open("/proc/self/clear_refs", "w") as clear:
                clear.write("5")
            if proc_status_kib("VmHWM") is None:
                raise OSError("no VmHWM")
            self.method = "VmHWM"
        except OSError:
            self.method = "sampled"
            self.peak = current_rss()
            self._thread = threading.Thread(target=self._sample, daemon=True)
            self._thread.start()
        return self

    def _sample(self):
        while not self._stop.is_set():
            self.peak = max(self.peak, current_rss())
            self._stop.wait(self.interval)

    def __exit__(self, *exc):
        if self.method == "VmHWM":
            high_water = proc_status_kib("VmHWM")
            assert high_water is not None  # __enter__ read it
            self.peak = high_water * 1024
        else:
            self._stop.set()
            assert self._thread is not None  # started by __enter__
            self._thread.join()
            self.peak = max(self.peak, current_rss())
        return False


@contextlib.contextmanager
def memray_peak(enabled: bool, folder: str, out: dict):
    """Track heap allocations with memray inside the block; puts its peak into ``out``."""
    if not enabled:
        yield
        return
    try:
        import memray
    except ImportError:
        out["memray_peak_bytes"] = None
        out["memray_note"] = "memray is not installed"
        yield
        return
    path = os.path.join(folder, f"memray-{os.getpid()}.bin")
    with memray.Tracker(path, file_format=memray.FileFormat.AGGREGATED_ALLOCATIONS):
        yield
    out["memray_peak_bytes"] = int(memray.FileReader(path).metadata.peak_memory)
    os.remove(path)


def device_peak_bytes():
    """``peak_bytes_in_use`` of the first JAX device on a GPU (whole process life), else None."""
    import jax

    device = jax.devices()[0]
    if device.platform != "gpu":
        return None
    stats = device.memory_stats() or {}
    return stats.get("peak_bytes_in_use")
