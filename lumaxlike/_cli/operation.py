"""A subcommand's body from its operation's declaration (`lumaxlike._operations`).

Every file subcommand (``invert``, ``normalize``, ``thermal``, ``unmix``, ``fit``,
``sample``, ``parameters``) runs one `Operation`: `run_command` calls the operation's file
front end (``lumaxlike.invert_file``, ..., which the command imports by name) with the run
and product options built from the flags, reports the run in one line under the
declaration's command name and ends with the run's exit code. A command module keeps only
what is its own: its help, its operation's flags and how they become the front end's
keywords. The parser does not import the declarations or the front ends (they import
their solvers, seconds of JAX and numba that ``lumaxlike --help`` must not wait for);
each command's body does.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .options import quiet_cluster_logs
from .products import finish, product_kwargs

if TYPE_CHECKING:
    from .._operations.declaration import Operation
    from .._options import RunOptions

__all__ = ["add_command", "copy_options", "run_command", "run_options"]


def add_command(commands, name: str, help: str, description: str, epilog: str):
    """The subcommand ``lumaxlike <name>`` added to ``commands``: ``help`` its line in
    ``lumaxlike --help``, ``description`` and ``epilog`` (examples) its own ``--help``,
    printed as written; its options never abbreviated."""
    return commands.add_parser(
        name,
        help=help,
        allow_abbrev=False,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        description=description,
        epilog=epilog,
    )


def copy_options(parser: argparse.ArgumentParser, source: argparse.ArgumentParser) -> None:
    """Give ``parser`` every option of ``source`` (their mutually exclusive groups kept):
    a command that takes another's options and adds its own (``thermal`` takes
    ``invert``'s)."""
    exclusive = {
        id(action): group
        for group in source._mutually_exclusive_groups
        for action in group._group_actions
    }
    groups: dict = {}
    for action in source._actions:
        if isinstance(action, argparse._HelpAction):
            continue
        group = exclusive.get(id(action))
        if group is None:
            parser._add_action(action)
            continue
        if id(group) not in groups:
            groups[id(group)] = parser.add_mutually_exclusive_group(required=group.required)
        groups[id(group)]._add_action(action)


def run_options(args) -> RunOptions:
    """The `RunOptions` of ``args`` (``--chunk``, ``--workers``, ``--scheduler``,
    ``--resume``, ``--overwrite``, ``--progress``; those a command lacks at their
    defaults)."""
    from .._options import RunOptions

    return RunOptions(
        workers=getattr(args, "workers", 1),
        scheduler=getattr(args, "scheduler", None),
        chunk_rows=args.chunk,
        resume=args.resume,
        overwrite=args.overwrite,
        progress=args.progress,
    )


def run_command(
    operation: Operation,
    front_end: Callable[..., Any],
    args,
    inputs: Any,
    *,
    described: str,
    product: bool = True,
    **keywords,
) -> int:
    """Run ``operation``'s file front end on ``inputs`` (a cube, or a stack of cubes)
    into ``args.out`` and return the command's exit code.

    Args:
        operation: the declaration (its command's name).
        front_end: its file front end (`lumaxlike.invert_file`, ...; the one
            `Operation.file_function` names).
        args: the parsed command line: its run options (`run_options`), product options
            (`product_kwargs`, when ``product``), ``out`` and ``command_line``.
        inputs: the front end's first argument.
        described: what the one-line report says of the run before its summary (the
            files and settings: ``"cube.tif (r) -> w.tif, solver numba"``).
        product: whether the front end takes a `ProductOptions` (not ``sample``).
        **keywords: the operation's own keywords (``params``, ``units``, ...).

    Returns:
        0, or 1 when no problem converged or nothing was computed (`finish`).
    """
    from .._options import ProductOptions

    quiet_cluster_logs(args)
    if product:
        keywords["product"] = ProductOptions(**product_kwargs(args))
    summary = front_end(
        inputs, args.out, run=run_options(args), command=args.command_line, **keywords
    )
    # one line, once the run has succeeded (an error is then the only line on stderr)
    print(
        f"lumaxlike {operation.command_name}: {described}: {summary.describe()}",
        file=sys.stderr,
    )
    return finish(operation.command_name, summary, operation.solved)
