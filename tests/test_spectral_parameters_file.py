"""`spectral_parameters_file` and ``lumaxlike parameters``: the products of a cube file,
streamed by blocks with no geometry, are those of `spectral_parameters` on the same
values; products the cube cannot give are refused by name before any output; the record
says what the values were and which bands each product read."""

import numpy as np
import pytest
import rasterio
import xarray as xr

import lumaxlike
from lumaxlike._cli import main
from lumaxlike._io import read_cube
from lumaxlike._run import journal as journal_module
from lumaxlike._run.journal import ResumeRefusedError

from .test_io import write_raster

# M3's global-mode band centres [nm] (as benchmarks/bench_spectral.py), with a 420 nm band
BANDS_NM = np.array(
    [420.0, 460.99, 500.92, 540.84, 580.76, 620.69, 660.61, 700.54, 730.48]
    + [750.44 + 19.96 * k for k in range(40)]
    + [1548.92]
    + [1578.86 + 39.92 * k for k in range(36)]
)
PRODUCTS = ["BDI1000", "BAND1_CENTER", "BAR", "FeO", "OMAT"]
ROWS, COLS = 5, 4


def m3_like(seed=0) -> np.ndarray:
    """(rows, cols, bands) float32 spectra with a 1 um and a 2 um band, some NaN."""
    x = BANDS_NM[None, None, :] / 1000.0
    rng = np.random.default_rng(seed)
    depth1 = rng.uniform(0.05, 0.25, (ROWS, COLS, 1))
    depth2 = rng.uniform(0.02, 0.15, (ROWS, COLS, 1))
    albedo = rng.uniform(0.08, 0.3, (ROWS, COLS, 1))
    spectra = (
        albedo
        * (1 + 0.3 * x)
        * (1 - depth1 * np.exp(-((x - 0.97) ** 2) / 0.02))
        * (1 - depth2 * np.exp(-((x - 2.05) ** 2) / 0.08))
    )
    spectra = spectra * (1 + 0.01 * rng.standard_normal(spectra.shape))
    spectra[0, 0, 20] = np.nan  # one pixel's band: its products NaN or computed around it
    return spectra.astype(np.float32)


@pytest.fixture(scope="module")
def cube(tmp_path_factory):
    folder = tmp_path_factory.mktemp("spectral_file")
    values = m3_like()
    path = write_raster(
        folder / "w.tif", np.moveaxis(values, -1, 0), envi_wavelengths=BANDS_NM.tolist()
    )
    return path, values


def product_paths(out, names):
    return {
        n: out if i == 0 else out.with_name(f"{out.stem}_{n}{out.suffix}")
        for i, n in enumerate(names)
    }


def test_file_maps_equal_the_in_memory_products_and_are_recorded(cube, tmp_path):
    path, values = cube
    out = tmp_path / "params.tif"
    summary = lumaxlike.spectral_parameters_file(path, out, products=PRODUCTS, quantity="w")
    assert summary.pixels == ROWS * COLS and summary.bands == BANDS_NM.size
    expected = lumaxlike.spectral_parameters(values, BANDS_NM / 1000.0, PRODUCTS, quantity="w")
    for name, file in product_paths(out, PRODUCTS).items():
        found = read_cube(file)[0]
        assert found.shape == (ROWS, COLS, 1) and found.dtype == np.float32, name
        # the same function on the same float32 values: equal to the bit
        np.testing.assert_array_equal(found[..., 0], expected[name], err_msg=name)
        assert np.isfinite(found).sum() >= ROWS * COLS - 1, name
    record = lumaxlike.read_provenance(out)
    assert record.units == "w" and record.params == () and record.geometry is None
    settings = record.spectral_settings
    assert settings["quantity"] == "w" and settings["products"] == PRODUCTS
    # FeO reads the bands nearest 750 and 950 nm, as the cube gives them [um]
    np.testing.assert_allclose(settings["wavelengths"]["FeO"], [0.75044, 0.95004], rtol=1e-12)
    assert settings["constants"]["lucey"]["fe_slope"] == 17.427


def test_blocks_of_two_rows_give_the_whole_cube_maps(cube, tmp_path):
    path, _ = cube
    whole, blocks = tmp_path / "whole.nc", tmp_path / "blocks.nc"
    lumaxlike.spectral_parameters_file(path, whole, products=PRODUCTS, quantity="w")
    lumaxlike.spectral_parameters_file(
        path, blocks, products=PRODUCTS, quantity="w", run=lumaxlike.RunOptions(chunk_rows=2)
    )
    with xr.open_dataset(whole) as a, xr.open_dataset(blocks) as b:
        for name in PRODUCTS:
            assert a[name].dims == ("y", "x")
            np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)
        assert a.attrs["lumaxlike_spectral_quantity"] == '"w"'


