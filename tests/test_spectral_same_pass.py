"""Spectral products in the same pass as ``invert`` and ``normalize`` (``parameters=``,
``--parameters``): one read of the cube gives w (or the normalised reflectance) and the
product maps, equal to `spectral_parameters` on the map written; a product the cube's
bands cannot give is refused by name before any block runs; resumable and recorded."""

import numpy as np
import pytest
import rasterio
import xarray as xr

import lumaxlike
from lumaxlike._cli import main
from lumaxlike._io import read_cube
from lumaxlike._run.journal import ResumeRefusedError

from .test_io import OBS_DESCRIPTIONS, PARAMS, make_scene, write_raster
from .test_spectral_parameters_file import BANDS_NM, interrupt

PRODUCTS = ["BDI1000", "BAND1_CENTER", "FeO"]
ROWS, COLS = 4, 3
WAVELENGTHS_UM = BANDS_NM / 1000.0


def m3_like_w(seed=1) -> np.ndarray:
    """(ROWS, COLS, bands) w with a 1 um and a 2 um band."""
    x = WAVELENGTHS_UM[None, None, :]
    rng = np.random.default_rng(seed)
    depth1 = rng.uniform(0.05, 0.25, (ROWS, COLS, 1))
    depth2 = rng.uniform(0.02, 0.15, (ROWS, COLS, 1))
    albedo = rng.uniform(0.3, 0.5, (ROWS, COLS, 1))
    return (
        albedo
        * (1 + 0.3 * x)
        * (1 - depth1 * np.exp(-((x - 0.97) ** 2) / 0.02))
        * (1 - depth2 * np.exp(-((x - 2.05) ** 2) / 0.08))
    )


@pytest.fixture(scope="module")
def scene(tmp_path_factory):
    """A float32 r cube of M3's bands (its w known), its OBS raster."""
    folder = tmp_path_factory.mktemp("same_pass")
    geometry = make_scene(rows=ROWS, cols=COLS, bands=1)
    w = m3_like_w()
    r = lumaxlike.amsa(
        w,
        geometry["to_sun"],
        geometry["to_sensor"],
        np.array([0.0, 0.0, 1.0]),
        PARAMS,
        backend="numba",
    )
    values = np.asarray(r, np.float32)
    cube = write_raster(
        folder / "r.tif", np.moveaxis(values, -1, 0), envi_wavelengths=BANDS_NM.tolist()
    )
    obs = write_raster(folder / "obs.tif", geometry["angles"], descriptions=OBS_DESCRIPTIONS)
    return cube, obs, values


def sibling(out, name):
    return out.with_name(f"{out.stem}_{name}{out.suffix}")


def test_the_command_writes_w_and_the_products_of_the_w_it_wrote(scene, tmp_path, capsys):
    cube, obs, _ = scene
    out = tmp_path / "w.tif"
    argv = ["invert", str(cube), "--geometry", str(obs), "--units", "r", "--b", "0.2"]
    argv += ["--c", "0.4", "--roughness-deg", "15", "--solver", "numba"]
    assert main([*argv, "--parameters", ",".join(PRODUCTS), "--out", str(out)]) == 0
    assert "inverted 12 pixels" in capsys.readouterr().err
    w, _ = read_cube(out)
    assert w.dtype == np.float32 and np.isfinite(w).all()
    expected = lumaxlike.spectral_parameters(w, WAVELENGTHS_UM, PRODUCTS, quantity="w")
    for name in PRODUCTS:
        found = read_cube(sibling(out, name))[0]
        assert found.shape == (ROWS, COLS, 1) and found.dtype == np.float32, name
        # the same function on the same float32 w, written then read: equal to the bit
        np.testing.assert_array_equal(found[..., 0], expected[name], err_msg=name)
        assert np.isfinite(found).all(), name
    # the map inverted is close to the w the cube was made from (a sanity check of the run)
    np.testing.assert_allclose(w, m3_like_w(), rtol=1e-3)
    record = lumaxlike.read_provenance(sibling(out, "FeO"))
    settings = record.spectral_settings
    assert record.units == "r" and len(record.params) == BANDS_NM.size
    assert settings["quantity"] == "w" and settings["map"] == "w"
    assert settings["products"] == PRODUCTS
    np.testing.assert_allclose(settings["wavelengths"]["FeO"], [0.75044, 0.95004], rtol=1e-12)
    assert "--parameters BDI1000,BAND1_CENTER,FeO" in record.command


