"""Retarget the equations, written once in `equations`, to JAX and to numba.

Each function of `equations.__all__` is rebuilt from its code object with a globals
dictionary in which the scalar primitives (`sqrt`, `exp`, `where`, ...) are those of the
backend and the other equations are their retargeted twins. For numba every function is
then `njit`-compiled (lazily, at first call); for JAX they stay Python functions over
`jax.numpy`, to be traced, vmapped and differentiated.
"""

from __future__ import annotations

import math
import types

import jax.numpy as jnp
import numba

from . import equations

__all__ = ["jax_equations", "numba_equations"]


def _retarget(primitives: dict, decorate) -> types.SimpleNamespace:
    namespace = dict(vars(equations))
    namespace.update(primitives)
    rebuilt = {}
    for name in equations.__all__:
        original = getattr(equations, name)
        if isinstance(original, types.FunctionType):
            clone = types.FunctionType(
                original.__code__, namespace, name, original.__defaults__, original.__closure__
            )
            clone.__doc__ = original.__doc__
            rebuilt[name] = decorate(clone)
        else:
            rebuilt[name] = original
    namespace.update(rebuilt)
    return types.SimpleNamespace(**rebuilt)


def _jnp_primitives() -> dict:
    return {
        "sqrt": jnp.sqrt,
        "exp": jnp.exp,
        "expm1": jnp.expm1,
        "log": jnp.log,
        "log1p": jnp.log1p,
        "tan": jnp.tan,
        "atan2": jnp.arctan2,
        "where": jnp.where,
        "maximum": jnp.maximum,
        "NAN": jnp.nan,
    }


@numba.njit(inline="always")
def _numba_where(condition, if_true, if_false):
    return if_true if condition else if_false


@numba.njit(inline="always")
def _numba_maximum(a, b):
    return a if a > b else b


def _numba_primitives() -> dict:
    return {
        "sqrt": math.sqrt,
        "exp": math.exp,
        "expm1": math.expm1,
        "log": math.log,
        "log1p": math.log1p,
        "tan": math.tan,
        "atan2": math.atan2,
        "where": _numba_where,
        "maximum": _numba_maximum,
        "NAN": math.nan,
    }


jax_equations = _retarget(_jnp_primitives(), lambda f: f)
numba_equations = _retarget(_numba_primitives(), lambda f: numba.njit(f, fastmath=False, inline="always"))
