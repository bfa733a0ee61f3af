"""`fit` with per-observation masks: a NaN observation or one outside `observation_limits`
leaves its problem, which is then solved exactly as its valid subset would be."""

import math

import numpy as np
import pytest

import lumaxlike
from lumaxlike import HapkeParams, Status
from lumaxlike._model import numba_jacobian
from lumaxlike.testing import multi_angle_geometry, multi_angle_reflectance

from .helpers import SOLVERS

TRUTH = HapkeParams(b=0.25, c=0.5, roughness=math.radians(20.0), hs=0.06, bs0=0.9, hc=0.03, bc0=0.5)
START = HapkeParams(
    b=0.32, c=0.38, roughness=math.radians(20.0), hs=0.06, bs0=0.9, hc=0.03, bc0=0.5
)
FREE = ("w", "b", "c")
CHUNK = 64  # as in tests/test_fit.py (6 pixels: the chunk is 6 pixels there and here)


@pytest.fixture(scope="module")
def masked_scene():
    """6 pixels x 3 bands x 10 observations with 2 observations of every pixel (20 %)
    missing at random: NaN geometry in half of the pixels, NaN reflectance in every band
    in the others. Returns the masked arrays, the valid subset (pixels, 3, 8) and w.
    (The shape of tests/test_fit.py's status test: its compiled JAX programs serve.)"""
    rng = np.random.default_rng(21)
    n_pixels, n_obs = 6, 10
    geometry = multi_angle_geometry(n_pixels, n_obs, rng)
    w_true = rng.uniform(0.15, 0.9, (n_pixels, 3))
    refl = multi_angle_reflectance(w_true, *geometry, TRUTH)
    missing = np.argsort(rng.random((n_pixels, n_obs)), axis=1)[:, :2]
    keep = np.ones((n_pixels, n_obs), bool)
    np.put_along_axis(keep, missing, False, axis=1)
    masked_refl, masked_sun = refl.copy(), geometry[0].copy()
    for pixel in range(n_pixels):
        if pixel % 2:
            masked_sun[pixel, ~keep[pixel]] = np.nan
        else:
            masked_refl[pixel, :, ~keep[pixel]] = np.nan
    masked = (masked_refl, masked_sun, geometry[1], geometry[2])
    subset = (
        refl[keep[:, None, :].repeat(3, axis=1)].reshape(n_pixels, 3, n_obs - 2),
        *(g[keep].reshape(n_pixels, n_obs - 2, 3) for g in geometry),
    )
    return masked, subset, w_true


@pytest.fixture(scope="module")
def masked_fits(masked_scene):
    """The masked scene fitted by both solvers, and its valid subset by numba (the JAX
    solver's subset fit would compile another chunk shape: it agrees with numba's masked
    fit to 1e-9 below, and numba's masked fit is its subset's to 1e-12)."""
    masked, subset, _ = masked_scene
    fits = {
        (solver, "masked"): lumaxlike.fit(
            *masked, START, free=FREE, solver=solver, chunk_size=CHUNK
        )
        for solver in SOLVERS
    }
    fits["numba", "subset"] = lumaxlike.fit(
        *subset, START, free=FREE, solver="numba", chunk_size=CHUNK
    )
    return fits


@pytest.mark.parametrize("solver", SOLVERS)
def test_masked_fit_recovers_parameters(masked_scene, masked_fits, solver):
    _, _, w_true = masked_scene
    masked = masked_fits[solver, "masked"]
    assert masked.counts()["CONVERGED"] == w_true.size
    np.testing.assert_array_equal(masked.observations, 8)
    np.testing.assert_allclose(masked["w"], w_true, rtol=0, atol=1e-6)
    for name in ("b", "c"):
        np.testing.assert_allclose(masked[name], getattr(TRUTH, name), rtol=0, atol=1e-6)


def test_masked_fit_equals_the_fit_of_the_valid_subset(masked_fits):
    masked, subset = masked_fits["numba", "masked"], masked_fits["numba", "subset"]
    np.testing.assert_array_equal(masked.status, subset.status)
    np.testing.assert_array_equal(masked.iterations, subset.iterations)
    for name in FREE:
        np.testing.assert_allclose(masked[name], subset[name], rtol=0, atol=1e-12)
    np.testing.assert_allclose(masked.residual_norm, subset.residual_norm, rtol=0, atol=1e-15)


def test_masked_fits_of_both_solvers_agree(masked_fits):
    jax_result, numba_result = masked_fits["jax", "masked"], masked_fits["numba", "masked"]
    np.testing.assert_array_equal(jax_result.status, numba_result.status)
    assert np.max(np.abs(jax_result.iterations - numba_result.iterations)) <= 1  # as in test_fit.py
    for name in FREE:
        np.testing.assert_allclose(jax_result[name], numba_result[name], rtol=0, atol=1e-9)


def test_covariance_uses_the_valid_observations(masked_scene):
    """Without refl_sigma the covariance scales by cost / (valid observations - p): noisy
    masked data give the covariance of the noisy valid subset."""
    masked, subset, _ = masked_scene
    rng = np.random.default_rng(22)
    noise = rng.normal(0.0, 1e-4, subset[0].shape)
    noisy_subset = subset[0] + noise
    noisy_masked = masked[0].copy()
    valid = np.isfinite(noisy_masked) & np.all(np.isfinite(masked[1]), axis=-1)[:, None, :]
    noisy_masked[valid] = noisy_subset.ravel()
    results = [
        lumaxlike.fit(refl, *arrays[1:], START, free=FREE, solver="numba")
        for refl, arrays in ((noisy_masked, masked), (noisy_subset, subset))
    ]
    np.testing.assert_allclose(results[0].covariance, results[1].covariance, rtol=1e-9)
    # and that is cost / (8 - 3) times (J^T J)^-1: rescaling by a known sigma undoes it
    with_sigma = lumaxlike.fit(
        noisy_masked, *masked[1:], START, free=FREE, solver="numba", refl_sigma=1.0
    )
    variance = results[0].residual_norm ** 2 / (8 - 3)
    np.testing.assert_allclose(
        results[0].covariance, with_sigma.covariance * variance[..., None, None], rtol=1e-9
    )


