"""r and its derivatives with respect to any chosen Hapke parameters, compiled by numba.

The derivatives are JAX's: `jax.jvp` of the very equations the forward model evaluates
(`equations.terms_from_geometry` then the JAX model's `reflectance_core`, whose custom JVP
rule gives dr/dw analytically; autodiff for the others), one JVP per free parameter, traced to a scalar jaxpr, printed as straight-line Python by
`_jaxpr_to_python` (the primal part shared by the JVPs printed once) and compiled by
numba. So the numba solvers get exact (autodiff) derivatives of the same physics, and an
edit to `equations` reaches them with no second copy to keep in step.

The program is split by data dependence (`scalar_jaxpr_to_split_source`): everything that
depends only on an observation's geometry and the fixed parameters is computed once per
observation (`ColumnFunctions.hoist`, into a row of residual values); what depends on the
free parameters alone once per step (`ColumnFunctions.prepare`: tan theta-bar, b^n, ...);
the rest for every observation at every step (`ColumnFunctions.columns`). For w alone,
the row holds the w-independent terms of the model (what `invert` hoists by hand); with
roughness fixed, the roughness terms; and so on for any set of free parameters.

Each set of free parameters gets its own functions, generated and compiled once per
process on first use (~3-10 s).
"""

from __future__ import annotations

import functools
import math
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numba
import numpy as np

from .._params import PARAMETER_NAMES
from .family import DEFAULT_KEY, ModelKey, jax_equations_for
from .jax_model import reflectance_core
from ._jaxpr_to_python import scalar_jaxpr_to_split_source
from .equations import GeometryTerms

__all__ = [
    "PARAMETER_NAMES",
    "GEOMETRY_ROW",
    "ColumnFunctions",
    "model_columns",
    "model_columns_source",
    "hoisted_rows",
]

GEOMETRY_ROW = len(GeometryTerms._fields)  # length of an observation's geometry row
_VALID = GeometryTerms._fields.index("valid")
# LLVM fast-math flags of the generated code: reciprocals shared by the many divisions by
# the same denominators that derivatives make (arcp), reassociation, fused multiply-add,
# approximate-function rewrites such as pow(x, 0.5) -> sqrt(x): 1.6x faster, changes in the
# last bits only. Not "nnan"/"ninf": NaN and inf propagate exactly as without fastmath.
FASTMATH = {"nsz", "arcp", "contract", "afn", "reassoc"}


def _reflectance(parameters, geometry, key: ModelKey):
    """r through the JAX model's `reflectance_core`: its custom JVP rule gives dr/dw
    analytically, autodiff the derivatives along the other parameters."""
    w, *scalars = parameters
    terms = jax_equations_for(key).terms_from_geometry(geometry, *scalars, None, False)
    return reflectance_core(w, terms, key)


def _traced_columns(free: tuple[str, ...], key: ModelKey):
    """The jaxpr of (r, dr/d free[0], ...) over scalar parameters and geometry terms."""
    indices = [PARAMETER_NAMES.index(name) for name in free]

    def columns(*flat):
        parameters = flat[: len(PARAMETER_NAMES)]
        geometry = GeometryTerms(*flat[len(PARAMETER_NAMES) :])
        outputs = [_reflectance(parameters, geometry, key)]
        for index in indices:  # one JVP per free parameter; the rest are constants

            def along(value, index=index):
                moved = list(parameters)
                moved[index] = value
                return _reflectance(moved, geometry, key)

            outputs.append(jax.jvp(along, (parameters[index],), (jnp.ones_like(parameters[index]),))[1])
        return outputs

    with jax.enable_x64(True):  # local scope: float64 literals in the traced program
        example = [jnp.float64(0.5)] * (len(PARAMETER_NAMES) + GEOMETRY_ROW)
        example[len(PARAMETER_NAMES) + _VALID] = jnp.bool_(True)
        return jax.make_jaxpr(columns)(*example)


