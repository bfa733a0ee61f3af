"""The ``lumaxlike`` command line: ``invert``, ``demo`` and ``profile`` subcommands.

Exit codes: 0 success; 2 bad arguments or input (a one-line message on stderr naming the
file or argument); 1 unexpected failure (message and traceback on stderr); 130 / 143
stopped by SIGINT (Ctrl-C) / SIGTERM (temporary files removed, existing outputs untouched).
"""

from __future__ import annotations

import argparse
import math
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
    ("--b", "b", 0.2, "double Henyey-Greenstein asymmetry b, 0 <= b < 1"),
    ("--c", "c", 0.5, "double Henyey-Greenstein back/forward partition c, -1 <= c <= 1"),
    ("--roughness-deg", "roughness", 0.0, "Hapke mean slope angle theta-bar [deg], 0 <= . < 90"),
    ("--hs", "hs", 0.0, "shadow-hiding opposition width h_S (0: off)"),
    ("--bs0", "bs0", 0.0, "shadow-hiding opposition amplitude B_S0"),
    ("--hc", "hc", 0.0, "coherent-backscatter width h_C (0: off)"),
    ("--bc0", "bc0", 0.0, "coherent-backscatter amplitude B_C0"),
)


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


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of the ``lumaxlike`` command."""
    parser = _Parser(prog="lumaxlike", allow_abbrev=False, description="Invert Hapke's AMSA model pixel by pixel over "
                     "hyperspectral cubes for single-scattering albedo maps.")
    commands = parser.add_subparsers(dest="command", required=True)

    invert = commands.add_parser(
        "invert", help="invert a reflectance cube file for w maps", allow_abbrev=False,
        description="Invert a reflectance cube (GeoTIFF, ENVI, anything GDAL opens) for "
        "single-scattering albedo w per pixel and band, streaming it by blocks of rows. "
        "Writes OUT (w) and, for GeoTIFF/ENVI, siblings OUT_status, OUT_iterations, "
        "OUT_residual (and OUT_sigma with --sigma); netCDF (.nc) and zarr (.zarr) hold "
        "them all in one dataset.",
    )
    invert.add_argument("cube", type=Path, metavar="CUBE", help="reflectance cube file")
    invert.add_argument("--geometry", type=Path, required=True, metavar="OBS",
                        help="OBS raster on the cube's grid whose band descriptions name the "
                        "to-sun zenith, to-sun azimuth, to-sensor zenith and to-sensor azimuth "
                        "[deg, azimuths clockwise from north]; matched case-insensitively, e.g. "
                        "'To-sun zenith', 'solar_zenith', 'SZA', 'To-Inst AZM', 'view_azimuth' "
                        "(full list: lumaxlike._io.geometry_rasters.OBS_BAND_NAMES)")
    invert.add_argument("--dtm", type=Path, metavar="DTM",
                        help="DTM on the cube's grid (heights [m], projected CRS) for local "
                        "slopes; default: flat surface")
    invert.add_argument("--solver", choices=("jax", "numba"), required=True, help="solver")
    invert.add_argument("--out", type=Path, required=True, metavar="OUT",
                        help="output: .tif/.tiff GeoTIFF, .img/.envi/.hdr ENVI, .nc netCDF, "
                        ".zarr zarr")
    invert.add_argument("--units", choices=("r", "radf", "reff"), required=True,
                        help="what the cube holds: r = bidirectional reflectance [1/sr], "
                        "radf = radiance factor I/F = pi r, reff = reflectance factor "
                        "pi r / cos i (local incidence)")
    for flag, _, default, text in HAPKE_OPTIONS:
        invert.add_argument(flag, type=_number_list, default=[default], metavar="VALUE[,...]",
                            help=f"{text} (default {default}); one value, or one per band")
    invert.add_argument("--chunk", type=_positive_int, metavar="ROWS",
                        help="rows per block (default: about 32 MiB of reflectance)")
    invert.add_argument("--workers", type=_positive_int, default=1, metavar="N",
                        help="worker processes inverting blocks in parallel (default 1)")
    invert.add_argument("--max-iter", type=_positive_int, metavar="N",
                        help="solver iteration limit (default: the solver's)")
    invert.add_argument("--sigma", type=_positive_float, metavar="VALUE",
                        help="standard uncertainty of the cube's values, in --units; "
                        "writes the sigma map of w")
    invert.add_argument("--overwrite", action="store_true", help="replace existing outputs")
    invert.add_argument("--progress", action=argparse.BooleanOptionalAction, default=None,
                        help="progress bar on stderr (default: when stderr is a terminal)")
    invert.set_defaults(handler=_run_invert)

    # demo and profile parse their own arguments (see PASS_THROUGH); listed here for --help.
    commands.add_parser("demo", help="run the end-to-end demo (see `lumaxlike demo --help`)")
    commands.add_parser("profile", help="profile the solvers (see `lumaxlike profile --help`)")
    return parser


def _hapke_params(args, bands: int):
    """One HapkeParams per band from the Hapke options (shared objects for equal values)."""
    from ._params import HapkeParams

    names = [name for _, name, _, _ in HAPKE_OPTIONS]
    per_field = {}
    for flag, name, _, text in HAPKE_OPTIONS:
        values = getattr(args, flag[2:].replace("-", "_"))
        if len(values) not in (1, bands):
            raise ValueError(f"{flag} gives {len(values)} values but the cube {args.cube} has "
                             f"{bands} bands (give one value, or one per band)")
        for value in values:  # checked one field at a time, so the message names the flag
            try:
                HapkeParams(**{"b": 0.0, "c": 0.0, name: math.radians(value) if name == "roughness" else value})
            except ValueError:
                raise ValueError(f"{flag} {value:g} is outside its valid range ({text})") from None
        if name == "roughness":
            values = [math.radians(v) for v in values]
        per_field[name] = values if len(values) == bands else values * bands
    shared: dict[tuple, object] = {}
    params = []
    for band in range(bands):
        key = tuple(per_field[name][band] for name in names)
        if key not in shared:
            shared[key] = HapkeParams(**dict(zip(names, key)))
        params.append(shared[key])
    return params


def _run_invert(args) -> int:
    from ._io.file_inversion import invert_file
    from ._io.raster import CubeReader

    with CubeReader(args.cube) as cube:
        bands = cube.info.bands
    params = _hapke_params(args, bands)
    print(f"lumaxlike invert: {args.cube} ({args.units}) -> {args.out}, solver {args.solver}",
          file=sys.stderr)
    summary = invert_file(
        args.cube, args.out, geometry=args.geometry, dtm=args.dtm, params=params,
        solver=args.solver, units=args.units, chunk_rows=args.chunk, overwrite=args.overwrite,
        progress=args.progress, sigma=args.sigma, workers=args.workers, max_iter=args.max_iter,
    )
    print(summary.describe(), file=sys.stderr)
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
    failure, code = None, None
    try:
        code = run()
    except Interrupted:
        pass
    except BaseException as error:  # noqa: BLE001 - the command line reports every failure
        failure = error
    if stopped_by() is not None:
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
