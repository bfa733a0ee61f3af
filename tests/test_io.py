"""Reading cubes and geometry, writing result maps atomically, streaming file inversion."""

import hashlib
import math
import os
import re
import tracemalloc

import numpy as np
import pytest
import rasterio
import xarray as xr
from affine import Affine

import lumaxlike
from lumaxlike import Status, invert_file
from lumaxlike._io import (
    CubeReader,
    GeometryReader,
    ResultWriter,
    iter_cube_blocks,
    read_cube,
    result_paths,
    to_bidirectional_reflectance,
    write_result,
)
from lumaxlike._io.read.geometry_rasters import match_obs_bands
from lumaxlike._io.write import writers
from lumaxlike._io.write.atomic import TEMP_MARK, AtomicOutputs

CRS = "EPSG:32612"
TRANSFORM = Affine(30.0, 0.0, 500000.0, 0.0, -30.0, 4100000.0)
PARAMS = lumaxlike.HapkeParams(b=0.2, c=0.4, roughness=math.radians(15.0))  # floats, like the CLI
OBS_DESCRIPTIONS = (
    "To-sun zenith (0 to 90 degrees from zenith)",
    "To-Sun AZM",
    "to_sensor_zenith",
    "To-sensor azimuth (0 to 360 degrees CW from N)",
)
WAVELENGTHS = (450.0, 550.5, 651.25, 1200.0, 2400.0)


def write_raster(
    path,
    bands,
    *,
    driver="GTiff",
    crs=CRS,
    transform=TRANSFORM,
    nodata=None,
    descriptions=None,
    envi_wavelengths=None,
    band_tags=None,
    dtype=None,
):
    """Write ``bands`` of shape (count, rows, cols) with the given metadata; return the path."""
    bands = np.asarray(bands)
    count, rows, cols = bands.shape
    with rasterio.open(
        path,
        "w",
        driver=driver,
        width=cols,
        height=rows,
        count=count,
        dtype=dtype or bands.dtype.name,
        crs=crs,
        transform=transform,
        nodata=nodata,
    ) as dst:
        dst.write(bands.astype(dtype or bands.dtype))
        for index, description in enumerate(descriptions or (), start=1):
            dst.set_band_description(index, description)
        for index, tags in enumerate(band_tags or (), start=1):
            dst.update_tags(index, **tags)
        if envi_wavelengths is not None:
            dst.update_tags(
                ns="ENVI",
                wavelength="{" + ", ".join(map(str, envi_wavelengths)) + "}",
                wavelength_units="Nanometers",
            )
    return path


def make_scene(rows=8, cols=6, bands=5, seed=0):
    """Angles [deg], DTM [m], true w and its reflectance r [1/sr] on a small grid."""
    rng = np.random.default_rng(seed)
    angles = np.stack(
        [
            rng.uniform(10.0, 60.0, (rows, cols)),  # to-sun zenith
            rng.uniform(0.0, 360.0, (rows, cols)),  # to-sun azimuth
            rng.uniform(0.0, 40.0, (rows, cols)),  # to-sensor zenith
            rng.uniform(0.0, 360.0, (rows, cols)),  # to-sensor azimuth
        ]
    )
    dtm = np.cumsum(rng.normal(0.0, 3.0, (rows, cols)), axis=0)
    to_sun = lumaxlike.direction_from_zenith_azimuth(np.radians(angles[0]), np.radians(angles[1]))
    to_sensor = lumaxlike.direction_from_zenith_azimuth(
        np.radians(angles[2]), np.radians(angles[3])
    )
    normal = lumaxlike.normals_from_dtm(dtm, (30.0, 30.0))
    w = rng.uniform(0.2, 0.9, (rows, cols, bands))
    r = np.asarray(lumaxlike.amsa(w, to_sun, to_sensor, normal, PARAMS, backend="numba"))
    return {
        "angles": angles,
        "dtm": dtm,
        "w": w,
        "r": r,
        "to_sun": to_sun,
        "to_sensor": to_sensor,
        "normal": normal,
    }


