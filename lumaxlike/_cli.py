"""The ``lumaxlike`` command line: ``invert``, ``normalize``, ``fit``, ``unmix``, ``demo`` and ``profile``
subcommands.

Exit codes: 0 success; 2 bad arguments or input (a one-line message on stderr naming the
file or argument); 1 unexpected failure (message and traceback on stderr; one line when a
dask cluster failed mid-run); 130 / 143
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

#: Empirical photometric function options (--model lambert, lommel_seeliger, lunar_lambert,
#: minnaert, shkuratov): (flag, PhotometricFunction field, help). Each takes one value for
#: every band or one per band; a kind refuses the options it does not use.
PHOTOMETRIC_OPTIONS = (
    ("--limb-darkening", "limb_darkening", "Lunar-Lambert (McEwen 1991) limb-darkening weight L [-], "
                                           ">= 0 (0: Lambert, 1: Lommel-Seeliger; --model lunar_lambert)"),
    ("--minnaert-k", "minnaert_k", "Minnaert exponent k [-], >= 0 (1: Lambert; --model minnaert)"),
    ("--shkuratov-mu1", "mu1", "Shkuratov et al. (2011) phase-function slope mu1 [1/rad], >= 0"),
    ("--shkuratov-m", "m", "Shkuratov et al. (2011) phase-function weight m [-], >= 0"),
    ("--shkuratov-mu2", "mu2", "Shkuratov et al. (2011) phase-function slope mu2 [1/rad], >= 0"),
    ("--shkuratov-eta", "eta", "Shkuratov et al. (2011) disk-function roughness eta [-], >= 0"),
)

#: ``lumaxlike invert`` options that --params-from can fill in: flag -> Provenance attribute.
RECORDED_OPTIONS = {"--geometry": "geometry", "--dtm": "dtm", "--units": "units",
                    "--solver": "solver", "--tol": "tol", "--max-iter": "max_iter",
                    "--sigma": "refl_sigma", "--surface": "surface"}

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


def add_parallel_options(parser: argparse.ArgumentParser) -> None:
    """``--workers N`` and ``--scheduler ADDRESS`` (``args.workers``, ``args.scheduler``):
    where blocks run, for any subcommand that runs a ``BlockPool``."""
    group = parser.add_mutually_exclusive_group()
    group.add_argument("--workers", type=_positive_int, default=1, metavar="N",
                       help="worker processes inverting blocks in parallel: a local dask "
                       "cluster of N processes, each with cpu_count/N numba threads "
                       "(default 1: in this process)")
    group.add_argument("--scheduler", metavar="ADDRESS",
                       help="run the blocks on an existing dask.distributed cluster, e.g. "
                       "tcp://host:8786 (its workers need this lumaxlike version installed); "
                       "this process still reads the cube and writes the outputs "
                       "(default: none)")


def _hapke_model_choices() -> dict:
    """{HapkeParams configuration field: its choices} of --model, --h-function, --phase."""
    from ._model.family import H_FUNCTIONS, MULTIPLE_SCATTERING, PHASE_FUNCTIONS

    return {"multiple_scattering": MULTIPLE_SCATTERING, "h_function": H_FUNCTIONS, "phase_function": PHASE_FUNCTIONS}


def add_model_options(parser: argparse.ArgumentParser, recorded: str = "") -> None:
    """The model options (--model, --h-function, --phase, the Hapke and photometric
    parameters) of a subcommand; ``recorded``: text appended to each default."""
    from ._model.family import DEFAULT_KEY
    from ._model.photometric import DEFAULTS as PHOTOMETRIC_DEFAULTS, KINDS

    model_choices = _hapke_model_choices()

    PHOTOMETRIC_KINDS = tuple(KINDS)

    for flag, field, text in MODEL_OPTIONS:
        photometric = PHOTOMETRIC_KINDS if flag == "--model" else ()
        text += ("; or an empirical photometric function, r = A pht/pi, inverted in closed form "
                 "for its albedo A: lambert, lommel_seeliger, lunar_lambert, minnaert, shkuratov"
                 if photometric else "")
        parser.add_argument(flag, choices=tuple(model_choices[field]) + photometric,
                            help=f"{text} (default {getattr(DEFAULT_KEY, field)}{recorded})")
    for flag, _, default, text in HAPKE_OPTIONS:
        parser.add_argument(flag, type=_number_list, metavar="VALUE[,...]",
                            help=f"{text}; one value, or one per band (default {default:g}"
                            f"{recorded})")
    for flag, _, text in PHOTOMETRIC_OPTIONS:
        default = PHOTOMETRIC_DEFAULTS[_PHOTOMETRIC_FIELD[flag]]
        parser.add_argument(flag, type=_number_list, metavar="VALUE[,...]",
                            help=f"{text}; one value, or one per band (default {default:g}{recorded})")


def quiet_cluster_logs(args) -> None:
    """When ``args`` (see :func:`add_parallel_options`) ask for a cluster: dask.distributed
    logs nothing more on stderr (the command's own line says what happened, a failure of
    the cluster included)."""
    if args.workers > 1 or args.scheduler is not None:
        from ._io.cluster import quiet_logs

        quiet_logs()


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
                        help="geometry backplane on the cube's grid whose band descriptions name "
                        "its bands [deg, azimuths clockwise from north]: the to-sun and to-sensor "
                        "zenith and azimuth, or incidence, emission and phase; plus, when present, "
                        "facet slope and aspect or local incidence and emission. Names as M3, "
                        "AVIRIS-NG/AVIRIS-3/EMIT OBS, CRISM DDR and ISIS phocube spell them, matched "
                        "case-insensitively, e.g. 'To-Sun Zenith', 'To-Inst AZM', 'Facet Slope', "
                        "'INA at areoid, deg', 'Local Incidence Angle' (full list: "
                        "lumaxlike.OBS_BAND_NAMES). Required, unless --params-from gives it")
    invert.add_argument("--surface", choices=("auto", "local", "ellipsoid"),
                        help="which angles to use when the geometry carries both angles relative "
                        "to the ellipsoid and to the local surface (facet slope/aspect, local "
                        "incidence/emission): local = the local surface (an error if absent), "
                        "ellipsoid = the ellipsoid, leaving the local-surface bands out, auto = "
                        "local when present, else ellipsoid; recorded in the outputs (default "
                        "auto" + recorded + ")")
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
    add_model_options(invert, recorded)
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
    add_parallel_options(invert)
    invert.add_argument("--overwrite", action="store_true",
                        help="replace existing outputs (default: refuse)")
    invert.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bar on stderr (default: when stderr is a terminal)")
    invert.set_defaults(handler=_run_invert)
    _add_normalize_parser(commands, invert, formatter)
    _add_fit_parser(commands)
    add_unmix_parser(commands, formatter)

    # demo and profile parse their own arguments (see PASS_THROUGH); listed here for --help.
    commands.add_parser("demo", help="run the end-to-end demo (see `lumaxlike demo --help`)")
    commands.add_parser("profile", help="profile the solvers (see `lumaxlike profile --help`)")
    return parser


NORMALIZE_DESCRIPTION = """\
Photometric normalisation of a reflectance cube: the reflectance every pixel would have at
a standard geometry (incidence, emission, phase; default 30, 0, 30 deg, as ISIS photomet
and the M3 and LROC WAC pipelines use), through the albedo w inverted at the pixel's own
geometry with the given Hapke model, streamed by blocks of rows.

