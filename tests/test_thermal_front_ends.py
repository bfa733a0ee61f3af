"""remove_thermal_file and `lumaxlike thermal`: the file run equals the in-memory
`remove_thermal` on the same cube, blocks equal the whole, the CLI records its run."""

import re
import warnings

import numpy as np
import pytest
import rasterio

import lumaxlike
from lumaxlike._cli import main
from lumaxlike._io.read.radiance import band_irradiance, load_solar_spectrum
from lumaxlike._model import thermal
from lumaxlike._model._backends import retarget_to_numpy
from lumaxlike._thermal import emissivity
from lumaxlike.testing import write_geotiff_inputs

WAVELENGTHS = np.linspace(1.5, 2.98, 21)[:20]  # [um], whole nm: 5 bands in the window
PARAMS = lumaxlike.HapkeParams(b=0.25, c=0.3)


@pytest.fixture(scope="module")
def warm_cube(tmp_path_factory):
    """A 6 x 6 x 20 cube of r [1/sr] of a 380 K surface and its OBS raster."""
    folder = tmp_path_factory.mktemp("thermal")
    with warnings.catch_warnings():  # affine's `*` inside rasterio's from_origin
        warnings.simplefilter("ignore", PendingDeprecationWarning)
        paths = write_geotiff_inputs(folder, 6, 1, dtype="float64")
    with rasterio.open(paths["obs"]) as obs:
        angles = np.radians(obs.read().astype(np.float64))
        profile = obs.profile
    to_sun = lumaxlike.direction_from_zenith_azimuth(angles[0], angles[1])
    to_sensor = lumaxlike.direction_from_zenith_azimuth(angles[2], angles[3])
    normal = np.array([0.0, 0.0, 1.0])
    # the package's own forward model: these tests check the front ends, not the physics
    w = np.broadcast_to(0.3 + 0.05 * (WAVELENGTHS - 1.5), (6, 6, WAVELENGTHS.size))
    r = np.asarray(lumaxlike.amsa(w, to_sun, to_sensor, normal, PARAMS, "numba"))
    cos_e = np.broadcast_to(to_sensor[..., 2:3], w.shape)
    eps = emissivity.directional_emissivity(w, cos_e, PARAMS, "numba")
    solar = band_irradiance(load_solar_spectrum(None), WAVELENGTHS)
    factor, _ = retarget_to_numpy(thermal).thermal_factor_and_slope(WAVELENGTHS, 380.0, solar, 1.0)
    refl = r + eps * factor
    refl *= 1 + 0.003 * np.random.default_rng(1).standard_normal(refl.shape)
    profile.update(count=WAVELENGTHS.size)
    with rasterio.open(paths["cube"], "w", **profile) as dst:
        dst.write(np.moveaxis(refl, -1, 0))
        for band, wavelength in enumerate(WAVELENGTHS, start=1):
            dst.set_band_description(band, f"{wavelength * 1000:.3f} nm")
    return paths, refl, (to_sun, to_sensor, normal), solar


def _read(path):
    with rasterio.open(path) as src:
        return np.moveaxis(src.read(), 0, -1)


@pytest.mark.slow  # numba compiles the thermal kernels (~20 s)
def test_file_run_equals_in_memory_and_blocks_equal_whole(warm_cube, tmp_path):
    paths, refl, geometry, solar = warm_cube
    expected = lumaxlike.remove_thermal(
        refl, *geometry, WAVELENGTHS, PARAMS, solar_spectrum=solar, solver="numba"
    )
    outputs = {}
    for rows in (2, 6):
        out = tmp_path / f"out{rows}.tif"
        _run_file(paths, out, run=lumaxlike.RunOptions(chunk_rows=rows, progress=False))
        outputs[rows] = {
            "reflectance": _read(out),
            "w": _read(tmp_path / f"out{rows}_w.tif"),
            "temperature": _read(tmp_path / f"out{rows}_temperature.tif")[..., 0],
            "status": _read(tmp_path / f"out{rows}_status.tif")[..., 0],
        }
    # blocks vs whole: the emissivity table spans each block's emission angles (its
    # Chebyshev interpolation agrees to ~1e-10)
    for name in outputs[2]:
        np.testing.assert_allclose(outputs[2][name], outputs[6][name], rtol=1e-8)
    got = outputs[6]
    np.testing.assert_array_equal(got["status"], expected.status)
    np.testing.assert_allclose(got["temperature"], expected.temperature, rtol=1e-9)
    np.testing.assert_allclose(got["reflectance"], expected.reflectance, rtol=1e-9)
    np.testing.assert_allclose(got["w"], expected.w, rtol=1e-9)
    assert np.all(np.abs(got["temperature"] - 380.0) < 15.0)


