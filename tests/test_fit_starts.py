"""`fit(..., starts=)`: restarts of joint fits, the lowest minimum kept, MULTIMODAL flagged.

The problems are tests/test_lm_convergence.py's joint scene (w, b, c per band, roughness
and h_S shared), noise-free: its global minimum is the truth at cost 0. Started at
roughness 5 deg, h_S 0.01, pixels 8 and 17 of seed 7 end CONVERGED at local minima of
chi^2 16.0 and 2.9 (refl_sigma 1e-3) with h_S near 0.012 (truth 0.083, 0.052).
"""

import math

import numpy as np
import pytest
import scipy.optimize

import lumaxlike
from lumaxlike import Status
from lumaxlike._inverse.joint import restarts
from lumaxlike.testing import multi_angle_geometry

from .helpers import SOLVERS
from .test_lm_convergence import FREE, START, _problems

pytestmark = pytest.mark.slow  # joint fits from several starts

SHARED = ("roughness", "hs")
SIGMA = 1e-3
FAR_START = {"roughness": math.radians(5.0), "hs": 0.01}


def _scene(seed, pixels):
    refl, geometry, truth = _problems(40, 3, 0.0, seed)
    truth = {name: value[pixels] for name, value in truth.items()}
    return refl[pixels], [g[pixels] for g in geometry], truth


@pytest.fixture(scope="module")
def two_minima():
    """Pixel 0: one minimum reached from the far start; 8 and 17: a local one."""
    return _scene(7, [0, 8, 17])


@pytest.mark.parametrize("solver", SOLVERS)
def test_starts_find_the_global_minimum(two_minima, solver):
    """One start ends CONVERGED at the local minima; five find the truth, and only the
    pixel whose local minimum is within CHI2_GAP of it is MULTIMODAL."""
    refl, geometry, truth = two_minima
    kw = dict(free=FREE, shared=SHARED, solver=solver, refl_sigma=SIGMA, start=FAR_START)
    one = lumaxlike.fit(refl, *geometry, START, starts=1, **kw)
    np.testing.assert_array_equal(one.status, Status.CONVERGED)
    # the local minima: pixel 17's within the gap, pixel 8's beyond it (chi^2 2.9, 16.0)
    assert one.cost[0] < 1e-12 and one.cost[2] < restarts.CHI2_GAP < one.cost[1]
    assert one.cost[2] > 1.0
    many = lumaxlike.fit(refl, *geometry, START, starts=5, **kw)
    for name in FREE:  # noise-free: the truth, to the LM's convergence (1e-6 is far wider)
        np.testing.assert_allclose(many[name], truth[name], rtol=0, atol=1e-6, err_msg=name)
    assert np.all(many.cost < 1e-12)
    expected = [Status.CONVERGED, Status.CONVERGED, Status.MULTIMODAL]
    np.testing.assert_array_equal(many.status, expected)
    # pixel 0 keeps start 0's result (the same minimum reached again does not replace it)
    for name in FREE:
        assert np.array_equal(many[name][0], one[name][0])
    assert np.all(np.isfinite(many.sigma("hs")))


def test_starts_without_refl_sigma(two_minima):
    """Without refl_sigma the cost is scaled by the residual variance, zero noise-free:
    the truth is found and no local minimum is near it."""
    refl, geometry, truth = two_minima
    kw = dict(free=FREE, shared=SHARED, solver="numba", start=FAR_START)
    many = lumaxlike.fit(refl, *geometry, START, starts=5, **kw)
    np.testing.assert_array_equal(many.status, Status.CONVERGED)
    np.testing.assert_allclose(many["hs"], truth["hs"], rtol=0, atol=1e-6)


@pytest.mark.parametrize("solver", SOLVERS)
def test_unimodal_starts_change_nothing(solver):
    """Where every start converges to the one minimum, starts= returns start 0's result
    bit for bit, with no MULTIMODAL; the sequence form too."""
    refl, geometry, _ = _scene(3, np.arange(6))
    kw = dict(free=FREE, shared=SHARED, solver=solver, refl_sigma=SIGMA)
    one = lumaxlike.fit(refl, *geometry, START, **kw)
    many = lumaxlike.fit(refl, *geometry, START, starts=10, **kw)
    assert not np.any(many.status == Status.MULTIMODAL)
    for field in ("status", "cost", "iterations", "covariance_shared", "covariance_bands"):
        np.testing.assert_array_equal(getattr(many, field), getattr(one, field))
    for name in FREE:
        np.testing.assert_array_equal(many[name], one[name])
    # starts of its own, none of them start 0: the same minimum
    given = lumaxlike.fit(refl, *geometry, START, starts=[{"hs": 0.1}, {"roughness": 0.4}], **kw)
    np.testing.assert_array_equal(given.status, Status.CONVERGED)
    for name in FREE:  # one minimum reached from two starts (1e-8: far inside its sigma)
        np.testing.assert_allclose(given[name], one[name], rtol=0, atol=1e-8, err_msg=name)


