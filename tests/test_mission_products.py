"""Archived mission products (tests/mission_products.py writes them from their archives'
documented layouts): each is inverted the way its archive means it and recovers the w it
was made from; each wrong use is refused before any output is written."""

import math
import os
import re

import numpy as np
import pytest
import rasterio

import lumaxlike
from lumaxlike import Status, invert_file
from lumaxlike._io import read_cube
from lumaxlike._io.missions.product_cube import ProductCube
from lumaxlike._io.read.radiance import band_irradiance, load_solar_spectrum

from .mission_products import (
    COLS,
    M3_BBL,
    M3_FWHM,
    M3_WAVELENGTHS,
    ROWS,
    write_crism,
    write_crism_ddr,
    write_isis3,
    write_m3_l1b,
    write_m3_l2,
    write_m3_solar_table,
)

# the products are in sensor geometry (no map projection): GDAL says so when opening them
pytestmark = pytest.mark.filterwarnings("ignore::rasterio.errors.NotGeoreferencedWarning")
PARAMS = lumaxlike.HapkeParams(b=0.2, c=0.4, roughness=math.radians(15.0))
BANDS = len(M3_WAVELENGTHS)
# float32 files: the stored I/F carries a relative rounding error up to 2^-24 (6e-8), which
# |dw/dr| r / w (below ~30 for these w and geometries) turns into ~2e-6 in w at most; the
# solver itself (numba, float64) converges to 1e-10, so this is float32's precision
# (float64 files recover w to 1e-8 in tests/test_backplanes.py)
F32_ATOL = 2e-6


def f32(values):
    return np.asarray(values, dtype=np.float32)


def rad(values):
    return np.radians(np.asarray(values, dtype=np.float64))


@pytest.fixture(scope="module")
def w_true():
    return np.random.default_rng(23).uniform(0.1, 0.8, (ROWS, COLS, BANDS))


def flat(i, e, g):
    return lumaxlike.geometry_from_angles(rad(i), rad(e), phase=rad(g))


def reflectance(w, geometry):
    return np.asarray(lumaxlike.amsa(w, *geometry, PARAMS, backend="numba"))


def assert_w(path, expected, atol=F32_ATOL):
    w, _ = read_cube(path)
    np.testing.assert_allclose(w, expected, rtol=0, atol=atol)
    return w


def test_m3_l2_is_inverted_flat_at_its_standard_geometry(tmp_path, w_true, capsys):
    if_values = f32(math.pi * reflectance(w_true, flat(30.0, 0.0, 30.0)))
    if_values[0, 0, :] = -999.0  # the archive's invalid value
    paths = write_m3_l2(tmp_path, if_values)
    expected = w_true.copy()
    expected[0, 0] = np.nan
    expected[..., np.asarray(M3_BBL) == 0] = np.nan  # bbl = 0: not solved
    for given in (
        "lbl",
        "hdr",
        "img",
    ):  # the label, the ENVI header, the image: the same run
        out = tmp_path / f"w_{given}.tif"
        summary = invert_file(paths[given], out, params=PARAMS, solver="numba", units="radf")
        assert_w(out, expected)
        status, _ = read_cube(tmp_path / f"w_{given}_status.tif")
        assert (status[..., 2] == Status.BAD_BAND).all()
        assert (status[0, 0, [0, 1, 3, 4]] == Status.NONFINITE_INPUT).all()
        assert summary.status_counts["BAD_BAND"] == ROWS * COLS
    product = lumaxlike.read_provenance(tmp_path / "w_lbl.tif").product
    assert product["kind"] == "M3 L2 reflectance (RFL)"
    assert product["geometry"]["standard_geometry_deg"] == [30.0, 0.0, 30.0]
    assert "Besse et al. 2013" in product["geometry"]["why"]
    assert product["bad_bands"] == [3] and product["thermal_bands"] == [5]
    assert product["thermal_correction_flag"] == "Y"
    assert product["photometry_file"] == "M3G20111109_RFL_F_ALPHA_HIL.TAB"
    assert product["wavelengths"] == "ENVI header"
    err = capsys.readouterr().err
    assert "bands 5 (2.98 um) lie beyond 2.5 um" in err and "--thermal-bands exclude" in err


def test_m3_l2_lower_case_names_and_thermal_bands_left_out(tmp_path, w_true, capsys):
    if_values = f32(math.pi * reflectance(w_true, flat(30.0, 0.0, 30.0)))
    paths = write_m3_l2(tmp_path, if_values, lower_case=True)
    out = tmp_path / "w.tif"
    invert_file(
        paths["lbl"],
        out,
        params=PARAMS,
        solver="numba",
        units="radf",
        product=lumaxlike.ProductOptions(thermal_bands="exclude"),
    )
    expected = w_true[..., :4].copy()
    expected[..., 2] = np.nan
    w = assert_w(out, expected)
    assert w.shape == (ROWS, COLS, 4)
    with rasterio.open(out) as dataset:
        assert dataset.count == 4
    product = lumaxlike.read_provenance(out).product
    assert product["thermal_choice"] == "exclude"
    assert "left out" in capsys.readouterr().err


