"""The ``lumaxlike`` command line: ``invert``, ``fit``, ``demo`` and ``profile`` subcommands.

Exit codes: 0 success; 2 bad arguments or input (a one-line message on stderr naming the
file or argument); 1 unexpected failure (message and traceback on stderr); 130 / 143
stopped by SIGINT (Ctrl-C) / SIGTERM (temporary files removed, existing outputs untouched).
"""

from __future__ import annotations

import argparse
import math
import shlex
import signal
import sys
import traceback
from pathlib import Path

from ._signals import Interrupted, stop_on_signals

__all__ = ["main", "build_parser"]

EXIT_OK, EXIT_FAILURE, EXIT_BAD_INPUT = 0, 1, 2

#: Hapke options: (flag, HapkeParams field, default, help). Each takes one value for every
#: band or a comma-separated list of one value per band.
HAPKE_OPTIONS = (
    ("--b", "b", 0.2, "double Henyey-Greenstein asymmetry b [-], 0 <= b < 1"),
    ("--c", "c", 0.5, "double Henyey-Greenstein back/forward partition c [-], -1 <= c <= 1 "
                      "(c > 0: back-scattering)"),
    ("--roughness-deg", "roughness", 0.0, "Hapke (1984) mean slope angle theta-bar [deg], "
                                          "0 <= . < 90"),
    ("--hs", "hs", 0.0, "shadow-hiding opposition width h_S [-], >= 0 (0: off)"),
    ("--bs0", "bs0", 0.0, "shadow-hiding opposition amplitude B_S0 [-], >= 0"),
    ("--hc", "hc", 0.0, "coherent-backscatter width h_C [-], >= 0 (0: off)"),
    ("--bc0", "bc0", 0.0, "coherent-backscatter amplitude B_C0 [-], >= 0"),
    ("--porosity-k", "porosity_k", 1.0, "Hapke (2008) porosity factor K [-], >= 1 (1: no "
                                        "porosity correction; from a filling factor phi: "
                                        "lumaxlike.porosity_k_from_filling_factor)"),
    ("--asymmetry", "asymmetry", 0.0, "asymmetry xi [-] of the one-parameter phase functions "
                                      "(--phase hg, cornette_shanks), -1 < xi < 1: the mean "
                                      "cosine of the scattering angle, xi < 0 back-scattering"),
)

#: Model configuration options: (flag, HapkeParams field, help).
MODEL_OPTIONS = (
    ("--model", "multiple_scattering", "multiple scattering: amsa = Hapke (2002) anisotropic "
                                       "multiple scattering, imsa = Hapke (1981/1993) isotropic"),
    ("--h-function", "h_function", "Chandrasekhar H-function: hapke2002 = Hapke (2002, eq. 13) "
                                   "approximation, hapke1981 = the two-stream form "
                                   "(1 + 2x)/(1 + 2 gamma x) of ISIS3 photomet, exact = "
                                   "Chandrasekhar's H (to 1e-13)"),
    ("--phase", "phase_function", "single-particle phase function: dhg = double "
                                  "Henyey-Greenstein (--b, --c), hg = single Henyey-Greenstein, "
                                  "cornette_shanks = Cornette & Shanks (1992) (both --asymmetry)"),
)

#: ``lumaxlike invert`` options that --params-from can fill in: flag -> Provenance attribute.
RECORDED_OPTIONS = {"--geometry": "geometry", "--dtm": "dtm", "--units": "units",
                    "--solver": "solver", "--tol": "tol", "--max-iter": "max_iter",
                    "--sigma": "refl_sigma"}

DEFAULT_SOLVER = "numba"

class _UsageError(Exception):
    """A bad command line, reported in one line with exit code 2."""


class _Parser(argparse.ArgumentParser):
    def error(self, message):  # argparse would print usage and exit(2) itself
        raise _UsageError(f"{self.prog}: {message}")


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text!r}")
    return value


def _positive_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}") from None
    if not (math.isfinite(value) and value > 0):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def _number_list(text: str) -> list[float]:
    try:
        values = [float(item) for item in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected a number or a comma-separated list of numbers, got {text!r}"
        ) from None
    if not all(math.isfinite(v) for v in values):
        raise argparse.ArgumentTypeError(f"expected finite numbers, got {text!r}")
    return values


def _dest(flag: str) -> str:
    return flag[2:].replace("-", "_")