def write_scene(folder, scene, *, cube_values=None, driver="GTiff", nodata=None):
    """Write cube (ENVI wavelengths), OBS and DTM rasters; return their paths."""
    values = scene["r"] if cube_values is None else cube_values
    bands = values.shape[-1]
    suffix = ".tif" if driver == "GTiff" else ".img"
    cube = write_raster(
        folder / f"cube{suffix}",
        np.moveaxis(values, -1, 0),
        driver=driver,
        nodata=nodata,
        envi_wavelengths=WAVELENGTHS[:bands],
    )
    obs = write_raster(folder / "obs.tif", scene["angles"], descriptions=OBS_DESCRIPTIONS)
    dtm = write_raster(folder / "dtm.tif", scene["dtm"][None])
    return cube, obs, dtm


def digest(path):
    return hashlib.sha256(path.read_bytes()).hexdigest()


def temporary_leftovers(folder):
    return [p.name for p in folder.rglob("*") if TEMP_MARK in p.name or p.name.startswith(".")]


# ----------------------------------------------------------------------------- reading


def test_read_cube_layout_nodata_georeferencing_and_envi_wavelengths(tmp_path):
    values = np.arange(2 * 3 * 4, dtype=np.float32).reshape(2, 3, 4)
    values[1, 2, 3] = -9999.0
    path = write_raster(
        tmp_path / "c.tif", values, nodata=-9999.0, envi_wavelengths=(500.5, 600.25)
    )
    cube, info = read_cube(path)
    assert cube.shape == (3, 4, 2) and cube.dtype == np.float32 and cube.flags.c_contiguous
    assert np.isnan(cube[2, 3, 1]) and cube[2, 3, 0] == values[0, 2, 3]
    np.testing.assert_array_equal(np.nan_to_num(cube[..., 0]), values[0])
    assert info.shape == (3, 4, 2) and info.nodata == -9999.0
    assert info.grid.crs == rasterio.crs.CRS.from_string(CRS) and info.grid.transform == TRANSFORM
    np.testing.assert_array_equal(info.wavelengths, [500.5, 600.25])
    assert info.wavelength_units == "Nanometers"


@pytest.mark.parametrize(
    "kwargs, expected, units",
    [
        (
            {
                "band_tags": [
                    {"wavelength": "1.5", "wavelength_units": "Micrometers"},
                    {"wavelength": "2.5", "wavelength_units": "Micrometers"},
                ]
            },
            [1.5, 2.5],
            "Micrometers",
        ),
        ({"descriptions": ["700", "800.5"]}, [700.0, 800.5], None),
        ({"descriptions": ["700 nm", "800.5 nm"]}, [700.0, 800.5], "Nanometers"),
        ({"descriptions": ["red", "nir"]}, None, None),
    ],
)
def test_wavelengths_from_band_tags_or_descriptions(tmp_path, kwargs, expected, units):
    path = write_raster(tmp_path / "c.tif", np.ones((2, 3, 4)), **kwargs)
    with CubeReader(path) as cube:
        if expected is None:
            assert cube.info.wavelengths is None
        else:
            np.testing.assert_array_equal(cube.info.wavelengths, expected)
        assert cube.info.wavelength_units == units


def test_envi_cube_opens_from_data_file_or_header(tmp_path):
    values = np.random.default_rng(1).uniform(size=(3, 4, 5))
    path = write_raster(
        tmp_path / "c.img",
        values,
        driver="ENVI",
        envi_wavelengths=(1, 2, 3),
        descriptions=["a", "b", "c"],
    )
    from_data, info = read_cube(path)
    from_header, _ = read_cube(tmp_path / "c.hdr")
    np.testing.assert_array_equal(from_data, np.moveaxis(values, 0, -1))
    np.testing.assert_array_equal(from_header, from_data)
    assert info.band_names == ("a", "b", "c")  # without GDAL's " (1 Nanometers)" suffix
    np.testing.assert_array_equal(info.wavelengths, [1, 2, 3])


@pytest.mark.parametrize("fault", ["truncated by half", "header bands 4", "header bands 6"])
def test_an_envi_header_that_disagrees_with_its_data_file_is_refused(tmp_path, fault):
    """GDAL reads such a file without complaint (missing bytes as 0, a wrong band count
    with the wrong stride): the data file's size must be what the header describes."""
    values = np.random.default_rng(1).uniform(size=(5, 3, 4)).astype(np.float32)
    path = write_raster(tmp_path / "cube.img", values, driver="ENVI")
    header = tmp_path / "cube.hdr"
    size, expected = 240, 240  # 4 samples x 3 lines x 5 bands x 4 bytes
    if fault == "truncated by half":
        os.truncate(path, 120)
        size = 120
    else:
        bands = int(fault.split()[-1])
        text, count = re.subn(r"(?m)^bands\s*=\s*5$", f"bands = {bands}", header.read_text())
        assert count == 1
        header.write_text(text)
        expected = 48 * bands
    for given in (path, header):
        with pytest.raises(ValueError) as error:
            read_cube(given)
        message = str(error.value)
        assert f"ENVI header {header} " in message and f"data file {path} " in message
        assert f"= {expected} bytes" in message and f"holds {size} bytes" in message


