"""`DataArray.hapke.fit`: `lumaxlike.fit` chunk by chunk over a dask-backed DataArray."""

import json
import math

import numpy as np
import pytest
import xarray as xr

import lumaxlike
from lumaxlike.testing import multi_angle_geometry, multi_angle_reflectance

TRUTH = lumaxlike.HapkeParams(
    b=0.25, c=0.5, roughness=math.radians(20.0), hs=0.06, bs0=0.9, hc=0.03, bc0=0.5
)
START = lumaxlike.HapkeParams(
    b=0.32, c=0.38, roughness=math.radians(20.0), hs=0.06, bs0=0.9, hc=0.03, bc0=0.5
)
FREE = ("w", "b", "c")


@pytest.fixture(scope="module")
def cube():
    """A 2 x 3 image, 2 bands, 10 observations (radf), one observation NaN; the arrays."""
    rng = np.random.default_rng(41)
    geometry = multi_angle_geometry(6, 10, rng)
    w = rng.uniform(0.2, 0.9, (6, 2))
    refl = multi_angle_reflectance(w, *geometry, TRUTH)
    refl[4, 1, 3] = np.nan
    data = xr.DataArray(
        np.pi * refl.reshape(2, 3, 2, 10),
        dims=("y", "x", "band", "observation"),
        coords={"y": [10.0, 20.0], "x": [1.0, 2.0, 3.0], "band": [1, 2]},
        attrs={"title": "stack"},
    )
    vectors = xr.Dataset(
        {
            name: (("y", "x", "observation", "xyz"), g.reshape(2, 3, 10, 3))
            for name, g in zip(("to_sun", "to_sensor", "normal"), geometry)
        },
        coords={"y": [10.0, 20.0], "x": [1.0, 2.0, 3.0]},
    )
    return data, vectors, (refl, *geometry), w


def test_dask_fit_equals_fit_on_the_arrays(cube):
    data, vectors, arrays, w = cube
    lazy = data.chunk({"y": 1}).hapke.fit(
        vectors, START, FREE, solver="numba", units="radf", refl_sigma=1e-4
    )
    assert lazy.w.chunks is not None  # lazy until computed
    maps = lazy.compute()
    expected = lumaxlike.fit(*arrays, START, free=FREE, solver="numba", refl_sigma=1e-4 / np.pi)
    for name in FREE:
        np.testing.assert_allclose(
            maps[name].values.reshape(6, 2), expected[name], rtol=0, atol=1e-12
        )
        np.testing.assert_allclose(
            maps[f"sigma_{name}"].values.reshape(6, 2), expected.sigma(name), rtol=1e-9
        )
    np.testing.assert_array_equal(maps.status.values.reshape(6, 2), expected.status)
    np.testing.assert_array_equal(maps.observations.values.reshape(6, 2), expected.observations)
    for name in FREE:
        assert maps[f"at_bound_{name}"].dtype == np.bool_
        np.testing.assert_array_equal(
            maps[f"at_bound_{name}"].values.reshape(6, 2), expected.at_bound[name]
        )
    assert maps.observations.values.min() == 9
    np.testing.assert_allclose(maps.w.values.reshape(6, 2), w, rtol=0, atol=1e-6)
    assert maps.w.dims == ("y", "x", "band") and maps.attrs["title"] == "stack"
    assert lumaxlike.read_provenance(maps).units == "radf"


def test_bad_fit_arguments_are_refused_before_any_work(cube):
    data, vectors, _, _ = cube
    with pytest.raises(ValueError, match="observation_dim='angle'"):
        data.hapke.fit(vectors, START, FREE, units="r", observation_dim="angle")
    with pytest.raises(ValueError, match="radians"):
        data.hapke.fit(vectors, START, FREE, units="r", observation_limits={"incidence": (0, 70)})
    with pytest.raises(ValueError, match="min_observations = 11"):
        data.hapke.fit(vectors, START, FREE, units="r", min_observations=11)
    with pytest.raises(ValueError, match="free"):
        data.hapke.fit(vectors, START, ("w", "albedo"), units="r")


LABELS = np.array([[0, 0, 1], [-1, 1, 1]])  # two regions, one pixel left out


def regional_fit(data, vectors, solver, **options):
    """`data.hapke.fit` with c regional, on the r of `cube` (units "r": bit for bit the
    arrays given to `lumaxlike.fit`)."""
    labels = xr.DataArray(LABELS, dims=("y", "x"), coords={"y": data.y, "x": data.x})
    return data.hapke.fit(
        vectors,
        START,
        FREE,
        solver=solver,
        units="r",
        refl_sigma=1e-4 / np.pi,
        regions=labels,
        regional=("c",),
        **options,
    )


@pytest.fixture(scope="module")
def r_cube(cube):
    """`cube` in r [1/sr], the very arrays `lumaxlike.fit` gets."""
    data, vectors, arrays, w = cube
    return data.copy(data=arrays[0].reshape(data.shape)), vectors, w


