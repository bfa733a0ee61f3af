"""Outputs carry their provenance and reproduce a run; status legends, x/y units, wavelengths."""

import dataclasses
import json
import math
from datetime import datetime
from pathlib import Path

import numpy as np
import pytest
import rasterio
import xarray as xr

import lumaxlike
from lumaxlike import Provenance, Status, invert_file, read_provenance
from lumaxlike._cli import main
from lumaxlike._inverse.albedo.invert import DEFAULT_MAX_ITER
from lumaxlike._io import read_cube, result_paths, write_result
from lumaxlike._provenance import MODEL, make_provenance

from .test_io import PARAMS, fake_result, make_scene, write_raster, write_scene

BANDS = 3
#: per-band b, so the record has to keep a list
PER_BAND = [
    lumaxlike.HapkeParams(b=b, c=0.4, roughness=math.radians(15.0), hs=0.05, bs0=0.8)
    for b in (0.2, 0.25, 0.2)
]
#: the settings a run records (every field but the command line and the time)
SETTINGS = (
    "version",
    "model",
    "params",
    "units",
    "solver",
    "tol",
    "max_iter",
    "refl_sigma",
    "cube",
    "geometry",
    "dtm",
)


@pytest.fixture
def scene_files(tmp_path):
    cube, obs, dtm = write_scene(tmp_path, make_scene(bands=BANDS))
    return cube, obs, dtm


def settings(record: Provenance) -> dict:
    return {name: getattr(record, name) for name in SETTINGS}


def map_bytes(out):
    return {
        field: read_cube(path)[0].tobytes()
        for field, path in result_paths(out).items()
        if path.exists()
    }


def test_cli_run_is_reproduced_from_its_output_alone(tmp_path, capsys, scene_files):
    cube, obs, dtm = scene_files
    first = tmp_path / "w.tif"
    argv = [
        "invert",
        cube,
        "--geometry",
        obs,
        "--dtm",
        dtm,
        "--units",
        "radf",
        "--out",
        first,
        "--b",
        "0.2,0.25,0.2",
        "--c",
        "0.4",
        "--roughness-deg",
        "15",
        "--hs",
        "0.05",
        "--bs0",
        "0.8",
        "--refl-sigma",
        "0.002",
        "--max-iter",
        "30",
        "--no-progress",
    ]
    assert main(argv) == 0, capsys.readouterr().err
    record = read_provenance(first)
    assert record.params == tuple(PER_BAND)
    assert (record.units, record.solver, record.tol, record.max_iter, record.refl_sigma) == (
        "radf",
        "numba",
        1e-10,
        30,
        0.002,
    )  # default solver and tolerance, resolved
    assert (record.cube, record.geometry, record.dtm) == tuple(
        str(p.resolve()) for p in (cube, obs, dtm)
    )
    assert record.command == "lumaxlike " + " ".join(map(str, argv))
    assert record.version == lumaxlike.__version__ and record.model == MODEL
    assert datetime.fromisoformat(record.created).tzinfo is not None

    again = tmp_path / "again" / "w.tif"
    again.parent.mkdir()
    assert main(["invert", cube, "--params-from", first, "--out", again, "--no-progress"]) == 0, (
        capsys.readouterr().err
    )
    assert map_bytes(again) == map_bytes(first) and set(map_bytes(first)) == {
        "w",
        "status",
        "iterations",
        "residual",
        "sigma",
    }
    assert settings(read_provenance(again)) == settings(record)
    assert "--params-from" in read_provenance(again).command


def test_explicit_options_override_the_record(tmp_path, capsys, scene_files):
    cube, obs, _ = scene_files
    first = tmp_path / "w.nc"
    assert (
        main(
            [
                "invert",
                cube,
                "--geometry",
                obs,
                "--units",
                "r",
                "--out",
                first,
                "--b",
                "0.3",
                "--solver",
                "jax",
                "--tol",
                "1e-8",
            ]
        )
        == 0
    ), capsys.readouterr().err
    second = tmp_path / "v.tif"
    assert (
        main(
            [
                "invert",
                cube,
                "--params-from",
                first,
                "--out",
                second,
                "--c",
                "0.1",
                "--solver",
                "numba",
            ]
        )
        == 0
    ), capsys.readouterr().err
    old, new = read_provenance(first), read_provenance(second)
    assert old.params == (lumaxlike.HapkeParams(b=0.3, c=0.5),) * BANDS
    assert new.params == (lumaxlike.HapkeParams(b=0.3, c=0.1),) * BANDS
    assert (new.solver, new.tol, new.units, new.geometry, new.dtm) == (
        "numba",
        1e-8,
        "r",
        old.geometry,
        None,
    )


