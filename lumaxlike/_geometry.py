"""Observation geometry: direction vectors from angles and surface normals from a DTM.

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
    "direction_from_zenith_azimuth",
    "geometry_from_angles",
    "normals_from_dtm",
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


def geometry_from_angles(incidence, emission, azimuth):
    """Direction vectors for a flat surface from incidence, emission and relative azimuth.

    Args:
        incidence: angle between the surface normal and the direction to the source [rad].
        emission: angle between the surface normal and the direction to the observer [rad].
        azimuth: azimuth of the observer relative to the source, psi [rad]: 0 puts the
            observer on the source's side (backscatter for incidence = emission), pi on the
            opposite side (forward scatter). All three broadcast against each other.

    Returns:
        ``(to_sun, to_sensor, normal)``, each an ndarray of shape
        ``broadcast_shape + (3,)``, with the normal straight up.
    """
    incidence, emission, azimuth = np.broadcast_arrays(
        np.asarray(incidence), np.asarray(emission), np.asarray(azimuth)
    )
    to_sun = direction_from_zenith_azimuth(incidence, np.zeros_like(incidence))
    to_sensor = direction_from_zenith_azimuth(emission, azimuth)
    normal = np.zeros_like(to_sun)
    normal[..., 2] = 1.0
    return to_sun, to_sensor, normal


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
        raise ValueError(f"dtm must be a 2-D array of at least 2 x 2 heights, got shape {dtm.shape}")
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
