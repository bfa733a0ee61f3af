"""Every file command reads a mission product the same way (issue 23): M3 L1B radiance
converted with the archive's solar table, bad bands not solved, thermal bands left out,
the product recorded; radiance or garbage declared as reflectance refused before any
output; a normalised product refused where observed geometries are needed."""

import math
import shutil

import numpy as np
import pytest
import rasterio

import lumaxlike
from lumaxlike import Status
from lumaxlike._io import read_cube

from .mission_products import (
    COLS,
    M3_WAVELENGTHS,
    ROWS,
    write_m3_l1b,
    write_m3_l2,
    write_m3_solar_table,
)
from .test_mission_products import (
    F32_ATOL,
    M3_TABLE_IRRADIANCE,
    PARAMS,
    f32,
    flat,
    m3_obs,
    reflectance,
)

pytestmark = pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")
COMMANDS = ("invert", "normalize", "fit", "unmix")
BBL = (1, 1, 0, 1, 1)  # band 3 bad
KEPT = [0, 1, 3]  # solved: band 3 bad, band 5 (2.98 um) thermal and left out
DISTANCE = 0.9837  # the labels' SOLAR_DISTANCE [au]
ENDMEMBER_W = np.array([[0.30, 0.45, 0.55, 0.60, 0.62], [0.80, 0.85, 0.88, 0.90, 0.91]])


def _mixture():
    """Mass fractions (rows, cols, 2) and the mixture's w (equal densities and grains)."""
    first = np.random.default_rng(9).uniform(0.2, 0.8, (ROWS, COLS))
    fractions = np.stack([first, 1.0 - first], axis=-1)
    return fractions, fractions @ ENDMEMBER_W


def _l1b(folder, w, seed):
    """An M3 L1B product of albedo ``w`` at a random OBS geometry (bbl marks band 3)."""
    folder.mkdir()
    rng = np.random.default_rng(seed)
    deg, geometry = m3_obs(
        rng.uniform(20, 60, (ROWS, COLS)),
        rng.uniform(0, 360, (ROWS, COLS)),
        rng.uniform(0, 20, (ROWS, COLS)),
        rng.uniform(0, 360, (ROWS, COLS)),
    )
    radiance = f32(reflectance(w, geometry) * np.asarray(M3_TABLE_IRRADIANCE) / DISTANCE**2)
    return write_m3_l1b(folder, radiance, deg, bbl=BBL)


def _run(command, tmp_path, w, out):
    """``command``'s file function on M3 radiance (two products for fit)."""
    table = write_m3_solar_table(tmp_path, M3_WAVELENGTHS, M3_TABLE_IRRADIANCE)
    paths = _l1b(tmp_path / "a", w, 5)
    product = {
        "units": "radiance",
        "product": lumaxlike.ProductOptions(solar_spectrum=table, thermal_bands="exclude"),
    }
    if command == "fit":
        other = _l1b(tmp_path / "b", w, 6)
        return lumaxlike.fit_file(
            [paths["rdn"], other["rdn"]],
            out,
            geometry=[paths["obs"], other["obs"]],
            params=PARAMS,
            free=("w",),
            **product,
        )
    function = {
        "invert": lumaxlike.invert_file,
        "normalize": lumaxlike.normalize_file,
        "unmix": lumaxlike.unmix_file,
    }[command]
    extra = {}
    if command == "unmix":  # endmembers on the file's five bands: cut to the solved ones
        extra["endmembers"] = lumaxlike.Endmembers(
            ("dark", "bright"),
            ENDMEMBER_W,
            density=3.0,
            grain_size=50.0,
            wavelengths=np.asarray(M3_WAVELENGTHS) * 1e-3,
        )
    return function(
        paths["rdn"], out, geometry=paths["obs"], params=PARAMS, solver="numba", **product, **extra
    )