def test_starts_with_a_prior_alone():
    """A prior and nothing shared: per-(pixel, band) problems, gridded over b, c,
    roughness and h_S; a unimodal scene keeps start 0's result."""
    refl, geometry, _ = _scene(7, [0, 8])
    kw = dict(free=("w", "b", "c"), solver="numba", refl_sigma=SIGMA, prior={"b": (0.3, 0.1)})
    one = lumaxlike.fit(refl, *geometry, START, **kw)
    many = lumaxlike.fit(refl, *geometry, START, starts=3, **kw)
    assert many.status.shape == (2, 3)
    np.testing.assert_array_equal(many.status, one.status)
    np.testing.assert_array_equal(many["b"], one["b"])


def test_grid_of_starts():
    """start_points: start 0 then cell midpoints of the bounds (h_S's infinite upper
    bound replaced by GRID_SPAN's 0.2), all k^s of them where n - 1 = k^s."""
    lower, upper = np.array([0.0, 0.0]), np.array([0.8, math.inf])
    points = restarts.start_points(5, SHARED, lower, upper)
    assert points[0] == {}
    grid = [(p["roughness"], p["hs"]) for p in points[1:]]
    np.testing.assert_allclose(grid, [(0.2, 0.05), (0.2, 0.15), (0.6, 0.05), (0.6, 0.15)])
    assert len(restarts.start_points(10, SHARED, lower, upper)) == 10
    three = restarts.start_points(3, SHARED, lower, upper)  # the first and last of 4
    np.testing.assert_allclose([three[1]["roughness"], three[2]["roughness"]], [0.2, 0.6])
    assert restarts.start_points(2, SHARED, lower, upper)[1] == pytest.approx(
        {"roughness": 0.4, "hs": 0.1}
    )
    with pytest.raises(ValueError, match="starts=3 grids 'roughness'"):
        restarts.start_points(3, SHARED, np.array([-math.inf, 0.0]), upper)


@pytest.mark.parametrize(
    ("starts", "other", "match"),
    [
        (0, {}, "starts must be a positive int"),
        (True, {}, "starts must be a positive int"),
        ("5", {}, "starts must be a positive int"),
        ({"hs": 0.1}, {}, "starts must be a positive int"),
        ([], {}, "starts must be a non-empty sequence"),
        ([{"hs": 0.1}, 3], {}, "starts must be a non-empty sequence"),
        ([{}, {"bs0": 1.0}], {}, r"starts\[1\] names 'bs0'"),
        (5, {"shared": ()}, "starts needs a joint fit"),
        (5, {"shared": (), "free": ("w",), "prior": {"w": (0.5, 0.1)}}, "no parameter to grid"),
        (5, {"bounds": {"hs": (1e-6, math.inf), "roughness": (-math.inf, 0.5)}}, "bounds"),
        (5, {"regions": np.zeros(2, int), "regional": ("hs",), "shared": ()}, "regional"),
    ],
)
def test_bad_starts_refused(starts, other, match):
    refl, geometry, _ = _scene(3, [0, 1])
    kw = dict(free=FREE, shared=SHARED, solver="numba", refl_sigma=SIGMA) | other
    with pytest.raises(ValueError, match=match):
        lumaxlike.fit(refl, *geometry, START, starts=starts, **kw)
    # one start is the plain fit, also where restarts are not supported
    lumaxlike.fit(refl, *geometry, START, free=("w",), solver="numba", starts=1)


