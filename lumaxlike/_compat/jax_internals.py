"""What lumaxlike relies on in JAX beyond its stable API: the jaxpr data structures
(`jax.extend.core`, which JAX documents as unstable), the names and parameters of the
primitives that `lumaxlike._model._jaxpr_to_python` (the numba derivatives) and
`lumaxlike._model.jaxpr_split` (the split JAX programs) match, and the thread-local
settings of JAX's persistent compilation cache (`jax._src.config`, no public API) that
`lumaxlike._model.jax_cache` sets for lumaxlike's own programs.

JAX renames primitives between releases (``pjit`` became ``jit``), so a name matched
here is a name of some release; `PROBES` says how the operations the equations use trace
today, and `problems` checks that they still trace to names matched here, with the
parameters read here.
"""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
from jax._src import config as _jax_config  # the thread-local settings (no public API)
from jax.experimental.compilation_cache import compilation_cache as _jax_cache
from jax.extend import core as jex_core

__all__ = [
    "INLINED_CALLS",
    "Literal",
    "PROBES",
    "SHAPE_ONLY",
    "call_name",
    "called_jaxpr",
    "compilation_cache_dir",
    "compilation_cache_enabled",
    "compilation_cache_settings",
    "converted_dtype",
    "integer_exponent",
    "problems",
    "reset_compilation_cache",
]

#: a literal operand of a jaxpr equation
Literal = jex_core.Literal

#: primitives that call a jaxpr (inlined by the translators), by their names over releases
INLINED_CALLS = ("jit", "pjit", "closed_call", "core_call", "custom_jvp_call")
#: primitives that only change the shape (the identity on scalars)
SHAPE_ONLY = ("broadcast_in_dim", "reshape", "squeeze", "copy", "copy_p")


def called_jaxpr(eqn):
    """(jaxpr, consts) of the program an `INLINED_CALLS` equation calls."""
    closed = eqn.params.get("jaxpr", eqn.params.get("call_jaxpr"))
    return getattr(closed, "jaxpr", closed), getattr(closed, "consts", ())


def call_name(eqn) -> str | None:
    """The name of the function an `INLINED_CALLS` equation calls (a jitted function's
    ``__name__``), or None."""
    return eqn.params.get("name")


def integer_exponent(eqn) -> int:
    """The exponent n of an ``integer_pow`` equation (x**n)."""
    return eqn.params["y"]


def converted_dtype(eqn) -> np.dtype:
    """The dtype a ``convert_element_type`` equation converts to."""
    return np.dtype(eqn.params["new_dtype"])


def compilation_cache_enabled() -> bool:
    """Whether JAX's persistent compilation cache is on (``jax_enable_compilation_cache``)."""
    return bool(_jax_config.enable_compilation_cache.value)


def compilation_cache_dir() -> str | None:
    """The folder of JAX's persistent compilation cache in force here (None: none)."""
    return _jax_config.compilation_cache_dir.value


@contextlib.contextmanager
def compilation_cache_settings(folder: str, min_compile_seconds: float):
    """JAX's cache folder and minimum compile time [s], for this thread, inside the block."""
    with (
        _jax_config.compilation_cache_dir(folder),
        _jax_config.persistent_cache_min_compile_time_secs(min_compile_seconds),
    ):
        yield


def reset_compilation_cache() -> None:
    """Drop JAX's process-wide cache object (the next compilation makes a new one from the
    settings in force then)."""
    _jax_cache.reset_cache()


def _nested_jit(x):
    return jax.jit(lambda y: y * 2.0)(x)


def _custom(x):
    return _custom_double(x)


@jax.custom_jvp
def _custom_double(x):
    return x * 2.0


@_custom_double.defjvp
def _custom_double_jvp(primals, tangents):
    return primals[0] * 2.0, tangents[0] * 2.0


