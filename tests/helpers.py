"""Shared test helpers: the solvers every inversion test runs over, random geometries."""

from lumaxlike._profile import default_params, random_geometry

__all__ = ["SOLVERS", "BACKENDS", "FULL_PARAMS", "random_geometry"]

SOLVERS = ("jax", "numba")
BACKENDS = ("jax", "numba")

# roughness 20 deg and both opposition effects (the benchmarks' and profiles' default)
FULL_PARAMS = default_params()
