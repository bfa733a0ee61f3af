"""Which observations of a multi-angle problem `fit` uses: per-observation masks.

An observation is left out of its problem (its residual row becomes a zero row) when its
reflectance or its geometry is not finite, or when its incidence, emission or phase
angle lies outside the user's `observation_limits`. Shared by `fit`, the joint fits, `sample` and the `lumaxlike
fit` command line (which takes the limits in degrees and converts them).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from ..._geometry import angles_from_geometry

__all__ = [
    "LIMITED_ANGLES",
    "check_observation_limits",
    "masked_chunk",
    "observation_angles",
    "within_limits",
]

#: The angles `observation_limits` may bound, all measured from the given vectors: incidence
#: between `to_sun` and `normal`, emission between `to_sensor` and `normal`, phase between
#: `to_sun` and `to_sensor`.
LIMITED_ANGLES = ("incidence", "emission", "phase")


def check_observation_limits(
    limits, name: str = "observation_limits"
) -> dict[str, tuple[float, float]]:
    """{angle: (lower, upper)} [rad], checked: known angle names, finite, 0 <= lower <= upper <= pi.

    None or an empty mapping means no limits. A bound above pi is refused with a hint
    that the values look like degrees.
    """
    if limits is None:
        return {}
    if not isinstance(limits, Mapping):
        raise ValueError(
            f"{name} must be a mapping {{angle: (lower, upper)}} in radians, got {type(limits).__name__}"
        )
    checked = {}
    for angle, interval in limits.items():
        if angle not in LIMITED_ANGLES:
            raise ValueError(
                f"{name} has unknown angle {angle!r}; expected some of {LIMITED_ANGLES}"
            )
        try:
            lower, upper = (float(v) for v in interval)
        except (TypeError, ValueError):
            raise ValueError(
                f"{name}[{angle!r}] must be a pair (lower, upper) of numbers [rad], got {interval!r}"
            ) from None
        if not (math.isfinite(lower) and math.isfinite(upper) and 0.0 <= lower <= upper):
            raise ValueError(
                f"{name}[{angle!r}] must be finite with 0 <= lower <= upper [rad], got {interval!r}"
            )
        if upper > math.pi:
            raise ValueError(
                f"{name}[{angle!r}] = {interval!r}: angles are in radians, within [0, pi] "
                f"(degrees? use numpy.radians)"
            )
        checked[angle] = (lower, upper)
    return checked


def observation_angles(to_sun, to_sensor, normal) -> dict[str, np.ndarray]:
    """Incidence, emission and phase angles [rad] of each observation, from (..., 3) vectors
    (`lumaxlike.angles_from_geometry`); NaN where a vector is zero."""
    incidence, emission, phase, _ = angles_from_geometry(to_sun, to_sensor, normal)
    return {"incidence": incidence, "emission": emission, "phase": phase}


def within_limits(to_sun, to_sensor, normal, limits: dict[str, tuple[float, float]]) -> np.ndarray:
    """Whether each observation's angles lie within `limits` (closed intervals; checked by
    `check_observation_limits`): bool (...,), False where the geometry is not finite."""
    inside = np.all(np.isfinite(to_sun) & np.isfinite(to_sensor) & np.isfinite(normal), axis=-1)
    if limits:
        angles = observation_angles(to_sun, to_sensor, normal)
        for angle, (lower, upper) in limits.items():
            with np.errstate(invalid="ignore"):
                inside &= (angles[angle] >= lower) & (angles[angle] <= upper)
    return inside


# Where an observation's geometry is not finite it is left out; its vectors are replaced
# by these (a valid nadir geometry), so that no solver computes with NaN.
_PLACEHOLDER_VECTOR = np.array([0.0, 0.0, 1.0])


def masked_chunk(refl, geometry, limits):
    """One chunk with its masked observations left out: (refl, *geometry), any_finite.

    refl (pixels, bands, observations) comes back with NaN for every observation left
    out (non-finite reflectance or geometry, outside `limits`; a copy only when there is
    one), the geometry (pixels, observations, 3) each with non-finite vectors replaced by
    `_PLACEHOLDER_VECTOR`. any_finite (pixels, bands): whether the problem had any
    observation with finite reflectance and geometry before the limits applied.
    """
    geometry_finite = np.all([np.all(np.isfinite(g), axis=-1) for g in geometry], axis=0)
    to_sun, to_sensor, normal = geometry
    use = within_limits(to_sun, to_sensor, normal, limits)  # False where geometry is not finite
    finite = np.isfinite(refl)
    any_finite = np.any(finite & geometry_finite[:, None, :], axis=-1)
    if not use.all():
        refl = np.where(use[:, None, :], refl, np.nan)
    if not geometry_finite.all():
        geometry = [
            np.where(geometry_finite[..., None], g, _PLACEHOLDER_VECTOR.astype(g.dtype))
            for g in geometry
        ]
    return [refl, *geometry], any_finite