def _hs_scene(seed, n_pixels, sigma):
    """test_fit_joint's layout (4 bands, 12 observations), h_S per pixel log-uniform in
    0.01-0.15 and roughness in 10-30 deg, w, b, c per band; Gaussian noise `sigma`."""
    from .test_fit_joint import N_BANDS, N_OBS, reflectance

    rng = np.random.default_rng(seed)
    geometry = multi_angle_geometry(n_pixels, N_OBS, rng)
    roughness = np.radians(rng.uniform(10.0, 30.0, n_pixels))
    hs = np.exp(rng.uniform(math.log(0.01), math.log(0.15), n_pixels))
    w = rng.uniform(0.1, 0.9, (n_pixels, N_BANDS))
    b, c = rng.uniform(0.15, 0.4, N_BANDS), rng.uniform(0.3, 0.7, N_BANDS)
    refl = np.concatenate(
        [
            reflectance(w[i : i + 1], b, c, [g[i : i + 1] for g in geometry], roughness[i], hs[i])
            for i in range(n_pixels)
        ]
    )
    truth = {"w": w, "b": np.broadcast_to(b, w.shape), "c": np.broadcast_to(c, w.shape)}
    truth |= {"roughness": roughness, "hs": hs}
    return refl + sigma * rng.standard_normal(refl.shape), geometry, truth


def _scipy_cost(refl, geometry, sigma, x0):
    """chi^2 at scipy's least_squares minimum of one pixel's joint problem from x0 (w, b,
    c of every band, roughness, hs), the model test_fit_joint's `reflectance`."""
    from lumaxlike._inverse.fit.fit import default_bounds

    from .test_fit_joint import reflectance

    n_bands = refl.shape[0]
    bounds = default_bounds(np.float64)
    names = ["w"] * n_bands + ["b"] * n_bands + ["c"] * n_bands + ["roughness", "hs"]
    lower, upper = (np.array([bounds[n][i] for n in names]) for i in (0, 1))

    def residual(x):
        w, b, c = x[:n_bands], x[n_bands : 2 * n_bands], x[2 * n_bands : 3 * n_bands]
        model = reflectance(w[None], b, c, [g[None] for g in geometry], x[-2], x[-1])[0]
        return ((model - refl) / sigma).ravel()

    fitted = scipy.optimize.least_squares(
        residual, np.clip(x0, lower, upper), bounds=(lower, upper), x_scale="jac", xtol=1e-14
    )
    return float(np.sum(fitted.fun**2))


@pytest.mark.parametrize("solver", SOLVERS)
def test_default_probe_finds_the_lower_minimum(solver):
    """40 pixels, noise 1e-3: one start ends CONVERGED at local minima in 6 pixels (chi^2
    2 to 38 above scipy's least squares from the truth); the default
    (the usual start and a probe at low h_S) reaches scipy's minimum there, MULTIMODAL
    where the other minimum is within chi^2 4 of it, and changes no other pixel's values."""
    from .test_fit_joint import START as JOINT_START

    refl, geometry, truth = _hs_scene(1, 40, SIGMA)
    kw = dict(free=FREE, shared=SHARED, solver=solver, refl_sigma=SIGMA, chunk_size=8)
    one = lumaxlike.fit(refl, *geometry, JOINT_START, starts=1, **kw)
    default = lumaxlike.fit(refl, *geometry, JOINT_START, **kw)
    moved = np.nonzero(np.abs(default.cost - one.cost) > 1e-6)[0]
    assert len(moved) >= 5  # the scene has local minima to find (6 measured)
    for i in range(40):
        if i in moved:  # scipy from the truth and from the default's values: its best
            best = min(
                _scipy_cost(
                    refl[i],
                    [g[i] for g in geometry],
                    SIGMA,
                    np.concatenate([values[n][i].ravel() for n in FREE]),
                )
                for values in (truth, default.values)
            )
            # one start ended at a higher minimum (CONVERGED, or UNDETERMINED there)
            assert one.status[i] in (Status.CONVERGED, Status.UNDETERMINED)
            assert one.cost[i] > best + 0.5
            # the minimum scipy reaches, to its convergence (1e-6 of chi^2 ~ 40)
            np.testing.assert_allclose(default.cost[i], best, rtol=1e-6)
            gap = one.cost[i] - default.cost[i]
            assert default.status[i] == (Status.MULTIMODAL if gap < 4.0 else Status.CONVERGED)
        else:  # the usual start's result kept bit for bit (MULTIMODAL where the probe
            # found a distinct, higher minimum within chi^2 4)
            assert default.cost[i] == one.cost[i]
            assert default.status[i] in (one.status[i], Status.MULTIMODAL)
    assert np.all(np.isin(default.status, [Status.CONVERGED, Status.MULTIMODAL]))