@pytest.mark.parametrize("command", COMMANDS)
def test_each_file_command_reads_m3_radiance_the_same_way(tmp_path, command, capsys):
    fractions, w = _mixture()
    out = tmp_path / "out.tif"
    _run(command, tmp_path, w, out)
    product = lumaxlike.read_provenance(out).product
    if command == "fit":
        assert len(product["cubes"]) == 2
        product = product["cubes"][0]
    assert product["kind"] == "M3 L1B radiance (RDN)"
    assert "M3 L2 solar spectrum table" in product["solar_spectrum"]
    solved = [0, 1, 3] if command == "unmix" else [0, 1, 2, 3]  # each band its table row
    np.testing.assert_array_equal(
        product["band_irradiance_w_m2_um"], np.asarray(M3_TABLE_IRRADIANCE)[solved]
    )
    assert product["solar_distance_au"] == DISTANCE
    assert product["bad_bands"] == [3] and product["thermal_bands"] == [5]
    assert product["thermal_choice"] == "exclude"
    assert "left out" in capsys.readouterr().err
    maps, _ = read_cube(out)
    if command == "unmix":  # per endmember: the bad band is left out of the bands solved
        assert product["bad_bands_choice"] == "left out of the bands solved"
        # float32 radiance: fractions to ~1e-5 (the w error of float32 I/F, ~2e-6, over
        # the endmembers' w contrast of ~0.3, through a 3-band least squares)
        np.testing.assert_allclose(maps, fractions, rtol=0, atol=3e-5)
        return
    assert product["bad_bands_choice"] == "not solved (status BAD_BAND)"
    status, _ = read_cube(tmp_path / "out_status.tif")
    assert maps.shape == (ROWS, COLS, 4)  # thermal band 5 left out of the outputs
    assert (status[..., 2] == Status.BAD_BAND).all() and np.isnan(maps[..., 2]).all()
    good = [0, 1, 3]
    if command == "normalize":  # the cube as I/F at i = 30, e = 0, g = 30 deg
        expected = math.pi * reflectance(w, flat(30.0, 0.0, 30.0))
        np.testing.assert_allclose(maps[..., good], expected[..., KEPT], rtol=1e-5)
    else:
        np.testing.assert_allclose(maps[..., good], w[..., KEPT], rtol=0, atol=F32_ATOL)


def _garbage(tmp_path):
    """A GeoTIFF of raw counts (DN) with wavelengths, and a flat geometry for it."""
    counts = np.random.default_rng(2).integers(200, 4000, (ROWS, COLS, 2)).astype(np.float32)
    (tmp_path / "dn").mkdir()
    path = tmp_path / "dn" / "dn.tif"
    with rasterio.open(
        path, "w", driver="GTiff", width=COLS, height=ROWS, count=2, dtype="float32"
    ) as dst:
        dst.write(np.moveaxis(counts, -1, 0))
        for band, nm in ((1, "1000"), (2, "1500")):
            dst.update_tags(band, wavelength=nm, wavelength_units="nm")
    geometry = {
        role: np.full((ROWS, COLS), value)
        for role, value in (("incidence", 30.0), ("emission", 0.0), ("phase", 30.0))
    }
    return path, geometry


def _call(command, cube, out, geometry, units, bands=2):
    """``command``'s file function on ``cube`` (fit: on it and a copy of its folder)."""
    common = {"params": PARAMS, "units": units}
    if command == "fit":
        copy = cube.parent.with_name(cube.parent.name + "_copy")
        shutil.copytree(cube.parent, copy, dirs_exist_ok=True)
        cubes = [cube, copy / cube.name]
        return lumaxlike.fit_file(cubes, out, geometry=[geometry] * 2, free=("w",), **common)
    endmembers = lumaxlike.Endmembers(
        ("a", "b"), np.full((2, bands), [[0.3], [0.8]]), density=3.0, grain_size=50.0
    )
    function = {
        "invert": lumaxlike.invert_file,
        "normalize": lumaxlike.normalize_file,
        "unmix": lumaxlike.unmix_file,
    }[command]
    extra = {"endmembers": endmembers} if command == "unmix" else {}
    return function(cube, out, geometry=geometry, solver="numba", **common, **extra)


