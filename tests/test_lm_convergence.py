"""When a Levenberg-Marquardt problem is CONVERGED (`lm_rules.converged`), and what it returns.

A damped step is short because lambda is large, not because the minimum is near: such a
step must not end a problem. CONVERGED problems must sit at a minimum of their whole
problem: scipy's least_squares started from the returned point finds nothing lower, and
the reported cost is the residual of the returned values. The case that needs the rule's
second test (no step can lower the cost beyond rounding) is a 5-parameter fit with noise,
whose Gauss-Newton step at the minimum is rounding amplified by the conditioning.
"""

import dataclasses
import math

import numpy as np
import pytest
import scipy.optimize

import lumaxlike
from lumaxlike import HapkeParams, Status
from lumaxlike._inverse import lm_rules
from lumaxlike._inverse.fit.fit import default_bounds
from lumaxlike.testing import multi_angle_geometry

from .helpers import SOLVERS

FREE = ("w", "b", "c", "roughness", "hs")
START = HapkeParams(b=0.3, c=0.4, roughness=math.radians(18.0), hs=0.06, bs0=1.0, hc=0.05, bc0=0.5)
N_OBS = 16


def test_a_short_damped_step_is_not_convergence():
    """The rule alone: each of its three ways to converge, and the damped step that is none."""
    tol = 1e-10
    far = dict(newton_size=1.0, newton_decrease=1.0, cost_trial=1.0)
    # a rejected trial, heavily damped: its step is tiny, the minimum is still far
    assert not lm_rules.converged(1e-12, **far, accept=False, damping=1e6, tol=tol)
    assert not lm_rules.converged(1e-12, **far, accept=True, damping=1e6, tol=tol)
    # the same step undamped is the Gauss-Newton step: the minimum is within tol
    assert lm_rules.converged(1e-12, **far, accept=False, damping=0.0, tol=tol)
    # an accepted trial whose Gauss-Newton step is within tol
    assert lm_rules.converged(1.0, 1e-11, 1.0, 1.0, accept=True, damping=1.0, tol=tol)
    # ... or whose Gauss-Newton step could lower the cost by less than rounding
    tie = lm_rules.COST_TIE
    assert lm_rules.converged(1.0, 1.0, 0.5 * tie, 1.0, accept=True, damping=1.0, tol=tol)
    assert not lm_rules.converged(1.0, 1.0, 2.0 * tie, 1.0, accept=True, damping=1.0, tol=tol)
    # a rejected trial is no test of the point it leaves
    assert not lm_rules.converged(1.0, 1e-11, 0.0, 1.0, accept=False, damping=1.0, tol=tol)


def _problems(n_pixels, n_bands, sigma, seed):
    """Noisy reflectance of per-band w, b, c and per-pixel roughness, hs (`lumaxlike.amsa`)."""
    rng = np.random.default_rng(seed)
    geometry = multi_angle_geometry(n_pixels, N_OBS, rng)
    truth = {
        "w": rng.uniform(0.2, 0.85, (n_pixels, n_bands)),
        "b": rng.uniform(0.2, 0.4, (n_pixels, n_bands)),
        "c": rng.uniform(0.25, 0.6, (n_pixels, n_bands)),
        "roughness": np.radians(rng.uniform(12.0, 28.0, n_pixels)),
        "hs": rng.uniform(0.04, 0.09, n_pixels),
    }
    refl = np.empty((n_pixels, n_bands, N_OBS))
    for pixel in range(n_pixels):
        refl[pixel] = _model(_vector(truth, pixel), [g[pixel] for g in geometry], n_bands)
    return refl + sigma * rng.standard_normal(refl.shape), geometry, truth


def _vector(values, pixel):
    """One pixel's parameters as one vector: w, b, c of every band, then roughness, hs."""
    per_band = [np.asarray(values[name])[pixel] for name in ("w", "b", "c")]
    shared = [np.reshape(values[name], (-1,))[pixel] for name in ("roughness", "hs")]
    return np.concatenate(per_band + [np.array(shared)])


def _model(x, geometry, n_bands):
    """(bands, observations) r [1/sr] of one pixel's parameter vector (`_vector`)."""
    w, b, c = x[:n_bands], x[n_bands : 2 * n_bands], x[2 * n_bands : 3 * n_bands]
    out = np.empty((n_bands, N_OBS))
    for band in range(n_bands):
        params = dataclasses.replace(START, b=b[band], c=c[band], roughness=x[-2], hs=x[-1])
        out[band] = lumaxlike.amsa(np.full((N_OBS, 1), w[band]), *geometry, params)[:, 0]
    return out


