"""Geometry backplanes as missions ship them: M3 OBS, CRISM DDR, ISIS phocube, built here from
each product's documented layout (tiny, 4 x 5 pixels), inverted through invert_file and the CLI."""

import math
import warnings

import numpy as np
import pytest
import rasterio
from affine import Affine

import lumaxlike
from lumaxlike import Status, invert_file
from lumaxlike._cli import main
from lumaxlike._io import GeometryReader, read_cube
from lumaxlike._io.read.backplanes import find_roles, plan_geometry

PARAMS = lumaxlike.HapkeParams(b=0.2, c=0.4, roughness=math.radians(15.0))  # as tests/test_io.py
ROWS, COLS, BANDS = 4, 5, 3
CRS = "EPSG:32612"
TRANSFORM = Affine(30.0, 0.0, 500000.0, 0.0, -30.0, 4100000.0)
# M3 L1B OBS band names, in the order of the M3 Data Product SIS (JPL D-39032), OBS file
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
# CRISM DDR BAND_NAME, in the order of the CRISM Data Product SIS (DDR label)
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
# ISIS phocube BandBin Name values, in the order phocube writes them
PHOCUBE = (
    "Phase Angle",
    "Incidence Angle",
    "Emission Angle",
    "Local Emission Angle",
    "Local Incidence Angle",
)


def stored(values):
    """Angles as the products store them (float32 degrees)."""
    return np.asarray(values, dtype=np.float32)


def rad(values):
    return np.radians(np.asarray(values, dtype=np.float64))


@pytest.fixture(scope="module")
def scene():
    """Zenith/azimuth angles and facets [deg, float32], their angles, and true w."""
    rng = np.random.default_rng(11)
    deg = {
        "to_sun_zenith": stored(rng.uniform(20.0, 55.0, (ROWS, COLS))),
        "to_sun_azimuth": stored(rng.uniform(0.0, 360.0, (ROWS, COLS))),
        "to_sensor_zenith": stored(rng.uniform(0.0, 30.0, (ROWS, COLS))),
        "to_sensor_azimuth": stored(rng.uniform(0.0, 360.0, (ROWS, COLS))),
        "facet_slope": stored(rng.uniform(5.0, 25.0, (ROWS, COLS))),
        "facet_aspect": stored(rng.uniform(0.0, 360.0, (ROWS, COLS))),
    }
    to_sun = lumaxlike.direction_from_zenith_azimuth(
        rad(deg["to_sun_zenith"]), rad(deg["to_sun_azimuth"])
    )
    to_sensor = lumaxlike.direction_from_zenith_azimuth(
        rad(deg["to_sensor_zenith"]), rad(deg["to_sensor_azimuth"])
    )
    normal = lumaxlike.normal_from_slope_aspect(rad(deg["facet_slope"]), rad(deg["facet_aspect"]))
    flat = lumaxlike.angles_from_geometry(to_sun, to_sensor, [0.0, 0.0, 1.0])
    local = lumaxlike.angles_from_geometry(to_sun, to_sensor, normal)
    deg.update(
        incidence=stored(np.degrees(flat[0])),
        emission=stored(np.degrees(flat[1])),
        phase=stored(np.degrees(flat[2])),
        local_incidence=stored(np.degrees(local[0])),
        local_emission=stored(np.degrees(local[1])),
        facet_cos_i=stored(np.sum(to_sun * normal, axis=-1)),
    )
    w = rng.uniform(0.2, 0.8, (ROWS, COLS, BANDS))
    return {"deg": deg, "w": w, "vectors": (to_sun, to_sensor, normal)}


def synthesise(w, geometry):
    return np.asarray(lumaxlike.amsa(w, *geometry, PARAMS, backend="numba"))


def triplet_geometry(deg, incidence, emission):
    """The geometry an (i, e, g) backplane stores, as lumaxlike builds it from the stored values."""
    return lumaxlike.geometry_from_angles(
        rad(deg[incidence]), rad(deg[emission]), phase=rad(deg["phase"])
    )


