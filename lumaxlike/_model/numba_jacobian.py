"""r and its derivatives with respect to any chosen Hapke parameters, compiled by numba.

The derivatives are JAX's: `jax.jvp` of the very equations the forward model evaluates
(`equations.terms_from_geometry` then `equations.reflectance`), one JVP per free
parameter, traced to a scalar jaxpr, printed as straight-line Python by
`_jaxpr_to_python` (the primal part shared by the JVPs printed once) and compiled by
numba. So the numba solvers get exact (autodiff) derivatives of the same physics, and an
edit to `equations` reaches them with no second copy to keep in step.

The program is split by data dependence (`scalar_jaxpr_to_split_source`): everything that
depends only on an observation's geometry and the fixed parameters is computed once per
observation (`ColumnFunctions.hoist`, into a row of residual values); what depends on
the free parameters is computed at every step (`ColumnFunctions.columns`). For w alone,
the row holds the w-independent terms of the model (what `invert` hoists by hand); with
roughness fixed, the roughness terms; and so on for any set of free parameters.

Each set of free parameters gets its own pair of functions, generated and compiled once
per process on first use (~3-8 s).
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
from ._backends import jax_equations
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


def _reflectance(parameters, geometry):
    w, b, c, roughness, hs, bs0, hc, bc0 = parameters
    terms = jax_equations.terms_from_geometry(geometry, b, c, roughness, hs, bs0, hc, bc0, None, False)
    return jax_equations.reflectance(w, terms)


def _traced_columns(free: tuple[str, ...]):
    """The jaxpr of (r, dr/d free[0], ...) over scalar parameters and geometry terms."""
    indices = [PARAMETER_NAMES.index(name) for name in free]

    def columns(*flat):
        parameters = flat[: len(PARAMETER_NAMES)]
        geometry = GeometryTerms(*flat[len(PARAMETER_NAMES) :])
        outputs = [_reflectance(parameters, geometry)]
        for index in indices:  # one JVP per free parameter; the rest are constants

            def along(value, index=index):
                moved = list(parameters)
                moved[index] = value
                return _reflectance(moved, geometry)

            outputs.append(jax.jvp(along, (parameters[index],), (jnp.ones_like(parameters[index]),))[1])
        return outputs

    with jax.enable_x64(True):  # local scope: float64 literals in the traced program
        example = [jnp.float64(0.5)] * (len(PARAMETER_NAMES) + GEOMETRY_ROW)
        example[len(PARAMETER_NAMES) + _VALID] = jnp.bool_(True)
        return jax.make_jaxpr(columns)(*example)


def model_columns_source(free: tuple[str, ...]) -> tuple[str, int]:
    """Python source of the `hoist` and `columns` functions for `free`, and the row length."""
    argument_names = list(PARAMETER_NAMES) + list(GeometryTerms._fields)
    core, row_length = scalar_jaxpr_to_split_source(
        _traced_columns(free), argument_names, free, "_known_part", "_free_part"
    )
    fixed = [name for name in PARAMETER_NAMES if name not in free]
    free_in_order = [name for name in PARAMETER_NAMES if name in free]  # the split's order
    residual_names = [f"row{k}" for k in range(row_length)]
    hoist = [
        "def hoist(parameters, geometry, row):",
        *(f"    {name} = parameters[{PARAMETER_NAMES.index(name)}]" for name in fixed),
        *(
            f"    {name} = geometry[{k}]" + (" != 0.0" if k == _VALID else "")
            for k, name in enumerate(GeometryTerms._fields)
        ),
        f"    values = _known_part({', '.join(fixed + list(GeometryTerms._fields))})",
        *(f"    row[{k}] = values[{k}]" for k in range(row_length)),
    ]
    columns = [
        "def columns(parameters, row, out):",
        *(f"    {name} = parameters[{PARAMETER_NAMES.index(name)}]" for name in free),
        *(f"    {name} = row[{k}]" for k, name in enumerate(residual_names)),
        f"    values = _free_part({', '.join(residual_names + free_in_order)})",
        *(f"    out[{k}] = values[{k}]" for k in range(len(free) + 1)),
    ]
    return core + "\n\n" + "\n".join(hoist) + "\n\n\n" + "\n".join(columns) + "\n", row_length


class ColumnFunctions(NamedTuple):
    """The numba-compiled model of one set of free parameters (see the module docstring).

    hoist(parameters, geometry, row): from all `PARAMETER_NAMES` values (the free ones are
        ignored) and one observation's `GeometryTerms` row, writes its `row_length` values.
    columns(parameters, row, out): out[0] = r [1/sr], out[1 + j] = dr/d(free[j]).
    """

    hoist: object
    columns: object
    row_length: int


@functools.cache
def model_columns(free: tuple[str, ...]) -> ColumnFunctions:
    """The `ColumnFunctions` for the parameters named in `free` (compiled on first use)."""
    unknown = [name for name in free if name not in PARAMETER_NAMES]
    if unknown:
        raise ValueError(f"unknown parameter names {unknown}; expected names from {PARAMETER_NAMES}")
    source, row_length = model_columns_source(tuple(free))
    namespace = {"math": math}
    exec(compile(source, f"<lumaxlike columns {free}>", "exec"), namespace)
    jit = functools.partial(numba.njit, error_model="numpy", fastmath=FASTMATH)
    for name in ("_known_part", "_free_part"):  # called from the wrappers below
        namespace[name] = jit(namespace[name])
    return ColumnFunctions(jit(namespace["hoist"]), jit(namespace["columns"]), row_length)


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