@pytest.mark.slow
def test_cli_runs_and_records_the_run(warm_cube, tmp_path):
    paths, *_ = warm_cube
    out = tmp_path / "cli.tif"
    code = main(
        [
            "thermal",
            str(paths["cube"]),
            "--geometry",
            str(paths["obs"]),
            "--units",
            "r",
            "--b",
            "0.25",
            "--c",
            "0.3",
            "--solver",
            "numba",
            "--solar-distance",
            "1",
            "--window",
            "2.3,2.7",
            "--out",
            str(out),
        ]
    )
    assert code == 0
    record = lumaxlike.read_provenance(out)
    assert record.command.startswith("lumaxlike thermal") and "--window 2.3,2.7" in record.command
    assert np.isfinite(_read(tmp_path / "cli_temperature.tif")).all()


@pytest.mark.slow  # numba compiles the prior fit's kernel (~9 s)
def test_cli_method_prior_equals_in_memory(warm_cube, tmp_path):
    paths, refl, geometry, solar = warm_cube
    out = tmp_path / "prior.tif"
    code = main([
        "thermal", str(paths["cube"]), "--geometry", str(paths["obs"]), "--units", "r",
        "--b", "0.25", "--c", "0.3", "--solver", "numba", "--solar-distance", "1",
        "--method", "prior", "--refl-sigma", "0.0002", "--prior-uncertainty", "0.03",
        "--prior-reference", "1.55,2.0", "--out", str(out),
    ])  # fmt: skip
    assert code == 0
    record = lumaxlike.read_provenance(out)
    assert "--method prior" in record.command and "--prior-uncertainty 0.03" in record.command
    expected = lumaxlike.remove_thermal(
        refl,
        *geometry,
        WAVELENGTHS,
        PARAMS,
        solar_spectrum=solar,
        solver="numba",
        method="prior",
        refl_sigma=0.0002,
        prior_sigma=0.03,
    )
    got = _read(tmp_path / "prior_temperature.tif")[..., 0]
    np.testing.assert_allclose(got, expected.temperature, rtol=1e-9)
    np.testing.assert_allclose(_read(out), expected.reflectance, rtol=1e-9)
    assert np.all(np.abs(got - 380.0) < 15.0)


def _run_file(paths, out, run=None, **options):
    """`remove_thermal_file` of the warm cube in r, at 1 au, with numba (`run`: its
    `RunOptions`, default: no progress bar)."""
    return lumaxlike.remove_thermal_file(
        paths["cube"],
        out,
        geometry=paths["obs"],
        params=PARAMS,
        solver="numba",
        units="r",
        product=lumaxlike.ProductOptions(solar_distance=1.0),
        run=run or lumaxlike.RunOptions(progress=False),
        **options,
    )


def test_prior_without_sigma_refused(warm_cube, tmp_path):
    paths, *_ = warm_cube
    with pytest.raises(ValueError, match="sigma"):
        _run_file(paths, tmp_path / "a.tif", method="prior")


def test_reff_and_missing_distance_refused(warm_cube, tmp_path):
    paths, *_ = warm_cube
    common = dict(
        geometry=paths["obs"],
        params=PARAMS,
        solver="numba",
        run=lumaxlike.RunOptions(progress=False),
    )
    with pytest.raises(ValueError, match="reff"):
        lumaxlike.remove_thermal_file(paths["cube"], tmp_path / "a.tif", units="reff", **common)
    with pytest.raises(ValueError, match="solar_distance"):
        lumaxlike.remove_thermal_file(paths["cube"], tmp_path / "b.tif", units="r", **common)


@pytest.mark.slow  # numba compiles the thermal kernels (~20 s) when the file test has not
def test_dataarray_equals_in_memory_and_dask_chunks_equal_whole(warm_cube):
    import xarray as xr

    _, refl, (to_sun, to_sensor, normal), solar = warm_cube
    expected = lumaxlike.remove_thermal(
        refl,
        to_sun,
        to_sensor,
        normal,
        WAVELENGTHS,
        PARAMS,
        solar_spectrum=solar,
        solver="numba",
    )
    dims = ("y", "x")
    cube = xr.DataArray(
        refl * np.pi,  # I/F
        dims=(*dims, "wavelength"),
        coords={"wavelength": ("wavelength", WAVELENGTHS * 1000, {"units": "nm"})},
    )
    geometry = {
        "to_sun": xr.DataArray(to_sun, dims=(*dims, "vector")),
        "to_sensor": xr.DataArray(to_sensor, dims=(*dims, "vector")),
    }
    whole = cube.hapke.remove_thermal(
        geometry, PARAMS, "numba", units="radf", solar_spectrum=solar
    ).compute()
    np.testing.assert_allclose(whole["temperature"], expected.temperature, rtol=1e-9)
    np.testing.assert_allclose(whole["reflectance"], expected.reflectance * np.pi, rtol=1e-9)
    np.testing.assert_array_equal(whole["status"], expected.status)
    assert whole["status"].dims == dims and whole["w"].dims == (*dims, "wavelength")
    chunked = lumaxlike.remove_thermal_dataarray(
        cube.chunk({"y": 2}), geometry, PARAMS, "numba", units="radf", solar_spectrum=solar
    ).compute()
    # chunks vs whole: the emissivity table spans each chunk's emission angles (~1e-10)
    for name in ("temperature", "reflectance", "w"):
        np.testing.assert_allclose(chunked[name], whole[name], rtol=1e-8)
    # the prior method's settings reach the chunks (refl_sigma in the cube's I/F)
    prior = dict(method="prior", prior_sigma=0.03, prior_reference=(1.55, 2.0))
    expected = lumaxlike.remove_thermal(
        refl,
        to_sun,
        to_sensor,
        normal,
        WAVELENGTHS,
        PARAMS,
        solar_spectrum=solar,
        solver="numba",
        refl_sigma=0.0002,
        **prior,
    )
    got = lumaxlike.remove_thermal_dataarray(
        cube,
        geometry,
        PARAMS,
        "numba",
        units="radf",
        solar_spectrum=solar,
        refl_sigma=0.0002 * np.pi,
        **prior,
    ).compute()
    np.testing.assert_allclose(got["temperature"], expected.temperature, rtol=1e-9)
    np.testing.assert_array_equal(got["status"], expected.status)