def model_columns_source(free: tuple[str, ...], key: ModelKey = DEFAULT_KEY):
    """Python source of `ColumnFunctions` for `free` in model configuration `key`:
    (source, row length, step length)."""
    argument_names = list(PARAMETER_NAMES) + list(GeometryTerms._fields)
    split = scalar_jaxpr_to_split_source(
        _traced_columns(free, key), argument_names, free, "_known_part", "_step_part", "_free_part"
    )
    fixed = [name for name in PARAMETER_NAMES if name not in free]
    free_in_order = [name for name in PARAMETER_NAMES if name in free]  # the split's order
    row_names = [f"row{k}" for k in range(split.n_residuals)]
    step_names = [f"step{k}" for k in range(split.n_step_values)]
    hoist = [
        "def hoist(parameters, geometry, row):",
        *(f"    {name} = parameters[{PARAMETER_NAMES.index(name)}]" for name in fixed),
        *(
            f"    {name} = geometry[{k}]" + (" != 0.0" if k == _VALID else "")
            for k, name in enumerate(GeometryTerms._fields)
        ),
        f"    values = _known_part({', '.join(fixed + list(GeometryTerms._fields))})",
        *(f"    row[{k}] = values[{k}]" for k in range(split.n_residuals)),
    ]
    prepare = [
        "def prepare(parameters, step):",
        *(f"    {name} = parameters[{PARAMETER_NAMES.index(name)}]" for name in free_in_order),
        f"    values = _step_part({', '.join(free_in_order)})",
        *(f"    step[{k}] = values[{k}]" for k in range(split.n_step_values)),
    ]
    columns = [
        "def columns(step, row, out):",
        *(f"    {name} = row[{k}]" for k, name in enumerate(row_names)),
        *(f"    {name} = step[{k}]" for k, name in enumerate(step_names)),
        f"    values = _free_part({', '.join(row_names + step_names)})",
        *(f"    out[{k}] = values[{k}]" for k in range(len(free) + 1)),
    ]
    wrappers = "\n\n\n".join("\n".join(lines) for lines in (hoist, prepare, columns))
    return split.source + "\n\n" + wrappers + "\n", split.n_residuals, split.n_step_values


class ColumnFunctions(NamedTuple):
    """The numba-compiled model of one set of free parameters (see the module docstring).

    hoist(parameters, geometry, row): once per observation, from all `PARAMETER_NAMES`
        values (the free ones are ignored) and its `GeometryTerms` row, writes the
        `row_length` values the rest needs.
    prepare(parameters, step): once per step, from the free parameters' values, writes
        the `step_length` values that depend on them alone.
    columns(step, row, out): per observation and step, out[0] = r [1/sr] and
        out[1 + j] = dr/d(free[j]).
    """

    hoist: object
    prepare: object
    columns: object
    row_length: int
    step_length: int


@functools.cache
def model_columns(free: tuple[str, ...], key: ModelKey = DEFAULT_KEY) -> ColumnFunctions:
    """The `ColumnFunctions` for the parameters named in `free` in model configuration
    `key` (compiled on first use)."""
    unknown = [name for name in free if name not in PARAMETER_NAMES]
    if unknown:
        raise ValueError(f"unknown parameter names {unknown}; expected names from {PARAMETER_NAMES}")
    source, row_length, step_length = model_columns_source(tuple(free), key)
    namespace = {"math": math}
    exec(compile(source, f"<lumaxlike columns {key.name} {free}>", "exec"), namespace)
    jit = functools.partial(numba.njit, error_model="numpy", fastmath=FASTMATH)
    for name in ("_known_part", "_step_part", "_free_part"):  # called from the wrappers below
        namespace[name] = jit(namespace[name])
    compiled = (jit(namespace[name]) for name in ("hoist", "prepare", "columns"))
    return ColumnFunctions(*compiled, row_length, step_length)


@numba.njit(parallel=True, error_model="numpy")
def _hoist_kernel(hoist, geometry_rows, parameters, rows):
    n_pixels, n_obs, _ = geometry_rows.shape
    for pixel in numba.prange(n_pixels):
        for k in range(n_obs):
            hoist(parameters, geometry_rows[pixel, k], rows[pixel, k])


def hoisted_rows(functions: ColumnFunctions, geometry_rows, parameters):
    """(pixels, observations, row_length) rows from (pixels, observations, 11) geometry rows."""
    rows = np.empty(geometry_rows.shape[:2] + (max(functions.row_length, 1),))
    _hoist_kernel(
        functions.hoist,
        np.require(geometry_rows, np.float64, ("C", "W")),
        np.require(parameters, np.float64, ("C", "W")),
        rows,
    )
    return rows
