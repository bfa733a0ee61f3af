"""The residuals and Jacobian columns of least-squares problems from the model's
derivative program, written once for the JAX solvers of `fit` and for `sample`'s log
density (whose gradient is the columns' sum against the residuals)."""

from __future__ import annotations

import jax.numpy as jnp

from ..._model.columns_program import split_columns
from ..._params import PARAMETER_NAMES

__all__ = ["residuals_and_columns"]


def residuals_and_columns(y, args, free_index, key):
    """r - r_obs and dr/d(free[j]) for free parameters y (problems..., p): the residuals
    (problems..., observations) and the p columns of the Jacobian (each that shape).

    The model's derivative program (`columns_program.split_columns`) runs in parts: the
    `rows` of args hold its known part, computed once per observation
    (`jax_solver._fit_setup`, `sample`'s `density.pixel_rows`); here its step part runs
    once per problem and its lane part per observation. The step
    values and the outputs are divided by `unit`, a run-time 1: that changes no bit, but
    a division is an operation XLA does not duplicate, so they are computed once and
    stored. Otherwise XLA:CPU fuses the work they share into the loop of each of their
    consumers, and computes it again for every column and every parameter.
    An observation left out (`use` False) has a zero residual, and so a zero row of J.
    """
    rows, refl, use, unit = args
    program = split_columns(tuple(PARAMETER_NAMES[k] for k in free_index), key, y.dtype)
    by_position = sorted(
        range(len(free_index)), key=lambda j: free_index[j]
    )  # the program's input order
    step_values = [
        v / unit if jnp.issubdtype(v.dtype, jnp.floating) else v
        for v in program.step(*(y[..., j] for j in by_position))
    ]
    # rows: problems..., observations; a step value, one per problem: across them
    r, *columns = program.lane(rows, [v[..., None] for v in step_values])
    residual = jnp.where(use, r - refl, 0.0) / unit
    return residual, [jnp.where(use, column, 0.0) / unit for column in columns]
