"""One Levenberg-Marquardt problem in w, written once for both solvers.

Scalar, branch-free functions, retargeted to JAX and numba like the model's
`equations` (same rules: `where` instead of `if` on data). The numba solver calls them
inside its `prange` loop; the JAX solver (an optimistix solver) applies them element-wise
to whole chunks. So the two solvers take the same steps and agree to rounding.

The problem: find w in (0, 1) with r(w) = r_obs, r strictly increasing in w. Steps are
Marquardt-damped Newton steps, dw = -f / (f' (1 + lambda)) with f = r(w) - r_obs,
projected onto [w_lower, w_upper]; a step is accepted when |f| decreases (then lambda
shrinks tenfold), else lambda grows tenfold (from at least 1e-3); the problem has
converged when the proposed step is no longer than `tol`, or when the Newton estimate of
the remaining distance to the root at the trial point, |f / f'|, is (this saves the one
extra evaluation that would only confirm a step of ~tol). The start comes from a
per-pixel table of r at 8 albedos (and r(0) = 0), interpolated linearly, so a few steps
suffice.
"""

from .._model._scalar_math import isfinite, maximum, minimum, where
from .._model.equations import reflectance
from .status import Status

__all__ = ["albedo_table", "problem_status", "starting_albedo", "propose", "update"]

# Albedos of the starting table, denser toward 1 where r(w) bends: w_k = 1 - (1 - k/8)^2.
TABLE_ALBEDOS = (0.234375, 0.4375, 0.609375, 0.75, 0.859375, 0.9375, 0.984375, 1.0)
N_TABLE = 8
SOLVING = -1  # internal: a problem still to solve (never returned)
CONVERGED = int(Status.CONVERGED)
MAX_ITER = int(Status.MAX_ITER)
UNREACHABLE = int(Status.UNREACHABLE)
INVALID_GEOMETRY = int(Status.INVALID_GEOMETRY)
NONFINITE_INPUT = int(Status.NONFINITE_INPUT)
MIN_DAMPING = 1e-3


def albedo_table(terms):
    """r [1/sr] at the 8 `TABLE_ALBEDOS` for one pixel's terms; the last is r(w = 1)."""
    return (
        reflectance(TABLE_ALBEDOS[0], terms),
        reflectance(TABLE_ALBEDOS[1], terms),
        reflectance(TABLE_ALBEDOS[2], terms),
        reflectance(TABLE_ALBEDOS[3], terms),
        reflectance(TABLE_ALBEDOS[4], terms),
        reflectance(TABLE_ALBEDOS[5], terms),
        reflectance(TABLE_ALBEDOS[6], terms),
        reflectance(TABLE_ALBEDOS[7], terms),
    )


def problem_status(refl, geometry_finite, scale, r_max):
    """NONFINITE_INPUT, INVALID_GEOMETRY, UNREACHABLE, or SOLVING for one problem."""
    reachable = (refl > 0.0) & (refl < r_max)
    return where(
        isfinite(refl) & geometry_finite,
        where(isfinite(scale), where(reachable, SOLVING, UNREACHABLE), INVALID_GEOMETRY),
        NONFINITE_INPUT,
    )


def starting_albedo(refl, table, w_lower, w_upper):
    """Linear interpolation of w at r = refl in the pixel's table (r(0) = 0)."""
    r_low = 0.0 * refl
    w_low = 0.0
    start = 0.5 + 0.0 * refl
    for k in range(N_TABLE):
        r_high = table[k]
        w_high = TABLE_ALBEDOS[k]
        width = r_high - r_low
        inside = (refl > r_low) & (refl <= r_high) & (width > 0.0)
        fraction = (refl - r_low) / where(width > 0.0, width, 1.0)
        start = where(inside, w_low + fraction * (w_high - w_low), start)
        r_low = r_high
        w_low = w_high
    return maximum(w_lower, minimum(w_upper, start))


def propose(w, residual, slope, damping, w_lower, w_upper):
    """The damped Newton trial point, projected onto [w_lower, w_upper]."""
    positive = slope > 0.0
    step = -residual / (where(positive, slope, 1.0) * (1.0 + damping))
    return maximum(w_lower, minimum(w_upper, w + where(positive, step, 0.0 * step)))


def update(w, residual, slope, damping, w_trial, residual_trial, slope_trial, tol):
    """Accept or reject the trial point; returns (w, residual, slope, damping, converged)."""
    accept = abs(residual_trial) < abs(residual)
    converged = (abs(w_trial - w) <= tol) | (abs(residual_trial) <= tol * abs(slope_trial))
    return (
        where(accept, w_trial, w),
        where(accept, residual_trial, residual),
        where(accept, slope_trial, slope),
        where(accept, 0.1 * damping, maximum(10.0 * damping, MIN_DAMPING)),
        converged,
    )