@pytest.mark.parametrize("command", COMMANDS)
def test_each_file_command_refuses_radiance_or_counts_given_as_reflectance(tmp_path, command):
    path, geometry = _garbage(tmp_path)
    with pytest.raises(ValueError, match=r"dn\.tif declared as radf .* raw counts \(DN\)"):
        _call(command, path, tmp_path / "out.tif", geometry, "radf")
    deg, _ = m3_obs(*(np.full((ROWS, COLS), v) for v in (30.0, 0.0, 5.0, 0.0)))
    (tmp_path / "l1b").mkdir()
    paths = write_m3_l1b(tmp_path / "l1b", f32(np.full((ROWS, COLS, 5), 50.0)), deg)
    with pytest.raises(ValueError, match=r"_RDN\.IMG holds radiance \(UNIT = "):
        _call(command, paths["rdn"], tmp_path / "out.tif", paths["obs"], "radf", bands=5)
    assert not list(tmp_path.glob("out*"))


def test_unmixing_refuses_an_observed_geometry_with_m3_l2(tmp_path):
    w = np.random.default_rng(3).uniform(0.2, 0.8, (ROWS, COLS, 5))
    paths = write_m3_l2(tmp_path, f32(math.pi * reflectance(w, flat(30.0, 0.0, 30.0))))
    observed = {
        role: np.full((ROWS, COLS), value)
        for role, value in (("incidence", 40.0), ("emission", 10.0), ("phase", 45.0))
    }
    with pytest.raises(ValueError, match="i = 30, e = 0, g = 30 deg.*--correction-undone"):
        _call("unmix", paths["lbl"], tmp_path / "out.tif", observed, "radf", bands=5)
    refl = lumaxlike.open_product(paths["lbl"], "radf")
    endmembers = lumaxlike.Endmembers(
        ("a", "b"),
        ENDMEMBER_W,
        density=3.0,
        grain_size=50.0,
        wavelengths=np.asarray(M3_WAVELENGTHS) * 1e-3,
    )
    grid = {role: refl.isel(band=0, drop=True) * 0 + v for role, v in observed.items()}
    with pytest.raises(ValueError, match="i = 30, e = 0, g = 30 deg"):
        lumaxlike.unmix_dataarray(refl, grid, endmembers, PARAMS, "numba", units="radf")
    assert not list(tmp_path.glob("out*"))


