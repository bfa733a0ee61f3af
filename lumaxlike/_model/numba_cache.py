"""Keep numba's on-disk kernel cache in step with the equations the kernels inline.

numba keys a cached kernel on the kernel's own source file only; the equations and LM
rules it inlines live in other files, so after editing them numba would serve the old
machine code. `refresh_when_sources_change` stores a digest of all those sources next
to the cache and flushes the kernel's cache entries when the digest differs.
"""

from __future__ import annotations

import hashlib
import inspect
from pathlib import Path

__all__ = ["refresh_when_sources_change"]


def refresh_when_sources_change(kernel, *modules) -> None:
    """Flush `kernel`'s numba cache unless `modules` (and the kernel's own module) are
    unchanged since it was cached. A no-op for kernels compiled without `cache=True`."""
    cache = getattr(kernel, "_cache", None)
    cache_path = getattr(cache, "cache_path", None)
    if cache_path is None:
        return
    digest = hashlib.sha256()
    for module in (inspect.getmodule(kernel.py_func), *modules):
        digest.update(Path(inspect.getfile(module)).read_bytes())
    stamp = Path(cache_path) / f"{kernel.py_func.__qualname__}.sources.sha256"
    try:
        if stamp.exists() and stamp.read_text() == digest.hexdigest():
            return
        cache.flush()
        stamp.parent.mkdir(parents=True, exist_ok=True)
        stamp.write_text(digest.hexdigest())
    except OSError:  # read-only install: numba itself then caches nothing there either
        pass
