"""The program of r and its derivatives along chosen Hapke parameters, for the solvers of
`fit`: one jaxpr, traced from the equations the forward model evaluates, that the numba
solver prints as Python (`numba_jacobian`) and the JAX solver evaluates part by part
(`jaxpr_split.SplitProgram`).

Inputs: the values of `PARAMETER_NAMES` (w first), then an observation's
`GeometryTerms` fields, all scalars. Outputs: r [1/sr], then dr/d(free[j]) for each free
parameter in the order given: one JVP per free parameter (the model's analytic
`custom_jvp` rule for w, autodiff for the others), their shared primal traced once.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
import numpy as np

from .._params import PARAMETER_NAMES
from .equations import GeometryTerms
from .family import ModelKey, jax_equations_for, jax_scalar_table_equations_for
from .jax_model import reflectance_core
from .jaxpr_split import SplitProgram

__all__ = ["traced_columns", "split_columns"]

_VALID = GeometryTerms._fields.index("valid")


def _reflectance(parameters, geometry, key: ModelKey, equations):
    """r through the JAX model's `reflectance_core`: its custom JVP rule gives dr/dw
    analytically, autodiff the derivatives along the other parameters."""
    w, *scalars = parameters
    terms = equations.terms_from_geometry(geometry, *scalars, None, False)
    return reflectance_core(w, terms, key)


def traced_columns(
    free: tuple[str, ...], key: ModelKey, dtype=np.float64, scalar_tables: bool = False
):
    """The closed jaxpr of (r, dr/d free[0], ...) with inputs of `dtype`, traced under
    the caller's ``jax_enable_x64`` setting (float64 needs it on).

    scalar_tables: the exact H's per-angle terms computed from its tables held as
    tuples of scalars (`family.jax_scalar_table_equations_for`), so that the program has
    scalar operations only (for `_jaxpr_to_python`); the same model otherwise."""
    indices = [PARAMETER_NAMES.index(name) for name in free]
    equations = jax_scalar_table_equations_for(key) if scalar_tables else jax_equations_for(key)

    def columns(*flat):
        parameters = flat[: len(PARAMETER_NAMES)]
        geometry = GeometryTerms(*flat[len(PARAMETER_NAMES) :])
        outputs = [_reflectance(parameters, geometry, key, equations)]
        for index in indices:  # one JVP per free parameter; the rest are constants

            def along(value, index=index):
                moved = list(parameters)
                moved[index] = value
                return _reflectance(moved, geometry, key, equations)

            outputs.append(
                jax.jvp(along, (parameters[index],), (jnp.ones_like(parameters[index]),))[1]
            )
        return outputs

    example = [jnp.asarray(0.5, dtype)] * (len(PARAMETER_NAMES) + len(GeometryTerms._fields))
    example[len(PARAMETER_NAMES) + _VALID] = jnp.bool_(True)
    return jax.make_jaxpr(columns)(*example)


def split_columns(free: tuple[str, ...], key: ModelKey, dtype) -> SplitProgram:
    """`traced_columns` split into known (fixed parameters and geometry), step (free
    parameters) and lane parts, for the dtype and ``jax_enable_x64`` setting in effect."""
    x64 = jax.dtypes.canonicalize_dtype(np.float64) == np.dtype(np.float64)  # jax_enable_x64
    return _split_columns(tuple(free), key, np.dtype(dtype).name, bool(x64))


@functools.cache
def _split_columns(free, key, dtype_name, x64):
    with jax.enable_x64(x64):  # folded constants in the precision of the caller's scope
        closed = traced_columns(free, key, np.dtype(dtype_name))
        return SplitProgram(closed, [PARAMETER_NAMES.index(name) for name in free])
