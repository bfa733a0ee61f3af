"""Geometry conversions: (i, e, g) triplets, vectors -> angles -> vectors, slope/aspect normals."""

import math

import numpy as np
import pytest
import xarray as xr

import lumaxlike
from lumaxlike._geometry import PHASE_TOLERANCE, relative_azimuth

PARAMS = lumaxlike.HapkeParams(b=0.2, c=0.4, roughness=math.radians(15.0))
D = np.radians


def test_hand_computed_triplets_give_the_expected_directions():
    # i = e = 45, g = 90: cos g = 0 = 1/2 + 1/2 cos psi -> psi = 180 (forward scatter)
    to_sun, to_sensor, normal = lumaxlike.geometry_from_angles(
        incidence=D(45.0), emission=D(45.0), phase=D(90.0)
    )
    h = math.sqrt(0.5)
    np.testing.assert_allclose(to_sun, [0.0, h, h], atol=1e-16)
    np.testing.assert_allclose(to_sensor, [0.0, -h, h], atol=1e-16)
    np.testing.assert_array_equal(normal, [0.0, 0.0, 1.0])
    # g = i - e: observer on the source's side (psi = 0); g = i + e: opposite side (psi = 180)
    assert relative_azimuth(D(60.0), D(30.0), D(30.0)) == pytest.approx(0.0, abs=1e-7)
    assert relative_azimuth(D(60.0), D(30.0), D(90.0)) == pytest.approx(math.pi, abs=1e-7)
    # psi = 90 deg: cos g = cos i cos e, from the cosine law directly
    g = math.acos(math.cos(D(50.0)) * math.cos(D(40.0)))
    assert relative_azimuth(D(50.0), D(40.0), g) == pytest.approx(math.pi / 2, abs=1e-14)
    # the positional (incidence, emission, azimuth) call gives the same vectors
    by_azimuth = lumaxlike.geometry_from_angles(D(50.0), D(40.0), math.pi / 2)
    by_phase = lumaxlike.geometry_from_angles(incidence=D(50.0), emission=D(40.0), phase=g)
    for a, b in zip(by_azimuth, by_phase):
        np.testing.assert_allclose(a, b, atol=1e-15)


def test_backscatter_and_nadir_cases_have_no_nan():
    i = D(np.array([35.0, 30.0, 0.0, 0.0, 35.0, 30.0]))
    e = D(np.array([35.0, 0.0, 30.0, 0.0, 35.0, 0.0]))
    # exact backscatter, e = 0, i = 0, both 0, then each pushed out of range by rounding
    g = np.array([0.0, D(30.0), D(30.0), 0.0, -1e-9, D(30.0) + 1e-8])
    to_sun, to_sensor, _ = lumaxlike.geometry_from_angles(incidence=i, emission=e, phase=g)
    assert np.isfinite(to_sun).all() and np.isfinite(to_sensor).all()
    np.testing.assert_allclose(to_sensor[0], to_sun[0], atol=1e-16)  # backscatter: same direction
    np.testing.assert_allclose(to_sensor[1], [0.0, 0.0, 1.0], atol=1e-16)
    np.testing.assert_allclose(to_sun[2], [0.0, 0.0, 1.0], atol=1e-16)
    got = lumaxlike.angles_from_geometry(to_sun, to_sensor, [0.0, 0.0, 1.0])
    np.testing.assert_allclose(got[0], i, atol=1e-15)
    np.testing.assert_allclose(got[1], e, atol=1e-15)
    np.testing.assert_allclose(got[2], np.clip(g, 0, None), atol=2e-8)  # clamped rounding
    assert np.isfinite(got[3]).all()  # psi is 0 where undefined (i or e = 0)


def test_inconsistent_triplets_get_nan_directions_per_pixel():
    # g below |i - e| and above i + e beyond the tolerance, a NaN phase; one good pixel
    i, e = D(np.array([30.0, 30.0, 30.0, 30.0])), D(np.array([10.0, 10.0, 10.0, 10.0]))
    g = np.array([D(20.0) - 10 * PHASE_TOLERANCE, D(41.0), np.nan, D(25.0)])
    to_sun, to_sensor, normal = lumaxlike.geometry_from_angles(incidence=i, emission=e, phase=g)
    assert np.isnan(to_sun[:3]).all() and np.isnan(to_sensor[:3]).all()
    assert (
        np.isfinite(to_sun[3]).all()
        and np.isfinite(to_sensor[3]).all()
        and np.isfinite(normal).all()
    )
    # within the tolerance: clamped onto psi = 0
    assert relative_azimuth(D(30.0), D(10.0), D(20.0) - 0.1 * PHASE_TOLERANCE) == 0.0
    with pytest.raises(ValueError, match="exactly one of azimuth and phase.*both"):
        lumaxlike.geometry_from_angles(0.1, 0.2, 0.3, phase=0.1)
    with pytest.raises(ValueError, match="neither"):
        lumaxlike.geometry_from_angles(0.1, 0.2)
    out32 = lumaxlike.geometry_from_angles(np.float32(0.5), np.float32(0.3), phase=np.float32(0.4))
    assert all(v.dtype == np.float32 for v in out32)


