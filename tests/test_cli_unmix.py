"""`lumaxlike unmix`: a tiny mixture cube and its endmember library written as files."""

import numpy as np
import pytest
import rasterio

import lumaxlike
from lumaxlike import Status
from lumaxlike._cli import main
from lumaxlike._unmix.mixing import cross_section_fractions, cross_section_per_mass, mixed_albedo

from .helpers import count_raster_opens
from .test_cli import PARAM_FLAGS, invert_args, run
from .test_io import PARAMS, WAVELENGTHS, make_scene, write_scene

NAMES = ("olivine", "pyroxene", "plagioclase")
DENSITY, GRAIN_SIZE = (3.3, 3.2, 2.6), (60.0, 40.0, 80.0)
LIBRARY_ANGLES = (30.0, 0.0)  # incidence, emission [deg]
FWHM_UM = 0.01


def write_library(path, albedo, first_nm=400.0):
    """The endmembers' r at the library's geometry on a 1 nm grid, constant around each band
    centre (steps half-way between centres, far outside the 10 nm responses), so that the
    resampled spectra are r at the centres to rounding."""
    geometry = lumaxlike.geometry_from_angles(*np.radians(LIBRARY_ANGLES), 0.0)
    refl = lumaxlike.amsa(albedo, *geometry, PARAMS, backend="numba")
    centres = np.asarray(WAVELENGTHS[: albedo.shape[1]])
    grid = np.arange(first_nm, centres[-1] + 20.0)
    band = np.searchsorted((centres[1:] + centres[:-1]) / 2, grid)
    lines = ["wavelength (nm)," + ",".join(NAMES)]
    lines += [
        f"{float(wl)!r}," + ",".join(repr(float(v)) for v in refl[:, k])
        for wl, k in zip(grid, band)
    ]
    path.write_text("\n".join(lines) + "\n")
    return path


def mixture_files(tmp_path):
    scene = make_scene(rows=6, cols=5, bands=5, seed=3)
    rng = np.random.default_rng(4)
    albedo = rng.uniform(0.15, 0.9, (len(NAMES), 5))
    mass = rng.dirichlet(np.ones(len(NAMES)), scene["w"].shape[:2])
    w = mixed_albedo(
        cross_section_fractions(mass, cross_section_per_mass(DENSITY, GRAIN_SIZE, 1.0)), albedo
    )
    scene["r"] = np.asarray(
        lumaxlike.amsa(
            w, scene["to_sun"], scene["to_sensor"], scene["normal"], PARAMS, backend="numba"
        )
    )
    cube, obs, dtm = write_scene(tmp_path, scene)
    return mass, albedo, cube, obs, dtm


def unmix_args(cube, obs, dtm, library, out, *extra):
    return [
        "unmix",
        cube,
        "--geometry",
        obs,
        "--dtm",
        dtm,
        "--units",
        "r",
        "--endmembers",
        library,
        "--library-units",
        "r",
        "--library-incidence",
        LIBRARY_ANGLES[0],
        "--library-emission",
        LIBRARY_ANGLES[1],
        "--density",
        ",".join(map(str, DENSITY)),
        "--grain-size",
        ",".join(map(str, GRAIN_SIZE)),
        "--fwhm",
        FWHM_UM,
        *PARAM_FLAGS,
        "--out",
        out,
        *extra,
    ]


def test_unmix_cli_recovers_the_fractions(tmp_path, capsys):
    mass, albedo, cube, obs, dtm = mixture_files(tmp_path)
    library = write_library(tmp_path / "minerals.csv", albedo)
    out = tmp_path / "abund.tif"
    code, err = run(capsys, *unmix_args(cube, obs, dtm, library, out, "--route", "two_step"))
    assert code == 0, err
    assert "unmixed 30 pixels x 5 bands into 3 endmembers" in err and "CONVERGED 30" in err
    with rasterio.open(out) as dataset:
        fractions = np.moveaxis(dataset.read(), 0, -1)
        assert dataset.descriptions == NAMES
    np.testing.assert_allclose(fractions, mass, atol=1e-6, rtol=0)
    with rasterio.open(tmp_path / "abund_status.tif") as dataset:
        assert dataset.count == 1 and np.all(dataset.read() == Status.CONVERGED)
    with rasterio.open(tmp_path / "abund_sigma.tif") as dataset:
        assert dataset.count == 3
    record = lumaxlike.read_provenance(out)
    assert record.command.startswith("lumaxlike unmix") and record.units == "r"


def test_unmix_cli_library_not_covering_the_cube_exits_2_naming_the_file(tmp_path, capsys):
    mass, albedo, cube, obs, dtm = mixture_files(tmp_path)
    library = write_library(
        tmp_path / "short.csv", albedo, first_nm=500.0
    )  # the cube starts at 450 nm
    out = tmp_path / "abund.tif"
    code, err = run(capsys, *unmix_args(cube, obs, dtm, library, out))
    assert code == 2
    assert (
        len(err.strip().splitlines()) == 1 and "short.csv" in err and "does not cover band 0" in err
    )
    assert not out.exists()


