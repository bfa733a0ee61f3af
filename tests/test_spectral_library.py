"""Spectral libraries from files (CSV, USGS splib07, RELAB) and their resampling to a
cube's bands."""

import numpy as np
import pytest

import lumaxlike

GRID_NM = np.arange(400.0, 2501.0, 1.0)


def _write_csv(path, wavelengths_nm, columns, header_unit="nm"):
    lines = ["# two minerals", f"wavelength ({header_unit})," + ",".join(columns)]
    for row, wl in enumerate(wavelengths_nm):
        cells = [
            "" if np.isnan(v) else repr(float(v))
            for v in (spectrum[row] for spectrum in columns.values())
        ]
        lines.append(f"{float(wl)!r}," + ",".join(cells))
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture
def two_spectra():
    return {
        "olivine": 0.2 + 0.1 * (GRID_NM - 400.0) / 2100.0,  # linear in wavelength
        "pyroxene": np.full(GRID_NM.shape, 0.35),
    }


def test_csv_reads_reflectance_factor_as_r_at_the_measurement_geometry(tmp_path, two_spectra):
    path = _write_csv(tmp_path / "lib.csv", GRID_NM, two_spectra)
    library = lumaxlike.read_spectral_library(path, incidence=np.radians(30.0), emission=0.0)
    assert library.names == ("olivine", "pyroxene")
    np.testing.assert_allclose(library.wavelengths, GRID_NM * 1e-3, rtol=1e-15)
    cos_i = np.cos(np.radians(30.0))
    np.testing.assert_allclose(library.reflectance[1], 0.35 * cos_i / np.pi, rtol=1e-15)
    np.testing.assert_allclose(library.incidence, np.radians(30.0))
    assert library.sources == (str(path), str(path))


def test_resampling_a_linear_spectrum_gives_its_value_at_each_band_centre(tmp_path, two_spectra):
    # A symmetric spectral response averages a linear spectrum to its value at the band
    # centre (band centres on the 1 nm grid, so the response is symmetric on it too).
    library = lumaxlike.read_spectral_library(
        _write_csv(tmp_path / "lib.csv", GRID_NM, two_spectra),
        incidence=0.0,
        emission=0.0,
        units="radf",
    )
    centres_um = np.arange(500.0, 2401.0, 100.0) * 1e-3
    resampled = library.resample(centres_um, fwhm=0.012)
    expected = (0.2 + 0.1 * (centres_um * 1e3 - 400.0) / 2100.0) / np.pi
    np.testing.assert_allclose(resampled.reflectance[0], expected, rtol=1e-12)
    np.testing.assert_allclose(resampled.reflectance[1], 0.35 / np.pi, rtol=1e-12)
    np.testing.assert_array_equal(resampled.wavelengths, centres_um)
    np.testing.assert_allclose(resampled.fwhm, 0.012)


def test_resampling_averages_an_absorption_band_over_the_response(tmp_path):
    # A narrow absorption line seen by a broad band: the band value is the line's depth
    # times its share of the Gaussian response (integrated here independently).
    spectrum = np.where(GRID_NM == 1000.0, 0.1, 0.5)
    library = lumaxlike.read_spectral_library(
        _write_csv(tmp_path / "lib.csv", GRID_NM, {"line": spectrum}),
        incidence=0.0,
        emission=0.0,
        units="r",
    )
    fwhm_nm = 20.0
    value = library.resample([1.0], fwhm=fwhm_nm * 1e-3).reflectance[0, 0]
    from scipy.stats import norm

    sd = fwhm_nm / np.sqrt(8 * np.log(2))
    share = (norm.cdf(0.5 / sd) - norm.cdf(-0.5 / sd)) / (norm.cdf(10 / sd) - norm.cdf(-10 / sd))
    np.testing.assert_allclose(value, 0.5 - 0.4 * share, rtol=1e-12)


def test_a_band_outside_a_spectrum_or_on_its_gap_is_refused_naming_the_file(tmp_path, two_spectra):
    gappy = dict(two_spectra)
    gappy["pyroxene"] = np.where(
        (GRID_NM > 1390) & (GRID_NM < 1410), np.nan, two_spectra["pyroxene"]
    )
    path = _write_csv(tmp_path / "lib.csv", GRID_NM, gappy)
    library = lumaxlike.read_spectral_library(path, incidence=np.radians(30.0), emission=0.0)
    with pytest.raises(ValueError, match=r"'olivine' of .*lib\.csv.*does not cover band 1"):
        library.resample([1.0, 2.6], fwhm=0.01)
    with pytest.raises(ValueError, match=r"'pyroxene' of .*lib\.csv.*no measurement near band 0"):
        library.resample([1.4], fwhm=0.01)
    assert library.resample([1.2], fwhm=0.01).reflectance.shape == (2, 1)


@pytest.mark.parametrize(
    "text, message",
    [
        ("wavelength (nm),a\n400,0.1\n401,nan\n402,0.2\n", r"lib\.csv, line 3: NaN"),
        (
            "wavelength,a\n400,0.1\n401,0.2\n",
            r"lib\.csv: the wavelength header 'wavelength' names no unit",
        ),
        ("wavelength_um,a\n0.4,0.1\n0.41,x\n", r"lib\.csv, line 3: 'x' is not a number"),
        ("wavelength_um,a,b\n0.4,0.1\n0.41,0.1,0.2\n", r"lib\.csv, line 2: 2 cells"),
    ],
)
def test_bad_csv_files_are_refused_naming_the_file(tmp_path, text, message):
    path = tmp_path / "lib.csv"
    path.write_text(text)
    with pytest.raises(ValueError, match=message):
        lumaxlike.read_spectral_library(path, incidence=np.radians(30.0), emission=0.0)


