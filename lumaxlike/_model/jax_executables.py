"""lumaxlike's solver programs stored compiled, next to JAX's compilation cache, so that a
later process loads them without tracing or lowering them.

JAX's persistent compilation cache (`jax_cache`) saves the XLA compile, but a process
still traces every program to a jaxpr and lowers it to StableHLO before it can look the
program up (for `fit`'s solver ~60 % of a later process's first-call time). `stored_jit` is
`jax.jit` with a second store in front: the compiled executable itself
(`jax.experimental.serialize_executable`), one zlib-compressed file per program, shape
and dtype, in ``<lumaxlike's JAX cache folder>/executables``. A later process deserializes
it and calls it: no tracing, no lowering, the same executable (so the same bits) as the
one compiled.

The store is used exactly where lumaxlike's JAX cache is (`jax_cache.active_folder`:
inside a lumaxlike call, the cache on, no cache folder of the user's); elsewhere, and
under ``jax_disable_jit`` or ``jax_debug_nans`` (which need JAX's own dispatch), a
`stored_jit` function is its `jax.jit` function. Turned off with the JAX cache
(``LUMAXLIKE_JAX_CACHE=0``).

An entry's name is a hash of everything the executable depends on that is not in the
call's array shapes: the function's qualified name, its static arguments, the tree
structure, shapes and dtypes of the others, the x64 and matmul-precision settings, the
source of every lumaxlike module (`_source_digest`: a program is traced from modules
anywhere in the package), the versions of Python, JAX, jaxlib, equinox, optimistix,
lineax and numpy, the device kind and platform version, ``XLA_FLAGS`` and the CPU's
model and feature flags (XLA:CPU compiles for the host's instruction set). An entry that
cannot be read or loaded is compiled again and rewritten; writes are atomic (a temporary
file renamed). Deleting the folder is always safe. Only programs whose output tree
survives pickling (tuples, lists, dicts, named tuples, None: not equinox modules) are
written; the others are compiled as `jax.jit` does, in every process.

Loading an entry runs code it holds (as JAX's own cache does): the folder is the user's
own cache folder, never shared input.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.metadata
import inspect
import math
import os
import pickle
import platform
import sys
import tempfile
import threading
import zlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jax
from jax.experimental import serialize_executable

from .._compat.jax_internals import compilation_cache_settings
from .jax_cache import active_folder

__all__ = ["EXECUTABLES_FOLDER", "stored_jit", "store_events"]

EXECUTABLES_FOLDER = "executables"
"""The store's subfolder of lumaxlike's JAX cache folder."""

_PACKAGES = ("jax", "jaxlib", "equinox", "optimistix", "lineax", "numpy")
_PACKAGE_DIR = Path(__file__).resolve().parents[1]
_memory: dict[str, Any] = {}  # entry name -> (compiled, output tree), this process
_memory_lock = threading.Lock()
store_events = {"loaded": 0, "written": 0, "compiled": 0}
"""Counts in this process (for tests and benchmarks): entries loaded from the folder,
entries written to it, programs compiled through the store (written or not)."""


@functools.cache
def _source_digest() -> str:
    """A hash of the source of every lumaxlike module (read once per process, ~2 MB)."""
    digest = hashlib.sha256()
    for path in sorted(_PACKAGE_DIR.rglob("*.py")):
        digest.update(str(path.relative_to(_PACKAGE_DIR)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()


def _cpu_description() -> str:
    """The CPU's model name and feature flags (Linux), else the platform's processor."""
    try:
        with open("/proc/cpuinfo", encoding="ascii", errors="replace") as cpuinfo:
            lines = [
                line.strip()
                for line in cpuinfo
                if line.startswith(("model name", "flags", "Features", "CPU part"))
            ]
        return "\n".join(sorted(set(lines)))
    except OSError:
        return platform.processor() or platform.machine()


def _version(package: str) -> str:
    try:
        return importlib.metadata.version(package)
    except importlib.metadata.PackageNotFoundError:
        return "absent"


@functools.cache
def _process_digest(platform_name: str) -> str:
    """What every entry of this process depends on, outside its call (hashed)."""
    device = jax.devices(platform_name)[0]
    parts = [
        _source_digest(),
        sys.version,
        *(f"{name}={_version(name)}" for name in _PACKAGES),
        platform_name,
        device.device_kind,
        str(getattr(device.client, "platform_version", "")),
        os.environ.get("XLA_FLAGS", ""),
        _cpu_description(),
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()


def _aval(leaf) -> str:
    """A dynamic argument's abstract value (shape, dtype, weak type), as jit sees it."""
    aval = jax.typeof(leaf)
    return f"{aval.str_short()}{'~' if getattr(aval, 'weak_type', False) else ''}"


def _setting(name: str):
    """A JAX setting's value in force in this thread (`jax.config`'s attribute)."""
    return getattr(jax.config, name)


def _entry_name(name: str, static: dict, treedef, leaves) -> str:
    """The entry's file name: a hash of the call's program-defining parts."""
    parts = [
        _process_digest(jax.default_backend()),
        name,
        repr(sorted(static.items())),
        str(treedef),
        *(_aval(leaf) for leaf in leaves),
        f"x64={_setting('jax_enable_x64')}",  # thread-local settings, as in force here
        f"matmul={_setting('jax_default_matmul_precision')}",
    ]
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:40]