def test_m3_l2_with_an_observed_geometry_is_refused_unless_the_correction_was_undone(
    tmp_path, w_true
):
    obs_deg = {
        "to_sun_zenith": np.full((ROWS, COLS), 40.0),
        "to_sun_azimuth": np.zeros((ROWS, COLS)),
        "to_sensor_zenith": np.full((ROWS, COLS), 10.0),
        "to_sensor_azimuth": np.full((ROWS, COLS), 180.0),
    }
    observed = {role: np.asarray(f32(v), np.float64) for role, v in obs_deg.items()}
    if_values = f32(math.pi * reflectance(w_true, flat(30.0, 0.0, 30.0)))
    paths = write_m3_l2(tmp_path, if_values)
    out = tmp_path / "w.tif"
    with pytest.raises(ValueError) as error:
        invert_file(
            paths["img"],
            out,
            geometry=observed,
            params=PARAMS,
            solver="numba",
            units="radf",
        )
    message = str(error.value)
    for text in (
        "M3 L2 reflectance (RFL)",
        "i = 30, e = 0, g = 30 deg",
        "--correction-undone",
        "correction_undone=True",
        "_RFL.IMG",
    ):
        assert text in message
    assert not list(tmp_path.glob("w*"))
    # a user who undid the normalisation: the cube is I/F at the observed geometry
    to_sun = lumaxlike.direction_from_zenith_azimuth(rad(40.0), rad(0.0))
    to_sensor = lumaxlike.direction_from_zenith_azimuth(rad(10.0), rad(180.0))
    geometry = (
        np.broadcast_to(to_sun, (ROWS, COLS, 3)),
        np.broadcast_to(to_sensor, (ROWS, COLS, 3)),
        np.broadcast_to([0.0, 0.0, 1.0], (ROWS, COLS, 3)),
    )
    undone = f32(math.pi * reflectance(w_true, geometry))
    paths = write_m3_l2(tmp_path, undone)
    invert_file(
        paths["lbl"],
        out,
        geometry=observed,
        params=PARAMS,
        solver="numba",
        units="radf",
        product=lumaxlike.ProductOptions(correction_undone=True),
    )
    expected = w_true.copy()
    expected[..., 2] = np.nan
    assert_w(out, expected)
    assert lumaxlike.read_provenance(out).product["geometry"]["geometry"] == "observed"


def m3_obs(zenith_sun, azimuth_sun, zenith_inst, azimuth_inst):
    """M3 OBS bands (float32 degrees) for a flat surface, and the geometry built from them."""
    deg = {
        "To-Sun Zenith": f32(zenith_sun),
        "To-Sun AZM": f32(azimuth_sun),
        "To-Inst Zenith": f32(zenith_inst),
        "To-Inst AZM": f32(azimuth_inst),
    }
    to_sun = lumaxlike.direction_from_zenith_azimuth(
        rad(deg["To-Sun Zenith"]), rad(deg["To-Sun AZM"])
    )
    to_sensor = lumaxlike.direction_from_zenith_azimuth(
        rad(deg["To-Inst Zenith"]), rad(deg["To-Inst AZM"])
    )
    deg["Phase"] = f32(np.degrees(np.arccos(np.clip(np.sum(to_sun * to_sensor, -1), -1, 1))))
    deg["Facet Cos i"] = f32(np.cos(rad(deg["To-Sun Zenith"])))
    deg["To-Sun Path Length"] = np.full((ROWS, COLS), 0.98)
    deg["To-Inst Path Length"] = np.full((ROWS, COLS), 1.0e5)
    return deg, (to_sun, to_sensor, np.broadcast_to([0.0, 0.0, 1.0], to_sun.shape))


def solar_csv(path):
    """A smooth solar spectrum [um, W m^-2 um^-1] sampled every 5 nm (a Planck-like shape)."""
    wavelength = np.arange(0.40, 3.2, 0.005)
    irradiance = 2.0e3 * (0.5 / wavelength) ** 4 / (np.exp(1.0 / wavelength) - 1.0)
    path.write_text(
        "wavelength_um,irradiance\n"
        + "".join(f"{x:.4f},{y:.9g}\n" for x, y in zip(wavelength, irradiance))
    )
    return path


# the archive's global-mode table has one row per band; these are its rows at the test bands
# (values of the order of the MODTRAN spectrum's there, W m^-2 um^-1)
M3_TABLE_IRRADIANCE = (1860.052124, 720.850098, 285.972168, 51.043320, 26.823870)


@pytest.mark.parametrize("spectrum_file", ["csv", "m3_table"])
def test_m3_l1b_radiance_is_converted_with_its_solar_spectrum_and_obs(
    tmp_path, w_true, spectrum_file
):
    rng = np.random.default_rng(5)
    deg, geometry = m3_obs(
        rng.uniform(20, 60, (ROWS, COLS)),
        rng.uniform(0, 360, (ROWS, COLS)),
        rng.uniform(0, 20, (ROWS, COLS)),
        rng.uniform(0, 360, (ROWS, COLS)),
    )
    if spectrum_file == "csv":
        spectrum_path = solar_csv(tmp_path / "solar.csv")
        spectrum = load_solar_spectrum(spectrum_path)
        irradiance = band_irradiance(
            spectrum, np.asarray(M3_WAVELENGTHS) * 1e-3, np.asarray(M3_FWHM) * 1e-3
        )
    else:  # the archive's table, read at each band's own row (no resampling)
        spectrum_path = write_m3_solar_table(tmp_path, M3_WAVELENGTHS, M3_TABLE_IRRADIANCE)
        irradiance = np.asarray(M3_TABLE_IRRADIANCE)
    distance = 0.9837  # the label's SOLAR_DISTANCE [au]
    radiance = f32(reflectance(w_true, geometry) * irradiance / distance**2)  # L = r F / d^2
    paths = write_m3_l1b(tmp_path, radiance, deg)
    out = tmp_path / "w.tif"
    invert_file(
        paths["rdn"],
        out,
        geometry=paths["obs"],
        params=PARAMS,
        solver="numba",
        units="radiance",
        product=lumaxlike.ProductOptions(solar_spectrum=spectrum_path),
    )
    assert_w(out, w_true)
    product = lumaxlike.read_provenance(out).product
    assert product["kind"] == "M3 L1B radiance (RDN)"
    assert product["solar_spectrum"].startswith(str(spectrum_path.resolve()))
    assert product["solar_distance_au"] == distance
    assert product["label_unit"] == "W/(m^2 um sr)"
    np.testing.assert_allclose(product["band_irradiance_w_m2_um"], irradiance, rtol=1e-15)
    # declared as I/F: refused from the label's UNIT before anything is written
    with pytest.raises(ValueError, match=r"_RDN.IMG holds radiance \(UNIT = 'W/\(m\^2 um sr\)'\)"):
        invert_file(
            paths["rdn"],
            tmp_path / "x.tif",
            geometry=paths["obs"],
            params=PARAMS,
            solver="numba",
            units="radf",
        )
    assert not list(tmp_path.glob("x*"))


