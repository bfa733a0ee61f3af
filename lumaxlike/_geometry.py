"""Observation geometry: direction vectors from angles, angles from vectors, surface normals
from a DTM or from facet slope and aspect.

Frame convention used throughout lumaxlike: a right-handed local map frame with
x = east (increasing column), y = north (decreasing row), z = up. Every direction is a
vector of shape ``(..., 3)`` pointing *away* from the surface: toward the light source,
toward the observer, or along the outward surface normal. Vectors need not be unit
length; the model normalises them.

Angles in this module are in radians. Azimuths are measured clockwise from north
(the convention of OBS rasters such as M3's and CRISM's: to-sun azimuth, to-sensor azimuth).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "PHASE_TOLERANCE",
    "angles_from_geometry",
    "direction_from_zenith_azimuth",
    "geometry_from_angles",
    "normal_from_slope_aspect",
    "normals_from_dtm",
    "relative_azimuth",
]


def direction_from_zenith_azimuth(zenith, azimuth):
    """Unit vector toward a direction given by its zenith and azimuth angle.

    Args:
        zenith: angle from the vertical (up) direction [rad], any shape.
        azimuth: angle clockwise from north [rad], broadcastable against ``zenith``.

    Returns:
        ndarray of shape ``broadcast(zenith, azimuth).shape + (3,)``: (east, north, up).
    """
    zenith, azimuth = np.broadcast_arrays(np.asarray(zenith), np.asarray(azimuth))
    dtype = np.result_type(zenith.dtype, azimuth.dtype, np.float32)
    sin_z = np.sin(zenith)
    return np.stack(
        [sin_z * np.sin(azimuth), sin_z * np.cos(azimuth), np.cos(zenith)], axis=-1
    ).astype(dtype, copy=False)


PHASE_TOLERANCE = 1e-5
"""How far [rad] a phase angle may lie outside ``[|i - e|, i + e]`` (or the angles outside
``[0, pi]``) and still count as rounding: such a triplet is clamped onto the nearest
consistent one. About 0.0006 deg, 50 times the rounding of angles in degrees stored as
float32; a triplet further out is inconsistent (no pair of directions has these angles)."""


def relative_azimuth(incidence, emission, phase, tolerance=PHASE_TOLERANCE):
    """Relative azimuth psi between the source and the observer from (i, e, g).

    Solves cos g = cos i cos e + sin i sin e cos psi in the half-angle form
    ``tan(psi/2) = sqrt(sin((g-i+e)/2) sin((g+i-e)/2) / (sin((i+e-g)/2) sin((i+e+g)/2)))``,
    which stays accurate at backscatter (psi -> 0), forward scatter (psi -> pi) and
    i or e -> 0, where psi is undefined and 0 is returned: no NaN from 0/0.

    Args:
        incidence, emission, phase: angles [rad], broadcast against each other.
        tolerance: rounding allowance [rad] (see `PHASE_TOLERANCE`).

    Returns:
        psi [rad] in ``[0, pi]``, float64, broadcast shape; NaN where an angle is NaN or
        the triplet is inconsistent: g outside ``[|i - e|, i + e]``, i + e + g > 2 pi,
        or an angle outside ``[0, pi]``, each by more than ``tolerance``.
    """
    i, e, g = (
        np.asarray(a, dtype=np.float64) for a in np.broadcast_arrays(incidence, emission, phase)
    )
    x1, x2 = (g - i + e) / 2, (g + i - e) / 2
    x3, x4 = (i + e - g) / 2, (i + e + g) / 2
    with np.errstate(invalid="ignore"):
        half = tolerance / 2
        inconsistent = (np.minimum(np.minimum(x1, x2), x3) < -half) | (x4 > np.pi + half)
        for angle in (i, e, g):
            inconsistent |= (angle < -tolerance) | (angle > np.pi + tolerance)
        x1, x2, x3 = (np.clip(x, 0.0, np.pi) for x in (x1, x2, x3))
        x4 = np.clip(x4, 0.0, np.pi)
        across = np.sqrt(np.maximum(np.sin(x1) * np.sin(x2), 0.0))
        along = np.sqrt(np.maximum(np.sin(x3) * np.sin(x4), 0.0))
    return np.where(inconsistent, np.nan, 2.0 * np.arctan2(across, along))


def geometry_from_angles(
    incidence, emission, azimuth=None, *, phase=None, tolerance=PHASE_TOLERANCE
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Direction vectors for a flat surface from incidence, emission and azimuth or phase.

    Give exactly one of ``azimuth`` and ``phase``: ``geometry_from_angles(i, e, psi)`` or
    ``geometry_from_angles(incidence=i, emission=e, phase=g)``.

    Args:
        incidence: angle between the surface normal and the direction to the source [rad].
        emission: angle between the surface normal and the direction to the observer [rad].
        azimuth: azimuth of the observer relative to the source, psi [rad]: 0 puts the
            observer on the source's side (backscatter for incidence = emission), pi on the
            opposite side (forward scatter).
        phase: phase angle g between the directions to the source and to the observer
            [rad]; psi then follows from cos g = cos i cos e + sin i sin e cos psi (see
            `relative_azimuth`). A triplet whose g lies outside ``[|i - e|, i + e]``
            by more than ``tolerance`` [rad] is inconsistent: that pixel's ``to_sun`` and
            ``to_sensor`` are NaN (so `lumaxlike.invert` gives it the status
            ``NONFINITE_INPUT``); within ``tolerance`` it is taken as rounding.
        tolerance: see ``phase``; default `PHASE_TOLERANCE` (1e-5 rad).

    All angles broadcast against each other.

    Returns:
        ``(to_sun, to_sensor, normal)``, each an ndarray of shape
        ``broadcast_shape + (3,)``, with the normal straight up, in the angles' float
        dtype (at least float32).

    Raises:
        ValueError: both or neither of ``azimuth`` and ``phase`` given.
    """
    if (azimuth is None) == (phase is None):
        raise ValueError(
            "geometry_from_angles takes exactly one of azimuth and phase, "
            f"got {'both' if azimuth is not None else 'neither'}"
        )
    if phase is not None:
        incidence, emission, phase = np.broadcast_arrays(
            np.asarray(incidence), np.asarray(emission), np.asarray(phase)
        )
        dtype = np.result_type(incidence.dtype, emission.dtype, phase.dtype, np.float32)
        azimuth = relative_azimuth(incidence, emission, phase, tolerance)
        incidence, emission = incidence.astype(np.float64), emission.astype(np.float64)
    else:
        incidence, emission, azimuth = np.broadcast_arrays(
            np.asarray(incidence), np.asarray(emission), np.asarray(azimuth)
        )
        dtype = np.result_type(incidence.dtype, emission.dtype, azimuth.dtype, np.float32)
    to_sun = direction_from_zenith_azimuth(incidence, np.zeros_like(incidence))
    to_sensor = direction_from_zenith_azimuth(emission, azimuth)
    if phase is not None:  # inconsistent triplets (and NaN phases): no directions
        to_sun[np.isnan(azimuth)] = np.nan
        to_sensor[np.isnan(azimuth)] = np.nan
    normal = np.zeros_like(to_sun)
    normal[..., 2] = 1.0
    return (
        to_sun.astype(dtype, copy=False),
        to_sensor.astype(dtype, copy=False),
        normal.astype(dtype, copy=False),
    )


