"""Where lumaxlike's compiled numba kernels are cached, and when a cached kernel is stale.

Every lumaxlike kernel is compiled by `cached_njit`, which keeps its machine code in
lumaxlike's per-user cache directory, never inside the installed package:

- ``$LUMAXLIKE_CACHE_DIR/numba`` when the environment variable ``LUMAXLIKE_CACHE_DIR``
  is set (and not empty);
- otherwise ``platformdirs.user_cache_dir("lumaxlike")/numba``: ``~/.cache/lumaxlike/numba``
  on Linux (``$XDG_CACHE_HOME/lumaxlike/numba`` when that is set),
  ``~/Library/Caches/lumaxlike/numba`` on macOS, ``%LOCALAPPDATA%\\lumaxlike\\Cache\\numba``
  on Windows.

A directory that cannot be created or written (or sources that cannot be read, as from a
zip) means no caching, never an error: each process then compiles the kernels at their
first call. numba's own settings (``NUMBA_CACHE_DIR``, ``numba.config``) are left alone:
they keep governing the user's other numba code and do not move lumaxlike's kernels.
Deleting the directory is always safe.

numba keys a cached kernel on the kernel's own source file only; the equations and LM
rules it compiles in live in other files, so after editing them numba would serve the old
machine code. Here a kernel's cache is keyed on a digest of its own file, the files of the
modules it compiles in (`cached_njit`'s ``inlines``), lumaxlike's version and numba's
version; when the digest differs, numba treats the cached entries as absent and
recompiles.
"""

from __future__ import annotations

import hashlib
import inspect
import os
import sys
import types
from pathlib import Path
from typing import Literal

import numba
import platformdirs

from .. import __version__

# numba's caching classes (numba.core.caching; what numba's own locators build on, not a
# stable API), behind `lumaxlike._compat.numba_internals`: tests/test_cache.py checks that
# kernels are saved and loaded through them, tests/test_compat.py that they are there.
from .._compat.numba_internals import (
    CacheLocator,
    CompileResultCacheImpl,
    FunctionCache,
    can_cache,
    set_cache,
)

__all__ = [
    "CACHE_DIR_VARIABLE",
    "cache_dir",
    "cached_njit",
    "compile_variant",
    "njit_variant",
    "variant_slot",
]

CACHE_DIR_VARIABLE = "LUMAXLIKE_CACHE_DIR"
"""Environment variable that overrides lumaxlike's cache directory."""


def cache_dir() -> Path:
    """lumaxlike's per-user cache directory (it may not exist yet, or not be writable)."""
    configured = os.environ.get(CACHE_DIR_VARIABLE, "")
    if configured:
        return Path(configured).absolute()
    return Path(platformdirs.user_cache_dir("lumaxlike", appauthor=False))


def cached_njit(*, inlines=(), variant: str = "", **options):
    """`numba.njit(**options)`, with the kernel cached in lumaxlike's cache directory.

    Args:
        inlines: the modules whose source the kernel compiles in (functions it calls,
            retargeted rules); editing any of them invalidates the cached kernel, as
            editing the kernel's own file does.
        variant: a name that keeps this kernel's cache entries apart from those of other
            kernels compiled from the same function with other globals (`compile_variant`).
        **options: numba.njit's options (``parallel``, ``error_model``, ...); not ``cache``.
    """
    if "cache" in options:
        raise TypeError("cached_njit: `cache` is not an option, the kernel is always cached")

    def decorate(py_func):
        kernel = numba.njit(**options)(py_func)
        if not can_cache(kernel):  # NUMBA_DISABLE_JIT: a plain function
            return kernel
        kernel.lumaxlike_compile_options = {"inlines": inlines, **options}
        try:
            locator = _KernelLocator(py_func, _source_stamp(py_func, inlines), variant)
            locator.ensure_cache_path()
        except OSError:  # directory not creatable or writable, or sources unreadable (zip):
            return kernel  # no cache, the kernel compiles at its first call in each process
        set_cache(kernel, _KernelCache(py_func, locator))
        return kernel

    return decorate


def rebound(py_func, variant: str, bindings: dict):
    """The Python function `py_func` again, with the globals `bindings` rebound and its
    qualified name tagged with `variant` (`compile_variant`, `njit_variant`)."""
    namespace = dict(py_func.__globals__)
    namespace.update(bindings)
    clone = types.FunctionType(
        py_func.__code__, namespace, py_func.__name__, py_func.__defaults__, py_func.__closure__
    )
    # numba names compiled code after the qualified name and a counter that restarts in
    # every process, and links a called function into its caller's code under that name
    # with one-definition linkage: two variants compiled in different processes could get
    # the same names, and once both come from the disk cache into one process, the second
    # would silently call the first's code. The variant's name in the qualified name keeps
    # them apart (as `_backends` does for retargeted rules).
    clone.__qualname__ = f"{py_func.__qualname__}__{variant}"
    clone.__module__ = py_func.__module__
    return clone


