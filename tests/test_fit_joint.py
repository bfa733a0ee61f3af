"""Joint fits (`fit(..., shared=, prior=)`): parameters shared by a pixel's bands, priors.

Noise-free truth recovered by both solvers, which agree; the MAP against an independent
solver (scipy's least_squares on the whole joint residual vector, prior rows included);
the covariance against the scatter of noisy fits and, for the shared block, against the
information of the per-band fits it combines; weak and strong priors; statuses; errors.
Every JAX call here has one setup (4 bands, 12 observations, chunks of 32 pixels, free
w, b, c per band and roughness, hs shared), so the JAX program compiles once.
"""

import math

import numpy as np
import pytest
import scipy.optimize

import lumaxlike
from lumaxlike import HapkeParams, Status
from lumaxlike._model.numba_model import _amsa_pixels_kernel_for, kernel_params
from lumaxlike._params import FIELD_NAMES
from lumaxlike.testing import multi_angle_geometry

from .helpers import SOLVERS
from .test_shape_annotations import checked

FREE = ("w", "b", "c", "roughness", "hs")
SHARED = ("roughness", "hs")
FIXED = dict(bs0=0.9, hc=0.03, bc0=0.5)
THETA, HS = math.radians(20.0), 0.06
START = HapkeParams(b=0.3, c=0.4, roughness=math.radians(15.0), hs=0.08, **FIXED)
# chunks of 8 pixels and never fewer pixels than that: one JAX chunk shape throughout
N_BANDS, N_OBS, CHUNK = 4, 12, 8


def forward(w, to_sun, to_sensor, normal, b, c, roughness=THETA, hs=HS):
    """r [1/sr] of the forward model's own kernel (no derivative code, no solver; what
    `lumaxlike.amsa` runs, without its per-call checks): w (n,), geometry (n, 3) each."""
    scalars, legendre, use_legendre = kernel_params(START)
    scalars = scalars.copy()
    scalars[list(FIELD_NAMES).index("b")], scalars[list(FIELD_NAMES).index("c")] = b, c
    (
        scalars[list(FIELD_NAMES).index("roughness")],
        scalars[list(FIELD_NAMES).index("hs")],
    ) = roughness, hs
    out = np.empty((w.shape[0], 1))
    kernel = _amsa_pixels_kernel_for(START.model_key)
    arrays = [np.ascontiguousarray(a, np.float64) for a in (w[:, None], to_sun, to_sensor, normal)]
    # every row in this thread (the kernel serial over rows first to last - 1): scipy
    # calls this on 12 observations thousands of times, where handing the rows to threads
    # would cost more than the model itself
    kernel(0, w.shape[0], *arrays, scalars, legendre, use_legendre, out)
    return out[:, 0]


def reflectance(w, b, c, geometry, roughness=THETA, hs=HS):
    """(pixels, bands, observations) r for per-pixel-and-band w and per-band b, c."""
    to_sun, to_sensor, normal = geometry
    refl = np.empty(w.shape + (to_sun.shape[1],))
    for k in range(w.shape[1]):
        for j in range(to_sun.shape[1]):
            refl[:, k, j] = forward(
                w[:, k],
                to_sun[:, j],
                to_sensor[:, j],
                normal[:, j],
                b[k],
                c[k],
                roughness,
                hs,
            )
    return refl


def scene(n_pixels, seed):
    rng = np.random.default_rng(seed)
    geometry = multi_angle_geometry(n_pixels, N_OBS, rng)
    w = rng.uniform(0.2, 0.8, (n_pixels, N_BANDS))
    b = rng.uniform(0.15, 0.4, N_BANDS)
    c = rng.uniform(0.3, 0.7, N_BANDS)
    truth = {
        "w": w,
        "b": np.broadcast_to(b, w.shape),
        "c": np.broadcast_to(c, w.shape),
        "roughness": np.full(n_pixels, THETA),
        "hs": np.full(n_pixels, HS),
    }
    return reflectance(w, b, c, geometry), geometry, truth, rng


