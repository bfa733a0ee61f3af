"""`fit`: several Hapke parameters per pixel and band from multi-angle observations.

Noise-free recovery of 3 and 5 free parameters, covariance against Monte-Carlo scatter,
agreement of the two solvers, ill-posed setups, status codes, `invert` as the
one-parameter case, argument checks.
"""

import collections
import math

import numpy as np
import pytest

import lumaxlike
from lumaxlike import HapkeParams, Status
from lumaxlike._model import jax_executables
from lumaxlike.testing import multi_angle_geometry, multi_angle_reflectance

from .helpers import SOLVERS
from .test_shape_annotations import checked

pytestmark = pytest.mark.slow  # multi-parameter fits, compiled per set of free parameters

TRUTH = HapkeParams(b=0.25, c=0.5, roughness=math.radians(20.0), hs=0.06, bs0=0.9, hc=0.03, bc0=0.5)
# realistic starting values: off by 20-30 % in every free parameter
START = HapkeParams(
    b=0.32, c=0.38, roughness=math.radians(15.0), hs=0.08, bs0=0.7, hc=0.03, bc0=0.5
)
FREE_3 = ("w", "b", "c")
FREE_5 = ("w", "b", "c", "roughness", "hs")
CHUNK = 64  # pixels per chunk in every JAX call here: one compiled shape per setup


def start_for(free):
    """START for the free parameters, TRUTH for the fixed ones (the model is then exact)."""
    values = {
        name: getattr(START if name in free else TRUTH, name)
        for name in ("b", "c", "roughness", "hs", "bs0", "hc", "bc0")
    }
    return HapkeParams(**values)


def truth_of(name, w_true):
    return w_true if name == "w" else getattr(TRUTH, name)


def scene(n_pixels, n_bands, n_obs, seed, **geometry_options):
    rng = np.random.default_rng(seed)
    geometry = multi_angle_geometry(n_pixels, n_obs, rng, **geometry_options)
    w_true = rng.uniform(0.15, 0.9, (n_pixels, n_bands))
    refl = multi_angle_reflectance(w_true, *geometry, TRUTH)
    return refl, geometry, w_true, rng


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize(("free", "n_obs"), [(FREE_3, 9), (FREE_3, 30), (FREE_5, 12), (FREE_5, 30)])
def test_recovers_parameters_noise_free(solver, free, n_obs):
    refl, geometry, w_true, _ = scene(40, 3, n_obs, seed=n_obs)
    result = lumaxlike.fit(
        refl, *geometry, start_for(free), free=free, solver=solver, chunk_size=CHUNK
    )
    assert result.counts()["CONVERGED"] == refl.shape[0] * refl.shape[1]
    for name in free:
        np.testing.assert_allclose(
            result[name], np.broadcast_to(truth_of(name, w_true), w_true.shape), rtol=0, atol=1e-6
        )
    assert np.all(result.residual_norm < 1e-10)


@pytest.fixture(scope="module")
def monte_carlo():
    """One pixel's truth and geometry observed 1500 times with independent noise."""
    n_obs, n_draws, sigma = 20, 1500, 2e-4
    rng = np.random.default_rng(7)
    geometry = [g[0] for g in multi_angle_geometry(1, n_obs, rng)]  # (observations, 3) each
    w_true = np.full((1, 1), 0.55)
    clean = multi_angle_reflectance(w_true, *(g[None] for g in geometry), TRUTH)[0, 0]
    refl = clean + rng.normal(0.0, sigma, (n_draws, 1, n_obs))
    return refl, geometry, sigma


@pytest.mark.parametrize("solver", SOLVERS)
@pytest.mark.parametrize("sigma_given", [True, False])
def test_covariance_matches_monte_carlo(monte_carlo, solver, sigma_given):
    refl, geometry, sigma = monte_carlo
    free = ("w", "b", "c", "hs")
    result = checked(lumaxlike.fit)(
        refl,
        *geometry,
        start_for(free),
        free=free,
        solver=solver,
        refl_sigma=sigma if sigma_given else None,
        chunk_size=500,
    )
    checked(lumaxlike.FitResult)(**vars(result))  # its fields' annotated dtypes and shapes
    converged = result.status[:, 0] == Status.CONVERGED
    assert converged.mean() > 0.99
    for j, name in enumerate(free):
        scatter = np.std(result[name][converged, 0], ddof=1)
        reported = np.sqrt(np.mean(result.covariance[converged, 0, j, j]))
        # the issue's bound; the sampling error of a 1500-draw std is ~2 %
        assert abs(reported / scatter - 1.0) < 0.2, (name, reported, scatter)
    # the correlation between the parameters too, not just the variances
    values = np.stack([result[n][converged, 0] for n in free])
    empirical = np.corrcoef(values)
    covariance = np.mean(result.covariance[converged, 0], axis=0)
    reported = covariance / np.sqrt(np.outer(np.diag(covariance), np.diag(covariance)))
    np.testing.assert_allclose(reported, empirical, atol=0.1)


