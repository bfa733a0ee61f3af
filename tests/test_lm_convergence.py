"""When a Levenberg-Marquardt problem is CONVERGED (`lm_rules.converged`), and what it returns.

A damped step is short because lambda is large, not because the minimum is near: such a
step must not end a problem. CONVERGED problems must sit at a minimum of their whole
problem: scipy's least_squares started from the returned point finds nothing lower, and
the reported cost is the residual of the returned values. The case that needs the rule's
second test (no step can lower the cost beyond rounding) is a 5-parameter fit with noise,
whose Gauss-Newton step at the minimum is rounding amplified by the conditioning.

The noise-free joint, MAP (a prior on b) and regional fits take their data from
`independent_hapke`, a NumPy model written from the papers, and are checked on it alone:
the truth to 1e-8, scipy on the whole problem's residual with exact (complex-step)
derivatives, the reported cost, and the Gauss-Newton step of the whole problem wherever
they are CONVERGED. Their fits share the compiled kernels of the noisy joint tests above.
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

from . import independent_hapke
from .helpers import SOLVERS

pytestmark = pytest.mark.slow  # many-parameter fits checked against scipy

FREE = ("w", "b", "c", "roughness", "hs")
START = HapkeParams(b=0.3, c=0.4, roughness=math.radians(18.0), hs=0.06, bs0=1.0, hc=0.05, bc0=0.5)
N_OBS = 16


def test_a_short_damped_step_is_not_convergence():
    """The rule alone: each of its ways to converge, and the damped step that is none."""
    tol, tie = 1e-10, lm_rules.COST_TIE
    # predicted decrease 1 of a cost 1; the Gauss-Newton step at the trial far
    far = dict(predicted=1.0, cost=1.0, newton_size=1.0)
    # a rejected trial, heavily damped: its step is tiny, the minimum is still far
    assert not lm_rules.converged(1e-12, **far, accept=False, damping=1e6, tol=tol)
    assert not lm_rules.converged(1e-12, **far, accept=True, damping=1e6, tol=tol)
    # the same step undamped is the Gauss-Newton step: the minimum is within tol
    assert lm_rules.converged(1e-12, **far, accept=False, damping=0.0, tol=tol)
    # an undamped step that could lower the cost by less than rounding: taken if accepted,
    # and the last; damped, the same short gain says nothing
    assert lm_rules.converged(1.0, 0.5 * tie, 1.0, 1.0, accept=True, damping=0.0, tol=tol)
    assert lm_rules.converged(1.0, 0.5 * tie, 1.0, 1.0, accept=False, damping=0.0, tol=tol)
    assert not lm_rules.converged(1.0, 2.0 * tie, 1.0, 1.0, accept=True, damping=0.0, tol=tol)
    assert not lm_rules.converged(1.0, 0.5 * tie, 1.0, 1.0, accept=True, damping=1.0, tol=tol)
    # an accepted trial whose Gauss-Newton step is within tol
    assert lm_rules.converged(1.0, 1.0, 1.0, 1e-11, accept=True, damping=1.0, tol=tol)
    # a rejected trial is no test of the point it leaves
    assert not lm_rules.converged(1.0, 1.0, 1.0, 1e-11, accept=False, damping=1.0, tol=tol)
    # a singular Gauss-Newton system: an accepted short step ends the problem (UNDETERMINED)
    assert lm_rules.converged(1e-12, 1.0, 1.0, math.inf, accept=True, damping=1.0, tol=tol)
    assert not lm_rules.converged(1e-12, 1.0, 1.0, math.inf, accept=False, damping=1.0, tol=tol)
    # an accepted trial whose Gauss-Newton step would gain only a tie: lambda 0, so that
    # step is the next and last one; otherwise Nielsen's rule
    at_tie = lm_rules.next_damping(True, 0.5, 1.0, 2.0, 0.5 * tie, 1.0)
    assert at_tie == (0.0, 2.0)
    assert lm_rules.next_damping(True, 0.5, 1.0, 2.0, 2.0 * tie, 1.0)[0] > 0.0
    assert lm_rules.next_damping(False, 0.5, 1.0, 2.0, 0.5 * tie, 1.0)[0] >= 1.0


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
        residual,
        np.clip(x, lower, upper),
        bounds=(lower, upper),
        x_scale="jac",
        xtol=1e-15,
        ftol=1e-15,
        gtol=1e-15,
    )
    return residual(x), solution


@pytest.mark.parametrize("solver", SOLVERS)
def test_joint_fit_converged_is_a_minimum(solver):
    """Joint fits with noise: every CONVERGED pixel is where scipy ends too, and its reported
    cost is the weighted residual of its returned values."""
    sigma, n_bands = 1e-3, 3
    refl, geometry, _ = _problems(8, n_bands, sigma, seed=3)
    result = lumaxlike.fit(
        refl,
        *geometry,
        START,
        free=FREE,
        shared=("roughness", "hs"),
        solver=solver,
        refl_sigma=sigma,
    )
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
    result = lumaxlike.fit(
        refl,
        *geometry,
        START,
        free=FREE,
        shared=("roughness", "hs"),
        solver="numba",
        refl_sigma=sigma,
    )
    converged = result.status == Status.CONVERGED
    assert converged.mean() >= 0.98
    for name in FREE:
        z = (np.asarray(result.values[name]) - truth[name]) / result.sigma(name)
        z = z[converged] if z.ndim == 1 else z[converged].ravel()
        assert 0.55 <= np.median(np.abs(z)) <= 0.80, name


# Noise-free fits of data from `independent_hapke`, a NumPy model written from the papers:
# checked against the truth, against scipy on the whole problem's residual (exact
# derivatives by the complex step), their reported cost against the residual of their
# returned values, and CONVERGED against the Gauss-Newton step of the whole problem.
N_BANDS, N_PIXELS = 3, 6
N_ROWS = N_BANDS * N_OBS
REGIONS = np.array([0, 0, 0, 1, 1, 1])
SIGMA = 1e-3  # refl_sigma of the prior fits [1/sr]
PRIOR_B = (0.3, 0.05)  # (mean, sd) of b
TOL = 1e-10  # fit's default tol in float64
COMPLEX_STEP = 1e-30
# Every noise-free fit and scipy start from START with w = 0.5 (fit's default start of w
# would compile invert's kernels too, 8 s of numba)
START_W = {"w": 0.5}


def _independent_r(x, geometry):
    """(bands, observations) r [1/sr] of one pixel's vector x: w, b, c of each band, then
    roughness, hs (complex x: the complex step)."""
    w, b, c = (x[k * N_BANDS : (k + 1) * N_BANDS, None] for k in range(3))
    return independent_hapke.reflectance(
        w, *geometry, b, c, x[-2], x[-1], START.bs0, START.hc, START.bc0
    )


def _jacobian(function, x):
    """d function / d x, exact to rounding by the complex step (each column one evaluation)."""
    columns = []
    for k in range(x.size):
        shifted = x.astype(complex)
        shifted[k] += COMPLEX_STEP * 1j
        columns.append(np.imag(function(shifted)) / COMPLEX_STEP)
    return np.stack(columns, axis=-1)


def _start_vector():
    """START and START_W as one pixel's vector: where the noise-free fits and scipy start."""
    return np.array(
        [START_W["w"]] * N_BANDS
        + [START.b] * N_BANDS
        + [START.c] * N_BANDS
        + [START.roughness, START.hs]
    )