#: primitive name -> a scalar function of two float32 whose last equation is it (JAX today)
PROBES = {
    "add": lambda x, y: x + y,
    "add_any": lambda x, y: jax.jvp(lambda z: z * z, (x,), (y,))[1],
    "sub": lambda x, y: x - y,
    "mul": lambda x, y: x * y,
    "div": lambda x, y: x / y,
    "pow": lambda x, y: jnp.power(x, y),
    "max": lambda x, y: jnp.maximum(x, y),
    "min": lambda x, y: jnp.minimum(x, y),
    "atan2": lambda x, y: jnp.arctan2(x, y),
    "gt": lambda x, y: x > y,
    "ge": lambda x, y: x >= y,
    "lt": lambda x, y: x < y,
    "le": lambda x, y: x <= y,
    "eq": lambda x, y: x == y,
    "ne": lambda x, y: x != y,
    "and": lambda x, y: jnp.logical_and(x > 0, y > 0),
    "or": lambda x, y: jnp.logical_or(x > 0, y > 0),
    "not": lambda x, y: jnp.logical_not(x > 0),
    "neg": lambda x, y: -x,
    "sqrt": lambda x, y: jnp.sqrt(x),
    "exp": lambda x, y: jnp.exp(x),
    "expm1": lambda x, y: jnp.expm1(x),
    "log": lambda x, y: jnp.log(x),
    "log1p": lambda x, y: jnp.log1p(x),
    "tan": lambda x, y: jnp.tan(x),
    "abs": lambda x, y: jnp.abs(x),
    "square": lambda x, y: jnp.square(x),
    "integer_pow": lambda x, y: x**3,
    "select_n": lambda x, y: jax.lax.select(x > y, x, y),  # jnp.where: inside a jit
    "convert_element_type": lambda x, y: (x > y).astype(x.dtype),
    "jit": lambda x, y: _nested_jit(x),
    "custom_jvp_call": lambda x, y: _custom(x),
    "broadcast_in_dim": lambda x, y: jnp.broadcast_to(x, (1,)),
}


def _last_equation(function):
    """The last equation of `function`'s jaxpr (the probed one: comparisons feeding
    logical_and/or/not, or the jvp's primal part, come before it), or None."""
    eqns = jax.make_jaxpr(function)(np.float32(0.5), np.float32(0.25)).jaxpr.eqns
    return eqns[-1] if eqns else None


def problems() -> list[str]:
    """What of the above this JAX no longer has, one line each (empty: all there)."""
    found = []
    matched = set(INLINED_CALLS) | set(SHAPE_ONLY) | set(PROBES)
    for name, function in PROBES.items():
        try:
            eqn = _last_equation(function)
        except Exception as error:  # whatever a new release raises, reported
            found.append(f"tracing the probe of {name!r} fails: {type(error).__name__}: {error}")
            continue
        if eqn is None or eqn.primitive.name != name:
            traced = None if eqn is None else eqn.primitive.name
            known = " (matched under that name too)" if traced in matched else ""
            found.append(
                f"the operation lumaxlike matches as {name!r} now traces to {traced!r}{known}"
            )
            continue
        if name in INLINED_CALLS:
            inner, _ = called_jaxpr(eqn)
            if not hasattr(inner, "eqns") or not hasattr(inner, "invars"):
                found.append(f"{name!r} no longer carries its jaxpr in params 'jaxpr'/'call_jaxpr'")
            if name == "jit" and call_name(eqn) != "<lambda>":
                found.append(
                    f"jit has not the called function's name in params['name']: {eqn.params}"
                )
        if name == "integer_pow" and integer_exponent(eqn) != 3:
            found.append(f"integer_pow's exponent is not in params['y']: {eqn.params}")
        if name == "convert_element_type" and converted_dtype(eqn) != np.float32:
            found.append(
                f"convert_element_type's dtype is not in params['new_dtype']: {eqn.params}"
            )
        if not hasattr(eqn.primitive, "multiple_results") or not callable(eqn.primitive.bind):
            found.append(f"primitive {name!r} has no multiple_results or bind")
    closed = jax.make_jaxpr(lambda x: x + 1.0)(np.float32(0.5))
    if not any(isinstance(atom, Literal) for atom in closed.jaxpr.eqns[0].invars):
        found.append("jaxpr literals are no longer jax.extend.core.Literal")
    for attribute in ("constvars", "invars", "outvars", "eqns"):
        if not hasattr(closed.jaxpr, attribute):
            found.append(f"a jaxpr has no {attribute!r}")
    if not hasattr(closed, "consts"):
        found.append("a closed jaxpr has no 'consts'")
    for setting in (
        "enable_compilation_cache",
        "compilation_cache_dir",
        "persistent_cache_min_compile_time_secs",
    ):
        state = getattr(_jax_config, setting, None)
        if state is None or not hasattr(state, "value") or not callable(state):
            found.append(f"jax._src.config.{setting} is no longer a thread-local setting")
    if not callable(getattr(_jax_cache, "reset_cache", None)):
        found.append("jax.experimental.compilation_cache.compilation_cache.reset_cache is gone")
    return found