class _CommandParser(_Parser):
    """The top-level parser: also records the command line as typed (``args.command_line``)."""

    def parse_args(self, args=None, namespace=None):
        argv = sys.argv[1:] if args is None else [str(a) for a in args]
        parsed = super().parse_args(argv, namespace)
        parsed.command_line = "lumaxlike " + shlex.join(argv)
        return parsed


TOP_EPILOG = """\
Run `lumaxlike COMMAND --help` for a command's options.

example (after `lumaxlike demo`: rerun its numba inversion from the record in its output):
  lumaxlike invert lumaxlike-demo/reflectance.tif --params-from lumaxlike-demo/w_numba.tif --out w.tif
"""

INVERT_DESCRIPTION = """\
Invert a reflectance cube (GeoTIFF, ENVI, anything GDAL opens) for the single-scattering
albedo w per pixel and band, streaming it by blocks of rows.

Writes OUT (w) and, for GeoTIFF/ENVI, siblings OUT_status, OUT_iterations, OUT_residual
(and OUT_sigma with --sigma); netCDF (.nc) and zarr (.zarr) hold them all in one dataset.
Every output records how it was made (lumaxlike version, model, Hapke parameters, units,
solver, tol, max-iter, sigma, input files, this command line, the time; see
lumaxlike.read_provenance), and --params-from reuses that record.
"""