def _least_squares(residual, x0):
    """scipy's trust-region reflective least squares to its limits, exact Jacobian."""
    solution = scipy.optimize.least_squares(
        residual,
        x0,
        jac=lambda x: _jacobian(residual, x),
        x_scale="jac",
        xtol=1e-15,
        ftol=1e-15,
        gtol=1e-15,
    )
    assert solution.status > 0
    return solution


def _data_residual(refl, geometry, sigma=1.0):
    return lambda x: ((_independent_r(x, geometry) - refl) / sigma).ravel()


def _prior_residual(refl, geometry):
    """The whole MAP problem: data rows / SIGMA, then (b - mean) / sd of each band."""
    data = _data_residual(refl, geometry, SIGMA)
    mean, sd = PRIOR_B
    return lambda x: np.concatenate([data(x), (x[N_BANDS : 2 * N_BANDS] - mean) / sd])


def _newton(residual, x):
    """(Gauss-Newton step, its predicted decrease g^T (J^T J)^-1 g, cost) of the whole
    problem at x, with the exact Jacobian."""
    r, jacobian = residual(x), _jacobian(residual, x)
    gradient = jacobian.T @ r
    step = np.linalg.solve(jacobian.T @ jacobian, -gradient)
    return step, -gradient @ step, r @ r


