"""Per-pixel observation geometry from OBS rasters, angle rasters or arrays, and a DTM.

Geometry inputs give four angles per pixel, all in **degrees**:

========================  ======================================================
role                      meaning
========================  ======================================================
``to_sun_zenith``         angle between the local vertical and the direction to the sun
``to_sun_azimuth``        azimuth of the direction to the sun, clockwise from north
``to_sensor_zenith``      angle between the local vertical and the direction to the sensor
``to_sensor_azimuth``     azimuth of the direction to the sensor, clockwise from north
========================  ======================================================

They come either from one "OBS" raster whose band descriptions name them (matched
case-insensitively, ignoring ``-``/``_``/spaces and anything in parentheses or after a
comma, see :data:`OBS_BAND_NAMES`), or from a mapping of the four roles to single-band
rasters or to ``(rows, cols)`` arrays. Surface normals come from an optional DTM (heights
in metres, on the cube's grid, in a projected CRS) via :func:`lumaxlike.normals_from_dtm`;
without a DTM the surface is flat (normal straight up).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .._geometry import direction_from_zenith_azimuth, normals_from_dtm
from .raster import BandRaster, RasterGrid, check_aligned, pixel_size_m

__all__ = ["ANGLE_ROLES", "OBS_BAND_NAMES", "GeometryReader", "match_obs_bands"]

ANGLE_ROLES = ("to_sun_zenith", "to_sun_azimuth", "to_sensor_zenith", "to_sensor_azimuth")
"""The four angles [deg] a geometry input must give."""

OBS_BAND_NAMES = {
    "to_sun_zenith": (
        "to sun zenith", "to sun zenith angle", "sun zenith", "sun zenith angle",
        "solar zenith", "solar zenith angle", "to sun zen", "sza",
    ),
    "to_sun_azimuth": (
        "to sun azimuth", "to sun azimuth angle", "to sun azm", "to sun az", "sun azimuth",
        "sun azimuth angle", "solar azimuth", "solar azimuth angle", "saa",
    ),
    "to_sensor_zenith": (
        "to sensor zenith", "to sensor zenith angle", "sensor zenith", "sensor zenith angle",
        "to inst zenith", "to instrument zenith", "view zenith", "viewing zenith",
        "view zenith angle", "vza",
    ),
    "to_sensor_azimuth": (
        "to sensor azimuth", "to sensor azimuth angle", "to sensor azm", "sensor azimuth",
        "sensor azimuth angle", "to inst azm", "to inst azimuth", "to instrument azimuth",
        "view azimuth", "viewing azimuth", "view azimuth angle", "vaa",
    ),
}
"""Accepted OBS band descriptions per role, in normalised form (see :func:`normalise_band_name`).

