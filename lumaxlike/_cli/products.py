"""Mission-product options shared by the file commands, and how a file run ends.

``--units radiance`` with ``--solar-spectrum`` / ``--solar-distance``, ``--wavelengths-from``,
``--thermal-bands``, ``--reff-incidence`` and ``--correction-undone`` (see
docs/mission-products.md); `finish` turns a run in which no problem converged into
exit code 1 with one line saying why.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .options import EXIT_FAILURE, EXIT_OK, positive_float

__all__ = [
    "INPUT_UNITS",
    "add_product_options",
    "finish",
    "is_normalised",
    "product_kwargs",
]

INPUT_UNITS = ("r", "radf", "reff", "radiance")
"""What ``--units`` accepts for the commands that read mission products."""

UNITS_HELP = (
    "what the cube holds: r = bidirectional reflectance [1/sr], radf = radiance factor "
    "I/F = pi r [-], reff = reflectance factor pi r / cos i [-] (see --reff-incidence), "
    "radiance = spectral radiance [W m^-2 um^-1 sr^-1], converted to I/F = pi L d^2 / F "
    "(see --solar-spectrum, --solar-distance). A cube whose label or values contradict it "
    "is refused"
)


def add_product_options(parser: argparse.ArgumentParser, *, radiance: bool = True) -> None:
    """Add the mission-product options to a file command's parser."""
    group = parser.add_argument_group("mission products (docs/mission-products.md)")
    group.add_argument(
        "--correction-undone",
        action="store_true",
        help="the cube is a product normalised to a standard geometry (M3 L2 RFL: i = 30, "
        "e = 0, g = 30 deg; CRISM MTRDR/TER) whose normalisation you have undone: invert "
        "it at --geometry (without this, such a product is inverted flat at its standard "
        "geometry and --geometry is refused)",
    )
    group.add_argument(
        "--reff-incidence",
        choices=("local", "areoid"),
        help="with --units reff: the incidence the cube was divided by, the local "
        "surface's (facets or DTM) or the ellipsoid's (areoid, as CRISM's Lambert "
        "correction); recorded (default local; required for CRISM cubes)",
    )
    if radiance:
        group.add_argument(
            "--solar-spectrum",
            type=Path,
            metavar="FILE",
            help="with --units radiance: solar irradiance at 1 au, two columns "
            "(wavelength [um, or nm above 100], W m^-2 um^-1), e.g. the M3 archive's "
            "solar spectrum table; averaged over each band's Gaussian response "
            "(default: ASTM G173-03 extraterrestrial, from pvlib)",
        )
        group.add_argument(
            "--solar-distance",
            type=positive_float,
            metavar="AU",
            help="with --units radiance: the sun's distance [au] (default: the label's "
            "SOLAR_DISTANCE)",
        )
        group.add_argument(
            "--thermal-bands",
            choices=("keep", "exclude"),
            default="keep",
            help="lunar bands centred beyond 2.5 um carry thermal emission: keep them "
            "(a warning names them) or exclude them from the run and its outputs "
            "(default keep)",
        )
    group.add_argument(
        "--wavelengths-from",
        type=Path,
        metavar="FILE",
        dest="wavelengths_from",
        help="band centres replacing the cube's own: a CRISM CDR WA file (.IMG/.LBL; "
        "median over detector columns) or a text file with one wavelength per line "
        "(nm above 100, else um) (default: the cube's metadata)",
    )


def product_kwargs(args, *, radiance: bool = True) -> dict:
    """The file function's keyword arguments for the options of `add_product_options`."""
    kwargs = {
        "correction_undone": args.correction_undone,
        "reff_incidence": args.reff_incidence,
        "wavelengths_from": args.wavelengths_from,
    }
    if radiance:
        kwargs.update(
            solar_spectrum=args.solar_spectrum,
            solar_distance=args.solar_distance,
            thermal_bands=args.thermal_bands,
        )
    return kwargs


def is_normalised(path) -> bool:
    """True when ``path`` is a product normalised to a standard geometry (its label or
    name says so); False for anything else, or a file that cannot be located."""
    from .._io.products import locate, recognise

    try:
        located = locate(Path(path))
    except (OSError, ValueError):
        return False
    kind = recognise(located.data, located.label)
    return kind is not None and kind.standard_geometry is not None


def cube_bands(path, units, args) -> int:
    """Bands a file run reads from the cube (thermal bands left out when excluded)."""
    from .._io.product_cube import ProductCube

    with ProductCube(
        path,
        units,
        thermal_bands=getattr(args, "thermal_bands", "keep"),
        check_values=False,
        convert=False,
    ) as cube:
        return cube.info.bands


def finish(command: str, summary) -> int:
    """Exit code of a completed file run: 1, with one line on stderr saying why, when no
    problem converged (its outputs are written, status maps included); else 0."""
    from .._files.summaries import nothing_converged

    why = nothing_converged(summary.status_counts)
    if why is None:
        return EXIT_OK
    print(f"lumaxlike {command}: error: {why}", file=sys.stderr)
    return EXIT_FAILURE