def test_params_from_refuses_a_file_without_a_record_and_a_band_mismatch(
    tmp_path, capsys, scene_files
):
    cube, obs, _ = scene_files
    code = main(["invert", cube, "--params-from", obs, "--out", tmp_path / "w.tif"])
    err = capsys.readouterr().err
    assert (
        code == 2 and str(obs) in err and "provenance" in err and len(err.strip().splitlines()) == 1
    )
    assert main(["invert", cube, "--units", "r", "--out", tmp_path / "w.tif"]) == 2
    assert "--geometry is required" in capsys.readouterr().err

    first = tmp_path / "w.tif"
    assert (
        main(
            [
                "invert",
                cube,
                "--geometry",
                obs,
                "--units",
                "r",
                "--out",
                first,
                "--b",
                "0.1,0.2,0.3",
            ]
        )
        == 0
    )
    two_bands = write_raster(tmp_path / "two.tif", np.full((2, 8, 6), 0.05))
    assert main(["invert", two_bands, "--params-from", first, "--out", tmp_path / "x.tif"]) == 2
    assert "3 bands" in capsys.readouterr().err


@pytest.mark.parametrize("name", ["w.tif", "w.img", "w.hdr", "w.nc", "w.zarr"])
def test_every_output_file_records_the_run(tmp_path, scene_files, name):
    cube, obs, dtm = scene_files
    out = tmp_path / name
    invert_file(
        cube,
        out,
        geometry=obs,
        dtm=dtm,
        params=PER_BAND,
        solver="numba",
        units="r",
        refl_sigma=0.001,
        run=lumaxlike.RunOptions(progress=False),
    )
    for path in set(result_paths(out).values()):
        files = [path, path.with_suffix(".hdr")] if name.endswith((".img", ".hdr")) else [path]
        for file in files:
            record = read_provenance(file)
            assert record.params == tuple(PER_BAND) and record.model == MODEL
            assert (record.tol, record.max_iter, record.refl_sigma) == (
                1e-10,
                DEFAULT_MAX_ITER,
                0.001,
            )
            assert (
                record.command.startswith("lumaxlike.invert_file(")
                and "geometry=" in record.command
            )
            assert record.dtm == str(dtm.resolve())
    if name.endswith((".nc", ".zarr")):
        with xr.open_dataset(out, engine="netcdf4" if name.endswith(".nc") else "zarr") as ds:
            assert ds.attrs["Conventions"].startswith("CF-")
            assert (
                "Hapke 2002 AMSA" in ds.attrs["source"]
                and "lumaxlike.invert_file(" in ds.attrs["history"]
            )


def test_float32_cube_records_the_float32_tolerance(tmp_path):
    scene = make_scene(bands=2)
    cube, obs, _ = write_scene(tmp_path, scene, cube_values=scene["r"].astype(np.float32))
    invert_file(cube, tmp_path / "w.tif", geometry=obs, params=PARAMS, solver="numba", units="r")
    assert read_provenance(tmp_path / "w.tif").tol == 1e-5


def test_record_round_trips_legendre_and_escapes_for_envi():
    legendre = [1.0, 0.3, -0.2]
    params = [
        lumaxlike.HapkeParams(b=0.1, c=0.2, legendre=np.array(legendre)),
        lumaxlike.HapkeParams(b=0.1, c=0.2),
    ]
    record = make_provenance(
        params=params,
        units="reff",
        solver="jax",
        tol=None,
        max_iter=7,
        refl_sigma=None,
        dtype=np.float32,
        command="lumaxlike x --a=b {c}",
        geometry={"to_sun_zenith": "sz.tif", "to_sun_azimuth": np.zeros(3)},
    )
    assert record.model["phase_function"] == "Legendre series" and record.tol == 1e-5
    for envi in (False, True):
        attrs = record.attrs(envi=envi)
        assert all(key.startswith("lumaxlike_") for key in attrs)
        if envi:  # GDAL drops ENVI header values with "="
            assert not any("=" in value for value in attrs.values())
        back = Provenance.from_attrs(attrs)
        np.testing.assert_array_equal(back.params[0].legendre, legendre)
        assert back.params[1].legendre is None and back.command == record.command
        assert back.geometry == (
            ("to_sun_zenith", str(Path("sz.tif").resolve())),
            ("to_sun_azimuth", None),
        )
        assert dataclasses.replace(back, params=()) == dataclasses.replace(record, params=())