Writes OUT (the normalised cube, in --units, REFF with the standard incidence) and, for
GeoTIFF/ENVI, siblings OUT_status (the inversion's status) and with --sigma OUT_sigma;
netCDF (.nc) and zarr (.zarr) hold them as reflectance, status, sigma. Every option of
`lumaxlike invert` works the same here; outputs record how they were made, the standard
geometry and parameter maps included.
"""

NORMALIZE_EPILOG = """\
examples (on the files `lumaxlike demo` writes into lumaxlike-demo/):
  lumaxlike normalize lumaxlike-demo/reflectance.tif --geometry lumaxlike-demo/obs.tif \\
      --dtm lumaxlike-demo/dtm.tif --units r --b 0.2 --c 0.4 --roughness-deg 20 \\
      --hs 0.06 --bs0 1 --hc 0.05 --bc0 0.5 --standard 30,0,30 --out normalised.tif
  # a roughness map (degrees, one band, on the cube's grid) instead of one value
  lumaxlike normalize CUBE --geometry OBS --units radf --param-map roughness-deg=theta.tif --out OUT.tif
"""

#: --param-map names: the Hapke option's name (without --) -> HapkeParams field
PARAM_MAP_NAMES = {flag[2:]: field for flag, field, _, _ in HAPKE_OPTIONS}


def _angle_triple(text: str) -> tuple[float, float, float]:
    values = _number_list(text)
    if len(values) != 3:
        raise argparse.ArgumentTypeError(f"expected three angles I,E,G in degrees, got {text!r}")
    return tuple(values)


def _param_map(text: str) -> tuple[str, Path]:
    name, separator, path = text.partition("=")
    if not separator or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=RASTER, got {text!r}")
    if name not in PARAM_MAP_NAMES:
        raise argparse.ArgumentTypeError(f"unknown parameter {name!r} in {text!r}; one of "
                                         f"{', '.join(PARAM_MAP_NAMES)}")
    return name, Path(path)


def _add_normalize_parser(commands, invert, formatter) -> None:
    """``lumaxlike normalize``: every option of ``invert`` plus --standard and --param-map."""
    normalize = commands.add_parser(
        "normalize", help="photometric normalisation of a reflectance cube to a standard geometry",
        allow_abbrev=False, formatter_class=formatter, description=NORMALIZE_DESCRIPTION,
        epilog=NORMALIZE_EPILOG,
    )
    for action in invert._actions:  # the same Action objects, as argparse's parents= shares them
        if not isinstance(action, argparse._HelpAction):
            normalize._add_action(action)
    normalize.add_argument("--standard", type=_angle_triple, metavar="I,E,G",
                           help="standard geometry: incidence, emission, phase [deg], "
                           "0 <= I, E < 90, |I - E| <= G <= I + E (default 30,0,30; with "
                           "--params-from: the recorded one)")
    normalize.add_argument("--param-map", type=_param_map, action="append", metavar="NAME=RASTER",
                           help="a per-pixel Hapke parameter raster on the cube's grid replacing "
                           "that option's value: NAME is b, c, roughness-deg (degrees), hs, bs0, "
                           "hc, bc0, porosity-k or asymmetry; 1 band (per pixel) or one per cube "
                           "band; nodata makes the pixel NONFINITE_INPUT. Repeatable (default: none)")
    normalize.set_defaults(handler=_run_normalize)


def _run_normalize(args) -> int:
    from ._io.file_normalization import normalize_file
    from ._io.raster import CubeReader
    from ._normalize.standard import DEFAULT_STANDARD
    from ._provenance import read_provenance

    record = None
    if args.params_from is not None:
        record = read_provenance(args.params_from)
        record.check_reproducible(f"--params-from {args.params_from}")
    settings = _resolve(args, record)
    if args.standard is not None:
        standard = tuple(math.radians(v) for v in args.standard)
    elif record is not None and record.standard is not None:
        standard = record.standard
    else:
        standard = DEFAULT_STANDARD
    param_maps = {PARAM_MAP_NAMES[name]: path for name, path in (args.param_map or [])}
    if len(param_maps) != len(args.param_map or []):
        raise ValueError("--param-map gives the same parameter twice")
    with CubeReader(args.cube) as cube:
        bands = cube.info.bands
    params = _model_params(args, bands, record)
    quiet_cluster_logs(args)
    try:
        summary = normalize_file(
            args.cube, args.out, params=params, standard=standard, param_maps=param_maps or None,
            chunk_rows=args.chunk, overwrite=args.overwrite, progress=args.progress,
            workers=args.workers, scheduler=args.scheduler, command=args.command_line, **settings,
        )
    except ValueError as error:
        if str(error).startswith("standard"):  # in the command line's words
            raise ValueError(f"--standard {','.join(f'{v:g}' for v in args.standard or [])}: {error}") from None
        raise
    print(f"lumaxlike normalize: {args.cube} ({settings['units']}) -> {args.out}, standard "
          f"{', '.join(f'{math.degrees(v):g}' for v in standard)} deg, solver {settings['solver']}: "
          f"{summary.describe()}", file=sys.stderr)
    return EXIT_OK


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


def _add_fit_parser(commands) -> None:
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
    model_choices = _hapke_model_choices()
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


_PHOTOMETRIC_FIELD = {flag: field for flag, field, _ in PHOTOMETRIC_OPTIONS}


def _photometric_kind(args, record):
    """The photometric function's kind the run uses (--model, else the record's), or None."""
    from ._photometric import PHOTOMETRIC_KINDS, PhotometricFunction

    if args.model is not None:
        return args.model if args.model in PHOTOMETRIC_KINDS else None
    if record is not None and isinstance(record.params[0], PhotometricFunction):
        return record.params[0].kind
    return None


def _model_params(args, bands: int, record):
    """One model per band: a PhotometricFunction when --model (or the record) names one,
    else HapkeParams; the other family's options are refused, naming them."""
    from ._photometric import PhotometricFunction

    kind = _photometric_kind(args, record)
    recorded = None if record is None else list(record.params)
    photometric_record = recorded is not None and isinstance(recorded[0], PhotometricFunction)
    if kind is None:
        given = [flag for flag, _, _ in PHOTOMETRIC_OPTIONS if getattr(args, _dest(flag)) is not None]
        if given:
            raise ValueError(f"{given[0]} is an option of the empirical photometric functions; "
                             f"the Hapke model does not use it (give --model lunar_lambert, minnaert "
                             f"or shkuratov)")
        return _hapke_params(args, bands, None if photometric_record else recorded)
    hapke_flags = [flag for flag, _, _, _ in HAPKE_OPTIONS] + [f for f, _, _ in MODEL_OPTIONS if f != "--model"]
    given = [flag for flag in hapke_flags if getattr(args, _dest(flag)) is not None]
    if given:
        raise ValueError(f"{given[0]} is a Hapke option; --model {kind} does not use it")
    base = recorded if photometric_record and recorded[0].kind == kind else None
    if base is not None and len(base) != bands:
        if len(set(base)) != 1:
            raise ValueError(f"--params-from {args.params_from} records parameters for "
                             f"{len(base)} bands but the cube {args.cube} has {bands} bands")
        base = [base[0]] * bands
    per_field = {}
    for flag, name, text in PHOTOMETRIC_OPTIONS:
        values = getattr(args, _dest(flag))
        if values is None:
            if base is not None:
                per_field[name] = [getattr(p, name) for p in base]
            continue
        if len(values) not in (1, bands):
            raise ValueError(f"{flag} gives {len(values)} values but the cube {args.cube} has "
                             f"{bands} bands (give one value, or one per band)")
        for value in values:  # checked one field at a time, so the message names the flag
            try:
                PhotometricFunction(kind, **{name: value})
            except ValueError as error:
                reason = "is outside its valid range" if value < 0 else f"is not used by --model {kind}"
                raise ValueError(f"{flag} {value:g} {reason} ({text})") from error
        per_field[name] = values if len(values) == bands else values * bands
    shared: dict[tuple, object] = {}
    params = []
    for band in range(bands):
        fields = {name: values[band] for name, values in per_field.items()}
        key = tuple(fields.items())
        if key not in shared:
            shared[key] = PhotometricFunction(kind, **fields)
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
    settings["surface"] = settings["surface"] or "auto"
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
    params = _model_params(args, bands, record)
    quiet_cluster_logs(args)
    summary = invert_file(
        args.cube, args.out, params=params, chunk_rows=args.chunk, overwrite=args.overwrite,
        progress=args.progress, workers=args.workers, scheduler=args.scheduler,
        command=args.command_line, **settings,
    )
    # one line, once the run has succeeded (an error is then the only line on stderr)
    print(f"lumaxlike invert: {args.cube} ({settings['units']}) -> {args.out}, solver "
          f"{settings['solver']}: {summary.describe()}", file=sys.stderr)
    return EXIT_OK