INVERT_EPILOG = """\
examples (on the files `lumaxlike demo` writes into lumaxlike-demo/):
  # the demo's model: bidirectional reflectance r, its Hapke parameters, local slopes
  lumaxlike invert lumaxlike-demo/reflectance.tif --geometry lumaxlike-demo/obs.tif \\
      --dtm lumaxlike-demo/dtm.tif --units r --b 0.2 --c 0.4 --roughness-deg 20 \\
      --hs 0.06 --bs0 1 --hc 0.05 --bc0 0.5 --out w.tif
  # the same run again, every setting read from the first one's output
  lumaxlike invert lumaxlike-demo/reflectance.tif --params-from w.tif --out w_again.tif
"""


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of the ``lumaxlike`` command."""
    from . import __version__
    from ._inverse.invert import DEFAULT_MAX_ITER

    formatter = argparse.RawDescriptionHelpFormatter
    parser = _CommandParser(
        prog="lumaxlike", allow_abbrev=False, formatter_class=formatter, epilog=TOP_EPILOG,
        description="Invert Hapke's AMSA model pixel by pixel over hyperspectral cubes for "
        "single-scattering albedo maps.",
    )
    parser.add_argument("--version", action="version", version=f"lumaxlike {__version__}",
                        help="print lumaxlike's version and exit")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    invert = commands.add_parser(
        "invert", help="invert a reflectance cube file for w maps", allow_abbrev=False,
        formatter_class=formatter, description=INVERT_DESCRIPTION, epilog=INVERT_EPILOG,
    )
    recorded = "; with --params-from: the recorded value"
    invert.add_argument("cube", type=Path, metavar="CUBE", help="reflectance cube file (required)")
    invert.add_argument("--out", type=Path, required=True, metavar="OUT",
                        help="output: .tif/.tiff GeoTIFF, .img/.envi/.hdr ENVI, .nc netCDF, "
                        ".zarr zarr (required)")
    invert.add_argument("--params-from", type=Path, metavar="OLD",
                        help="an earlier lumaxlike output (any of its files): take its model, "
                        "Hapke parameters, --units, --solver, --tol, --max-iter, --sigma, "
                        "--geometry and --dtm from the record it carries; options given here "
                        "override them (default: none)")
    invert.add_argument("--geometry", type=Path, metavar="OBS",
                        help="OBS raster on the cube's grid whose band descriptions name the "
                        "to-sun zenith, to-sun azimuth, to-sensor zenith and to-sensor azimuth "
                        "[deg, azimuths clockwise from north]; matched case-insensitively, e.g. "
                        "'To-sun zenith', 'solar_zenith', 'SZA', 'To-Inst AZM', 'view_azimuth' "
                        "(full list: lumaxlike.OBS_BAND_NAMES). Required, unless --params-from "
                        "gives it")
    invert.add_argument("--dtm", type=Path, metavar="DTM",
                        help="DTM on the cube's grid (heights [m], projected CRS) for local "
                        "slopes (default: a flat, horizontal surface" + recorded + ")")
    invert.add_argument("--units", choices=("r", "radf", "reff"),
                        help="what the cube holds: r = bidirectional reflectance [1/sr], "
                        "radf = radiance factor I/F = pi r [-], reff = reflectance factor "
                        "pi r / cos i [-] (local incidence i). Required, unless --params-from "
                        "gives it")
    invert.add_argument("--solver", choices=("numba", "jax"),
                        help="numba: compiled Levenberg-Marquardt on the CPU, parallel threads, "
                        "always float64; jax: optimistix Levenberg-Marquardt on the CPU or a "
                        f"GPU, in the cube's precision (float32 cubes in float32) "
                        f"(default {DEFAULT_SOLVER}{recorded})")
    from ._model.family import DEFAULT_KEY, H_FUNCTIONS, MULTIPLE_SCATTERING, PHASE_FUNCTIONS

    model_choices = {"multiple_scattering": MULTIPLE_SCATTERING, "h_function": H_FUNCTIONS,
                     "phase_function": PHASE_FUNCTIONS}
    for flag, field, text in MODEL_OPTIONS:
        invert.add_argument(flag, choices=tuple(model_choices[field]),
                            help=f"{text} (default {getattr(DEFAULT_KEY, field)}{recorded})")
    for flag, _, default, text in HAPKE_OPTIONS:
        invert.add_argument(flag, type=_number_list, metavar="VALUE[,...]",
                            help=f"{text}; one value, or one per band (default {default:g}"
                            f"{recorded})")
    invert.add_argument("--tol", type=_positive_float, metavar="VALUE",
                        help="convergence tolerance on the solver's step in w [-] (default 1e-10 "
                        f"for float64 cubes, 1e-5 for float32 ones{recorded})")
    invert.add_argument("--max-iter", type=_positive_int, metavar="N",
                        help=f"solver iterations per pixel-band at most (default {DEFAULT_MAX_ITER}"
                        f"{recorded})")
    invert.add_argument("--sigma", type=_positive_float, metavar="VALUE",
                        help="standard uncertainty of the cube's values, in --units; writes the "
                        f"sigma map of w too (default: none, no sigma map{recorded})")
    invert.add_argument("--chunk", type=_positive_int, metavar="ROWS",
                        help="rows per block (default: about 32 MiB of reflectance)")
    invert.add_argument("--workers", type=_positive_int, default=1, metavar="N",
                        help="worker processes inverting blocks in parallel (default 1)")
    invert.add_argument("--overwrite", action="store_true",
                        help="replace existing outputs (default: refuse)")
    invert.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bar on stderr (default: when stderr is a terminal)")
    invert.set_defaults(handler=_run_invert)
    _add_fit_parser(commands, model_choices)

    # demo and profile parse their own arguments (see PASS_THROUGH); listed here for --help.
    commands.add_parser("demo", help="run the end-to-end demo (see `lumaxlike demo --help`)")
    commands.add_parser("profile", help="profile the solvers (see `lumaxlike profile --help`)")
    return parser


# ---------------------------------------------------------------- lumaxlike fit

FIT_DESCRIPTION = """\
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

FIT_EPILOG = """\
example (five cubes of one area with their OBS rasters; w, b, c need >= 4 per pixel-band):
  lumaxlike fit day1.tif day2.tif day3.tif day4.tif day5.tif \\
      --geometry obs1.tif obs2.tif obs3.tif obs4.tif obs5.tif \\
      --units radf --free w,b,c --b 0.3 --c 0.4 --incidence-range 0,70 --out fit.tif
"""


def _range_deg(text: str) -> tuple[float, float]:
    values = _number_list(text)
    if len(values) != 2 or not 0.0 <= values[0] <= values[1] <= 180.0:
        raise argparse.ArgumentTypeError(f"expected MIN,MAX in degrees with 0 <= MIN <= MAX <= 180, got {text!r}")
    return values[0], values[1]


def _name_list(text: str) -> tuple[str, ...]:
    return tuple(item.strip() for item in text.split(",") if item.strip())


