"""xarray API: invert_dataarray and the ``.hapke`` accessor, in memory, with dask, distributed."""

import numpy as np
import pytest
import xarray as xr

import lumaxlike
from lumaxlike import Status
from lumaxlike._xarray.invert import invert_dataarray

from .test_io import PARAMS, make_scene

ROWS, COLS, BANDS = 16, 12, 5
SOLVERS = ("jax", "numba")


@pytest.fixture(scope="module")
def scene():
    scene = make_scene(rows=ROWS, cols=COLS, bands=BANDS, seed=3)
    scene["r"][0, 0, :] = np.nan  # a NaN pixel
    scene["r"][1, 1, 2] = -0.5  # an unreachable value
    return scene


def reflectance(scene, dims=("band", "y", "x")):
    """The scene's r [1/sr] as a DataArray with coords, attrs and a spatial_ref coordinate."""
    values = np.moveaxis(scene["r"], -1, 0)  # (band, y, x)
    order = [("band", "y", "x").index(d) for d in dims]
    coords = {
        "band": np.arange(1, BANDS + 1),
        "y": 4100000.0 - 30.0 * np.arange(ROWS),
        "x": 500000.0 + 30.0 * np.arange(COLS),
        "wavelength": ("band", np.linspace(500.0, 900.0, BANDS)),
        "spatial_ref": ((), 0, {"crs_wkt": "EPSG:32612"}),
    }
    return xr.DataArray(
        np.transpose(values, order),
        dims=dims,
        coords=coords,
        attrs={"units": "sr-1", "crs": "EPSG:32612", "title": "test cube"},
    )


def vector_geometry(scene, refl):
    def vector(name):
        return (("y", "x", "xyz"), scene[name])

    return xr.Dataset(
        {name: vector(name) for name in ("to_sun", "to_sensor", "normal")},
        coords={"y": refl.y, "x": refl.x},
    )


def angle_geometry(scene, refl):
    names = ("to_sun_zenith", "to_sun_azimuth", "to_sensor_zenith", "to_sensor_azimuth")
    angles = {
        name: (("y", "x"), scene["angles"][i], {"units": "degrees"}) for i, name in enumerate(names)
    }
    normal = xr.DataArray(scene["normal"], dims=("y", "x", "component"))
    return xr.Dataset({**angles, "normal": normal}, coords={"y": refl.y, "x": refl.x})


def expected_result(scene, solver):
    return lumaxlike.invert(
        scene["r"], scene["to_sun"], scene["to_sensor"], scene["normal"], PARAMS, solver
    )


def as_pixels_bands(dataarray):
    return dataarray.transpose("y", "x", "band").values


@pytest.mark.parametrize("solver", SOLVERS)
def test_in_memory_inversion_matches_invert_and_keeps_coords_attrs_crs(scene, solver):
    refl = reflectance(scene)
    result = invert_dataarray(refl, vector_geometry(scene, refl), PARAMS, solver, units="r")
    expected = expected_result(scene, solver)
    assert set(result.data_vars) == {"w", "status", "iterations", "residual", "sigma"}
    for field in result.data_vars:
        assert result[field].dims == refl.dims
        np.testing.assert_array_equal(as_pixels_bands(result[field]), getattr(expected, field))
    assert result.status.dtype == np.int8 and result.iterations.dtype == np.int32
    assert as_pixels_bands(result.status)[0, 0, 0] == Status.NONFINITE_INPUT
    assert as_pixels_bands(result.status)[1, 1, 2] == Status.UNREACHABLE
    for name in ("band", "y", "x", "wavelength", "spatial_ref"):
        xr.testing.assert_identical(result[name], refl[name])
    assert {name: result.attrs[name] for name in refl.attrs} == refl.attrs
    record = lumaxlike.read_provenance(result)
    assert record.params == (PARAMS,) * BANDS and (record.solver, record.units) == (solver, "r")
    assert record.command.startswith("lumaxlike.invert_dataarray(") and record.cube is None
    assert result.w.attrs["grid_mapping"] == "spatial_ref" and result.w.attrs["crs"] == "EPSG:32612"