def write_cube(path, r, **kwargs):
    with rasterio.open(
        path, "w", driver="GTiff", width=COLS, height=ROWS, count=BANDS, dtype="float64", **kwargs
    ) as dst:
        dst.write(np.moveaxis(r, -1, 0))
    return path


def write_m3_obs(path, deg, aspect_offset=0.0):
    """M3 OBS-like ENVI (BIL, float32, band names in the header); path lengths are placeholders."""
    bands = [
        deg["to_sun_azimuth"],
        deg["to_sun_zenith"],
        deg["to_sensor_azimuth"],
        deg["to_sensor_zenith"],
        deg["phase"],
        np.full((ROWS, COLS), 0.01),
        np.full((ROWS, COLS), 1.0e5),
        deg["facet_slope"],
        (deg["facet_aspect"] + aspect_offset) % 360.0,
        deg["facet_cos_i"],
    ]
    with rasterio.open(
        path,
        "w",
        driver="ENVI",
        width=COLS,
        height=ROWS,
        count=len(bands),
        dtype="float32",
        crs=CRS,
        transform=TRANSFORM,
        interleave="bil",
    ) as dst:
        dst.write(stored(bands))
        for index, name in enumerate(M3_OBS, start=1):
            dst.set_band_description(index, name)
    return path


def test_m3_obs_facets_are_used_and_recorded(tmp_path, scene):
    w_true = scene["w"]
    cube = write_cube(
        tmp_path / "m3_rfl.tif", synthesise(w_true, scene["vectors"]), crs=CRS, transform=TRANSFORM
    )
    obs = write_m3_obs(tmp_path / "M3_OBS.IMG", scene["deg"])
    invert_file(cube, tmp_path / "w.tif", geometry=obs, params=PARAMS, solver="numba", units="r")
    w, _ = read_cube(tmp_path / "w.tif")
    np.testing.assert_allclose(w, w_true, rtol=0, atol=1e-8)
    layout = lumaxlike.read_provenance(tmp_path / "w.tif").geometry_layout
    assert (
        layout["surface"] == "local" and layout["bands"]["facet_aspect"] == "band 9: Facet Aspect"
    )
    assert layout["checked"] == {"facet_cos_i": "band 10: Facet Cos i"}
    # leaving the facets out is a choice, recorded; it changes w (the surface is then flat)
    invert_file(
        cube,
        tmp_path / "flat.tif",
        geometry=obs,
        params=PARAMS,
        solver="numba",
        units="r",
        surface="ellipsoid",
    )
    flat_w, _ = read_cube(tmp_path / "flat.tif")
    assert np.nanmax(np.abs(flat_w - w_true)) > 0.05
    flat = lumaxlike.read_provenance(tmp_path / "flat.tif")
    assert flat.surface == "ellipsoid" and set(flat.geometry_layout["not_read"]) == {
        "facet_slope",
        "facet_aspect",
        "facet_cos_i",
    }


def test_m3_obs_with_another_aspect_convention_or_half_the_facets_is_refused(tmp_path, scene):
    cube = write_cube(
        tmp_path / "c.tif", synthesise(scene["w"], scene["vectors"]), crs=CRS, transform=TRANSFORM
    )
    grid = read_cube(cube)[1].grid
    upslope = write_m3_obs(tmp_path / "up_OBS.IMG", scene["deg"], aspect_offset=180.0)
    with (
        GeometryReader(upslope, grid) as reader,
        pytest.raises(ValueError, match="Facet Cos i.*disagrees.*downslope"),
    ):
        reader.read(slice(0, ROWS))
    with pytest.raises(ValueError, match="Facet Cos i.*disagrees"):
        invert_file(
            cube, tmp_path / "w.tif", geometry=upslope, params=PARAMS, solver="numba", units="r"
        )
    assert not list(tmp_path.glob("w*"))  # no partial output
    descriptions = [name for name in M3_OBS if name != "Facet Aspect"]
    found = find_roles(descriptions, "obs")
    with pytest.raises(ValueError, match="facet_slope.*cannot be used alone.*ellipsoid"):
        plan_geometry(found)
    assert plan_geometry(found, surface="ellipsoid").unused == ("facet_slope", "facet_cos_i")
    with pytest.raises(ValueError, match="two sources of local slopes"):
        plan_geometry(find_roles(M3_OBS, "obs"), dtm=True)


