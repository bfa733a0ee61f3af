"""Tiny mission products written byte by byte from their archives' documented layouts
(never with lumaxlike's writer): M3 L2 and L1B (Chandrayaan-1 M3 Data Product SIS, JPL
D-39032: BIL float32 images, ENVI ``.HDR`` headers, PDS3 ``_L2.LBL`` / ``_L1B.LBL`` labels
with ``RFL_FILE`` / ``RDN_FILE`` / ``OBS_FILE`` wrapper objects), CRISM TRDR I/F, MTRDR and
DDR (CRISM Data Product SIS: detached ``.LBL``, no header, 65535 invalid), ISIS3 cubes (an
attached PVL label with a ``BandBin`` group)."""

import numpy as np

ROWS, COLS = 3, 4
#: M3 band centres [nm] (global mode bands 5, 20, 45, 75, 84 of the 85) and widths
M3_WAVELENGTHS = (540.84, 1009.99, 1508.97, 2498.03, 2976.20)
M3_FWHM = (20.0, 40.0, 40.0, 40.0, 40.0)
M3_BBL = (1, 1, 0, 1, 1)  # band 3 marked bad (as the archive's bbl marks some)
M3_OBS = (
    "To-Sun AZM",
    "To-Sun Zenith",
    "To-Inst AZM",
    "To-Inst Zenith",
    "Phase",
    "To-Sun Path Length",
    "To-Inst Path Length",
    "Facet Slope",
    "Facet Aspect",
    "Facet Cos i",
)
CRISM_DDR = (
    "INA at areoid, deg",
    "EMA at areoid, deg",
    "Phase angle, deg",
    "Latitude, areocentric, deg N",
    "Longitude, areocentric, deg E",
    "INA at surface from MOLA, deg",
    "EMA at surface from MOLA, deg",
    "Slope magnitude from MOLA, deg",
    "MOLA slope azimuth, deg clkwise from N",
    "Elevation, meters relative to MOLA",
    "Thermal inertia, J m^-2 K^-1 s^-0.5",
    "Bolometic albedo",
    "Local solar time, hours",
    "Spare",
)
M3_BASE = "M3G20090106T223159_V01"


def _bil(cube) -> bytes:
    """(rows, cols, bands) -> BIL float32 little-endian bytes (line by line, band by band)."""
    return np.ascontiguousarray(np.moveaxis(np.asarray(cube, "<f4"), 2, 1)).tobytes()


def _bsq(cube) -> bytes:
    return np.ascontiguousarray(np.moveaxis(np.asarray(cube, "<f4"), 2, 0)).tobytes()


def _envi_header(bands, *, wavelengths=None, fwhm=None, bbl=None, names=None, ignore=-999):
    lines = [
        "ENVI",
        "description = {M3 product}",
        f"samples = {COLS}",
        f"lines = {ROWS}",
        f"bands = {bands}",
        "header offset = 0",
        "file type = ENVI Standard",
        "data type = 4",
        "interleave = bil",
        "byte order = 0",
        f"data ignore value = {ignore}",
    ]
    if wavelengths is not None:
        lines += [
            "wavelength units = Nanometers",
            "wavelength = {" + ", ".join(f"{v:.2f}" for v in wavelengths) + "}",
        ]
    if fwhm is not None:
        lines.append("fwhm = {" + ", ".join(f"{v:.2f}" for v in fwhm) + "}")
    if bbl is not None:
        lines.append("bbl = {" + ", ".join(str(v) for v in bbl) + "}")
    if names is not None:
        lines.append("band names = {" + ", ".join(names) + "}")
    return "\n".join(lines) + "\n"


def _image_object(name, bands, unit, storage="LINE_INTERLEAVED", invalid=-999.0, indent="  "):
    return (
        "\n".join(
            f"{indent}{line}"
            for line in (
                f"OBJECT = {name}",
                f"  LINES = {ROWS}",
                f"  LINE_SAMPLES = {COLS}",
                "  SAMPLE_TYPE = PC_REAL",
                "  SAMPLE_BITS = 32",
                f'  UNIT = "{unit}"',
                f"  BANDS = {bands}",
                f"  BAND_STORAGE_TYPE = {storage}",
                f"  INVALID_CONSTANT = {invalid}",
                f"END_OBJECT = {name}",
            )
        )
        + "\n"
    )


def _file_object(kind, data_name, bands, unit):
    return (
        f'OBJECT = {kind}_FILE\n  ^{kind}_IMAGE = "{data_name}"\n'
        f"  RECORD_TYPE = FIXED_LENGTH\n  RECORD_BYTES = {COLS * 4}\n"
        f"  FILE_RECORDS = {ROWS * bands}\n"
        + _image_object(f"{kind}_IMAGE", bands, unit, indent="  ")
        + f"END_OBJECT = {kind}_FILE\n"
    )