def _assert_converged_by_the_rule(residual, x):
    """The whole problem at x passes lm_rules.converged's tests, recomputed here: the
    Gauss-Newton step within tol, or the decrease it predicts a tie (COST_TIE of the cost)."""
    step, decrease, cost = _newton(residual, x)
    # 2 tol: the fit stops at a step <= tol computed on lumaxlike's model, which differs
    # from this one by rounding (independent_hapke.AGREEMENT), moving a step of ~tol by < tol
    assert np.abs(step).max() <= 2.0 * TOL or decrease <= lm_rules.COST_TIE * cost


@pytest.fixture(scope="module")
def clean():
    """Noise-free reflectance of the independent model: per-band w, b, c; per-pixel
    roughness, hs (`refl`), and with one roughness per region (`refl_regional`)."""
    rng = np.random.default_rng(7)
    geometry = multi_angle_geometry(N_PIXELS, N_OBS, rng)
    truth = {
        "w": rng.uniform(0.2, 0.85, (N_PIXELS, N_BANDS)),
        "b": rng.uniform(0.2, 0.4, (N_PIXELS, N_BANDS)),
        "c": rng.uniform(0.25, 0.6, (N_PIXELS, N_BANDS)),
        "roughness": np.radians(rng.uniform(12.0, 28.0, N_PIXELS)),
        "hs": rng.uniform(0.04, 0.09, N_PIXELS),
    }
    truth_regional = dict(truth, roughness=np.radians(np.array([14.0, 25.0]))[REGIONS])
    pixels = [[g[pixel] for g in geometry] for pixel in range(N_PIXELS)]
    refl, refl_regional = (
        np.stack([_independent_r(_vector(t, p), pixels[p]) for p in range(N_PIXELS)])
        for t in (truth, truth_regional)
    )
    return dict(
        geometry=geometry,
        pixels=pixels,
        truth=truth,
        refl=refl,
        truth_regional=truth_regional,
        refl_regional=refl_regional,
    )


@pytest.fixture(scope="module")
def scipy_joint(clean):
    """scipy from where the noise-free fits start on each pixel's noise-free residual."""
    return [
        _least_squares(_data_residual(clean["refl"][p], clean["pixels"][p]), _start_vector()).x
        for p in range(N_PIXELS)
    ]


@pytest.fixture(scope="module")
def scipy_prior(clean):
    """scipy from the truth on each pixel's MAP residual (prior rows included)."""
    return [
        _least_squares(
            _prior_residual(clean["refl"][p], clean["pixels"][p]), _vector(clean["truth"], p)
        )
        for p in range(N_PIXELS)
    ]


@pytest.fixture(scope="module", params=SOLVERS)
def clean_fits(request, clean):
    """The joint fit (roughness, hs shared) and the same with a prior on b, by one solver."""
    common = dict(free=FREE, shared=("roughness", "hs"), solver=request.param, start=START_W)
    joint = lumaxlike.fit(clean["refl"], *clean["geometry"], START, **common)
    prior = lumaxlike.fit(
        clean["refl"], *clean["geometry"], START, **common, prior={"b": PRIOR_B}, refl_sigma=SIGMA
    )
    return {"joint": joint, "prior": prior}


def test_noise_free_joint_fit_reaches_the_truth(clean, clean_fits, scipy_joint):
    """Every pixel CONVERGED at the truth to 1e-8, where scipy ends too, with the reported
    cost the residual of its returned values."""
    result = clean_fits["joint"]
    np.testing.assert_array_equal(result.status, Status.CONVERGED)
    for pixel in range(N_PIXELS):
        x = _vector(result.values, pixel)
        np.testing.assert_allclose(x, _vector(clean["truth"], pixel), rtol=0, atol=1e-8)
        np.testing.assert_allclose(x, scipy_joint[pixel], rtol=0, atol=1e-8)
        residual = _data_residual(clean["refl"][pixel], clean["pixels"][pixel])(x)
        # both costs are rounding (~1e-25): their norms differ by at most the models' gap
        gap = math.sqrt(N_ROWS) * independent_hapke.AGREEMENT * clean["refl"][pixel].max()
        assert abs(math.sqrt(result.cost[pixel]) - np.linalg.norm(residual)) <= gap