def test_unmatched_backplane_lists_what_it_found_and_what_it_expects(tmp_path):
    path = tmp_path / "loc.tif"
    with rasterio.open(
        path,
        "w",
        driver="GTiff",
        width=COLS,
        height=ROWS,
        count=3,
        dtype="float32",
        crs=CRS,
        transform=TRANSFORM,
    ) as dst:
        dst.write(np.zeros((3, ROWS, COLS), np.float32))
        for index, name in enumerate(("Longitude", "Latitude", "Phase angle, deg"), start=1):
            dst.set_band_description(index, name)
    grid = read_cube(path)[1].grid
    with pytest.raises(ValueError) as error:
        GeometryReader(path, grid)
    message = str(error.value)
    for text in (
        "loc.tif",
        "'Latitude'",
        "roles recognised: phase",
        "to_sun_zenith",
        "incidence",
        "'ina at areoid'",
        "emission",
    ):
        assert text in message


def write_crism_ddr(folder, deg):
    """CRISM DDR-like PDS3 product: a label with BAND_NAME and a band-sequential float32 image."""
    latitude = np.linspace(-5.0, -4.9, ROWS * COLS).reshape(ROWS, COLS)
    values = {
        "INA at areoid, deg": deg["incidence"],
        "EMA at areoid, deg": deg["emission"],
        "Phase angle, deg": deg["phase"],
        "Latitude, areocentric, deg N": latitude,
        "Longitude, areocentric, deg E": latitude + 140.0,
        "INA at surface from MOLA, deg": deg["local_incidence"],
        "EMA at surface from MOLA, deg": deg["local_emission"],
        "Slope magnitude from MOLA, deg": deg["facet_slope"],
        "MOLA slope azimuth, deg clkwise from N": deg["facet_aspect"],
    }
    image = stored([values.get(name, np.full((ROWS, COLS), 65535.0)) for name in CRISM_DDR])
    (folder / "FRT0000A_07_DE166L_DDR1.IMG").write_bytes(image.astype("<f4").tobytes())
    names = ", ".join(f'"{name}"' for name in CRISM_DDR)
    label = folder / "FRT0000A_07_DE166L_DDR1.LBL"
    label.write_text(f"""PDS_VERSION_ID = PDS3
RECORD_TYPE = FIXED_LENGTH
RECORD_BYTES = {COLS * 4}
FILE_RECORDS = {ROWS * len(CRISM_DDR)}
^IMAGE = "FRT0000A_07_DE166L_DDR1.IMG"
OBJECT = IMAGE
  LINES = {ROWS}
  LINE_SAMPLES = {COLS}
  BANDS = {len(CRISM_DDR)}
  BAND_STORAGE_TYPE = BAND_SEQUENTIAL
  SAMPLE_TYPE = PC_REAL
  SAMPLE_BITS = 32
  BAND_NAME = ({names})
END_OBJECT = IMAGE
END
""")
    return label