Covers, e.g., AVIRIS-NG / EMIT OBS (``To-sun zenith (0 to 90 degrees from zenith)``) and
M3 OBS (``To-Sun AZM``, ``To-Inst Zenith``) band names.
"""


def normalise_band_name(description: str) -> str:
    """Lower-case, drop ``(...)`` and anything after a comma, and collapse ``-``/``_``/spaces."""
    text = re.sub(r"\([^)]*\)", " ", description.lower()).split(",")[0]
    return " ".join(re.sub(r"[-_\s]+", " ", text).split())


def match_obs_bands(descriptions, path) -> dict[str, int]:
    """Find the band holding each angle role from band descriptions.

    Args:
        descriptions: one description (or None) per band, band 1 first.
        path: the OBS file, for messages.

    Returns:
        ``{role: 1-based band index}`` for the four :data:`ANGLE_ROLES`.

    Raises:
        ValueError: naming the file, when a role matches no band or several bands.
    """
    lookup = {name: role for role, names in OBS_BAND_NAMES.items() for name in names}
    found: dict[str, list[int]] = {role: [] for role in ANGLE_ROLES}
    for index, description in enumerate(descriptions, start=1):
        role = lookup.get(normalise_band_name(description or ""))
        if role is not None:
            found[role].append(index)
    for role, indexes in found.items():
        if not indexes:
            raise ValueError(
                f"geometry raster {path} has no band named like {role} (accepted, "
                f"case-insensitive: {', '.join(repr(n) for n in OBS_BAND_NAMES[role])}); "
                f"its band descriptions are {list(descriptions)}"
            )
        if len(indexes) > 1:
            raise ValueError(
                f"geometry raster {path} has several bands for {role}: bands {indexes}"
            )
    return {role: indexes[0] for role, indexes in found.items()}


class _ArrayAngles:
    """An in-memory angle array [deg] of shape (rows, cols), read by row slices."""

    def __init__(self, role: str, values):
        self.values = np.asarray(values)
        if self.values.ndim != 2:
            raise ValueError(f"geometry[{role!r}] must be a (rows, cols) array, got shape {self.values.shape}")
        if not np.issubdtype(self.values.dtype, np.number) or np.iscomplexobj(self.values):
            raise ValueError(f"geometry[{role!r}] must hold real numbers, got dtype {self.values.dtype}")

    def read(self, rows: slice) -> np.ndarray:
        return self.values[rows]


class _RasterAngles:
    """One band of an angle raster [deg], read by row slices."""

    def __init__(self, raster: BandRaster, index: int):
        self.raster, self.index = raster, index

    def read(self, rows: slice) -> np.ndarray:
        return self.raster.read(self.index, rows)


class GeometryReader:
    """Direction vectors (to the sun, to the sensor, surface normal) for row windows of a cube.

    Args:
        geometry: either the path of an OBS raster with named bands, or a mapping from
            each of :data:`ANGLE_ROLES` to a single-band raster path or a ``(rows, cols)``
            array; angles in degrees.
        grid: the cube's pixel grid; every raster must be aligned with it and every array
            must have its ``(rows, cols)`` shape.
        dtm: optional DTM raster path (heights [m], projected CRS, north-up) on the same
            grid, for local surface normals; None for a flat surface.

    Raises:
        FileNotFoundError: a geometry or DTM file does not exist.
        ValueError: unreadable file, misaligned raster (naming both files and what
            differs), missing or ambiguous OBS band, wrong array shape.

    Use as a context manager, or call :meth:`close`.
    """

    def __init__(self, geometry, grid: RasterGrid, dtm=None):
        self.grid = grid
        self._rasters: list[BandRaster] = []
        try:
            self._angles = self._open_angles(geometry)
            self._dtm = None
            if dtm is not None:
                self._dtm = self._open_raster(dtm, "DTM")
                if self._dtm.count != 1:
                    raise ValueError(f"DTM {self._dtm.path} must have one band, it has {self._dtm.count}")
                self._pixel_size = pixel_size_m(self._dtm.grid)
                if grid.height < 2 or grid.width < 2:
                    raise ValueError(f"DTM {self._dtm.path} must be at least 2 x 2 pixels for slopes")
        except BaseException:
            self.close()
            raise

    def _open_raster(self, path, role: str) -> BandRaster:
        raster = BandRaster(path)
        self._rasters.append(raster)
        check_aligned(self.grid, raster.grid, role)
        return raster

    def _open_angles(self, geometry) -> dict:
        if isinstance(geometry, (str, Path)):
            raster = self._open_raster(geometry, "geometry")
            bands = match_obs_bands(raster.descriptions, raster.path)
            return {role: _RasterAngles(raster, index) for role, index in bands.items()}
        if not isinstance(geometry, Mapping):
            raise ValueError(
                "geometry must be an OBS raster path or a mapping of "
                f"{', '.join(ANGLE_ROLES)} to rasters or arrays, got {type(geometry).__name__}"
            )
        unknown = sorted(set(geometry) - set(ANGLE_ROLES))
        missing = [role for role in ANGLE_ROLES if role not in geometry]
        if unknown or missing:
            raise ValueError(
                f"geometry mapping must have exactly the keys {', '.join(ANGLE_ROLES)}; "
                f"missing {missing}, unknown {unknown}"
            )
        angles = {}
        for role in ANGLE_ROLES:
            source = geometry[role]
            if isinstance(source, (str, Path)):
                raster = self._open_raster(source, f"geometry ({role})")
                if raster.count != 1:
                    raise ValueError(f"geometry raster {raster.path} for {role} must have one band, it has {raster.count}")
                angles[role] = _RasterAngles(raster, 1)
            else:
                angles[role] = _ArrayAngles(role, source)
                shape = angles[role].values.shape
                if shape != (self.grid.height, self.grid.width):
                    raise ValueError(
                        f"geometry[{role!r}] has shape {shape}, cube {self.grid.path} has "
                        f"{self.grid.height} x {self.grid.width} pixels"
                    )
        return angles

    def read_angles(self, rows: slice) -> dict[str, np.ndarray]:
        """The four angles [deg] over ``rows``: ``{role: (len(rows), cols) array}``, NaN = nodata."""
        return {role: source.read(rows) for role, source in self._angles.items()}

    def read(self, rows: slice) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Direction vectors over ``rows``.

        Returns:
            ``(to_sun, to_sensor, normal)``, unit vectors (east, north, up) of shape
            ``(len(rows), cols, 3)``; NaN where an angle or the DTM is nodata.
        """
        angles = self.read_angles(rows)
        to_sun = direction_from_zenith_azimuth(
            np.deg2rad(angles["to_sun_zenith"]), np.deg2rad(angles["to_sun_azimuth"])
        )
        to_sensor = direction_from_zenith_azimuth(
            np.deg2rad(angles["to_sensor_zenith"]), np.deg2rad(angles["to_sensor_azimuth"])
        )
        return to_sun, to_sensor, self.read_normals(rows).astype(to_sun.dtype, copy=False)

    def read_normals(self, rows: slice) -> np.ndarray:
        """Outward unit surface normals over ``rows``, shape ``(len(rows), cols, 3)``.

        With a DTM the slopes are central differences, computed on the window plus one
        row of margin on each side, so windows give the same normals as the whole image.
        """
        count = rows.stop - rows.start
        if self._dtm is None:
            normal = np.zeros((count, self.grid.width, 3))
            normal[..., 2] = 1.0
            return normal
        start = max(rows.start - 1, 0)
        stop = min(rows.stop + 1, self.grid.height)
        if stop - start < 2:  # a one-row image cannot have slopes; checked in __init__
            raise ValueError(f"DTM {self._dtm.path} must be at least 2 x 2 pixels for slopes")
        heights = self._dtm.read(1, slice(start, stop))
        normal = normals_from_dtm(heights, self._pixel_size)
        return normal[rows.start - start : rows.start - start + count]

    def close(self) -> None:
        """Close every raster this reader opened."""
        for raster in self._rasters:
            raster.close()
        self._rasters = []

    def __enter__(self) -> "GeometryReader":
        return self

    def __exit__(self, *exc) -> None:
        self.close()
