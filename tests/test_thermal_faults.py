"""`remove_thermal` under the fault pass of issue 55 (section 7, items 1-4, 9, 12): cold
pixels are not called CONVERGED, bands that cannot be corrected are NaN with the pixel
BAND_FAILED, non-positive pixels UNREACHABLE, bad arguments refused by name, float32
band centres keep the window's bands, and the command line refuses what it does not do."""

import importlib.util
import json
from pathlib import Path

import numpy as np
import pytest
from scipy import stats

import lumaxlike
from lumaxlike._cli import build_parser, main
from lumaxlike._operations.thermal import ThermalSettings
from lumaxlike._thermal import continuum as thermal_continuum
from lumaxlike._thermal import options as thermal_options

from .test_thermal import MODEL, WAVELENGTHS, remove, scene

STATUS = lumaxlike.Status
JAX_SLOW = pytest.param("jax", marks=pytest.mark.slow)  # JAX compiles the window fit (~16 s)


@pytest.mark.parametrize("refl_sigma", ["given", None])
def test_cold_pixels_are_never_converged(refl_sigma):
    """250 K, 0.5 % noise, 400 pixels (the issue's case: 10 CONVERGED with refl_sigma,
    26 without, at 307-332 K): the emission is below the noise in every band, so no
    pixel may claim a T."""
    observed, _, geometry, solar, sigma = scene(np.full(400, 250.0), 0.005, seed=11)
    result = remove(observed, geometry, solar, sigma if refl_sigma else None)
    assert np.all(result.status == STATUS.NOT_CONSTRAINED)
    assert np.all(result.temperature >= 250.0)  # upper limits
    np.testing.assert_array_equal(result.emission, 0.0)


@pytest.mark.parametrize("solver", ["numba", JAX_SLOW])
def test_warm_pixels_pass_the_significance_test(solver):
    observed, _, geometry, solar, sigma = scene(np.linspace(360.0, 400.0, 6), 0.005, seed=12)
    result = remove(observed, geometry, solar, sigma, solver=solver)
    assert np.all(result.status == STATUS.CONVERGED)
    assert np.all(np.abs(result.temperature - np.linspace(360.0, 400.0, 6)) < 4 * 3.0)


def test_significance_thresholds_are_the_boundary_likelihood_ratios():
    """Known sigma: the rise is 1/2 chi^2_1 (+ 1/2 at 0); estimated: 1/2 F(1, dof)."""
    alarm = thermal_continuum.FALSE_ALARM
    chi2_point = stats.chi2.isf(2 * alarm, 1)
    f_point = stats.f.isf(2 * alarm, 1, 6)
    significant = thermal_continuum._emission_significant
    rise = np.array([0.999, 1.001]) * chi2_point
    assert list(significant(rise, np.ones(2), 6, False)) == [False, True]
    minimum = np.array([6.0, 6.0])  # variance 1 over 6 dof
    rise = np.array([0.999, 1.001]) * f_point
    assert list(significant(rise, minimum, 6, True)) == [False, True]


@pytest.mark.parametrize("solver", ["numba", JAX_SLOW])
def test_band_that_cannot_be_corrected_is_nan_and_the_pixel_band_failed(solver):
    observed, _, geometry, solar, sigma = scene(np.full(3, 380.0), 0.0, seed=13)
    bad = {0: -0.01, 1: 0.0, 2: 5.0}  # band 3 (1.62 um): r < 0, r = 0, r > r(w -> 1)
    for pixel, value in bad.items():
        observed[pixel, 3] = value
    result = remove(observed, geometry, solar, 0.005 * observed[:, 10:].mean(axis=0)[[0]])
    assert np.all(result.status == STATUS.BAND_FAILED)
    assert {k: v for k, v in result.counts().items() if v} == {"BAND_FAILED": 3}
    for field in (result.w, result.reflectance, result.emission):
        assert np.all(np.isnan(field[:, 3]))
        assert np.all(np.isfinite(np.delete(field, 3, axis=1)))
    np.testing.assert_allclose(result.temperature, 380.0, atol=0.5)


