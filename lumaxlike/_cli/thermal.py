"""``lumaxlike thermal``: remove the thermal emission of a cube file (temperature and
corrected reflectance per pixel)."""

from __future__ import annotations

import argparse
import sys

from .model import model_from_options, read_record, resolve_settings
from .options import number_list, positive_float, quiet_cluster_logs
from .products import cube_bands, finish, product_kwargs, resolve_product_options

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Thermal-emission removal (issue 46): each pixel's temperature from a continuum fit over a
window short of the 3 um band (Clark et al. 2011's assumption; or a given T), and every
band's reflectance with the emission eps B(T) d^2 / F removed (eps = 1 - r_hd of the same
Hapke model, Kirchhoff's law), streamed by blocks of rows. See lumaxlike.remove_thermal.

Writes OUT (the corrected cube: r for --units r, I/F for radf and radiance) and siblings
OUT_w, OUT_temperature, OUT_temperature_sigma [K], OUT_status (NOT_CONSTRAINED: T's 95 %
upper limit, nothing removed); netCDF/zarr hold them as variables. The Sun's spectrum and
distance are the product's (--solar-spectrum, --solar-distance or the label's). Every
option of `lumaxlike invert` works the same here.
"""

EPILOG = """\
example:
  lumaxlike thermal M3_L1B_RDN.IMG --geometry M3_L1B_OBS.IMG --units radiance \\
      --b 0.25 --c 0.3 --roughness-deg 20 --window 2.3,2.65 --out corrected.nc
"""


def _window(text: str) -> tuple[float, float]:
    values = number_list(text)
    if len(values) != 2 or not values[0] < values[1]:
        raise argparse.ArgumentTypeError(f"expected SHORTEST,LONGEST in um, got {text!r}")
    return values[0], values[1]


def add_parser(commands, invert, formatter) -> None:
    """``lumaxlike thermal``: every option of ``invert`` plus the thermal settings."""
    thermal = commands.add_parser(
        "thermal",
        help="remove thermal emission: temperature and corrected reflectance per pixel",
        allow_abbrev=False,
        formatter_class=formatter,
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    exclusive = {
        id(action): group
        for group in invert._mutually_exclusive_groups
        for action in group._group_actions
    }
    groups: dict = {}
    for action in invert._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        group = exclusive.get(id(action))
        if group is None:
            thermal._add_action(action)
            continue
        if id(group) not in groups:
            groups[id(group)] = thermal.add_mutually_exclusive_group(required=group.required)
        groups[id(group)]._add_action(action)
    settings = thermal.add_argument_group("thermal settings")
    settings.add_argument(
        "--method",
        choices=("continuum", "given"),
        default="continuum",
        help="continuum: fit T with a linear w over --window; given: remove the emission "
        "of --temperature (default continuum)",
    )
    settings.add_argument(
        "--temperature",
        type=positive_float,
        metavar="K",
        help="T [K] of every pixel, for --method given (default: none)",
    )
    settings.add_argument(
        "--window",
        type=_window,
        default=(2.3, 2.65),
        metavar="UM,UM",
        help="the continuum fit's wavelengths [um], at least 4 bands (default 2.3,2.65)",
    )
    settings.add_argument(
        "--max-temperature-uncertainty",
        type=positive_float,
        default=10.0,
        metavar="K",
        help="T's 1-sigma [K] above which a pixel is NOT_CONSTRAINED (default 10)",
    )
    thermal.set_defaults(handler=run)


def run(args) -> int:
    """Run ``lumaxlike thermal`` on parsed ``args``; return its exit code."""
    from .._files.thermal import remove_thermal_file
    from .._options import ProductOptions, RunOptions

    record = read_record(args)
    settings = resolve_settings(args, record)
    resolve_product_options(args, record, settings["units"])
    bands = cube_bands(args.cube, settings["units"], args)
    models = model_from_options(args, bands, record)
    if len({id(m) for m in models}) != 1:
        raise ValueError("lumaxlike thermal takes one model for every band")
    quiet_cluster_logs(args)
    run_options = RunOptions(
        workers=args.workers,
        scheduler=args.scheduler,
        chunk_rows=args.chunk,
        resume=args.resume,
        overwrite=args.overwrite,
        progress=args.progress,
    )
    summary = remove_thermal_file(
        args.cube,
        args.out,
        params=models[0],
        method=args.method,
        temperature=args.temperature,
        window=args.window,
        max_temperature_sigma=args.max_temperature_uncertainty,
        command=args.command_line,
        run=run_options,
        product=ProductOptions(**product_kwargs(args)),
        **settings,
    )
    print(
        f"lumaxlike thermal: {args.cube} ({settings['units']}) -> {args.out}, method "
        f"{args.method}, solver {settings['solver']}: {summary.describe()}",
        file=sys.stderr,
    )
    return finish("thermal", summary)
