"""Retarget scalar code written once (the model's `equations`, the solvers' rules in
`_inverse/lm_rules.py` and `_inverse/albedo/rules.py`, the equivalent slab's
`slab_equations`) to JAX and to numba.

Each function of a module's `__all__` is rebuilt from its code object with a globals
dictionary in which the scalar primitives (`sqrt`, `exp`, `where`, ...) are those of the
backend and the other equations are their retargeted twins. For numba every function is
then `njit`-compiled (lazily, at first call); for JAX they stay Python functions over
`jax.numpy`, to be traced, vmapped and differentiated.
"""

from __future__ import annotations

import functools
import hashlib
import math
import types

import jax
import jax.numpy as jnp
import numba
import numpy as np

from . import _scalar_vector as scalar_vector
from . import equations, h_functions, slab_equations

__all__ = [
    "retarget_to_jax",
    "retarget_to_numba",
    "jax_equations",
    "numba_equations",
    "jax_h_functions",
    "jax_scalar_h_functions",
    "numba_exact_terms_flat",
    "numba_exact_terms_and_slopes_flat",
    "EXACT_TERMS_CALL",
    "numba_h_functions",
    "h_function_bindings",
    "inlined",
    "SLAB_REFLECTIONS",
    "SLAB_MEAN_PATHS",
    "slab_twins",
]


def _binding_tag(bindings: dict) -> str:
    """A short name of a set of bindings ("" for none), stable across processes.

    numba names the compiled code of a function after its qualified name and a counter
    that restarts in every process; two rebuilds of one function with different bindings
    (two model configurations) compiled in different processes can then get the same
    symbol, and once both come from the disk cache into one process, one silently runs
    the other's code. Tagging each rebuild's qualified name with its bindings keeps the
    symbols of different configurations apart.
    """
    if not bindings:
        return ""
    described = sorted(
        (
            name,
            value
            if isinstance(value, str)
            else getattr(getattr(value, "py_func", value), "__qualname__", repr(value)),
        )
        for name, value in bindings.items()
    )
    return hashlib.sha1(repr(described).encode()).hexdigest()[:10]


def _retarget(module, primitives: dict, decorate, bindings: dict) -> types.SimpleNamespace:
    namespace = dict(vars(module))
    namespace.update(primitives)
    tag = _binding_tag(bindings)
    rebuilt = {}
    for name in module.__all__:
        original = getattr(module, name)
        if isinstance(original, types.FunctionType):
            clone = types.FunctionType(
                original.__code__, namespace, name, original.__defaults__, original.__closure__
            )
            clone.__doc__ = original.__doc__
            if tag:
                clone.__qualname__ = f"{original.__qualname__}__{tag}"
            rebuilt[name] = decorate(clone)
        else:
            rebuilt[name] = original
    # A binding given as a string names another function of the module: its twin.
    rebuilt.update(
        {
            name: rebuilt[value] if isinstance(value, str) else value
            for name, value in bindings.items()
        }
    )
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
        "cos": jnp.cos,
        "atan2": jnp.arctan2,
        "where": jnp.where,
        "maximum": jnp.maximum,
        "minimum": jnp.minimum,
        "isfinite": jnp.isfinite,
        "NAN": jnp.nan,
        "epsilon": _jnp_epsilon,
    }


def _jnp_epsilon(x):
    """The machine epsilon of x's dtype, a Python float (a constant of the trace)."""
    return float(jnp.finfo(jnp.result_type(x)).eps)


def _numpy_epsilon(x):
    return float(np.finfo(np.result_type(x)).eps)


@numba.njit(inline="always")
def _numba_epsilon(x):
    # the numba kernels compute in float64
    return 2.220446049250313e-16


@numba.njit(inline="always")
def _numba_where(condition, if_true, if_false):
    return if_true if condition else if_false


@numba.njit(inline="always")
def _numba_maximum(a, b):
    return a if a > b else b


@numba.njit(inline="always")
def _numba_minimum(a, b):
    return a if a < b else b


def _numba_primitives() -> dict:
    return {
        "sqrt": math.sqrt,
        "exp": math.exp,
        "expm1": math.expm1,
        "log": math.log,
        "log1p": math.log1p,
        "tan": math.tan,
        "cos": math.cos,
        "atan2": math.atan2,
        "where": _numba_where,
        "maximum": _numba_maximum,
        "minimum": _numba_minimum,
        "isfinite": math.isfinite,
        "NAN": math.nan,
        "epsilon": _numba_epsilon,
    }


def retarget_to_jax(module, **bindings) -> types.SimpleNamespace:
    """The functions of `module.__all__` over `jax.numpy` primitives.

    `bindings` rebind further global names (e.g. the model functions a solver calls): a
    function, or the name of another function of `module.__all__`, whose twin is then
    bound (how a model configuration picks its pieces, `_model/family.py`).
    """
    return _retarget(module, _jnp_primitives(), lambda f: f, bindings)