def _add_fit_parser(commands, model_choices) -> None:
    from ._inverse.invert import DEFAULT_MAX_ITER
    from ._model.family import DEFAULT_KEY
    from ._params import PARAMETER_NAMES

    fit = commands.add_parser(
        "fit", help="fit several Hapke parameters to a stack of cubes", allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter, description=FIT_DESCRIPTION, epilog=FIT_EPILOG,
    )
    fit.add_argument("cubes", type=Path, nargs="+", metavar="CUBE",
                     help="reflectance cubes on one grid with the same bands, one observation each")
    fit.add_argument("--geometry", type=Path, nargs="+", required=True, metavar="OBS",
                     help="one OBS raster per cube, in the same order (band names as for "
                     "`lumaxlike invert --geometry`) (required)")
    fit.add_argument("--out", type=Path, required=True, metavar="OUT",
                     help="output: .tif/.tiff GeoTIFF, .img/.envi/.hdr ENVI, .nc netCDF, .zarr zarr (required)")
    fit.add_argument("--free", type=_name_list, required=True, metavar="NAME[,...]",
                     help=f"fitted parameters, w among them: any of {', '.join(PARAMETER_NAMES)} "
                     "(roughness in rad in the outputs) (required)")
    fit.add_argument("--units", choices=("r", "radf", "reff"), required=True,
                     help="what the cubes hold: r [1/sr], radf = pi r, reff = pi r / cos i (required)")
    fit.add_argument("--dtm", type=Path, metavar="DTM",
                     help="DTM on the cubes' grid (heights [m]) for local slopes (default: flat)")
    fit.add_argument("--solver", choices=("numba", "jax"), default=DEFAULT_SOLVER,
                     help=f"numba (CPU threads, float64) or jax (CPU or GPU) (default {DEFAULT_SOLVER})")
    for flag, field, text in MODEL_OPTIONS:
        fit.add_argument(flag, choices=tuple(model_choices[field]),
                         help=f"{text} (default {getattr(DEFAULT_KEY, field)})")
    for flag, _, default, text in HAPKE_OPTIONS:
        fit.add_argument(flag, type=_number_list, metavar="VALUE",
                         help=f"{text}; fixed value, or the start of a fitted parameter (default {default:g})")
    for angle in ("incidence", "emission", "phase"):
        fit.add_argument(f"--{angle}-range", type=_range_deg, metavar="MIN,MAX",
                         help=f"leave out observations whose {angle} angle [deg] lies outside "
                         "(default: no limit)")
    fit.add_argument("--min-observations", type=_positive_int, metavar="N",
                     help="valid observations a pixel-band needs (default: fitted parameters + 1)")
    fit.add_argument("--sigma", type=_positive_float, metavar="VALUE",
                     help="standard uncertainty of the cubes' values in --units (r or radf): "
                     "the sigma maps then follow from it (default: from the residuals)")
    fit.add_argument("--tol", type=_positive_float, metavar="VALUE",
                     help="convergence tolerance on the step of every parameter (default 1e-10, "
                     "1e-5 for float32 cubes)")
    fit.add_argument("--max-iter", type=_positive_int, metavar="N",
                     help=f"solver iterations per pixel-band at most (default {DEFAULT_MAX_ITER})")
    fit.add_argument("--chunk", type=_positive_int, metavar="ROWS",
                     help="rows per block (default: about 32 MiB of stacked reflectance)")
    fit.add_argument("--overwrite", action="store_true", help="replace existing outputs (default: refuse)")
    fit.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                     help="progress bar on stderr (default: when stderr is a terminal)")
    fit.set_defaults(handler=_run_fit)


def _run_fit(args) -> int:
    from ._io.file_fit import fit_files
    from ._io.raster import CubeReader

    with CubeReader(args.cubes[0]) as cube:
        bands = cube.info.bands
    args.cube, args.params_from = args.cubes[0], None  # what _hapke_params names in messages
    params = _hapke_params(args, bands)
    if not _same_params(params):
        raise ValueError("lumaxlike fit takes one value per Hapke option (the start of a fitted "
                         "parameter, or the fixed value), shared by every band")
    limits = {angle: getattr(args, f"{angle}_range") for angle in ("incidence", "emission", "phase")}
    summary = fit_files(
        args.cubes, args.out, geometry=args.geometry, params=params[0], free=args.free, units=args.units,
        dtm=args.dtm, solver=args.solver,
        observation_limits_deg={k: v for k, v in limits.items() if v is not None},
        min_observations=args.min_observations, sigma=args.sigma, chunk_rows=args.chunk,
        overwrite=args.overwrite, progress=args.progress, max_iter=args.max_iter, tol=args.tol,
        command=args.command_line,
    )
    print(f"lumaxlike fit: {len(args.cubes)} cubes ({args.units}) -> {args.out}, free "
          f"{','.join(args.free)}, solver {args.solver}: "
          f"{summary.describe().replace('inverted', 'fitted', 1)}", file=sys.stderr)
    return EXIT_OK