def joint_fit(refl, geometry, solver, **options):
    return lumaxlike.fit(
        refl,
        *geometry,
        START,
        free=FREE,
        shared=SHARED,
        solver=solver,
        chunk_size=CHUNK,
        **options,
    )


@pytest.fixture(scope="module")
def noise_free():
    refl, geometry, truth, _ = scene(8, seed=1)
    return (
        refl,
        geometry,
        truth,
        {solver: joint_fit(refl, geometry, solver) for solver in SOLVERS},
    )


@pytest.mark.parametrize("solver", SOLVERS)
def test_recovers_truth_noise_free(noise_free, solver):
    refl, _, truth, results = noise_free
    result = results[solver]
    checked(lumaxlike.JointFitResult)(**vars(result))  # its fields' annotated dtypes and shapes
    assert result.status.shape == refl.shape[:1]  # one problem per pixel
    assert result.counts()["CONVERGED"] == refl.shape[0]
    for name in FREE:
        assert result[name].shape == truth[name].shape  # shared ones without a band axis
        np.testing.assert_allclose(result[name], truth[name], rtol=0, atol=1e-6)
    assert np.all(result.cost < 1e-20)


def test_solvers_agree(noise_free):
    results = noise_free[3]
    jax_result, numba_result = results["jax"], results["numba"]
    np.testing.assert_array_equal(jax_result.status, numba_result.status)
    np.testing.assert_array_equal(jax_result.iterations, numba_result.iterations)
    for name in FREE:
        np.testing.assert_allclose(jax_result[name], numba_result[name], rtol=0, atol=1e-11)


def _scipy_map(refl, geometry, sigma, prior, x0):
    """scipy.optimize.least_squares on one pixel's whole residual vector (prior rows last)."""
    to_sun, to_sensor, normal = geometry  # (observations, 3) each

    def unpack(x):
        per_band = x[: 3 * N_BANDS].reshape(N_BANDS, 3)
        return per_band, x[3 * N_BANDS :]

    def residuals(x):
        per_band, (roughness, hs) = unpack(x)
        rows = []
        for k, (w, b, c) in enumerate(per_band):
            model = forward(np.full(N_OBS, w), to_sun, to_sensor, normal, b, c, roughness, hs)
            rows.append((model - refl[k]) / sigma)
        for name, (mean, prior_sigma) in prior.items():
            if name in SHARED:
                rows.append([(x[3 * N_BANDS + SHARED.index(name)] - mean) / prior_sigma])
            else:
                rows.append((per_band[:, ("w", "b", "c").index(name)] - mean) / prior_sigma)
        return np.concatenate([np.atleast_1d(r) for r in rows])

    solution = scipy.optimize.least_squares(
        residuals, x0, jac="3-point", xtol=1e-15, ftol=1e-15, gtol=1e-15
    )
    return solution.x


@pytest.mark.parametrize("solver", SOLVERS)
def test_map_matches_scipy_least_squares(solver):
    """With noise and priors on b (a map), c and hs: the same optimum as scipy's
    least_squares (3-point finite differences, so 1e-6 is about its own accuracy)."""
    refl, geometry, truth, rng = scene(8, seed=2)
    sigma = 2e-4
    noisy = refl + rng.normal(0.0, sigma, refl.shape)
    prior = {"b": (truth["b"] + 0.02, 0.05), "c": (0.5, 0.1), "hs": (0.05, 0.02)}
    result = joint_fit(noisy, geometry, solver, refl_sigma=sigma, prior=prior)
    assert result.counts()["CONVERGED"] == 8
    for pixel in range(2):
        x_lm = np.concatenate(
            [
                np.stack([result[n][pixel] for n in ("w", "b", "c")], axis=-1).ravel(),
                [result[n][pixel] for n in SHARED],
            ]
        )
        pixel_prior = {
            "b": (prior["b"][0][pixel], 0.05),
            "c": prior["c"],
            "hs": prior["hs"],
        }
        x0 = x_lm + rng.normal(0.0, 1e-3, x_lm.shape)  # scipy starts near, not at, the optimum
        x_scipy = _scipy_map(noisy[pixel], [g[pixel] for g in geometry], sigma, pixel_prior, x0)
        np.testing.assert_allclose(x_lm, x_scipy, rtol=0, atol=1e-6)


