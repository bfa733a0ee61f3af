"""`fit` with Chandrasekhar's exact H-function: the numba solver (whose derivative code
calls numba's `exact_terms` for the per-angle terms, `_jaxpr_to_python`'s opaque calls)
agrees with the JAX solver, and both recover the truth from noise-free data."""

import math

import numpy as np
import pytest

import lumaxlike
from lumaxlike import HapkeParams, Status
from lumaxlike.testing import multi_angle_geometry

pytestmark = pytest.mark.slow  # fits with the exact H function, both solvers

TRUTH = HapkeParams(
    b=0.25, c=0.5, roughness=math.radians(20.0), hs=0.06, bs0=0.9, h_function="exact"
)
START = HapkeParams(
    b=0.32, c=0.38, roughness=math.radians(20.0), hs=0.06, bs0=0.9, h_function="exact"
)
FREE = ("w", "b", "c")


def reflectance(w, geometry, params):
    """(pixels, bands, observations) r [1/sr] by the JAX forward model (one compile)."""
    n_pixels, n_obs, _ = geometry[0].shape
    flat = [g.reshape(n_pixels * n_obs, 3) for g in geometry]
    w_flat = np.repeat(w, n_obs, axis=0)  # (pixels x observations, bands)
    r = lumaxlike.amsa(w_flat, *flat, params, backend="jax")
    return r.reshape(n_pixels, n_obs, -1).transpose(0, 2, 1)


def test_numba_fit_with_exact_h_agrees_with_jax():
    rng = np.random.default_rng(11)
    geometry = multi_angle_geometry(24, 16, rng)
    w_true = rng.uniform(0.15, 0.9, (24, 3))
    refl = reflectance(w_true, geometry, TRUTH)
    noisy = refl + rng.normal(0.0, 1e-4, refl.shape)
    # w starts given (not from `invert`): the test compiles the fit solvers only
    start = {"w": np.clip(w_true + 0.05, 0.01, 0.99)}
    results = {}
    for solver in ("numba", "jax"):
        for name, data in (("noise-free", refl), ("noisy", noisy)):
            results[solver, name] = lumaxlike.fit(
                data,
                *geometry,
                START,
                free=FREE,
                solver=solver,
                start=start,
                refl_sigma=1e-4,
                chunk_size=32,
            )
    for solver in (
        "numba",
        "jax",
    ):  # against the truth, independently of the other solver
        exact = results[solver, "noise-free"]
        assert np.all(exact.status == Status.CONVERGED)
        np.testing.assert_allclose(exact["w"], w_true, rtol=0, atol=1e-8)
        np.testing.assert_allclose(exact["b"], TRUTH.b, rtol=0, atol=1e-8)
        np.testing.assert_allclose(exact["c"], TRUTH.c, rtol=0, atol=1e-8)
    for name in ("noise-free", "noisy"):
        jax_result, numba_result = results["jax", name], results["numba", name]
        np.testing.assert_array_equal(jax_result.status, numba_result.status)
        # the same steps; whether the last one is needed can turn on rounding (|step| ~ tol)
        assert np.max(np.abs(jax_result.iterations - numba_result.iterations)) <= 1
        for parameter in FREE:
            # both end within tol = 1e-10 of their minimum; rounding differences in J
            # (numba's derivative code is fast-math, its exact_terms sums in another
            # order) move the minimum of the noisy problems by ~1e-9
            np.testing.assert_allclose(
                jax_result[parameter], numba_result[parameter], rtol=0, atol=1e-8
            )
        np.testing.assert_allclose(jax_result.covariance, numba_result.covariance, rtol=1e-6)


def test_numba_joint_fit_with_exact_h_agrees_with_jax():
    """A joint fit (c shared by a pixel's bands) with the exact H: numba's Schur-complement
    LM and JAX's take the same steps to the same optimum, the noise-free truth."""
    rng = np.random.default_rng(12)
    geometry = multi_angle_geometry(6, 12, rng)
    w_true = rng.uniform(0.2, 0.8, (6, 3))
    refl = reflectance(w_true, geometry, TRUTH)
    start = {"w": np.clip(w_true + 0.05, 0.01, 0.99)}
    results = {
        solver: lumaxlike.fit(
            refl,
            *geometry,
            START,
            free=FREE,
            shared=("c",),
            solver=solver,
            start=start,
            refl_sigma=1e-4,
        )
        for solver in ("numba", "jax")
    }
    for result in results.values():  # against the truth, each solver on its own
        assert np.all(result.status == Status.CONVERGED)
        np.testing.assert_allclose(result["w"], w_true, rtol=0, atol=1e-8)
        np.testing.assert_allclose(result["b"], TRUTH.b, rtol=0, atol=1e-8)
        np.testing.assert_allclose(result["c"], TRUTH.c, rtol=0, atol=1e-8)
    numba_result, jax_result = results["numba"], results["jax"]
    np.testing.assert_array_equal(numba_result.iterations, jax_result.iterations)
    for name in FREE:  # measured: 1e-15 apart; 1e-8 as the independent fit's test
        np.testing.assert_allclose(numba_result[name], jax_result[name], rtol=0, atol=1e-8)
    np.testing.assert_allclose(numba_result.sigma("c"), jax_result.sigma("c"), rtol=1e-6)