UNMIX_DESCRIPTION = """\
Unmix a reflectance cube into mass-fraction maps of an intimate mixture of endmembers
(Hapke's mixing rule: the mixture's single-scattering albedo is the cross-section-weighted
mean of the endmembers'), streaming it by blocks of rows.

The endmembers' albedo spectra come from laboratory spectra (--endmembers: CSV, USGS
splib07 or RELAB files), resampled to the cube's bands (its wavelengths, or --wavelengths)
and inverted at their measurement geometry with the same model. Writes OUT (one band per
endmember), OUT_sigma (their 1-sigma uncertainty), OUT_status, OUT_iterations and
OUT_residual (GeoTIFF or ENVI), each recording how it was made.
"""

UNMIX_EPILOG = """\
example (on the files `lumaxlike demo` writes into lumaxlike-demo/; its library is sampled
at the cube's band centres, so --fwhm 0.001 takes each sample as is):
  lumaxlike unmix lumaxlike-demo/reflectance.tif --geometry lumaxlike-demo/obs.tif \\
      --dtm lumaxlike-demo/dtm.tif --units r --endmembers lumaxlike-demo/minerals.csv \\
      --library-incidence 30 --library-emission 0 --density 2.71,3.96,2.65,2.32,2.6 \\
      --grain-size 60,40,80,50,70 --fwhm 0.001 --b 0.2 --c 0.4 --roughness-deg 20 \\
      --hs 0.06 --bs0 1 --hc 0.05 --bc0 0.5 --route two_step --out abundances.tif
"""


