"""``lumaxlike sample``: the posterior of Hapke parameters over a stack of cube files."""

from __future__ import annotations

import argparse

from .inputs import add_stack_inputs
from .model import stack_keywords
from .operation import add_command, run_command
from .options import (
    PRIOR_HELP,
    add_run_options,
    add_stack_selection,
    prior_dict,
    prior_option,
)

__all__ = ["add_parser", "run"]

HELP = "sample the posterior of Hapke parameters on a stack of cubes (quantile maps)"

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
    from .._sample.options import SampleSettings

    sample = add_command(commands, "sample", HELP, DESCRIPTION, EPILOG)
    add_stack_inputs(
        sample,
        verb="sampled",
        units_choices=("r", "radf"),
        units_help="what the cubes hold: r [1/sr] or radf = pi r; a cube whose units tag "
        "contradicts it (1/sr, sr-1: r) is refused (required)",
    )
    # the options of `SampleSettings` (lumaxlike._sample.options), as it declares them:
    # --refl-sigma, --shared, --num-samples, --num-chains, --num-warmup, --seed,
    # --min-ess, --max-rhat, --integration-steps
    SampleSettings.add_arguments(sample)
    sample.add_argument(
        "--prior",
        type=prior_option,
        action="append",
        metavar="NAME=MEAN:SIGMA",
        help=PRIOR_HELP.format(verb="sampled") + " (default: flat within the bounds)",
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
    from .._files import sample_file
    from .._operations.sample import SAMPLE
    from .._sample.options import SampleSettings

    prior = prior_dict(args.prior)
    # the declared options from their flags (checked before any file is read); --prior's
    # pairs, repeated, read as one mapping
    settings = SampleSettings.from_arguments(argparse.Namespace(**{**vars(args), "prior": prior}))
    described = (
        f"{len(args.cubes)} cubes ({args.units}) -> {args.out}, free {','.join(args.free)}, "
        f"{settings.num_chains} chains x {settings.num_samples} draws"
    )
    return run_command(
        SAMPLE,
        sample_file,
        args,
        args.cubes,
        described=described,
        product=False,
        **stack_keywords(args, "sample", "sampled"),
        settings=settings,
    )