def test_row_blocks_reassemble_the_cube_and_apply_scale_offset(tmp_path):
    values = np.arange(2 * 7 * 3, dtype=np.int16).reshape(2, 7, 3)
    path = write_raster(tmp_path / "c.tif", values)
    with rasterio.open(path, "r+") as dst:
        dst.scales = (0.5, 0.25)
        dst.offsets = (1.0, 0.0)
    whole, info = read_cube(path)
    blocks = list(iter_cube_blocks(path, chunk_rows=3))
    assert [rows for rows, _ in blocks] == [slice(0, 3), slice(3, 6), slice(6, 7)]
    np.testing.assert_array_equal(np.concatenate([b for _, b in blocks]), whole)
    np.testing.assert_allclose(whole[..., 0], values[0] * 0.5 + 1.0)
    assert whole.dtype == np.float32


def test_missing_and_unreadable_inputs_name_the_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope.tif"):
        read_cube(tmp_path / "nope.tif")
    bad = tmp_path / "bad.tif"
    bad.write_bytes(b"this is not a raster")
    with pytest.raises(ValueError, match="bad.tif"):
        read_cube(bad)
    with pytest.raises(FileNotFoundError, match="orphan.hdr"):
        read_cube(tmp_path / "orphan.hdr")


# ----------------------------------------------------------------------------- geometry


@pytest.mark.parametrize(
    "names",
    [
        ("TO-SUN ZENITH", "to sun azimuth", "To_Sensor_Zenith", "to-sensor azimuth (deg)"),
        ("Solar Zenith", "Solar Azimuth", "View Zenith", "View Azimuth"),
        ("To-Sun Zenith", "To-Sun AZM", "To-Inst Zenith", "To-Inst AZM"),
    ],
)
def test_obs_band_names_match_case_insensitively(names):
    order = (3, 1, 4, 2)  # bands in any order
    descriptions = [names[i - 1] for i in order] + ["Phase"]
    found = match_obs_bands(descriptions, "obs.tif")
    assert found == {
        "to_sun_zenith": 2,
        "to_sun_azimuth": 4,
        "to_sensor_zenith": 1,
        "to_sensor_azimuth": 3,
    }


def test_obs_without_a_role_or_with_two_bands_for_one_is_rejected():
    with pytest.raises(ValueError, match="obs.tif.*to_sensor_azimuth.*accepted"):
        match_obs_bands(["to_sun_zenith", "to_sun_azimuth", "to_sensor_zenith", "phase"], "obs.tif")
    with pytest.raises(ValueError, match="several bands for to_sun_zenith"):
        match_obs_bands(
            ["to_sun_zenith", "solar zenith", "to_sun_azimuth", "vza", "vaa"], "obs.tif"
        )


def test_geometry_from_obs_angle_rasters_and_arrays_agree(tmp_path):
    scene = make_scene()
    cube, obs, dtm = write_scene(tmp_path, scene)
    roles = ("to_sun_zenith", "to_sun_azimuth", "to_sensor_zenith", "to_sensor_azimuth")
    single = {
        role: write_raster(tmp_path / f"{role}.tif", scene["angles"][i][None])
        for i, role in enumerate(roles)
    }
    arrays = {role: scene["angles"][i] for i, role in enumerate(roles)}
    grid = read_cube(cube)[1].grid
    rows = slice(2, 6)
    results = []
    for geometry in (obs, single, arrays):
        with GeometryReader(geometry, grid, dtm) as reader:
            results.append(reader.read(rows))
    for got in results:
        np.testing.assert_allclose(got[0], scene["to_sun"][rows], atol=1e-15)
        np.testing.assert_allclose(got[1], scene["to_sensor"][rows], atol=1e-15)
        np.testing.assert_allclose(got[2], scene["normal"][rows], atol=1e-15)
    with GeometryReader(arrays, grid) as flat:
        np.testing.assert_array_equal(
            flat.read(rows)[2], np.broadcast_to([0.0, 0.0, 1.0], (4, 6, 3))
        )