def _load(path: Path):
    """(compiled, output tree) from an entry, or None if absent or unusable."""
    try:
        payload, in_tree, flat_tree, out_tree = pickle.loads(zlib.decompress(path.read_bytes()))
        compiled = serialize_executable.deserialize_and_load(payload, in_tree, flat_tree)
    except FileNotFoundError:
        return None
    except Exception:  # a damaged or foreign entry: compiled again, rewritten
        return None
    store_events["loaded"] += 1
    return compiled, out_tree


def _write(path: Path, compiled, out_tree) -> bool:
    """Store `compiled` at `path` (atomically); False if it cannot be stored."""
    try:
        payload, in_tree, flat_tree = serialize_executable.serialize(compiled)
        entry = (payload, in_tree, flat_tree, out_tree)  # flat_tree: the flat outputs' list
        # zlib at level 1: a fifth of the size (a fit configuration's programs took
        # 11.6 MB uncompressed), decompressed in ~3 ms per MB of entry
        blob = zlib.compress(pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL), 1)
        if pickle.loads(pickle.dumps(out_tree)) != out_tree:
            return False  # equinox modules' trees do not survive pickling
    except Exception:  # a program serialize_executable does not support
        return False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=".writing-")
        with os.fdopen(handle, "wb") as file:
            file.write(blob)
        os.replace(temporary, path)
    except OSError:  # a full or read-only folder: no entry, never an error
        return False
    return True


def stored_jit(fun: Callable | None = None, *, static_argnames: tuple[str, ...] = ()):
    """`jax.jit(fun, static_argnames=...)`, with the compiled program stored on disk.

    Usable as ``@stored_jit`` or ``@stored_jit(static_argnames=(...))``. Inside a
    lumaxlike call with the JAX cache on (`jax_cache.active_folder`), a call looks its
    program up in this process, then in the store, and only then traces and compiles it
    (and stores it); elsewhere it is the `jax.jit` function. Its `trace` and `lower` are
    the `jax.jit` function's.

    Args:
        fun: the function; its arguments other than `static_argnames` are arrays, Python
            scalars or trees of them.
        static_argnames: arguments that are part of the program (hashable, with a
            `repr` that names their value).
    Returns:
        The function, called as `fun` is.
    """
    if fun is None:
        return functools.partial(stored_jit, static_argnames=static_argnames)
    jitted = jax.jit(fun, static_argnames=static_argnames)
    signature = inspect.signature(fun)
    name = f"{fun.__module__}.{fun.__qualname__}"

    @functools.wraps(fun)
    def call(*args, **kwargs):
        folder = active_folder()
        if folder is None or _setting("jax_disable_jit") or _setting("jax_debug_nans"):
            return jitted(*args, **kwargs)
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        static = {k: v for k, v in bound.arguments.items() if k in static_argnames}
        dynamic = {k: v for k, v in bound.arguments.items() if k not in static_argnames}
        leaves, treedef = jax.tree_util.tree_flatten(dynamic)
        entry = _entry_name(name, static, treedef, leaves)
        found = _memory.get(entry)
        if found is None:
            path = folder / EXECUTABLES_FOLDER / entry
            found = _load(path) or _compile_and_write(path, fun, static, treedef, leaves)
            with _memory_lock:
                _memory[entry] = found
        compiled, out_tree = found
        return jax.tree_util.tree_unflatten(out_tree, compiled(*leaves))

    call.trace, call.lower = jitted.trace, jitted.lower  # type: ignore[attr-defined]
    return call


def _compile_and_write(path: Path, fun, static: dict, treedef, leaves):
    """(compiled, output tree) of `fun` at `static`, as a program of the flat dynamic
    arguments `leaves` (of tree `treedef`) returning flat outputs; stored at `path`."""
    out_trees = []

    def flat(*leaves):
        out_leaves, out_tree = jax.tree_util.tree_flatten(
            fun(**jax.tree_util.tree_unflatten(treedef, leaves), **static)
        )
        out_trees.append(out_tree)
        return out_leaves

    # A name of its own, and never written to JAX's cache (an infinite threshold), so
    # that JAX's cache never holds this program: an executable JAX loaded from its cache
    # serializes without its object code (XLA:CPU, jaxlib 0.10: the entry then fails
    # with "Function ... not found" when run), so only a fresh compile may be stored.
    flat.__name__ = flat.__qualname__ = f"{fun.__name__}_stored"
    with compilation_cache_settings(str(path.parents[1]), math.inf):
        lowered = jax.jit(flat).lower(*leaves)  # (tracing may compile small programs)
        hits = _cache_hits_here()
        compiled = lowered.compile()
    store_events["compiled"] += 1
    if _cache_hits_here() == hits and _write(path, compiled, out_trees[0]):
        store_events["written"] += 1
    return compiled, out_trees[0]


_this_thread = threading.local()  # .cache_hits: JAX cache hits of this thread's compiles
_listening: list[bool] = []


def _cache_hits_here() -> int:
    """JAX cache hits in this thread so far (from JAX's monitoring events; the listener
    is registered at the store's first compile, never at import)."""
    with _memory_lock:
        if not _listening:
            jax.monitoring.register_event_listener(_count_cache_hit)
            _listening.append(True)
    return getattr(_this_thread, "cache_hits", 0)


def _count_cache_hit(event: str, **kwargs) -> None:
    if event == "/jax/compilation_cache/cache_hits":
        _this_thread.cache_hits = getattr(_this_thread, "cache_hits", 0) + 1