def _unit(vector) -> np.ndarray:
    vector = np.asarray(vector, dtype=np.float64)
    with np.errstate(invalid="ignore", divide="ignore"):
        return vector / np.linalg.norm(vector, axis=-1, keepdims=True)


def _angle_between(a, b) -> np.ndarray:
    """Angle [rad] between vectors (..., 3), accurate near 0 and pi (atan2 of |a x b| and a.b)."""
    return np.arctan2(np.linalg.norm(np.cross(a, b), axis=-1), np.sum(a * b, axis=-1))


def angles_from_geometry(to_sun, to_sensor, normal):
    """Incidence, emission, phase and relative azimuth of direction vectors.

    The inverse of `geometry_from_angles`: for any vectors,
    ``geometry_from_angles(*angles_from_geometry(s, v, n)[:3], ...)`` reproduces the
    same angles, and so the same reflectance.

    Args:
        to_sun: directions (east, north, up; any length, not zero) toward the source,
            shape ``pixels + (3,)``; the three arguments broadcast against each other.
        to_sensor: directions toward the observer, same rule.
        normal: outward surface normals, same rule.

    Returns:
        ``(incidence, emission, phase, azimuth)`` [rad], each of shape ``pixels``, in the
        vectors' float dtype (at least float32): i = angle(normal, to_sun),
        e = angle(normal, to_sensor), g = angle(to_sun, to_sensor), and psi in
        ``[0, pi]`` between the projections of to_sun and to_sensor onto the plane
        normal to ``normal`` (0 where either projection vanishes, i or e = 0). A zero
        vector gives NaN.
    """
    arrays = [np.asarray(v) for v in (to_sun, to_sensor, normal)]
    dtype = np.result_type(*(a.dtype for a in arrays), np.float32)
    s, v, n = np.broadcast_arrays(*(_unit(a) for a in arrays))
    s_flat = s - np.sum(s * n, axis=-1, keepdims=True) * n
    v_flat = v - np.sum(v * n, axis=-1, keepdims=True) * n
    angles = (
        _angle_between(n, s),
        _angle_between(n, v),
        _angle_between(s, v),
        _angle_between(s_flat, v_flat),
    )
    return tuple(a.astype(dtype, copy=False) for a in angles)