@pytest.fixture(scope="module")
def noisy_fits():
    """400 pixels with noise, fitted jointly by both solvers and per band (numba)."""
    refl, geometry, truth, rng = scene(400, seed=3)
    sigma = 2e-4
    noisy = refl + rng.normal(0.0, sigma, refl.shape)
    joint = {solver: joint_fit(noisy, geometry, solver, refl_sigma=sigma) for solver in SOLVERS}
    per_band = lumaxlike.fit(noisy, *geometry, START, free=FREE, solver="numba", refl_sigma=sigma)
    return truth, joint, per_band


@pytest.mark.parametrize("solver", SOLVERS)
def test_covariance_matches_scatter(noisy_fits, solver):
    """z = (estimate - truth) / sigma of every parameter: median |z| near 0.674, that of
    a unit normal (0.55-0.80 holds the median of 400+ draws with margin)."""
    truth, joint, _ = noisy_fits
    result = joint[solver]
    solved = result.status == Status.CONVERGED
    assert solved.mean() > 0.97
    for name in FREE:
        z = (result[name] - truth[name]) / result.sigma(name)
        z = z[solved]
        assert 0.55 <= np.median(np.abs(z)) <= 0.80, name


def test_shared_sigma_combines_the_bands(noisy_fits):
    """A shared parameter's sigma is about 1/sqrt(bands) of the per-band fit's (each band's
    own roughness and hs): the joint fit pools the bands' information."""
    _, joint, per_band = noisy_fits
    both = (joint["numba"].status == Status.CONVERGED) & np.all(
        per_band.status == Status.CONVERGED, axis=1
    )
    for name in SHARED:
        ratio = np.median(joint["numba"].sigma(name)[both]) / np.median(per_band.sigma(name)[both])
        assert 0.7 / math.sqrt(N_BANDS) < ratio < 1.3 / math.sqrt(N_BANDS), name


@pytest.mark.parametrize("solver", SOLVERS)
def test_shared_information_is_the_sum_over_bands(noise_free, solver):
    """Noise-free, at the truth: the shared block's information (inverse covariance) is
    the sum of the per-band fits' marginal information on those parameters (the Schur
    complements the joint solve adds up)."""
    refl, geometry, _, _ = noise_free
    sigma = 1e-3
    joint = joint_fit(refl, geometry, solver, refl_sigma=sigma)
    per_band = lumaxlike.fit(refl, *geometry, START, free=FREE, solver="numba", refl_sigma=sigma)
    index = [FREE.index(name) for name in SHARED]
    marginal = per_band.covariance[..., index, :][..., index]  # (pixels, bands, 2, 2)
    summed = np.sum(np.linalg.inv(marginal), axis=1)
    np.testing.assert_allclose(np.linalg.inv(joint.covariance_shared), summed, rtol=1e-6)
    full = joint.full_covariance()
    assert full.shape == (refl.shape[0], 3 * N_BANDS + 2, 3 * N_BANDS + 2)
    np.testing.assert_allclose(full, np.swapaxes(full, -1, -2), rtol=1e-8, atol=0)
    assert np.all(np.linalg.eigvalsh(full) > 0.0)


@pytest.mark.parametrize("solver", SOLVERS)
def test_weak_prior_changes_nothing_strong_prior_pins(solver):
    refl, geometry, _, rng = scene(32, seed=4)
    sigma = 2e-4
    noisy = refl + rng.normal(0.0, sigma, refl.shape)
    free_fit = joint_fit(noisy, geometry, solver, refl_sigma=sigma)
    sigma_b = free_fit.sigma("b")
    weak = joint_fit(
        noisy,
        geometry,
        solver,
        refl_sigma=sigma,
        prior={"b": (free_fit["b"] + 3.0 * sigma_b, 100.0 * sigma_b)},
    )
    ok = (free_fit.status == Status.CONVERGED) & (weak.status == Status.CONVERGED)
    assert ok.mean() > 0.9
    for name in FREE:
        shift = np.abs(weak[name] - free_fit[name])[ok]
        assert np.all(shift <= free_fit.sigma(name)[ok] / 100.0), name
    assert np.all(weak.dfs["b"][ok] > 0.999)
    strong = joint_fit(
        noisy,
        geometry,
        solver,
        refl_sigma=sigma,
        prior={"roughness": (math.radians(25.0), 1e-8)},
    )
    pinned = strong.status == Status.CONVERGED
    assert pinned.mean() > 0.9
    np.testing.assert_allclose(strong["roughness"][pinned], math.radians(25.0), rtol=0, atol=1e-7)
    assert np.all(strong.dfs["roughness"][pinned] < 1e-3)
    assert np.all(strong.dfs["w"][pinned] == 1.0)  # no prior on w: the data alone