def test_products_the_cube_cannot_give_are_refused_by_name_before_any_output(cube, tmp_path):
    path, values = cube
    out = tmp_path / "refused.tif"
    with pytest.raises(ValueError, match="unknown \\['BDI9999'\\]"):
        lumaxlike.spectral_parameters_file(path, out, products=["BDI9999"], quantity="w")
    with pytest.raises(ValueError, match="OLINDEX3"):  # CRISM's kernels on M3's bands
        lumaxlike.spectral_parameters_file(path, out, products=["OLINDEX3"], quantity="w")
    bad = tmp_path / "bbl.tif"
    write_raster(bad, np.moveaxis(values, -1, 0), envi_wavelengths=BANDS_NM.tolist())
    bbl = np.ones(BANDS_NM.size, int)
    bbl[np.argmin(abs(BANDS_NM - 950))] = 0  # the band FeO reads is marked bad
    with rasterio.open(bad, "r+") as dst:
        dst.update_tags(ns="ENVI", bbl="{" + ", ".join(map(str, bbl)) + "}")
    with pytest.raises(ValueError, match="FeO .* 0.95 um.* bad"):
        lumaxlike.spectral_parameters_file(bad, out, products=["BDI2000", "FeO"], quantity="w")
    with pytest.raises(ValueError, match="quantity"):
        lumaxlike.spectral_parameters_file(path, out, products=["FeO"], quantity="albedo")
    assert list(tmp_path.glob("refused*")) == []


def test_the_command_writes_the_same_maps(cube, tmp_path, capsys):
    path, _ = cube
    out, direct = tmp_path / "cli.tif", tmp_path / "direct.tif"
    argv = ["parameters", str(path), "--quantity", "w", "--products", "BDI1000,FeO"]
    assert main([*argv, "--out", str(out)]) == 0
    assert "computed 20 pixels" in capsys.readouterr().err
    lumaxlike.spectral_parameters_file(path, direct, products=["BDI1000", "FeO"], quantity="w")
    for name in ("BDI1000", "FeO"):
        a = read_cube(product_paths(out, ["BDI1000", "FeO"])[name])[0]
        b = read_cube(product_paths(direct, ["BDI1000", "FeO"])[name])[0]
        np.testing.assert_array_equal(a, b, err_msg=name)
    assert "lumaxlike parameters" in lumaxlike.read_provenance(out).command
    assert main([*argv[:-1], "OLINDEX3", "--out", str(tmp_path / "x.tif")]) == 2
    assert "OLINDEX3" in capsys.readouterr().err


def test_a_killed_run_resumes_to_the_maps_of_an_uninterrupted_one(cube, tmp_path, monkeypatch):
    path, _ = cube
    out, whole = tmp_path / "resumed.nc", tmp_path / "whole.nc"
    run = lambda resume=False: lumaxlike.spectral_parameters_file(  # noqa: E731
        path,
        out,
        products=PRODUCTS,
        quantity="w",
        run=lumaxlike.RunOptions(chunk_rows=2, resume=resume),
    )
    interrupt(monkeypatch, run)
    with pytest.raises(ResumeRefusedError):  # other products: other maps
        lumaxlike.spectral_parameters_file(
            path,
            out,
            products=["FeO"],
            quantity="w",
            run=lumaxlike.RunOptions(chunk_rows=2, resume=True),
        )
    assert run(resume=True).resumed
    lumaxlike.spectral_parameters_file(path, whole, products=PRODUCTS, quantity="w")
    with xr.open_dataset(out) as a, xr.open_dataset(whole) as b:
        for name in PRODUCTS:
            np.testing.assert_array_equal(a[name].values, b[name].values, err_msg=name)


class Killed(Exception):
    """Stands for SIGKILL (as tests/test_resume_inputs.py)."""


def interrupt(monkeypatch, run):
    """Run ``run()`` until its journal holds one block, then stop it, the journal left."""
    record = journal_module.Journal.record

    def record_then_die(self, rows, block):
        record(self, rows, block)
        raise Killed

    with monkeypatch.context() as patch:
        patch.setattr(journal_module.Journal, "record", record_then_die)
        patch.setattr(journal_module.Journal, "remove", lambda self: None)
        with pytest.raises(Killed):
            run()
