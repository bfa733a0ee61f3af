"""Per-problem status codes shared by every solver (never exceptions inside batched code)."""

import enum

__all__ = ["Status"]


class Status(enum.IntEnum):
    """Outcome of one pixel-band problem, stored as int8 in `InversionResult.status`."""

    CONVERGED = 0  #: the step in w fell below `tol`
    MAX_ITER = 1  #: `max_iter` steps without convergence; w is the last iterate
    UNREACHABLE = 2  #: observed r <= 0 or >= r(w -> 1) at this geometry: no w in (0, 1) fits
    INVALID_GEOMETRY = 3  #: source or observer at or below the local horizon (cos i or cos e <= 0)
    NONFINITE_INPUT = 4  #: NaN or inf reflectance or geometry