@pytest.mark.parametrize("solver", SOLVERS)
def test_undetermined_unless_a_prior_determines_it(solver):
    """Two observations per band for w, b, c of every band: singular (UNDETERMINED or no
    convergence); priors on b and c make the same problem determined."""
    refl, geometry, truth, _ = scene(8, seed=5)
    refl[..., 2:] = np.nan  # same shapes as everywhere here: two valid observations left
    sigma = 1e-3
    bare = joint_fit(refl, geometry, solver, refl_sigma=sigma, min_observations=2)
    assert np.all(np.isin(bare.status, [Status.UNDETERMINED, Status.MAX_ITER]))
    assert np.all(np.isnan(bare.sigma("b")))
    prior = {
        "b": (truth["b"], 0.01),
        "c": (truth["c"], 0.01),
        "hs": (HS, 0.01),
        "roughness": (THETA, 0.01),
    }
    with_prior = joint_fit(
        refl, geometry, solver, refl_sigma=sigma, min_observations=2, prior=prior
    )
    assert with_prior.counts()["CONVERGED"] == 8
    assert np.all(np.isfinite(with_prior.sigma("b")))
    assert np.all(with_prior.dfs["b"] < 0.5)  # the prior, not the data, sets b here


@pytest.mark.parametrize("solver", SOLVERS)
def test_statuses_and_masks(noise_free, solver):
    """A pixel with a band of too few observations, one with none finite, one below the
    horizon; a masked observation is left out (the rest of the pixel still fits)."""
    refl, geometry, truth, results = noise_free
    refl = refl.copy()
    geometry = [g.copy() for g in geometry]
    refl[0, 1, :] = np.nan  # band 1 of pixel 0 has nothing
    refl[1] = np.nan
    geometry[0][2, 5] = [0.0, 0.6, -0.8]  # source below the horizon in one observation
    refl[3, 2, 4] = np.nan  # one observation left out
    result = joint_fit(refl, geometry, solver)
    assert result.status[0] == Status.TOO_FEW_OBSERVATIONS
    assert result.status[1] == Status.NONFINITE_INPUT
    assert result.status[2] == Status.INVALID_GEOMETRY
    assert np.all(np.isnan(result["w"][:3])) and np.all(np.isnan(result["roughness"][:3]))
    assert result.observations[3, 2] == N_OBS - 1
    np.testing.assert_array_equal(result.status[3:], Status.CONVERGED)
    for name in FREE:
        np.testing.assert_allclose(result[name][3:], truth[name][3:], rtol=0, atol=1e-6)


@pytest.mark.parametrize("solver", SOLVERS)
def test_prior_without_sharing_is_per_band(solver):
    """A prior and nothing shared: every (pixel, band) its own problem, with prior rows;
    a flat-enough prior gives today's `fit`."""
    refl, geometry, truth, rng = scene(8, seed=6)
    sigma = 2e-4
    noisy = refl + rng.normal(0.0, sigma, refl.shape)
    plain = lumaxlike.fit(noisy, *geometry, START, free=FREE, solver="numba", refl_sigma=sigma)
    with_prior = lumaxlike.fit(
        noisy,
        *geometry,
        START,
        free=FREE,
        solver=solver,
        refl_sigma=sigma,
        chunk_size=CHUNK,
        prior={"b": (0.3, 1e6)},
    )
    assert with_prior.status.shape == refl.shape[:2]
    np.testing.assert_array_equal(with_prior.status, plain.status)
    converged = plain.status == Status.CONVERGED
    for name in FREE:
        # two runs, each converged to a step below tol = 1e-10 along its own path: their
        # optima agree to a few tol times the problem's conditioning (measured 1.3e-9)
        np.testing.assert_allclose(
            with_prior[name][converged], plain[name][converged], rtol=0, atol=1e-8
        )
        np.testing.assert_allclose(
            with_prior.sigma(name)[converged], plain.sigma(name)[converged], rtol=1e-6
        )


