"""Mission-product options shared by the file commands, and how a file run ends.

``--units radiance`` with ``--solar-spectrum`` / ``--solar-distance``, ``--wavelengths-from``,
``--thermal-bands``, ``--reff-incidence`` and ``--correction-undone`` (see
docs/mission-products.md), each taken from ``--params-from``'s record where not given
(`resolve_product_options`); `finish` turns a run in which no problem converged into
exit code 1 with one line saying why.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from .options import EXIT_FAILURE, EXIT_OK, positive_float

__all__ = [
    "add_product_options",
    "finish",
    "is_normalised",
    "product_kwargs",
    "resolve_product_options",
]

#: the mission-product options: attribute -> (default, the units they apply to or None)
PRODUCT_OPTIONS = {
    "correction_undone": (False, None),
    "reff_incidence": (None, "reff"),
    "solar_spectrum": (None, "radiance"),
    "solar_distance": (None, "radiance"),
    "thermal_bands": ("keep", None),
    "wavelengths_from": (None, None),
}
_FILE_OPTIONS = ("solar_spectrum", "wavelengths_from")


def add_product_options(
    parser: argparse.ArgumentParser,
    *,
    radiance: bool = True,
    params_from: bool = True,
    geometry: bool = True,
) -> None:
    """Add the mission-product options to a file command's parser (each None when not
    given: `resolve_product_options` and `product_kwargs` fill in the defaults);
    ``params_from``: the command has ``--params-from`` (the group's title says so);
    ``geometry`` False: a command that reads no geometry (no --correction-undone, no
    --reff-incidence)."""
    title = "mission products (docs/mission-products.md"
    if params_from:
        title += "; with --params-from, an option not given takes the recorded run's value"
    group = parser.add_argument_group(title + ")")
    if geometry:
        _add_geometry_product_options(group)
    if radiance:
        group.add_argument(
            "--solar-spectrum",
            type=Path,
            metavar="FILE",
            help="with --units radiance: solar irradiance at 1 au: the M3 archive's "
            "table (M3G20110224_RFL_SOLAR_SPEC.TAB global, M3T... target: nm, "
            "W m^-2 um^-1, one row per band, each band taking its own), or two columns "
            "(wavelength [um, or nm above 100], W m^-2 um^-1) averaged over each band's "
            "Gaussian response (default: ASTM G173-03 extraterrestrial, from pvlib)",
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


def _add_geometry_product_options(group) -> None:
    """--correction-undone and --reff-incidence: how a product's geometry is taken."""
    group.add_argument(
        "--correction-undone",
        action="store_true",
        default=None,
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


def resolve_product_options(args, record, units) -> None:
    """Set each mission-product option on ``args``: the one given, else the one
    ``--params-from``'s record gives (its product's ``arguments``, as `invert_file` and the
    other commands on one cube record them), else the default. An option for other units
    (``--reff-incidence`` without reff, the solar ones without radiance) is not taken
    from the record.

    Args:
        args: the parsed options (changed in place).
        record: the `Provenance` of ``--params-from``, or None.
        units: the run's units (as given, or recorded).
    """
    product = getattr(record, "product", None) or {}
    recorded = product.get("arguments") or {}
    for name, (default, applies_to) in PRODUCT_OPTIONS.items():
        if not hasattr(args, name):  # a parser without the radiance options
            continue
        value = getattr(args, name)
        if value is None and (applies_to is None or applies_to == units):
            value = recorded.get(name)
            if value is not None and name in _FILE_OPTIONS:
                value = Path(value)
        setattr(args, name, default if value is None else value)


def product_kwargs(args, *, radiance: bool = True) -> dict:
    """The file function's keyword arguments for the options of `add_product_options`
    (the defaults for those not given)."""
    radiance_only = ("solar_spectrum", "solar_distance", "thermal_bands")
    names = [name for name in PRODUCT_OPTIONS if radiance or name not in radiance_only]
    return {
        name: PRODUCT_OPTIONS[name][0] if getattr(args, name) is None else getattr(args, name)
        for name in names
        if hasattr(args, name)  # (a command without the geometry's options)
    }


def is_normalised(path) -> bool:
    """True when ``path`` is a product normalised to a standard geometry (its label or
    name says so); False for anything else, or a file that cannot be located."""
    from .._io.missions.products import locate, recognise

    try:
        located = locate(Path(path))
    except (OSError, ValueError):
        return False
    kind = recognise(located.data, located.label)
    return kind is not None and kind.standard_geometry is not None


def finish(command: str, summary, solved: tuple[str, ...]) -> int:
    """Exit code of a completed file run: 1, with one line on stderr saying why, when no
    problem has a status of `solved` (the operation's `Operation.solved`), or (a run
    without status maps: ``parameters``) no value was computed (its outputs are
    written, status maps included); else 0."""
    from .._files.summaries import nothing_computed, nothing_converged

    why = nothing_converged(summary.status_counts, solved) or nothing_computed(summary)
    if why is None:
        return EXIT_OK
    print(f"lumaxlike {command}: error: {why}", file=sys.stderr)
    return EXIT_FAILURE