@pytest.mark.parametrize("chunk_rows", [1, 3])
def test_dtm_normals_by_windows_equal_the_whole_image(tmp_path, chunk_rows):
    scene = make_scene(rows=7)
    _, obs, dtm = write_scene(tmp_path, scene)
    grid = read_cube(dtm)[1].grid
    with GeometryReader(obs, grid, dtm) as reader:
        normals = np.concatenate(
            [reader.read_normals(slice(s, min(s + chunk_rows, 7))) for s in range(0, 7, chunk_rows)]
        )
    np.testing.assert_allclose(normals, scene["normal"], rtol=0, atol=1e-15)


@pytest.mark.parametrize(
    "what, kwargs",
    [
        ("shape", {"bands": np.zeros((4, 8, 5))}),
        ("transform", {"transform": Affine(30.0, 0.0, 500030.0, 0.0, -30.0, 4100000.0)}),
        ("CRS", {"crs": "EPSG:32613"}),
    ],
)
@pytest.mark.parametrize("role", ["geometry", "DTM"])
def test_misaligned_geometry_or_dtm_names_both_files_and_the_difference(
    tmp_path, what, kwargs, role
):
    scene = make_scene()
    cube, obs, dtm = write_scene(tmp_path, scene)
    kwargs = dict(kwargs)
    bands = kwargs.pop("bands", scene["angles"] if role == "geometry" else scene["dtm"][None])
    if role == "DTM":
        bands = bands[:1]
    other = write_raster(
        tmp_path / "other.tif", bands, descriptions=OBS_DESCRIPTIONS[: len(bands)], **kwargs
    )
    grid = read_cube(cube)[1].grid
    with pytest.raises(ValueError) as error:
        if role == "geometry":
            GeometryReader(other, grid)
        else:
            GeometryReader(obs, grid, dtm=other)
    message = str(error.value)
    assert "other.tif" in message and "cube.tif" in message and what in message and role in message


def test_dtm_in_geographic_crs_or_angle_array_of_wrong_shape_is_rejected(tmp_path):
    scene = make_scene()
    _, obs, _ = write_scene(tmp_path, scene)
    geographic = Affine(0.001, 0.0, -110.0, 0.0, -0.001, 37.0)
    dtm = write_raster(
        tmp_path / "geo_dtm.tif", scene["dtm"][None], crs="EPSG:4326", transform=geographic
    )
    obs_geo = write_raster(
        tmp_path / "geo_obs.tif",
        scene["angles"],
        crs="EPSG:4326",
        transform=geographic,
        descriptions=OBS_DESCRIPTIONS,
    )
    with pytest.raises(ValueError, match="geo_dtm.tif.*geographic"):
        GeometryReader(obs_geo, read_cube(dtm)[1].grid, dtm=dtm)
    grid = read_cube(obs)[1].grid
    arrays = dict(
        zip(
            ("to_sun_zenith", "to_sun_azimuth", "to_sensor_zenith", "to_sensor_azimuth"),
            scene["angles"][:, :-1],
        )
    )
    with pytest.raises(ValueError, match="to_sun_zenith.*shape"):
        GeometryReader(arrays, grid)


def test_reflectance_units_convert_to_r():
    scene = make_scene()
    r = scene["r"]
    cos_i = np.sum(scene["to_sun"] * scene["normal"], axis=-1)
    np.testing.assert_allclose(to_bidirectional_reflectance(np.pi * r, "radf"), r, rtol=1e-15)
    reff = np.pi * r / cos_i[..., None]
    np.testing.assert_allclose(
        to_bidirectional_reflectance(reff, "reff", scene["to_sun"], scene["normal"]), r, rtol=1e-14
    )
    assert to_bidirectional_reflectance(r, "r") is r
    with pytest.raises(ValueError, match="units"):
        to_bidirectional_reflectance(r, "percent")


# ----------------------------------------------------------------------------- writing


