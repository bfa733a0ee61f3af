"""`fit(..., starts=)`: restarts of joint fits, the lowest minimum kept, MULTIMODAL flagged.

The problems are tests/test_lm_convergence.py's joint scene (w, b, c per band, roughness
and h_S shared), noise-free: its global minimum is the truth at cost 0. Started at
roughness 5 deg, h_S 0.01, pixels 8 and 17 of seed 7 end CONVERGED at local minima of
chi^2 16.0 and 2.9 (refl_sigma 1e-3) with h_S near 0.012 (truth 0.083, 0.052).
"""

import math

import numpy as np
import pytest

import lumaxlike
from lumaxlike import Status
from lumaxlike._inverse.joint import restarts

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
    one = lumaxlike.fit(refl, *geometry, START, **kw)
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