def test_the_measurement_geometry_is_required_where_the_file_lacks_it(tmp_path, two_spectra):
    path = _write_csv(tmp_path / "lib.csv", GRID_NM, two_spectra)
    with pytest.raises(ValueError, match="incidence .* is required for CSV"):
        lumaxlike.read_spectral_library(path, emission=0.0)
    with pytest.raises(ValueError, match="emission must lie in"):
        lumaxlike.read_spectral_library(path, incidence=np.radians(30.0), emission=np.radians(95.0))
    with pytest.raises(
        ValueError,
        match=r"incidence must lie in \[0, pi/2\) rad, got 30.0 \(30.0 looks like degrees",
    ):
        lumaxlike.read_spectral_library(path, incidence=30.0, emission=0.0)  # once read as degrees
    with pytest.raises(
        ValueError, match=r"azimuth must lie in \[-2 pi, 2 pi\] rad.*looks like degrees"
    ):
        lumaxlike.read_spectral_library(path, incidence=0.5, emission=0.5, azimuth=180.0)
    with pytest.raises(ValueError, match="incidence must be a finite angle"):
        lumaxlike.read_spectral_library(
            path, incidence=np.radians([10.0, 20.0, 30.0]), emission=0.0
        )


def test_splib07_spectrum_with_its_wavelength_file_and_deleted_channels(tmp_path):
    wavelengths = np.linspace(0.35, 2.5, 216)
    values = 0.3 + 0.2 * wavelengths
    values[100] = -1.23e34  # a deleted channel
    (tmp_path / "splib07a_Wavelengths_ASD_0.35-2.5_microns_216_ch.txt").write_text(
        "splib07a Record=1: Wavelengths ASD 0.35-2.5 microns 216 ch\n"
        + "\n".join(f"{wl:.6f}" for wl in wavelengths)
        + "\n"
    )
    spectrum = tmp_path / "splib07a_Olivine_GDS70.a_Fo89_165um_ASDFRa_AREF.txt"
    spectrum.write_text(
        "splib07a Record=6989: Olivine GDS70.a Fo89 165um     ASDFRa AREF\n"
        + "\n".join(f"{v:.8g}" for v in values)
        + "\n"
    )
    library = lumaxlike.read_spectral_library(spectrum, incidence=0.0, emission=np.radians(30.0))
    assert library.names == ("Olivine GDS70.a Fo89 165um",)
    r = library.reflectance[0]
    assert np.isnan(r[100]) and np.sum(np.isnan(r)) == 1
    np.testing.assert_allclose(r[:100], (0.3 + 0.2 * library.wavelengths[:100]) / np.pi, rtol=1e-7)
    with pytest.raises(ValueError, match="no measurement near band 0"):
        library.resample([library.wavelengths[100]], fwhm=0.02)


def test_relab_file_with_its_standard_geometry(tmp_path):
    path = tmp_path / "c1pp42.txt"
    rows = [f"{wl:.1f} {0.1 + 1e-4 * (wl - 300):.6f} 0.001" for wl in np.arange(300.0, 2600.1, 5.0)]
    path.write_text(
        f"{len(rows)}\n" + "\n".join(rows) + "\n\n\n\nc1pp42.txt\n\nPP-CMP-042\nsome comment\n"
    )
    library = lumaxlike.read_spectral_library(path)
    assert library.names == ("c1pp42",)
    np.testing.assert_allclose(library.incidence, np.radians(30.0))
    np.testing.assert_allclose(library.emission, 0.0)
    np.testing.assert_allclose(library.wavelengths[[0, -1]], [0.3, 2.6])
    np.testing.assert_allclose(
        library.reflectance[0, 0], 0.1 * np.cos(np.radians(30.0)) / np.pi, rtol=1e-12
    )


def test_an_unrecognised_file_is_refused_naming_it(tmp_path):
    path = tmp_path / "spectrum.dat"
    path.write_text("hello\n1 2\n")
    with pytest.raises(ValueError, match=r"spectrum\.dat: cannot tell its format"):
        lumaxlike.read_spectral_library(path, incidence=0.0, emission=0.0)
    with pytest.raises(ValueError, match=r"missing\.csv: cannot read"):
        lumaxlike.read_spectral_library(tmp_path / "missing.csv", incidence=0.0, emission=0.0)


def test_a_library_sampled_at_the_band_centres_is_taken_as_it_is(tmp_path):
    """Refused once with "covers 0.45-2.45 um, which does not cover band 0 (0.45 um)"."""
    centres_nm = np.arange(450.0, 2451.0, 100.0)
    values = {
        "flat": np.full(centres_nm.shape, 0.3),
        "sloped": np.linspace(0.1, 0.5, centres_nm.size),
    }
    library = lumaxlike.read_spectral_library(
        _write_csv(tmp_path / "lib.csv", centres_nm, values), incidence=0.0, emission=0.0, units="r"
    )
    resampled = library.resample(centres_nm * 1e-3)
    np.testing.assert_array_equal(resampled.reflectance, np.stack(list(values.values())))
    with pytest.raises(
        ValueError,
        match=r"covers 0\.4-2\.5 um \(samples at 0\.45-2\.45 um.*does not cover band 0 "
        r"\(0\.4 um",
    ):
        library.resample(np.array([0.4, 1.0]))
