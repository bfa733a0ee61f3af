"""The option groups and value types the ``lumaxlike`` commands share.

The option tables (:data:`HAPKE_OPTIONS`, :data:`MODEL_OPTIONS`,
:data:`PHOTOMETRIC_OPTIONS`) are read both by the parsers (:func:`add_model_options`)
and by the model builder (:mod:`lumaxlike._cli.model`), so a flag is declared once.
"""

from __future__ import annotations

import argparse
import math
import shlex
import sys

from .._declared_options import DeprecatedAlias, positive_float, positive_int

__all__ = [
    "DEFAULT_SOLVER",
    "EXIT_BAD_INPUT",
    "EXIT_FAILURE",
    "EXIT_OK",
    "HAPKE_OPTIONS",
    "MODEL_OPTIONS",
    "PHOTOMETRIC_OPTIONS",
    "DEGREE_PARAMETERS",
    "PRIOR_HELP",
    "SOLVER_NOTE",
    "CommandParser",
    "DeprecatedAlias",
    "UsageError",
    "add_model_options",
    "add_parallel_options",
    "add_refl_sigma_option",
    "add_run_options",
    "add_stack_selection",
    "dest",
    "name_list",
    "number_list",
    "positive_float",
    "positive_int",
    "prior_dict",
    "prior_option",
    "quiet_cluster_logs",
    "range_deg",
    "scalar_or_list",
]

EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT = 0, 1, 2

DEFAULT_SOLVER = "numba"

#: why the commands' default solver differs from the Python array functions'
SOLVER_NOTE = (
    "the Python functions on arrays (lumaxlike.invert, fit, ...) default to jax instead, "
    "which also runs on a GPU"
)

#: Hapke options: (flag, HapkeParams field, default, help). Each takes one value for every
#: band or a comma-separated list of one value per band.
HAPKE_OPTIONS = (
    ("--b", "b", 0.2, "double Henyey-Greenstein asymmetry b [-], 0 <= b < 1"),
    (
        "--c",
        "c",
        0.5,
        (
            "double Henyey-Greenstein back/forward partition c [-], -1 <= c <= 1 "
            "(c > 0: back-scattering)"
        ),
    ),
    (
        "--roughness-deg",
        "roughness",
        0.0,
        "Hapke (1984) mean slope angle theta-bar [deg], 0 <= . < 90",
    ),
    ("--hs", "hs", 0.0, "shadow-hiding opposition width h_S [-], >= 0 (0: off)"),
    ("--bs0", "bs0", 0.0, "shadow-hiding opposition amplitude B_S0 [-], >= 0"),
    ("--hc", "hc", 0.0, "coherent-backscatter width h_C [-], >= 0 (0: off)"),
    ("--bc0", "bc0", 0.0, "coherent-backscatter amplitude B_C0 [-], >= 0"),
    (
        "--porosity-k",
        "porosity_k",
        1.0,
        (
            "Hapke (2008) porosity factor K [-], >= 1 (1: no "
            "porosity correction; from a filling factor phi: "
            "lumaxlike.porosity_k_from_filling_factor)"
        ),
    ),
    (
        "--asymmetry",
        "asymmetry",
        0.0,
        (
            "asymmetry xi [-] of the one-parameter phase functions "
            "(--phase hg, cornette_shanks), -1 < xi < 1: the mean "
            "cosine of the scattering angle, xi < 0 back-scattering"
        ),
    ),
)

#: Model configuration options: (flag, HapkeParams field, help).
MODEL_OPTIONS = (
    (
        "--model",
        "multiple_scattering",
        (
            "multiple scattering: amsa = Hapke (2002) anisotropic "
            "multiple scattering, imsa = Hapke (1981/1993) isotropic"
        ),
    ),
    (
        "--h-function",
        "h_function",
        (
            "Chandrasekhar H-function: hapke2002 = Hapke (2002, eq. 13) "
            "approximation, hapke1981 = the two-stream form "
            "(1 + 2x)/(1 + 2 gamma x) of ISIS3 photomet, exact = "
            "Chandrasekhar's H (to 1e-13)"
        ),
    ),
    (
        "--phase",
        "phase_function",
        (
            "single-particle phase function: dhg = double "
            "Henyey-Greenstein (--b, --c), hg = single Henyey-Greenstein, "
            "cornette_shanks = Cornette & Shanks (1992) (both --asymmetry)"
        ),
    ),
)