def test_argument_errors():
    refl, geometry, _, _ = scene(8, seed=7)

    def call(**options):
        arguments = dict(free=FREE, shared=SHARED, solver="numba") | options
        return lumaxlike.fit(refl, *geometry, START, **arguments)

    with pytest.raises(ValueError, match="shared cannot name 'w'"):
        call(shared=("w",))
    with pytest.raises(ValueError, match="not in free"):
        call(shared=("bs0",))
    with pytest.raises(ValueError, match="shared"):
        call(shared=("nonsense",))
    with pytest.raises(ValueError, match="prior needs refl_sigma"):
        call(prior={"b": (0.3, 0.1)})
    with pytest.raises(ValueError, match="prior names 'bs0'"):
        call(prior={"bs0": (0.3, 0.1)}, refl_sigma=1e-3)
    with pytest.raises(ValueError, match="shared parameter has no band axis"):
        call(prior={"hs": (np.full((8, N_BANDS), 0.05), 0.1)}, refl_sigma=1e-3)
    with pytest.raises(ValueError, match="sigma must be positive"):
        call(prior={"b": (0.3, 0.0)}, refl_sigma=1e-3)
    with pytest.raises(ValueError, match=r"pair \(mean, sigma\)"):
        call(prior={"b": 0.3}, refl_sigma=1e-3)
    with pytest.raises(ValueError, match=r"prior\['b'\] mean 5.0 lies outside b's bounds"):
        call(prior={"b": (5.0, 1e-3)}, refl_sigma=1e-3)
    with pytest.raises(ValueError, match=r"prior\['roughness'\] mean 20.0 lies outside"):
        call(prior={"roughness": (20.0, 0.1)}, refl_sigma=1e-3)
    for bad in (0.0, -1.0, np.nan, [1e-3] * (N_BANDS + 1)):  # one message for every value
        with pytest.raises(
            ValueError, match="refl_sigma must be positive and finite, one number or one per band"
        ):
            call(refl_sigma=bad)
    with pytest.raises(ValueError, match=r"start\['roughness'\]"):
        call(start={"roughness": np.full((8, N_BANDS), 0.3)})


def regional_scene(seed):
    """16 pixels in 4 regions (and one pixel labelled -1): per-band w, b, c, a roughness
    per pixel (shared by its bands), an hs per region (for all its pixels and bands)."""
    rng = np.random.default_rng(seed)
    n_pixels = 17
    geometry = multi_angle_geometry(n_pixels, N_OBS, rng)
    labels = np.concatenate([np.repeat([10, 11, 12, 13], 4), [-1]])
    hs_of_region = {10: 0.04, 11: 0.05, 12: 0.065, 13: 0.08, -1: 0.06}
    w = rng.uniform(0.2, 0.8, (n_pixels, N_BANDS))
    b, c = rng.uniform(0.15, 0.4, N_BANDS), rng.uniform(0.3, 0.7, N_BANDS)
    roughness = np.radians(rng.uniform(15.0, 25.0, n_pixels))
    hs = np.array([hs_of_region[label] for label in labels])
    refl = np.concatenate(
        [
            reflectance(
                w[i : i + 1],
                b,
                c,
                [g[i : i + 1] for g in geometry],
                roughness[i],
                hs[i],
            )
            for i in range(n_pixels)
        ]
    )
    truth = {
        "w": w,
        "b": np.broadcast_to(b, w.shape),
        "c": np.broadcast_to(c, w.shape),
        "roughness": roughness,
        "hs": hs,
    }
    return refl, geometry, labels, truth


