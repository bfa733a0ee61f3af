"""`lumaxlike unmix`: options its endmembers would ignore are refused naming the conflict
(exit 2, nothing written), and the optical-constant options' messages speak in the
options' own units and spelling (wt %, um, plain numbers)."""

import argparse

import numpy as np
import pytest

from .test_cli import run
from .test_cli_unmix import mixture_files, unmix_args, write_library

OPTICAL = ["--optical-constants", "olivine:40,orthopyroxene:60"]


@pytest.fixture
def files(tmp_path):
    """(cube, obs, dtm, library) of the tiny mixture scene of test_cli_unmix."""
    _, albedo, cube, obs, dtm = mixture_files(tmp_path)
    return cube, obs, dtm, write_library(tmp_path / "minerals.csv", albedo)


def optical_args(cube, obs, dtm, out, *extra):
    """`unmix` with endmembers from optical constants (no library options)."""
    from .test_cli import PARAM_FLAGS

    return ["unmix", cube, "--geometry", obs, "--dtm", dtm, "--units", "r", *PARAM_FLAGS,
            *OPTICAL, "--out", out, *extra]  # fmt: skip


def refused(capsys, args, out, *named):
    """Assert a one-line exit-2 refusal naming each of ``named``, with nothing written."""
    code, err = run(capsys, *args)
    assert code == 2, err
    assert len(err.strip().splitlines()) == 1 and err.startswith("lumaxlike unmix: error:"), err
    for text in named:
        assert text in err, err
    assert "np.float64" not in err
    assert not out.exists()
    return err


@pytest.mark.parametrize(
    "extra",
    [
        ("--free", "grain_size"),
        ("--npfe", "0.1"),
        ("--grain-size-bounds", "5,500"),
        ("--npfe-bounds", "0,2"),
        ("--starts", "3"),
    ],
)
def test_optical_options_with_library_endmembers_are_refused(files, tmp_path, capsys, extra):
    """Before: exit 0, the option ignored (no grain-size maps for --free grain_size)."""
    cube, obs, dtm, library = files
    out = tmp_path / "abund.tif"
    args = unmix_args(cube, obs, dtm, library, out, *extra)
    refused(capsys, args, out, extra[0], "--optical-constants", "--endmembers")


def test_endmembers_and_optical_constants_together_are_refused(files, tmp_path, capsys):
    """Before: the optical constants were used and the library ignored."""
    cube, obs, dtm, library = files
    out = tmp_path / "abund.tif"
    args = [*unmix_args(cube, obs, dtm, library, out), *OPTICAL]
    refused(capsys, args, out, "--endmembers and --optical-constants", "give one")


@pytest.mark.parametrize(
    "extra, named",
    [
        (("--fwhm", "0.01"), "--fwhm"),
        (("--library-incidence", "30"), "--library-incidence"),
        (("--grain-size-bounds", "5,500"), "--free grain_size"),
        (("--free", "npfe", "--grain-size-bounds", "5,500"), "--free grain_size"),
        (("--npfe-bounds", "0,2"), "--free npfe"),
        (("--free", "grain_size", "--npfe-bounds", "0,2"), "--free npfe"),
        (("--starts", "3"), "--free"),
    ],
)
def test_options_optical_constants_would_ignore_are_refused(files, tmp_path, capsys, extra, named):
    cube, obs, dtm, _ = files
    out = tmp_path / "abund.tif"
    refused(capsys, optical_args(cube, obs, dtm, out, *extra), out, extra[0], named)


@pytest.mark.parametrize(
    "extra, named",
    [
        # before: "npfe_bounds must be ... < 1, got [0.02 0.  ]" (mass fractions)
        (("--free", "npfe", "--npfe-bounds", "2,0"), "--npfe-bounds: LO,HI [wt %]"),
        (("--free", "npfe", "--npfe-bounds", "2,0"), "got 2,0"),
        # before: "npfe_fraction 0.03 lies outside npfe_bounds (np.float64(0.0), ...)"
        (("--free", "npfe", "--npfe", "3"), "--npfe 3 lies outside --npfe-bounds 0,2 [wt %]"),
        (("--free", "npfe", "--npfe", "nan"), "argument --npfe"),
        # before: "grain_size np.float64(40.0) (endmember 0) lies outside ..."
        (
            ("--free", "grain_size", "--grain-size-bounds", "50,500"),
            "grain size 40 um of olivine lies outside --grain-size-bounds 50,500 [um]",
        ),
        (("--free", "grain_size", "--grain-size-bounds", "500,50"), "got 500,50"),
        (("--free", "grain_size", "--grain-size-bounds", "0,50"), "with 0 < LO <= HI expected"),
        (
            ("--free", "grain_size", "--optical-constants", "olivine:40,orthopyroxene:2000"),
            "grain size 2000 um of orthopyroxene lies outside --grain-size-bounds 1,1000 [um] "
            "(the default)",
        ),
    ],
)
def test_optical_bounds_are_reported_as_typed(files, tmp_path, capsys, extra, named):
    cube, obs, dtm, _ = files
    out = tmp_path / "abund.tif"
    refused(capsys, optical_args(cube, obs, dtm, out, *extra), out, named)


def optical_namespace(**given):
    """The optical-constant options of a parsed command line (None where not given)."""
    options = dict(
        optical_constants="olivine:40,orthopyroxene:3000",
        free=None,
        grain_size_bounds=None,
        npfe_bounds=None,
        npfe=None,
        starts=None,
    )
    return argparse.Namespace(**{**options, **given})