def test_radiance_band_irradiance_of_a_linear_spectrum_is_its_centre_value():
    spectrum = lumaxlike._io.read.radiance.SolarSpectrum(
        np.array([0.4, 3.0]), np.array([2000.0, 100.0]), "test"
    )
    centres = np.array([0.5, 1.0, 2.0])
    expected = 2000.0 + (centres - 0.4) * (100.0 - 2000.0) / 2.6
    np.testing.assert_allclose(
        band_irradiance(spectrum, centres, np.full(3, 0.04)), expected, rtol=1e-12
    )
    np.testing.assert_allclose(band_irradiance(spectrum, centres), expected, rtol=1e-12)
    with pytest.raises(ValueError, match="lie outside"):
        band_irradiance(spectrum, np.array([3.5]))


def test_astm_g173_default_spectrum_is_pvlibs_extraterrestrial_column():
    spectrum = load_solar_spectrum(None)
    assert "ASTM G173-03" in spectrum.source
    # 500 nm: 1.9160 W m^-2 nm^-1 in the standard's table
    assert band_irradiance(spectrum, np.array([0.5]))[0] == pytest.approx(1916.0, rel=1e-12)


def test_values_no_reflectance_takes_are_refused_naming_the_likely_unit(tmp_path):
    counts = np.random.default_rng(2).integers(200, 4000, (ROWS, COLS, 2)).astype(np.float32)
    radiance = counts / 37.0
    for name, values, likely in (
        ("dn.tif", counts, "DN"),
        ("rad.tif", radiance, "radiance"),
        ("neg.tif", -radiance, "negative median"),
    ):
        path = tmp_path / name
        with rasterio.open(
            path, "w", driver="GTiff", width=COLS, height=ROWS, count=2, dtype="float32"
        ) as dst:
            dst.write(np.moveaxis(values, -1, 0))
        geometry = {
            role: np.full((ROWS, COLS), value)
            for role, value in (("incidence", 30.0), ("emission", 0.0), ("phase", 30.0))
        }
        with pytest.raises(ValueError, match=likely) as error:
            invert_file(
                path,
                tmp_path / "w.tif",
                geometry=geometry,
                params=PARAMS,
                solver="numba",
                units="radf",
            )
        assert name in str(error.value)
    assert not list(tmp_path.glob("w*"))


def ddr_backplanes(rng):
    deg = {
        "INA at areoid, deg": rng.uniform(30, 60, (ROWS, COLS)),
        "EMA at areoid, deg": rng.uniform(0, 20, (ROWS, COLS)),
    }
    deg["Phase angle, deg"] = (
        deg["INA at areoid, deg"] + rng.uniform(-0.9, 0.9, (ROWS, COLS)) * deg["EMA at areoid, deg"]
    )
    deg["INA at surface from MOLA, deg"] = deg["INA at areoid, deg"]  # a flat surface
    deg["EMA at surface from MOLA, deg"] = deg["EMA at areoid, deg"]
    deg["Slope magnitude from MOLA, deg"] = np.zeros((ROWS, COLS))
    deg["MOLA slope azimuth, deg clkwise from N"] = np.zeros((ROWS, COLS))
    deg = {name: f32(value) for name, value in deg.items()}
    geometry = lumaxlike.geometry_from_angles(
        rad(deg["INA at areoid, deg"]),
        rad(deg["EMA at areoid, deg"]),
        phase=rad(deg["Phase angle, deg"]),
    )
    return deg, geometry


def test_crism_trdr_if_with_its_ddr_through_the_labels(tmp_path, w_true):
    deg, geometry = ddr_backplanes(np.random.default_rng(7))
    if_values = f32(math.pi * reflectance(w_true, geometry))
    if_values[2, 3, 1] = 65535.0  # CRISM's invalid value
    label = write_crism(tmp_path, if_values)
    ddr = write_crism_ddr(tmp_path, deg)
    expected = w_true.copy()
    expected[2, 3, 1] = np.nan
    for cube in (
        label,
        label.with_suffix(".IMG"),
    ):  # the .IMG opens through the .LBL beside it
        out = tmp_path / f"w_{cube.suffix[1:]}.tif"
        invert_file(cube, out, geometry=ddr, params=PARAMS, solver="numba", units="radf")
        assert_w(out, expected)
    product = lumaxlike.read_provenance(out).product
    assert product["kind"] == "CRISM TRDR I/F (TRR3)"
    assert product["read_via"] == "raw VRT from the PDS3 label"
    assert product["wavelengths"] == "unknown"
    # the wavelength file named by MRO:WAVELENGTH_FILE_NAME, given as text here
    wavelengths = tmp_path / "wa.txt"
    wavelengths.write_text("".join(f"{v}\n" for v in (1001.2, 1500.0, 2000.5, 2500.1, 3000.7)))
    invert_file(
        label,
        tmp_path / "wl.tif",
        geometry=ddr,
        params=PARAMS,
        solver="numba",
        units="radf",
        product=lumaxlike.ProductOptions(wavelengths_from=wavelengths),
    )
    assert (
        lumaxlike.read_provenance(tmp_path / "wl.tif")
        .product["wavelengths"]
        .startswith("wavelength file")
    )