def write_m3_l2(folder, if_values, *, lower_case=False):
    """An M3 L2 product: ``*_RFL.IMG`` (I/F at i = 30, e = 0, g = 30), ``*_RFL.HDR``,
    ``*_L2.LBL``. Returns ``{"img", "hdr", "lbl"}`` paths."""
    names = {
        "img": f"{M3_BASE}_RFL.IMG",
        "hdr": f"{M3_BASE}_RFL.HDR",
        "lbl": f"{M3_BASE}_L2.LBL",
    }
    if lower_case:
        names = {key: name.lower() for key, name in names.items()}
    paths = {key: folder / name for key, name in names.items()}
    paths["img"].write_bytes(_bil(if_values))
    paths["hdr"].write_text(
        _envi_header(len(M3_WAVELENGTHS), wavelengths=M3_WAVELENGTHS, fwhm=M3_FWHM, bbl=M3_BBL)
    )
    paths["lbl"].write_text(
        'PDS_VERSION_ID = PDS3\nDATA_SET_ID = "CH1-ORB-L-M3-4-L2-REFLECTANCE-V1.0"\n'
        f'PRODUCT_ID = "{M3_BASE}_L2"\nINSTRUMENT_ID = "M3"\nTARGET_NAME = "MOON"\n'
        'PRODUCT_TYPE = "CALIBRATED_IMAGE"\nSOLAR_DISTANCE = 0.9837 <AU>\n'
        'CH1:THERMAL_CORRECTION_FLAG = "Y"\n'
        'CH1:PHOTOMETRY_CORR_FILE_NAME = "M3G20111109_RFL_F_ALPHA_HIL.TAB"\n'
        + _file_object("RFL", names["img"], len(M3_WAVELENGTHS), "N/A")
        + "END\n"
    )
    return paths


def write_m3_l1b(folder, radiance, obs):
    """An M3 L1B product: ``*_RDN.IMG``/``.HDR`` [W m^-2 um^-1 sr^-1], ``*_OBS.IMG``/``.HDR``
    (10 bands, ``M3_OBS`` names), ``*_L1B.LBL`` with ``RDN_FILE`` and ``OBS_FILE``.
    ``obs``: ``{band name: (rows, cols) array}``. Returns the paths."""
    paths = {
        key: folder / f"{M3_BASE}_{key.upper()}.{ext}"
        for key, ext in (("rdn", "IMG"), ("obs", "IMG"))
    }
    paths["rdn_hdr"] = folder / f"{M3_BASE}_RDN.HDR"
    paths["obs_hdr"] = folder / f"{M3_BASE}_OBS.HDR"
    paths["lbl"] = folder / f"{M3_BASE}_L1B.LBL"
    paths["rdn"].write_bytes(_bil(radiance))
    paths["rdn_hdr"].write_text(
        _envi_header(len(M3_WAVELENGTHS), wavelengths=M3_WAVELENGTHS, fwhm=M3_FWHM)
    )
    obs_cube = np.stack([obs.get(name, np.zeros((ROWS, COLS))) for name in M3_OBS], axis=-1)
    paths["obs"].write_bytes(_bil(obs_cube))
    paths["obs_hdr"].write_text(_envi_header(len(M3_OBS), names=M3_OBS))
    paths["lbl"].write_text(
        'PDS_VERSION_ID = PDS3\nDATA_SET_ID = "CH1-ORB-L-M3-4-L1B-RADIANCE-V3.0"\n'
        f'PRODUCT_ID = "{M3_BASE}_L1B"\nINSTRUMENT_ID = "M3"\nTARGET_NAME = "MOON"\n'
        "SOLAR_DISTANCE = 0.9837 <AU>\n"
        + _file_object("RDN", paths["rdn"].name, len(M3_WAVELENGTHS), "W/(m^2 um sr)")
        + _file_object("OBS", paths["obs"].name, len(M3_OBS), "N/A")
        + "END\n"
    )
    return paths


