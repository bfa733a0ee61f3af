"""``lumaxlike fit``: several Hapke parameters fitted to a stack of cube files."""

from __future__ import annotations

import argparse
from pathlib import Path

from .inputs import INPUT_UNITS, UNITS_HELP, add_inputs, add_stack_inputs
from .model import stack_keywords
from .operation import add_command, run_command
from .options import (
    DEFAULT_SOLVER,
    PRIOR_HELP,
    SOLVER_NOTE,
    add_run_options,
    add_stack_selection,
    positive_float,
    prior_dict,
)
from .options import prior_option as _prior
from .products import add_product_options

__all__ = ["add_parser", "run"]

HELP = "fit several Hapke parameters to a stack of cubes"

DESCRIPTION = """\
Fit Hapke parameters per pixel and band to a stack of co-registered cubes, one
observation each (repeated coverage, several viewing angles), streaming them by blocks
of rows. An observation that is NaN/nodata, or outside --incidence-range,
--emission-range or --phase-range, is left out of its pixel-band problem; a problem with
fewer than --min-observations valid ones gets status TOO_FEW_OBSERVATIONS.

Writes OUT (w) and, for GeoTIFF/ENVI, siblings OUT_<name> for each other fitted
parameter, OUT_sigma_<name> (1-sigma of each), OUT_status, OUT_iterations, OUT_residual
(residual norm, 1/sr) and OUT_observations (valid observations used); netCDF (.nc) and
zarr (.zarr) hold them all in one dataset. Every map has one band per spectral band.
Writes are atomic; the outputs record how they were made (lumaxlike.read_provenance,
plus lumaxlike_fit_* keys: the cubes, geometries, free parameters and limits).
"""

EPILOG = """\
example (five cubes of one area with their OBS rasters; w, b, c need >= 4 per pixel-band):
  lumaxlike fit day1.tif day2.tif day3.tif day4.tif day5.tif \\
      --geometry obs1.tif obs2.tif obs3.tif obs4.tif obs5.tif \\
      --units radf --free w,b,c --b 0.3 --c 0.4 --incidence-range 0,70 --out fit.tif
"""


def add_parser(commands) -> None:
    """Add the ``fit`` subcommand to ``commands``."""
    from .._inverse.fit.options import FitSettings

    fit = add_command(commands, "fit", HELP, DESCRIPTION, EPILOG)
    add_stack_inputs(
        fit,
        verb="fitted",
        units_choices=INPUT_UNITS,
        units_help=UNITS_HELP.replace("the cube holds", "the cubes hold") + " (required)",
    )
    # fit has no --params-from, so no record to resolve the default from: set it here
    solver = {
        "default": DEFAULT_SOLVER,
        "help": f"numba (CPU threads, float64) or jax (CPU or GPU) (default {DEFAULT_SOLVER}; "
        f"{SOLVER_NOTE})",
    }
    add_inputs(fit, "solver", solver=solver)
    add_stack_selection(fit, verb="fitted")
    # the options of `FitSettings` (lumaxlike._inverse.fit.options), as it declares them:
    # --max-iter, --tol, --refl-sigma, --shared, --regional, --starts
    FitSettings.add_arguments(fit)
    fit.add_argument(
        "--regions",
        type=Path,
        metavar="LABELS",
        help="label raster on the cubes' grid (integers: tiles, geologic units; negative "
        "or nodata: left out), with --regional (default: none)",
    )
    fit.add_argument(
        "--region-memory",
        type=positive_float,
        default=4.0,
        metavar="GIB",
        help="memory cap of the regions fitted at once [GiB]; a region needing more is "
        "refused (default 4)",
    )
    fit.add_argument(
        "--prior",
        type=_prior,
        action="append",
        metavar="NAME=MEAN:SIGMA",
        help=PRIOR_HELP.format(verb="fitted")
        + "; needs --refl-sigma (optimal estimation's MAP) (default: none)",
    )
    add_product_options(fit, params_from=False)
    add_run_options(
        fit,
        chunk_help="rows per block (default: about 32 MiB of stacked reflectance)",
        parallel=True,
    )
    fit.set_defaults(handler=run)


def run(args) -> int:
    """Run ``lumaxlike fit`` on parsed ``args``; return its exit code."""
    from .._files import fit_file
    from .._inverse.fit.options import FitSettings
    from .._operations.fit import FIT

    prior = prior_dict(args.prior)
    # the declared options from their flags; --prior's pairs, repeated, read as one mapping
    settings = FitSettings.from_arguments(argparse.Namespace(**{**vars(args), "prior": prior}))
    described = (
        f"{len(args.cubes)} cubes ({args.units}) -> {args.out}, free {','.join(args.free)}, "
        f"solver {args.solver}"
    )
    return run_command(
        FIT,
        fit_file,
        args,
        args.cubes,
        described=described,
        **stack_keywords(args, "fit", "fitted"),
        solver=args.solver,
        regions=args.regions,
        region_memory=args.region_memory * 2**30,
        settings=settings,
    )
