"""numba's caching internals, which `lumaxlike._model.numba_cache` builds its cache on.

numba has no public API for a cache directory chosen per kernel: lumaxlike subclasses
the classes its own cache is made of (`numba.core.caching`; `_CacheLocator` is private)
and sets the dispatcher's private ``_cache`` attribute. Everything of numba's that this
relies on is named here; `problems` checks it is still there.
"""

from __future__ import annotations

import inspect

import numba
from numba.core.caching import CompileResultCacheImpl, FunctionCache
from numba.core.caching import _CacheLocator as CacheLocator

__all__ = [
    "CacheLocator",
    "CompileResultCacheImpl",
    "FunctionCache",
    "can_cache",
    "problems",
    "set_cache",
]

#: the methods of numba's classes that lumaxlike's subclasses call or override
USED_METHODS = {
    CacheLocator: (
        "ensure_cache_path",
        "get_suitable_cache_subpath",
        "get_cache_path",
        "get_source_stamp",
        "get_disambiguator",
    ),
    CompileResultCacheImpl: ("get_filename_base",),
    FunctionCache: ("_impl_class", "save_overload", "load_overload"),
}


def can_cache(kernel) -> bool:
    """Whether `kernel` is a numba dispatcher that can cache (False for the plain Python
    function ``numba.njit`` returns under ``NUMBA_DISABLE_JIT``)."""
    return hasattr(kernel, "enable_caching")


def set_cache(kernel, cache) -> None:
    """Make the dispatcher `kernel` save and load its compiled code through `cache` (a
    `FunctionCache`): what ``enable_caching`` does with numba's own cache."""
    kernel._cache = cache


def problems() -> list[str]:
    """What of the above this numba no longer has, one line each (empty: all there)."""
    found = []
    for cls, methods in USED_METHODS.items():
        for method in methods:
            if not callable(getattr(cls, method, None)):
                found.append(f"numba.core.caching.{cls.__name__}.{method} is gone")
    impl_init = inspect.signature(FunctionCache.__init__)
    if list(impl_init.parameters) != ["self", "py_func"]:
        found.append(
            f"numba.core.caching.FunctionCache.__init__ takes {impl_init} (was (self, py_func))"
        )
    source = inspect.getsource(numba.core.caching.Cache.__init__)
    if "_impl_class(" not in source or "_impl" not in source:
        found.append(
            "numba.core.caching.Cache.__init__ no longer builds its impl by self._impl_class"
        )
    kernel = numba.njit(lambda x: x)
    if not can_cache(kernel) or not hasattr(kernel, "_cache") or not hasattr(kernel, "stats"):
        found.append("numba's dispatcher has no enable_caching, _cache or stats attribute")
    return found
