"""`invert`: recovery of w on noise-free synthetic cubes, agreement of the two solvers,
every status code, propagated uncertainty, argument checks."""

from dataclasses import replace

import numpy as np
import pytest

import lumaxlike
from lumaxlike import Status

from .helpers import FULL_PARAMS, SOLVERS, random_geometry


def synthetic_cube(n_pixels, n_bands, seed, dtype=np.float64):
    """Noise-free r [1/sr] from random w in (0.01, 0.99) and random valid geometry."""
    rng = np.random.default_rng(seed)
    to_sun, to_sensor, normal = random_geometry(n_pixels, rng)
    w_true = rng.uniform(0.01, 0.99, (n_pixels, n_bands))
    refl = np.asarray(
        lumaxlike.amsa(w_true, to_sun, to_sensor, normal, FULL_PARAMS, backend="numba")
    )
    return tuple(a.astype(dtype) for a in (refl, to_sun, to_sensor, normal)) + (w_true,)


@pytest.fixture(scope="module")
def cube64():
    return synthetic_cube(1500, 8, seed=0)


@pytest.fixture(scope="module")
def results64(cube64):
    refl, to_sun, to_sensor, normal, _ = cube64
    return {s: lumaxlike.invert(refl, to_sun, to_sensor, normal, FULL_PARAMS, s) for s in SOLVERS}


@pytest.mark.parametrize("solver", SOLVERS)
def test_recovers_w_float64(cube64, results64, solver):
    refl, *_, w_true = cube64
    result = results64[solver]
    observable = np.isfinite(refl)  # r is NaN where a tilted facet hides source or observer
    converged = result.status == Status.CONVERGED
    assert np.all(result.status[~observable] == Status.NONFINITE_INPUT)
    assert converged[observable].mean() >= 0.999
    np.testing.assert_allclose(result.w[converged], w_true[converged], rtol=0, atol=1e-8)
    assert np.all(np.isnan(result.w[~converged]))


@pytest.mark.parametrize("solver", SOLVERS)
def test_recovers_w_float32(solver):
    refl, to_sun, to_sensor, normal, w_true = synthetic_cube(500, 4, seed=1, dtype=np.float32)
    result = lumaxlike.invert(refl, to_sun, to_sensor, normal, FULL_PARAMS, solver)
    assert result.w.dtype == np.float32
    observable = np.isfinite(refl)
    converged = result.status == Status.CONVERGED
    assert converged[observable].mean() >= 0.999
    np.testing.assert_allclose(result.w[converged], w_true[converged], rtol=0, atol=1e-4)


@pytest.mark.parametrize("solver", SOLVERS)
def test_tolerance_below_float32_range(solver):
    """A tol that float32 cannot hold (it rounds to 0 there) still lets every problem step:
    each ends converged (its step exactly 0) or at max_iter (float64 steps of an ulp), at
    the accuracy float32 data allows. The start alone is ~1e-4 off."""
    refl, to_sun, to_sensor, normal, w_true = synthetic_cube(200, 4, seed=2, dtype=np.float32)
    result = lumaxlike.invert(refl, to_sun, to_sensor, normal, FULL_PARAMS, solver, tol=1e-50)
    observable = np.isfinite(refl)
    solved = np.isin(result.status, [Status.CONVERGED, Status.MAX_ITER])
    assert solved[observable].all()
    # r and w in float32 hold w to ~2e-7 here (measured, as with the default tol); 1e-6
    # is ~8 float32 ulps of w near 1
    np.testing.assert_allclose(result.w[solved], w_true[solved], rtol=0, atol=1e-6)


def test_solvers_agree_float64(results64):
    jax_result, numba_result = results64["jax"], results64["numba"]
    np.testing.assert_array_equal(jax_result.status, numba_result.status)
    np.testing.assert_allclose(jax_result.w, numba_result.w, rtol=0, atol=1e-8)
    np.testing.assert_allclose(jax_result.residual, numba_result.residual, rtol=0, atol=1e-12)
    # the same LM rules take the same steps; a rounding tie may cost one extra step
    assert np.max(np.abs(jax_result.iterations - numba_result.iterations.astype(np.int64))) <= 1