def test_observation_limits_leave_out_what_they_exclude():
    """Geometry from known angles: the limits drop exactly the observations whose angles
    lie outside, as setting them to NaN does; a problem left with too few is flagged."""
    rng = np.random.default_rng(23)
    n_pixels, n_obs = 6, 10
    incidence = np.radians(rng.uniform(0.0, 75.0, (n_pixels, n_obs)))
    emission = np.radians(rng.uniform(0.0, 70.0, (n_pixels, n_obs)))
    azimuth = rng.uniform(0.0, 2.0 * np.pi, (n_pixels, n_obs))
    incidence[5, :8] = np.radians(72.0)  # leaves 2 of 10: too few for 3 free parameters
    geometry = lumaxlike.geometry_from_angles(incidence, emission, azimuth)
    phase = np.arccos(
        np.cos(incidence) * np.cos(emission)
        + np.sin(incidence) * np.sin(emission) * np.cos(azimuth)
    )
    limits = {"incidence": (0.0, np.radians(60.0)), "phase": (np.radians(10.0), np.pi)}
    outside = (incidence > limits["incidence"][1]) | (phase < limits["phase"][0])
    assert 0 < outside[:5].sum() < 5 * n_obs // 2
    w_true = rng.uniform(0.2, 0.8, (n_pixels, 2))
    refl = multi_angle_reflectance(w_true, *geometry, TRUTH)
    limited = lumaxlike.fit(
        refl, *geometry, START, free=FREE, solver="numba", observation_limits=limits
    )
    dropped = np.where(outside[:, None, :], np.nan, refl)
    by_nan = lumaxlike.fit(dropped, *geometry, START, free=FREE, solver="numba")
    np.testing.assert_array_equal(
        limited.observations, np.broadcast_to((~outside).sum(axis=1)[:, None], (n_pixels, 2))
    )
    np.testing.assert_array_equal(limited.status, by_nan.status)
    assert np.all(limited.status[5] == Status.TOO_FEW_OBSERVATIONS)
    assert np.all(limited.status[:5] == Status.CONVERGED)
    for name in FREE:
        np.testing.assert_array_equal(limited[name], by_nan[name])
    np.testing.assert_allclose(limited["w"][:5], w_true[:5], rtol=0, atol=1e-6)
    # a lower min_observations lets the 2-observation problems through
    relaxed = lumaxlike.fit(
        refl,
        *geometry,
        START,
        free=FREE,
        solver="numba",
        observation_limits=limits,
        min_observations=2,
    )
    assert not np.any(relaxed.status == Status.TOO_FEW_OBSERVATIONS)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"observation_limits": {"incidence": (0.0, 70.0)}}, "radians"),
        ({"observation_limits": {"slope": (0.0, 1.0)}}, "unknown angle 'slope'"),
        ({"observation_limits": {"phase": (1.0, 0.5)}}, r"observation_limits\['phase'\]"),
        ({"observation_limits": {"phase": 1.0}}, "pair"),
        ({"observation_limits": [(0.0, 1.0)]}, "mapping"),
        ({"min_observations": 0}, "min_observations"),
        ({"min_observations": 11}, "min_observations = 11 exceeds the 10 observations"),
        (
            {"free": ("w", "b", "c", "roughness"), "refl": np.ones((2, 1, 4))},
            r"min_observations = 5 \(free parameters \+ 1\)",
        ),
    ],
)
def test_bad_mask_arguments_name_the_argument(change, message):
    rng = np.random.default_rng(24)
    geometry = multi_angle_geometry(2, 10, rng)
    arguments = {
        "refl": np.full((2, 1, 10), 0.05),
        "to_sun": geometry[0],
        "to_sensor": geometry[1],
        "normal": geometry[2],
    }
    arguments.update(change)
    if arguments["refl"].shape[-1] != 10:
        arguments.update(zip(("to_sun", "to_sensor", "normal"), (g[:, :4] for g in geometry)))
    with pytest.raises(ValueError, match=message):
        lumaxlike.fit(params=START, **{"free": FREE, **arguments})


def test_generated_code_without_a_usable_cache_directory(tmp_path, monkeypatch):
    """Where the cache directory cannot be written the code is generated in memory (no
    error, nothing written); otherwise it is written once into the cache directory."""
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    monkeypatch.setenv("LUMAXLIKE_CACHE_DIR", str(blocker / "cache"))
    key = TRUTH.model_key
    digest = numba_jacobian._generation_digest(("w",), key)
    module, in_file = numba_jacobian._generated_module(("w",), key, digest)
    assert not in_file and callable(module.columns) and module.ROW_LENGTH > 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a-file"]
    monkeypatch.setenv("LUMAXLIKE_CACHE_DIR", str(tmp_path / "cache"))
    on_disk, in_file = numba_jacobian._generated_module(("w",), key, digest)
    assert in_file and on_disk.ROW_LENGTH == module.ROW_LENGTH
    assert [p.name for p in (tmp_path / "cache" / "generated").glob("*.py")] == [
        f"columns_{digest}.py"
    ]
    # the digest follows what the code is made of
    assert numba_jacobian._generation_digest(("w", "b"), key) != digest