@pytest.mark.parametrize("source", ["library", "optical constants"])
def test_unmix_cli_opens_its_cube_once(tmp_path, capsys, monkeypatch, source):
    # the endmembers (and the library's record) are made from the bands of the cube the
    # run opened, resampled to or evaluated at its band centres (`FromBands`), not from
    # an opening of their own
    mass, albedo, cube, obs, dtm = mixture_files(tmp_path)
    out = tmp_path / "abund.tif"
    if source == "library":
        library = write_library(tmp_path / "minerals.csv", albedo)
        args = unmix_args(cube, obs, dtm, library, out, "--route", "two_step")
        names = NAMES
    else:
        optical = ["--optical-constants", "olivine:40,orthopyroxene:60", "--solver", "numba"]
        args = ["unmix", cube, "--geometry", obs, "--dtm", dtm, "--units", "r", *PARAM_FLAGS,
                *optical, "--out", out]  # fmt: skip
        names = ("olivine", "orthopyroxene")
    opened = count_raster_opens(monkeypatch)
    code, err = run(capsys, *args)
    assert code == 0, err
    assert opened.count(str(cube)) == 1, opened
    assert opened.count(str(obs)) == 1, opened  # (the spy sees the opens: the geometry's)
    with rasterio.open(out) as dataset:
        assert dataset.descriptions == names
        fractions = np.moveaxis(dataset.read(), 0, -1)
    if source == "library":
        np.testing.assert_allclose(fractions, mass, atol=1e-6, rtol=0)
    recorded = lumaxlike.read_provenance(out).unmix_settings["library"]["wavelengths_um"]
    # the cube's band centres [um]; tolerance: nm to um, one rounding
    np.testing.assert_allclose(recorded, np.asarray(WAVELENGTHS) / 1000, rtol=1e-15, atol=0)


def test_unmix_cli_writes_one_netcdf_or_zarr_dataset_with_an_endmember_dimension(tmp_path, capsys):
    import xarray as xr

    mass, albedo, cube, obs, dtm = mixture_files(tmp_path)
    library = write_library(tmp_path / "minerals.csv", albedo)
    for name, engine in (("abund.nc", "netcdf4"), ("abund.zarr", "zarr")):
        out = tmp_path / name
        code, err = run(capsys, *unmix_args(cube, obs, dtm, library, out, "--route", "two_step"))
        assert code == 0, err
        with xr.open_dataset(out, engine=engine) as dataset:
            assert dataset["fractions"].dims == ("endmember", "y", "x")
            assert dataset["sigma"].dims == ("endmember", "y", "x")
            assert tuple(dataset["endmember"].values) == NAMES
            for field in ("status", "iterations", "residual"):
                assert dataset[field].dims == ("y", "x"), field
            np.testing.assert_allclose(
                np.moveaxis(dataset["fractions"].values, 0, -1), mass, atol=1e-6, rtol=0
            )
            assert np.all(dataset["status"].values == Status.CONVERGED)
            assert np.all(np.isfinite(dataset["sigma"].values))
        assert lumaxlike.read_provenance(out).command.startswith("lumaxlike unmix")
        assert not (
            tmp_path / f"{out.stem}_status{out.suffix}"
        ).exists()  # one dataset, no companions


def test_unmix_cli_keeps_the_remainder_and_records_the_unmixing(tmp_path, capsys):
    """--no-sum-to-one's remainder was dropped from the GeoTIFF/netCDF outputs, and the
    record held only the command string; one density for every endmember was refused."""
    import xarray as xr

    mass, albedo, cube, obs, dtm = mixture_files(tmp_path)
    library = write_library(tmp_path / "minerals.csv", albedo)
    for name in ("abund.tif", "abund.nc"):
        out = tmp_path / name
        code, err = run(
            capsys,
            *unmix_args(cube, obs, dtm, library, out, "--no-sum-to-one", "--route", "two_step"),
        )
        assert code == 0, err
        if name.endswith(".tif"):
            with rasterio.open(tmp_path / "abund_remainder.tif") as dataset:
                remainder = dataset.read(1)
        else:
            with xr.open_dataset(out) as dataset:
                remainder = dataset["remainder"].values
        np.testing.assert_allclose(remainder, 0.0, atol=1e-6)  # the mixture has no dark part
        settings = lumaxlike.read_provenance(out).unmix_settings
        assert settings["route"] == "two_step" and settings["sum_to_one"] is False
        assert settings["endmembers"] == list(NAMES) and settings["density"] == list(DENSITY)
        assert settings["grain_size"] == list(GRAIN_SIZE) and settings["library"]["files"] == [
            str(library)
        ]
        assert settings["library"]["incidence_deg"] == [LIBRARY_ANGLES[0]]
    args = unmix_args(cube, obs, dtm, library, tmp_path / "one.tif")
    args[args.index("--density") + 1] = "2.7"
    code, err = run(capsys, *args)
    assert code == 0, err
    assert lumaxlike.read_provenance(tmp_path / "one.tif").unmix_settings["density"] == [2.7] * 3


