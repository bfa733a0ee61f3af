"""Spectral parameters (`continuum_removed`, `band_parameters`, `spectral_parameters`):
each product against its published definition written out here in plain NumPy on small
spectra, closed-form cases (a flat spectrum, a Gaussian band on a linear continuum, a
concave spectrum's hull), Lucey's relations at worked points, refusals by name, bad and
NaN bands never anchoring a continuum, and blocks equal to the whole."""

import math

import numpy as np
import pytest

import lumaxlike

RNG = np.random.default_rng(45)


def smooth_spectra(wavelengths, pixels=3):
    """Positive, smooth, different spectra (a slope and two absorptions per pixel)."""
    x = np.asarray(wavelengths)
    out = []
    for _ in range(pixels):
        a, b, d1, d2 = RNG.uniform([0.08, 0.01, 0.05, 0.02], [0.3, 0.08, 0.3, 0.2])
        out.append(
            (a + b * x)
            * (1 - d1 * np.exp(-((x - 1.0) ** 2) / 0.02))
            * (1 - d2 * np.exp(-((x - 2.1) ** 2) / 0.06))
        )
    return np.array(out)


# --- continuum removal ----------------------------------------------------------------


def test_hull_by_hand_and_of_a_concave_spectrum():
    wavelengths = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    spectrum = np.array([1.0, 0.5, 1.2, 0.8, 1.0])
    # hull vertices (1, 1), (3, 1.2), (5, 1.0): the continuum is 1.1 at 2 and at 4
    expected = [1.0, 0.5 / 1.1, 1.0, 0.8 / 1.1, 1.0]
    removed = lumaxlike.continuum_removed(spectrum, wavelengths)
    np.testing.assert_allclose(removed, expected, rtol=1e-15)
    x = np.linspace(0.5, 2.5, 60)
    concave = np.stack([1.0 - 0.2 * (x - 1.3) ** 2, np.sqrt(x)])  # convex upward
    np.testing.assert_allclose(lumaxlike.continuum_removed(concave, x), 1.0, rtol=1e-14)
    assert lumaxlike.continuum_removed(concave.astype(np.float32), x).dtype == np.float32


@pytest.mark.parametrize("how", ["bad_bands", "nan"])
def test_a_bad_or_nan_band_never_anchors_a_continuum(how):
    wavelengths = np.array([1.0, 1.1, 1.2, 1.3, 1.4])
    spectrum = np.array([1.0, 0.9, 5.0, 0.9, 1.0])  # a spike on the bad band
    if how == "nan":
        spectrum[2], bad = np.nan, None
    else:
        bad = [2]
    hull = lumaxlike.continuum_removed(spectrum, wavelengths, bad_bands=bad)
    np.testing.assert_allclose(hull[[0, 1, 3, 4]], [1.0, 0.9, 0.9, 1.0], rtol=1e-15)
    assert np.isnan(hull[2])
    line = lumaxlike.continuum_removed(
        spectrum, wavelengths, method="linear", shoulders=((1.0, 1.25), 1.4), bad_bands=bad
    )
    np.testing.assert_allclose(line[[0, 1, 3, 4]], [1.0, 0.9, 0.9, 1.0], rtol=1e-15)
    mask = np.isin(np.arange(5), [2])
    with pytest.raises(ValueError, match="1.2 um.*bad|bad.*1.2"):
        lumaxlike.continuum_removed(
            spectrum, wavelengths, method="linear", shoulders=(1.2, 1.4), bad_bands=mask
        )


def test_linear_continuum_is_not_extrapolated_beyond_its_shoulders():
    wavelengths = np.linspace(0.6, 1.8, 13)
    spectrum = 0.2 + 0.05 * wavelengths
    removed = lumaxlike.continuum_removed(
        spectrum, wavelengths, method="linear", shoulders=(0.8, 1.5)
    )
    inside = (wavelengths > 0.79) & (wavelengths < 1.51)
    np.testing.assert_allclose(removed[inside], 1.0, rtol=1e-14)
    assert np.isnan(removed[~inside]).all()
    with pytest.raises(ValueError, match="shoulder 2.5"):
        lumaxlike.continuum_removed(spectrum, wavelengths, method="linear", shoulders=(0.8, 2.5))


# --- band analysis ----------------------------------------------------------------------