@pytest.mark.parametrize("solver", SOLVERS)
def test_residual_is_model_minus_observed(cube64, results64, solver):
    refl, to_sun, to_sensor, normal, _ = cube64
    result = results64[solver]
    model = np.asarray(
        lumaxlike.amsa(np.nan_to_num(result.w, nan=0.5), to_sun, to_sensor, normal, FULL_PARAMS)
    )
    solved = result.status == Status.CONVERGED
    np.testing.assert_allclose(result.residual[solved], (model - refl)[solved], rtol=0, atol=1e-15)
    # converged means the Newton estimate of the distance left, |residual / (dr/dw)|, is
    # below tol = 1e-10 (default for float64)
    slope = (
        np.asarray(lumaxlike.amsa(result.w + 1e-7, to_sun, to_sensor, normal, FULL_PARAMS)) - model
    )
    slope = slope / 1e-7
    assert np.all(np.abs(result.residual[solved]) <= 1.01e-10 * np.abs(slope[solved]))


@pytest.mark.parametrize("solver", SOLVERS)
def test_chunking_does_not_change_results(cube64, results64, solver):
    refl, to_sun, to_sensor, normal, _ = cube64
    chunked = lumaxlike.invert(refl, to_sun, to_sensor, normal, FULL_PARAMS, solver, chunk_size=97)
    reference = results64[solver]
    np.testing.assert_array_equal(chunked.status, reference.status)
    # XLA vectorises each chunk shape differently (SIMD body vs. remainder): 1-ulp changes
    np.testing.assert_allclose(chunked.w, reference.w, rtol=4e-16, atol=0)


@pytest.mark.parametrize("solver", SOLVERS)
def test_out_is_written_in_place_with_the_bits_of_a_fresh_call(cube64, results64, solver):
    """``out=`` (an earlier result of other data): its arrays hold the call's results, to
    the bit, and are the ones returned; sigma is allocated where out has none (a call
    without refl_sigma), reused where it has."""
    refl, to_sun, to_sensor, normal, _ = cube64
    geometry = (to_sun, to_sensor, normal)
    earlier = lumaxlike.invert(refl[::-1].copy(), *geometry, FULL_PARAMS, solver)
    arrays = [earlier.w, earlier.status, earlier.iterations, earlier.residual]
    again = lumaxlike.invert(refl, *geometry, FULL_PARAMS, solver, out=earlier)
    assert [again.w, again.status, again.iterations, again.residual] == arrays  # identity
    for name in ("w", "status", "iterations", "residual"):
        expected = getattr(results64[solver], name)
        np.testing.assert_array_equal(getattr(again, name), expected, err_msg=name)
    with_sigma = lumaxlike.invert(refl, *geometry, FULL_PARAMS, solver, refl_sigma=1e-3, out=again)
    assert with_sigma.w is again.w and with_sigma.sigma.flags.writeable  # a new sigma
    reused = lumaxlike.invert(refl, *geometry, FULL_PARAMS, solver, refl_sigma=1e-3, out=with_sigma)
    assert reused.sigma is with_sigma.sigma
    fresh = lumaxlike.invert(refl, *geometry, FULL_PARAMS, solver, refl_sigma=1e-3)
    np.testing.assert_array_equal(reused.sigma, fresh.sigma)


def test_an_out_that_does_not_fit_is_refused_untouched():
    refl, to_sun, to_sensor, normal, _ = synthetic_cube(4, 3, seed=5)
    good = lumaxlike.invert(refl, to_sun, to_sensor, normal, FULL_PARAMS, "numba")
    read_only = good.status.copy()
    read_only.flags.writeable = False
    cases = [
        (dict(vars(good)), r"^out must be a lumaxlike.InversionResult"),
        (replace(good, w=good.w.astype(np.float32)), r"^out.w must be .*float64.*got float32"),
        (replace(good, status=read_only), r"^out.status must be .*read-only"),
        (replace(good, iterations=good.iterations[:2]), r"^out.iterations .*shape \(2, 3\)"),
        (replace(good, residual=refl), r"^out.residual must be .*shares memory"),  # an input
        (replace(good, residual=good.w), r"^out.residual must be .*shares memory"),  # out.w
    ]
    for out, message in cases:
        before = [a.copy() for a in (good.w, good.status, good.iterations, good.residual)]
        with pytest.raises(ValueError, match=message):
            lumaxlike.invert(refl, to_sun, to_sensor, normal, FULL_PARAMS, "numba", out=out)
        after = (good.w, good.status, good.iterations, good.residual)
        assert all(np.array_equal(a, b, equal_nan=True) for a, b in zip(before, after))