@pytest.mark.parametrize("method", ["continuum", "given"])
def test_non_positive_pixels_unreachable(method):
    observed, _, geometry, solar, sigma = scene(np.full(3, 380.0), 0.0, seed=14)
    observed[0] = 0.0
    observed[1] = -observed[1]
    given = dict(temperature=380.0) if method == "given" else {}
    result = remove(observed, geometry, solar, 1e-4, method=method, **given)
    assert list(result.status) == [STATUS.UNREACHABLE, STATUS.UNREACHABLE, STATUS.CONVERGED]
    assert np.all(np.isnan(result.temperature[:2])) and np.all(np.isnan(result.w[:2]))


@pytest.mark.parametrize("temperature", [np.nan, -380.0, 0.0, np.inf])
def test_given_temperature_must_be_positive(temperature):
    observed, _, geometry, solar, _ = scene(np.full(2, 380.0), 0.0, seed=15)
    with pytest.raises(ValueError, match="temperature"):
        remove(observed, geometry, solar, None, method="given", temperature=temperature)
    with pytest.raises(ValueError, match="temperature"):
        ThermalSettings(method="given", temperature=temperature)


def test_given_temperature_nan_in_a_map_marks_that_pixel():
    observed, r, geometry, solar, _ = scene(np.full(2, 380.0), 0.0, seed=15)
    result = remove(
        observed, geometry, solar, None, method="given", temperature=np.array([380.0, np.nan])
    )
    assert list(result.status) == [STATUS.CONVERGED, STATUS.NONFINITE_INPUT]
    assert np.all(np.isnan(result.w[1]))


def test_temperature_with_a_fitting_method_refused():
    observed, _, geometry, solar, sigma = scene(np.full(2, 380.0), 0.0, seed=15)
    with pytest.raises(ValueError, match="temperature"):
        remove(observed, geometry, solar, 1e-4, temperature=300.0)
    with pytest.raises(ValueError, match="temperature"):
        ThermalSettings(method="continuum", temperature=300.0)


@pytest.mark.parametrize(
    "argument",
    [
        dict(temperature_bounds=(1000.0, 100.0)),
        dict(temperature_bounds=(0.0, 1000.0)),
        dict(temperature_bounds=(100.0, np.nan)),
        dict(solar_distance=0.0),
        dict(solar_distance=np.nan),
        dict(solar_distance=-1.0),
        dict(max_temperature_sigma=-1.0),
        dict(max_temperature_sigma=np.nan),
    ],
)
def test_bad_settings_refused_by_name(argument):
    observed, _, geometry, solar, _ = scene(np.full(2, 380.0), 0.0, seed=16)
    (name,) = argument
    with pytest.raises(ValueError, match=name):
        remove(observed, geometry, solar, 1e-4, **argument)
    if name != "solar_distance":
        with pytest.raises(ValueError, match=name):
            ThermalSettings(**argument)


def test_bounds_that_exclude_the_truth_unreachable():
    """380 K with T bounded to (100, 300) K: no fit within the bounds; not an upper limit."""
    observed, _, geometry, solar, _ = scene(np.full(3, 380.0), 0.005, seed=17)
    sigma = 0.005 * observed.mean(axis=0)
    result = remove(observed, geometry, solar, sigma, temperature_bounds=(100.0, 300.0))
    assert np.all(result.status == STATUS.UNREACHABLE)
    assert np.all(np.isnan(result.temperature)) and np.all(np.isnan(result.reflectance))


def test_upper_limit_beyond_the_upper_bound_unreachable():
    """250 K pixels' upper limits are ~300-330 K: with T bounded to 290.3 K the data bound
    T nowhere within the bounds, and the bound is no upper limit."""
    observed, _, geometry, solar, sigma = scene(np.full(4, 250.0), 0.005, seed=19)
    result = remove(observed, geometry, solar, sigma, temperature_bounds=(100.0, 290.3))
    assert np.all(result.status == STATUS.UNREACHABLE)
    assert np.all(np.isnan(result.temperature)) and np.all(np.isnan(result.w))