def _scipy_profile_rise(refl, geometry, sigma, x0, hs, best):
    """chi^2 above `best` of scipy's least_squares over every parameter but h_S, held at
    `hs`, of one pixel's joint problem (the model test_fit_joint's `reflectance`)."""
    from lumaxlike._inverse.fit.fit import default_bounds

    from .test_fit_joint import reflectance

    n_bands = refl.shape[0]
    bounds = default_bounds(np.float64)
    names = ["w"] * n_bands + ["b"] * n_bands + ["c"] * n_bands + ["roughness"]
    lower, upper = (np.array([bounds[n][i] for n in names]) for i in (0, 1))

    def residual(x):
        w, b, c = x[:n_bands], x[n_bands : 2 * n_bands], x[2 * n_bands : 3 * n_bands]
        model = reflectance(w[None], b, c, [g[None] for g in geometry], x[-1], hs)[0]
        return ((model - refl) / sigma).ravel()

    fitted = scipy.optimize.least_squares(
        residual, np.clip(x0, lower, upper), bounds=(lower, upper), x_scale="jac", xtol=1e-14
    )
    return float(np.sum(fitted.fun**2)) - best


@pytest.mark.parametrize("solver", SOLVERS)
def test_profile_interval_of_hs(solver):
    """profile=("hs",): each settled end of h_S's interval is where scipy's chi^2,
    minimised over every other parameter with h_S held there, rises by 4 (within the
    documented 0.5); most ends settle; an end is NaN or reaches the bound otherwise."""
    from lumaxlike._inverse.joint import profile

    from .test_fit_joint import START as JOINT_START

    refl, geometry, truth = _hs_scene(11, 40, SIGMA)
    kw = dict(free=FREE, shared=SHARED, solver=solver, refl_sigma=SIGMA, chunk_size=8)
    result = lumaxlike.fit(refl, *geometry, JOINT_START, profile=("hs",), **kw)
    ends = result.profile["hs"]
    assert ends.shape == (40, 2)
    solved = np.isin(result.status, [Status.CONVERGED, Status.MULTIMODAL])
    settled = np.all(np.isfinite(ends), axis=-1) & solved
    assert settled.sum() >= 30  # 34 of 40 measured
    inside = (ends[..., 0] <= result["hs"]) & (result["hs"] <= ends[..., 1])
    assert np.all(inside[settled])
    for i in np.nonzero(settled)[0][:3]:  # scipy on 3 pixels, both ends
        x0 = np.concatenate(
            [result[n][i].ravel() for n in ("w", "b", "c")] + [[result["roughness"][i]]]
        )
        for end in ends[i]:
            rise = _scipy_profile_rise(
                refl[i], [g[i] for g in geometry], SIGMA, x0, end, result.cost[i]
            )
            # the documented settling (SETTLED) and scipy's own convergence (1e-3)
            assert abs(rise - profile.PROFILE_DELTA) <= profile.SETTLED + 1e-3, (i, end, rise)
    with pytest.raises(ValueError, match="profile needs refl_sigma"):
        lumaxlike.fit(refl, *geometry, JOINT_START, profile=("hs",), **(kw | {"refl_sigma": None}))
    with pytest.raises(ValueError, match="not in shared"):
        lumaxlike.fit(refl, *geometry, JOINT_START, profile=("c",), **kw)


def test_profile_takes_shared_as_fit_does():
    """shared="roughness,hs" (fit's comma form) profiles as the tuple does: the same
    fits, so the same ends to the bit."""
    from .test_fit_joint import START as JOINT_START

    refl, geometry, _ = _hs_scene(11, 8, SIGMA)
    kw = dict(free=FREE, solver="numba", refl_sigma=SIGMA, profile=("hs",))
    as_tuple = lumaxlike.fit(refl, *geometry, JOINT_START, shared=SHARED, **kw)
    as_text = lumaxlike.fit(refl, *geometry, JOINT_START, shared="roughness,hs", **kw)
    assert np.isfinite(as_tuple.profile["hs"]).any()
    np.testing.assert_array_equal(as_text.profile["hs"], as_tuple.profile["hs"])