@pytest.fixture(scope="module")
def regional_fits():
    refl, geometry, labels, truth = regional_scene(seed=9)
    fits = {
        solver: lumaxlike.fit(
            refl,
            *geometry,
            START,
            free=FREE,
            shared=("roughness",),
            regions=labels,
            regional=("hs",),
            solver=solver,
            chunk_size=CHUNK,
        )
        for solver in SOLVERS
    }
    return refl, labels, truth, fits


@pytest.mark.parametrize("solver", SOLVERS)
def test_regional_recovers_truth_noise_free(regional_fits, solver):
    """hs one value per region over 4 regions, roughness per pixel, w, b, c per band:
    all recovered; the pixel labelled -1 is left out."""
    refl, labels, truth, fits = regional_fits
    result = fits[solver]
    checked(lumaxlike.JointFitResult)(**vars(result))
    inside = labels >= 0
    np.testing.assert_array_equal(result.status[inside], Status.CONVERGED)
    assert (
        result.status[~inside] == Status.TOO_FEW_OBSERVATIONS
        and result.observations[~inside].sum() == 0
    )
    assert np.all(np.isnan(result["w"][~inside])) and np.isnan(result["hs"][~inside]).all()
    for name in FREE:
        np.testing.assert_allclose(result[name][inside], truth[name][inside], rtol=0, atol=1e-6)
    np.testing.assert_array_equal(result.region_labels, [10, 11, 12, 13])
    np.testing.assert_allclose(
        result.region_values["hs"], [0.04, 0.05, 0.065, 0.08], rtol=0, atol=1e-6
    )
    np.testing.assert_array_equal(result.region_status, Status.CONVERGED)


def test_regional_solvers_agree(regional_fits):
    fits = regional_fits[3]
    np.testing.assert_array_equal(fits["jax"].status, fits["numba"].status)
    np.testing.assert_array_equal(fits["jax"].region_iterations, fits["numba"].region_iterations)
    for name in FREE:
        np.testing.assert_allclose(fits["jax"][name], fits["numba"][name], rtol=0, atol=1e-10)


def test_regional_matches_scipy_and_its_covariance():
    """One region of 3 pixels with noise: the regional fit's optimum is scipy's
    least_squares on the region's whole residual vector; its regional sigma is the
    inverse of the region's information summed over the pixels' Schur complements."""
    refl, geometry, labels, truth = regional_scene(seed=10)
    rng = np.random.default_rng(11)
    sigma = 2e-4
    pick = np.arange(3)  # region 10's first three pixels, one region
    noisy = refl[pick] + rng.normal(0.0, sigma, refl[pick].shape)
    geometry = [g[pick] for g in geometry]
    result = lumaxlike.fit(
        noisy,
        *geometry,
        START,
        free=FREE,
        shared=("roughness",),
        regions=np.zeros(3, int),
        regional=("hs",),
        solver="numba",
        refl_sigma=sigma,
        prior={"b": (0.3, 0.1)},
    )
    assert np.all(result.status == Status.CONVERGED)

    def residuals(x):
        rows = []
        hs = x[-1]
        for i in range(3):
            per_band = x[i * 13 : i * 13 + 12].reshape(N_BANDS, 3)
            roughness = x[i * 13 + 12]
            for k, (w, b, c) in enumerate(per_band):
                model = forward(np.full(N_OBS, w), *(g[i] for g in geometry), b, c, roughness, hs)
                rows.append((model - noisy[i, k]) / sigma)
            rows.append((per_band[:, 1] - 0.3) / 0.1)
        return np.concatenate(rows)

    x_fit = np.concatenate(
        [
            np.concatenate(
                [
                    np.stack([result[n][i] for n in ("w", "b", "c")], -1).ravel(),
                    [result["roughness"][i]],
                ]
            )
            for i in range(3)
        ]
        + [[result.region_values["hs"][0]]]
    )
    x0 = x_fit + rng.normal(0.0, 1e-3, x_fit.shape)
    x_scipy = scipy.optimize.least_squares(
        residuals, x0, jac="3-point", xtol=1e-15, ftol=1e-15, gtol=1e-15
    ).x
    np.testing.assert_allclose(x_fit, x_scipy, rtol=0, atol=1e-6)
    jacobian = scipy.optimize._numdiff.approx_derivative(residuals, x_fit, method="3-point")
    covariance = np.linalg.inv(jacobian.T @ jacobian)
    np.testing.assert_allclose(result.region_sigma["hs"][0], np.sqrt(covariance[-1, -1]), rtol=1e-4)
    np.testing.assert_allclose(
        result.sigma("roughness"), np.sqrt(np.diag(covariance)[12:-1:13]), rtol=1e-4
    )