@pytest.fixture(scope="module")
def regional_expected(cube):
    """`lumaxlike.fit(regions=...)` on the arrays: c one value per region, w and b per band."""
    _, _, arrays, _ = cube
    return lumaxlike.fit(
        *arrays,
        START,
        free=FREE,
        regions=LABELS.reshape(6),
        regional=("c",),
        refl_sigma=1e-4 / np.pi,
        solver="numba",
    )


def assert_regional_maps_equal(maps, expected):
    for name in FREE:
        shape = expected[name].shape
        np.testing.assert_array_equal(maps[name].values.reshape(shape), expected[name])
        np.testing.assert_array_equal(
            maps[f"sigma_{name}"].values.reshape(shape), expected.sigma(name)
        )
        np.testing.assert_array_equal(maps[f"dfs_{name}"].values.reshape(shape), expected.dfs[name])
    for name in ("status", "iterations", "cost", "observations"):
        shape = getattr(expected, name).shape
        np.testing.assert_array_equal(maps[name].values.reshape(shape), getattr(expected, name))
    np.testing.assert_array_equal(maps.region.values, expected.region_labels)
    np.testing.assert_array_equal(maps.region_c.values, expected.region_values["c"])
    np.testing.assert_array_equal(maps.region_sigma_c.values, expected.region_sigma["c"])
    for name in ("status", "iterations", "cost"):
        np.testing.assert_array_equal(
            maps[f"region_{name}"].values, getattr(expected, f"region_{name}")
        )


def test_regional_fit_equals_fit_on_the_arrays(r_cube, regional_expected):
    """regions= on a NumPy-backed DataArray: every map and per-region value equals the
    in-memory `fit(regions=...)`; c is recovered per region, the pixel labelled -1 is left out."""
    data, vectors, w = r_cube
    maps = regional_fit(data, vectors, "numba")
    assert_regional_maps_equal(maps, regional_expected)
    assert maps.c.dims == ("y", "x") and maps.status.dims == ("y", "x")
    assert maps.w.dims == ("y", "x", "band") and maps.region_c.dims == ("region",)
    np.testing.assert_array_equal(maps.region.values, [0, 1])
    np.testing.assert_array_equal(maps.region_status.values, lumaxlike.Status.CONVERGED)
    np.testing.assert_allclose(maps.region_c.values, TRUTH.c, rtol=0, atol=1e-6)
    inside = LABELS.reshape(6) >= 0
    np.testing.assert_allclose(maps.w.values.reshape(6, 2)[inside], w[inside], rtol=0, atol=1e-6)
    assert maps.status.values[1, 0] == lumaxlike.Status.TOO_FEW_OBSERVATIONS
    assert np.isnan(maps.w.values[1, 0]).all() and maps.observations.values[1, 0].sum() == 0
    assert json.loads(maps.attrs["lumaxlike_fit_regional"]) == ["c"]


def test_regional_fit_of_dask_chunks_in_groups_equals_fit(r_cube, regional_expected):
    """A dask-backed refl whose regions span chunks, with a cap holding one region at a
    time (two groups, each gathered from the chunks it lies in): the same maps, computed."""
    from lumaxlike._run.region_groups import region_pixel_bytes

    data, vectors, _ = r_cube
    cap = 3 * region_pixel_bytes(2, 10, 2, 1)  # region 1's 3 pixels, not both regions' 5
    maps = regional_fit(data.chunk({"y": 1, "x": 2}), vectors, "numba", region_memory=cap)
    assert maps.w.chunks is None  # computed at the call
    assert_regional_maps_equal(maps, regional_expected)
    with pytest.raises(ValueError, match="region 1 has 3 pixels.*region_memory"):
        regional_fit(data, vectors, "numba", region_memory=cap / 2)


def test_bad_regions_are_refused(cube):
    data, vectors, _, _ = cube

    def call(labels, **options):
        return data.hapke.fit(
            vectors,
            START,
            FREE,
            units="radf",
            refl_sigma=1e-4,
            regions=labels,
            **{"regional": ("c",), **options},
        )

    with pytest.raises(ValueError, match=r"regions must have refl's pixel dims \('y', 'x'\)"):
        call(xr.DataArray(LABELS.reshape(6), dims=("pixel",)))
    with pytest.raises(ValueError, match="regions has sizes"):
        call(xr.DataArray(LABELS[:, :2], dims=("y", "x")))
    with pytest.raises(ValueError, match="regions is not aligned"):
        call(xr.DataArray(LABELS, dims=("y", "x"), coords={"y": [1.0, 2.0]}))
    with pytest.raises(ValueError, match="integer labels"):
        call(xr.DataArray(LABELS + 0.5, dims=("y", "x")))
    with pytest.raises(ValueError, match="must be an xarray.DataArray"):
        call(LABELS)
    with pytest.raises(ValueError, match="go together"):
        call(xr.DataArray(LABELS, dims=("y", "x")), regional=())
    with pytest.raises(ValueError, match="no region"):
        call(xr.DataArray(np.full((2, 3), -1), dims=("y", "x")))