def _scipy_from(x, refl, geometry, sigma, n_bands):
    """scipy's least_squares on the whole weighted residual, started at `x`."""
    bounds = default_bounds(np.float64)
    names = ["w"] * n_bands + ["b"] * n_bands + ["c"] * n_bands + ["roughness", "hs"]
    lower, upper = (np.array([bounds[n][i] for n in names]) for i in (0, 1))

    def residual(x):
        return ((_model(x, geometry, n_bands) - refl) / sigma).ravel()

    solution = scipy.optimize.least_squares(
        residual, np.clip(x, lower, upper), bounds=(lower, upper), x_scale="jac",
        xtol=1e-15, ftol=1e-15, gtol=1e-15,
    )  # fmt: skip
    return residual(x), solution


@pytest.mark.parametrize("solver", SOLVERS)
def test_joint_fit_converged_is_a_minimum(solver):
    """Joint fits with noise: every CONVERGED pixel is where scipy ends too, and its reported
    cost is the weighted residual of its returned values."""
    sigma, n_bands = 1e-3, 3
    refl, geometry, _ = _problems(8, n_bands, sigma, seed=3)
    result = lumaxlike.fit(refl, *geometry, START, free=FREE, shared=("roughness", "hs"),
                           solver=solver, refl_sigma=sigma)  # fmt: skip
    converged = np.flatnonzero(result.status == Status.CONVERGED)
    assert converged.size >= 7
    for pixel in converged:
        x = _vector(result.values, pixel)
        geometry_pixel = [g[pixel] for g in geometry]
        residual, solution = _scipy_from(x, refl[pixel], geometry_pixel, sigma, n_bands)
        cost = residual @ residual
        # the reported cost is the objective at the returned values (rounding of ~50 rows)
        assert result.cost[pixel] == pytest.approx(cost, rel=1e-11)
        # nothing lower nearby: scipy gains less than the LM's tie on costs of ~50
        assert 2.0 * solution.cost >= cost * (1.0 - 1e-10)
        # and the point is scipy's: 1e-6 is 1e-3 of the smallest sigma of these parameters
        np.testing.assert_allclose(x, solution.x, rtol=0, atol=1e-6)


@pytest.mark.parametrize("solver", SOLVERS)
def test_noisy_five_parameter_fits_converge_at_their_minimum(solver):
    """Per-band fits of 5 parameters with noise end CONVERGED (not MAX_ITER) within the
    default max_iter, at a point scipy cannot improve on."""
    sigma = 1e-3
    refl, geometry, _ = _problems(12, 1, sigma, seed=5)
    # per-band fits of the same scene: roughness and hs free in every band
    result = lumaxlike.fit(refl, *geometry, START, free=FREE, solver=solver, refl_sigma=sigma)
    status = result.status[:, 0]
    assert np.sum(status == Status.CONVERGED) >= 11
    for pixel in np.flatnonzero(status == Status.CONVERGED):
        values = {name: result.values[name][pixel : pixel + 1] for name in FREE}
        values["roughness"], values["hs"] = (values[n][:, 0] for n in ("roughness", "hs"))
        x = _vector(values, 0)
        geometry_pixel = [g[pixel] for g in geometry]
        residual, solution = _scipy_from(x, refl[pixel], geometry_pixel, sigma, 1)
        cost = residual @ residual
        # residual_norm is sqrt of the unweighted sum of squares
        assert result.residual_norm[pixel, 0] == pytest.approx(sigma * math.sqrt(cost), rel=1e-11)
        assert 2.0 * solution.cost >= cost * (1.0 - 1e-10)


def test_joint_sigma_is_calibrated():
    """200 noisy joint problems: |fitted - truth| / sigma has the median of |N(0, 1)| (0.674),
    within 0.55-0.80 for every parameter (sampling scatter and the model's curvature)."""
    sigma = 1e-4
    refl, geometry, truth = _problems(200, 3, sigma, seed=11)
    result = lumaxlike.fit(refl, *geometry, START, free=FREE, shared=("roughness", "hs"),
                           solver="numba", refl_sigma=sigma)  # fmt: skip
    converged = result.status == Status.CONVERGED
    assert converged.mean() >= 0.98
    for name in FREE:
        z = (np.asarray(result.values[name]) - truth[name]) / result.sigma(name)
        z = z[converged] if z.ndim == 1 else z[converged].ravel()
        assert 0.55 <= np.median(np.abs(z)) <= 0.80, name