def normal_from_slope_aspect(slope, aspect):
    """Outward unit surface normal of a facet given by its slope and aspect.

    Args:
        slope: angle between the facet and the horizontal [rad], 0 = flat, any shape.
        aspect: direction the facet faces, i.e. its downslope direction, clockwise
            from north [rad] (the GIS and OBS-raster convention: 90 deg = the facet
            falls toward the east), broadcastable against ``slope``.

    Returns:
        ndarray of shape ``broadcast(slope, aspect).shape + (3,)``: (east, north, up),
        ``(sin s sin a, sin s cos a, cos s)``, in the angles' float dtype (at least
        float32).
    """
    return direction_from_zenith_azimuth(slope, aspect)


def normals_from_dtm(dtm, pixel_size):
    """Outward unit surface normals from a digital terrain model.

    Slopes are central differences (one-sided at the edges) of the heights.

    Args:
        dtm: heights [m], shape ``(rows, cols)``; row 0 is the northern edge.
        pixel_size: ``(dx, dy)`` ground size of one pixel [m] along columns (east) and
            rows (south), or one number for square pixels. Positive.

    Returns:
        ndarray of shape ``(rows, cols, 3)``: (east, north, up) components.
    """
    dtm = np.asarray(dtm)
    if dtm.ndim != 2 or min(dtm.shape) < 2:
        raise ValueError(
            f"dtm must be a 2-D array of at least 2 x 2 heights, got shape {dtm.shape}"
        )
    dx, dy = np.broadcast_to(np.asarray(pixel_size, dtype=np.float64), (2,))
    if not (dx > 0 and dy > 0):
        raise ValueError(f"pixel_size must be positive, got {pixel_size!r}")
    dtype = np.result_type(dtm.dtype, np.float32)
    dz_drow, dz_dcol = np.gradient(dtm.astype(np.float64), dy, dx)
    dz_deast = dz_dcol
    dz_dnorth = -dz_drow  # rows run southward
    normal = np.stack([-dz_deast, -dz_dnorth, np.ones_like(dz_deast)], axis=-1)
    normal /= np.linalg.norm(normal, axis=-1, keepdims=True)
    return normal.astype(dtype, copy=False)