def test_solvers_agree_with_noise():
    refl, geometry, _, rng = scene(30, 4, 16, seed=11)
    noisy = refl + rng.normal(0.0, 1e-4, refl.shape)
    free = ("w", "b", "c", "roughness")
    results = {
        solver: lumaxlike.fit(
            noisy,
            *geometry,
            start_for(free),
            free=free,
            solver=solver,
            refl_sigma=1e-4,
            chunk_size=CHUNK,
        )
        for solver in SOLVERS
    }
    jax_result, numba_result = results["jax"], results["numba"]
    np.testing.assert_array_equal(jax_result.status, numba_result.status)
    # the same steps; whether the last one is needed can turn on rounding (|step| ~ tol)
    assert np.max(np.abs(jax_result.iterations - numba_result.iterations)) <= 1
    solved = jax_result.status != Status.NONFINITE_INPUT
    for name in free:
        # both end within tol = 1e-10 of their minimum, but rounding differences in J
        # (numba's derivative code is fast-math) move the minimum of these correlated,
        # noisy problems by up to ~2e-9
        np.testing.assert_allclose(
            jax_result[name][solved], numba_result[name][solved], rtol=0, atol=1e-8
        )
    np.testing.assert_allclose(jax_result.covariance, numba_result.covariance, rtol=1e-6)
    np.testing.assert_allclose(jax_result.residual_norm, numba_result.residual_norm, rtol=1e-8)


@pytest.mark.parametrize("solver", SOLVERS)
def test_opposition_width_without_small_phase_angles_is_not_confident(solver):
    """h_S from observations that all lie at g > 30 deg: ill-posed. Every answer must come
    with a status or an uncertainty that covers its error, and the uncertainty must be far
    larger than with observations near the opposition."""
    free = ("w", "b", "c", "hs", "bs0")
    sigma = 1e-4
    far_refl, far_geometry, w_true, rng = scene(
        40, 2, 20, seed=5, min_phase_deg=30.0, opposition=False
    )
    near_refl, near_geometry, _, _ = scene(40, 2, 20, seed=6)
    far = lumaxlike.fit(
        far_refl + rng.normal(0.0, sigma, far_refl.shape),
        *far_geometry,
        start_for(free),
        free=free,
        solver=solver,
        refl_sigma=sigma,
        chunk_size=CHUNK,
    )
    near = lumaxlike.fit(
        near_refl + rng.normal(0.0, sigma, near_refl.shape),
        *near_geometry,
        start_for(free),
        free=free,
        solver=solver,
        refl_sigma=sigma,
        chunk_size=CHUNK,
    )
    assert near.counts()["CONVERGED"] == near_refl.shape[0] * near_refl.shape[1]
    converged = far.status == Status.CONVERGED
    error = np.abs(far["hs"] - TRUTH.hs)
    assert np.all(error[converged] <= 5.0 * far.sigma("hs")[converged])
    unconfident = ~converged | (far.sigma("hs") > 0.1 * TRUTH.hs)
    assert unconfident.mean() > 0.95
    assert np.nanmedian(far.sigma("hs")) > 20.0 * np.median(near.sigma("hs"))


@pytest.mark.parametrize("solver", SOLVERS)
def test_degenerate_parameters_are_undetermined(solver):
    """With one observation, three free parameters cannot all be determined: J^T J has
    rank 1 and the problem is reported UNDETERMINED (or unconverged), never CONVERGED."""
    refl, geometry, _, _ = scene(10, 2, 1, seed=8, opposition=False)
    result = lumaxlike.fit(
        refl,
        *geometry,
        start_for(FREE_3),
        free=FREE_3,
        solver=solver,
        chunk_size=CHUNK,
        min_observations=1,
    )
    assert np.all(np.isin(result.status, [Status.UNDETERMINED, Status.MAX_ITER]))
    assert np.all(np.isnan(result.covariance))