def add_unmix_parser(commands, formatter) -> None:
    """The ``unmix`` subcommand."""
    unmix = commands.add_parser(
        "unmix", help="unmix a reflectance cube file into mass-fraction maps", allow_abbrev=False,
        formatter_class=formatter, description=UNMIX_DESCRIPTION, epilog=UNMIX_EPILOG,
    )
    unmix.add_argument("cube", type=Path, metavar="CUBE", help="reflectance cube file (required)")
    unmix.add_argument("--out", type=Path, required=True, metavar="OUT",
                       help="output: .tif/.tiff GeoTIFF or .img/.envi/.hdr ENVI (required)")
    unmix.add_argument("--geometry", type=Path, required=True, metavar="OBS",
                       help="geometry backplane on the cube's grid, as for `lumaxlike invert` (required)")
    unmix.add_argument("--surface", choices=("auto", "local", "ellipsoid"), default="auto",
                       help="which angles to use, as for `lumaxlike invert` (default auto)")
    unmix.add_argument("--dtm", type=Path, metavar="DTM",
                       help="DTM on the cube's grid for local slopes (default: a flat surface)")
    unmix.add_argument("--units", choices=("r", "radf", "reff"), required=True,
                       help="what the cube holds, as for `lumaxlike invert` (required)")
    unmix.add_argument("--endmembers", type=Path, nargs="+", required=True, metavar="LIB",
                       help="laboratory reflectance spectra of the endmembers: CSV files (a "
                       "wavelength column naming its unit, one column per spectrum), USGS splib07 "
                       "or RELAB spectrum files (required)")
    unmix.add_argument("--library-format", choices=("csv", "splib07", "relab"),
                       help="format of the --endmembers files (default: from each file)")
    unmix.add_argument("--library-units", choices=("r", "radf", "reff"), default="reff",
                       help="what the library files hold (default reff, as splib07 and RELAB)")
    unmix.add_argument("--library-incidence", type=_number_list, metavar="DEG[,...]",
                       help="incidence angle of the library's measurements [deg], one or one per "
                       "spectrum (required unless every file is RELAB: 30)")
    unmix.add_argument("--library-emission", type=_number_list, metavar="DEG[,...]",
                       help="emission angle of the library's measurements [deg] (required unless "
                       "every file is RELAB: 0)")
    unmix.add_argument("--library-azimuth", type=_number_list, default=[0.0], metavar="DEG[,...]",
                       help="azimuth of the observer relative to the source in the library's "
                       "measurements [deg] (default 0)")
    unmix.add_argument("--density", type=_number_list, required=True, metavar="G_CM3[,...]",
                       help="solid density of each endmember [g/cm^3], one or one per endmember (required)")
    unmix.add_argument("--grain-size", type=_number_list, required=True, metavar="UM[,...]",
                       help="grain size of each endmember [um], one or one per endmember (required)")
    unmix.add_argument("--extinction-efficiency", type=_number_list, metavar="Q[,...]",
                       help="extinction efficiency of each endmember [-] (default 1)")
    unmix.add_argument("--wavelengths", type=_number_list, metavar="UM,...",
                       help="the cube's band centres [um] (default: read from the cube)")
    unmix.add_argument("--fwhm", type=_number_list, metavar="UM[,...]",
                       help="the cube's band widths [um] (default: the band spacing)")
    unmix.add_argument("--route", choices=("one_step", "two_step"), default="one_step",
                       help="one_step: Levenberg-Marquardt in reflectance space (weights the noise "
                       "correctly); two_step: invert to w, then constrained least squares in w "
                       "(faster) (default one_step)")
    unmix.add_argument("--no-sum-to-one", dest="sum_to_one", action="store_false",
                       help="let the fractions sum to less than one: fit an unmodelled, perfectly "
                       "absorbing remainder (default: they sum to one)")
    unmix.add_argument("--solver", choices=("numba", "jax"), default=DEFAULT_SOLVER,
                       help=f"solver, as for `lumaxlike invert` (default {DEFAULT_SOLVER})")
    add_model_options(unmix)
    unmix.add_argument("--tol", type=_positive_float, metavar="VALUE",
                       help="convergence tolerance on the step of every cross-section fraction "
                       "(default 1e-10)")
    unmix.add_argument("--max-iter", type=_positive_int, metavar="N",
                       help="solver iterations per pixel at most")
    unmix.add_argument("--sigma", type=_positive_float, metavar="VALUE",
                       help="standard uncertainty of the cube's values in --units (r or radf): "
                       "weights the bands and scales the sigma map (default: scaled by the "
                       "residual variance)")
    unmix.add_argument("--chunk", type=_positive_int, metavar="ROWS",
                       help="rows per block (default: about 32 MiB of reflectance)")
    add_parallel_options(unmix)
    unmix.add_argument("--overwrite", action="store_true", help="replace existing outputs (default: refuse)")
    unmix.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                       help="progress bar on stderr (default: when stderr is a terminal)")
    unmix.set_defaults(handler=_run_unmix)