def test_xarray_joint_fit_equals_fit_on_the_arrays():
    """`DataArray.hapke.fit(..., shared=, prior=)` chunk by chunk (dask) equals `fit` on
    the arrays; shared maps and the pixels' status have no band dim."""
    xr = pytest.importorskip("xarray")
    refl, geometry, _, _ = scene(8, seed=1)
    rng = np.random.default_rng(12)
    noisy = refl + rng.normal(0.0, 2e-4, refl.shape)
    data = xr.DataArray(
        noisy.reshape(2, 4, N_BANDS, N_OBS),
        dims=("y", "x", "band", "observation"),
        coords={"band": np.arange(N_BANDS)},
    )
    vectors = xr.Dataset(
        {
            name: (("y", "x", "observation", "xyz"), g.reshape(2, 4, N_OBS, 3))
            for name, g in zip(("to_sun", "to_sensor", "normal"), geometry)
        }
    )
    prior = {"b": (0.3, 0.1), "hs": (0.05, 0.02)}
    maps = (
        data.chunk({"y": 1})
        .hapke.fit(
            vectors,
            START,
            FREE,
            solver="numba",
            units="r",
            shared=SHARED,
            prior=prior,
            refl_sigma=2e-4,
        )
        .compute()
    )
    expected = lumaxlike.fit(
        noisy,
        *geometry,
        START,
        free=FREE,
        shared=SHARED,
        prior=prior,
        refl_sigma=2e-4,
        solver="numba",
    )
    for name in FREE:
        np.testing.assert_allclose(
            maps[name].values.reshape(expected[name].shape), expected[name], rtol=0, atol=1e-12
        )
        np.testing.assert_allclose(
            maps[f"dfs_{name}"].values.reshape(expected[name].shape), expected.dfs[name], rtol=1e-9
        )
    assert (
        maps.w.dims == ("y", "x", "band")
        and maps.roughness.dims == ("y", "x")
        and maps.status.dims == ("y", "x")
    )
    np.testing.assert_array_equal(maps.status.values.reshape(-1), expected.status)
    assert "hs" in maps.attrs["lumaxlike_fit_prior"]


def dragging_scene(seed, odd_pixel=None):
    """20 pixels in 4 regions of 5, roughness one value per region (12, 18, 24, 30 deg),
    h_S per pixel (log-uniform 0.01-0.15), w per band in 0.1-0.9; noise-free. With
    `odd_pixel`, that pixel's roughness is 12 deg whatever its region."""
    rng = np.random.default_rng(seed)
    labels = np.repeat(np.arange(4), 5)
    geometry = multi_angle_geometry(20, N_OBS, rng)
    roughness = np.radians(np.array([12.0, 18.0, 24.0, 30.0]))[labels]
    if odd_pixel is not None:
        roughness[odd_pixel] = math.radians(12.0)
    hs = np.exp(rng.uniform(math.log(0.01), math.log(0.15), 20))
    w = rng.uniform(0.1, 0.9, (20, N_BANDS))
    b, c = rng.uniform(0.15, 0.4, N_BANDS), rng.uniform(0.3, 0.7, N_BANDS)
    refl = np.concatenate(
        [
            reflectance(w[i : i + 1], b, c, [g[i : i + 1] for g in geometry], roughness[i], hs[i])
            for i in range(20)
        ]
    )
    return refl, geometry, labels, {"w": w, "roughness": roughness, "hs": hs}