@pytest.mark.parametrize("centre", [1.0, 1.0123])  # on a band, and between two
def test_gaussian_band_on_a_linear_continuum_centre_and_depth(centre):
    x = np.arange(0.50, 1.50001, 0.001)
    depth, sigma = 0.25, 0.07
    continuum = 0.15 + 0.04 * x
    spectrum = continuum * (1 - depth * np.exp(-((x - centre) ** 2) / (2 * sigma**2)))
    result = lumaxlike.band_parameters(spectrum, x, band=(0.50, 1.50))
    assert result.centre == pytest.approx(centre, rel=1e-6)
    assert result.depth == pytest.approx(depth, rel=1e-6)
    # the shoulders lie 7 sigma away: the whole Gaussian's area
    assert result.area == pytest.approx(depth * sigma * math.sqrt(2 * math.pi), rel=1e-6)
    assert result.short_shoulder == pytest.approx(0.50, abs=1e-12)
    assert result.long_shoulder == pytest.approx(1.50, abs=1e-12)


def test_triangular_band_area_and_asymmetry():
    x = np.round(np.arange(1.0, 2.0001, 0.01), 10)
    symmetric = np.interp(x, [1.0, 1.3, 1.5, 1.7, 2.0], [1.0, 1.0, 0.6, 1.0, 1.0])
    result = lumaxlike.band_parameters(symmetric * 0.3, x, band=(1.0, 2.0), fit_bands=3)
    assert result.centre == pytest.approx(1.5, rel=1e-12)  # a parabola on a symmetric V
    assert result.depth == pytest.approx(0.4, rel=1e-12)
    assert result.area == pytest.approx(0.4 * 0.4 / 2, rel=1e-12)
    assert abs(result.asymmetry) < 1e-12
    removed = np.interp(x, [1.0, 1.3, 1.5, 2.0], [1.0, 1.0, 0.6, 1.0])  # vertices on the grid
    result = lumaxlike.band_parameters(removed * 0.3, x, band=(1.0, 2.0), fit_bands=3)
    area = 0.4 * 0.2 / 2 + 0.4 * 0.5 / 2
    assert result.area == pytest.approx(area, rel=1e-12)
    c = float(result.centre)
    assert 1.5 < c < 1.51  # the parabola through an asymmetric V leans to its gentle side
    short = 0.4 * 0.2 / 2 + 0.4 * (c - 1.5) - 0.4 * (c - 1.5) ** 2 / (2 * 0.5)
    assert result.asymmetry == pytest.approx((area - 2 * short) / area, rel=1e-12)


def test_flat_spectrum_has_no_band():
    x = np.round(np.arange(0.40, 2.6001, 0.00655), 6)
    flat = np.full((2, x.size), 0.2)
    band = lumaxlike.band_parameters(flat, x, band=((0.65, 0.9), (1.2, 1.7)))
    np.testing.assert_array_equal(band.depth, 0.0)
    np.testing.assert_array_equal(band.area, 0.0)
    names = lumaxlike.available_spectral_products(x)
    assert {"BDI1000", "BDI2000", "OLINDEX3", "BD1300", "FeO"} <= set(names)
    result = lumaxlike.spectral_parameters(flat, x, names, quantity="reflectance")
    for name in (
        "BDI1000",
        "BDI2000",
        "BAND1_DEPTH",
        "BAND2_AREA",
        "OLINDEX3",
        "LCPINDEX2",
        "HCPINDEX2",
        "BD1300",
        "BD1900_2",
        "BD2290",
        "D2300",
        "SINDEX2",
    ):
        np.testing.assert_allclose(result[name], 0.0, atol=1e-14, err_msg=name)


# --- products by hand ---------------------------------------------------------------------