def test_crism_mtrdr_flat_at_its_standard_geometry_or_undone_with_areoid_reff(tmp_path, w_true):
    deg, geometry = ddr_backplanes(np.random.default_rng(8))
    ddr = write_crism_ddr(tmp_path, deg, product="FRT00003E12_07_DE166L_DDR1")
    cos_i = np.cos(rad(deg["INA at areoid, deg"]))[..., None]
    lambert = f32(math.pi * reflectance(w_true, geometry) / cos_i)  # I/F / cos i (areoid)
    label = write_crism(tmp_path, lambert, product="FRT00003E12_07_IF166J_MTR3")
    out = tmp_path / "w.tif"
    with pytest.raises(ValueError, match="i = 0, e = 0, g = 0 deg.*--reff-incidence areoid"):
        invert_file(label, out, geometry=ddr, params=PARAMS, solver="numba", units="radf")
    with pytest.raises(ValueError, match="say which incidence"):
        invert_file(label, out, geometry=ddr, params=PARAMS, solver="numba", units="reff")
    invert_file(
        label,
        out,
        geometry=ddr,
        params=PARAMS,
        solver="numba",
        units="reff",
        product=lumaxlike.ProductOptions(reff_incidence="areoid"),
    )
    assert_w(out, w_true)
    assert lumaxlike.read_provenance(out).product["reff_incidence"] == "areoid"
    # no geometry: flat at i = e = g = 0, where a Lambert-corrected value is the I/F
    at_zero = f32(math.pi * reflectance(w_true, flat(0.0, 0.0, 0.0)))
    label = write_crism(tmp_path, at_zero, product="FRT00003E12_07_IF166J_TER3")
    invert_file(label, tmp_path / "t.tif", params=PARAMS, solver="numba", units="radf")
    assert_w(tmp_path / "t.tif", w_true)
    product = lumaxlike.read_provenance(tmp_path / "t.tif").product
    assert product["kind"] == "CRISM TER corrected I/F (TER3)"
    assert product["geometry"]["standard_geometry_deg"] == [0.0, 0.0, 0.0]


def test_isis3_bandbin_wavelengths_without_a_unit_are_nanometres(tmp_path, w_true, capsys):
    geometry_deg = {
        "incidence": np.full((ROWS, COLS), 35.0),
        "emission": np.full((ROWS, COLS), 5.0),
        "phase": np.full((ROWS, COLS), 38.0),
    }
    if_values = f32(math.pi * reflectance(w_true, flat(35.0, 5.0, 38.0)))
    cube = write_isis3(tmp_path / "m3.cub", if_values, M3_WAVELENGTHS)
    out = tmp_path / "w.tif"
    invert_file(cube, out, geometry=geometry_deg, params=PARAMS, solver="numba", units="radf")
    assert_w(out, w_true)
    _, info = read_cube(cube)
    np.testing.assert_allclose(info.wavelengths, M3_WAVELENGTHS)
    assert info.wavelength_units == "Nanometers"
    assert lumaxlike.read_provenance(out).product["wavelengths"].startswith("ISIS3 BandBin")
    with_unit = write_isis3(
        tmp_path / "u.cub",
        if_values,
        np.asarray(M3_WAVELENGTHS) / 1e3,
        width_unit="micrometers",
    )
    assert read_cube(with_unit)[1].wavelength_units == "Micrometers"
    assert "no band wavelengths" not in capsys.readouterr().err


@pytest.mark.parametrize("key", ["WAVELENGTH", "wavelength", "Wavelength"])
def test_gdal_band_wavelength_items_in_any_case(tmp_path, key):
    path = tmp_path / "c.tif"
    with rasterio.open(
        path, "w", driver="GTiff", width=COLS, height=ROWS, count=2, dtype="float32"
    ) as dst:
        dst.write(np.full((2, ROWS, COLS), 0.1, np.float32))
        for band, value in ((1, 1000.0), (2, 1500.0)):
            dst.update_tags(band, **{key: str(value), f"{key}_UNITS": "nm", "FWHM": "10"})
    info = read_cube(path)[1]
    np.testing.assert_array_equal(info.wavelengths, [1000.0, 1500.0])
    assert info.wavelength_units == "Nanometers"
    np.testing.assert_array_equal(info.fwhm, [10.0, 10.0])


def test_gdal_written_pds4_keeps_its_wavelengths(tmp_path):
    path = tmp_path / "cube.xml"
    with rasterio.open(
        path, "w", driver="PDS4", width=COLS, height=ROWS, count=2, dtype="float32"
    ) as dst:
        dst.write(np.full((2, ROWS, COLS), 0.1, np.float32))
        for band, value in ((1, 0.75), (2, 1.25)):
            dst.update_tags(band, wavelength=str(value), wavelength_units="Micrometers")
    info = read_cube(path)[1]
    np.testing.assert_array_equal(info.wavelengths, [0.75, 1.25])
    assert info.wavelength_units == "Micrometers"


def test_unknown_wavelengths_are_said_once(tmp_path, capsys):
    path = tmp_path / "plain.tif"
    with rasterio.open(
        path, "w", driver="GTiff", width=COLS, height=ROWS, count=2, dtype="float32"
    ) as dst:
        dst.write(np.full((2, ROWS, COLS), 0.1, np.float32))
    geometry = {
        role: np.full((ROWS, COLS), value)
        for role, value in (("incidence", 30.0), ("emission", 0.0), ("phase", 30.0))
    }
    invert_file(
        path,
        tmp_path / "w.tif",
        geometry=geometry,
        params=PARAMS,
        solver="numba",
        units="radf",
    )
    assert capsys.readouterr().err.count("gives no band wavelengths") == 1
    assert lumaxlike.read_provenance(tmp_path / "w.tif").product["wavelengths"] == "unknown"


def test_m3_label_without_its_header_reads_through_the_wrapper_objects(tmp_path, w_true):
    values = f32(w_true)
    paths = write_m3_l2(tmp_path, values)
    paths["hdr"].unlink()  # GDAL's PDS driver cannot read RFL_FILE/RFL_IMAGE
    from lumaxlike._io.missions.products import locate

    assert locate(paths["lbl"]).via == locate(paths["img"]).via == "raw VRT from the PDS3 label"
    cube, info = read_cube(paths["img"])
    np.testing.assert_array_equal(cube, values)
    assert info.wavelengths is None


