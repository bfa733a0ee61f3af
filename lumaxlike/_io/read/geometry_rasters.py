"""Per-pixel observation geometry from backplane rasters, angle rasters or arrays, and a DTM.

A geometry input is either one backplane raster whose band descriptions name the roles of
its bands (an "OBS" raster, a CRISM DDR, an ISIS ``phocube`` cube, ...), or a mapping of
roles to single-band rasters or to ``(rows, cols)`` arrays. Angles are in **degrees**. The
roles, the band names recognised for each (:data:`OBS_BAND_NAMES`) and how a backplane
carrying both ellipsoid and local-surface angles is read (``surface``) are described in
:mod:`lumaxlike._io.read.backplanes`. Surface normals come from the backplane's facet slope and
aspect, from an optional DTM (heights in metres, on the cube's grid, in a projected CRS,
via :func:`lumaxlike.normals_from_dtm`), or else the surface is flat.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from ..._geometry import (
    angles_from_geometry,
    direction_from_zenith_azimuth,
    geometry_from_angles,
    normal_from_slope_aspect,
    normals_from_dtm,
)
from .backplanes import (
    ANGLE_ROLES,
    OBS_BAND_NAMES,
    ROLES,
    find_roles,
    match_obs_bands,
    normalise_band_name,
    plan_geometry,
)
from .raster import BandRaster, RasterGrid, check_aligned, pixel_size_m
from .units import local_incidence_cosine

__all__ = [
    "ANGLE_ROLES",
    "CHECK_TOLERANCE",
    "OBS_BAND_NAMES",
    "GeometryReader",
    "match_obs_bands",
    "normalise_band_name",
]

_ZENITHS = (
    "to_sun_zenith",
    "to_sensor_zenith",
    "incidence",
    "emission",
    "local_incidence",
    "local_emission",
)
_AZIMUTHS = ("to_sun_azimuth", "to_sensor_azimuth", "facet_aspect")
ANGLE_RANGES = {
    **{role: (0.0, 180.0) for role in _ZENITHS},
    "phase": (0.0, 180.0),
    "facet_slope": (0.0, 90.0),
    "facet_cos_i": (-1.0, 1.0),
    **{role: (-np.inf, np.inf) for role in _AZIMUTHS},
}
"""The values each band may hold (degrees; ``facet_cos_i`` a cosine); NaN is nodata.
Zenith angles (of the sun, of the sensor; incidence, emission) in [0, 90] are usable,
in (90, 180] the source or observer is below the horizon (status INVALID_GEOMETRY);
azimuths may be any finite value (wrapped). Anything else stops the run naming the band
and its file: a zenith of 400 deg is not 40 deg, a negative one is not its mirror."""

CHECK_TOLERANCE = {"facet_cos_i": 0.01, "local_incidence": 0.5, "local_emission": 0.5}
"""How far a band read only as a check may differ from the geometry built from the others
(cosine for ``facet_cos_i``, degrees for the local angles). Larger differences mean the
backplane follows another convention (e.g. an aspect measured upslope): the run stops."""


def band_descriptions(raster: BandRaster) -> tuple:
    """Band descriptions of a raster; for a PDS3 image without them, its label's ``BAND_NAME``.

    GDAL's PDS driver does not turn ``BAND_NAME`` (as in CRISM DDR labels) into band
    descriptions; it keeps the label as JSON in the ``json:PDS`` metadata domain.
    """
    if any(raster.descriptions) or "json:PDS" not in raster.tag_namespaces():
        return raster.descriptions
    # rasterio splits the one JSON string of the domain at its first ':' into key and value
    text = "".join(f"{key}:{value}" for key, value in raster.tags(ns="json:PDS").items())
    try:
        label = json.loads(text)
    except ValueError:
        return raster.descriptions
    names = _find_key(label, "BAND_NAME")
    if isinstance(names, list) and len(names) == raster.count:
        return tuple(str(name) for name in names)
    return raster.descriptions


def _find_key(tree, key):
    """The first value of ``key`` in nested dicts (an IMAGE object, maybe inside a FILE object)."""
    if isinstance(tree, dict):
        if key in tree:
            return tree[key]
        for value in tree.values():
            found = _find_key(value, key)
            if found is not None:
                return found
    return None


class _ArrayAngles:
    """An in-memory angle array [deg] of shape (rows, cols), read by row slices."""

    def __init__(self, role: str, values):
        self.values = np.asarray(values)
        if self.values.ndim != 2:
            raise ValueError(
                f"geometry[{role!r}] must be a (rows, cols) array, got shape {self.values.shape}"
            )
        if not np.issubdtype(self.values.dtype, np.number) or np.iscomplexobj(self.values):
            raise ValueError(
                f"geometry[{role!r}] must hold real numbers, got dtype {self.values.dtype}"
            )

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
        geometry: either the path of a backplane raster whose band descriptions name
            their roles, or a mapping from roles (see `OBS_BAND_NAMES`) to
            single-band raster paths or ``(rows, cols)`` arrays; angles in degrees.
        grid: the cube's pixel grid; every raster must be aligned with it and every array
            must have its ``(rows, cols)`` shape.
        dtm: optional DTM raster path (heights [m], projected CRS, north-up) on the same
            grid, for local surface normals; None for none.
        surface: ``"auto"`` (default), ``"local"`` or ``"ellipsoid"``: which angles to read
            when the backplane carries both (see `lumaxlike._io.read.backplanes.plan_geometry`).

    Attributes:
        plan: the `lumaxlike._io.read.backplanes.GeometryPlan` chosen.

    Raises:
        FileNotFoundError: a geometry or DTM file does not exist.
        ValueError: unreadable file, misaligned raster (naming both files and what
            differs), bands or keys that make no geometry (listing what was found and
            what was expected), ambiguous band, unusable local-surface bands, wrong array
            shape.

    Use as a context manager, or call `close`.
    """

    def __init__(self, geometry, grid: RasterGrid, dtm=None, surface: str = "auto"):
        self.grid = grid
        self._rasters: list[BandRaster] = []
        try:
            self._sources, self._labels, source, found_text = self._open_sources(geometry)
            self.plan = plan_geometry(
                self._sources,
                surface=surface,
                dtm=dtm is not None,
                source=source,
                found_text=found_text,
            )
            self._dtm = None
            if dtm is not None:
                self._dtm = self._open_raster(dtm, "DTM")
                if self._dtm.count != 1:
                    raise ValueError(
                        f"DTM {self._dtm.path} must have one band, it has {self._dtm.count}"
                    )
                self._pixel_size = pixel_size_m(self._dtm.grid)
                if grid.height < 2 or grid.width < 2:
                    raise ValueError(
                        f"DTM {self._dtm.path} must be at least 2 x 2 pixels for slopes"
                    )
        except BaseException:
            self.close()
            raise

    def _open_raster(self, path, role: str) -> BandRaster:
        raster = BandRaster(path)
        self._rasters.append(raster)
        check_aligned(self.grid, raster.grid, role)
        return raster

    def _open_sources(self, geometry):
        """``({role: reader}, {role: label}, source name, what it holds)`` of a geometry input."""
        sources: dict[str, _RasterAngles | _ArrayAngles]
        labels: dict[str, str]
        if isinstance(geometry, (str, Path)):
            raster = self._open_raster(geometry, "geometry")
            descriptions = band_descriptions(raster)
            bands = find_roles(descriptions, raster.path)
            sources = {role: _RasterAngles(raster, index) for role, index in bands.items()}
            labels = {
                role: f"band {index}: {descriptions[index - 1]}" for role, index in bands.items()
            }
            self._files = {role: f"geometry raster {raster.path}" for role in bands}
            found_text = (
                f"bands {list(descriptions)} (roles recognised: "
                f"{', '.join(bands) if bands else 'none'})"
            )
            return sources, labels, f"geometry raster {raster.path}", found_text
        if not isinstance(geometry, Mapping):
            raise ValueError(
                "geometry must be a backplane raster path or a mapping of roles "
                f"({', '.join(ROLES)}) to rasters or arrays, got {type(geometry).__name__}"
            )
        unknown = sorted(str(key) for key in geometry if key not in ROLES)
        if unknown:
            raise ValueError(
                f"geometry mapping has unknown keys {unknown}; the roles are {', '.join(ROLES)}"
            )
        sources, labels = {}, {}
        self._files = {role: f"geometry[{role!r}]" for role in geometry}
        for role, source in geometry.items():
            if isinstance(source, (str, Path)):
                raster = self._open_raster(source, f"geometry ({role})")
                if raster.count != 1:
                    raise ValueError(
                        f"geometry raster {raster.path} for {role} must have one band, it has {raster.count}"
                    )
                sources[role], labels[role] = _RasterAngles(raster, 1), str(raster.path)
                self._files[role] = "geometry raster"
            else:
                angles = _ArrayAngles(role, source)
                sources[role], labels[role] = angles, "array"
                shape = angles.values.shape
                if shape != (self.grid.height, self.grid.width):
                    raise ValueError(
                        f"geometry[{role!r}] has shape {shape}, cube {self.grid.path} has "
                        f"{self.grid.height} x {self.grid.width} pixels"
                    )
        return sources, labels, "the geometry mapping", f"the keys {sorted(geometry)}"

    def record(self) -> dict:
        """What the outputs' provenance records: surface, layout, bands read, bands not read."""
        return {
            "surface": self.plan.surface,
            "layout": self.plan.describe(),
            "bands": {role: self._labels[role] for role in self.plan.roles},
            "checked": {role: self._labels[role] for role in self.plan.checks},
            "not_read": {role: self._labels[role] for role in self.plan.unused},
        }

    def read_angles(self, rows: slice) -> dict[str, np.ndarray]:
        """The bands the plan reads over ``rows``: ``{role: (len(rows), cols) array}``, NaN
        = nodata.

        Raises:
            ValueError: naming the band, its file and the first offending pixel, for a
                value outside its role's range (:data:`ANGLE_RANGES`).
        """
        roles = self.plan.roles + self.plan.checks
        angles = {role: self._sources[role].read(rows) for role in roles}
        for role, values in angles.items():
            self._check_range(role, values, rows)
        return angles

    def _check_range(self, role, values, rows) -> None:
        lower, upper = ANGLE_RANGES.get(role, (-np.inf, np.inf))
        values = np.asarray(values, dtype=np.float64)
        with np.errstate(invalid="ignore"):
            bad = ~np.isnan(values) & ~((values >= lower) & (values <= upper) & np.isfinite(values))
        if not bad.any():
            return
        row, col = np.argwhere(bad)[0]
        unit = "" if role == "facet_cos_i" else " deg"
        allowed = (
            "any finite value (wrapped)" if role in _AZIMUTHS else f"[{lower:g}, {upper:g}]{unit}"
        )
        below = (
            " ([90, 180]: below the horizon, status INVALID_GEOMETRY)" if role in _ZENITHS else ""
        )
        raise ValueError(
            f"{self._files[role]} {self._labels[role]} ({role}) holds "
            f"{float(values[row, col]):.6g}{unit} at row {rows.start + row}, column {col} "
            f"({int(bad.sum())} pixels of rows {rows.start}-{rows.stop - 1} out of range): "
            f"{role} must be {allowed}{below}; NaN marks nodata"
        )

    def read(self, rows: slice) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Direction vectors over ``rows``.

        Returns:
            ``(to_sun, to_sensor, normal)``, float64 unit vectors (east, north, up) of
            shape ``(len(rows), cols, 3)``, computed from the stored angles in float64
            whatever their type (the solver works in the cube's precision); NaN where a band or the DTM is nodata, or where an
            (i, e, g) triplet is inconsistent (see `lumaxlike.geometry_from_angles`).

        Raises:
            ValueError: a band read as a check (``facet_cos_i``, local angles) disagrees
                with the geometry built from the others by more than
                `CHECK_TOLERANCE`.
        """
        angles = self.read_angles(rows)
        rad = {
            role: np.deg2rad(a.astype(np.float64))
            for role, a in angles.items()
            if role != "facet_cos_i"
        }
        if self.plan.angles == "zenith_azimuth":
            to_sun = direction_from_zenith_azimuth(rad["to_sun_zenith"], rad["to_sun_azimuth"])
            to_sensor = direction_from_zenith_azimuth(
                rad["to_sensor_zenith"], rad["to_sensor_azimuth"]
            )
            if self.plan.normals == "facets":
                normal = normal_from_slope_aspect(rad["facet_slope"], rad["facet_aspect"])
            else:
                normal = self.read_normals(rows)
        else:
            local = "local_incidence" in rad
            incidence = rad["local_incidence" if local else "incidence"]
            emission = rad["local_emission" if local else "emission"]
            phase = rad.get("phase")
            if phase is None:  # from the zenith/azimuth directions (phase is the same locally)
                phase = angles_from_geometry(
                    direction_from_zenith_azimuth(rad["to_sun_zenith"], rad["to_sun_azimuth"]),
                    direction_from_zenith_azimuth(
                        rad["to_sensor_zenith"], rad["to_sensor_azimuth"]
                    ),
                    np.array([0.0, 0.0, 1.0]),
                )[2]
            to_sun, to_sensor, normal = geometry_from_angles(incidence, emission, phase=phase)
        self._check(rows, angles, to_sun, to_sensor, normal)
        return (
            np.asarray(to_sun, dtype=np.float64),
            np.asarray(to_sensor, dtype=np.float64),
            np.asarray(normal, dtype=np.float64),
        )

    def _check(self, rows, angles, to_sun, to_sensor, normal) -> None:
        if not self.plan.checks:
            return
        local_i, local_e = (
            np.rad2deg(a) for a in angles_from_geometry(to_sun, to_sensor, normal)[:2]
        )
        computed = {
            "facet_cos_i": local_incidence_cosine(to_sun, normal),
            "local_incidence": local_i,
            "local_emission": local_e,
        }
        for role in self.plan.checks:
            with np.errstate(invalid="ignore"):
                difference = np.abs(computed[role] - angles[role].astype(np.float64))
            bad = difference > CHECK_TOLERANCE[role]
            if bad.any():
                row, col = np.argwhere(bad)[0]
                raise ValueError(
                    f"geometry {self._labels[role]} ({role}) disagrees with the geometry built from "
                    f"{', '.join(self._labels[r] for r in self.plan.roles)} at {int(bad.sum())} "
                    f"pixels of rows {rows.start}-{rows.stop - 1} (first: row {rows.start + row}, "
                    f"column {col}: {float(angles[role][row, col]):.6g} in the band, "
                    f"{float(computed[role][row, col]):.6g} computed; tolerance "
                    f"{CHECK_TOLERANCE[role]}). lumaxlike reads facet_aspect as the downslope "
                    "direction clockwise from north and facet_slope from the horizontal, in "
                    "degrees; a backplane with another convention cannot be used as it is "
                    "(surface='ellipsoid' leaves its local-surface bands out)"
                )

    def read_normals(self, rows: slice) -> np.ndarray:
        """Outward unit surface normals from the DTM (or a flat surface) over ``rows``.

        Shape ``(len(rows), cols, 3)``. With a DTM the slopes are central differences,
        computed on the window plus one row of margin on each side, so windows give the
        same normals as the whole image.
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

    def __enter__(self) -> GeometryReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()