#: Empirical photometric function options (--model lambert, lommel_seeliger, lunar_lambert,
#: minnaert, shkuratov): (flag, PhotometricFunction field, help). Each takes one value for
#: every band or one per band; a kind refuses the options it does not use.
PHOTOMETRIC_OPTIONS = (
    (
        "--limb-darkening",
        "limb_darkening",
        (
            "Lunar-Lambert (McEwen 1991) limb-darkening weight "
            "L [-], >= 0 (0: Lambert, 1: Lommel-Seeliger; "
            "--model lunar_lambert)"
        ),
    ),
    (
        "--minnaert-k",
        "minnaert_k",
        "Minnaert exponent k [-], >= 0 (1: Lambert; --model minnaert)",
    ),
    (
        "--shkuratov-mu1",
        "mu1",
        "Shkuratov et al. (2011) phase-function slope mu1 [1/rad], >= 0",
    ),
    ("--shkuratov-m", "m", "Shkuratov et al. (2011) phase-function weight m [-], >= 0"),
    (
        "--shkuratov-mu2",
        "mu2",
        "Shkuratov et al. (2011) phase-function slope mu2 [1/rad], >= 0",
    ),
    (
        "--shkuratov-eta",
        "eta",
        "Shkuratov et al. (2011) disk-function roughness eta [-], >= 0",
    ),
)


class UsageError(Exception):
    """A bad command line, reported in one line with exit code 2."""


class Parser(argparse.ArgumentParser):
    """An argparse parser that raises :class:`UsageError` instead of exiting."""

    def error(self, message):  # argparse would print usage and exit(2) itself
        raise UsageError(f"{self.prog}: {message}")


class CommandParser(Parser):
    """The top-level parser: also records the command line as typed (``args.command_line``)."""

    def parse_args(self, args=None, namespace=None):
        argv = sys.argv[1:] if args is None else [str(a) for a in args]
        parsed = super().parse_args(argv, namespace)
        parsed.command_line = "lumaxlike " + shlex.join(argv)
        return parsed


def number_list(text: str) -> list[float]:
    """An argparse type: one finite number or a comma-separated list of them."""
    try:
        values = [float(item) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number or a comma-separated list of numbers, got {text!r}"
        ) from None
    if not all(math.isfinite(v) for v in values):
        raise argparse.ArgumentTypeError(f"expected finite numbers, got {text!r}")
    return values


def range_deg(text: str) -> tuple[float, float]:
    """An argparse type: ``MIN,MAX`` in degrees, 0 <= MIN <= MAX <= 180."""
    values = number_list(text)
    if len(values) != 2 or not 0.0 <= values[0] <= values[1] <= 180.0:
        raise argparse.ArgumentTypeError(
            f"expected MIN,MAX in degrees with 0 <= MIN <= MAX <= 180, got {text!r}"
        )
    return values[0], values[1]


