"""Shared test helpers: the solvers every inversion test runs over, random geometries, and
the recovery check every model configuration must pass."""

import numpy as np

import lumaxlike
from lumaxlike.testing import default_params, random_geometry

__all__ = [
    "SOLVERS",
    "BACKENDS",
    "FULL_PARAMS",
    "random_geometry",
    "assert_both_solvers_recover_w",
    "assert_reproduces_invert",
]

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
    results = {
        solver: lumaxlike.invert(refl, *geometry, params, solver=solver) for solver in SOLVERS
    }
    for result in results.values():
        converged = result.status == lumaxlike.Status.CONVERGED
        assert converged.mean() > 0.9
        np.testing.assert_allclose(result.w[converged], w_true[converged], atol=1e-8, rtol=0)
        assert np.all(np.isnan(result.w[~converged]))
    np.testing.assert_array_equal(results["jax"].status, results["numba"].status)
    np.testing.assert_allclose(results["jax"].w, results["numba"].w, atol=1e-9, rtol=0)


def assert_reproduces_invert(
    result, expected, refl, solver, label="", last_bits=None, sigma_eps=16
):
    """`invert`'s `result` equals `expected` (a mapping of its fields' stored arrays).

    numba: bit for bit. JAX: the same statuses and iterations, the values to their last
    bits: XLA:CPU contracts a * b + c into fused multiply-adds inside its fusions, so a
    rearranged JAX graph evaluating the same expressions rounds differently in the last
    place (measured: w within 1 ulp, residual within 3 eps |refl|, sigma within 5 eps
    relative, dr/dw at points an ulp apart being steep near w = 1). `last_bits` (default:
    JAX only) asks for that comparison where the model's own arithmetic was rearranged;
    `sigma_eps`: sigma's relative tolerance in units of eps.
    """
    last_bits = solver != "numba" if last_bits is None else last_bits
    eps = np.finfo(result.w.dtype).eps
    tolerance = {
        "w": (2 * eps, 0.0),
        "residual": (8 * eps * np.abs(refl), 0.0),
        "sigma": (0.0, sigma_eps * eps),
    }
    for field in ("w", "status", "iterations", "residual", "sigma"):
        actual, wanted = getattr(result, field), expected[field]
        assert actual.dtype == wanted.dtype, f"{label} {field}"
        if not last_bits or field not in tolerance:
            np.testing.assert_array_equal(actual, wanted, err_msg=f"{label} {field}")
            continue
        atol, rtol = tolerance[field]
        np.testing.assert_array_equal(
            np.isnan(actual), np.isnan(wanted), err_msg=f"{label} {field}"
        )
        close = np.abs(actual - wanted) <= atol + rtol * np.abs(wanted)
        assert np.all(close | np.isnan(wanted)), f"{label} {field}"