def test_printed_record_collapses_bands_that_share_their_parameters():
    same = lumaxlike.HapkeParams(b=0.2, c=0.4)
    other = lumaxlike.HapkeParams(b=0.3, c=0.4)
    record = make_provenance(
        params=[same] * 85 + [other, same, same],
        units="r",
        solver="numba",
        tol=None,
        max_iter=None,
        refl_sigma=None,
        dtype=np.float64,
        command="lumaxlike invert",
    )
    text = str(record)
    assert text.count("HapkeParams(") == 3 and len(text.splitlines()) < 40
    assert "bands 1-85: HapkeParams(b=0.2, c=0.4, " in text
    assert "band 86: HapkeParams(b=0.3, c=0.4, " in text
    assert "bands 87-88: HapkeParams(b=0.2, c=0.4, " in text
    assert "units='r'" in text and "solver='numba'" in text  # the other fields as before
    legendre = lumaxlike.HapkeParams(b=0.2, c=0.4, legendre=np.array([1.0, 0.3]))
    record = dataclasses.replace(record, params=(same, legendre, legendre))
    assert "band 1: HapkeParams(" in str(record) and "bands 2-3: HapkeParams(" in str(record)
    assert "legendre=..." in str(record)


def test_summaries_list_the_statuses_that_occurred():
    from lumaxlike._files.unmix import UnmixSummary
    from lumaxlike._run.progress import InversionSummary

    counts = {status.name: 0 for status in Status}
    counts.update(CONVERGED=95, MAX_ITER=5)
    line = InversionSummary({}, 10, 10, 1.0, counts).describe()
    assert line.endswith("status of pixel-bands: CONVERGED 95, MAX_ITER 5")
    line = UnmixSummary({}, 100, 10, ("a", "b"), 1.0, counts).describe()
    assert line.endswith("status of pixels: CONVERGED 95, MAX_ITER 5")
    line = InversionSummary({}, 0, 10, 1.0, dict.fromkeys(counts, 0)).describe()
    assert line.endswith("status of pixel-bands: none")
    # a slow run (sample: a few pixels/s, or fewer) shows its real rate, not "0 pixels/s"
    assert "(0.256 pixels/s)" in InversionSummary({}, 64, 3, 250.0, counts).describe()
    assert "(12,345 pixels/s)" in InversionSummary({}, 12345, 3, 1.0, counts).describe()
    assert "(0.5 pixels/s)" in UnmixSummary({}, 1, 3, ("a",), 2.0, counts).describe()


def test_malformed_record_is_refused_naming_the_key():
    record = make_provenance(
        params=[PARAMS],
        units="r",
        solver="numba",
        tol=None,
        max_iter=None,
        refl_sigma=None,
        dtype=np.float64,
        command="c",
    )
    attrs = record.attrs()
    with pytest.raises(ValueError, match="lumaxlike_tol"):
        Provenance.from_attrs({**attrs, "lumaxlike_tol": '"small"'}, source="out.tif")
    with pytest.raises(ValueError, match="lacks the provenance key lumaxlike_units"):
        Provenance.from_attrs({k: v for k, v in attrs.items() if k != "lumaxlike_units"})
    with pytest.raises(ValueError, match="param_b"):
        Provenance.from_attrs({**attrs, "lumaxlike_param_b": "[0.1, 0.2]"})  # 2 values, 1 band
    changed = dataclasses.replace(record, model={**MODEL, "reflectance": "Hapke 1981 IMSA"})
    with pytest.raises(ValueError, match="IMSA"):
        Provenance.from_attrs(changed.attrs()).check_reproducible()


# ------------------------------------------------------------------ legends, units, wavelengths


def legend_names(text: str) -> set[str]:
    return {item.replace("=", ":").split(":")[1].strip().upper() for item in text.split(",")}


@pytest.mark.parametrize("name", ["w.tif", "w.img", "w.nc", "w.zarr"])
def test_every_written_status_legend_lists_every_status(tmp_path, name):
    cube = write_raster(tmp_path / "cube.tif", np.ones((2, 3, 4), np.float32))
    info = read_cube(cube)[1]
    status = write_result(tmp_path / name, fake_result((3, 4, 2)), like=info)["status"]
    expected = {member.name for member in Status}
    assert set(Status.legend().values()) == expected and set(Status.legend()) == {
        int(m) for m in Status
    }
    if name.endswith((".nc", ".zarr")):
        with xr.open_dataset(status, engine="netcdf4" if name.endswith(".nc") else "zarr") as ds:
            attrs = ds.status.attrs
        assert {Status(int(code)).name for code in attrs["flag_values"]} == expected
        assert set(attrs["flag_meanings"].upper().split()) == expected
    else:
        with rasterio.open(status) as src:
            tags = src.tags(ns="ENVI") if src.driver == "ENVI" else src.tags()
        assert legend_names(tags["status_codes"]) == expected