def name_list(text: str) -> tuple[str, ...]:
    """An argparse type: comma-separated names (``w,b,c``)."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


def prior_option(text: str) -> tuple[str, tuple[float, float]]:
    """An argparse type: ``NAME=MEAN:SIGMA`` -> (name, (mean, sigma)), MEAN finite,
    SIGMA finite and > 0 (in the units of the parameter's option: see `prior_dict`)."""
    name, _, value = text.partition("=")
    mean, _, sigma = value.partition(":")
    try:
        pair = (float(mean), float(sigma))
    except ValueError:
        pair = None
    if (
        not name.strip()
        or pair is None
        or not (math.isfinite(pair[0]) and math.isfinite(pair[1]) and pair[1] > 0.0)
    ):
        raise argparse.ArgumentTypeError(
            "expected NAME=MEAN:SIGMA with a finite MEAN and a finite SIGMA > 0 "
            f"(e.g. b=0.3:0.1), got {text!r}"
        )
    return name.strip(), pair


#: parameters whose option takes degrees (--roughness-deg), and so does --prior
DEGREE_PARAMETERS = frozenset(field for flag, field, _, _ in HAPKE_OPTIONS if flag.endswith("-deg"))

PRIOR_HELP = (
    "Gaussian prior on a {verb} parameter, in the units of its option (roughness in "
    "degrees, as --roughness-deg; the others unitless); MEAN within the parameter's bounds "
    "(e.g. roughness 0.0573 to 45 deg, b 0 to 1, c -1 to 1); one --prior per parameter, repeat for "
    "several, e.g. --prior b=0.3:0.1 --prior roughness=20:5"
)


def prior_dict(pairs) -> dict[str, tuple[float, float]]:
    """``--prior``'s (name, (mean, sigma)) pairs as the Python API's ``prior``
    {name: (mean, sigma)}: roughness from degrees to radians; ValueError, in the command
    line's words, for a name given twice or a mean outside the parameter's bounds."""
    from .._inverse.fit.arguments import default_bounds

    bounds = default_bounds()
    prior: dict[str, tuple[float, float]] = {}
    for name, (mean, sigma) in pairs or ():
        if name in prior:
            raise ValueError(f"--prior gives {name} twice: give one --prior per parameter")
        if name in bounds:
            lower, upper = bounds[name]
            unit = ""
            if name in DEGREE_PARAMETERS:
                lower, upper, unit = math.degrees(lower), math.degrees(upper), " deg"
            if not lower <= mean <= upper:
                raise ValueError(
                    f"--prior {name}={mean:g}:{sigma:g}: the mean {mean:g}{unit} lies outside "
                    f"{name}'s bounds [{lower:.4g}, {upper:.6g}]{unit}"
                )
        if name in DEGREE_PARAMETERS:
            mean, sigma = math.radians(mean), math.radians(sigma)
        prior[name] = (mean, sigma)
    return prior


def scalar_or_list(values):
    """A number list option: None, one value (a scalar) or the list."""
    if values is None:
        return None
    return values[0] if len(values) == 1 else values


def dest(flag: str) -> str:
    """The ``args`` attribute of a flag: ``--max-iter`` -> ``max_iter``."""
    return flag[2:].replace("-", "_")


def add_refl_sigma_option(parser: argparse.ArgumentParser, help: str) -> None:
    """``--refl-sigma VALUE`` (``args.refl_sigma``): the noise of the cube's values, one number
    (`lumaxlike sample`'s takes one per band); ``--sigma``, its old spelling, still works
    (hidden, with a warning)."""
    parser.add_argument(
        "--refl-sigma", dest="refl_sigma", type=positive_float, metavar="VALUE", help=help
    )
    parser.add_argument(
        "--sigma",
        dest="refl_sigma",
        type=positive_float,
        action=DeprecatedAlias,
        new="--refl-sigma",
        help=argparse.SUPPRESS,
    )


def add_parallel_options(parser: argparse.ArgumentParser) -> None:
    """``--workers N`` and ``--scheduler ADDRESS`` (``args.workers``, ``args.scheduler``):
    where blocks run, for any subcommand that runs a ``BlockPool``."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "--workers",
        type=positive_int,
        default=1,
        metavar="N",
        help="worker processes inverting blocks in parallel: a local dask "
        "cluster of N processes, each with cpu_count/N numba threads "
        "(default 1: in this process)",
    )
    group.add_argument(
        "--scheduler",
        metavar="ADDRESS",
        help="run the blocks on an existing dask.distributed cluster, e.g. "
        "tcp://host:8786 (its workers need this lumaxlike version installed); "
        "this process still reads the cube and writes the outputs "
        "(default: none)",
    )


def add_run_options(parser: argparse.ArgumentParser, *, chunk_help: str, parallel: bool) -> None:
    """``--chunk`` (``chunk_help``), the parallel options when ``parallel``, ``--overwrite``,
    ``--progress`` and ``--resume``: how a file command streams its blocks."""
    parser.add_argument("--chunk", type=positive_int, metavar="ROWS", help=chunk_help)
    if parallel:
        add_parallel_options(parser)
    parser.add_argument(
        "--overwrite",
        action="store_true",
        help="replace existing outputs (default: refuse)",
    )
    parser.add_argument(
        "--progress",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="progress bar on stderr (default: when stderr is a terminal)",
    )
    parser.add_argument(
        "--resume",
        action="store_true",
        help="continue the run that a killed process (SIGKILL, power, a lost node) left for "
        "these outputs from the blocks it finished, kept in a hidden journal beside them; "
        "refused (exit 2, naming what changed) when the inputs or settings differ from that "
        "run's; the maps are those of an uninterrupted run (default: start afresh)",
    )


def add_stack_selection(parser: argparse.ArgumentParser, *, verb: str) -> None:
    """The Hapke model options of a stack command (`add_hapke_model_options`), the angle
    ranges that leave observations out and ``--min-observations`` (default: the ``verb``
    parameters + 1)."""
    add_hapke_model_options(parser)
    for angle in ("incidence", "emission", "phase"):
        parser.add_argument(
            f"--{angle}-range",
            type=range_deg,
            metavar="MIN,MAX",
            help=f"leave out observations whose {angle} angle [deg] lies outside "
            "(default: no limit)",
        )
    parser.add_argument(
        "--min-observations",
        type=positive_int,
        metavar="N",
        help=f"valid observations a pixel-band needs (default: {verb} parameters + 1)",
    )


def hapke_model_choices() -> dict:
    """{HapkeParams configuration field: its choices} of --model, --h-function, --phase."""
    from .._model.family import H_FUNCTIONS, MULTIPLE_SCATTERING, PHASE_FUNCTIONS

    return {
        "multiple_scattering": MULTIPLE_SCATTERING,
        "h_function": H_FUNCTIONS,
        "phase_function": PHASE_FUNCTIONS,
    }


def add_model_options(parser: argparse.ArgumentParser, recorded: str = "") -> None:
    """The model options (--model, --h-function, --phase, the Hapke and photometric
    parameters) of a subcommand; ``recorded``: text appended to each default."""
    from .._configuration import PHOTOMETRIC_DEFAULTS
    from .._configuration import PHOTOMETRIC_KINDS as KINDS
    from .._model.family import DEFAULT_KEY

    model_choices = hapke_model_choices()
    photometric_kinds = tuple(KINDS)
    for flag, field, text in MODEL_OPTIONS:
        photometric = photometric_kinds if flag == "--model" else ()
        text += (
            "; or an empirical photometric function, r = A pht/pi, inverted in closed form "
            "for its albedo A: lambert, lommel_seeliger, lunar_lambert, minnaert, shkuratov"
            if photometric
            else ""
        )
        parser.add_argument(
            flag,
            choices=tuple(model_choices[field]) + photometric,
            help=f"{text} (default {getattr(DEFAULT_KEY, field)}{recorded})",
        )
    for flag, _, default, text in HAPKE_OPTIONS:
        parser.add_argument(
            flag,
            type=number_list,
            metavar="VALUE[,...]",
            help=f"{text}; one value, or one per band (default {default:g}{recorded})",
        )
    for flag, field, text in PHOTOMETRIC_OPTIONS:
        default = PHOTOMETRIC_DEFAULTS[field]
        parser.add_argument(
            flag,
            type=number_list,
            metavar="VALUE[,...]",
            help=f"{text}; one value, or one per band (default {default:g}{recorded})",
        )


def add_hapke_model_options(parser: argparse.ArgumentParser) -> None:
    """The Hapke model options only (no photometric functions), each a single value: the
    fixed value or the start of a fitted parameter (``lumaxlike fit``)."""
    from .._model.family import DEFAULT_KEY

    model_choices = hapke_model_choices()
    for flag, field, text in MODEL_OPTIONS:
        parser.add_argument(
            flag,
            choices=tuple(model_choices[field]),
            help=f"{text} (default {getattr(DEFAULT_KEY, field)})",
        )
    for flag, _, default, text in HAPKE_OPTIONS:
        parser.add_argument(
            flag,
            type=number_list,
            metavar="VALUE",
            help=f"{text}; fixed value, or the start of a fitted parameter (default {default:g})",
        )


def quiet_cluster_logs(args) -> None:
    """When ``args`` (see :func:`add_parallel_options`) ask for a cluster: dask.distributed
    logs nothing more on stderr (the command's own line says what happened, a failure of
    the cluster included)."""
    if args.workers > 1 or args.scheduler is not None:
        from .._run.cluster import quiet_logs

        quiet_logs()
