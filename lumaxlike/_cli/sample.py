"""``lumaxlike sample``: the posterior of Hapke parameters over a stack of cube files."""

from __future__ import annotations

import argparse

from .model import model_from_options, same_params
from .operation import run_command
from .options import (
    PRIOR_HELP,
    add_run_options,
    add_stack_inputs,
    add_stack_selection,
    name_list,
    number_list,
    positive_float,
    positive_int,
    prior_dict,
    prior_option,
    scalar_or_list,
)

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Sample the posterior of Hapke parameters per pixel and band (Hamiltonian Monte Carlo,
blackjax; warm-started from fit) on a stack of co-registered cubes, one observation
each, streaming them by blocks of rows. The noise is Gaussian with --refl-sigma; the
prior is flat within the parameters' bounds, times a Gaussian per --prior. Observations
that are NaN/nodata or outside the angle ranges are left out, as by `lumaxlike fit`.

Writes OUT (the posterior median of w) and, for GeoTIFF/ENVI, siblings OUT_<field>, one
per map: per sampled parameter NAME_q025, NAME_q160, NAME_q500, NAME_q840, NAME_q975
(the quantiles at 2.5, 16, 50, 84, 97.5 %), mean_NAME, rhat_NAME, ess_NAME (bulk),
ess_tail_NAME; status (CONVERGED where the chains mixed, NOT_MIXED where R-hat >
--max-rhat or the bulk or tail ESS < --min-ess, MULTIMODAL where they missed a mode
near a bound), acceptance, divergences,
observations; netCDF (.nc) and zarr (.zarr) hold them all in one dataset. Every map has
one band per spectral band (with --shared, a pixel's shared parameters and its status,
acceptance and divergences repeat in each).
Writes are atomic; the outputs record how they were made (lumaxlike_sample_* keys).
Exit code 1, with one line saying why, when no problem mixed.
"""

EPILOG = """\
example (five cubes of one area with their OBS rasters, noise 0.002 in I/F):
  lumaxlike sample day1.tif day2.tif day3.tif day4.tif day5.tif \\
      --geometry obs1.tif obs2.tif obs3.tif obs4.tif obs5.tif \\
      --units radf --refl-sigma 0.002 --free w,b,c --b 0.3 --c 0.4 --out posterior.tif
"""


def add_parser(commands) -> None:
    """Add the ``sample`` subcommand to ``commands``."""
    sample = commands.add_parser(
        "sample",
        help="sample the posterior of Hapke parameters on a stack of cubes (quantile maps)",
        allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    add_stack_inputs(
        sample,
        verb="sampled",
        units_choices=("r", "radf"),
        units_help="what the cubes hold: r [1/sr] or radf = pi r; a cube whose units tag "
        "contradicts it (1/sr, sr-1: r) is refused (required)",
    )
    sample.add_argument(
        "--refl-sigma",
        type=number_list,
        required=True,
        metavar="VALUE[,...]",
        help="1-sigma Gaussian noise of the cubes' values in --units, one value or one "
        "per band (required: it sets the posterior's width)",
    )
    sample.add_argument(
        "--prior",
        type=prior_option,
        action="append",
        metavar="NAME=MEAN:SIGMA",
        help=PRIOR_HELP.format(verb="sampled") + " (default: flat within the bounds)",
    )
    sample.add_argument(
        "--shared",
        type=name_list,
        default=(),
        metavar="NAME[,...]",
        help="sampled parameters that take one value per pixel for all its bands (e.g. "
        "roughness,hs): each pixel's bands are one joint problem; their maps, and status, "
        "acceptance and divergences, repeat in every band layer (default: none)",
    )
    sample.add_argument(
        "--num-samples",
        type=positive_int,
        default=1000,
        metavar="N",
        help="draws kept per chain (default 1000)",
    )
    sample.add_argument(
        "--num-chains",
        type=positive_int,
        default=4,
        metavar="N",
        help="chains per pixel-band, at least 2 (default 4)",
    )
    sample.add_argument(
        "--num-warmup",
        type=positive_int,
        default=300,
        metavar="N",
        help="adaptation transitions per chain, discarded (default 300)",
    )
    sample.add_argument(
        "--seed",
        type=int,
        default=0,
        metavar="N",
        help="random seed; each block of rows draws its own stream from it (default 0)",
    )
    sample.add_argument(
        "--min-ess",
        type=positive_float,
        default=400.0,
        metavar="N",
        help="a pixel-band whose bulk or tail ESS is below N in any parameter is NOT_MIXED "
        "(default 400)",
    )
    sample.add_argument(
        "--max-rhat",
        type=positive_float,
        default=1.01,
        metavar="VALUE",
        help="a pixel-band whose R-hat exceeds VALUE in any parameter is NOT_MIXED (default 1.01)",
    )
    add_stack_selection(sample, verb="sampled")
    add_run_options(
        sample,
        chunk_help="rows per block (default: about 64 MB of draws, at least one row)",
        parallel=True,
    )
    sample.set_defaults(handler=run)


def run(args) -> int:
    """Run ``lumaxlike sample`` on parsed ``args``; return its exit code."""
    from .._io.read.raster import CubeReader
    from .._operations.sample import SAMPLE

    prior = prior_dict(args.prior)
    with CubeReader(args.cubes[0]) as cube:
        bands = cube.info.bands
    params = model_from_options(args, bands, cube=args.cubes[0])
    if not same_params(params):
        raise ValueError(
            "lumaxlike sample takes one value per Hapke option (the start of a sampled "
            "parameter, or the fixed value), shared by every band"
        )
    limits = {
        angle: getattr(args, f"{angle}_range") for angle in ("incidence", "emission", "phase")
    }
    described = (
        f"{len(args.cubes)} cubes ({args.units}) -> {args.out}, free {','.join(args.free)}, "
        f"{args.num_chains} chains x {args.num_samples} draws"
    )
    return run_command(
        SAMPLE,
        args,
        args.cubes,
        described=described,
        product=False,
        geometry=args.geometry,
        params=params[0],
        free=args.free,
        units=args.units,
        refl_sigma=scalar_or_list(args.refl_sigma),
        prior=prior,
        shared=args.shared,
        num_samples=args.num_samples,
        num_chains=args.num_chains,
        num_warmup=args.num_warmup,
        seed=args.seed,
        min_ess=args.min_ess,
        max_rhat=args.max_rhat,
        dtm=args.dtm,
        observation_limits_deg={k: v for k, v in limits.items() if v is not None},
        min_observations=args.min_observations,
    )
