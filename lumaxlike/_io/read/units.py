"""Reflectance quantities and their conversion to bidirectional reflectance r [1/sr].

``"r"``
    bidirectional reflectance r [1/sr], what :func:`lumaxlike.invert` takes.
``"radf"``
    radiance factor, RADF = I/F = pi r [-].
``"reff"``
    reflectance factor, REFF = pi r / cos i [-], with cos i the cosine of the *local*
    incidence angle (between the direction to the source and the surface normal).
"""

from __future__ import annotations

import numpy as np

__all__ = [
    "REFLECTANCE_UNITS",
    "check_units",
    "local_incidence_cosine",
    "to_bidirectional_reflectance",
    "uncertainty_to_r",
]

REFLECTANCE_UNITS = ("r", "radf", "reff")
"""Accepted names of the reflectance quantity of an input cube."""


def check_units(units) -> str:
    """Return ``units`` if it names a reflectance quantity, else raise ValueError naming ``units``."""
    if units not in REFLECTANCE_UNITS:
        raise ValueError(f"units={units!r} is not one of {', '.join(map(repr, REFLECTANCE_UNITS))}")
    return units


def local_incidence_cosine(to_sun, normal) -> np.ndarray:
    """cos i between the direction to the source and the surface normal [-].

    Args:
        to_sun, normal: vectors of shape ``pixels + (3,)`` (any length, not zero).

    Returns:
        array of shape ``pixels``; negative where the source is below the local horizon.
    """
    to_sun = np.asarray(to_sun)
    normal = np.asarray(normal)
    dot = np.sum(to_sun * normal, axis=-1)
    return dot / (np.linalg.norm(to_sun, axis=-1) * np.linalg.norm(normal, axis=-1))


def to_bidirectional_reflectance(values, units, to_sun=None, normal=None) -> np.ndarray:
    """Convert reflectance values to bidirectional reflectance r [1/sr].

    Never modifies ``values``.

    Args:
        values: reflectance in ``units``, shape ``pixels + (bands,)``.
        units: ``"r"``, ``"radf"`` or ``"reff"`` (see the module docstring).
        to_sun: direction to the source, shape ``pixels + (3,)``; needed for ``"reff"``
            only.
        normal: surface normal, shape ``pixels + (3,)``; needed for ``"reff"`` only.

    Returns:
        r [1/sr], shape of ``values``; a new array unless ``units == "r"``.
    """
    check_units(units)
    values = np.asarray(values)
    if units == "r":
        return values
    if units == "radf":
        return values / np.pi
    if to_sun is None or normal is None:
        raise ValueError('units="reff" needs to_sun and normal to compute cos i')
    cos_i = local_incidence_cosine(to_sun, normal).astype(values.dtype, copy=False)
    return values * (cos_i[..., None] / np.pi)


def uncertainty_to_r(sigma, units, to_sun=None, normal=None, dtype=np.float64):
    """Convert a standard uncertainty of reflectance in ``units`` to r [1/sr].

    Args:
        sigma: one uncertainty for every value [``units``], or None.
        units: ``"r"``, ``"radf"`` or ``"reff"``.
        to_sun, normal: shape ``pixels + (3,)``; needed for ``"reff"`` only.
        dtype: floating type of the result.

    Returns:
        None for ``sigma=None``; a scalar for ``"r"`` and ``"radf"``; for ``"reff"`` an
        array of shape ``pixels + (1,)`` (it scales with the local cos i).
    """
    check_units(units)
    if sigma is None:
        return None
    if units == "r":
        return np.asarray(sigma, dtype)
    if units == "radf":
        return np.asarray(sigma / np.pi, dtype)
    cos_i = local_incidence_cosine(to_sun, normal).astype(dtype, copy=False)
    return (np.asarray(sigma / np.pi, dtype) * cos_i)[..., None]