def random_tilted_geometry(n, rng):
    """Directions above tilted facets: sun zenith < 55, sensor zenith < 30, slopes < 25 deg."""
    to_sun = lumaxlike.direction_from_zenith_azimuth(
        rng.uniform(0, D(55.0), n), rng.uniform(0, 2 * np.pi, n)
    )
    to_sensor = lumaxlike.direction_from_zenith_azimuth(
        rng.uniform(0, D(30.0), n), rng.uniform(0, 2 * np.pi, n)
    )
    normal = lumaxlike.normal_from_slope_aspect(
        rng.uniform(0, D(25.0), n), rng.uniform(0, 2 * np.pi, n)
    )
    return to_sun * rng.uniform(0.5, 2.0, (n, 1)), to_sensor, normal  # lengths need not be 1


def test_vectors_to_angles_to_vectors_round_trip_and_keep_the_reflectance():
    rng = np.random.default_rng(3)
    to_sun, to_sensor, normal = random_tilted_geometry(200, rng)
    i, e, g, psi = lumaxlike.angles_from_geometry(to_sun, to_sensor, normal)
    # independent formulas: arccos of normalised dot products, and the spherical cosine law
    unit = [v / np.linalg.norm(v, axis=-1, keepdims=True) for v in (to_sun, to_sensor, normal)]
    np.testing.assert_allclose(i, np.arccos(np.sum(unit[0] * unit[2], -1)), atol=1e-12)
    np.testing.assert_allclose(e, np.arccos(np.sum(unit[1] * unit[2], -1)), atol=1e-12)
    np.testing.assert_allclose(g, np.arccos(np.sum(unit[0] * unit[1], -1)), atol=1e-12)
    np.testing.assert_allclose(
        np.cos(g), np.cos(i) * np.cos(e) + np.sin(i) * np.sin(e) * np.cos(psi), atol=1e-14
    )
    for back in (
        lumaxlike.geometry_from_angles(i, e, phase=g),
        lumaxlike.geometry_from_angles(i, e, psi),
    ):
        again = lumaxlike.angles_from_geometry(*back)
        for before, after in zip((i, e, g, psi), again):
            np.testing.assert_allclose(after, before, atol=1e-12)  # psi near 0 or pi: ~1e-13
        w = rng.uniform(0.1, 0.9, (200, 2))
        r = lumaxlike.amsa(w, to_sun, to_sensor, normal, PARAMS, backend="numba")
        np.testing.assert_allclose(lumaxlike.amsa(w, *back, PARAMS, backend="numba"), r, rtol=1e-11)


def test_slope_aspect_normals_match_a_planar_dtm():
    # a plane falling by tan(slope) per metre toward the aspect (clockwise from north)
    slope, aspect = D(20.0), D(125.0)
    rows, cols, dx, dy = 4, 5, 30.0, 20.0
    east = np.arange(cols) * dx
    north = -np.arange(rows)[:, None] * dy  # row 0 is the northern edge
    dtm = -math.tan(slope) * (east * math.sin(aspect) + north * math.cos(aspect))
    expected = lumaxlike.normal_from_slope_aspect(slope, aspect)
    np.testing.assert_allclose(
        lumaxlike.normals_from_dtm(dtm, (dx, dy)),
        np.broadcast_to(expected, (rows, cols, 3)),
        atol=1e-15,
    )
    # hand-computed: 30 deg slope facing east
    np.testing.assert_allclose(
        lumaxlike.normal_from_slope_aspect(D(30.0), D(90.0)),
        [0.5, 0.0, math.sqrt(0.75)],
        atol=1e-16,
    )


def test_xarray_geometry_as_incidence_emission_phase():
    rng = np.random.default_rng(5)
    i, e = rng.uniform(0.1, 1.0, (3, 4)), rng.uniform(0.0, 0.6, (3, 4))
    psi = rng.uniform(0, np.pi, (3, 4))
    geometry = lumaxlike.geometry_from_angles(i, e, psi)
    g = lumaxlike.angles_from_geometry(*geometry)[2]
    w = rng.uniform(0.2, 0.8, (3, 4, 2))
    r = lumaxlike.amsa(w, *geometry, PARAMS, backend="numba")
    refl = xr.DataArray(r, dims=("y", "x", "band"))
    angles = xr.Dataset(
        {
            name: (("y", "x"), np.degrees(value))
            for name, value in (("incidence", i), ("emission", e), ("phase", g))
        }
    )
    result = refl.hapke.invert(angles, PARAMS, solver="numba", units="r")
    np.testing.assert_allclose(result["w"].values, w, atol=1e-8)
    with pytest.raises(ValueError, match="normal"):
        refl.hapke.invert(
            angles.assign(normal=(("y", "x", "v"), np.ones((3, 4, 3)))),
            PARAMS,
            solver="numba",
            units="r",
        )