def test_crism_ddr_local_angles_by_default_ellipsoid_on_request(tmp_path, scene):
    deg = dict(scene["deg"])
    w_true = scene["w"]
    local = triplet_geometry(deg, "local_incidence", "local_emission")
    r = synthesise(w_true, local)
    # one pixel whose phase is inconsistent with its local angles (g < |i - e| - 1 deg)
    deg["phase"] = deg["phase"].copy()
    deg["phase"][0, 0] = abs(deg["local_incidence"][0, 0] - deg["local_emission"][0, 0]) - 1.0
    with warnings.catch_warnings():  # DDRs are in sensor geometry: GDAL finds no georeferencing
        warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)
        ddr = write_crism_ddr(tmp_path, deg)
        cube = write_cube(tmp_path / "trr3_if.tif", r)
        summary = invert_file(
            cube, tmp_path / "w.tif", geometry=ddr, params=PARAMS, solver="numba", units="r"
        )
        w, _ = read_cube(tmp_path / "w.tif")
        status, _ = read_cube(tmp_path / "w_status.tif")
        layout = lumaxlike.read_provenance(tmp_path / "w.tif").geometry_layout
        ellipsoid = GeometryReader(ddr, read_cube(cube)[1].grid, surface="ellipsoid")
        with ellipsoid:
            flat = ellipsoid.read(slice(0, ROWS))
    assert (status[0, 0] == Status.NONFINITE_INPUT).all() and np.isnan(w[0, 0]).all()
    assert summary.status_counts["NONFINITE_INPUT"] == BANDS
    w_true = w_true.copy()
    w_true[0, 0] = np.nan
    np.testing.assert_allclose(w, w_true, rtol=0, atol=1e-8)
    assert layout["surface"] == "local"
    assert layout["bands"] == {
        "local_incidence": "band 6: INA at surface from MOLA, deg",
        "local_emission": "band 7: EMA at surface from MOLA, deg",
        "phase": "band 3: Phase angle, deg",
    }
    assert set(layout["not_read"]) == {"facet_slope", "facet_aspect"}  # already in the local angles
    expected = triplet_geometry(deg, "incidence", "emission")
    for got, want in zip(flat, expected):
        np.testing.assert_allclose(got[1:], want[1:], atol=1e-15)


def write_phocube(path, deg):
    """ISIS phocube-like cube: an attached PVL label (BandBin Name, Mapping) and BSQ float32 data."""
    names = ", ".join(f'"{name}"' for name in PHOCUBE)
    roles = ("phase", "incidence", "emission", "local_emission", "local_incidence")
    label = f"""Object = IsisCube
  Object = Core
    StartByte = 4097
    Format    = BandSequential
    Group = Dimensions
      Samples = {COLS}
      Lines   = {ROWS}
      Bands   = {len(PHOCUBE)}
    End_Group
    Group = Pixels
      Type       = Real
      ByteOrder  = Lsb
      Base       = 0.0
      Multiplier = 1.0
    End_Group
  End_Object
  Group = BandBin
    Name = ({names})
  End_Group
  Group = Mapping
    ProjectionName     = Equirectangular
    CenterLongitude    = 0.0
    CenterLatitude     = 0.0
    TargetName         = Moon
    EquatorialRadius   = 1737400.0 <meters>
    PolarRadius        = 1737400.0 <meters>
    LatitudeType       = Planetocentric
    LongitudeDirection = PositiveEast
    LongitudeDomain    = 360
    PixelResolution    = 30.0 <meters/pixel>
    UpperLeftCornerX   = 3000.0 <meters>
    UpperLeftCornerY   = 6000.0 <meters>
  End_Group
End_Object
End
"""
    data = stored([deg[role] for role in roles]).astype("<f4")
    path.write_bytes(label.encode().ljust(4096, b" ") + data.tobytes())
    return path