@pytest.mark.parametrize("solver", SOLVERS)
def test_status_codes_per_problem(solver):
    refl, geometry, w_true, _ = scene(6, 3, 10, seed=9)
    to_sun, to_sensor, normal = (g.copy() for g in geometry)
    refl = refl.copy()
    refl[0, 1, 4] = np.nan  # one observation of one band: left out of that problem only
    to_sun[1, 2] = np.nan  # geometry of one observation: left out of every band of that pixel
    to_sensor[2, 3] = [1.0, 0.0, -0.2]  # observer below the horizon in one observation
    refl[3, 0] = np.inf  # every observation of one problem
    refl[4, 2, :7] = np.nan  # 3 observations left for 3 free parameters: too few
    refl[5, 1, :6] = np.nan  # 4 left: just enough
    arrays = (refl, to_sun, to_sensor, normal)
    before = [a.copy() for a in arrays]
    result = lumaxlike.fit(*arrays, start_for(FREE_3), free=FREE_3, solver=solver, chunk_size=CHUNK)
    for array, copy in zip(arrays, before):
        np.testing.assert_array_equal(array, copy)  # inputs are never modified
    expected = np.full(result.status.shape, Status.CONVERGED)
    expected[2] = Status.INVALID_GEOMETRY
    expected[3, 0] = Status.NONFINITE_INPUT
    expected[4, 2] = Status.TOO_FEW_OBSERVATIONS
    np.testing.assert_array_equal(result.status, expected)
    observations = np.full(result.status.shape, 10)
    (
        observations[0, 1],
        observations[1],
        observations[3, 0],
        observations[4, 2],
        observations[5, 1],
    ) = 9, 9, 0, 3, 4
    np.testing.assert_array_equal(result.observations, observations)
    solved = expected == Status.CONVERGED
    for name in FREE_3:
        assert np.all(np.isnan(result[name][~solved]))
        assert np.all(np.isnan(result.covariance[~solved]))
    np.testing.assert_allclose(result["w"][solved], w_true[solved], atol=1e-6)


@pytest.mark.parametrize("solver", SOLVERS)
def test_invert_is_the_one_parameter_one_observation_case(solver):
    refl, geometry, w_true, _ = scene(50, 4, 1, seed=10, opposition=False)
    to_sun, to_sensor, normal = (g[:, 0] for g in geometry)
    inverted = lumaxlike.invert(
        refl[..., 0], to_sun, to_sensor, normal, TRUTH, solver=solver, w0=0.3
    )
    fitted = lumaxlike.fit(
        refl,
        *geometry,
        TRUTH,
        free=("w",),
        solver=solver,
        start={"w": 0.3},
        chunk_size=CHUNK,
        min_observations=1,
    )
    np.testing.assert_array_equal(fitted.status, inverted.status)
    np.testing.assert_array_equal(fitted.iterations, inverted.iterations)
    np.testing.assert_allclose(fitted["w"], inverted.w, rtol=0, atol=1e-12)
    np.testing.assert_allclose(fitted.residual_norm, np.abs(inverted.residual), rtol=0, atol=1e-15)


@pytest.mark.parametrize("solver", SOLVERS)
def test_albedo_alone_from_many_observations(solver):
    refl, geometry, w_true, rng = scene(30, 3, 12, seed=12)
    result = lumaxlike.fit(refl, *geometry, TRUTH, free=("w",), solver=solver, chunk_size=CHUNK)
    assert result.counts()["CONVERGED"] == w_true.size
    np.testing.assert_allclose(result["w"], w_true, rtol=0, atol=1e-9)


def test_geometry_shared_by_all_pixels_and_pixel_axes():
    rng = np.random.default_rng(13)
    geometry = [g[0] for g in multi_angle_geometry(1, 10, rng)]
    w_true = rng.uniform(0.2, 0.8, (2, 3, 2))  # a 2 x 3 image, 2 bands
    refl = multi_angle_reflectance(
        w_true.reshape(6, 2), *(np.broadcast_to(g, (6,) + g.shape) for g in geometry), TRUTH
    )
    result = lumaxlike.fit(
        refl.reshape(2, 3, 2, 10), *geometry, start_for(FREE_3), free=FREE_3, solver="numba"
    )
    assert result["w"].shape == (2, 3, 2)
    assert result.covariance.shape == (2, 3, 2, 3, 3)
    np.testing.assert_allclose(result["w"], w_true, atol=1e-6)