def test_the_file_api_friends_refuse_an_observed_geometry_with_m3_l2(tmp_path, w_true):
    if_values = f32(math.pi * reflectance(w_true, flat(30.0, 0.0, 30.0)))
    paths = write_m3_l2(tmp_path, if_values)
    observed = {
        role: np.full((ROWS, COLS), value)
        for role, value in (("incidence", 40.0), ("emission", 10.0), ("phase", 45.0))
    }
    with pytest.raises(ValueError, match="i = 30, e = 0, g = 30 deg.*--correction-undone"):
        lumaxlike.normalize_file(
            paths["lbl"],
            tmp_path / "n.tif",
            geometry=observed,
            params=PARAMS,
            solver="numba",
            units="radf",
        )
    with pytest.raises(ValueError, match="fit needs cubes at their observed geometries"):
        lumaxlike.fit_file(
            [paths["lbl"], paths["img"]],
            tmp_path / "f.tif",
            geometry=[observed, observed],
            params=PARAMS,
            free=("w",),
            units="radf",
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in paths.values())


def test_open_product_and_invert_dataarray_at_the_standard_geometry(tmp_path, w_true):
    if_values = f32(math.pi * reflectance(w_true, flat(30.0, 0.0, 30.0)))
    paths = write_m3_l2(tmp_path, if_values)
    refl = lumaxlike.open_product(paths["lbl"], "radf")
    np.testing.assert_allclose(refl["wavelength"], M3_WAVELENGTHS)
    result = lumaxlike.invert_dataarray(refl, None, PARAMS, "numba", units="radf")
    expected = w_true.copy()
    expected[..., 2] = np.nan
    np.testing.assert_allclose(result["w"].values, expected, rtol=0, atol=F32_ATOL)
    assert (result["status"].values[..., 2] == Status.BAD_BAND).all()
    product = lumaxlike.read_provenance(result).product
    assert product["geometry"]["standard_geometry_deg"] == [30.0, 0.0, 30.0]
    observed = {
        role: refl.isel(band=0, drop=True) * 0 + value
        for role, value in (("incidence", 40.0), ("emission", 10.0), ("phase", 45.0))
    }
    with pytest.raises(ValueError, match="i = 30, e = 0, g = 30 deg.*correction_undone=True"):
        lumaxlike.invert_dataarray(refl, observed, PARAMS, "numba", units="radf")


def cli(*args):
    from lumaxlike._cli import main

    return main(
        [
            "invert",
            *map(str, args),
            "--b",
            "0.2",
            "--c",
            "0.4",
            "--roughness-deg",
            "15",
            "--solver",
            "numba",
        ]
    )


def test_cli_m3_l2_at_its_standard_geometry_and_its_refusals(tmp_path, w_true, capsys):
    if_values = f32(math.pi * reflectance(w_true, flat(30.0, 0.0, 30.0)))
    paths = write_m3_l2(tmp_path, if_values)
    obs = tmp_path / "obs.tif"
    with rasterio.open(
        obs, "w", driver="GTiff", width=COLS, height=ROWS, count=3, dtype="float32"
    ) as dst:
        dst.write(np.stack([np.full((ROWS, COLS), v, np.float32) for v in (40.0, 10.0, 45.0)]))
        for band, name in enumerate(("incidence", "emission", "phase"), start=1):
            dst.set_band_description(band, name)
    out = tmp_path / "w.tif"
    assert cli(paths["img"], "--units", "radf", "--geometry", obs, "--out", out) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "i = 30, e = 0, g = 30 deg" in err[0]
    assert "--correction-undone" in err[0]
    assert cli(paths["img"], "--units", "radiance", "--out", out) == 2
    assert "holds I/F, not radiance: give --units radf" in capsys.readouterr().err
    assert not list(tmp_path.glob("w*"))
    assert cli(paths["lbl"], "--units", "radf", "--thermal-bands", "exclude", "--out", out) == 0
    expected = w_true[..., :4].copy()
    expected[..., 2] = np.nan
    assert_w(out, expected)


def test_cli_run_where_nothing_converged_exits_1_saying_why(tmp_path, capsys):
    path = tmp_path / "bright.tif"
    with rasterio.open(
        path, "w", driver="GTiff", width=COLS, height=ROWS, count=2, dtype="float32"
    ) as dst:
        dst.write(np.full((2, ROWS, COLS), 1.0, np.float32))  # I/F 1 with the sun 85 deg low
        dst.update_tags(1, wavelength="1000", wavelength_units="nm")
        dst.update_tags(2, wavelength="1500", wavelength_units="nm")
    obs = tmp_path / "obs.tif"
    with rasterio.open(
        obs, "w", driver="GTiff", width=COLS, height=ROWS, count=3, dtype="float32"
    ) as dst:
        dst.write(np.stack([np.full((ROWS, COLS), v, np.float32) for v in (85.0, 0.0, 85.0)]))
        for band, name in enumerate(("incidence", "emission", "phase"), start=1):
            dst.set_band_description(band, name)
    code = cli(path, "--units", "radf", "--geometry", obs, "--out", tmp_path / "w.tif")
    lines = capsys.readouterr().err.strip().splitlines()
    assert code == 1
    assert lines[-1] == (
        f"lumaxlike invert: error: no problem converged (UNREACHABLE "
        f"{ROWS * COLS * 2}): the reflectance lies outside what the model "
        "reaches with w in (0, 1): check --units (radiance given as I/F?) "
        "and the model parameters"
    )


