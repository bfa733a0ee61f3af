"""The closed-form inversion of an empirical photometric function, written once for both
solvers (retargeted like `albedo_rules`: scalar, branch-free).

The functions are linear in their albedo A, r = A * scale with scale = pht/pi
(`_model.photometric`), so A = refl / scale: no iterations, no start, no tolerance.
"""

from ..._model._scalar_math import NAN, isfinite, where
from ..._status import Status

__all__ = ["geometry_finite", "albedo_closed_form"]

CONVERGED = int(Status.CONVERGED)
UNREACHABLE = int(Status.UNREACHABLE)
INVALID_GEOMETRY = int(Status.INVALID_GEOMETRY)
NONFINITE_INPUT = int(Status.NONFINITE_INPUT)


def geometry_finite(to_sun, to_sensor, normal):
    """True when all nine components of a pixel's direction vectors are finite."""
    return (
        isfinite(to_sun[0]) & isfinite(to_sun[1]) & isfinite(to_sun[2])
        & isfinite(to_sensor[0]) & isfinite(to_sensor[1]) & isfinite(to_sensor[2])
        & isfinite(normal[0]) & isfinite(normal[1]) & isfinite(normal[2])
    )  # fmt: skip


def albedo_closed_form(refl, finite_geometry, scale):
    """(A, status, residual, slope) of one problem r = A * scale = refl.

    Status as for the Hapke solvers: NONFINITE_INPUT (refl or geometry not finite),
    INVALID_GEOMETRY (scale NaN: cos i or cos e <= 0), UNREACHABLE (refl < 0: no A >= 0
    fits), else CONVERGED. A, residual (model minus observed [1/sr]) and slope (dr/dA =
    scale [1/sr]) are NaN unless CONVERGED.
    """
    status = where(
        isfinite(refl) & finite_geometry,
        where(isfinite(scale), where(refl >= 0.0, CONVERGED, UNREACHABLE), INVALID_GEOMETRY),
        NONFINITE_INPUT,
    )
    solved = status == CONVERGED
    safe_scale = where(solved, scale, 1.0)
    albedo = where(solved, refl / safe_scale, NAN)
    residual = where(solved, albedo * safe_scale - refl, NAN)
    slope = where(solved, scale, NAN)
    return albedo, status, residual, slope