def test_isis_phocube_through_the_command_line(tmp_path, capsys, scene):
    deg, w_true = scene["deg"], scene["w"]
    phocube = write_phocube(tmp_path / "phocube.cub", deg)
    with rasterio.open(phocube) as src:
        grid = {"crs": src.crs, "transform": src.transform}
    cube = write_cube(
        tmp_path / "lroc.tif",
        synthesise(w_true, triplet_geometry(deg, "local_incidence", "local_emission")),
        **grid,
    )
    out = tmp_path / "w.tif"
    code = main(
        [
            "invert",
            cube,
            "--geometry",
            phocube,
            "--units",
            "r",
            "--solver",
            "numba",
            "--b",
            "0.2",
            "--c",
            "0.4",
            "--roughness-deg",
            "15",
            "--out",
            out,
        ]
    )
    assert code == 0, capsys.readouterr().err
    np.testing.assert_allclose(read_cube(out)[0], w_true, rtol=0, atol=1e-8)
    record = lumaxlike.read_provenance(out)
    assert (
        record.surface == "local"
        and "local incidence and emission" in record.geometry_layout["layout"]
    )
    # --surface local on a backplane without local angles: exit 2, naming what is missing
    obs = tmp_path / "ellipsoid_only.tif"
    with rasterio.open(
        obs, "w", driver="GTiff", width=COLS, height=ROWS, count=3, dtype="float32", **grid
    ) as dst:
        dst.write(stored([deg["phase"], deg["incidence"], deg["emission"]]))
        for index, name in enumerate(PHOCUBE[:3], start=1):
            dst.set_band_description(index, name)
    code = main(
        [
            "invert",
            cube,
            "--geometry",
            obs,
            "--units",
            "r",
            "--surface",
            "local",
            "--out",
            tmp_path / "v.tif",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "no local-surface bands" in err and "ellipsoid_only.tif" in err


# AVIRIS-NG / AVIRIS-3 / EMIT OBS band names (JPL orthorectification, ENVI header)
EMIT_OBS = (
    "Path length (m)",
    "To-sensor azimuth (0 to 360 degrees cw from N)",
    "To-sensor zenith (0 to 90 degrees from zenith)",
    "To-sun azimuth (0 to 360 degrees cw from N)",
    "To-sun zenith (0 to 90 degrees from zenith)",
    "Solar phase",
    "Slope",
    "Aspect",
    "Cosine(i)",
    "UTC Time",
    "Earth-sun distance (AU)",
)


@pytest.mark.parametrize(
    "names, auto, ellipsoid",
    [
        (
            M3_OBS,
            (
                "local",
                "facets",
                (
                    "to_sun_zenith",
                    "to_sun_azimuth",
                    "to_sensor_zenith",
                    "to_sensor_azimuth",
                    "facet_slope",
                    "facet_aspect",
                ),
            ),
            "to_sun_zenith",
        ),
        (
            EMIT_OBS,
            (
                "local",
                "facets",
                (
                    "to_sun_zenith",
                    "to_sun_azimuth",
                    "to_sensor_zenith",
                    "to_sensor_azimuth",
                    "facet_slope",
                    "facet_aspect",
                ),
            ),
            "to_sun_zenith",
        ),
        (CRISM_DDR, ("local", "flat", ("local_incidence", "local_emission", "phase")), "incidence"),
        (
            tuple(n.replace(", ", "; ") for n in CRISM_DDR),  # ENVI copies of DDRs
            ("local", "flat", ("local_incidence", "local_emission", "phase")),
            "incidence",
        ),
        (PHOCUBE, ("local", "flat", ("local_incidence", "local_emission", "phase")), "incidence"),
    ],
)
def test_each_products_band_names_resolve_to_its_layout(names, auto, ellipsoid):
    found = find_roles(names, "backplane")
    plan = plan_geometry(found)
    assert (plan.surface, plan.normals, plan.roles) == auto
    assert plan_geometry(found, surface="local") == plan
    flat = plan_geometry(found, surface="ellipsoid")
    assert flat.surface == "ellipsoid" and flat.roles[0] == ellipsoid and flat.normals == "flat"
    assert set(flat.unused) == {r for r in found if r.startswith(("facet", "local"))}
    four = {"to_sun_zenith", "to_sun_azimuth", "to_sensor_zenith", "to_sensor_azimuth"}
    assert (plan_geometry(four, dtm=True).surface, plan_geometry(four, dtm=True).normals) == (
        "local",
        "dtm",
    )


@pytest.mark.parametrize(
    ("band", "value", "problem"),
    [
        ("to_sun_zenith", 400.0, "400"),
        ("to_sun_zenith", -20.0, "-20"),
        ("to_sensor_zenith", 181.0, "181"),
        ("to_sensor_zenith", -0.5, "-0.5"),
        ("facet_slope", 95.0, "95"),
        ("to_sun_azimuth", np.inf, "inf"),
    ],
)
def test_out_of_range_obs_angles_are_refused_naming_band_and_file(
    tmp_path, scene, band, value, problem
):
    """A zenith of 400 deg was read as 40 deg, a negative one mirrored (CONVERGED, w off):
    every angle band's range is checked where the geometry is read."""
    deg = {k: v.copy() for k, v in scene["deg"].items()}
    deg[band][2, 3] = value
    obs = write_m3_obs(tmp_path / "bad_OBS.IMG", deg)
    grid = read_cube(
        write_cube(
            tmp_path / "c.tif",
            synthesise(scene["w"], scene["vectors"]),
            crs=CRS,
            transform=TRANSFORM,
        )
    )[1].grid
    name = (
        M3_OBS[
            (
                "to_sun_azimuth",
                "to_sun_zenith",
                "to_sensor_azimuth",
                "to_sensor_zenith",
                "phase",
            ).index(band)
        ]
        if band != "facet_slope"
        else "Facet Slope"
    )
    with GeometryReader(obs, grid) as reader, pytest.raises(ValueError) as error:
        reader.read(slice(0, ROWS))
    message = str(error.value)
    assert "bad_OBS.IMG" in message and name in message and f"{problem}" in message
    assert "row 2, column 3" in message


def test_zenith_beyond_90_deg_is_a_status_and_azimuths_wrap(tmp_path, scene):
    deg = {k: v.copy() for k, v in scene["deg"].items()}
    deg["to_sun_zenith"][0, 0] = 120.0  # the sun below the horizon: a status, not an error
    wrapped = {k: v.copy() for k, v in deg.items()}
    for role in ("to_sun_azimuth", "to_sensor_azimuth", "facet_aspect"):
        wrapped[role] = deg[role].astype(np.float64) - 720.0
    grid = read_cube(
        write_cube(
            tmp_path / "c.tif",
            synthesise(scene["w"], scene["vectors"]),
            crs=CRS,
            transform=TRANSFORM,
        )
    )[1].grid
    with GeometryReader(
        {
            r: deg[r]
            for r in ("to_sun_zenith", "to_sun_azimuth", "to_sensor_zenith", "to_sensor_azimuth")
        },
        grid,
    ) as reader:
        plain = reader.read(slice(0, ROWS))
    with GeometryReader(
        {
            r: wrapped[r]
            for r in ("to_sun_zenith", "to_sun_azimuth", "to_sensor_zenith", "to_sensor_azimuth")
        },
        grid,
    ) as reader:
        turned = reader.read(slice(0, ROWS))
    triplet = {r: deg[r] for r in ("incidence", "emission")} | {
        "phase": np.full((ROWS, COLS), 200.0)
    }
    with (
        GeometryReader(triplet, grid) as reader,
        pytest.raises(ValueError, match=r"geometry\['phase'\].*200"),
    ):
        reader.read(slice(0, ROWS))
    for a, b in zip(plain, turned):
        np.testing.assert_allclose(a, b, rtol=0, atol=1e-12)  # sin/cos of a - 4 pi: rounding only
    result = lumaxlike.invert(np.full((ROWS, COLS, 1), 0.05), *plain, PARAMS, solver="numba")
    assert result.status[0, 0, 0] == Status.INVALID_GEOMETRY
    assert np.all(result.status.ravel()[1:] == Status.CONVERGED)