@pytest.mark.parametrize("storage", ["BAND_SEQUENTIAL", "LINE_INTERLEAVED", "SAMPLE_INTERLEAVED"])
def test_pds3_layouts_read_through_a_raw_vrt(tmp_path, storage):
    """Big-endian integers after a 2-record attached offset, scaled, with a null value."""
    values = np.arange(ROWS * COLS * 3, dtype=">i2").reshape(ROWS, COLS, 3)
    values[1, 2, 0] = -32768
    axes = {
        "BAND_SEQUENTIAL": (2, 0, 1),
        "LINE_INTERLEAVED": (0, 2, 1),
        "SAMPLE_INTERLEAVED": (0, 1, 2),
    }[storage]
    record = COLS * 2
    (tmp_path / "x.img").write_bytes(b"\0" * 2 * record + np.transpose(values, axes).tobytes())
    label = tmp_path / "X.LBL"
    label.write_text(
        f"PDS_VERSION_ID = PDS3\nRECORD_TYPE = FIXED_LENGTH\nRECORD_BYTES = {record}\n"
        '^IMAGE = ("X.IMG", 3)\nOBJECT = IMAGE\n'
        f"  LINES = {ROWS}\n  LINE_SAMPLES = {COLS}\n  BANDS = 3\n"
        f"  BAND_STORAGE_TYPE = {storage}\n  SAMPLE_TYPE = MSB_INTEGER\n  SAMPLE_BITS = 16\n"
        "  SCALING_FACTOR = 0.5\n  OFFSET = 1.0\n  NULL = -32768\n"
        '  BAND_NAME = ("a", "b", "c")\nEND_OBJECT = IMAGE\nEND\n'
    )
    cube, info = read_cube(tmp_path / "x.img")  # lower-case image, upper-case label
    expected = values.astype(np.float64) * 0.5 + 1.0
    expected[1, 2, 0] = np.nan
    np.testing.assert_array_equal(cube, expected)
    assert info.band_names == ("a", "b", "c")


def test_crism_wavelength_file_gives_the_median_over_columns(tmp_path):
    centres = np.array([1001.0, 1500.0, 2000.0, 2500.0, 3000.0])
    table = np.broadcast_to(centres, (1, COLS, 5)).copy() + np.arange(COLS)[None, :, None] * 0.1
    table[0, 0, :] = 65535.0  # a column without wavelengths
    image = tmp_path / "CDR410803692813_WA0000000L_3.IMG"
    image.write_bytes(np.ascontiguousarray(np.moveaxis(table, 2, 1)).astype("<f4").tobytes())
    image.with_suffix(".LBL").write_text(
        f"PDS_VERSION_ID = PDS3\nRECORD_TYPE = FIXED_LENGTH\nRECORD_BYTES = {COLS * 4}\n"
        f'^IMAGE = "{image.name}"\nOBJECT = IMAGE\n  LINES = 1\n  LINE_SAMPLES = {COLS}\n'
        "  BANDS = 5\n  BAND_STORAGE_TYPE = LINE_INTERLEAVED\n  SAMPLE_TYPE = PC_REAL\n"
        "  SAMPLE_BITS = 32\nEND_OBJECT = IMAGE\nEND\n"
    )
    from lumaxlike._io.read.spectral_metadata import read_wavelength_file

    found = read_wavelength_file(image, 5)
    np.testing.assert_allclose(found.wavelengths, centres + 0.2, rtol=1e-6)  # columns 1-3
    assert found.units == "Nanometers"
    with pytest.raises(ValueError, match="5 bands for a cube of 4"):
        read_wavelength_file(image, 4)


def test_radiance_without_a_sun_distance_or_wavelengths_and_a_dtm_with_l2_are_refused(
    tmp_path, w_true
):
    path = tmp_path / "rdn.tif"
    with rasterio.open(
        path, "w", driver="GTiff", width=COLS, height=ROWS, count=2, dtype="float32"
    ) as dst:
        dst.write(np.full((2, ROWS, COLS), 20.0, np.float32))
    geometry = {
        role: np.full((ROWS, COLS), value)
        for role, value in (("incidence", 30.0), ("emission", 0.0), ("phase", 30.0))
    }
    with pytest.raises(ValueError, match="needs the band wavelengths"):
        invert_file(
            path,
            tmp_path / "w.tif",
            geometry=geometry,
            params=PARAMS,
            solver="numba",
            units="radiance",
        )
    with rasterio.open(path, "r+") as dst:
        dst.update_tags(1, wavelength="1.0", wavelength_units="um")
        dst.update_tags(2, wavelength="1.5", wavelength_units="um")
    with pytest.raises(ValueError, match="has no SOLAR_DISTANCE: give --solar-distance"):
        invert_file(
            path,
            tmp_path / "w.tif",
            geometry=geometry,
            params=PARAMS,
            solver="numba",
            units="radiance",
        )
    paths = write_m3_l2(tmp_path, f32(math.pi * reflectance(w_true, flat(30.0, 0.0, 30.0))))
    with pytest.raises(ValueError, match="with an observed dtm gives a wrong w"):
        invert_file(
            paths["lbl"],
            tmp_path / "w.tif",
            dtm=path,
            params=PARAMS,
            solver="numba",
            units="radf",
        )
    assert not list(tmp_path.glob("w*"))


def test_the_m3_solar_table_is_read_as_its_label_describes_it(tmp_path):
    centres = np.array([500.92, 540.84, 1009.99, 1508.97, 2976.20])  # nm, one row per band
    irradiance = np.array([1950.1, 1860.052124, 720.850098, 285.972168, 26.823870])
    table = write_m3_solar_table(tmp_path, centres, irradiance)
    label = tmp_path / "M3G20110224_RFL_SOLAR_SPEC.LBL"  # given the label, the table is read
    label.write_text('PDS_VERSION_ID = PDS3\n^TABLE = "M3G20110224_RFL_SOLAR_SPEC.TAB"\nEND\n')
    for path in (table, label):
        spectrum = load_solar_spectrum(path)
        assert spectrum.per_band and spectrum.source.startswith(str(table.resolve()))
        # wavelengths in nm even where a generic file would read them as um; each band
        # its own row, whatever the FWHM (no Gaussian resampling of band-averaged rows)
        found = band_irradiance(spectrum, centres[1:4] * 1e-3, np.full(3, 0.2))
        np.testing.assert_array_equal(found, irradiance[1:4])
    with pytest.raises(ValueError, match=r"none at the bands at 0\.52 um: give the table"):
        band_irradiance(spectrum, np.array([0.52]))  # a band of the other mode
    table.write_bytes(b" 500.920000  1950.100000  3.0\r\n")
    with pytest.raises(ValueError, match=r"line 1: not the archive's two fields"):
        load_solar_spectrum(table)


