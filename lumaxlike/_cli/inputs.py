"""The inputs of the file commands, declared once: the cube (or the stack's cubes),
``--out``, ``--params-from``, ``--geometry``, ``--surface``, ``--dtm`` and ``--units``;
and ``--solver``, which every command that solves takes.

:data:`INPUTS` declares each with what every command gives it (its type, metavar, choices
and ``lumaxlike invert``'s help, the full one that the other commands refer to);
`add_inputs` adds those a command takes, in its order, with the command's own words
where it differs (a help text, or argparse keywords such as ``required`` or ``nargs``).
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from .options import DEFAULT_SOLVER, SOLVER_NOTE

__all__ = [
    "CUBE_INPUTS",
    "INPUTS",
    "INPUT_UNITS",
    "OUT_HELP",
    "RECORDED",
    "SOLVER_HELP",
    "UNITS_HELP",
    "add_inputs",
    "add_stack_inputs",
    "params_from_help",
]

#: appended to the default of every option --params-from can fill in
RECORDED = "; with --params-from: the recorded value"

#: ``--out`` of every file command: the formats it writes
OUT_HELP = "output: .tif/.tiff GeoTIFF, .img/.envi/.hdr ENVI, .nc netCDF, .zarr zarr (required)"

INPUT_UNITS = ("r", "radf", "reff", "radiance")
"""What ``--units`` accepts for the commands that read mission products."""

UNITS_HELP = (
    "what the cube holds: r = bidirectional reflectance [1/sr], radf = radiance factor "
    "I/F = pi r [-], reff = reflectance factor pi r / cos i [-] (see --reff-incidence), "
    "radiance = spectral radiance [W m^-2 um^-1 sr^-1], converted to I/F = pi L d^2 / F "
    "(see --solar-spectrum, --solar-distance). A cube whose label, units tag (1/sr, sr-1: "
    "r) or values contradict it is refused"
)

GEOMETRY_HELP = (
    "geometry backplane on the cube's grid whose band descriptions name its bands [deg, "
    "azimuths clockwise from north]: the to-sun and to-sensor zenith and azimuth, or "
    "incidence, emission and phase; plus, when present, facet slope and aspect or local "
    "incidence and emission. Names as M3, AVIRIS-NG/AVIRIS-3/EMIT OBS, CRISM DDR and ISIS "
    "phocube spell them, matched case-insensitively, e.g. 'To-Sun Zenith', 'To-Inst AZM', "
    "'Facet Slope', 'INA at areoid, deg', 'Local Incidence Angle' (full list: "
    "lumaxlike.OBS_BAND_NAMES). Required, unless --params-from gives it or the cube is a "
    "product normalised to a standard geometry (M3 L2 RFL, CRISM MTRDR/TER: inverted flat "
    "there; see --correction-undone)"
)

SURFACE_HELP = (
    "which angles to use when the geometry carries both angles relative to the ellipsoid "
    "and to the local surface (facet slope/aspect, local incidence/emission): local = the "
    "local surface (an error if absent), ellipsoid = the ellipsoid, leaving the "
    "local-surface bands out, auto = local when present, else ellipsoid; recorded in the "
    "outputs (default auto" + RECORDED + ")"
)

#: ``--solver``'s help in ``lumaxlike invert``, the full one (its default None: the
#: recorded solver with --params-from, else DEFAULT_SOLVER, as `resolve_settings` reads it)
SOLVER_HELP = (
    "numba: compiled Levenberg-Marquardt on the CPU, parallel threads, always float64; "
    "jax: optimistix Levenberg-Marquardt on the CPU or a GPU, in the cube's precision "
    f"(float32 cubes in float32) (default {DEFAULT_SOLVER}{RECORDED}; {SOLVER_NOTE})"
)

#: each input: its name in `add_inputs` -> (its flag, or the positional argument's name;
#: the argparse keywords every command gives it, help included unless each words it)
INPUTS: dict[str, tuple[str, dict[str, Any]]] = {
    "cube": ("cube", {"type": Path, "metavar": "CUBE", "help": "reflectance cube file (required)"}),
    "cubes": (
        "cubes",
        {
            "type": Path,
            "nargs": "+",
            "metavar": "CUBE",
            "help": "reflectance cubes on one grid with the same bands, one observation each",
        },
    ),
    "out": ("--out", {"type": Path, "required": True, "metavar": "OUT", "help": OUT_HELP}),
    "params_from": ("--params-from", {"type": Path, "metavar": "OLD"}),
    "geometry": ("--geometry", {"type": Path, "metavar": "OBS", "help": GEOMETRY_HELP}),
    "surface": ("--surface", {"choices": ("auto", "local", "ellipsoid"), "help": SURFACE_HELP}),
    "dtm": (
        "--dtm",
        {
            "type": Path,
            "metavar": "DTM",
            "help": "DTM on the cube's grid (heights [m], projected CRS) for local slopes "
            "(default: a flat, horizontal surface" + RECORDED + ")",
        },
    ),
    "units": (
        "--units",
        {"choices": INPUT_UNITS, "help": UNITS_HELP + ". Required, unless --params-from gives it"},
    ),
    "solver": ("--solver", {"choices": ("numba", "jax"), "help": SOLVER_HELP}),
}

#: the inputs of a command on one cube (``invert``, ``unmix``), in their order
CUBE_INPUTS = ("cube", "out", "params_from", "geometry", "surface", "dtm", "units")


def params_from_help(taken: str, output: str = "output", note: str = "") -> str:
    """``--params-from``'s help: an earlier ``output`` whose record gives ``taken`` (the
    settings it fills in), then ``note``."""
    return (
        f"an earlier lumaxlike {output} (any of its files): take its {taken} from the "
        f"record it carries; options given here override them{note} (default: none)"
    )


def add_inputs(
    parser: argparse.ArgumentParser, *names: str, **words: str | Mapping[str, Any]
) -> None:
    """Add the inputs ``names`` (keys of :data:`INPUTS`) to ``parser``, in that order, as
    :data:`INPUTS` declares them; ``words[name]``: the command's own help text for one, or
    argparse keywords replacing or adding to the declared ones (``help``, ``choices``,
    ``required``, ``nargs``).

    Raises:
        KeyError: a name not declared, or words for an input not added.
    """
    unknown = (set(names) | set(words)) - INPUTS.keys() or set(words) - set(names)
    if unknown:
        raise KeyError(f"inputs not declared or not added: {', '.join(sorted(unknown))}")
    for name in names:
        flag, declared = INPUTS[name]
        own = words.get(name, {})
        keywords = {**declared, **({"help": own} if isinstance(own, str) else own)}
        parser.add_argument(flag, **keywords)


def add_stack_inputs(
    parser: argparse.ArgumentParser, *, verb: str, units_choices, units_help: str
) -> None:
    """The inputs of a command on a stack of co-registered cubes (``lumaxlike fit``,
    ``lumaxlike sample``): the cubes, ``--geometry`` (one OBS raster per cube), ``--out``,
    ``--free`` (the parameters the command ``verb``, e.g. "fitted"), ``--units``
    (``units_choices``, ``units_help``) and ``--dtm``."""
    from .._configuration import HAPKE_PARAMETER_NAMES as PARAMETER_NAMES
    from .options import name_list

    geometry = {
        "nargs": "+",
        "required": True,
        "help": "one OBS raster per cube, in the same order (band names as for "
        "`lumaxlike invert --geometry`) (required)",
    }
    add_inputs(parser, "cubes", "geometry", "out", geometry=geometry)
    parser.add_argument(
        "--free",
        type=name_list,
        required=True,
        metavar="NAME[,...]",
        help=f"{verb} parameters, w among them: any of {', '.join(PARAMETER_NAMES)} "
        "(roughness in rad in the outputs) (required)",
    )
    add_inputs(
        parser,
        "units",
        "dtm",
        units={"choices": units_choices, "required": True, "help": units_help},
        dtm="DTM on the cubes' grid (heights [m]) for local slopes (default: flat)",
    )