def test_spectral_dim_in_any_position_angles_and_accessor_agree(scene):
    refl = reflectance(scene)
    reference = invert_dataarray(refl, vector_geometry(scene, refl), PARAMS, "numba", units="r")
    last = reflectance(scene, dims=("y", "x", "band")).swap_dims(band="wavelength")
    result = last.hapke.invert(angle_geometry(scene, refl), PARAMS, "numba", units="r")
    assert result.w.dims == ("y", "x", "wavelength")
    np.testing.assert_allclose(result.w.values, as_pixels_bands(reference.w), rtol=1e-12)
    np.testing.assert_array_equal(result.status.values, as_pixels_bands(reference.status))


def test_radf_units_give_the_same_albedo(scene):
    refl = reflectance(scene)
    geometry = vector_geometry(scene, refl)
    r = invert_dataarray(refl, geometry, PARAMS, "numba", units="r")
    radf = invert_dataarray(refl * np.pi, geometry, PARAMS, "numba", units="radf")
    np.testing.assert_allclose(radf.w.values, r.w.values, rtol=1e-12)


def test_dask_chunks_are_inverted_lazily_and_match_in_memory(scene):
    refl = reflectance(scene)
    geometry = vector_geometry(scene, refl)
    in_memory = invert_dataarray(refl, geometry, PARAMS, "numba", units="r")
    lazy = invert_dataarray(
        refl.chunk({"y": 5, "x": 7, "band": 2}),
        geometry.chunk({"y": 8}),
        PARAMS,
        "numba",
        units="r",
    )
    assert lazy.w.chunks is not None and lazy.w.chunksizes["band"] == (BANDS,)  # rechunked
    computed = lazy.compute(scheduler="threads")
    np.testing.assert_array_equal(computed.w.values, in_memory.w.values)
    np.testing.assert_array_equal(computed.status.values, in_memory.status.values)


def test_bad_arguments_are_named(scene):
    refl = reflectance(scene)
    geometry = vector_geometry(scene, refl)
    with pytest.raises(ValueError, match="spectral dim"):
        invert_dataarray(refl.rename(band="channel"), geometry, PARAMS, units="r")
    with pytest.raises(ValueError, match="units"):
        invert_dataarray(refl, geometry, PARAMS, units="percent")
    with pytest.raises(ValueError, match="solver"):
        invert_dataarray(refl, geometry, PARAMS, "scipy", units="r")
    with pytest.raises(ValueError, match="not aligned"):
        invert_dataarray(refl, geometry.assign_coords(x=geometry.x + 1.0), PARAMS, units="r")
    with pytest.raises(ValueError, match="either the angles"):
        invert_dataarray(refl, geometry.drop_vars("to_sensor"), PARAMS, units="r")
    with pytest.raises(ValueError, match="params gives 2 per-band"):
        invert_dataarray(refl, geometry, [PARAMS, PARAMS], units="r")
    with pytest.raises(ValueError, match="to_sun.*one dim of size 3"):
        invert_dataarray(refl, geometry.isel(xyz=slice(0, 2)), PARAMS, units="r")


@pytest.fixture(scope="module")
def dask_client():
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(
        n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None
    ) as cluster:
        with distributed.Client(cluster) as client:
            yield client


@pytest.mark.parametrize("solver", SOLVERS)
def test_distributed_cluster_gives_identical_results(scene, dask_client, solver):
    refl = reflectance(scene)
    geometry = vector_geometry(scene, refl)
    in_memory = invert_dataarray(refl, geometry, PARAMS, solver, units="r")
    lazy = refl.chunk({"y": 8, "x": 6}).hapke.invert(
        geometry.chunk({"y": 8, "x": 6}), PARAMS, solver, units="r"
    )
    computed = dask_client.compute(lazy).result()
    np.testing.assert_array_equal(computed.w.values, in_memory.w.values)  # NaN-aware
    np.testing.assert_array_equal(computed.status.values, in_memory.status.values)
    assert np.isnan(computed.w.values).any()