def fake_result(shape, seed=0):
    """Result maps with the types and value ranges lumaxlike writes (not from a solver)."""
    rng = np.random.default_rng(seed)
    w = rng.uniform(0.1, 0.9, shape).astype(np.float32)
    w[0, 0, 0] = np.nan
    return {
        "w": w,
        "status": rng.integers(0, 5, shape).astype(np.int8),
        "iterations": rng.integers(0, 50, shape).astype(np.int32),
        "residual": rng.normal(0, 1e-9, shape).astype(np.float32),
        "sigma": rng.uniform(0, 0.1, shape).astype(np.float32),
    }


@pytest.mark.parametrize(
    "name, nodata",
    [
        ("w.tif", np.nan),
        ("w.tiff", -9999.0),
        ("w.img", np.nan),
        ("w.hdr", -9999.0),
        ("w.envi", -1.0),
    ],
)
def test_raster_outputs_round_trip_wavelengths_crs_transform_nodata(tmp_path, name, nodata):
    cube = write_raster(
        tmp_path / "cube.tif",
        np.ones((5, 3, 4), np.float32),
        nodata=-1.0,
        envi_wavelengths=WAVELENGTHS,
        descriptions=list("abcde"),
    )
    info = read_cube(cube)[1]
    result = fake_result((3, 4, 5))
    paths = write_result(tmp_path / name, result, like=info, nodata=nodata)
    assert set(paths) == {"w", "status", "iterations", "residual", "sigma"}
    for field, path in paths.items():
        values, back = read_cube(path)
        np.testing.assert_array_equal(values, result[field].astype(values.dtype))
        np.testing.assert_array_equal(back.wavelengths, WAVELENGTHS)
        assert back.wavelength_units == "Nanometers"
        assert back.band_names == tuple("abcde")
        assert back.grid.crs == info.grid.crs and back.grid.transform == info.grid.transform
        with rasterio.open(path) as src:
            expected = (
                "uint8" if field == "status" and src.driver == "ENVI" else result[field].dtype.name
            )
            assert src.dtypes[0] == expected
            if field in ("w", "residual", "sigma"):
                np.testing.assert_equal(src.nodata, nodata)
            else:
                assert src.nodata is None
    assert temporary_leftovers(tmp_path) == []


@pytest.mark.parametrize("name, nodata", [("w.nc", np.nan), ("w.nc", -9999.0), ("w.zarr", -9999.0)])
def test_dataset_outputs_round_trip_wavelengths_crs_and_coordinates(tmp_path, name, nodata):
    cube = write_raster(
        tmp_path / "cube.tif", np.ones((5, 3, 4), np.float64), envi_wavelengths=WAVELENGTHS
    )
    info = read_cube(cube)[1]
    result = fake_result((3, 4, 5))
    paths = write_result(tmp_path / name, result, like=info, nodata=nodata)
    assert set(paths.values()) == {tmp_path / name}
    with xr.open_dataset(
        tmp_path / name, engine="netcdf4" if name.endswith(".nc") else "zarr"
    ) as ds:
        assert ds.w.dims == ("band", "y", "x") and ds.w.dtype == np.float64
        for field, values in result.items():
            np.testing.assert_array_equal(
                ds[field].values, np.moveaxis(values, -1, 0).astype(ds[field].dtype)
            )
        assert ds.status.dtype == np.int8 and ds.iterations.dtype == np.int32
        np.testing.assert_array_equal(ds.wavelength.values, WAVELENGTHS)
        assert rasterio.crs.CRS.from_wkt(ds.spatial_ref.attrs["crs_wkt"]) == info.grid.crs
        assert ds.w.attrs["grid_mapping"] == "spatial_ref"
        np.testing.assert_equal(ds.w.encoding["_FillValue"], nodata)
        np.testing.assert_allclose(ds.x.values, 500000.0 + 30.0 * (np.arange(4) + 0.5))
        np.testing.assert_allclose(ds.y.values, 4100000.0 - 30.0 * (np.arange(3) + 0.5))
    assert temporary_leftovers(tmp_path) == [] or name.endswith(".zarr")  # zarr keeps .zattrs etc.


