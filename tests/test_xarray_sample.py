"""`DataArray.hapke.sample` with ``shared``: `lumaxlike.sample` chunk by chunk over a
dask-backed DataArray, each pixel's bands one joint problem (the per-band front end is
tested in tests/test_sample.py).

A 2 x 4 image, 2 bands, 5 observations in radiance factor, w per band and b shared,
chunks of one row (4 pixels): the sampler program of tests/test_cli_sample.py's shared
runs (the same shapes and settings)."""

import json

import numpy as np
import pytest
import xarray as xr

import lumaxlike
from lumaxlike import Status
from lumaxlike._sample.maps import chunk_seed
from lumaxlike.testing import multi_angle_geometry, multi_angle_reflectance

PARAMS = lumaxlike.HapkeParams(b=0.3, c=0.4)
SIGMA, SEED = 0.002, 4
SAMPLER = {"num_samples": 200, "num_warmup": 100, "min_ess": 50}


@pytest.fixture(scope="module")
def stack():
    """The radf DataArray, its geometry Dataset and the arrays (r, vectors) per pixel."""
    rng = np.random.default_rng(8)
    geometry = multi_angle_geometry(8, 5, rng, opposition=False)
    refl = multi_angle_reflectance(rng.uniform(0.2, 0.8, (8, 2)), *geometry, PARAMS)
    refl = refl + SIGMA * rng.standard_normal(refl.shape)
    refl[5, 1, 2] = np.nan  # one missing observation
    data = xr.DataArray(
        np.pi * refl.reshape(2, 4, 2, 5),
        dims=("y", "x", "band", "observation"),
        coords={"y": [10.0, 20.0], "band": [1, 2]},
        attrs={"title": "stack"},
    )
    vectors = xr.Dataset(
        {
            name: (("y", "x", "observation", "xyz"), g.reshape(2, 4, 5, 3))
            for name, g in zip(("to_sun", "to_sensor", "normal"), geometry)
        },
        coords={"y": [10.0, 20.0]},
    )
    return data, vectors, refl, geometry


def test_dataarray_sample_shared_is_lazy_and_equals_sample_per_chunk(stack):
    """Lazy on dask; b's maps and the per-pixel status, acceptance and divergences have
    no band dim; each chunk (row) is `lumaxlike.sample(shared=("b",))` of its pixels in
    r (radf / pi, refl_sigma / pi) with the chunk's seed, bit for bit."""
    data, vectors, refl, geometry = stack
    lazy = data.chunk({"y": 1}).hapke.sample(
        vectors,
        PARAMS,
        ("w", "b"),
        shared=("b",),
        units="radf",
        refl_sigma=SIGMA * np.pi,
        seed=SEED,
        **SAMPLER,
    )
    assert lazy.b.chunks is not None and lazy.w.chunks is not None
    assert lazy.b.dims == ("y", "x", "quantile") and lazy.w.dims == ("y", "x", "band", "quantile")
    for name in ("mean_b", "rhat_b", "ess_b", "ess_tail_b", "status", "acceptance", "divergences"):
        assert lazy[name].dims == ("y", "x"), name
    assert lazy.mean_w.dims == lazy.observations.dims == ("y", "x", "band")
    assert json.loads(lazy.attrs["lumaxlike_sample_shared"]) == ["b"]
    assert "shared=" in lazy.attrs["lumaxlike_command"] and lazy.attrs["title"] == "stack"
    maps = lazy.compute()
    for row in range(2):
        pixels = slice(4 * row, 4 * row + 4)
        expected = lumaxlike.sample(
            np.pi * refl[pixels] / np.pi,
            *(g[pixels] for g in geometry),
            PARAMS,
            free=("w", "b"),
            shared=("b",),
            refl_sigma=SIGMA * np.pi / np.pi,
            seed=chunk_seed(SEED, 4 * row),
            **SAMPLER,
        )
        for name in ("w", "b"):
            np.testing.assert_array_equal(maps[name].values[row], expected.quantiles[name])
            for kind, values in (
                ("mean", expected.mean),
                ("rhat", expected.rhat),
                ("ess", expected.ess),
                ("ess_tail", expected.ess_tail),
            ):
                np.testing.assert_array_equal(maps[f"{kind}_{name}"].values[row], values[name])
        for field in ("status", "acceptance", "divergences", "observations"):
            np.testing.assert_array_equal(
                maps[field].values[row], getattr(expected, field), err_msg=field
            )
    assert maps.observations.values[1, 1].tolist() == [5, 4]
    assert np.all(np.isin(maps.status.values, [Status.CONVERGED, Status.NOT_MIXED]))
    # NumPy-backed: computed at once (the first row alone: a chunk of 4 pixels again)
    first = data.isel(y=[0]).hapke.sample(
        vectors.isel(y=[0]),
        PARAMS,
        ("w", "b"),
        shared=("b",),
        units="radf",
        refl_sigma=SIGMA * np.pi,
        seed=SEED,
        **SAMPLER,
    )
    assert first.b.chunks is None and first.b.dims == ("y", "x", "quantile")
    # a problem's draws are keyed by the seed and its index in the call, not by the
    # chunking: the whole image in chunks of 4 with the first row's seed gives that row's
    whole = lumaxlike.sample(
        np.pi * refl / np.pi,
        *geometry,
        PARAMS,
        free=("w", "b"),
        shared=("b",),
        refl_sigma=SIGMA * np.pi / np.pi,
        seed=chunk_seed(SEED, 0),
        chunk_size=4,
        **SAMPLER,
    )
    for name in ("w", "b"):
        np.testing.assert_array_equal(first[name].values[0], maps[name].values[0])
        np.testing.assert_array_equal(whole.quantiles[name][:4], maps[name].values[0])
    np.testing.assert_array_equal(whole.status[:4], maps.status.values[0])


def test_dataarray_sample_refuses_bad_shared_and_prior_maps(stack):
    data, vectors, _, _ = stack
    call = dict(units="radf", refl_sigma=SIGMA)
    with pytest.raises(ValueError, match="shared"):
        data.hapke.sample(vectors, PARAMS, ("w", "b"), shared=("c",), **call)
    with pytest.raises(ValueError, match="shared"):
        data.hapke.sample(vectors, PARAMS, ("w", "b"), shared=("w",), **call)
    with pytest.raises(ValueError, match=r"prior\['b'\]: sample_dataarray takes scalar priors"):
        data.hapke.sample(
            vectors, PARAMS, ("w", "b"), prior={"b": (np.full((2, 4), 0.3), 0.1)}, **call
        )
    with pytest.raises(ValueError, match="call lumaxlike.sample for the draws"):
        data.hapke.sample(vectors, PARAMS, ("w",), return_samples=True, **call)