def test_fixed_npfe_and_grain_sizes_are_not_held_to_the_free_bounds():
    """npFe0 fixed at 3 wt % with free grain sizes was refused by the default bounds of a
    free npFe0 (0-2 wt %); a fixed 3000 um grain size by those of a free one (1-1000 um)."""
    from lumaxlike._cli.unmix_optical import optical_endmembers

    per_endmember = {"--density": None, "--grain-size": None, "--extinction-efficiency": None}
    wavelengths = np.linspace(0.5, 1.5, 4)
    args = optical_namespace(free="grain_size", npfe=3.0, optical_constants="olivine:40")
    endmembers, free, _ = optical_endmembers(args, per_endmember, wavelengths)
    assert free == ("grain_size",) and endmembers.optical is not None
    np.testing.assert_array_equal(endmembers.optical.npfe_bounds, [0.03, 0.03])
    endmembers, free, _ = optical_endmembers(optical_namespace(), per_endmember, wavelengths)
    assert free == () and endmembers.optical is not None
    np.testing.assert_array_equal(endmembers.grain_size, [40.0, 3000.0])


def write_constants(path, rows, *comments):
    """A CSV of optical constants: ``comments`` (``# ...`` lines), the header, ``rows``."""
    lines = [*comments, "wavelength,n,k", *(",".join(map(str, row)) for row in rows)]
    path.write_text("\n".join(lines) + "\n")
    return path


GLASS_ROWS = [(0.4, 1.5, 1e-4), (2.5, 1.5, 1e-4)]


@pytest.mark.parametrize("unit", ["", " g/cm3", " g/cm^3", " g cm-3"])
def test_csv_density_may_say_its_unit(tmp_path, unit):
    """Before: ``# density: 3.3 g/cm3`` failed with "could not convert string to float"."""
    from lumaxlike import OpticalConstants

    path = write_constants(tmp_path / "glass.csv", GLASS_ROWS, f"# density: 3.3{unit}")
    assert OpticalConstants.from_csv(path).density == 3.3


@pytest.mark.parametrize(
    "comments, rows, named",
    [
        (["# density: 3300 kg/m3"], GLASS_ROWS, "3300 kg/m3"),
        (["# density: dense"], GLASS_ROWS, "in g/cm^3"),
        (["# density: 3.3"], [], "no data line"),
        (["# density: 3.3"], [(0.4, 1.5, -1.0), (2.5, 1.5, 1e-4)], "k must be finite"),
        (["# density: 3.3"], [(0.4, 1.5, 1e-4), (0.3, 1.5, 1e-4)], "increasing"),
    ],
)
def test_csv_constants_refused_naming_the_file(tmp_path, comments, rows, named):
    """Before: a density with another unit, or only a header, failed without the file."""
    from lumaxlike import OpticalConstants

    path = write_constants(tmp_path / "glass.csv", rows, *comments)
    with pytest.raises(ValueError, match="glass.csv") as raised:
        OpticalConstants.from_csv(path)
    assert named in str(raised.value)


def test_host_with_n_below_one_is_named():
    """Before: "n must be finite and >= 1, got [0.9 ...]", without the endmember."""
    from lumaxlike import Endmembers, OpticalConstants, optical_constants

    glass = OpticalConstants("glass", [0.4, 1.0, 2.0], [1.5, 0.9, 0.9], [1e-4] * 3, density=2.0)
    with pytest.raises(ValueError, match=r"endmember 'glass': .*n is 0.9 < 1 at 1 um"):
        Endmembers.from_optical_constants(
            [optical_constants("olivine"), glass], [40.0, 30.0], np.linspace(0.5, 1.5, 5)
        )


def test_cli_names_the_csv_endmember_whose_n_is_below_one(files, tmp_path, capsys):
    cube, obs, dtm, _ = files
    metal = write_constants(
        tmp_path / "metal.csv", [(0.3, 0.9, 1e-3), (2.5, 0.9, 1e-3)], "# density: 7.9 g/cm3"
    )
    out = tmp_path / "abund.tif"
    args = optical_args(cube, obs, dtm, out)
    args[args.index("olivine:40,orthopyroxene:60")] = f"olivine:40,{metal}:60"
    refused(capsys, args, out, "endmember 'metal'", "n is 0.9 < 1")


@pytest.mark.parametrize(
    "keywords, message",
    [
        (dict(npfe_bounds=(0.02, 0.0)), "got (0.02, 0.0)"),
        (
            dict(npfe_fraction=0.03, npfe_bounds=(0.0, 0.02)),
            "0.03 lies outside npfe_bounds (0.0, 0.02)",
        ),
        (
            dict(grain_size_bounds=(50.0, 60.0)),
            "grain_size 40 (endmember 0) lies outside its grain_size_bounds (50.0, 60.0)",
        ),
    ],
)
def test_python_bound_messages_print_plain_numbers(keywords, message):
    """Before: ``np.float64(0.0)`` reprs and NumPy's array printing."""
    from lumaxlike import Endmembers, optical_constants

    with pytest.raises(ValueError) as raised:
        Endmembers.from_optical_constants(
            [optical_constants("olivine")], [40.0], np.linspace(0.5, 1.5, 5), **keywords
        )
    assert message in str(raised.value) and "np.float64" not in str(raised.value)