@pytest.mark.parametrize("name", ["w.tif", "w.zarr"])
def test_existing_output_is_kept_unless_overwrite(tmp_path, name):
    info = read_cube(write_raster(tmp_path / "cube.tif", np.ones((5, 3, 4))))[1]
    first, second = fake_result((3, 4, 5), seed=1), fake_result((3, 4, 5), seed=2)
    write_result(tmp_path / name, first, like=info)
    before = sorted(p.name for p in tmp_path.rglob("*"))
    with pytest.raises(FileExistsError, match=name):
        write_result(tmp_path / name, second, like=info)
    assert sorted(p.name for p in tmp_path.rglob("*")) == before
    write_result(tmp_path / name, second, like=info, overwrite=True)
    if name.endswith(".tif"):
        np.testing.assert_array_equal(read_cube(tmp_path / name)[0], second["w"].astype(np.float32))
    else:
        with xr.open_zarr(tmp_path / name) as ds:
            np.testing.assert_array_equal(ds.w.values, np.moveaxis(second["w"], -1, 0))
    assert sorted(p.name for p in tmp_path.rglob("*")) == before


def test_output_under_a_file_or_unknown_extension_is_rejected_before_writing(tmp_path):
    info = read_cube(write_raster(tmp_path / "cube.tif", np.ones((2, 3, 4))))[1]
    (tmp_path / "plain").write_text("a file, not a folder")
    with pytest.raises(NotADirectoryError, match="plain"):
        write_result(tmp_path / "plain" / "w.tif", fake_result((3, 4, 2)), like=info)
    with pytest.raises(FileNotFoundError, match="missing"):
        write_result(tmp_path / "missing" / "w.tif", fake_result((3, 4, 2)), like=info)
    with pytest.raises(ValueError, match="w.png.*extension"):
        write_result(tmp_path / "w.png", fake_result((3, 4, 2)), like=info)


@pytest.mark.skipif(
    os.geteuid() == 0,
    reason="root writes into read-only folders; "
    "the unwritable-path case is covered by the output-under-a-file test",
)
def test_read_only_output_folder_is_rejected(tmp_path):
    info = read_cube(write_raster(tmp_path / "cube.tif", np.ones((2, 3, 4))))[1]
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        with pytest.raises(PermissionError, match="locked"):
            write_result(locked / "w.tif", fake_result((3, 4, 2)), like=info)
    finally:
        locked.chmod(0o700)


def test_atomic_outputs_publish_all_or_nothing(tmp_path):
    targets = [tmp_path / "a.txt", tmp_path / "b.txt"]
    with pytest.raises(RuntimeError, match="injected"):
        with AtomicOutputs(targets, overwrite=False) as temporary:
            temporary[targets[0]].write_text("a")
            (temporary[targets[0]].parent / (temporary[targets[0]].name + ".aux.xml")).write_text(
                "sidecar"
            )
            raise RuntimeError("injected")
    assert list(tmp_path.iterdir()) == []
    with AtomicOutputs(targets, overwrite=False) as temporary:
        for target in targets:
            temporary[target].write_text(target.name)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.txt", "b.txt"]


# ----------------------------------------------------------------------------- file inversion


@pytest.mark.parametrize("solver", ["numba", "jax"])
def test_invert_file_streams_blocks_and_matches_in_memory_invert(tmp_path, solver):
    scene = make_scene()
    cube, obs, dtm = write_scene(tmp_path, scene)
    hashes = {p: digest(p) for p in (cube, obs, dtm)}
    summary = invert_file(
        cube,
        tmp_path / "w.tif",
        geometry=obs,
        dtm=dtm,
        params=PARAMS,
        solver=solver,
        units="r",
        run=lumaxlike.RunOptions(chunk_rows=3),
    )
    expected = lumaxlike.invert(
        scene["r"],
        scene["to_sun"],
        scene["to_sensor"],
        scene["normal"],
        PARAMS,
        solver,
        chunk_size=3 * 6,
    )  # JAX: one compile
    for field in ("w", "status", "iterations", "residual"):
        np.testing.assert_array_equal(
            read_cube(summary.outputs[field])[0], getattr(expected, field)
        )
    np.testing.assert_allclose(read_cube(summary.outputs["w"])[0], scene["w"], atol=1e-9)
    assert summary.status_counts["CONVERGED"] == scene["r"].size and summary.pixels == 48
    assert "sigma" not in summary.outputs
    assert {p: digest(p) for p in hashes} == hashes  # inputs untouched
    assert temporary_leftovers(tmp_path) == []