def one_pixel():
    """A single ordinary geometry: to_sun 30 deg, to_sensor 20 deg, azimuth 40 deg."""
    return lumaxlike.geometry_from_angles(np.radians(30.0), np.radians(20.0), np.radians(40.0))


@pytest.mark.parametrize("solver", SOLVERS)
def test_every_status_code(solver):
    to_sun, to_sensor, normal = one_pixel()
    r_max = float(lumaxlike.amsa(1.0, to_sun, to_sensor, normal, FULL_PARAMS))
    r_mid = float(lumaxlike.amsa(0.6, to_sun, to_sensor, normal, FULL_PARAMS))
    below_horizon = lumaxlike.direction_from_zenith_azimuth(np.radians(95.0), 0.0)
    cases = {
        Status.CONVERGED: (r_mid, to_sun, {}),
        Status.MAX_ITER: (r_mid, to_sun, {"max_iter": 1, "w0": 0.01}),
        Status.UNREACHABLE: (1.0001 * r_max, to_sun, {}),
        Status.INVALID_GEOMETRY: (r_mid, below_horizon, {}),
        Status.NONFINITE_INPUT: (np.nan, to_sun, {}),
    }
    for expected, (refl, to_sun, options) in cases.items():
        result = lumaxlike.invert(
            np.array([refl]), to_sun, to_sensor, normal, FULL_PARAMS, solver, **options
        )
        assert result.status[0] == expected, expected.name
        solved = expected in (Status.CONVERGED, Status.MAX_ITER)
        assert np.isfinite(result.w[0]) == solved, expected.name
    for refl in (0.0, -0.01, np.inf):
        result = lumaxlike.invert(np.array([refl]), to_sun, to_sensor, normal, FULL_PARAMS, solver)
        expected = Status.NONFINITE_INPUT if np.isinf(refl) else Status.UNREACHABLE
        assert result.status[0] == expected and np.isnan(result.w[0])
    nan_geometry = np.array([np.nan, 0.0, 1.0])
    result = lumaxlike.invert(
        np.array([r_mid]), nan_geometry, to_sensor, normal, FULL_PARAMS, solver
    )
    assert result.status[0] == Status.NONFINITE_INPUT and np.isnan(result.w[0])


@pytest.mark.parametrize("solver", SOLVERS)
def test_sigma_matches_monte_carlo(solver):
    to_sun, to_sensor, normal = one_pixel()
    w_true, noise = np.array([0.15, 0.55, 0.9]), 2e-4  # 1/sr; r is ~0.01-0.1 here
    refl_true = np.asarray(lumaxlike.amsa(w_true, to_sun, to_sensor, normal, FULL_PARAMS))
    rng = np.random.default_rng(3)
    draws = refl_true + noise * rng.standard_normal((4000, 3))
    result = lumaxlike.invert(
        draws, to_sun, to_sensor, normal, FULL_PARAMS, solver, refl_sigma=noise
    )
    assert np.all(result.status == Status.CONVERGED)
    scatter = result.w.std(axis=0)
    np.testing.assert_allclose(np.median(result.sigma, axis=0), scatter, rtol=0.10)
    no_sigma = lumaxlike.invert(refl_true, to_sun, to_sensor, normal, FULL_PARAMS, solver)
    assert np.all(np.isnan(no_sigma.sigma))
    assert no_sigma.sigma.shape == refl_true.shape
    assert (
        not no_sigma.sigma.flags.writeable and no_sigma.sigma.strides == (0,) * refl_true.ndim
    )  # no memory


@pytest.mark.parametrize("solver", SOLVERS)
def test_shape_rules_and_inputs_untouched(solver):
    refl, to_sun, to_sensor, normal, _ = synthetic_cube(12, 3, seed=4)
    image = [a.reshape(3, 4, -1) for a in (refl, to_sun, to_sensor, normal)]
    copies = [a.copy() for a in image]
    result = lumaxlike.invert(*image, FULL_PARAMS, solver)
    for before, after in zip(copies, image):
        np.testing.assert_array_equal(before, after)
    assert result.w.shape == (3, 4, 3) and result.status.dtype == np.int8
    flat = lumaxlike.invert(refl, to_sun, to_sensor, normal, FULL_PARAMS, solver)
    np.testing.assert_array_equal(result.w.reshape(12, 3), flat.w)
    one_band = lumaxlike.invert(refl[:, 0], to_sun, to_sensor, normal, FULL_PARAMS, solver)
    assert one_band.w.shape == (12,)
    np.testing.assert_allclose(one_band.w, flat.w[:, 0], atol=1e-12, rtol=0)
    shared = lumaxlike.invert(refl[:1], to_sun[0], to_sensor[0], normal[0], FULL_PARAMS, solver)
    np.testing.assert_allclose(shared.w, flat.w[:1], atol=1e-12, rtol=0)


