"""r and its derivatives with respect to any chosen Hapke parameters, compiled by numba.

The derivatives are JAX's: `jax.jvp` of the very equations the forward model evaluates
(`equations.terms_from_geometry` then `equations.reflectance`), one JVP per free
parameter, traced to a scalar jaxpr, printed as straight-line Python by
`_jaxpr_to_python` (the primal part shared by the JVPs printed once) and compiled by
numba. So the numba solvers get exact (autodiff) derivatives of the same physics, and an
edit to `equations` reaches them with no second copy to keep in step.

Each set of free parameters gets its own function (derivatives of the others are never
computed), generated and compiled once per process on first use (~3 s).

Two "column" functions share one calling convention, so the solver kernel is the same for
both: ``columns(parameters, observation, out)`` writes ``out[0] = r`` [1/sr] and
``out[1 + j] = dr/d(free[j])``, where `parameters` holds the values of
`PARAMETER_NAMES` and `observation` is one observation's precomputed row:
- `model_columns(free)`: the row is the observation's `GeometryTerms` (any free set);
- `albedo_columns`: the row is the observation's `PixelTerms`, for w alone (the terms do
  not depend on w, so they are computed once instead of at every step).
"""

from __future__ import annotations

import functools
import math

import jax
import jax.numpy as jnp
import numba

from .._params import PARAMETER_NAMES
from . import _backends, _scalar_math, equations
from ._backends import jax_equations, numba_equations
from ._jaxpr_to_python import scalar_jaxpr_to_source
from .equations import GeometryTerms, PixelTerms
from .numba_cache import refresh_when_sources_change

__all__ = [
    "PARAMETER_NAMES",
    "GEOMETRY_ROW",
    "TERMS_ROW",
    "model_columns",
    "model_columns_source",
    "albedo_columns",
]

GEOMETRY_ROW = len(GeometryTerms._fields)  # length of an observation's geometry row
TERMS_ROW = len(PixelTerms._fields)  # length of an observation's terms row
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


def model_columns_source(free: tuple[str, ...]) -> str:
    """Python source of the column function for the parameters named in `free`."""
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
        jaxpr = jax.make_jaxpr(columns)(*example)
    argument_names = list(PARAMETER_NAMES) + list(GeometryTerms._fields)
    body = scalar_jaxpr_to_source(jaxpr, "_columns_of_scalars", argument_names)
    unpack = [f"    {name} = parameters[{k}]" for k, name in enumerate(PARAMETER_NAMES)]
    unpack += [
        f"    {name} = observation[{k}]" + (" != 0.0" if k == _VALID else "")
        for k, name in enumerate(GeometryTerms._fields)
    ]
    store = [f"    out[{k}] = values[{k}]" for k in range(len(free) + 1)]
    wrapper = "\n".join(
        ["def columns(parameters, observation, out):", *unpack,
         f"    values = _columns_of_scalars({', '.join(argument_names)})", *store]
    )  # fmt: skip
    return body + "\n\n" + wrapper + "\n"


@functools.cache
def model_columns(free: tuple[str, ...]):
    """The numba-compiled column function for the parameters named in `free` (see module)."""
    unknown = [name for name in free if name not in PARAMETER_NAMES]
    if unknown:
        raise ValueError(f"unknown parameter names {unknown}; expected names from {PARAMETER_NAMES}")
    namespace = {"math": math}
    exec(compile(model_columns_source(tuple(free)), f"<lumaxlike columns {free}>", "exec"), namespace)
    jit = functools.partial(numba.njit, error_model="numpy", fastmath=FASTMATH)
    namespace["_columns_of_scalars"] = jit(inline="always")(namespace["_columns_of_scalars"])
    return jit(namespace["columns"])


_reflectance_and_slope = numba_equations.reflectance_and_slope


@numba.njit(error_model="numpy", cache=True)
def albedo_columns(parameters, observation, out):
    """r and dr/dw (analytic) at w = parameters[0], from an observation's `PixelTerms` row."""
    terms = PixelTerms(
        observation[0], observation[1], observation[2], observation[3], observation[4],
        observation[5], observation[6], observation[7], observation[8],
    )  # fmt: skip
    out[0], out[1] = _reflectance_and_slope(parameters[0], terms)


refresh_when_sources_change(albedo_columns, equations, _backends, _scalar_math)