def test_a_solar_table_with_one_row_per_band_is_taken_at_the_band_centres():
    spectrum = lumaxlike._io.read.radiance.SolarSpectrum(
        np.array([0.54084, 1.00999, 1.50897]),
        np.array([1850.0, 700.0, 270.0]),
        "per band",
    )
    found = band_irradiance(
        spectrum, np.array([0.54084, 1.00999, 1.50897]), np.array([0.02, 0.04, 0.04])
    )
    np.testing.assert_array_equal(found, [1850.0, 700.0, 270.0])


def test_the_xarray_friends_refuse_an_observed_geometry_with_m3_l2(tmp_path, w_true):
    paths = write_m3_l2(tmp_path, f32(math.pi * reflectance(w_true, flat(30.0, 0.0, 30.0))))
    refl = lumaxlike.open_product(paths["lbl"], "radf")
    observed = {
        role: refl.isel(band=0, drop=True) * 0 + value
        for role, value in (("incidence", 40.0), ("emission", 10.0), ("phase", 45.0))
    }
    with pytest.raises(ValueError, match="i = 30, e = 0, g = 30 deg"):
        lumaxlike.normalize_dataarray(refl, observed, PARAMS, "numba", units="radf")
    stack = refl.expand_dims(observation=2)
    with pytest.raises(ValueError, match="fit_dataarray needs observations at their observed"):
        lumaxlike.fit_dataarray(stack, observed, PARAMS, ("w",), "numba", units="radf")
    with pytest.raises(ValueError, match="sample_dataarray needs observations at their obs"):
        lumaxlike.sample_dataarray(stack, observed, PARAMS, ("w",), units="radf", refl_sigma=0.01)


# ----------------------------------------------------------------------------- file sizes


@pytest.mark.parametrize("fault", ["bands 4", "bands 6", "short by 10 bytes", "short by half"])
def test_an_m3_image_its_header_does_not_describe_is_refused_through_the_label(
    tmp_path, w_true, fault
):
    """GDAL reads a wrong band count with the wrong stride, a short file with zeros."""
    paths = write_m3_l2(tmp_path, f32(w_true))
    full = ROWS * COLS * BANDS * 4
    size, expected = full, full
    if fault.startswith("bands"):
        bands = int(fault.split()[1])
        paths["hdr"].write_text(paths["hdr"].read_text().replace("bands = 5", f"bands = {bands}"))
        expected = ROWS * COLS * bands * 4
    else:
        size = full - 10 if "10" in fault else full // 2
        os.truncate(paths["img"], size)
    for given in (paths["lbl"], paths["hdr"], paths["img"]):
        with pytest.raises(ValueError) as error:
            read_cube(given)
        message = str(error.value)
        assert f"ENVI header {paths['hdr']} " in message
        assert f"data file {paths['img']} " in message
        assert f"= {expected} bytes" in message and f"holds {size} bytes" in message


def crism_after_a_record(tmp_path, values, record_bytes):
    """A CRISM MTRDR whose image starts at record 2 (16 bytes of another object first),
    its label giving ``record_bytes``."""
    label = write_crism(tmp_path, values, product="FRT00003E12_07_IF166J_MTR3")
    image = label.with_suffix(".IMG")
    image.write_bytes(b"\x7f" * 16 + image.read_bytes())
    bands = np.shape(values)[-1]
    text = label.read_text()
    text = text.replace(f'^IMAGE = "{image.name}"', f'^IMAGE = ("{image.name}", 2)')
    text = text.replace(f"RECORD_BYTES = {COLS * 4}", f"RECORD_BYTES = {record_bytes}")
    text = text.replace(f"FILE_RECORDS = {ROWS * bands}", f"FILE_RECORDS = {ROWS * bands + 1}")
    label.write_text(text)
    return label, image


@pytest.mark.parametrize("record_bytes", [8, 32])
def test_a_pds3_label_with_a_wrong_record_bytes_is_refused(tmp_path, w_true, record_bytes):
    assert COLS * 4 == 16  # the right RECORD_BYTES
    label, image = crism_after_a_record(tmp_path, f32(w_true), 16)
    np.testing.assert_array_equal(read_cube(label)[0], f32(w_true))
    label, image = crism_after_a_record(tmp_path, f32(w_true), record_bytes)
    size = 16 + ROWS * COLS * BANDS * 4
    with pytest.raises(ValueError) as error:
        read_cube(label)
    message = str(error.value)
    assert f"PDS3 label {label} " in message and f"{image} " in message
    assert f"holds {size} bytes" in message
    records = ROWS * BANDS + 1
    assert f"FILE_RECORDS = {records} of RECORD_BYTES = {record_bytes} " in message
    assert f"({records * record_bytes} bytes)" in message
    if record_bytes == 32:  # and the image would end past the file's end
        assert f"IMAGE at bytes 32 to {32 + size - 16} " in message


def test_a_truncated_pds3_image_is_refused(tmp_path, w_true):
    label = write_crism(tmp_path, f32(w_true))
    image = label.with_suffix(".IMG")
    size = ROWS * COLS * BANDS * 4 - 20
    os.truncate(image, size)
    for given in (label, image):
        with pytest.raises(ValueError) as error:
            read_cube(given)
        message = str(error.value)
        assert f"PDS3 label {label} " in message and f"data file {image} " in message
        assert f"IMAGE at bytes 0 to {size + 20} " in message
        assert f"({size + 20} bytes)" in message and f"holds {size} bytes" in message


