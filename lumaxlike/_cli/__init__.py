"""The ``lumaxlike`` command line (entry point ``lumaxlike._cli:console``, which runs
`main` and exits with its code): parses the command line, dispatches to the command's
module and reports its failure in one line.

One module per command (:mod:`.invert`, :mod:`.normalize`, :mod:`.fit`, :mod:`.sample`,
:mod:`.unmix`, :mod:`.parameters`, :mod:`.thermal`, :mod:`.demo`, :mod:`.profile`: its parser and its body),
:mod:`.operation` for a file command's run of its operation's declaration, :mod:`.inputs`
for the file commands' inputs (the cube, --out, --params-from, --geometry, --surface, --dtm,
--units), declared once, :mod:`.options` for the option groups they share, :mod:`.model` for the model and settings of a run built
from the flags or ``--params-from``, :mod:`.products` for the mission-product options and
how a file run ends, and :mod:`.unmix_settings` for ``unmix``'s settings. Nothing below
the command line imports this package.

Exit codes: 0 success; 2 bad arguments or input (a one-line message on stderr naming the
file or argument); 1 unexpected failure (message and traceback on stderr; one line when a
dask cluster failed mid-run); 130 / 143 stopped by SIGINT (Ctrl-C) / SIGTERM (temporary
files removed, existing outputs untouched).
"""

from __future__ import annotations

import argparse
import os
import signal
import sys
import traceback
from collections.abc import Callable

from .._signals import Interrupted, stop_on_signals
from . import demo, fit, invert, normalize, parameters, profile, sample, thermal, unmix
from .options import EXIT_BAD_INPUT, EXIT_FAILURE, CommandParser, UsageError

__all__ = ["build_parser", "console", "main"]

TOP_EPILOG = """\
Run `lumaxlike COMMAND --help` for a command's options.

example (after `lumaxlike demo`: rerun its numba inversion from the record in its output):
  lumaxlike invert lumaxlike-demo/reflectance.tif --params-from lumaxlike-demo/w_numba.tif --out w.tif
"""


def build_parser() -> argparse.ArgumentParser:
    """The argparse parser of the ``lumaxlike`` command."""
    from .. import __version__

    parser = CommandParser(
        prog="lumaxlike",
        allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=TOP_EPILOG,
        description="Invert Hapke's AMSA model pixel by pixel over hyperspectral cubes for "
        "single-scattering albedo maps.",
    )
    parser.add_argument(
        "--version",
        action="version",
        version=f"lumaxlike {__version__}",
        help="print lumaxlike's version and exit",
    )
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    invert_parser = invert.add_parser(commands)
    normalize.add_parser(commands, invert_parser)
    thermal.add_parser(commands, invert_parser)
    fit.add_parser(commands)
    sample.add_parser(commands)
    unmix.add_parser(commands)
    parameters.add_parser(commands)
    # demo parses its own arguments (see PASS_THROUGH); listed here for --help.
    demo.add_parser(commands)
    profile.add_parser(commands)
    return parser


#: Subcommands that receive the rest of the command line unparsed.
PASS_THROUGH = {"demo": demo.run}


#: Errors that mean "bad arguments or input": reported in one line, exit code 2.
BAD_INPUT_ERRORS = (
    ValueError,
    FileNotFoundError,
    FileExistsError,
    NotADirectoryError,
    IsADirectoryError,
    PermissionError,
)


def main(argv=None) -> int:
    """Run the ``lumaxlike`` command.

    While a file command (``invert``, ``normalize``, ``fit``, ``sample``, ``unmix``) runs, SIGINT and
    SIGTERM are handled (see :mod:`lumaxlike._signals`): the run stops, removes its
    temporary files and returns 128 + the signal's number; the previous handlers are
    restored before it returns. ``demo`` and ``profile`` keep Python's own handling
    (Ctrl-C: KeyboardInterrupt, exit code 130).

    Args:
        argv: arguments without the program name; None reads ``sys.argv[1:]``.

    Returns:
        exit code: 0 success, 2 bad arguments or input, 1 a failure (an output that
        could not be written, e.g. a full disk, or a lost cluster: one line; anything
        unexpected: a traceback), 128 + the signal's number when a SIGINT (130) or
        SIGTERM (143) stopped it.
    """
    argv = sys.argv[1:] if argv is None else [str(a) for a in argv]
    if argv and argv[0] in PASS_THROUGH:  # Python's own Ctrl-C handling: KeyboardInterrupt
        return _report(argv[0], lambda: PASS_THROUGH[argv[0]](argv[1:]), lambda: None)
    with stop_on_signals() as stopped_by:
        try:
            args = build_parser().parse_args(argv)
        except UsageError as error:
            print(error, file=sys.stderr)
            return EXIT_BAD_INPUT
        except SystemExit as done:  # --help
            return int(done.code or 0)
        if getattr(args, "stop_on_signals", True):
            return _report(args.command, lambda: args.handler(args), stopped_by)
    # a command with Python's own signal handling (profile), run once the handlers are restored
    return _report(args.command, lambda: args.handler(args), lambda: None)


