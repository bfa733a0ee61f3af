"""JAX's persistent compilation cache for lumaxlike's own programs, in lumaxlike's cache.

JAX compiles every program again in every process (the `fit` solver's programs take
10-20 s on 2 cores); its persistent compilation cache keeps compiled programs on disk so
that a later process loads them instead. lumaxlike turns that cache on for its own
programs only, while one of its JAX computations runs (`compilation_cache_scope`, entered
by `forward.precision_scope` around every JAX call lumaxlike makes): the cache folder is
``<lumaxlike's cache directory>/jax`` (`numba_cache.cache_dir`: ``$LUMAXLIKE_CACHE_DIR``
or the per-user cache folder that holds lumaxlike's numba kernels).

The user's JAX configuration is never changed, at import or later:

- the folder and the minimum compile time are JAX's thread-local settings, set for the
  duration of the scope only; JAX's process-wide cache object, which JAX creates at the
  first compilation that uses a cache, is dropped (``reset_cache``) when the last scope in
  the process ends, so the user's own programs, compiled outside lumaxlike's calls, are
  not cached by lumaxlike (nor ever read from its folder);
- a cache folder the user configured (``jax_compilation_cache_dir``, by
  ``jax.config.update``, the ``JAX_COMPILATION_CACHE_DIR`` environment variable or
  ``jax.experimental.compilation_cache.compilation_cache.set_cache_dir``) is used as it
  is, with the user's own thresholds: lumaxlike adds nothing;
- JAX's cache switched off by the user (``jax_enable_compilation_cache = False``) stays off.

(JAX has one cache object per process: while a lumaxlike call is compiling in one thread,
a program another thread of the user's compiles at the same moment can be looked up in,
and if it takes JAX's own threshold of 1 s to compile, written to lumaxlike's folder.)

Turning lumaxlike's JAX cache off: the environment variable ``LUMAXLIKE_JAX_CACHE=0``
(also ``false``, ``no``, ``off``), read at each call. A folder that cannot be created
means no cache, never an error. Deleting the folder is always safe (JAX keys each entry on
the program, the JAX and XLA versions, the device and the compile options).

Inside the scope, lumaxlike's solver programs are also stored compiled, in the folder's
``executables`` subfolder, so that a later process neither traces nor lowers them
(`jax_executables.stored_jit`, used where `active_folder` is set); the cache's switch and
folder are theirs too.

Only programs that took at least `MIN_COMPILE_SECONDS` to compile are written: the
solvers' programs (0.1-20 s each), not the millisecond element-wise programs that JAX
compiles for every array shape it meets, which would fill the folder with one entry per
input size and cost as much to load as to compile.
"""

from __future__ import annotations

import contextlib
import os
import threading
from pathlib import Path

# JAX's thread-local cache settings have no public API: `lumaxlike._compat.jax_internals`
from .._compat.jax_internals import (
    compilation_cache_dir,
    compilation_cache_enabled,
    compilation_cache_settings,
    reset_compilation_cache,
)
from .numba_cache import cache_dir

__all__ = [
    "JAX_CACHE_VARIABLE",
    "MIN_COMPILE_SECONDS",
    "active_folder",
    "compilation_cache_scope",
    "jax_cache_dir",
]

JAX_CACHE_VARIABLE = "LUMAXLIKE_JAX_CACHE"
"""Environment variable: ``0``, ``false``, ``no`` or ``off`` turn lumaxlike's JAX cache off."""

MIN_COMPILE_SECONDS = 0.05
"""Programs that compile faster than this [s] are not written to lumaxlike's JAX cache."""

_OFF = {"0", "false", "no", "off"}
_lock = threading.Lock()
_active_scopes = 0  # scopes using lumaxlike's folder, over all threads
_this_thread = threading.local()  # .folder: the folder of this thread's scope, if any


def jax_cache_dir() -> Path:
    """The folder of lumaxlike's JAX compilation cache (it may not exist yet)."""
    return cache_dir() / "jax"


def active_folder() -> Path | None:
    """lumaxlike's JAX cache folder if this thread is inside a `compilation_cache_scope`
    that uses it, else None (the cache off, the user's own folder, or no scope)."""
    return getattr(_this_thread, "folder", None)


def _folder_for_scope() -> str | None:
    """lumaxlike's JAX cache folder if this scope should use it, else None."""
    if os.environ.get(JAX_CACHE_VARIABLE, "").strip().lower() in _OFF:
        return None
    if not compilation_cache_enabled():  # the user turned JAX's cache off
        return None
    if compilation_cache_dir() is not None:  # the user's own, or ours above
        return None
    folder = jax_cache_dir()
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    if not os.access(folder, os.W_OK | os.X_OK):
        return None
    return str(folder)


@contextlib.contextmanager
def compilation_cache_scope():
    """A context in which JAX reads and writes compiled programs in lumaxlike's folder.

    Does nothing where the cache is off (``LUMAXLIKE_JAX_CACHE=0`` or JAX's own cache
    switched off), where the user configured a JAX cache folder (theirs is used), inside
    another such scope, or where the folder cannot be created or written.
    """
    global _active_scopes
    folder = _folder_for_scope()
    if folder is None:
        yield
        return
    with _lock:
        _active_scopes += 1
    _this_thread.folder = Path(folder)
    try:
        with compilation_cache_settings(folder, MIN_COMPILE_SECONDS):
            yield
    finally:
        _this_thread.folder = None
        with _lock:
            _active_scopes -= 1
            if _active_scopes == 0:
                # JAX's cache object, created at the scope's first compilation, points at
                # lumaxlike's folder; dropped, JAX creates the next one from the settings
                # in force then (none outside a scope, unless the user sets some).
                reset_compilation_cache()