def test_cli_a_truncated_cube_exits_2_naming_it(tmp_path, w_true, capsys):
    """docs/cli.md: exit 2, one line naming the file; nothing written."""
    paths = write_m3_l2(tmp_path, f32(math.pi * reflectance(w_true, flat(30.0, 0.0, 30.0))))
    os.truncate(paths["img"], ROWS * COLS * BANDS * 4 - 10)
    assert cli(paths["lbl"], "--units", "radf", "--out", tmp_path / "w.tif") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and str(paths["img"]) in err[0] and "truncated" in err[0], err
    assert not list(tmp_path.glob("w*"))


# ----------------------------------------------------------------------------- wavelength units


@pytest.mark.parametrize(
    "scale, stated, likely", [(1e-3, "Nanometers", "micrometres"), (1.0, "Micrometers", "nanom")]
)
def test_wavelengths_in_a_unit_they_cannot_be_in_are_refused(tmp_path, scale, stated, likely):
    """Micrometres labelled nm would make --thermal-bands exclude leave nothing out."""
    paths = write_m3_l2(tmp_path, np.full((ROWS, COLS, BANDS), 0.2, np.float32))
    text = paths["hdr"].read_text()
    listed = "{" + ", ".join(f"{v * scale:.6g}" for v in M3_WAVELENGTHS) + "}"
    text = re.sub(r"(?m)^wavelength = \{.*\}$", f"wavelength = {listed}", text)
    paths["hdr"].write_text(
        text.replace("wavelength units = Nanometers", f"wavelength units = {stated}")
    )
    with pytest.raises(ValueError) as error:
        ProductCube(paths["lbl"], "radf", thermal_bands="exclude")
    message = str(error.value)
    assert message.startswith(f"{paths['hdr']} gives band centres") and stated in message
    assert f"look like {likely}" in message
    # the right wavelengths given in a file replace the header's
    listing = tmp_path / "nm.txt"
    listing.write_text("".join(f"{v}\n" for v in M3_WAVELENGTHS))
    with ProductCube(
        paths["lbl"], "radf", thermal_bands="exclude", wavelengths_from=listing
    ) as cube:
        assert cube.info.bands == BANDS - 1  # 2976 nm left out (beyond 2.5 um)


# ----------------------------------------------------------------------------- solar spectrum units


def gueymard_like(path, header):
    """A spectrum from 0.5 nm to 1 mm in nm and W m^-2 nm^-1, as Gueymard (2004) is."""
    wavelength_nm = np.concatenate([[0.5, 10.0, 100.0], np.arange(200.0, 4000.0, 5.0), [1e6]])
    irradiance = 2.0 / (1.0 + ((wavelength_nm - 500.0) / 300.0) ** 2)  # smooth, positive
    path.write_text(
        header + "".join(f"{float(x)!r},{float(y)!r}\n" for x, y in zip(wavelength_nm, irradiance))
    )
    return wavelength_nm, irradiance


def test_a_solar_spectrum_in_nm_from_0_5_nm_is_read_in_the_unit_its_header_names(tmp_path):
    path = tmp_path / "gueymard.csv"
    wavelength_nm, irradiance = gueymard_like(path, "Wavelength (nm), Irradiance (W m-2 nm-1)\n")
    spectrum = load_solar_spectrum(path)
    np.testing.assert_array_equal(spectrum.wavelength_um, wavelength_nm * 1e-3)
    np.testing.assert_array_equal(spectrum.irradiance, irradiance * 1e3)  # per um
    assert "wavelengths in nm, from its header" in spectrum.source
    # no unit anywhere: refused, naming the file, never guessed from the first value
    wavelength_nm, irradiance = gueymard_like(path, "")
    with pytest.raises(
        ValueError, match=rf"solar spectrum file {re.escape(str(path))}: .*0\.5 to 1e\+06"
    ):
        load_solar_spectrum(path)
    spectrum = load_solar_spectrum(path, wavelength_unit="nm")  # said by the caller
    np.testing.assert_array_equal(spectrum.wavelength_um, wavelength_nm * 1e-3)
    np.testing.assert_array_equal(spectrum.irradiance, irradiance)
    gueymard_like(path, "wavelength_um,irradiance\n")
    with pytest.raises(ValueError, match=rf"{re.escape(str(path))}: its header gives .* in um"):
        load_solar_spectrum(path, wavelength_unit="nm")


OBS_RANGES = ((20, 60), (0, 360), (0, 20), (0, 360))  # sun zenith, azimuth, sensor's [deg]


def test_radiance_converted_to_implausible_i_over_f_names_the_solar_spectrum(tmp_path, w_true):
    rng = np.random.default_rng(5)
    deg, geometry = m3_obs(*(rng.uniform(a, b, (ROWS, COLS)) for a, b in OBS_RANGES))
    spectrum = solar_csv(tmp_path / "solar.csv")
    irradiance = band_irradiance(
        load_solar_spectrum(spectrum), np.asarray(M3_WAVELENGTHS) * 1e-3, np.asarray(M3_FWHM) * 1e-3
    )
    radiance = f32(reflectance(w_true, geometry) * irradiance / 0.9837**2)
    paths = write_m3_l1b(tmp_path, radiance, deg)
    with ProductCube(paths["rdn"], "radiance", solar_spectrum=spectrum) as cube:
        assert cube.info.bands == BANDS
    # the same spectrum in W m^-2 nm^-1 without saying so: I/F a thousand times too high
    text = spectrum.read_text().splitlines()
    per_nm = [text[0]] + [f"{x},{float(y) * 1e-3:.9g}" for x, y in (r.split(",") for r in text[1:])]
    spectrum.write_text("\n".join(per_nm) + "\n")
    with pytest.raises(ValueError) as error:
        ProductCube(paths["rdn"], "radiance", solar_spectrum=spectrum)
    message = str(error.value)
    assert f"with the solar spectrum {spectrum.resolve()} " in message
    assert "no reflectance takes" in message
