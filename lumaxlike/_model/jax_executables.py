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
file renamed; one a killed process left is removed an hour on). Deleting the folder is
always safe. Only programs whose output tree
survives pickling (tuples, lists, dicts, named tuples, None: not equinox modules) are
written; the others are compiled as `jax.jit` does, in every process.

Compiling ahead: a `stored_jit` function's ``ahead(*args)`` takes the call's arguments
(arrays, or `jax.ShapeDtypeStruct` in their place), traces and lowers the program in the
calling thread and compiles it on a worker thread (XLA compiles without Python's lock),
returning the outputs' shapes at once, so that an operation can chain the programs of
its first chunk and have them compile side by side while it goes on (`fit`'s solver while
its starting w is found, `sample`'s chunk program while the warm start is fitted,
`unmix`'s solve while numba compiles its finish). A call with the same shapes waits for
that compile (docs/benchmarks.md: on a TPU v5e's 13-core host, `fit`'s first-call compile
went from 55.6 to 23.3 s, `unmix`'s from 26.7 to 19.2 s).

Loading an entry runs code it holds (as JAX's own cache does): the folder is the user's
own cache folder, never shared input.
"""

from __future__ import annotations

import collections
import contextlib
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
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path
from typing import Any, NamedTuple

import jax
import numpy as np
from jax.experimental import serialize_executable

from .._compat.jax_internals import compilation_cache_settings
from .cache_temporaries import remove_stale_temporaries
from .device_precision import default_is_cpu
from .jax_cache import active_folder, compilation_cache_scope

__all__ = ["EXECUTABLES_FOLDER", "compiling_ahead", "fetched_by", "stored_jit", "store_events"]

EXECUTABLES_FOLDER = "executables"
"""The store's subfolder of lumaxlike's JAX cache folder."""

_PACKAGES = ("jax", "jaxlib", "equinox", "optimistix", "lineax", "numpy")
_PACKAGE_DIR = Path(__file__).resolve().parents[1]
_memory: dict[str, Any] = {}  # entry name -> (compiled, output tree), this process
_memory_lock = threading.Lock()
store_events = {"loaded": 0, "written": 0, "compiled": 0}
"""Counts in this process (for tests and benchmarks): entries loaded from the folder,
entries written to it, programs compiled through the store (written or not)."""
fetched_by: collections.Counter = collections.Counter()
"""(function name, ``"ahead"`` or ``"call"``) -> how often this process loaded or
compiled one of its programs for a function's ``ahead`` or for a call that found none
ready (for tests: a call after ``ahead`` with the same shapes finds it ready)."""


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
    """A dynamic argument's abstract value (shape, dtype, weak type), as jit sees it.
    An array's is kept by its type, shape, dtype, weak type and the precision in force
    (`jax.typeof` costs ~10 us, and a `fit` call's programs take ~1000 leaves)."""
    if not isinstance(leaf, (jax.Array, np.ndarray, jax.ShapeDtypeStruct)):
        return _aval_text(leaf)
    weak = getattr(leaf, "weak_type", False)
    key = (type(leaf), leaf.shape, leaf.dtype, weak, _setting("jax_enable_x64"))
    text = _avals.get(key)
    if text is None:
        text = _avals[key] = _aval_text(leaf)
    return text


def _aval_text(leaf) -> str:
    aval = jax.typeof(leaf)
    return f"{aval.str_short()}{'~' if getattr(aval, 'weak_type', False) else ''}"


_avals: dict = {}  # `_aval`'s texts


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


class _Program(NamedTuple):
    """A compiled program of flat arguments, the tree of its outputs, and its outputs'
    (shape, dtype, weak type), flat."""

    compiled: Any
    out_tree: Any
    outputs: tuple


class _Pending(NamedTuple):
    """A program loading or compiling ahead (`stored_jit`'s ``ahead``): the future
    `_Program` (None where a stored entry would not load), and its output tree and
    outputs as `_Program`'s."""

    future: Future
    out_tree: Any
    outputs: tuple


class _Stored(NamedTuple):
    """An entry as read from the store, its executable not yet loaded."""

    payload: bytes
    in_tree: Any
    flat_tree: Any
    out_tree: Any
    outputs: tuple


def _read(path: Path) -> _Stored | None:
    """The entry at `path`, or None if absent or unreadable."""
    try:
        return _Stored(*pickle.loads(zlib.decompress(path.read_bytes())))
    except FileNotFoundError:
        return None
    except Exception:  # a damaged or foreign entry: compiled again, rewritten
        return None


def _loaded(stored: _Stored) -> _Program | None:
    """The `_Program` of a stored entry, its executable loaded onto the device; None if
    it will not load (a foreign or damaged entry: compiled again, rewritten)."""
    try:
        compiled = serialize_executable.deserialize_and_load(
            stored.payload, stored.in_tree, stored.flat_tree
        )
    except Exception:
        return None
    with _memory_lock:
        store_events["loaded"] += 1
    return _Program(compiled, stored.out_tree, stored.outputs)


def _load(path: Path) -> _Program | None:
    """The `_Program` of an entry, or None if absent or unusable."""
    stored = _read(path)
    return None if stored is None else _loaded(stored)


_TEMPORARY_PREFIX = ".writing-"  # an entry being written


def _write(path: Path, program: _Program) -> bool:
    """Store `program` at `path` (atomically); False if it cannot be stored."""
    try:
        payload, in_tree, flat_tree = serialize_executable.serialize(program.compiled)
        # flat_tree: the flat outputs' list
        entry = (payload, in_tree, flat_tree, program.out_tree, program.outputs)
        # zlib at level 1: a fifth of the size (a fit configuration's programs took
        # 11.6 MB uncompressed), decompressed in ~3 ms per MB of entry
        blob = zlib.compress(pickle.dumps(entry, protocol=pickle.HIGHEST_PROTOCOL), 1)
        if pickle.loads(pickle.dumps(program.out_tree)) != program.out_tree:
            return False  # equinox modules' trees do not survive pickling
    except Exception:  # a program serialize_executable does not support
        return False
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        remove_stale_temporaries(path.parent, f"{_TEMPORARY_PREFIX}*")
        handle, temporary = tempfile.mkstemp(dir=path.parent, prefix=_TEMPORARY_PREFIX)
    except OSError:  # a read-only folder: no entry, never an error
        return False
    try:
        with os.fdopen(handle, "wb") as file:
            file.write(blob)
        os.replace(temporary, path)
    except OSError:  # a full disk: no entry, and no part of one left behind
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        return False
    return True


def stored_jit(
    fun: Callable | None = None,
    *,
    static_argnames: tuple[str, ...] = (),
    store_on_cpu: bool = True,
):
    """`jax.jit(fun, static_argnames=...)`, with the compiled program stored on disk.

    Usable as ``@stored_jit`` or ``@stored_jit(static_argnames=(...))``. Inside a
    lumaxlike call with the JAX cache on (`jax_cache.active_folder`), a call looks its
    program up in this process, then in the store, and only then traces and compiles it
    (and stores it); elsewhere it is the `jax.jit` function. Its ``ahead`` (same
    arguments, `jax.ShapeDtypeStruct` allowed) starts that compile on a worker thread and
    returns the outputs' shapes (the module docstring). Its `trace` and `lower` are the
    `jax.jit` function's.

    Args:
        fun: the function; its arguments other than `static_argnames` are arrays, Python
            scalars or trees of them.
        static_argnames: arguments that are part of the program (hashable, with a
            `repr` that names their value).
        store_on_cpu: False stores the programs only where JAX's default backend is not
            the CPU; on the CPU they are kept in this process only (compiled ahead and
            looked up as the others; JAX's own cache keeps them for later processes):
            for programs whose deserialized executable does not run on XLA:CPU
            (`sample`'s chunk programs: a later process crashed running them, jaxlib
            0.10; on a TPU v5e they run: a second process's `sample` compiles for 7.2 s
            with them stored, 15.4 s without).
    Returns:
        The function, called as `fun` is.
    """
    if fun is None:
        return functools.partial(
            stored_jit, static_argnames=static_argnames, store_on_cpu=store_on_cpu
        )
    jitted = jax.jit(fun, static_argnames=static_argnames)
    signature = inspect.signature(fun)

    def entry_of(args, kwargs):
        return _call_of(fun, signature, static_argnames, store_on_cpu, args, kwargs)

    @functools.wraps(fun)
    def call(*args, **kwargs):
        found = entry_of(args, kwargs)
        if found is None:
            return jitted(*args, **kwargs)
        program = _memory.get(found.entry)
        if not isinstance(program, _Program):
            if isinstance(program, _Pending):  # loading or compiling ahead (`ahead`): wait
                # None: a stored entry that would not load, compiled again here
                program = _waited(found, program) or _compile_and_write(fun, found)
            else:
                program = (found.store and _load(found.path)) or _compile_and_write(fun, found)
                fetched_by[fun.__name__, "call"] += 1
            with _memory_lock:
                _memory[found.entry] = program
        leaves = found.leaves
        return jax.tree_util.tree_unflatten(program.out_tree, program.compiled(*leaves))

    def ahead(*args, **kwargs):
        """Start compiling the program of a call with these arguments on a worker thread
        (arrays, or `jax.ShapeDtypeStruct` in their place), unless this process has it or
        the store holds it; a later call with the same shapes waits for it. Returns the
        call's outputs as `jax.ShapeDtypeStruct` leaves (None where the store is not
        used, `compiling_ahead`)."""
        found = entry_of(args, kwargs)
        return None if found is None else _ahead_of(fun, found)

    call.trace, call.lower = jitted.trace, jitted.lower  # type: ignore[attr-defined]
    call.ahead = ahead  # type: ignore[attr-defined]
    return call


def _waited(found: _Call, pending: _Pending) -> _Program | None:
    """The program `ahead` started for the call `found` (None: a stored entry that would
    not load); a load or compile that raised is forgotten before it is raised again, so
    that the next call compiles anew, as `jax.jit` would."""
    try:
        return pending.future.result()
    except BaseException:
        with _memory_lock:
            if _memory.get(found.entry) is pending:
                del _memory[found.entry]
        raise


class _Call(NamedTuple):
    """A call's entry: its name and path in the store, whether this backend stores it
    (`stored_jit`'s ``store_on_cpu``), its static arguments and its dynamic ones as
    `leaves` of the tree `treedef`."""

    entry: str
    path: Path
    store: bool
    static: dict
    treedef: Any
    leaves: list


def _call_of(fun, signature, static_argnames, store_on_cpu: bool, args, kwargs) -> _Call | None:
    """The `_Call` of `fun` called with (args, kwargs), or None where the store is not
    used (outside a scope, jit off, NaN debugging: `compiling_ahead`)."""
    if not compiling_ahead():
        return None
    folder = active_folder()
    assert folder is not None  # (compiling_ahead)
    bound = signature.bind(*args, **kwargs)
    bound.apply_defaults()
    static = {k: v for k, v in bound.arguments.items() if k in static_argnames}
    dynamic = {k: v for k, v in bound.arguments.items() if k not in static_argnames}
    leaves, treedef = jax.tree_util.tree_flatten(dynamic)
    entry = _entry_name(f"{fun.__module__}.{fun.__qualname__}", static, treedef, leaves)
    store = store_on_cpu or not default_is_cpu()
    return _Call(entry, folder / EXECUTABLES_FOLDER / entry, store, static, treedef, leaves)


def _ahead_of(fun, found: _Call):
    """`stored_jit`'s ``ahead`` for the call `found`: its program from this process, or
    from the store (its executable loaded on a worker thread: on a TPU v5e's host,
    loading `fit`'s four stored programs one after another took 3.7 s of a second
    process's first call), else traced and lowered here and compiled on a worker
    thread; the outputs as `jax.ShapeDtypeStruct` leaves."""
    program = _memory.get(found.entry)
    if program is None:
        stored = _read(found.path) if found.store else None
        if stored is not None:  # loaded on a worker thread: several load side by side
            future = _pool().submit(_loaded, stored)
            program = _Pending(future, stored.out_tree, stored.outputs)
        else:
            lowered, out_tree, outputs = _lowered(fun, found)
            future = _pool().submit(_compile_lowered, found, lowered, out_tree, outputs)
            program = _Pending(future, out_tree, outputs)
        fetched_by[fun.__name__, "ahead"] += 1
        with _memory_lock:
            _memory[found.entry] = program
    structs = [
        jax.ShapeDtypeStruct(shape, dtype, weak_type=weak) for shape, dtype, weak in program.outputs
    ]
    return jax.tree_util.tree_unflatten(program.out_tree, structs)


def compiling_ahead() -> bool:
    """Whether `stored_jit` functions keep their programs here, and ``ahead`` compiles
    (inside a lumaxlike call with the JAX cache on, jit on, no NaN debugging); elsewhere
    they are `jax.jit` functions and ``ahead`` returns None."""
    return not (
        active_folder() is None or _setting("jax_disable_jit") or _setting("jax_debug_nans")
    )


_workers: list[ThreadPoolExecutor] = []


def _pool() -> ThreadPoolExecutor:
    """The threads that compile ahead (XLA compiles without Python's lock held, so
    programs compile side by side while the calling thread traces the next one)."""
    with _memory_lock:
        if not _workers:
            _workers.append(
                ThreadPoolExecutor(os.cpu_count() or 1, thread_name_prefix="lumaxlike-compile")
            )
    return _workers[0]


def _lowered(fun, found: _Call):
    """(lowered program, output tree, outputs as `_Program.outputs`) of `fun` at the
    call `found`'s static arguments, as a program of its flat dynamic arguments
    returning flat outputs."""
    static, treedef = found.static, found.treedef
    out_trees = []

    def flat(*leaves):
        out_leaves, out_tree = jax.tree_util.tree_flatten(
            fun(**jax.tree_util.tree_unflatten(treedef, leaves), **static)
        )
        out_trees.append(out_tree)
        return out_leaves

    flat.__name__ = flat.__qualname__ = f"{fun.__name__}_stored"
    with compilation_cache_settings(str(found.path.parents[1]), math.inf):
        traced = jax.jit(flat).trace(*found.leaves)  # (tracing may compile small programs)
        lowered = traced.lower()
    # weak types as the executable's results carry them (a compiled `out_info` has none)
    outputs = tuple((a.shape, a.dtype, a.weak_type) for a in traced.out_avals)
    return lowered, out_trees[0], outputs


def _compile_lowered(found: _Call, lowered, out_tree, outputs) -> _Program:
    """The `_Program` of the call `found`'s `_lowered` program, stored at its path if
    the backend stores it (``found.store``; else left to JAX's cache, as `jax.jit`
    would)."""
    path = found.path
    if not found.store:
        with compilation_cache_scope():  # (on a worker thread: a scope of its own)
            program = _Program(lowered.compile(), out_tree, outputs)
        with _memory_lock:
            store_events["compiled"] += 1
        return program
    # Never written to JAX's cache (an infinite threshold), so that JAX's cache never
    # holds this program: an executable JAX loaded from its cache serializes without
    # its object code (XLA:CPU, jaxlib 0.10: the entry then fails with "Function ...
    # not found" when run), so only a fresh compile may be stored.
    # (a scope of its own: on a worker thread, the caller's scope may end first, which
    # would drop JAX's cache object under the compile)
    with (
        compilation_cache_scope(),
        compilation_cache_settings(str(path.parents[1]), math.inf),
    ):
        hits = _cache_hits_here()
        program = _Program(lowered.compile(), out_tree, outputs)
    written = _cache_hits_here() == hits and _write(path, program)
    with _memory_lock:
        store_events["compiled"] += 1
        store_events["written"] += int(written)
    return program


def _compile_and_write(fun, found: _Call) -> _Program:
    """The `_Program` of `fun` for the call `found` (`_lowered`, `_compile_lowered`)."""
    return _compile_lowered(found, *_lowered(fun, found))


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