def retarget_to_numpy(module, **bindings) -> types.SimpleNamespace:
    """The functions of `module.__all__` over NumPy primitives, elementwise on arrays.

    For the NumPy parts of a solver (the regional steps): float64 whatever JAX's
    configuration (its x64 flag), and no dispatch to JAX. `bindings` as for
    `retarget_to_jax`.
    """
    primitives = {
        name: getattr(np, {"atan2": "arctan2", "NAN": "nan"}.get(name, name))
        for name in _jnp_primitives()
        if name != "epsilon"
    }
    primitives["epsilon"] = _numpy_epsilon
    return _retarget(module, primitives, lambda f: f, bindings)


def retarget_to_numba(module, *, inline=(), **bindings) -> types.SimpleNamespace:
    """The functions of `module.__all__` compiled by numba over `math` primitives.

    `bindings` as for `retarget_to_jax`. `error_model="numpy"`: a division by zero gives
    inf/NaN as in JAX instead of raising, and no zero-division check is compiled into
    every division (2-4x faster loops). The functions named in `inline` are inlined into
    their callers by numba (``inline="always"``), whatever their size.
    """

    def decorate(function):
        if function.__name__ in inline:
            return numba.njit(function, error_model="numpy", inline="always")
        return numba.njit(function, error_model="numpy")

    return _retarget(module, _numba_primitives(), decorate, bindings)


def inlined(function):
    """A twin of numba-compiled `function` (from `retarget_to_numba`) that numba inlines
    into its callers (``inline="always"``): the same code and globals.

    For a function called in a loop that the compiler should vectorise: LLVM inlines
    small callees itself, but a large one (the exact H's model) stays a call, which no
    loop around it can vectorise."""
    return numba.njit(function.py_func, error_model="numpy", inline="always")


# `h_functions` reads constant NumPy tables through `table_like(table, like)`: under JAX
# the table in the dtype of `like` (a float64 NumPy constant captured while x64 is on
# breaks later float32 traces: JAX 0.10 reuses its converted constant), as is in numba.
def _jnp_table_like(table, like):
    return jnp.asarray(table, dtype=jnp.result_type(like))


@numba.njit(inline="always")
def _numba_table_like(table, like):
    return table


# Small fixed products (20 x 72, 20 x 40) as loops: numba's `@` calls BLAS, which is not
# safe to call from numba's parallel threads once JAX's runtime is up (a segfault).
# matrix @ vector: each output a dot product over a contiguous row, vectorised where the
# caller is compiled with `reassoc` (`exact_terms`, below); vector @ matrix: the rows,
# scaled, accumulated into the outputs (contiguous, vectorised).
@numba.njit(inline="always", error_model="numpy")
def _numba_matrix_vector(matrix, vector):
    rows, columns = matrix.shape
    out = np.empty(rows)
    for i in range(rows):
        total = 0.0
        for j in range(columns):
            total += matrix[i, j] * vector[j]
        out[i] = total
    return out


@numba.njit(inline="always", error_model="numpy")
def _numba_vector_matrix(vector, matrix):
    rows, columns = matrix.shape
    out = np.zeros(columns)
    for i in range(rows):
        for j in range(columns):
            out[j] += vector[i] * matrix[i, j]
    return out


@numba.njit(inline="always")
def _numba_coefficients_from(vector, offset):
    return (
        vector[offset + 0], vector[offset + 1], vector[offset + 2], vector[offset + 3], vector[offset + 4],
        vector[offset + 5], vector[offset + 6], vector[offset + 7], vector[offset + 8], vector[offset + 9],
        vector[offset + 10], vector[offset + 11], vector[offset + 12], vector[offset + 13], vector[offset + 14],
        vector[offset + 15], vector[offset + 16], vector[offset + 17], vector[offset + 18], vector[offset + 19],
    )  # fmt: skip


def _numba_h_function(function):
    """numba's compilation of one H-function piece. Inlined into its callers (a call of
    a compiled function with array arguments costs two atomic reference-count updates,
    and no call is vectorised), except `exact_terms` (once per angle and pixel, one
    scalar argument), compiled on its own with `reassoc` and
    `contract` so that its dot products vectorise (its sums then round in another
    order than JAX's: agreement to ~1e-15, not bit for bit)."""
    if function.__name__ == "exact_terms":
        return numba.njit(function, error_model="numpy", fastmath={"reassoc", "contract"})
    return numba.njit(function, error_model="numpy", inline="always")