def write_m3_solar_table(folder, wavelength_nm, irradiance, name="M3G20110224_RFL_SOLAR_SPEC"):
    """An M3 L2 solar-spectrum table as its archive label describes it (PDS4 migration:
    MillionConcepts/m3-conversion, ``m3g20110224_rfl_solar_spec.xml``): CRLF records of 26
    bytes, "Wavelength" [nm] in bytes 1-11 and "Solar Irradiance" [W/(m^2 um)] in bytes
    14-24, one row per band (as in the archive's target-mode table, `` 446.019989
    1915.545166``). Returns the ``.TAB`` path."""
    rows = "".join(f"{x:11.6f}  {y:11.6f}\r\n" for x, y in zip(wavelength_nm, irradiance))
    assert all(len(record) == 26 for record in rows.splitlines(keepends=True))
    table = folder / f"{name}.TAB"
    table.write_bytes(rows.encode("ascii"))
    return table


def write_crism(folder, values, product="FRT00003E12_07_IF166L_TRR3", wavelengths_file=True):
    """A CRISM I/F image (TRDR ``_TRR3``, MTRDR ``_MTR3`` or TER ``_TER3``): a BIL float32
    ``.IMG`` and its detached ``.LBL`` (no header; 65535 invalid). Returns the label."""
    image = folder / f"{product}.IMG"
    image.write_bytes(_bil(values))
    bands = np.shape(values)[-1]
    wa = (
        'MRO:WAVELENGTH_FILE_NAME = "CDR410803692813_WA0000000L_3.IMG"\n'
        if wavelengths_file
        else ""
    )
    label = folder / f"{product}.LBL"
    label.write_text(
        'PDS_VERSION_ID = PDS3\nDATA_SET_ID = "MRO-M-CRISM-3-RDR-TARGETED-V1.0"\n'
        f'PRODUCT_ID = "{product}"\nINSTRUMENT_ID = "CRISM"\nTARGET_NAME = "MARS"\n'
        f"SOLAR_DISTANCE = 227936637 <KM>\n{wa}RECORD_TYPE = FIXED_LENGTH\n"
        f'RECORD_BYTES = {COLS * 4}\nFILE_RECORDS = {ROWS * bands}\n^IMAGE = "{image.name}"\n'
        + _image_object("IMAGE", bands, "N/A", invalid=65535.0, indent="")
        + "END\n"
    )
    return label


def write_crism_ddr(folder, deg, product="FRT00003E12_07_DE166L_DDR1"):
    """A CRISM DDR: 14 bands named by ``BAND_NAME``, BSQ float32, 65535 where not given.
    ``deg``: ``{band name: (rows, cols) array}``. Returns the ``.IMG`` path."""
    cube = np.stack([deg.get(name, np.full((ROWS, COLS), 65535.0)) for name in CRISM_DDR], -1)
    image = folder / f"{product}.IMG"
    image.write_bytes(_bsq(cube))
    names = ", ".join(f'"{name}"' for name in CRISM_DDR)
    (folder / f"{product}.LBL").write_text(
        f"PDS_VERSION_ID = PDS3\nRECORD_TYPE = FIXED_LENGTH\nRECORD_BYTES = {COLS * 4}\n"
        f'FILE_RECORDS = {ROWS * len(CRISM_DDR)}\n^IMAGE = "{image.name}"\nOBJECT = IMAGE\n'
        f"  LINES = {ROWS}\n  LINE_SAMPLES = {COLS}\n  BANDS = {len(CRISM_DDR)}\n"
        "  BAND_STORAGE_TYPE = BAND_SEQUENTIAL\n  SAMPLE_TYPE = PC_REAL\n  SAMPLE_BITS = 32\n"
        f"  BAND_NAME = ({names})\nEND_OBJECT = IMAGE\nEND\n"
    )
    return image


def write_isis3(path, values, centres, width_unit=None):
    """An ISIS3 cube: attached PVL label (``BandBin`` ``Center`` without a unit, as ISIS's
    M3 import writes nm; ``Width`` with ``width_unit`` when given), BSQ float32 after it."""
    bands = np.shape(values)[-1]
    unit = f" <{width_unit}>" if width_unit else ""
    label = (
        f"Object = IsisCube\n  Object = Core\n    StartByte = 65537\n"
        f"    Format = BandSequential\n    Group = Dimensions\n      Samples = {COLS}\n"
        f"      Lines = {ROWS}\n      Bands = {bands}\n    End_Group\n"
        "    Group = Pixels\n      Type = Real\n      ByteOrder = Lsb\n      Base = 0.0\n"
        "      Multiplier = 1.0\n    End_Group\n  End_Object\n  Group = BandBin\n"
        "    Center = (" + ", ".join(f"{c:.2f}" for c in centres) + ")\n"
        "    Width = (" + ", ".join("40.0" for _ in centres) + f"){unit}\n"
        "  End_Group\nEnd_Object\nEnd\n"
    )
    path.write_bytes(label.encode().ljust(65536, b" ") + _bsq(values))
    return path
