"""Checks on a stack of cubes read as several observations of one scene (`fit_file`,
`sample_file`).

A stack is a list of co-registered cube files, one observation each. Its cubes must be
distinct files (the same cube twice would count one observation twice and shrink every
uncertainty) with the same bands: the same count and, where the files give them, the
same band centres (a stack of cubes whose bands differ would fit each band to
observations of different wavelengths).
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .._inverse.fit.observation_masks import LIMITED_ANGLES, check_observation_limits
from .._io.read.raster import CubeInfo
from .._io.read.units import to_bidirectional_reflectance
from .blocks import FLAT_NORMAL
from .wavelengths import known_wavelengths_um

__all__ = ["check_stack", "limits_in_radians", "read_stack_block", "stack_limits"]

#: band centres agree to this relative difference (float32 headers, nm/um conversion)
_RELATIVE_TOLERANCE = 1e-6


def check_stack(infos: list[CubeInfo]) -> None:
    """Refuse a stack whose cubes repeat a file or differ in bands, naming the files.

    Raises:
        ValueError: the same file twice (also through another path or a link); a cube
            whose band count or band centres (compared in um where both files give a
            known unit, else as written when their units are the same) differ from the
            first cube's.
    """
    seen: dict[tuple, Path] = {}
    for info in infos:
        key = _identity(info.path)
        if key in seen:
            raise ValueError(
                f"the cube {info.path} is given twice (also as {seen[key]}): each cube is one "
                "observation; the same one twice would count it twice"
            )
        seen[key] = info.path
    first = infos[0]
    first_um = known_wavelengths_um(first)
    for info in infos[1:]:
        if info.bands != first.bands:
            raise ValueError(
                f"cube {info.path} has {info.bands} bands, cube {first.path} {first.bands}"
            )
        this_um = known_wavelengths_um(info)
        if first_um is not None and this_um is not None:
            a, b, unit = first_um, this_um, "um"
        elif (
            first.wavelengths is not None
            and info.wavelengths is not None
            and ((first.wavelength_units or "").lower() == (info.wavelength_units or "").lower())
        ):
            a, b, unit = (
                first.wavelengths,
                info.wavelengths,
                first.wavelength_units or "(no unit)",
            )
        else:
            continue
        a, b = np.asarray(a, np.float64), np.asarray(b, np.float64)
        if not np.allclose(a, b, rtol=_RELATIVE_TOLERANCE, atol=0.0):
            k = int(np.argmax(~np.isclose(a, b, rtol=_RELATIVE_TOLERANCE, atol=0.0)))
            raise ValueError(
                f"cube {info.path} has other band centres than cube {first.path} (band {k + 1}: "
                f"{b[k]:.6g} against {a[k]:.6g} {unit}): a stack's cubes must hold the same bands"
            )


def _identity(path) -> tuple:
    try:
        status = os.stat(path)
        return (status.st_dev, status.st_ino)
    except OSError:
        return (str(Path(path).resolve()),)


def limits_in_radians(limits_deg) -> dict:
    """{angle: (lower, upper)} [deg] -> [rad], checked by `fit` (named as the option)."""
    limits = {}
    for angle, interval in (limits_deg or {}).items():
        if angle not in LIMITED_ANGLES:
            raise ValueError(
                f"observation limits: unknown angle {angle!r}; expected some of {LIMITED_ANGLES}"
            )
        lower, upper = (float(v) for v in interval)
        if not (0.0 <= lower <= upper <= 180.0):
            raise ValueError(
                f"observation limits: {angle} range must satisfy 0 <= min <= max <= 180 deg, got {interval!r}"
            )
        limits[angle] = (math.radians(lower), math.radians(upper))
    return limits


def stack_limits(radians, degrees) -> tuple[dict, Mapping | None]:
    """The observation limits [rad] of a stack's file front end (`fit_file`,
    `sample_file`) from the option ``observation_limits`` [rad] or its
    ``observation_limits_deg`` (one of the two), and in degrees, as the record keeps them."""
    if radians is None:
        return limits_in_radians(degrees), degrees
    if degrees is not None:
        raise ValueError("give observation_limits [rad] or observation_limits_deg, not both")
    limits = check_observation_limits(radians)
    return limits, {angle: tuple(map(math.degrees, pair)) for angle, pair in limits.items()}


def read_stack_block(readers, geometry_readers, rows, units, reff_incidence=None) -> tuple:
    """One block of rows of every cube, stacked: r ``(rows, cols, bands, observations)``
    and to_sun, to_sensor, normal ``(rows, cols, observations, 3)``. ``reff_incidence``
    ``"areoid"`` divides REFF by the ellipsoid's cos i, not the facet's."""
    refl, vectors = [], []
    for reader, geometry_reader in zip(readers, geometry_readers):
        to_sun, to_sensor, normal = geometry_reader.read(rows)
        divided_by = FLAT_NORMAL if reff_incidence == "areoid" else normal
        refl.append(to_bidirectional_reflectance(reader.read(rows), units, to_sun, divided_by))
        vectors.append((to_sun, to_sensor, normal))
    stacked = np.stack(refl, axis=-1)  # (rows, cols, bands, observations)
    del refl
    geometry = [
        np.stack([v[k] for v in vectors], axis=-2) for k in range(3)
    ]  # (rows, cols, observations, 3)
    return (stacked, *geometry)