jax_h_functions = retarget_to_jax(
    h_functions,
    table_like=_jnp_table_like,
    array_expm1=jnp.expm1,
    matrix_vector=jnp.matmul,
    vector_matrix=jnp.matmul,
)
# The same over JAX scalars: the exact H's tables as tuples of Python floats
# (`_scalar_vector`), so a traced model is a scalar program (the numba `fit`'s derivative
# code, `columns_program.traced_columns(..., scalar_tables=True)`).
jax_scalar_h_functions = retarget_to_jax(
    h_functions,
    table_like=scalar_vector.scalar_table_like,
    array_expm1=functools.partial(scalar_vector.scalar_expm1, expm1=jnp.expm1),
    matrix_vector=scalar_vector.scalar_matrix_vector,
    vector_matrix=scalar_vector.scalar_vector_matrix,
    coefficients_from=functools.partial(
        scalar_vector.scalar_coefficients_from, count=h_functions.N_CHEBYSHEV
    ),
)
# The exact H's per-angle terms are the bulk of that scalar program (~5 k operations per
# angle); where they depend on known values only, the numba code calls numba's own
# `exact_terms` instead (`_jaxpr_to_python`'s opaque calls: the nested `jit` of this name
# is printed as a call of `numba_exact_terms_flat`); where they depend on a free parameter
# (roughness, porosity K), its JVP as a call of `numba_exact_terms_and_slopes_flat`.
EXACT_TERMS_CALL = "lumaxlike_exact_terms"


def _named_jit(function, name):
    def call(x):
        return function(x)

    call.__name__ = call.__qualname__ = name
    return jax.jit(call)


jax_scalar_h_functions.exact_terms = _named_jit(
    jax_scalar_h_functions.exact_terms, EXACT_TERMS_CALL
)
numba_h_functions = _retarget(
    h_functions,
    _numba_primitives(),
    _numba_h_function,
    {
        "table_like": _numba_table_like,
        "array_expm1": np.expm1,
        "matrix_vector": _numba_matrix_vector,
        "vector_matrix": _numba_vector_matrix,
        "coefficients_from": _numba_coefficients_from,
    },
)


def h_function_bindings(h_twins, kind: str) -> dict:
    """The bindings of the equations' H-function slots to one kind of `h_functions`
    (`h_twins`: its JAX or numba twins; kind: "hapke2002", "hapke1981" or "exact")."""
    return {
        "h_angle_terms": getattr(h_twins, f"{kind}_terms"),
        "h_values_and_slopes": getattr(h_twins, f"{kind}_values"),
    }


_numba_exact_terms = numba_h_functions.exact_terms


@numba.njit(error_model="numpy")
def numba_exact_terms_flat(x):
    """numba's `exact_terms(x)` as one flat tuple: the 20 coefficients, then the 20 of dP/dx."""
    coefficients, slopes = _numba_exact_terms(x)
    return coefficients + slopes


_numba_exact_terms_and_slopes = numba_h_functions.exact_terms_and_slopes


@numba.njit(error_model="numpy")
def numba_exact_terms_and_slopes_flat(x):
    """numba's `exact_terms_and_slopes(x)` as one flat tuple: `numba_exact_terms_flat`'s
    40 values, then their derivatives with respect to x."""
    coefficients, slopes, d_coefficients, d_slopes = _numba_exact_terms_and_slopes(x)
    return coefficients + slopes + d_coefficients + d_slopes


# The default configuration (AMSA, Hapke 2002 H); `family` builds the others.
# (`h_function`, the 2002 H at one angle, is h_functions' own: bound, not copied.)
jax_equations = retarget_to_jax(
    equations,
    h_function=jax_h_functions.h_hapke2002,
    **h_function_bindings(jax_h_functions, "hapke2002"),
)
numba_equations = retarget_to_numba(
    equations,
    h_function=numba_h_functions.h_hapke2002,
    **h_function_bindings(numba_h_functions, "hapke2002"),
)


# The equivalent slab's published variants (`slab_equations`' two slots), by name.
SLAB_REFLECTIONS = ("hapke1993", "hapke2012")
SLAB_MEAN_PATHS = ("hapke2001", "lucey1998")


@functools.cache
def slab_twins(
    backend: str, reflections: str = "hapke1993", mean_path: str = "hapke2001"
) -> types.SimpleNamespace:
    """`slab_equations` rebuilt for `backend` ("jax", "numba" or "numpy") with the slots
    bound to one variant: S_e and S_i (`SLAB_REFLECTIONS`) and <D>/D (`SLAB_MEAN_PATHS`).
    Names are checked by the public callers."""
    retarget = {"jax": retarget_to_jax, "numba": retarget_to_numba, "numpy": retarget_to_numpy}
    return retarget[backend](
        slab_equations,
        surface_reflections=f"{reflections}_reflections",
        mean_path_factor=f"{mean_path}_mean_path_factor",
    )