def test_xarray_result_status_legend_lists_every_status():
    flags = Status.flag_attrs()
    assert [Status(int(code)).name.lower() for code in flags["flag_values"]] == flags[
        "flag_meanings"
    ].split()
    assert len(flags["flag_values"]) == len(Status)


@pytest.mark.parametrize(
    "crs, x_units, x_name",
    [
        ("EPSG:32612", "m", "projection_x_coordinate"),
        ("EPSG:2227", "US_survey_foot", "projection_x_coordinate"),
        ("EPSG:4326", "degrees_east", "longitude"),
    ],
)
def test_dataset_outputs_give_x_y_units(tmp_path, crs, x_units, x_name):
    cube = write_raster(tmp_path / "cube.tif", np.ones((2, 3, 4), np.float32), crs=crs)
    info = read_cube(cube)[1]
    write_result(tmp_path / "w.nc", fake_result((3, 4, 2)), like=info)
    with xr.open_dataset(tmp_path / "w.nc") as ds:
        assert (ds.x.attrs["units"], ds.x.attrs["standard_name"]) == (x_units, x_name)
        assert ds.y.attrs["units"] == ("degrees_north" if x_name == "longitude" else x_units)


@pytest.mark.parametrize("name", ["w.tif", "w.img", "w.nc"])
def test_wavelengths_keep_their_values_and_units_as_read(tmp_path, name):
    wavelengths = (0.4123456789012345, 1.5, 2.25)
    cube = write_raster(
        tmp_path / "cube.tif",
        np.ones((3, 3, 4), np.float32),
        band_tags=[{"wavelength": repr(w), "wavelength_units": "Micrometers"} for w in wavelengths],
    )
    info = read_cube(cube)[1]
    paths = write_result(tmp_path / name, fake_result((3, 4, 3)), like=info)
    if name.endswith(".nc"):
        with xr.open_dataset(paths["w"]) as ds:
            assert (
                tuple(ds.wavelength.values) == wavelengths
                and ds.wavelength.attrs["units"] == "Micrometers"
            )
        return
    back = read_cube(paths["w"])[1]
    assert tuple(back.wavelengths) == wavelengths and back.wavelength_units == "Micrometers"
    with rasterio.open(paths["w"]) as src:
        if src.driver == "GTiff":
            assert [src.tags(i)["wavelength"] for i in src.indexes] == [
                "0.4123456789012345",
                "1.5",
                "2.25",
            ]


def test_read_provenance_names_a_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nothing.tif"):
        read_provenance(tmp_path / "nothing.tif")
    assert (
        json.loads(
            make_provenance(
                params=[PARAMS],
                units="r",
                solver="numba",
                tol=None,
                max_iter=None,
                refl_sigma=None,
                dtype=np.float64,
                command="c",
            ).attrs()["lumaxlike_param_roughness"]
        )
        == PARAMS.roughness
    )


def test_model_choice_goes_through_the_cli_and_is_reproduced(tmp_path, capsys, scene_files):
    """--model, --h-function and --porosity-k reach the solver, are recorded, and
    --params-from reruns the same model; the maps differ from the default model's."""
    cube, obs, dtm = scene_files
    common = [
        "--geometry",
        obs,
        "--dtm",
        dtm,
        "--units",
        "radf",
        "--b",
        "0.2",
        "--c",
        "0.4",
        "--no-progress",
    ]
    first = tmp_path / "imsa.tif"
    assert (
        main(
            [
                "invert",
                cube,
                *common,
                "--model",
                "imsa",
                "--h-function",
                "hapke1981",
                "--porosity-k",
                "1.5",
                "--out",
                first,
            ]
        )
        == 0
    ), capsys.readouterr().err
    record = read_provenance(first)
    assert {(p.multiple_scattering, p.h_function, p.porosity_k) for p in record.params} == {
        ("imsa", "hapke1981", 1.5)
    }
    assert record.model["reflectance"] == "Hapke 1981/1993 IMSA"
    assert record.model["h_function"] == "Hapke 1981 two-stream"
    again = tmp_path / "again.tif"
    assert main(["invert", cube, "--params-from", first, "--out", again, "--no-progress"]) == 0, (
        capsys.readouterr().err
    )
    assert map_bytes(again) == map_bytes(first)
    default = tmp_path / "amsa.tif"
    assert main(["invert", cube, *common, "--out", default]) == 0, capsys.readouterr().err
    assert map_bytes(default)["w"] != map_bytes(first)["w"]
    assert read_provenance(default).model == MODEL