def test_m3_products_by_hand():
    targets1 = [0.789 + 0.02 * n for n in range(27)]
    targets2 = [1.658 + 0.04 * n for n in range(22)]
    x = np.array(sorted({0.699, 1.579, 1.578, 2.538, 2.298, *targets1, *targets2}))
    x = np.unique(np.round(x, 6))  # 1.578 and 1.579: two bands 1 nm apart
    spectra = smooth_spectra(x)

    def r(w):
        return spectra[:, np.argmin(np.abs(x - w))]

    def bdi(targets, lo, hi):
        return sum(1 - r(t) / (r(lo) + (r(hi) - r(lo)) * (t - lo) / (hi - lo)) for t in targets)

    result = lumaxlike.spectral_parameters(
        spectra, x, ["BDI1000", "BDI2000", "R2540_2300"], quantity="w"
    )
    np.testing.assert_allclose(result["BDI1000"], bdi(targets1, 0.699, 1.579), rtol=1e-12)
    np.testing.assert_allclose(result["BDI2000"], bdi(targets2, 1.578, 2.538), rtol=1e-12)
    np.testing.assert_allclose(result["R2540_2300"], r(2.538) / r(2.298), rtol=1e-15)
    assert result.quantity == "w" and len(result.wavelengths["BDI1000"]) == 29
    assert result.products["BDI2000"].thermal_sensitive
    assert not result.products["BDI1000"].thermal_sensitive


def crism_grid():
    return np.round(1.0 + 0.00655 * np.arange(250), 6)  # 1.0-2.63 um, CRISM's spacing


