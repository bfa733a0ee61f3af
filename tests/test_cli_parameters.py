"""``lumaxlike parameters``: a run that computes nothing exits 1; its summary says what is
true of it (no status: the pixels with a value); ``--quantity normalized`` reads a
`normalize` output (tagged 1/sr) as it is. And what every file run's summary counts its
statuses of (pixel-bands, or pixels for thermal and unmix)."""

import numpy as np
import pytest
import rasterio

import lumaxlike

from .test_cli import run
from .test_io import write_raster
from .test_spectral_parameters_file import BANDS_NM, m3_like, product_paths

PRODUCTS = "BDI1000,FeO"


def write_cube(path, values, units=None):
    """``values`` (rows, cols, bands) at M3's bands, its units tag ``units`` if given."""
    write_raster(path, np.moveaxis(values, -1, 0), envi_wavelengths=BANDS_NM.tolist())
    if units is not None:
        with rasterio.open(path, "r+") as dataset:
            dataset.update_tags(units=units)
    return path


def parameters(capsys, cube, out, *extra):
    return run(capsys, "parameters", cube, "--products", PRODUCTS, "--out", out, *extra)


def test_an_all_nan_cube_exits_1_saying_nothing_was_computed(tmp_path, capsys):
    """Before: exit 0, the summary "status of pixel-bands: none"."""
    cube = write_cube(tmp_path / "nan.tif", np.full((3, 4, BANDS_NM.size), np.nan, np.float32))
    out = tmp_path / "p.tif"
    code, err = parameters(capsys, cube, out, "--quantity", "w")
    assert code == 1, err
    lines = err.strip().splitlines()
    assert "pixels with a finite value: 0 of 12" in lines[0] and "status of" not in err
    assert lines[-1].startswith("lumaxlike parameters: error: nothing computed"), err
    for path in product_paths(out, PRODUCTS.split(",")).values():  # written, all NaN
        assert np.all(np.isnan(lumaxlike.read_cube(path)[0]))


def test_the_summary_counts_the_pixels_with_a_value(tmp_path, capsys):
    """Before: "status of pixel-bands: none" for every run."""
    values = m3_like()
    values[1] = np.nan  # a row of nodata: 4 of 20 pixels without products
    cube = write_cube(tmp_path / "w.tif", values)
    code, err = parameters(capsys, cube, tmp_path / "p.tif", "--quantity", "w")
    assert code == 0, err
    assert err.strip().endswith("pixels with a finite value: 16 of 20"), err


def test_quantity_normalized_reads_a_normalize_output_tagged_r(tmp_path, capsys):
    """A `normalize` output of an r cube tags its values sr-1. Before: refused as
    contradicting "--units radf", an option not given."""
    values = m3_like() / np.float32(np.pi)  # r [1/sr]
    cube = write_cube(tmp_path / "n.tif", values, units="sr-1")
    out = tmp_path / "p.tif"
    code, err = parameters(capsys, cube, out, "--quantity", "normalized")
    assert code == 0, err
    expected = lumaxlike.spectral_parameters(
        values, BANDS_NM / 1000.0, PRODUCTS.split(","), quantity="normalized"
    )
    found = lumaxlike.read_cube(product_paths(out, ["BDI1000"])["BDI1000"])[0][..., 0]
    np.testing.assert_array_equal(found, expected["BDI1000"])
    assert lumaxlike.read_provenance(out).spectral_settings["quantity"] == "normalized"
    # a reflectance quantity the tag contradicts: refused in the options given
    code, err = parameters(capsys, cube, tmp_path / "q.tif", "--quantity", "radf")
    assert code == 2 and "contradicts quantity='radf'" in err and "--quantity r" in err, err
    assert "--units radf" not in err


@pytest.mark.parametrize(
    "operation, expected",
    [("invert", "pixel-bands"), ("thermal", "pixels"), ("spectral", None)],
)
def test_the_status_counts_are_said_to_be_of_what_the_status_map_holds(operation, expected):
    """Before: "status of pixel-bands" for thermal, whose status is one per pixel."""
    from lumaxlike._files.outputs import status_unit
    from lumaxlike._operations.invert import INVERT
    from lumaxlike._operations.spectral import SPECTRAL_PARAMETERS
    from lumaxlike._operations.thermal import THERMAL
    from lumaxlike._run.progress import InversionSummary

    declared = {"invert": INVERT, "thermal": THERMAL, "spectral": SPECTRAL_PARAMETERS}[operation]
    layout = {
        "invert": lambda: declared.layout("r"),
        "thermal": lambda: declared.layout("r"),
        "spectral": lambda: declared.layout(["FeO"]),
    }[operation]()
    fields = ["FeO"] if operation == "spectral" else declared.fields
    assert status_unit(fields, layout) == expected
    counts = {"CONVERGED": 3, "NOT_CONSTRAINED": 1}
    line = InversionSummary({}, 4, 2, 1.0, counts, status_of=expected, valued_pixels=4).describe()
    if expected is None:
        assert line.endswith("pixels with a finite value: 4 of 4") and "status" not in line
    else:
        assert line.endswith(f"status of {expected}: CONVERGED 3, NOT_CONSTRAINED 1")


def test_tolerance_in_um_and_the_old_tolerance_in_nm_give_the_same_run(tmp_path, capsys):
    """``--tolerance-nm 12``, the flag users typed (nm), is ``--tolerance 0.012`` (um, as in
    Python and the record): the same maps and record, with a warning giving the new
    spelling; 0.1 nm refuses the products whose bands lie farther off, by name."""
    cube = write_cube(tmp_path / "w.tif", m3_like())
    names = PRODUCTS.split(",")
    runs = {}
    for spelling, flags in (("nm", ["--tolerance-nm", "12"]), ("um", ["--tolerance", "0.012"])):
        out = tmp_path / f"{spelling}.tif"
        code, err = parameters(capsys, cube, out, "--quantity", "w", *flags)
        assert code == 0, err
        assert lumaxlike.read_provenance(out).spectral_settings["tolerance"] == 0.012
        runs[spelling] = (product_paths(out, names), err)
    assert "--tolerance-nm is deprecated; use --tolerance 0.012" in runs["nm"][1]
    assert "deprecated" not in runs["um"][1]
    for name in names:
        np.testing.assert_array_equal(
            lumaxlike.read_cube(runs["nm"][0][name])[0], lumaxlike.read_cube(runs["um"][0][name])[0]
        )
    out = tmp_path / "x.tif"
    code, err = parameters(capsys, cube, out, "--quantity", "w", "--tolerance-nm", "0.1")
    assert code == 2 and "tolerance=0.0001" in err, err
    assert not out.exists()
