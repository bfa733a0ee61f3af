"""Shared test helpers: the solvers every inversion test runs over, random geometries, and
the recovery check every model configuration must pass."""

import numpy as np

import lumaxlike
from lumaxlike._profile import default_params, random_geometry

__all__ = ["SOLVERS", "BACKENDS", "FULL_PARAMS", "random_geometry", "assert_both_solvers_recover_w"]

SOLVERS = ("jax", "numba")
BACKENDS = ("jax", "numba")

# roughness 20 deg and both opposition effects (the benchmarks' and profiles' default)
FULL_PARAMS = default_params()


def assert_both_solvers_recover_w(params, seed, n_pixels=300, n_bands=3):
    """`invert` with both solvers on the noise-free reflectance of the model `params`
    (random geometry, w uniform in (0.02, 0.98)): over 90 % converge, w to 1e-8 where
    converged and NaN elsewhere, and the two solvers agree (same statuses, w to 1e-9)."""
    rng = np.random.default_rng(seed)
    geometry = random_geometry(n_pixels, rng)
    w_true = rng.uniform(0.02, 0.98, (n_pixels, n_bands))
    refl = lumaxlike.amsa(w_true, *geometry, params, backend="numba")
    results = {solver: lumaxlike.invert(refl, *geometry, params, solver=solver) for solver in SOLVERS}
    for result in results.values():
        converged = result.status == lumaxlike.Status.CONVERGED
        assert converged.mean() > 0.9
        np.testing.assert_allclose(result.w[converged], w_true[converged], atol=1e-8, rtol=0)
        assert np.all(np.isnan(result.w[~converged]))
    np.testing.assert_array_equal(results["jax"].status, results["numba"].status)
    np.testing.assert_allclose(results["jax"].w, results["numba"].w, atol=1e-9, rtol=0)
