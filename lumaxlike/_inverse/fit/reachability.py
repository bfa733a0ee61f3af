"""Which fitted problems no physical albedo explains: the UNREACHABLE rule of `fit`.

`invert` calls an observation UNREACHABLE when no w in (0, 1) gives its reflectance
(r <= 0 or r >= r(w -> 1)). A multi-observation `fit` has no such closed-form test (the
other free parameters move r(w -> 1)), so its rule reads the data and the solution:

- every valid observation of the problem is <= 0 (no w > 0 gives r <= 0);
- the sum of squared residuals is not finite (an observation beyond float range);
- w ended on a physical bound of (0, 1) (`albedo_bounds`, eps inside): the least-squares
  optimum lies at or beyond w = 0 or w = 1. A bound the user narrowed is the user's
  choice, not this rule's.
"""

from __future__ import annotations

import numpy as np

from ..._status import Status

__all__ = ["mark_unreachable"]

_SOLVED = (Status.CONVERGED, Status.MAX_ITER, Status.UNDETERMINED)


def mark_unreachable(status, refl, w, cost, w_bounds, physical_bounds):
    """Set UNREACHABLE (in place) where a solved problem's data no albedo in (0, 1) explains.

    Args:
        status: (problems,) int8 `Status`, updated in place.
        refl: (problems, observations) reflectance [1/sr], NaN where masked.
        w: (problems,) fitted w.
        cost: (problems,) sum of squared residuals [1/sr^2].
        w_bounds: (lower, upper) bounds w was projected onto.
        physical_bounds: (lower, upper) of `albedo_bounds` for the working precision.
    Returns:
        bool (problems,): where the status was set to UNREACHABLE.
    """
    solved = np.isin(status, _SOLVED)
    with np.errstate(invalid="ignore"):
        none_positive = ~np.any(refl > 0.0, axis=-1) & np.any(np.isfinite(refl), axis=-1)
        pinned = np.zeros_like(solved)
        for bound, physical in zip(w_bounds, physical_bounds):
            if bound == physical:
                pinned |= w == bound
    unreachable = solved & (none_positive | ~np.isfinite(cost) | pinned)
    status[unreachable] = Status.UNREACHABLE
    return unreachable