def test_invert_file_units_sigma_and_per_band_params(tmp_path):
    scene = make_scene()
    cos_i = np.sum(scene["to_sun"] * scene["normal"], axis=-1)
    reff = np.pi * scene["r"] / cos_i[..., None]
    cube, obs, dtm = write_scene(tmp_path, scene, cube_values=reff)
    per_band = [PARAMS] * 2 + [lumaxlike.HapkeParams(b=0.3, c=0.1)] * 3
    summary = invert_file(
        cube,
        tmp_path / "w.nc",
        geometry=obs,
        dtm=dtm,
        params=per_band,
        solver="numba",
        units="reff",
        refl_sigma=0.01,
        run=lumaxlike.RunOptions(chunk_rows=5),
    )
    with xr.open_dataset(summary.outputs["w"]) as ds:
        w, sigma = np.moveaxis(ds.w.values, 0, -1), np.moveaxis(ds.sigma.values, 0, -1)
    np.testing.assert_allclose(w[..., :2], scene["w"][..., :2], atol=1e-9)  # true params
    assert not np.allclose(w[..., 2:], scene["w"][..., 2:], atol=1e-3)  # other params
    r_sigma = 0.01 * cos_i / np.pi
    expected = lumaxlike.invert(
        scene["r"][..., :2],
        scene["to_sun"],
        scene["to_sensor"],
        scene["normal"],
        PARAMS,
        "numba",
        refl_sigma=1.0,
    )
    np.testing.assert_allclose(sigma[..., :2], expected.sigma * r_sigma[..., None], rtol=1e-6)
    with pytest.raises(ValueError, match="params gives 2 per-band parameter sets for 5 bands"):
        invert_file(
            cube, tmp_path / "v.tif", geometry=obs, params=per_band[:2], solver="numba", units="r"
        )


def test_bad_pixels_become_status_codes_not_errors(tmp_path):
    scene = make_scene()
    values = scene["r"].copy()
    values[0, 0, :] = -9999.0  # nodata
    values[0, 1, 1] = np.nan  # NaN
    values[0, 2, 2] = -0.01  # below any w
    values[0, 3, 3] = 10.0  # above r(w = 1)
    scene["angles"][0][1, 0] = 95.0  # sun below the horizon
    cube, obs, _ = write_scene(tmp_path, scene, cube_values=values, nodata=-9999.0)
    summary = invert_file(
        cube, tmp_path / "w.tif", geometry=obs, params=PARAMS, solver="numba", units="radf"
    )
    status = read_cube(summary.outputs["status"])[0]
    w = read_cube(summary.outputs["w"])[0]
    assert np.all(status[0, 0] == Status.NONFINITE_INPUT)
    assert status[0, 1, 1] == Status.NONFINITE_INPUT
    assert status[0, 2, 2] == Status.UNREACHABLE and status[0, 3, 3] == Status.UNREACHABLE
    assert np.all(status[1, 0] == Status.INVALID_GEOMETRY)
    bad = status != Status.CONVERGED
    assert np.all(np.isnan(w[bad])) and np.all(np.isfinite(w[~bad]))
    assert summary.status_counts["NONFINITE_INPUT"] == 6


def test_all_nan_cube_gives_nonfinite_status_everywhere(tmp_path):
    scene = make_scene()
    cube, obs, _ = write_scene(tmp_path, scene, cube_values=np.full(scene["r"].shape, np.nan))
    summary = invert_file(
        cube, tmp_path / "w.envi", geometry=obs, params=PARAMS, solver="numba", units="r"
    )
    assert np.all(read_cube(summary.outputs["status"])[0] == Status.NONFINITE_INPUT)
    assert np.all(np.isnan(read_cube(summary.outputs["w"])[0]))
    assert summary.status_counts["NONFINITE_INPUT"] == scene["r"].size


@pytest.mark.parametrize("name", ["w.tif", "w.img", "w.nc", "w.zarr"])
def test_failure_mid_run_leaves_no_output_and_no_temporary_file(tmp_path, monkeypatch, name):
    scene = make_scene()
    cube, obs, dtm = write_scene(tmp_path, scene)
    before = sorted(p.name for p in tmp_path.iterdir())
    calls = []
    original = ResultWriter.write

    def failing_write(self, rows, block):
        calls.append(rows)
        if len(calls) == 2:
            raise OSError("injected write failure")
        return original(self, rows, block)

    monkeypatch.setattr(ResultWriter, "write", failing_write)
    with pytest.raises(OSError, match="injected"):
        invert_file(
            cube,
            tmp_path / name,
            geometry=obs,
            dtm=dtm,
            params=PARAMS,
            solver="numba",
            units="r",
            run=lumaxlike.RunOptions(chunk_rows=2),
        )
    assert len(calls) == 2
    assert sorted(p.name for p in tmp_path.iterdir()) == before