def test_bounds_are_respected():
    refl, geometry, _, _ = scene(10, 2, 10, seed=14)
    bounds = {"b": (0.3, 0.6)}  # the truth, 0.25, lies outside
    result = lumaxlike.fit(
        refl,
        *geometry,
        start_for(FREE_3),
        free=FREE_3,
        solver="numba",
        bounds=bounds,
        start={"b": 0.4},
    )
    assert np.all(result["b"] >= 0.3) and np.all(result["b"] <= 0.6)
    np.testing.assert_allclose(result["b"], 0.3, atol=1e-9)  # pinned at the bound nearest the truth


def test_default_bounds_are_physical():
    bounds = lumaxlike.default_bounds()
    assert 0.0 < bounds["w"][0] and bounds["w"][1] < 1.0
    assert 0.0 < bounds["roughness"][0] <= 1e-3 and bounds["roughness"][1] == math.radians(45.0)
    assert bounds["c"] == (-1.0, 1.0)
    assert bounds["hs"][0] > 0.0 and bounds["bs0"][0] == 0.0


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"free": ("w", "albedo")}, "free"),
        ({"free": ("w", "w")}, "once"),
        ({"free": ()}, "once"),
        ({"free": ("b", "c")}, "include 'w'"),
        ({"solver": "scipy"}, "solver"),
        ({"params": HapkeParams(b=0.2, c=0.4, legendre=np.r_[1.0, np.zeros(15)])}, "legendre"),
        (
            {
                "params": HapkeParams(b=0.2, c=0.4, legendre=np.r_[1.0, np.zeros(15)]),
                "free": ("w",),
            },
            "legendre",
        ),
        ({"params": HapkeParams(b=0.2, c=0.4), "free": ("w", "hs")}, "params.hs"),
        ({"params": HapkeParams(b=0.2, c=0.4), "free": ("w", "roughness")}, "params.roughness"),
        ({"bounds": {"b": (0.5, 0.1)}}, "bounds"),
        ({"bounds": {"albedo": (0.0, 1.0)}}, "bounds"),
        ({"start": {"b": 1.5}}, "start"),
        ({"start": {"hs": 0.1}}, "start"),
        ({"start": {"w": np.full((4, 4), 0.5)}}, "start"),
        ({"refl_sigma": np.ones(3)}, "refl_sigma"),
        ({"refl_sigma": -1.0}, "refl_sigma"),
        ({"max_iter": 0}, "max_iter"),
        ({"tol": 0.0}, "tol"),
        ({"chunk_size": 0}, "chunk_size"),
        ({"to_sun": np.ones((5, 9, 3))}, "to_sun"),
        ({"refl": np.ones(5)}, "refl"),
        ({"refl": np.ones((5, 2, 0))}, "refl has no observations"),
        ({"refl_sigma": np.inf}, "refl_sigma"),
    ],
)
def test_bad_arguments_name_the_argument(change, message):
    refl, geometry, _, _ = scene(5, 2, 10, seed=15)
    arguments = {
        "refl": refl,
        "to_sun": geometry[0],
        "to_sensor": geometry[1],
        "normal": geometry[2],
        "params": START,
        "free": FREE_3,
    }
    arguments.update(change)
    with pytest.raises(ValueError, match=message):
        lumaxlike.fit(**arguments)