def regional_roughness_fit(refl, geometry, labels, solver):
    return lumaxlike.fit(
        refl,
        *geometry,
        START,
        free=FREE,
        shared=("hs",),
        regions=labels,
        regional=("roughness",),
        solver=solver,
        chunk_size=CHUNK,
    )


@pytest.mark.parametrize("solver", SOLVERS)
def test_one_pixel_does_not_drag_its_region(solver):
    """Seed 4: started at 15 deg and h_S 0.08, pixel 19 ends in another minimum of its
    own (cost 8.5e-6 against 0 for the others), which pulled region 3's roughness to
    30.05 deg and its other pixels 4e-2 off in w, all CONVERGED. Checked against its own
    fit from several starts, restarted, it reaches the truth: every region recovers it."""
    refl, geometry, labels, truth = dragging_scene(4)
    result = regional_roughness_fit(refl, geometry, labels, solver)
    np.testing.assert_array_equal(result.region_status, Status.CONVERGED)
    np.testing.assert_array_equal(result.status, Status.CONVERGED)
    # noise-free: the truth, to the LM's convergence (1e-6 is far wider)
    np.testing.assert_allclose(
        np.degrees(result.region_values["roughness"]), [12, 18, 24, 30], rtol=0, atol=1e-6
    )
    for name in ("w", "roughness", "hs"):
        np.testing.assert_allclose(result[name], truth[name], rtol=0, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("solver", SOLVERS)
def test_a_pixel_of_another_roughness_is_excluded(solver):
    """Pixel 17 (region 3, 30 deg) has a roughness of 12 deg: it is EXCLUDED with its own
    fit's values (the truth), region 3 is EXCLUDED and recovers 30 deg from the other 4."""
    refl, geometry, labels, truth = dragging_scene(9, odd_pixel=17)
    result = regional_roughness_fit(refl, geometry, labels, solver)
    np.testing.assert_array_equal(result.region_status, [0, 0, 0, Status.EXCLUDED])
    expected = np.full(20, Status.CONVERGED)
    expected[17] = Status.EXCLUDED
    np.testing.assert_array_equal(result.status, expected)
    np.testing.assert_allclose(
        np.degrees(result.region_values["roughness"]), [12, 18, 24, 30], rtol=0, atol=1e-6
    )
    for name in ("w", "roughness", "hs"):  # pixel 17: its own fit, the truth too
        np.testing.assert_allclose(result[name], truth[name], rtol=0, atol=1e-6, err_msg=name)
    assert np.all(np.isnan(result.covariance_shared[17]))


def test_jax_chunk_carries_its_slowest_problems_on(noise_free, monkeypatch):
    """JAX steps a chunk FIRST_STEPS times, then carries the problems still stepping on
    in a batch of their own (their damping restarted): with FIRST_STEPS 2 every problem
    goes on so, and still reaches the minimum numba's one loop reaches (the truth here,
    noise-free), its steps counted over both; problems done within the first steps keep
    one loop's results to the bit."""
    from lumaxlike._inverse.joint import chunk

    refl, geometry, truth, fits = noise_free
    first_steps = chunk.FIRST_STEPS
    monkeypatch.setattr(chunk, "FIRST_STEPS", 2)
    carried = joint_fit(refl, geometry, "jax")
    np.testing.assert_array_equal(carried.status, Status.CONVERGED)
    assert np.all(carried.iterations > 2)
    for name in FREE:  # noise-free: the truth, to the LM's convergence
        np.testing.assert_allclose(carried[name], truth[name], rtol=0, atol=1e-8, err_msg=name)
        np.testing.assert_allclose(carried[name], fits["numba"][name], rtol=0, atol=1e-8)
    monkeypatch.setattr(chunk, "FIRST_STEPS", 200)  # max_iter: one loop
    whole = joint_fit(refl, geometry, "jax")
    assert fits["jax"].iterations.max() < first_steps  # done in the default first stage
    for name in FREE:
        np.testing.assert_array_equal(whole[name], fits["jax"][name])