@pytest.mark.slow  # numba compiles the thermal kernels (~20 s) when run alone
def test_cli_maps_say_which_band_failed(warm_cube, tmp_path):
    """A band no w fits (r < 0 at 1.57 um) in one pixel: NaN in OUT and OUT_w there, the
    pixel BAND_FAILED in OUT_status, its other bands and the other pixels as before."""
    paths, refl, *_ = warm_cube
    broken = refl.copy()
    broken[2, 3, 1] = -0.01
    cube = tmp_path / "broken.tif"
    with rasterio.open(paths["cube"]) as src:
        profile = src.profile
        descriptions = src.descriptions
    with rasterio.open(cube, "w", **profile) as dst:
        dst.write(np.moveaxis(broken, -1, 0))
        for band, text in enumerate(descriptions, start=1):
            dst.set_band_description(band, text)
    out = tmp_path / "band.tif"
    code = main([
        "thermal", str(cube), "--geometry", str(paths["obs"]), "--units", "r",
        "--b", "0.25", "--c", "0.3", "--solver", "numba", "--solar-distance", "1",
        "--window", "2.3,2.7", "--refl-sigma", "0.0002", "--out", str(out),
    ])  # fmt: skip
    assert code == 0
    status = _read(tmp_path / "band_status.tif")[..., 0]
    assert status[2, 3] == lumaxlike.Status.BAND_FAILED
    assert np.all(np.delete(status.ravel(), 2 * 6 + 3) == lumaxlike.Status.CONVERGED)
    for path in (out, tmp_path / "band_w.tif"):
        values = _read(path)
        assert np.isnan(values[2, 3, 1])
        assert np.isfinite(np.delete(values.reshape(36, -1), 2 * 6 + 3, axis=0)).all()
        assert np.isfinite(np.delete(values[2, 3], 1)).all()


def test_a_run_of_band_failed_pixels_converged():
    """BAND_FAILED is a pixel whose T converged (some band NaN): a run of such pixels
    alone exits 0; the command line said "no problem converged" and exited 1."""
    from lumaxlike._files.summaries import nothing_converged
    from lumaxlike._operations.thermal import THERMAL

    assert nothing_converged({"BAND_FAILED": 36, "UNREACHABLE": 2}, THERMAL.solved) is None
    assert "UNREACHABLE 2" in nothing_converged({"UNREACHABLE": 2}, THERMAL.solved)


def test_every_front_end_hands_min_window_bands_on(warm_cube, tmp_path, capsys):
    """An option declared in `ThermalSettings` alone reaches the file function, the
    command line, the xarray function and the accessor: 6 bands asked of a window of 5
    (the cube's 2.3-2.65 um) is refused by each, naming it."""
    import xarray as xr

    paths, refl, (to_sun, to_sensor, _), solar = warm_cube
    message = r"holds 5 bands .* the fit needs 6 \(min_window_bands"
    with pytest.raises(ValueError, match=message):
        _run_file(paths, tmp_path / "a.tif", min_window_bands=6)
    flags = ["--geometry", str(paths["obs"]), "--units", "r", "--b", "0.25", "--c", "0.3"]
    flags += ["--solar-distance", "1", "--min-window-bands", "6", "--out", str(tmp_path / "o.tif")]
    assert main(["thermal", str(paths["cube"]), *flags]) == 2
    assert re.search(message, capsys.readouterr().err)
    assert not list(tmp_path.iterdir())  # refused before a file is written
    cube = xr.DataArray(
        refl * np.pi,
        dims=("y", "x", "wavelength"),
        coords={"wavelength": ("wavelength", WAVELENGTHS * 1000, {"units": "nm"})},
    )
    geometry = {
        "to_sun": xr.DataArray(to_sun, dims=("y", "x", "vector")),
        "to_sensor": xr.DataArray(to_sensor, dims=("y", "x", "vector")),
    }
    common = dict(units="radf", solar_spectrum=solar, min_window_bands=6)
    with pytest.raises(ValueError, match=message):
        lumaxlike.remove_thermal_dataarray(cube, geometry, PARAMS, "numba", **common).compute()
    with pytest.raises(ValueError, match=message):
        cube.hapke.remove_thermal(geometry, PARAMS, "numba", **common).compute()
