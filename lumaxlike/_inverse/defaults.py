"""The inversions' defaults that front ends show before anything runs (``lumaxlike --help``):
kept apart from the solvers so that reading them imports neither JAX nor numba."""

from __future__ import annotations

__all__ = ["DEFAULT_MAX_ITER", "SOLVERS"]

SOLVERS = ("jax", "numba")
DEFAULT_MAX_ITER = 50  # solver iterations per problem at most