def njit_variant(
    function, variant: str, *, inline: Literal["never", "always"] = "never", **bindings
):
    """The njit function `function` compiled again with some of its globals rebound
    (`rebound`): a helper of a kernel variant (`compile_variant`), compiled into it
    (``inline="always"``: inlined into its callers by numba, as their steps are)."""
    rebuilt = rebound(function.py_func, variant, bindings)
    return numba.njit(error_model="numpy", inline=inline)(rebuilt)


def variant_slot(name: str):
    """A placeholder for the global `name` of a function that is compiled only as variants
    (`compile_variant`, `njit_variant`), each binding `name` to its own function: it keeps
    the name defined for Python and the linters; calling it is an error."""

    def slot(*args):
        raise NotImplementedError(
            f"{name} is bound only in the variants of the functions that call it "
            "(numba_cache.compile_variant, njit_variant)"
        )

    slot.__name__ = slot.__qualname__ = name
    return slot


def compile_variant(kernel, variant: str, *, inlines=(), fastmath=None, **bindings):
    """`kernel` (made by `cached_njit`) compiled again with some of its globals rebound.

    How a kernel gets the functions of another model configuration (`family`): the same
    code, other equations. The variant is cached on disk under its own name.

    Args:
        kernel: a `cached_njit` kernel.
        variant: a name unique to these bindings (e.g. the model configuration's name).
        inlines: modules the bindings compile in, beyond the kernel's own `inlines`
            (e.g. a generated module): editing them invalidates the variant's cache.
        fastmath: numba's ``fastmath`` option for this variant (None: the kernel's own).
        **bindings: global names of the kernel's function and what they stand for here.
    """
    clone = rebound(kernel.py_func, variant, bindings)
    options = dict(getattr(kernel, "lumaxlike_compile_options", {}))
    options["inlines"] = (*options.get("inlines", ()), *inlines)
    if fastmath is not None:
        options["fastmath"] = fastmath
    return cached_njit(variant=variant, **options)(clone)


def _source_stamp(py_func, inlines) -> str:
    digest = hashlib.sha256(f"lumaxlike {__version__}, numba {numba.__version__}".encode())
    for source in (inspect.getfile(py_func), *(inspect.getfile(module) for module in inlines)):
        digest.update(Path(source).read_bytes())
    return digest.hexdigest()


class _KernelLocator(CacheLocator):
    """numba's cache locator for one kernel: a folder of lumaxlike's cache directory."""

    def __init__(self, py_func, source_stamp: str, variant: str = ""):
        source_file = inspect.getfile(py_func)
        self._path = str(cache_dir() / "numba" / self.get_suitable_cache_subpath(source_file))
        self._lineno = py_func.__code__.co_firstlineno
        self._source_stamp = source_stamp
        self._variant = variant

    def get_cache_path(self):
        return self._path

    def get_source_stamp(self):
        return self._source_stamp

    def get_disambiguator(self):
        return f"{self._lineno}-{self._variant}" if self._variant else str(self._lineno)


class _KernelCacheImpl(CompileResultCacheImpl):
    """numba's (de)serialisation of compiled kernels, with the locator given rather than
    searched for among numba's (which would include the package's ``__pycache__``)."""

    def __init__(self, py_func, locator: _KernelLocator):
        self._locator = locator
        name = f"{Path(inspect.getfile(py_func)).stem}.{py_func.__qualname__}"
        self._filename_base = self.get_filename_base(name, getattr(sys, "abiflags", ""))


class _KernelCache(FunctionCache):
    """numba's function cache at `locator`; a failed save leaves the kernel uncached."""

    def __init__(self, py_func, locator: _KernelLocator):
        self._locator = locator
        super().__init__(py_func)

    # numba declares _impl_class as a class attribute (a class); Cache.__init__ calls
    # self._impl_class(py_func), so a method that binds the locator serves as well.
    def _impl_class(self, py_func):  # type: ignore[override]
        return _KernelCacheImpl(py_func, self._locator)

    def save_overload(self, sig, data):
        try:
            super().save_overload(sig, data)
        except OSError:  # the folder became unwritable or the disk is full
            pass