def _same_params(params) -> bool:
    """True when every HapkeParams of the sequence has the same values."""
    return len({_params_key(p) for p in params}) == 1


def _params_key(params) -> tuple:
    legendre = None if params.legendre is None else tuple(float(v) for v in params.legendre)
    return (*(float(getattr(params, name)) for _, name, _, _ in HAPKE_OPTIONS), legendre, params.model_key)


def _hapke_params(args, bands: int, base=None):
    """One HapkeParams per band from the Hapke options (shared objects for equal values).

    Args:
        args: parsed options; a Hapke option left out (None) takes its value from ``base``,
            else its default.
        bands: the cube's bands.
        base: per-band HapkeParams recorded by --params-from (one per band, or one set
            shared by every band), or None.
    """
    from ._params import HapkeParams

    if base is not None and len(base) != bands:
        if not _same_params(base):
            raise ValueError(f"--params-from {args.params_from} records parameters for "
                             f"{len(base)} bands but the cube {args.cube} has {bands} bands")
        base = [base[0]] * bands
    per_field = {}
    for flag, name, default, text in HAPKE_OPTIONS:
        values = getattr(args, _dest(flag))
        if values is None and base is not None:
            per_field[name] = [getattr(p, name) for p in base]
            continue
        values = [default] if values is None else values
        if len(values) not in (1, bands):
            raise ValueError(f"{flag} gives {len(values)} values but the cube {args.cube} has "
                             f"{bands} bands (give one value, or one per band)")
        if name == "roughness":
            values = [math.radians(v) for v in values]
        for value in values:  # checked one field at a time, so the message names the flag
            try:
                HapkeParams(**{"b": 0.0, "c": 0.0, name: value})
            except ValueError:
                shown = math.degrees(value) if name == "roughness" else value
                raise ValueError(f"{flag} {shown:g} is outside its valid range ({text})") from None
        per_field[name] = values if len(values) == bands else values * bands
    legendre = [p.legendre for p in base] if base is not None else [None] * bands
    configuration = {}
    for flag, field, _ in MODEL_OPTIONS:  # the same for every band
        choice = getattr(args, _dest(flag))
        if choice is None and base is not None:
            choice = getattr(base[0], field)
        if choice is not None:
            configuration[field] = choice
    names = list(per_field)
    shared: dict[tuple, object] = {}
    params = []
    for band in range(bands):
        fields = {name: per_field[name][band] for name in names}
        key = (*fields.values(), None if legendre[band] is None else tuple(legendre[band]))
        if key not in shared:
            shared[key] = HapkeParams(**fields, legendre=legendre[band], **configuration)
        params.append(shared[key])
    return params


def _resolve(args, record) -> dict:
    """Settings of the run: the options given, else --params-from's record, else defaults."""
    settings = {}
    for flag, attribute in RECORDED_OPTIONS.items():
        value = getattr(args, _dest(flag))
        if value is None and record is not None:
            value = getattr(record, attribute)
        settings[_dest(flag)] = value
    geometry = settings["geometry"]
    if isinstance(geometry, tuple):  # recorded as (role, path) pairs: usable when all are files
        if not all(path is not None for _, path in geometry):
            raise ValueError(f"--params-from {args.params_from} records a geometry given as "
                             "arrays; give --geometry")
        settings["geometry"] = dict(geometry)
    for flag in ("--geometry", "--units"):
        if settings[_dest(flag)] is None:
            raise ValueError(f"{flag} is required (or --params-from an output that records it)")
    settings["solver"] = settings["solver"] or DEFAULT_SOLVER
    return settings