def test_float32_band_centres_keep_the_window_edge():
    """Band centres 2.30 um ... in float32 (2.2999999523): the window's first band stays."""
    wavelengths = np.round(WAVELENGTHS, 2)
    assert float(np.float32(2.3)) < 2.3 and 2.3 in wavelengths
    observed, _, geometry, solar, _ = scene(np.full(2, 380.0), 0.0, seed=18)
    params = lumaxlike.HapkeParams(b=0.25, c=0.3, roughness=np.radians(20))
    common = dict(solar_spectrum=solar, refl_sigma=1e-4, solver="numba")
    single = lumaxlike.remove_thermal(
        observed, *geometry, wavelengths.astype(np.float32), params, **common
    )
    double = lumaxlike.remove_thermal(observed, *geometry, wavelengths, params, **common)
    # the float32 centres move Planck by ~1e-7 relative; a dropped band moves T's sigma
    np.testing.assert_allclose(single.temperature_sigma, double.temperature_sigma, rtol=1e-4)
    np.testing.assert_allclose(single.temperature, double.temperature, atol=0.01)
    inside = thermal_options.within(wavelengths.astype(np.float32).astype(float), (2.3, 2.65))
    assert inside.sum() == 9


@pytest.mark.parametrize(
    "extra, message",
    [
        (["--parameters", "NOSUCH"], "--parameters"),
        (["--parameters", "BDI1000"], "--parameters"),
        (["--units", "reff"], "reff"),
        (["--units", "r", "--temperature", "300"], "--temperature"),
    ],
)
def test_cli_refuses_what_thermal_does_not_do(tmp_path, capsys, extra, message):
    args = ["thermal", str(tmp_path / "cube.tif"), "--out", str(tmp_path / "o.tif"), *extra]
    assert main(args) == 2
    assert message in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


def test_cli_help_lists_the_units_it_takes(capsys):
    assert main(["thermal", "--help"]) == 0
    text = capsys.readouterr().out
    assert "--units {r,radf,radiance}" in text and "--parameters" not in text.split("except")[0]
    assert "Every option of `lumaxlike invert` works the same" not in text


@pytest.mark.slow  # numba's thermal kernels, when run alone
def test_detection_benchmark_runs_small_and_writes_where_told(tmp_path):
    path = Path(__file__).parents[1] / "benchmarks" / "bench_thermal_detection.py"
    spec = importlib.util.spec_from_file_location("bench_thermal_detection", path)
    bench = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(bench)
    out = bench.main(["--pixels", "3", "--methods", "continuum", "--out", str(tmp_path / "r.json")])
    report = json.loads(out.read_text())
    rows = report["results"]["continuum"]
    assert set(rows) == {"250", "280", "300", "350", "375", "400"}
    assert rows["250"]["sigma_given"]["converged"] == 0.0
    assert rows["400"]["sigma_given"]["converged"] == 1.0