def _run_unmix(args) -> int:
    from ._io.file_unmixing import cube_wavelengths_um, unmix_file
    from ._io.raster import CubeReader
    from ._io.spectral_library import read_spectral_library
    from ._params import HapkeParams
    from ._unmix.endmembers import Endmembers

    with CubeReader(args.cube) as cube:
        info = cube.info
    params = _model_params(args, info.bands, None)
    if not isinstance(params[0], HapkeParams) or not _same_params(params):
        raise ValueError("unmix takes one set of Hapke parameters for every band (no per-band "
                         "values, no empirical photometric function)")
    wavelengths = cube_wavelengths_um(info, args.wavelengths)
    library = read_spectral_library(
        args.endmembers, args.library_format, units=args.library_units,
        incidence=_scalar_or_list(args.library_incidence), emission=_scalar_or_list(args.library_emission),
        azimuth=_scalar_or_list(args.library_azimuth),
    )  # fmt: skip
    endmembers = Endmembers.from_library(
        library, params[0], density=args.density, grain_size=args.grain_size, wavelengths=wavelengths,
        fwhm=_scalar_or_list(args.fwhm), extinction_efficiency=_scalar_or_list(args.extinction_efficiency),
        solver=args.solver,
    )  # fmt: skip
    quiet_cluster_logs(args)
    summary = unmix_file(
        args.cube, args.out, geometry=args.geometry, endmembers=endmembers, params=params[0],
        solver=args.solver, units=args.units, route=args.route, sum_to_one=args.sum_to_one, dtm=args.dtm,
        chunk_rows=args.chunk, overwrite=args.overwrite, progress=args.progress, sigma=args.sigma,
        workers=args.workers, scheduler=args.scheduler, max_iter=args.max_iter, tol=args.tol,
        command=args.command_line, surface=args.surface,
    )  # fmt: skip
    print(f"lumaxlike unmix: {args.cube} ({args.units}) -> {args.out}, {args.route} route, solver "
          f"{args.solver}: {summary.describe()}", file=sys.stderr)
    return EXIT_OK


def _scalar_or_list(values):
    """A number list option: None, one value (a scalar) or the list."""
    if values is None:
        return None
    return values[0] if len(values) == 1 else values


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

    While ``invert`` or ``normalize`` runs, SIGINT and SIGTERM are handled (see :mod:`lumaxlike._signals`):
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
    if _is_cluster_failure(failure):  # one line: the cause is the cluster, not this code
        print(f"lumaxlike {command}: error: {_cli_message(failure)}", file=sys.stderr)
        return EXIT_FAILURE
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


def _is_cluster_failure(error) -> bool:
    if error is None or "lumaxlike._io.cluster" not in sys.modules:  # no cluster was used
        return False
    return isinstance(error, sys.modules["lumaxlike._io.cluster"].ClusterError)


def _cli_message(error: BaseException) -> str:
    """The error's message in one line, in the command line's words."""
    from ._io.atomic import OutputExistsError  # already imported by whatever raised it

    if isinstance(error, OutputExistsError):
        return f"output already exists: {', '.join(error.paths)}; add --overwrite to replace it"
    return " ".join(str(error).split()) or type(error).__name__
