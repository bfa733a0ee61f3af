"""float32 reaches the stopping rules: the JAX `fit` and `invert` in float32 converge where
float64 does, and to the float64 answer within what float32 can resolve.

The rules' cost tie (`lm_rules.cost_tie`) scales with the dtype's machine epsilon: with
float64's 1e-12 in float32, the tie and the no-gain test were out of reach, and half of
noisy 4-parameter fits ended MAX_ITER.
"""

import math

import numpy as np
import pytest

import lumaxlike
from lumaxlike import HapkeParams, Status
from lumaxlike._inverse import lm_rules
from lumaxlike._model._backends import retarget_to_jax, retarget_to_numba
from lumaxlike.testing import multi_angle_geometry, multi_angle_reflectance

TRUTH = HapkeParams(b=0.25, c=0.5, roughness=math.radians(20.0), hs=0.06, bs0=0.9, hc=0.03, bc0=0.5)
START = HapkeParams(b=0.3, c=0.4, roughness=math.radians(15.0), hs=0.06, bs0=0.9, hc=0.03, bc0=0.5)
FREE = ("w", "b", "c", "roughness")
SIGMA = 1e-4


def test_cost_tie_is_float64s_constant_in_float64_and_scales_in_float32():
    jax_rules = retarget_to_jax(lm_rules)
    assert retarget_to_numba(lm_rules).cost_tie(1.0) == lm_rules.COST_TIE  # bit for bit
    assert jax_rules.cost_tie(np.float64(1.0)) == lm_rules.COST_TIE
    ratio = float(np.finfo(np.float32).eps / np.finfo(np.float64).eps)
    assert jax_rules.cost_tie(np.float32(1.0)) == pytest.approx(lm_rules.COST_TIE * ratio)


@pytest.mark.slow  # two fits (float64, float32), each compiled for its dtype
def test_float32_fit_converges_where_float64_does_and_agrees():
    rng = np.random.default_rng(0)
    n_pixels, n_bands, n_obs = 60, 4, 16  # 240 noisy 4-parameter problems
    geometry = multi_angle_geometry(n_pixels, n_obs, rng)
    w_true = rng.uniform(0.2, 0.9, (n_pixels, n_bands))
    refl = multi_angle_reflectance(w_true, *geometry, TRUTH)
    refl = refl + rng.normal(0.0, SIGMA, refl.shape)
    results = {
        dtype: lumaxlike.fit(
            refl.astype(dtype),
            *(g.astype(dtype) for g in geometry),
            START,
            free=FREE,
            solver="jax",
            refl_sigma=SIGMA,
            chunk_size=n_pixels,
        )
        for dtype in (np.float64, np.float32)
    }
    converged = {d: r.status == Status.CONVERGED for d, r in results.items()}
    assert converged[np.float64].mean() >= 0.99
    assert converged[np.float32].mean() >= converged[np.float64].mean() - 0.01
    both = converged[np.float64] & converged[np.float32]
    for name in FREE:
        sigma = results[np.float64].sigma(name)[both]
        z = (results[np.float32][name][both] - results[np.float64][name][both]) / sigma
        # float32's cost resolves a residual of 1e-4 on r ~ 0.1 to ~3e-5 relative (its
        # rounding), i.e. points within ~0.02 sigma of the minimum are ties to it: float32
        # stops there (measured: at most 0.008 sigma).
        assert np.max(np.abs(z)) <= 0.02


def test_float32_invert_agrees_with_float64():
    # float32 inputs, solved in float32 and (upcast) in float64: the same problems
    cube = lumaxlike.testing.synthetic_cube(40, 16, np.float32, seed=3)
    arrays = [cube[name] for name in ("refl", "to_sun", "to_sensor", "normal")]
    results = {
        dtype: lumaxlike.invert(*(a.astype(dtype) for a in arrays), cube["params"], "jax")
        for dtype in (np.float64, np.float32)
    }
    valid = results[np.float64].status == Status.CONVERGED  # others: hidden facets (NaN r)
    assert not np.any(results[np.float64].status == Status.MAX_ITER)
    assert np.all(results[np.float32].status[valid] == Status.CONVERGED)
    difference = np.abs(results[np.float32].w.astype(np.float64) - results[np.float64].w)
    assert np.mean(difference[valid] <= 1e-5) >= 0.999