def test_prior_fit_is_the_minimum_of_the_map_problem(clean, clean_fits, scipy_prior):
    """With a prior on b: CONVERGED, the reported cost the whole MAP residual of the returned
    values, scipy (from the truth) finds nothing lower than a tie, and ends where the fit's
    convergence rule allows: within sqrt(COST_TIE cost (J^T J)^-1_kk) of it."""
    result = clean_fits["prior"]
    np.testing.assert_array_equal(result.status, Status.CONVERGED)
    for pixel in range(N_PIXELS):
        residual = _prior_residual(clean["refl"][pixel], clean["pixels"][pixel])
        x = _vector(result.values, pixel)
        r = residual(x)
        # rows of data / SIGMA: their gap between the models, over a norm of ~2
        gap = math.sqrt(N_ROWS) * independent_hapke.AGREEMENT * clean["refl"][pixel].max() / SIGMA
        assert abs(math.sqrt(result.cost[pixel]) - np.linalg.norm(r)) <= gap
        solution = scipy_prior[pixel]
        assert 2.0 * solution.cost >= (r @ r) * (1.0 - lm_rules.COST_TIE)
        jacobian = _jacobian(residual, solution.x)
        reach = np.sqrt(lm_rules.COST_TIE * (r @ r) * np.diag(np.linalg.inv(jacobian.T @ jacobian)))
        assert np.all(np.abs(x - solution.x) <= reach)


def test_prior_fit_reaches_the_map_to_1e_8(clean_fits, scipy_prior):
    """The MAP estimate to 1e-8 in every parameter, as scipy finds it from the truth."""
    for pixel in range(N_PIXELS):
        x = _vector(clean_fits["prior"].values, pixel)
        np.testing.assert_allclose(x, scipy_prior[pixel].x, rtol=0, atol=1e-8)


def test_converged_is_a_zero_gradient_of_the_whole_problem(clean, clean_fits):
    """At every CONVERGED pixel, joint or MAP, the gradient of the whole problem (exact
    Jacobian) passes the convergence rule: Gauss-Newton step within tol, or a tie."""
    for name, make_residual in (("joint", _data_residual), ("prior", _prior_residual)):
        result = clean_fits[name]
        for pixel in np.flatnonzero(result.status == Status.CONVERGED):
            residual = make_residual(clean["refl"][pixel], clean["pixels"][pixel])
            _assert_converged_by_the_rule(residual, _vector(result.values, pixel))


def _region_residual(clean, region):
    """The whole residual of one region: each pixel's w, b, c (3 bands) and hs, then the
    region's roughness."""
    members = np.flatnonzero(REGIONS == region)
    n_own = 3 * N_BANDS + 1

    def residual(x):
        rows = []
        for k, pixel in enumerate(members):
            own = x[k * n_own : (k + 1) * n_own]
            pixel_x = np.concatenate([own[:-1], [x[-1], own[-1]]])
            rows.append(
                _independent_r(pixel_x, clean["pixels"][pixel]) - clean["refl_regional"][pixel]
            )
        return np.concatenate([row.ravel() for row in rows])

    return members, residual


@pytest.mark.parametrize("solver", SOLVERS)
def test_noise_free_regional_fit_reaches_the_truth(clean, solver):
    """One roughness per region, hs per pixel: every pixel and region CONVERGED at the truth
    to 1e-8, where scipy on the region's whole residual ends too, and the gradient of the
    region's whole problem passes the convergence rule."""
    result = lumaxlike.fit(
        clean["refl_regional"],
        *clean["geometry"],
        START,
        free=FREE,
        shared=("hs",),
        regions=REGIONS,
        regional=("roughness",),
        solver=solver,
        start=START_W,
    )
    np.testing.assert_array_equal(result.status, Status.CONVERGED)
    np.testing.assert_array_equal(result.region_status, Status.CONVERGED)
    truth = clean["truth_regional"]
    for name in FREE:
        np.testing.assert_allclose(result.values[name], truth[name], rtol=0, atol=1e-8)
    for region in (0, 1):
        members, residual = _region_residual(clean, region)
        fitted = np.concatenate(
            [np.delete(_vector(result.values, p), -2) for p in members]
            + [[result.region_values["roughness"][region]]]
        )
        start = np.concatenate(
            [np.delete(_start_vector(), -2)] * members.size + [[START.roughness]]
        )
        solution = _least_squares(residual, start)
        np.testing.assert_allclose(fitted, solution.x, rtol=0, atol=1e-8)
        _assert_converged_by_the_rule(residual, fitted)
