"""``lumaxlike demo``: the end-to-end demo (:mod:`lumaxlike._demo`), which parses its own
arguments."""

from __future__ import annotations

__all__ = ["add_parser", "run"]


def add_parser(commands) -> None:
    """List ``demo`` in ``lumaxlike --help`` (its own parser reads its arguments)."""
    commands.add_parser("demo", help="run the end-to-end demo (see `lumaxlike demo --help`)")


def run(argv: list[str]) -> int:
    """Run ``lumaxlike demo`` with the arguments after ``demo``; return its exit code."""
    from .._demo import run_demo

    return int(run_demo(argv))
