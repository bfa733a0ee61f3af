"""`DataArray.hapke.fit`: `lumaxlike.fit` chunk by chunk over a dask-backed DataArray."""

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