MAPS = ("", "_sigma", "_status", "_iterations", "_residual", "_remainder")


def maps_of(out):
    """{suffix: array} of every map an unmix GeoTIFF output ``out`` published."""
    found = {}
    for suffix in MAPS:
        path = out.with_name(f"{out.stem}{suffix}.tif")
        if path.exists():
            with rasterio.open(path) as dataset:
                found[suffix] = dataset.read()
    return found


def set_tag(path, key, value):
    """Replace one provenance key of the GeoTIFF ``path`` (a record another way made)."""
    with rasterio.open(path, "r+") as dataset:
        dataset.update_tags(**{f"lumaxlike_{key}": value})


@pytest.fixture(scope="module")
def recorded_run(tmp_path_factory):
    """An unmix output made with no default of the unmixing's options (two-step, no
    sum-to-one, its own tolerance, iterations and sigma), and its inputs."""
    folder = tmp_path_factory.mktemp("unmix_record")
    mass, albedo, cube, obs, dtm = mixture_files(folder)
    library = write_library(folder / "minerals.csv", albedo)
    out = folder / "abund.tif"
    extra = ("--route", "two_step", "--no-sum-to-one", "--library-azimuth", "10")
    extra += ("--tol", "1e-9", "--max-iter", "30", "--refl-sigma", "0.001", "--solver", "numba")
    assert main([str(a) for a in unmix_args(cube, obs, dtm, library, out, *extra)]) == 0
    return {"cube": cube, "obs": obs, "dtm": dtm, "library": library, "albedo": albedo, "out": out}


def test_unmix_params_from_reruns_the_record_bit_for_bit(recorded_run, tmp_path, capsys):
    """The unmix record held route, sum-to-one, library, densities and grain sizes, but
    `unmix --params-from` did not exist: the rerun takes every setting from it."""
    old, again = recorded_run["out"], tmp_path / "again.tif"
    code, err = run(capsys, "unmix", recorded_run["cube"], "--params-from", old, "--out", again)
    assert code == 0, err
    assert "two_step route" in err
    first, second = maps_of(old), maps_of(again)
    assert set(first) == set(MAPS)  # the remainder of --no-sum-to-one included
    for suffix, values in first.items():
        np.testing.assert_array_equal(second[suffix], values, err_msg=suffix)
    before, after = lumaxlike.read_provenance(old), lumaxlike.read_provenance(again)
    assert after.unmix_settings == before.unmix_settings
    assert after.unmix_settings["library"]["azimuth_deg"] == [10.0]
    for name in ("params", "units", "solver", "tol", "max_iter", "refl_sigma", "geometry", "dtm"):
        assert getattr(after, name) == getattr(before, name), name
    assert after.surface == before.surface and after.tol == 1e-9 and after.max_iter == 30


def test_unmix_params_from_takes_options_given_over_the_record(recorded_run, tmp_path, capsys):
    """Options given beside --params-from replace the recorded values, --sum-to-one
    included; the rest stays the record's."""
    out = tmp_path / "over.tif"
    code, err = run(
        capsys,
        *("unmix", recorded_run["cube"], "--params-from", recorded_run["out"]),
        *("--sum-to-one", "--density", "3.0", "--max-iter", "20", "--out", out),
    )
    assert code == 0, err
    settings = lumaxlike.read_provenance(out).unmix_settings
    assert settings["sum_to_one"] is True and settings["route"] == "two_step"
    assert settings["density"] == [3.0] * 3 and settings["grain_size"] == list(GRAIN_SIZE)
    assert lumaxlike.read_provenance(out).max_iter == 20
    assert "_remainder" not in maps_of(out)


