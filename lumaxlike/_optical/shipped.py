"""The optical constants shipped in `lumaxlike/data/optical_constants/` (cited in its
SOURCES.md), by name."""

from __future__ import annotations

import functools
import importlib.resources

from .constants import OpticalConstants

__all__ = ["optical_constants", "optical_constants_names"]

# short names of the defaults a user reaches for first -> the file stems
ALIASES = {
    "iron": "iron_johnson_christy1974",
    "olivine": "olivine_pollack1994",
    "orthopyroxene": "orthopyroxene_pollack1994",
}


def _folder():
    return importlib.resources.files("lumaxlike") / "data" / "optical_constants"


def optical_constants_names() -> tuple[str, ...]:
    """The names `optical_constants` loads: the shipped files' stems and the short
    aliases "iron", "olivine" and "orthopyroxene" (sources: SOURCES.md beside the files,
    docs/optical-constants.md)."""
    stems = sorted(
        entry.name.removesuffix(".csv")
        for entry in _folder().iterdir()
        if entry.name.endswith(".csv")
    )
    return (*ALIASES, *stems)


@functools.cache
def optical_constants(name: str) -> OpticalConstants:
    """A shipped set of optical constants, e.g. ``optical_constants("iron")`` (Johnson &
    Christy 1974); `optical_constants_names()` lists them.

    Raises:
        ValueError: an unknown name (the message lists the names).
    """
    names = optical_constants_names()
    if name not in names:
        raise ValueError(f"unknown optical constants name {name!r}; shipped: {names}")
    stem = ALIASES.get(name, name)
    with importlib.resources.as_file(_folder() / f"{stem}.csv") as path:
        return OpticalConstants.from_csv(path, name=None)