@pytest.mark.parametrize(
    ("options", "argument"),
    [
        ({"solver": "scipy"}, "solver"),
        ({"w0": 1.2}, "w0"),
        ({"w0": 0.0}, "w0"),
        ({"tol": 0.0}, "tol"),
        ({"max_iter": 0}, "max_iter"),
        ({"chunk_size": 0}, "chunk_size"),
        ({"refl_sigma": -1.0}, "refl_sigma"),
        ({"refl_sigma": [0.1, 0.2]}, "refl_sigma"),
        ({"refl_sigma": np.inf}, "refl_sigma"),
        ({"refl_sigma": [1e-3, np.inf, 1e-3]}, "refl_sigma"),
        ({"params": "hapke"}, "params"),
    ],
)
def test_bad_arguments_name_themselves(options, argument):
    refl, to_sun, to_sensor, normal, _ = synthetic_cube(4, 3, seed=5)
    kwargs = {"params": FULL_PARAMS, **options}
    params = kwargs.pop("params")
    with pytest.raises(ValueError, match=argument):
        lumaxlike.invert(refl, to_sun, to_sensor, normal, params, **kwargs)


def test_mismatched_shapes_name_the_argument():
    refl, to_sun, to_sensor, normal, _ = synthetic_cube(4, 3, seed=6)
    with pytest.raises(ValueError, match="refl"):
        lumaxlike.invert(refl[:3], to_sun, to_sensor, normal, FULL_PARAMS)
    with pytest.raises(ValueError, match="geometry"):
        lumaxlike.invert(refl, to_sun[:3], to_sensor, normal, FULL_PARAMS)
    with pytest.raises(ValueError, match="normal"):
        lumaxlike.invert(refl, to_sun, to_sensor, normal[:, :2], FULL_PARAMS)


@pytest.mark.parametrize("solver", SOLVERS)
def test_bands_are_the_last_axis_with_shared_geometry(solver):
    """One geometry for all pixels: refl's last axis is still the bands (per-band sigma)."""
    refl, to_sun, to_sensor, normal, _ = synthetic_cube(4, 3, seed=7)
    band_sigma = [1e-3, 2e-3, 4e-3]
    one_pixel = refl[:1] * 0.0 + lumaxlike.amsa(
        np.array([[0.2, 0.5, 0.8]]), to_sun[0], to_sensor[0], normal[0], FULL_PARAMS
    )
    shared = lumaxlike.invert(
        one_pixel, to_sun[0], to_sensor[0], normal[0], FULL_PARAMS, solver, refl_sigma=band_sigma
    )
    per_pixel = lumaxlike.invert(
        one_pixel, to_sun[:1], to_sensor[:1], normal[:1], FULL_PARAMS, solver, refl_sigma=band_sigma
    )
    assert shared.w.shape == (1, 3)
    np.testing.assert_allclose(shared.w, [[0.2, 0.5, 0.8]], atol=1e-9, rtol=0)
    np.testing.assert_array_equal(shared.sigma, per_pixel.sigma)
    assert np.all(np.diff(shared.sigma[0] / np.array(band_sigma)) != 0.0)  # one slope per band
    spectrum = lumaxlike.invert(
        one_pixel[0], to_sun[0], to_sensor[0], normal[0], FULL_PARAMS, solver, refl_sigma=band_sigma
    )
    assert spectrum.w.shape == (3,)
    np.testing.assert_array_equal(spectrum.w, shared.w[0])


@pytest.mark.parametrize("argument", ["refl", "to_sun", "to_sensor", "normal"])
def test_half_precision_is_refused_naming_the_argument(argument):
    refl, to_sun, to_sensor, normal, _ = synthetic_cube(4, 3, seed=8)
    arguments = {"refl": refl, "to_sun": to_sun, "to_sensor": to_sensor, "normal": normal}
    arguments[argument] = arguments[argument].astype(np.float16)
    with pytest.raises(ValueError, match=rf"{argument} has dtype float16"):
        lumaxlike.invert(**arguments, params=FULL_PARAMS)