def test_crism_products_by_hand():
    x = crism_grid()
    spectra = smooth_spectra(x)

    def r(w, k=5):  # the median over the k channels around the nearest one
        i = int(np.argmin(np.abs(x - w)))
        return np.median(spectra[:, i - k // 2 : i + k // 2 + 1], axis=1)

    def wv(w):
        return x[np.argmin(np.abs(x - w))]

    def line(lo, klo, hi, khi, at):
        a = (wv(at) - wv(lo)) / (wv(hi) - wv(lo))
        return (1 - a) * r(lo, klo) + a * r(hi, khi)

    def rb(w, k, lo, hi, kc=7):
        return 1 - r(w, k) / line(lo, kc, hi, kc, w)

    ol = [(1.210, 0.1), (1.250, 0.1), (1.263, 0.2), (1.276, 0.2), (1.330, 0.4)]
    expected = {
        "OLINDEX3": sum(
            wt * (line(1.75, 7, 1.862, 7, w) - r(w, 7)) / abs(line(1.75, 7, 1.862, 7, w))
            for w, wt in ol
        ),
        "LCPINDEX2": 0.2 * rb(1.69, 7, 1.56, 2.45)
        + 0.2 * rb(1.75, 7, 1.56, 2.45)
        + 0.3 * rb(1.81, 7, 1.56, 2.45)
        + 0.3 * rb(1.87, 7, 1.56, 2.45),
        "HCPINDEX2": 0.1 * rb(2.12, 5, 1.69, 2.53)
        + 0.1 * rb(2.14, 7, 1.69, 2.53)
        + 0.15 * rb(2.23, 7, 1.69, 2.53)
        + 0.3 * rb(2.25, 7, 1.69, 2.53)
        + 0.2 * rb(2.43, 7, 1.69, 2.53)
        + 0.15 * rb(2.46, 7, 1.69, 2.53),
        "BD1300": 1 - r(1.32, 15) / line(1.08, 5, 1.75, 5, 1.32),
        "BD1900_2": 0.5 * (1 - r(1.93) / line(1.85, 5, 2.067, 5, 1.93))
        + 0.5 * (1 - r(1.985) / line(1.85, 5, 2.067, 5, 1.985)),
        "BD2290": 1 - r(2.29) / line(2.25, 5, 2.35, 5, 2.29),
        "D2300": 1
        - sum(r(w, 3) / line(1.815, 5, 2.53, 5, w) for w in (2.29, 2.32, 2.33))
        / sum(r(w) / line(1.815, 5, 2.53, 5, w) for w in (2.12, 2.17, 2.21)),
        "SINDEX2": 1
        - ((1 - (a := (wv(2.29) - wv(2.12)) / (wv(2.4) - wv(2.12)))) * r(2.12) + a * r(2.4, 3))
        / r(2.29, 7),
    }
    result = lumaxlike.spectral_parameters(spectra, x, list(expected), quantity="reflectance")
    for name, value in expected.items():
        np.testing.assert_allclose(result[name], value, rtol=1e-12, err_msg=name)


LUCEY_POINTS = [
    # R415, R750, R950 -> FeO wt% (17.427 atan(7) - 7.565), TiO2 wt% (3.708 atan(1.8)^5.979),
    # OMAT (sqrt(0.02^2 + 0.14^2) = sqrt(0.02)): a mare soil
    ((0.06, 0.10, 0.105), 17.336427616467898, 5.363967807759157, 0.14142135623730950),
    # a bright highland soil: theta_Fe = atan(0.07/0.17), theta_Ti = atan(0.56)/... see below
    ((0.14, 0.25, 0.28), -0.7578910494804267, 0.06655595084926, 0.18384776310850226),
]


@pytest.mark.parametrize(("bands", "feo", "tio2", "omat"), LUCEY_POINTS)
def test_lucey_products_at_worked_points(bands, feo, tio2, omat):
    x = np.array([0.415, 0.750, 0.950])
    result = lumaxlike.spectral_parameters(
        np.array(bands), x, ["FeO", "TiO2", "OMAT"], quantity="reflectance"
    )
    assert float(result["FeO"]) == pytest.approx(feo, rel=1e-12)
    assert float(result["TiO2"]) == pytest.approx(tio2, rel=1e-12)
    assert float(result["OMAT"]) == pytest.approx(omat, rel=1e-12)


def test_lucey_theta_monotonic_and_constants_as_parameters():
    x = np.array([0.415, 0.750, 0.950])
    ratio = np.linspace(0.95, 1.18, 20)  # a deeper 1 um band to the left
    spectra = np.stack([0.5 + 0.1 * ratio, np.full_like(ratio, 0.12), 0.12 * ratio], axis=-1)
    result = lumaxlike.spectral_parameters(spectra, x, ["FeO", "TiO2"], quantity="normalized")
    assert np.all(np.diff(result["FeO"]) < 0)  # theta_Fe falls as R950/R750 rises
    assert np.all(np.diff(result["TiO2"]) > 0)  # theta_Ti rises with R415/R750
    other = lumaxlike.LuceyConstants(fe_slope=10.0, fe_intercept=0.0)
    moved = lumaxlike.spectral_parameters(spectra, x, "FeO", quantity="w", lucey=other)
    np.testing.assert_allclose(moved["FeO"] / 10.0, (result["FeO"] + 7.565) / 17.427, rtol=1e-12)
    assert moved.constants["lucey"] is other


# --- refusals and NaN -------------------------------------------------------------------


def test_missing_or_bad_bands_are_refused_by_name():
    x = np.array([0.415, 0.750, 0.900])
    with pytest.raises(ValueError, match=r"FeO .*0\.95 um"):
        lumaxlike.spectral_parameters(np.ones(3), x, ["FeO"], quantity="w")
    c = crism_grid()
    bad = np.zeros(c.size, bool)
    bad[np.argmin(np.abs(c - 1.32)) + 6] = True  # inside BD1300's 15-channel kernel
    with pytest.raises(ValueError, match="BD1300.*bad"):
        lumaxlike.spectral_parameters(np.ones(c.size), c, ["BD1300"], quantity="w", bad_bands=bad)
    coarse = np.round(np.arange(1.005, 2.6, 0.02), 6)  # M3-like spacing: kernels 3x too wide
    with pytest.raises(ValueError, match="OLINDEX3.*channels"):
        lumaxlike.spectral_parameters(np.ones(coarse.size), coarse, "OLINDEX3", quantity="w")
    with pytest.raises(ValueError, match="unknown"):
        lumaxlike.spectral_parameters(np.ones(3), x, ["XYZ"], quantity="w")
    with pytest.raises(ValueError, match="quantity"):
        lumaxlike.spectral_parameters(np.ones(3), x, ["OMAT"], quantity="albedo")
    with pytest.raises(ValueError, match="micrometres"):
        lumaxlike.spectral_parameters(np.ones(3), x * 1000, ["OMAT"], quantity="w")
    assert "FeO" not in lumaxlike.available_spectral_products(x)


def test_a_nan_band_makes_only_its_pixels_nan():
    x = crism_grid()
    spectra = smooth_spectra(x)
    spectra[1, np.argmin(np.abs(x - 1.32)) + 3] = np.nan  # one channel of pixel 1's kernel
    result = lumaxlike.spectral_parameters(spectra, x, ["BD1300", "BD2290"], quantity="w")
    assert np.isnan(result["BD1300"][1]) and np.isfinite(result["BD1300"][[0, 2]]).all()
    assert np.isfinite(result["BD2290"]).all()


# --- blocks, xarray -------------------------------------------------------------------------


def test_blocks_equal_the_whole_and_xarray_equals_numpy():
    xr = pytest.importorskip("xarray")
    x = np.round(np.arange(0.40, 2.6001, 0.00655), 6)
    cube = smooth_spectra(x, pixels=12).reshape(3, 4, x.size).astype(np.float32)
    names = lumaxlike.available_spectral_products(x)
    whole = lumaxlike.spectral_parameters(cube, x, names, quantity="w")
    halves = [
        lumaxlike.spectral_parameters(h, x, names, quantity="w") for h in (cube[:2], cube[2:])
    ]
    for name in names:
        assert whole[name].dtype == np.float32
        np.testing.assert_array_equal(
            whole[name], np.concatenate([halves[0][name], halves[1][name]]), err_msg=name
        )
    data = xr.DataArray(
        cube, dims=("y", "x", "band"), coords={"wavelength": ("band", x * 1000, {"units": "nm"})}
    ).chunk({"y": 1, "x": 3})
    dataset = data.hapke.spectral_parameters(list(names), quantity="w").compute()
    assert dataset.attrs["spectral_quantity"] == "w"
    for name in names:
        np.testing.assert_array_equal(dataset[name].values, whole[name], err_msg=name)
    assert dataset["BDI2000"].attrs["thermal_sensitive"] == 1


# --- issue 55 (section 7): bbl, non-positive spectra, no band, rounding at the edges --------


def m3_grid():
    """The bands of the M3 products by hand: every BDI band and continuum anchor."""
    targets = [0.789 + 0.02 * n for n in range(27)] + [1.658 + 0.04 * n for n in range(22)]
    return np.unique(np.round([0.699, 1.579, 1.578, 2.538, 2.298, *targets], 6))


def test_an_envi_bbl_list_is_refused_not_read_as_indices():
    """Before: ``bbl`` (1 good, 0 bad) was read as the indices {0, 1}: FeO came from the
    bad 0.75 um band. A 0/1 integer array of the bands' length is refused (the message
    says what to pass); ``bbl == 0`` is the mask it means."""
    x = np.array([0.415, 0.6, 0.75, 0.95, 1.0])
    bbl = np.array([1, 1, 0, 1, 1])
    spectra = np.full(x.size, 0.1)
    with pytest.raises(ValueError, match=r"bad_bands.*ENVI bbl.*bbl == 0"):
        lumaxlike.spectral_parameters(spectra, x, "FeO", quantity="w", bad_bands=bbl)
    with pytest.raises(ValueError, match=r"FeO .*0\.75 um are bad"):
        lumaxlike.spectral_parameters(spectra, x, "FeO", quantity="w", bad_bands=bbl == 0)
    with pytest.raises(ValueError, match="each band index once"):
        lumaxlike.continuum_removed(spectra, x, bad_bands=[2, -3])  # band 2 twice
    removed = lumaxlike.continuum_removed(spectra, x, bad_bands=[2, 4])  # indices still work
    np.testing.assert_array_equal(np.isnan(removed), [False, False, True, False, True])


def test_products_reading_a_non_positive_value_are_nan():
    """Before: an all-negative spectrum gave its positive twin's BDI1000, -0.01 at 750 nm
    gave FeO -34.8 wt %, a zero at 699 nm a BDI1000 of -45.7. Now each product that
    reads a band <= 0 is NaN in that pixel, and only there."""
    x = m3_grid()
    positive = smooth_spectra(x, pixels=1)[0]
    spectra = np.stack([positive, -positive, positive, positive])
    spectra[2, np.argmin(np.abs(x - 0.699))] = 0.0  # BDI1000's continuum anchor
    spectra[3, np.argmin(np.abs(x - 1.009))] = -0.01  # a BDI1000 band, in Band I's window
    names = ["BDI1000", "BDI2000", "BAND1_CENTER", "BAND1_DEPTH", "BAND2_AREA", "R2540_2300"]
    result = lumaxlike.spectral_parameters(spectra, x, names, quantity="reflectance")
    alone = lumaxlike.spectral_parameters(positive, x, names, quantity="reflectance")
    for name in names:
        assert np.isfinite(alone[name]), name
        assert result[name][0] == alone[name], name  # the positive pixel as on its own
        assert np.isnan(result[name][1]), name  # all negative: every product
    assert np.isnan(result["BDI1000"][2]) and np.isnan(result["BDI1000"][3])
    assert np.isnan(result["BAND1_CENTER"][3]) and np.isnan(result["BAND1_DEPTH"][3])
    for name in ("BDI2000", "BAND2_AREA", "R2540_2300"):  # they read neither band
        assert result[name][2] == alone[name] and result[name][3] == alone[name], name
    lucey = np.array([[0.06, 0.10, 0.105], [0.06, -0.01, 0.105], [0.06, 0.0, 0.105]])
    feo = lumaxlike.spectral_parameters(
        lucey, np.array([0.415, 0.750, 0.950]), ["FeO", "TiO2", "OMAT"], quantity="w"
    )
    for name in ("FeO", "TiO2", "OMAT"):
        assert np.isfinite(feo[name][0]) and np.isnan(feo[name][1:]).all(), name


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_spectrum_without_a_band_has_no_centre(dtype):
    """Before: BAND1_CENTER of a flat, straight or convex spectrum was 0.65, 1.19 or
    1.15 um at depth 0. Without a band (nothing below the continuum between the
    shoulders, beyond rounding) the centre and asymmetry are NaN and the depth 0; a
    spectrum with a band keeps its centre."""
    x = np.round(np.arange(0.40, 2.6001, 0.00655), 6)
    spectra = np.stack(
        [
            np.full(x.size, 0.2),  # flat
            0.1 + 0.07 * x,  # straight, sloped: its ratio to its own line is 1 +- rounding
            0.3 - 0.05 * (x - 1.2) ** 2,  # convex
            (0.1 + 0.07 * x) * (1 - 0.1 * np.exp(-((x - 1.0) ** 2) / 0.01)),  # a band at 1 um
        ]
    ).astype(dtype)
    names = ["BAND1_CENTER", "BAND1_DEPTH", "BAND2_CENTER"]
    result = lumaxlike.spectral_parameters(spectra, x, names, quantity="reflectance")
    assert np.isnan(result["BAND1_CENTER"][:3]).all() and np.isnan(result["BAND2_CENTER"]).all()
    np.testing.assert_array_equal(result["BAND1_DEPTH"][:3], 0.0)
    # the Gaussian's minimum on this grid: 1.0 to a fraction of the 6.55 nm spacing
    assert result["BAND1_CENTER"][3] == pytest.approx(1.0, abs=2e-3)
    band = lumaxlike.band_parameters(spectra, x, band=((0.65, 0.9), (1.15, 1.75)))
    assert np.isnan(band.asymmetry[:3]).all() and np.isfinite(band.asymmetry[3])
    assert band.area[2] < 0  # the convex spectrum's integral of 1 - removed


def test_a_band_exactly_at_the_tolerance_or_a_window_edge_is_inside():
    """Before: a band 10 nm from a product's wavelength (tolerance 0.01 um) was refused,
    0.76 - 0.75 being 0.010000000000000009 in float64; a float32 band centre at a
    window's end (float32(1.2) = 1.2000000477) fell outside it."""
    x = np.array([0.425, 0.760, 0.960])
    spectra = np.array([0.06, 0.10, 0.105])
    result = lumaxlike.spectral_parameters(spectra, x, "FeO", quantity="w")
    assert float(result["FeO"]) == pytest.approx(17.336427616467898, rel=1e-12)  # as at 750
    with pytest.raises(ValueError, match=r"FeO .*0\.75 um.*tolerance=0\.01"):
        lumaxlike.spectral_parameters(spectra, x + 1e-4, "FeO", quantity="w")
    x32 = np.array([1.0, 1.05, 1.1, 1.15, 1.2], dtype=np.float32)
    spectrum = np.array([1.0, 0.9, 0.8, 0.9, 1.0])
    band = lumaxlike.band_parameters(spectrum, x32, band=(1.0, (1.19, 1.2)), fit_bands=3)
    assert float(band.long_shoulder) == pytest.approx(1.2, rel=1e-7)
    assert float(band.centre) == pytest.approx(1.1, rel=1e-6)