def test_normalize_adds_the_products_of_the_normalised_reflectance(scene, tmp_path):
    cube, obs, _ = scene
    out = tmp_path / "normalised.nc"
    lumaxlike.normalize_file(
        cube,
        out,
        geometry=obs,
        params=PARAMS,
        solver="numba",
        units="r",
        run=lumaxlike.RunOptions(chunk_rows=3),  # two blocks, the second short
        parameters=("BAND1_DEPTH", "OMAT"),
    )
    with xr.open_dataset(out) as ds:
        normalised = np.moveaxis(ds["reflectance"].values, 0, -1)
        expected = lumaxlike.spectral_parameters(
            normalised, WAVELENGTHS_UM, ["BAND1_DEPTH", "OMAT"], quantity="normalized"
        )
        for name in ("BAND1_DEPTH", "OMAT"):
            assert ds[name].dims == ("y", "x")
            np.testing.assert_array_equal(ds[name].values, expected[name], err_msg=name)
    settings = lumaxlike.read_provenance(out).spectral_settings
    assert settings["quantity"] == "normalized" and settings["map"] == "reflectance"
    assert settings["products"] == ["BAND1_DEPTH", "OMAT"]
    assert "normalize_file(" in lumaxlike.read_provenance(out).command


def test_products_the_bands_cannot_give_are_refused_by_name_before_any_block(
    scene, tmp_path, capsys
):
    cube, obs, values = scene
    out = tmp_path / "refused.tif"
    kwargs = dict(geometry=obs, params=PARAMS, solver="numba", units="r")
    with pytest.raises(ValueError, match="unknown \\['BDI9999'\\]"):
        lumaxlike.invert_file(cube, out, parameters=["BDI9999"], **kwargs)
    bad = write_raster(
        tmp_path / "bbl.tif", np.moveaxis(values, -1, 0), envi_wavelengths=BANDS_NM.tolist()
    )
    bbl = np.ones(BANDS_NM.size, int)
    bbl[np.argmin(abs(BANDS_NM - 950))] = 0  # the band FeO reads is marked bad
    with rasterio.open(bad, "r+") as dst:
        dst.update_tags(ns="ENVI", bbl="{" + ", ".join(map(str, bbl)) + "}")
    with pytest.raises(ValueError, match="FeO .* 0.95 um.* bad"):
        lumaxlike.normalize_file(bad, out, parameters=["BDI2000", "FeO"], **kwargs)
    argv = ["invert", str(cube), "--geometry", str(obs), "--units", "r", "--b", "0.2"]
    argv += ["--c", "0.4", "--parameters", "OLINDEX3", "--out", str(out)]
    assert main(argv) == 2  # CRISM's kernels on M3's bands
    assert "OLINDEX3" in capsys.readouterr().err
    assert main(["normalize", *argv[1:]]) == 2
    assert "OLINDEX3" in capsys.readouterr().err
    assert list(tmp_path.glob("refused*")) == []


def test_a_killed_run_resumes_only_with_the_same_products(scene, tmp_path, monkeypatch):
    cube, obs, _ = scene
    out, whole = tmp_path / "resumed.nc", tmp_path / "whole.nc"
    kwargs = dict(geometry=obs, params=PARAMS, solver="numba", units="r")
    blocks, resumed = (
        lumaxlike.RunOptions(chunk_rows=2),
        lumaxlike.RunOptions(chunk_rows=2, resume=True),
    )
    run = lambda **more: lumaxlike.invert_file(cube, out, **kwargs, **more)  # noqa: E731
    interrupt(monkeypatch, lambda: run(parameters=PRODUCTS, run=blocks))
    with pytest.raises(ResumeRefusedError):  # other products: other maps
        run(parameters=["FeO"], run=resumed)
    assert run(parameters=PRODUCTS, run=resumed).resumed
    lumaxlike.invert_file(cube, whole, **kwargs, parameters=PRODUCTS, run=blocks)
    with xr.open_dataset(out) as a, xr.open_dataset(whole) as b:
        for name in ["w", *PRODUCTS]:
            np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)