@pytest.mark.parametrize("solver", SOLVERS)
def test_order_of_free_parameters_does_not_matter(solver):
    refl, geometry, _, rng = scene(8, 2, 12, seed=16)
    noisy = refl + rng.normal(0.0, 1e-4, refl.shape)
    ordered = lumaxlike.fit(
        noisy, *geometry, start_for(FREE_3), free=FREE_3, solver=solver, chunk_size=CHUNK
    )
    shuffled_free = ("c", "w", "b")
    shuffled = lumaxlike.fit(
        noisy, *geometry, start_for(FREE_3), free=shuffled_free, solver=solver, chunk_size=CHUNK
    )
    assert shuffled.free == shuffled_free
    order = [FREE_3.index(name) for name in shuffled_free]
    for name in FREE_3:
        np.testing.assert_allclose(shuffled[name], ordered[name], rtol=0, atol=1e-9)
    np.testing.assert_allclose(
        shuffled.covariance, ordered.covariance[..., order, :][..., :, order], rtol=1e-6
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_jax_start_on_the_device_is_the_host_start(dtype):
    """The JAX solver's starting w, found on the device (`albedo_start_jax`), is the
    host's median of `invert`'s per-observation w (`albedo_start`) to the bit: with
    observations missing, a pixel with none, a band none of whose observations is
    reachable (0.5 there)."""
    import jax.numpy as jnp

    from lumaxlike._inverse.albedo.invert import albedo_bounds
    from lumaxlike._inverse.fit.arguments import ALBEDO_START_TOL, albedo_start
    from lumaxlike._inverse.fit.jax_start import albedo_start_jax
    from lumaxlike._model.forward import precision_scope

    refl, geometry, _, rng = scene(20, 3, 12, seed=2)
    refl = (refl + rng.normal(0.0, 3e-3, refl.shape)).astype(dtype)
    refl[0] = np.nan
    refl[1, 0, :5] = np.nan
    refl[2, 1] = 5.0
    geometry = [np.broadcast_to(g, (20, 12, 3)).astype(dtype) for g in geometry]
    params, bounds = start_for(("w", "b", "c")), (dtype(0.001), dtype(0.95))
    host = albedo_start(refl, geometry, params, "jax", *bounds)
    with precision_scope(np.empty(0, dtype)):
        arrays = (jnp.asarray(a) for a in (refl, *geometry))
        start = jnp.zeros((20, 3, 3), dtype)
        tol, w_bounds = ALBEDO_START_TOL, albedo_bounds(dtype)
        found = albedo_start_jax(start, 1, *arrays, params, *bounds, 50, tol, w_bounds)
    found = np.asarray(found)
    assert found.dtype == dtype
    np.testing.assert_array_equal(found[..., 1], host.astype(dtype))
    np.testing.assert_array_equal(found[..., [0, 2]], 0.0)  # the other columns kept
    assert np.all(host[0] == 0.5) and host[2, 1] == 0.5 and 0.001 < host[1, 0] < 0.95


@pytest.mark.parametrize(
    ("on_accelerator", "round_programs"),
    [(False, {"_refill_rounds": 1, "_lm_round_of": 1}), (True, {"_lm_round_of": 2})],
)
def test_jax_fit_in_float32(monkeypatch, on_accelerator, round_programs):
    """float32 data: the model's derivative program is traced and evaluated in float32.
    The solver's programs are compiled ahead (`solve_fit_jax_ahead`, side by side while
    the starting w is found) with the shapes of its calls: no call compiles or loads
    one itself, but a CPU's starting w (`invert`'s program). With a CPU's choices and an
    accelerator's (the lockstep schedule, its round and its tail's, and the starting w
    found on the device, `albedo_start_jax`, compiled ahead)."""
    from lumaxlike._inverse.fit import fit as fit_module
    from lumaxlike._inverse.fit import jax_solver
    from lumaxlike._inverse.fit.refill import default_schedule

    schedule = default_schedule(on_cpu=not on_accelerator)
    monkeypatch.setattr(jax_solver, "default_schedule", lambda on_cpu: schedule)
    monkeypatch.setattr(fit_module, "default_is_cpu", lambda: not on_accelerator)
    monkeypatch.setattr(jax_executables, "_memory", {})  # this process's programs: none
    monkeypatch.setattr(jax_executables, "fetched_by", collections.Counter())
    refl, geometry, w_true, _ = scene(40, 3, 12, seed=2)
    free = ("w", "b", "c")
    result = lumaxlike.fit(
        refl.astype(np.float32),
        *(g.astype(np.float32) for g in geometry),
        start_for(free),
        free=free,
        solver="jax",
        chunk_size=CHUNK,
    )
    fetched = jax_executables.fetched_by
    called = set() if on_accelerator else {"solve_albedo_jax"}
    assert {name for name, by in fetched if by == "call"} == called
    expected = {"_fit_setup": 1, "_refill_rounds": 0, **round_programs}
    expected["albedo_start_jax"] = int(on_accelerator)
    for name, count in expected.items():
        assert fetched[name, "ahead"] == count
    assert result["w"].dtype == np.float32
    assert result.counts()["CONVERGED"] >= 0.95 * refl.shape[0] * refl.shape[1]
    converged = result.status == Status.CONVERGED
    for name in free:  # float32 rounding of r (~1e-7 relative) moves the minimum by ~1e-5
        np.testing.assert_allclose(
            result[name][converged],
            np.broadcast_to(truth_of(name, w_true), w_true.shape)[converged],
            rtol=0,
            atol=1e-3,
        )


@pytest.mark.parametrize("solver", SOLVERS)
def test_non_positive_or_overflowing_reflectance_is_unreachable_as_in_invert(solver):
    """Negated, zero and 1e308 reflectance: no w in (0, 1) fits any of them. `fit` once
    called them CONVERGED (w ~ 2e-16, b = 1, sigma ~ 1e-14; 1e308 with an infinite
    residual); `invert` calls each observation UNREACHABLE, and so must `fit`."""
    refl, geometry, w_true, _ = scene(4, 1, 9, seed=3)
    refl[0] = -refl[0]
    refl[1] = 0.0
    refl[2] = 1e308
    result = lumaxlike.fit(refl, *geometry, TRUTH, free=FREE_3, solver=solver, chunk_size=CHUNK)
    single = lumaxlike.invert(
        np.moveaxis(refl[:3], -1, 1), *(g[:3] for g in geometry), TRUTH, solver=solver
    )
    assert np.all(single.status == Status.UNREACHABLE)
    np.testing.assert_array_equal(
        result.status[:, 0], [Status.UNREACHABLE] * 3 + [Status.CONVERGED]
    )
    for name in FREE_3:
        assert np.all(np.isnan(result[name][:3])) and np.all(np.isnan(result.sigma(name)[:3]))
    np.testing.assert_allclose(result["w"][3], w_true[3], atol=1e-6, rtol=0)


def test_sigma_and_values_of_a_fixed_parameter_name_it():
    refl, geometry, _, _ = scene(2, 1, 6, seed=4)
    result = lumaxlike.fit(refl, *geometry, TRUTH, free=("w", "c"), solver="numba")
    with pytest.raises(
        KeyError, match=r"'b' was not fitted \(fixed\); the free parameters are \('w', 'c'\)"
    ):
        result.sigma("b")
    with pytest.raises(KeyError, match="'b' was not fitted"):
        result["b"]


@pytest.mark.parametrize("solver", SOLVERS)
def test_at_bound_flags_an_optimum_on_a_bound(solver):
    """b = 0.08 true, 16 observations at 1e-3 noise, c free in [-1, 1]: the least-squares
    optimum of the first problem is at c = 1 (the data prefer c past its bound), where
    the Laplace sigma means nothing: `at_bound["c"]` says so there, and nowhere in the
    second problem (noise-free, the truth inside every bound)."""
    rng = np.random.default_rng(0)
    geometry = multi_angle_geometry(1, 16, rng, opposition=False)
    refl = multi_angle_reflectance(np.array([[0.7]]), *geometry, HapkeParams(b=0.08, c=0.45))
    refl = refl + 1e-3 * rng.standard_normal(refl.shape)
    interior_geometry = multi_angle_geometry(1, 16, rng)
    interior = multi_angle_reflectance(
        np.array([[0.5]]), *interior_geometry, HapkeParams(b=0.25, c=0.5)
    )
    result = lumaxlike.fit(
        np.concatenate([refl, interior]),
        *(np.concatenate(g) for g in zip(geometry, interior_geometry)),
        HapkeParams(b=0.3, c=0.4),
        free=FREE_3,
        solver=solver,
        refl_sigma=1e-3,
    )
    assert np.all(result.status == Status.CONVERGED)
    assert result["c"][0, 0] == 1.0 and result.at_bound["c"][0, 0]
    for name in FREE_3:
        assert result.at_bound[name].shape == result[name].shape
        assert result.at_bound[name].dtype == np.bool_
        assert not result.at_bound[name][1, 0]
    assert not result.at_bound["w"][0, 0] and not result.at_bound["b"][0, 0]
    np.testing.assert_allclose(result["c"][1, 0], 0.5, atol=1e-8)  # interior: the truth
    # the same problems through the joint machinery (a prior of sd 1 on b: the same optima)
    joint = lumaxlike.fit(
        np.concatenate([refl, interior]),
        *(np.concatenate(g) for g in zip(geometry, interior_geometry)),
        HapkeParams(b=0.3, c=0.4),
        free=FREE_3,
        solver=solver,
        refl_sigma=1e-3,
        prior={"b": (0.1, 1.0)},
    )
    assert joint["c"][0, 0] == 1.0 and joint.at_bound["c"][0, 0] and not joint.at_bound["c"][1, 0]
    assert joint.at_bound["w"].shape == joint["w"].shape
