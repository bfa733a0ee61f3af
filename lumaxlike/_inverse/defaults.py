"""The inversions' defaults that front ends show before anything runs (``lumaxlike --help``):
kept apart from the solvers so that reading them imports neither JAX nor numba."""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_ITER", "DEFAULT_FIT_MAX_ITER", "SOLVERS"]

SOLVERS = ("jax", "numba")
DEFAULT_MAX_ITER = 50  # solver iterations per problem at most
# fit's problems (several parameters, joint, regional) converge linearly where their residual
# is not zero: measured on 5-parameter fits with noise 1e-4 and 1e-3, 1-2 % need more than
# 50 steps, 0.1 % more than 200 (docs/fit.md)
DEFAULT_FIT_MAX_ITER = 200
