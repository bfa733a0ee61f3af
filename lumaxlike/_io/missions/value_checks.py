"""Refusing a cube that does not hold what its ``units`` say, before any work: the
unit the file tags its values with, and the values no reflectance takes (read by
`ProductCube` and the stack front ends)."""

from __future__ import annotations

import math
import sys

import numpy as np

from ..read.raster import CubeReader

__all__ = [
    "R_UNIT_TAGS",
    "check_reflectance_values",
    "check_unit_tag",
    "notice",
    "radiance_unit",
]

#: I/F no surface reaches: a median above the first or a 99th percentile above the second
IF_MEDIAN_LIMIT, IF_HIGH_LIMIT = 1.5, 20.0


def notice(message: str) -> None:
    """Tell the user something about the input, once, on stderr."""
    print(f"lumaxlike: warning: {message}", file=sys.stderr, flush=True)


#: unit tags of bidirectional reflectance r (spaces removed, lower case)
R_UNIT_TAGS = ("1/sr", "sr-1", "sr^-1", "sr**-1", "/sr", "1/steradian", "steradian-1")


def check_unit_tag(cube: CubeReader, units: str, path) -> None:
    """Refuse ``units`` that contradict the unit the file tags its values with (see
    `CubeReader.unit_tag`): a cube tagged 1/sr (r) given as radf, reff or radiance (a
    factor pi or more off), or one tagged as radiance (W ... sr-1) given as reflectance.

    Raises:
        ValueError: naming the file, its tag and ``units``.
    """
    tag = cube.unit_tag()
    text = str(tag or "").lower().replace(" ", "")
    if text in R_UNIT_TAGS and units != "r":
        raise ValueError(
            f"{path} tags its values units = {tag!r} (bidirectional reflectance r), which "
            f"contradicts --units {units} (units={units!r}): give --units r, or correct the tag"
        )
    if radiance_unit(tag) and units != "radiance":
        raise ValueError(
            f"{path} tags its values units = {tag!r} (radiance), which contradicts --units "
            f"{units} (units={units!r}): give --units radiance, or correct the tag"
        )


def radiance_unit(unit) -> bool:
    """Whether a unit text names a radiance (W ... sr-1, any case and spacing)."""
    text = str(unit or "").upper().replace(" ", "")
    return "W" in text and "SR" in text


def check_reflectance_values(values, units: str, path) -> None:
    """Refuse values that no reflectance in ``units`` takes (see the module docstring).

    Args:
        values: a sample of the cube [``units``], any shape; NaN ignored.
        units: ``"r"``, ``"radf"`` or ``"reff"``.
        path: the file, for the message.

    Raises:
        ValueError: naming ``path``, the statistics and the likely unit.
    """
    finite = np.asarray(values)[np.isfinite(values)]
    if finite.size == 0:
        return
    scale = math.pi if units == "r" else 1.0  # to I/F
    median, high = (
        float(np.median(finite)) * scale,
        float(np.percentile(finite, 99)) * scale,
    )
    if median < 0:
        raise ValueError(
            f"{path} declared as {units} has a negative median ({median / scale:g}): "
            "not reflectance; check the file and --units"
        )
    if median > IF_MEDIAN_LIMIT or high > IF_HIGH_LIMIT:
        integers = bool(np.all(finite == np.round(finite)))
        likely = (
            "raw counts (DN) or scaled integers"
            if integers
            else "radiance [W m^-2 um^-1 sr^-1] (then give --units radiance)"
        )
        raise ValueError(
            f"{path} declared as {units} holds values no reflectance takes (median "
            f"{median / scale:g}, 99th percentile {high / scale:g}; I/F rarely exceeds 1): "
            f"it looks like {likely}"
        )