def test_output_that_would_overwrite_an_input_is_refused(tmp_path):
    scene = make_scene()
    cube, obs, _ = write_scene(tmp_path, scene)
    hashes = digest(cube)
    with pytest.raises(ValueError, match="would replace the input file"):
        invert_file(
            cube,
            cube,
            geometry=obs,
            params=PARAMS,
            solver="numba",
            units="r",
            run=lumaxlike.RunOptions(overwrite=True),
        )
    assert digest(cube) == hashes
    envi = write_raster(tmp_path / "c.img", np.ones((5, 8, 6)), driver="ENVI")
    header = digest(tmp_path / "c.hdr")
    with pytest.raises(ValueError, match="c.hdr would replace the input file"):
        invert_file(
            envi,
            tmp_path / "c.envi",
            geometry=obs,
            params=PARAMS,
            solver="numba",
            units="r",
            run=lumaxlike.RunOptions(overwrite=True),
        )
    assert digest(tmp_path / "c.hdr") == header


def test_bad_arguments_are_named(tmp_path):
    scene = make_scene()
    cube, obs, _ = write_scene(tmp_path, scene)
    common = dict(geometry=obs, params=PARAMS)
    with pytest.raises(ValueError, match="units"):
        invert_file(cube, tmp_path / "w.tif", solver="numba", units="I/F", **common)
    with pytest.raises(ValueError, match="solver"):
        invert_file(cube, tmp_path / "w.tif", solver="scipy", units="r", **common)
    with pytest.raises(ValueError, match="chunk_rows"):
        invert_file(
            cube,
            tmp_path / "w.tif",
            solver="numba",
            units="r",
            run=lumaxlike.RunOptions(chunk_rows=0),
            **common,
        )
    with pytest.raises(ValueError, match="sigma"):
        invert_file(cube, tmp_path / "w.tif", solver="numba", units="r", refl_sigma=-1.0, **common)
    assert result_paths(tmp_path / "w.tif")["status"] == tmp_path / "w_status.tif"
    assert not (tmp_path / "w.tif").exists()


def peak_traced_bytes(tmp_path, rows, chunk_rows, cols=32, bands=16):
    """Peak Python/NumPy memory [bytes] of invert_file on a cube of ``rows`` rows."""
    folder = tmp_path / f"rows{rows}"
    folder.mkdir()
    scene = make_scene(rows=rows, cols=cols, bands=bands)
    cube = write_raster(folder / "cube.tif", np.moveaxis(scene["r"], -1, 0))
    obs = write_raster(folder / "obs.tif", scene["angles"], descriptions=OBS_DESCRIPTIONS)
    tracemalloc.start()
    try:
        invert_file(
            cube,
            folder / "w.tif",
            geometry=obs,
            params=PARAMS,
            solver="numba",
            units="r",
            run=lumaxlike.RunOptions(chunk_rows=chunk_rows),
        )
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def saturate_rasterio_read_record(path, reads=3000):
    """rasterio/GDAL keep a bounded record of recent window reads (~70 B per read, full
    at ~2000 reads, ~150 KB): fill it before measuring, so that it is not mistaken for
    growth with the image."""
    with rasterio.open(path) as dataset:
        for i in range(reads):
            dataset.read(1, window=rasterio.windows.Window(0, i % dataset.height, dataset.width, 1))


def test_peak_memory_grows_with_the_block_not_the_image(tmp_path):
    peak_traced_bytes(tmp_path, 8, 4)  # warm-up: numba loaded, GDAL drivers registered
    saturate_rasterio_read_record(tmp_path / "rows8" / "cube.tif")
    small = peak_traced_bytes(tmp_path, 32, 4)
    large = peak_traced_bytes(tmp_path, 256, 4)  # 8 times the image, same block
    image_bytes = 256 * 32 * 16 * 8
    assert large < 1.5 * small, (small, large)
    assert large < image_bytes / 2, (large, image_bytes)


def test_writers_module_documents_every_output_format():
    for extension in writers.OUTPUT_FORMATS:
        assert f"``{extension}``" in writers.__doc__
