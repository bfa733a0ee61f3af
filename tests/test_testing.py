"""`lumaxlike.testing`: the synthetic scenes are what their docstrings say (shapes, unit
vectors, angle ranges, the opposition observations, the truth behind a cube)."""

import math

import numpy as np

import lumaxlike
import lumaxlike.testing as testing


def zenith_deg(vectors, normal=(0.0, 0.0, 1.0)):
    return np.degrees(np.arccos(np.clip(np.sum(vectors * np.asarray(normal), axis=-1), -1, 1)))


def test_testing_is_public_and_light():
    assert lumaxlike.testing is testing
    assert set(testing.__all__) == {
        "default_params",
        "multi_angle_geometry",
        "multi_angle_reflectance",
        "random_geometry",
        "synthetic_cube",
        "thermal_reflectance",
        "write_geotiff_inputs",
    }
    for name in testing.__all__:
        doc = getattr(testing, name).__doc__
        assert "Returns:" in doc, name


def test_random_geometry_shapes_and_angle_ranges():
    to_sun, to_sensor, normal = testing.random_geometry(2000, np.random.default_rng(1))
    for vectors in (to_sun, to_sensor, normal):
        assert vectors.shape == (2000, 3) and vectors.dtype == np.float64
        np.testing.assert_allclose(np.linalg.norm(vectors, axis=-1), 1.0, rtol=0, atol=1e-12)
    assert 75.0 < zenith_deg(to_sun).max() <= 80.0 and 65.0 < zenith_deg(to_sensor).max() <= 70.0
    assert 25.0 < zenith_deg(normal).max() <= 30.0


def test_multi_angle_geometry_has_its_opposition_observations_and_minimum_phase():
    rng = np.random.default_rng(2)
    to_sun, to_sensor, normal = testing.multi_angle_geometry(50, 6, rng)
    assert to_sun.shape == to_sensor.shape == normal.shape == (50, 6, 3)
    phase = np.degrees(np.arccos(np.clip(np.sum(to_sun * to_sensor, -1), -1, 1)))
    np.testing.assert_allclose(phase[:, :2], np.broadcast_to([2.0, 8.0], (50, 2)), atol=1e-9)
    assert zenith_deg(to_sun).max() <= 60.0 + 1e-9 and zenith_deg(to_sensor[:, 2:]).max() <= 65.0
    to_sun, to_sensor, _ = testing.multi_angle_geometry(
        50, 6, rng, min_phase_deg=20.0, opposition=False
    )
    assert np.degrees(np.arccos(np.sum(to_sun * to_sensor, -1))).min() >= 20.0


def test_synthetic_cube_is_amsa_of_its_truth():
    params = testing.default_params()
    assert params.roughness == math.radians(20.0) and params.bs0 == 1.0
    cube = testing.synthetic_cube(4, 3, np.float32, seed=5, truth=True, block_pixels=5)
    assert cube["refl"].shape == (4, 4, 3) and cube["refl"].dtype == np.float32
    assert cube["to_sun"].shape == (4, 4, 3) and cube["w_true"].dtype == np.float64
    assert 0.05 <= cube["w_true"].min() and cube["w_true"].max() <= 0.95
    vectors = [cube[name].astype(np.float64) for name in ("to_sun", "to_sensor", "normal")]
    expected = lumaxlike.amsa(cube["w_true"], *vectors, params, backend="numba")
    valid = np.isfinite(expected)
    assert valid.mean() > 0.5
    # float32 storage of r: its rounding, 6e-8 relative
    np.testing.assert_allclose(cube["refl"][valid], expected[valid], rtol=1.2e-7, atol=0)


def test_thermal_reflectance_adds_planck_emission_weighted_by_emissivity():
    """Cold: the reflected light alone; warm: plus eps B d^2 / F, eps = gamma H(mu) for
    isotropic scatterers (Hapke 2012, eq. 13.12), B from Planck's law written here."""
    from scipy.constants import Boltzmann, Planck, speed_of_light

    params = lumaxlike.HapkeParams(b=0.0, c=0.0, h_function="exact")  # isotropic, exact H
    to_sun, to_sensor, normal = testing.random_geometry(20, np.random.default_rng(3))
    wavelengths = np.array([1.5, 2.5, 2.9])
    w = np.full((20, 3), 0.4)
    solar = np.array([300.0, 70.0, 40.0])  # [W m^-2 um^-1] at 1 au
    reflected = np.asarray(lumaxlike.amsa(w, to_sun, to_sensor, normal, params, "numba"))
    cold = testing.thermal_reflectance(
        w, to_sun, to_sensor, normal, params, wavelengths, 40.0, solar
    )
    np.testing.assert_allclose(cold, reflected, rtol=1e-12)
    warm = testing.thermal_reflectance(
        w, to_sun, to_sensor, normal, params, wavelengths, 380.0, solar, distance=0.99
    )
    metres = wavelengths * 1e-6
    planck = (
        2
        * Planck
        * speed_of_light**2
        / metres**5
        / np.expm1(Planck * speed_of_light / (metres * Boltzmann * 380.0))
    )  # [W m^-2 sr^-1 m^-1]
    mu = np.sum(to_sensor * normal, axis=-1)[:, None]
    gamma = np.sqrt(1 - 0.4)
    eps = gamma * np.asarray(lumaxlike.h_function(0.4, mu, "exact"))  # Kirchhoff, exact H
    expected = reflected + eps * planck * 1e-6 * 0.99**2 / solar
    # the emissivity is a 16-term series in gamma fitted to 1 - r_hd: within ~2e-6 of
    # gamma H here (tests/test_thermal.py holds it to 1e-6 absolute)
    np.testing.assert_allclose(warm, expected, rtol=5e-6)
