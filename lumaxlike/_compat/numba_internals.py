"""numba's caching internals, which `lumaxlike._model.numba_cache` builds its cache on.

numba has no public API for a cache directory chosen per kernel: lumaxlike subclasses
the classes its own cache is made of (`numba.core.caching`; `_CacheLocator` is private)
and sets the dispatcher's private ``_cache`` attribute. Everything of numba's that this
relies on is named here; `problems` checks it is still there.
"""

from __future__ import annotations

import inspect

import numba
from llvmlite import ir as llvm_ir
from numba.core import cgutils
from numba.core.caching import CompileResultCacheImpl, FunctionCache
from numba.core.caching import _CacheLocator as CacheLocator
from numba.extending import intrinsic

__all__ = [
    "call_flat",
    "call_inlined",
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


# numba_lm's calls of an operation's pieces (`lumaxlike._inverse.numba_lm`): numba's
# code generation (cgutils, the typing context, the LLVM call it emits) is not public API.


def _instructions(builder) -> set[int]:
    return {id(i) for block in builder.function.blocks for i in block.instructions}


def _flat_call(inline: bool):
    """`call_flat` (``inline=False``) or `call_inlined` (True)."""

    def call(typingctx, function, first, second, third, fourth):
        groups = (first, second, third, fourth)
        if not all(isinstance(group, numba.types.BaseTuple) for group in groups):
            return None
        items = tuple(item for group in groups for item in group.types)
        inner = typingctx.resolve_function_type(function, items, {})
        if inner is None:
            return None

        def codegen(context, builder, signature, arguments):
            values = []
            for group, value in zip(groups, arguments[1:]):
                values.extend(cgutils.unpack_tuple(builder, value, len(group)))
            wanted, fixed = inner.args, len(inner.args)
            packed = fixed and isinstance(
                wanted[-1], (numba.types.StarArgTuple, numba.types.StarArgUniTuple)
            )
            if packed:  # a function of *args: the items after its fixed ones go in a tuple
                fixed -= 1
                wanted = (*wanted[:fixed], *wanted[fixed].types)
            values = [
                context.cast(builder, value, given, want)
                for value, given, want in zip(values, items, wanted)
            ]
            if packed:
                rest = context.make_tuple(builder, inner.args[fixed], values[fixed:])
                values = [*values[:fixed], rest]
            before = _instructions(builder)
            result = context.get_function(function, inner)(builder, values)
            for block in builder.function.blocks:  # the call numba emitted
                for instruction in block.instructions:
                    new = id(instruction) not in before
                    if inline and new and isinstance(instruction, llvm_ir.CallInstr):
                        instruction.attributes.add("alwaysinline")
            return result

        return inner.return_type(function, first, second, third, fourth), codegen

    call.__name__ = call.__qualname__ = "call_inlined" if inline else "call_flat"
    return intrinsic(call)


call_flat = _flat_call(inline=False)
call_flat.__doc__ = """``function(*first, *second, *third, *fourth)`` for the numba
function `function` and four tuples (``()`` where fewer are needed): the items passed as
its arguments (a function of ``*args`` gets those after its fixed ones in its tuple),
taken out of the tuples without reference counting (the call borrows them, as any numba
call does its arguments; the tuples outlive it)."""

call_inlined = _flat_call(inline=True)
call_inlined.__doc__ = """`call_flat`, the call marked ``alwaysinline`` for LLVM (numba
links the compiled function into the caller's module before LLVM's inliner runs). Not for
a piece that calls the generated model code: that is compiled with fast-math flags, and
inlined into another context it rounds differently in the last bits."""
