"""The Hapke model family: which pieces of `equations` a model configuration is built from.

A configuration (`ModelKey`: multiple scattering, H-function, phase function) is static: it is chosen
once, when the equations are retargeted to JAX or numba, never per pixel. Each choice
binds a few generic names of `equations` (`multiple_scattering_sums`, the H-function
slots `h_angle_terms`, `h_values_and_slopes`, and the phase-function slots
`phase_closed_form`, `phase_closed_coefficient`) to one of the small composable functions of
`equations` or `h_functions`, so the
model, its analytic dr/dw, the solvers' rules and the numba kernels are the same code for
every configuration. The numeric parameters (porosity K, roughness, ...) stay runtime
values.
"""

from __future__ import annotations

import functools

# the configurations (shared with the parameter types: `lumaxlike._configuration`)
from .._configuration import (
    DEFAULT_KEY,
    H_FUNCTIONS,
    MULTIPLE_SCATTERING,
    PHASE_FUNCTIONS,
    ModelKey,
)

__all__ = [
    "ModelKey",
    "DEFAULT_KEY",
    "MULTIPLE_SCATTERING",
    "H_FUNCTIONS",
    "PHASE_FUNCTIONS",
    "bindings",
    "jax_equations_for",
    "jax_scalar_table_equations_for",
    "numba_equations_for",
    "numba_kernel_for",
]


def bindings(key: ModelKey, h_twins) -> dict:
    """The bindings of `equations` names for configuration `key` (`h_twins`: the JAX or
    numba twins of `h_functions`)."""
    from ._backends import h_function_bindings

    return {
        **MULTIPLE_SCATTERING[key.multiple_scattering],
        **PHASE_FUNCTIONS[key.phase_function],
        **h_function_bindings(h_twins, key.h_function),
    }


@functools.cache
def jax_equations_for(key: ModelKey):
    """`equations` over jax.numpy for configuration `key` (a namespace of functions)."""
    from . import equations
    from ._backends import jax_equations, jax_h_functions, retarget_to_jax

    return (
        jax_equations
        if key == DEFAULT_KEY
        else retarget_to_jax(equations, **bindings(key, jax_h_functions))
    )


@functools.cache
def jax_scalar_table_equations_for(key: ModelKey):
    """`jax_equations_for(key)` with the exact H's tables as tuples of scalars
    (`_backends.jax_scalar_h_functions`): the same model, traced to scalar operations only."""
    from . import equations
    from ._backends import jax_scalar_h_functions, retarget_to_jax

    return retarget_to_jax(equations, **bindings(key, jax_scalar_h_functions))


@functools.cache
def numba_equations_for(key: ModelKey):
    """`equations` compiled by numba for configuration `key` (a namespace of functions)."""
    from . import equations
    from ._backends import numba_equations, numba_h_functions, retarget_to_numba

    return (
        numba_equations
        if key == DEFAULT_KEY
        else retarget_to_numba(equations, **bindings(key, numba_h_functions))
    )


@functools.cache
def numba_kernel_for(kernel, key: ModelKey, names: tuple[str, ...]):
    """A numba kernel (`numba_cache.cached_njit`, written over the default configuration's
    equations) for configuration `key`: the kernel itself for the default, else the same
    code compiled again (`numba_cache.compile_variant`, cached under ``key.name``) with its
    global functions `names` bound to `key`'s equations of those names."""
    from .numba_cache import compile_variant

    if key == DEFAULT_KEY:
        return kernel
    equations = numba_equations_for(key)
    return compile_variant(kernel, key.name, **{name: getattr(equations, name) for name in names})