def test_window_exclude_leaves_a_bad_band_out_of_the_temperature_fit():
    """A window band bad in one pixel (NaN: a detector artefact) made that pixel
    NONFINITE_INPUT; left out with window_exclude, T is the fit of the other 8 bands (the
    same bits whatever the band holds), and only that band of that pixel is NaN."""
    observed, _, geometry, solar, sigma = scene(np.full(3, 380.0), 0.002, seed=21)
    band = int(np.flatnonzero(np.isclose(WAVELENGTHS, 2.46))[0])
    broken = observed.copy()
    broken[1, band] = np.nan
    assert remove(broken, geometry, solar, sigma).status[1] == STATUS.NONFINITE_INPUT
    left_out = dict(window_exclude=[(2.45, 2.47)])
    clean = remove(observed, geometry, solar, sigma, **left_out)
    result = remove(broken, geometry, solar, sigma, **left_out)
    assert np.all(result.status == STATUS.CONVERGED)
    np.testing.assert_array_equal(result.temperature, clean.temperature)
    # 8 bands at 0.2 % noise: T's sigma ~1 K
    assert np.all(np.abs(result.temperature - 380.0) < 5 * result.temperature_sigma)
    assert np.isnan(result.reflectance[1, band]) and np.isnan(result.w[1, band])
    assert np.isfinite(np.delete(result.reflectance[1], band)).all()
    np.testing.assert_array_equal(result.reflectance[[0, 2]], clean.reflectance[[0, 2]])
    # by default the band is in the fit (and moves T)
    every_band = remove(observed, geometry, solar, sigma)
    assert not np.any(every_band.temperature == clean.temperature)
    with pytest.raises(ValueError, match="window_exclude must be"):
        remove(observed, geometry, solar, sigma, window_exclude=[(2.47, 2.45)])
    args = ["thermal", "c.tif", "--out", "o.tif", "--window-exclude", "2.45:2.47,2.6:2.62"]
    settings = ThermalSettings.from_arguments(build_parser().parse_args(args))
    assert settings.window_exclude == ((2.45, 2.47), (2.6, 2.62))
    assert settings.record()["window_exclude"] == [[2.45, 2.47], [2.6, 2.62]]


def test_min_window_bands_refuses_a_window_thinned_by_bad_bands():
    """A file's bad band (bbl = 0) inside the window is left out of its bands, so the
    window fit has 8 bands of 9: fitted by default (min_window_bands 4, as before the
    option), refused naming them with min_window_bands=9; the window's full count keeps
    every bit of the default's result."""
    observed, _, geometry, solar, sigma = scene(np.full(3, 380.0), 0.002, seed=22)
    full = remove(observed, geometry, solar, sigma)
    for count in (4, 9):
        kept = remove(observed, geometry, solar, sigma, min_window_bands=count)
        for name in ("temperature", "temperature_sigma", "status", "reflectance", "w"):
            np.testing.assert_array_equal(getattr(kept, name), getattr(full, name))
    good = ~np.isclose(WAVELENGTHS, 2.46)  # the band a file marked bad, left out
    params = lumaxlike.HapkeParams(**MODEL)
    thinned = dict(solar_spectrum=solar[good], refl_sigma=sigma[good], solver="numba")
    bands = (observed[:, good], *geometry, WAVELENGTHS[good], params)
    assert np.all(lumaxlike.remove_thermal(*bands, **thinned).status == STATUS.CONVERGED)
    message = r"holds 8 bands \(2.3, 2.34, 2.38, 2.42, 2.5, .*\); the fit needs 9 \(min_window"
    with pytest.raises(ValueError, match=message):
        lumaxlike.remove_thermal(*bands, **thinned, min_window_bands=9)
    # window_exclude's bands count as left out too
    with pytest.raises(ValueError, match="holds 8 bands"):
        remove(observed, geometry, solar, sigma, min_window_bands=9, window_exclude=[(2.45, 2.47)])
    with pytest.raises(ValueError, match=r"holds no band; the fit needs 4"):  # all left out
        remove(observed, geometry, solar, sigma, window_exclude=[(2.0, 3.0)])
    for bad in (3, 4.5, True):
        with pytest.raises(ValueError, match="min_window_bands must be an integer of 4 or more"):
            remove(observed, geometry, solar, sigma, min_window_bands=bad)
    args = ["thermal", "c.tif", "--out", "o.tif", "--min-window-bands", "9"]
    settings = ThermalSettings.from_arguments(build_parser().parse_args(args))
    assert settings.min_window_bands == 9 and settings.record()["min_window_bands"] == 9
    assert ThermalSettings(min_window_bands=np.int64(9)) == settings  # an int, recordable
    with pytest.raises(ValueError, match="^--min-window-bands must be an integer") as refused:
        ThermalSettings.from_arguments(build_parser().parse_args([*args[:-1], "3"]))
    assert "--temperature" not in str(refused.value)  # its prose names no other flag