def _run_invert(args) -> int:
    from ._io.file_inversion import invert_file
    from ._io.raster import CubeReader
    from ._provenance import read_provenance

    record = None
    if args.params_from is not None:
        record = read_provenance(args.params_from)
        record.check_reproducible(f"--params-from {args.params_from}")
    settings = _resolve(args, record)
    with CubeReader(args.cube) as cube:
        bands = cube.info.bands
    params = _hapke_params(args, bands, None if record is None else record.params)
    summary = invert_file(
        args.cube, args.out, params=params, chunk_rows=args.chunk, overwrite=args.overwrite,
        progress=args.progress, workers=args.workers, command=args.command_line, **settings,
    )
    # one line, once the run has succeeded (an error is then the only line on stderr)
    print(f"lumaxlike invert: {args.cube} ({settings['units']}) -> {args.out}, solver "
          f"{settings['solver']}: {summary.describe()}", file=sys.stderr)
    return EXIT_OK


def _run_demo(argv: list[str]) -> int:
    from ._demo import run_demo

    return int(run_demo(argv))


def _run_profile(argv: list[str]) -> int:
    from . import _profile

    return int(_profile.main(argv))


#: Subcommands that receive the rest of the command line unparsed.
PASS_THROUGH = {"demo": _run_demo, "profile": _run_profile}


#: Errors that mean "bad arguments or input": reported in one line, exit code 2.
BAD_INPUT_ERRORS = (ValueError, FileNotFoundError, FileExistsError, NotADirectoryError,
                    IsADirectoryError, PermissionError)


def main(argv=None) -> int:
    """Run the ``lumaxlike`` command.

    While ``invert`` runs, SIGINT and SIGTERM are handled (see :mod:`lumaxlike._signals`):
    the run stops, removes its temporary files and returns 128 + the signal's number;
    the previous handlers are restored before it returns.

    Args:
        argv: arguments without the program name; None reads ``sys.argv[1:]``.

    Returns:
        exit code: 0 success, 2 bad arguments or input, 1 unexpected failure, 128 + the
        signal's number when a SIGINT (130) or SIGTERM (143) stopped it.
    """
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    if argv and argv[0] in PASS_THROUGH:  # Python's own Ctrl-C handling: KeyboardInterrupt
        return _report(argv[0], lambda: PASS_THROUGH[argv[0]](argv[1:]), lambda: None)
    with stop_on_signals() as stopped_by:
        try:
            args = build_parser().parse_args(argv)
        except _UsageError as error:
            print(error, file=sys.stderr)
            return EXIT_BAD_INPUT
        except SystemExit as done:  # --help
            return int(done.code or 0)
        return _report(args.command, lambda: args.handler(args), stopped_by)


def _report(command: str, run, stopped_by) -> int:
    """Run a command; report its failure in one line (a traceback if unexpected).

    ``stopped_by()`` is the stop signal that arrived, or None: it decides the exit code
    whatever else happened, since the signal may have surfaced as another error.
    """
    failure, code, stopped = None, None, False
    try:
        code = run()
    except Interrupted:
        stopped = True
    except BaseException as error:  # noqa: BLE001 - the command line reports every failure
        failure = error
    if code is not None and stopped_by() is not None:
        # the signal came after the run's outputs were published (its last safe point):
        # the run is complete, its outputs are new, and the exit code says so
        name = signal.Signals(stopped_by()).name
        print(f"lumaxlike {command}: {name} arrived after the run completed", file=sys.stderr)
        return code
    if stopped or stopped_by() is not None:
        name = signal.Signals(stopped_by()).name
        print(f"lumaxlike {command}: stopped by {name}", file=sys.stderr)
        return 128 + stopped_by()
    if isinstance(failure, BAD_INPUT_ERRORS):
        print(f"lumaxlike {command}: error: {_cli_message(failure)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    if isinstance(failure, KeyboardInterrupt):  # Ctrl-C in demo or profile
        print(f"lumaxlike {command}: interrupted", file=sys.stderr)
        return 128 + signal.SIGINT
    if failure is not None and not isinstance(failure, Exception):
        raise failure  # SystemExit and the like
    if failure is not None:
        print(f"lumaxlike {command}: unexpected failure:", file=sys.stderr)
        traceback.print_exception(failure)
        return EXIT_FAILURE
    return code


def _cli_message(error: BaseException) -> str:
    """The error's message in one line, in the command line's words."""
    from ._io.atomic import OutputExistsError  # already imported by whatever raised it

    if isinstance(error, OutputExistsError):
        return f"output already exists: {', '.join(error.paths)}; add --overwrite to replace it"
    return " ".join(str(error).split()) or type(error).__name__
