"""The optical constants shipped in `lumaxlike/data/optical_constants/` (cited in its
SOURCES.md), by name."""

from __future__ import annotations

import functools
import importlib.resources

import numpy as np

from .constants import OpticalConstants

__all__ = ["optical_constants", "optical_constants_names"]

# short names of the defaults a user reaches for first -> the file stems
ALIASES = {
    "olivine": "olivine_pollack1994",
    "orthopyroxene": "orthopyroxene_pollack1994",
}
# short names of sets joined from two files -> (the shorter-wavelength stem, the longer's,
# the joined set's name): the first file's points, then the second's beyond the first's
# last wavelength (docs/optical-constants.md, "Iron")
JOINS = {
    "iron": (
        "iron_johnson_christy1974",
        "iron_ordal1988",
        "iron (Johnson & Christy 1974 to 1.937 um, Ordal et al. 1988 beyond)",
    ),
}


def _folder():
    return importlib.resources.files("lumaxlike") / "data" / "optical_constants"


def optical_constants_names() -> tuple[str, ...]:
    """The names `optical_constants` loads: the shipped files' stems and the short names
    "iron" (two files joined), "olivine" and "orthopyroxene" (sources: SOURCES.md beside
    the files, docs/optical-constants.md)."""
    stems = sorted(
        entry.name.removesuffix(".csv")
        for entry in _folder().iterdir()
        if entry.name.endswith(".csv")
    )
    return (*JOINS, *ALIASES, *stems)


@functools.cache
def optical_constants(name: str) -> OpticalConstants:
    """A shipped set of optical constants, e.g. ``optical_constants("iron")`` (Johnson &
    Christy 1974 at 0.188-1.937 um, Ordal et al. 1988 at 2-286 um, joined);
    `optical_constants_names()` lists them.

    Raises:
        ValueError: an unknown name (the message lists the names).
    """
    names = optical_constants_names()
    if name not in names:
        raise ValueError(f"unknown optical constants name {name!r}; shipped: {names}")
    if name in JOINS:
        return _joined(*JOINS[name])
    return _from_file(ALIASES.get(name, name))


def _from_file(stem: str) -> OpticalConstants:
    with importlib.resources.as_file(_folder() / f"{stem}.csv") as path:
        return OpticalConstants.from_csv(path, name=None)


def _joined(short_stem: str, long_stem: str, name: str) -> OpticalConstants:
    """The points of `short_stem`, then those of `long_stem` beyond its last wavelength:
    each source's values at its own points, linear between the two at the join."""
    short, long = _from_file(short_stem), _from_file(long_stem)
    if short.density != long.density or short.n.ndim != 1 or long.n.ndim != 1:
        raise ValueError(f"{short_stem} and {long_stem} cannot be joined")  # a packaging fault
    beyond = long.wavelength > short.wavelength[-1]
    return OpticalConstants(
        name,
        np.concatenate([short.wavelength, long.wavelength[beyond]]),
        np.concatenate([short.n, long.n[beyond]]),
        np.concatenate([short.k, long.k[beyond]]),
        short.density,
    )
