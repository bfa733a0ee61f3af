"""``lumaxlike profile``: time and memory of the solvers on a synthetic scene
(:mod:`lumaxlike._profile`), which parses its own arguments."""

from __future__ import annotations

__all__ = ["add_parser", "run"]


def add_parser(commands) -> None:
    """List ``profile`` in ``lumaxlike --help`` (its own parser reads its arguments)."""
    commands.add_parser(
        "profile", help="profile the solvers (see `lumaxlike profile --help`)"
    )


def run(argv: list[str]) -> int:
    """Run ``lumaxlike profile`` with the arguments after ``profile``; return its exit code."""
    from .. import _profile

    return int(_profile.main(argv))