def test_unmix_params_from_takes_recorded_values_by_endmember_name(recorded_run, tmp_path, capsys):
    """A library holding the recorded endmembers in another order gets each one's recorded
    density and grain size; one holding an endmember the record does not name is refused."""
    albedo = recorded_run["albedo"]
    order = [2, 0, 1]
    library = write_library(tmp_path / "reordered.csv", albedo[order])
    text = library.read_text().splitlines()
    text[0] = "wavelength (nm)," + ",".join(NAMES[k] for k in order)
    library.write_text("\n".join(text) + "\n")
    out = tmp_path / "reordered.tif"
    base = ("unmix", recorded_run["cube"], "--params-from", recorded_run["out"])
    code, err = run(capsys, *base, "--endmembers", library, "--out", out)
    assert code == 0, err
    settings = lumaxlike.read_provenance(out).unmix_settings
    assert settings["density"] == [DENSITY[k] for k in order]
    assert settings["grain_size"] == [GRAIN_SIZE[k] for k in order]
    np.testing.assert_allclose(maps_of(out)[""], maps_of(recorded_run["out"])[""][order], atol=1e-9)
    text[0] = "wavelength (nm),olivine,pyroxene,basalt"
    library.write_text("\n".join(text) + "\n")
    code, err = run(capsys, *base, "--endmembers", library, "--out", tmp_path / "refused.tif")
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert "records --density for the endmembers olivine, pyroxene, plagioclase" in err
    assert "holds olivine, pyroxene, basalt: give --density" in err


@pytest.mark.parametrize(
    "key, value, message",
    [
        ("unmix_library", "null", "records no library: its endmembers were given to unmix_file"),
        ("unmix_library", '{"files": ["/x.csv"]}', "records its library without 'format'"),
        ("unmix_route", '"three_step"', "lumaxlike_unmix_route has the unexpected value"),
        ("input_param_maps", '[["b", "/maps/b.tif"]]', "was made with the parameter maps b"),
    ],
)
def test_unmix_params_from_refuses_a_record_it_cannot_rerun(
    recorded_run, tmp_path, capsys, key, value, message
):
    """A record unmix cannot reproduce (endmembers given in Python, a library not made by
    the command line, a malformed key, a normalisation's parameter maps) is refused in one
    line saying why, before any work."""
    import shutil

    old = tmp_path / "old.tif"
    shutil.copy(recorded_run["out"], old)
    set_tag(old, key, value)
    out = tmp_path / "new.tif"
    code, err = run(capsys, "unmix", recorded_run["cube"], "--params-from", old, "--out", out)
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"--params-from {old}" in err and message in err, err
    assert not out.exists()
    if key == "input_param_maps":  # invert takes one value per band as unmix does
        code, err = run(capsys, "invert", recorded_run["cube"], "--params-from", old, "--out", out)
        assert code == 2 and "was made with the parameter maps b (/maps/b.tif)" in err, err
        assert "give --b or use normalize --params-from" in err


def test_unmix_params_from_another_command_needs_the_unmixing_options(
    recorded_run, tmp_path, capsys
):
    """An invert output gives its model and inputs, not endmembers."""
    w = tmp_path / "w.tif"
    cube, obs = recorded_run["cube"], recorded_run["obs"]
    assert run(capsys, *invert_args(cube, obs, w))[0] == 0
    code, err = run(capsys, "unmix", cube, "--params-from", w, "--out", tmp_path / "a.tif")
    assert code == 2 and "--endmembers is required (or --params-from an unmix output)" in err


def test_unmix_file_matches_the_endmembers_bands_by_wavelength_or_refuses(tmp_path):
    """Item 8 on files: endmembers given in another band order than the cube's are matched
    by wavelength (the cube's from its header); other band centres are refused, naming
    the cube, before anything is written. The recorded call names the mission-product
    arguments given (thermal_bands; it changes nothing off the Moon)."""
    mass, albedo, cube, obs, dtm = mixture_files(tmp_path)
    centres_um = np.asarray(WAVELENGTHS[:5]) * 1e-3

    def endmembers(wavelengths):
        return lumaxlike.Endmembers(
            names=NAMES,
            albedo=albedo[:, ::-1],
            density=DENSITY,
            grain_size=GRAIN_SIZE,
            wavelengths=wavelengths,
        )

    common = dict(geometry=obs, dtm=dtm, params=PARAMS, solver="numba", units="r")
    out = tmp_path / "abund.tif"
    lumaxlike.unmix_file(
        cube,
        out,
        endmembers=endmembers(centres_um[::-1]),
        route="two_step",
        product=lumaxlike.ProductOptions(thermal_bands="exclude"),
        **common,
    )
    with rasterio.open(out) as dataset:
        np.testing.assert_allclose(np.moveaxis(dataset.read(), 0, -1), mass, atol=1e-6, rtol=0)
    recorded = lumaxlike.read_provenance(out).command
    assert (
        recorded.startswith("lumaxlike.unmix_file(")
        and "product=lumaxlike.ProductOptions(thermal_bands='exclude')" in recorded
    )
    shifted = centres_um[::-1].copy()
    shifted[0] += 0.1
    with pytest.raises(ValueError, match=f"the cube {cube}"):
        lumaxlike.unmix_file(
            cube, tmp_path / "refused.tif", endmembers=endmembers(shifted), **common
        )
    assert not (tmp_path / "refused.tif").exists()
