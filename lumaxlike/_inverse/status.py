"""Per-problem status codes shared by every solver (never exceptions inside batched code)."""

import enum

__all__ = ["Status"]


class Status(enum.IntEnum):
    """Outcome of one pixel-band problem, stored as int8 in `InversionResult.status` and `FitResult.status`."""

    CONVERGED = 0  #: the step fell below `tol` in every free parameter
    MAX_ITER = 1  #: `max_iter` steps without convergence; the values are the last iterate
    UNREACHABLE = 2  #: (`invert` only) observed r <= 0 or >= r(w -> 1) here: no w in (0, 1) fits
    INVALID_GEOMETRY = 3  #: source or observer at or below the local horizon (cos i or cos e <= 0)
    NONFINITE_INPUT = 4  #: NaN or inf reflectance or geometry
    #: (`fit` only) converged, but the observations do not determine every free parameter:
    #: J^T J is singular to working precision there; the values are one of many solutions
    #: and the covariance is NaN
    UNDETERMINED = 5