def test_cli_fit_takes_the_product_options_and_refuses_radiance_as_radf(tmp_path, capsys):
    from lumaxlike._cli import main

    deg, _ = m3_obs(*(np.full((ROWS, COLS), v) for v in (30.0, 0.0, 5.0, 0.0)))
    cubes, obs = [], []
    for name in ("a", "b"):
        (tmp_path / name).mkdir()
        paths = write_m3_l1b(tmp_path / name, f32(np.full((ROWS, COLS, 5), 50.0)), deg)
        cubes.append(paths["rdn"])
        obs.append(paths["obs"])
    out = tmp_path / "fit.tif"
    args = ["fit", *map(str, cubes), "--geometry", *map(str, obs), "--free", "w"]
    assert main([*args, "--units", "radf", "--out", str(out)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "_RDN.IMG holds radiance (UNIT = " in err[0]
    code = main([*args, "--units", "radiance", "--solar-distance", "0", "--out", str(out)])
    assert code == 2 and "--solar-distance" in capsys.readouterr().err  # the option exists
    assert not list(tmp_path.glob("fit*"))


def _opened(tmp_path, w, seed, name):
    """An M3 L1B product opened as radiance with the archive's table, and its geometry
    as the xarray front ends take it (angles [deg] on the pixel dims)."""
    import xarray as xr

    table = write_m3_solar_table(tmp_path, M3_WAVELENGTHS, M3_TABLE_IRRADIANCE)
    paths = _l1b(tmp_path / name, w, seed)
    refl = lumaxlike.open_product(
        paths["rdn"], "radiance", solar_spectrum=table, thermal_bands="exclude"
    )
    obs, _ = read_cube(paths["obs"])
    names = ("To-Sun AZM", "To-Sun Zenith", "To-Inst AZM", "To-Inst Zenith", "Phase")
    band = {name: obs[..., k] for k, name in enumerate(names)}
    angles = {
        "to_sun_zenith": band["To-Sun Zenith"],
        "to_sun_azimuth": band["To-Sun AZM"],
        "to_sensor_zenith": band["To-Inst Zenith"],
        "to_sensor_azimuth": band["To-Inst AZM"],
    }
    geometry = {role: xr.DataArray(v, dims=("y", "x")) for role, v in angles.items()}
    return refl, geometry


@pytest.mark.parametrize("command", COMMANDS)
def test_each_xarray_front_end_reads_m3_radiance_the_same_way(tmp_path, command):
    import xarray as xr

    fractions, w = _mixture()
    refl, geometry = _opened(tmp_path, w, 5, "a")
    assert refl.sizes["band"] == 4  # thermal band 5 left out when reading
    if command == "fit":
        other, other_geometry = _opened(tmp_path, w, 6, "b")
        refl = xr.concat([refl, other], dim="observation", combine_attrs="override")
        geometry = {
            role: xr.concat([geometry[role], other_geometry[role]], dim="observation")
            for role in geometry
        }
        result = lumaxlike.fit_dataarray(refl, geometry, PARAMS, ("w",), "numba", units="radf")
    elif command == "unmix":
        endmembers = lumaxlike.Endmembers(
            ("dark", "bright"),
            ENDMEMBER_W[:, :4],
            density=3.0,
            grain_size=50.0,
            wavelengths=np.asarray(M3_WAVELENGTHS[:4]) * 1e-3,
        )
        result = lumaxlike.unmix_dataarray(
            refl, geometry, endmembers, PARAMS, "numba", units="radf"
        )
    else:
        function = {
            "invert": lumaxlike.invert_dataarray,
            "normalize": lumaxlike.normalize_dataarray,
        }
        result = function[command](refl, geometry, PARAMS, "numba", units="radf")
    product = lumaxlike.read_provenance(result).product
    assert product["kind"] == "M3 L1B radiance (RDN)" and product["bad_bands"] == [3]
    assert "M3 L2 solar spectrum table" in product["solar_spectrum"]
    if command == "unmix":  # bad band left out, as unmix_file does
        assert product["bad_bands_choice"] == "left out of the bands solved"
        np.testing.assert_allclose(result["fractions"].values, fractions, rtol=0, atol=3e-5)
        return
    status = result["status"].values
    assert (status[..., 2] == Status.BAD_BAND).all()
    good = [0, 1, 3]
    if command == "normalize":
        values = result["reflectance"].values[..., good]
        expected = math.pi * reflectance(w, flat(30.0, 0.0, 30.0))[..., KEPT]
        np.testing.assert_allclose(values, expected, rtol=1e-5)
    else:
        np.testing.assert_allclose(result["w"].values[..., good], w[..., KEPT], atol=F32_ATOL)


def test_params_from_carries_the_product_options_of_the_recorded_run(tmp_path, capsys):
    from lumaxlike._cli import main

    _, w = _mixture()
    first = tmp_path / "first.tif"
    _run("invert", tmp_path, w, first)  # radiance, the archive's table, thermal band excluded
    cube = str(next((tmp_path / "a").glob("*_RDN.IMG")))
    recorded = lumaxlike.read_provenance(first).product
    assert recorded["arguments"] == {
        "solar_spectrum": str(tmp_path / "M3G20110224_RFL_SOLAR_SPEC.TAB"),
        "thermal_bands": "exclude",
    }
    again = tmp_path / "again.tif"
    assert main(["invert", cube, "--params-from", str(first), "--out", str(again)]) == 0
    product = lumaxlike.read_provenance(again).product
    assert product["arguments"] == recorded["arguments"]
    assert product["solar_spectrum"] == recorded["solar_spectrum"]
    assert product["thermal_choice"] == "exclude"
    np.testing.assert_array_equal(read_cube(again)[0], read_cube(first)[0])  # bit for bit
    kept = tmp_path / "kept.tif"  # an option given replaces the recorded one
    args = ["invert", cube, "--params-from", str(first), "--thermal-bands", "keep"]
    assert main([*args, "--out", str(kept)]) == 0
    assert lumaxlike.read_provenance(kept).product["arguments"] == {
        "solar_spectrum": recorded["arguments"]["solar_spectrum"]
    }
    assert read_cube(kept)[0].shape == (ROWS, COLS, 5)
    capsys.readouterr()