def console() -> None:
    """The ``lumaxlike`` program (console script and ``python -m lumaxlike``): `main`,
    then exit with its code.

    A SIGTERM or SIGINT outside the command's own handlers (before `main` installs them,
    or after the run has published its outputs and restored them) ends the process with
    exit code 128 + the signal's number (143, 130), never by the signal itself (which a
    parent sees as -15 or -2). A signal that lands after publication leaves the outputs
    complete; the exit code is then 0 (the command reports it) or 143 / 130.
    """
    signal.signal(signal.SIGTERM, _exit_on_signal)  # SIGINT: KeyboardInterrupt, caught below
    try:
        code = main()
    except KeyboardInterrupt:
        code = 128 + signal.SIGINT
    # Python's exit joins the worker threads after its exit hooks wake them: an exception
    # raised by a signal in those hooks would leave a thread asleep and the exit waiting on
    # it forever. The run is over: a signal from here on ends the process at once.
    sys.stdout.flush()
    sys.stderr.flush()
    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, _exit_at_once)
    sys.exit(code)


def _exit_at_once(signum, frame):
    """A stop signal while Python exits: exit 128 + n now, without Python's exit hooks."""
    os._exit(128 + signum)


def _exit_on_signal(signum, frame):
    """Before `main`'s handlers (start-up) or after them: exit 128 + n, saying why."""
    command = " ".join(["lumaxlike", *sys.argv[1:2]])
    print(f"{command}: stopped by {signal.Signals(signum).name}", file=sys.stderr)
    raise SystemExit(128 + signum)


def _report(command: str, run: Callable[[], int], stopped_by) -> int:
    """Run a command; report its failure in one line (a traceback if unexpected).

    ``stopped_by()`` is the stop signal that arrived, or None: it decides the exit code
    whatever else happened, since the signal may have surfaced as another error.
    """
    failure: BaseException | None = None
    code: int | None = None
    stopped = False
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
        print(
            f"lumaxlike {command}: {name} arrived after the run completed",
            file=sys.stderr,
        )
        return code
    if stopped or stopped_by() is not None:
        name = signal.Signals(stopped_by()).name
        print(f"lumaxlike {command}: stopped by {name}", file=sys.stderr)
        return 128 + stopped_by()
    if isinstance(failure, BAD_INPUT_ERRORS):
        print(f"lumaxlike {command}: error: {_cli_message(failure)}", file=sys.stderr)
        return EXIT_BAD_INPUT
    # one line: the cause is the cluster, not this code
    if failure is not None and _is_cluster_failure(failure):
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
    assert code is not None  # run() returned its exit code
    return code


def _is_cluster_failure(error) -> bool:
    """A failure outside this code, reported in one line with exit code 1: the cluster
    was lost, or an output could not be written (a full disk: nothing was published)."""
    atomic = sys.modules.get("lumaxlike._io.write.atomic")
    if atomic is not None and isinstance(error, atomic.OutputWriteError):
        return True
    if error is None or "lumaxlike._run.cluster" not in sys.modules:  # no cluster was used
        return False
    return isinstance(error, sys.modules["lumaxlike._run.cluster"].ClusterError)


def _cli_message(error: BaseException) -> str:
    """The error's message in one line, in the command line's words."""
    from .._io.write.atomic import OutputExistsError  # already imported by whatever raised it

    if isinstance(error, OutputExistsError):
        return f"output already exists: {', '.join(error.paths)}; add --overwrite to replace it"
    return " ".join(str(error).split()) or type(error).__name__
