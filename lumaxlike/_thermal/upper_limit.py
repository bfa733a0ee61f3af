"""T's one-sided 95 % upper limit of the pixels the data do not bound (NOT_CONSTRAINED).

The limit is the T above the fit where the cost profiled over (a, b) has risen by
`UPPER_LIMIT_CHI2` (times the estimated variance scale): the root of

    g = sqrt(cost(T) - cost_min) - sqrt(rise),

each evaluation one profiled fit (`solvers.solve_thermal` with T held) of the pixels not
yet done. g is searched in s = exp(-K / T), K = C2 / lambda_max (lambda_max the window's
longest band), in which it is nearly linear over the whole range: near the fit's minimum
the cost is quadratic in T, so sqrt(cost - cost_min) is linear in T and in s; far above
it, the residual is the emission at lambda_max, proportional to s (Wien), and so is
sqrt(cost). Secant steps from the fit (the first at the quadratic model's limit, T +
sqrt(rise (J^T J)^-1_tt)) until a point is above the limit (or the upper bound is within
it: the limit is then the upper bound), then false position in the bracket with the
Illinois modification, to `UPPER_LIMIT_TOL` in T: 4-8 fits in all.
"""

from __future__ import annotations

import numpy as np

from .._model.thermal import C2
from .rules import T_SCALE

__all__ = ["UPPER_LIMIT_CHI2", "upper_limit"]

# the 90 % two-sided, i.e. 95 % one-sided, point of chi^2 with 1 degree of freedom
UPPER_LIMIT_CHI2 = 2.706
UPPER_LIMIT_STEPS = 24  # profiled fits at most (4-8 are usual)
UPPER_LIMIT_TOL = 0.01  # [K]
SMALLEST_S = 1e-300  # s held above this (T of a few K: below any bound in use)


def upper_limit(profile, out, rise, covariance_tt, t_high, longest):
    """The upper limits T [K] of the pixels of `out`.

    Args:
        profile: (index array, t (same length)) -> the profiled cost of those pixels at
            t = T / T_SCALE.
        out: the fit's output rows (pixels, 12) (`solvers.solve_thermal`).
        rise: the cost's rise at the limit, per pixel.
        covariance_tt: (J^T J)^-1's (t, t) entry per pixel (inf where singular).
        t_high: the upper bound of t; longest: the window's longest band [um].
    """
    search = _Search(out, rise, covariance_tt, t_high, C2 / longest / T_SCALE)
    for _ in range(UPPER_LIMIT_STEPS):
        active = np.flatnonzero(~search.done)
        if not active.size:
            break
        search.update(active, profile(active, search.t[active]))
    return search.t * T_SCALE


class _Search:
    """The state of `upper_limit`'s root search, pixels in parallel: brackets in s."""

    def __init__(self, out, rise, covariance_tt, t_high, k):
        n = len(out)
        self.k, self.t_high = k, t_high
        self.minimum, self.target = out[:, 3], np.sqrt(rise)
        self.lo, self.g_lo = self.s(out[:, 2]), -self.target
        self.hi, self.g_hi = np.full(n, self.s(t_high)), np.full(n, np.inf)  # inf: not yet
        self.side = np.zeros(n)  # +1 / -1: the last step moved hi / lo (Illinois)
        step = np.sqrt(rise * covariance_tt)
        self.t = np.minimum(out[:, 2] + np.where(np.isfinite(step), step, t_high), t_high)
        self.done = np.zeros(n, dtype=bool)

    def s(self, t):
        return np.maximum(np.exp(-self.k / t), SMALLEST_S)

    def t_of(self, s):
        return -self.k / np.log(s)

    def update(self, idx, cost):
        """Take the cost at self.t[idx]; set the next trial (or done) of those pixels."""
        t = self.t[idx]
        s, g = self.s(t), np.sqrt(np.maximum(cost - self.minimum[idx], 0.0)) - self.target[idx]
        lo, g_lo, hi, g_hi = self.lo[idx], self.g_lo[idx], self.hi[idx], self.g_hi[idx]
        side, above = self.side[idx], g > 0
        # Illinois: the end kept twice in a row has its g halved
        g_lo = np.where(above & (side > 0), 0.5 * g_lo, g_lo)
        g_hi = np.where(~above & (side < 0), 0.5 * g_hi, g_hi)
        new_lo, new_g_lo = np.where(above, lo, s), np.where(above, g_lo, g)
        hi, g_hi = np.where(above, s, hi), np.where(above, g, g_hi)
        bracketed = np.isfinite(g_hi)
        with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
            # g's slope in s: of the bracket, or (not yet bracketed) of the last two points
            slope = np.where(bracketed, (g_hi - new_g_lo) / (hi - new_lo), (g - g_lo) / (s - lo))
            root = new_lo - new_g_lo / slope
            # where the slope says nothing (flat, or not finite): s grown tenfold
            root = np.where(np.isfinite(root) & (slope > 0), root, 10.0 * new_lo)
            root = np.where(bracketed, root, np.minimum(root, self.s(self.t_high)))
            t_next = self.t_of(root)
            width = self.t_of(hi) - self.t_of(new_lo)
        unbounded = ~above & (t >= self.t_high)
        converged = bracketed & (
            (width < UPPER_LIMIT_TOL / T_SCALE) | (np.abs(t_next - t) < UPPER_LIMIT_TOL / T_SCALE)
        )
        self.done[idx] = unbounded | converged
        self.t[idx] = np.where(
            unbounded, self.t_high, np.where(converged, t_next, np.minimum(t_next, self.t_high))
        )
        self.lo[idx], self.g_lo[idx], self.hi[idx], self.g_hi[idx] = new_lo, new_g_lo, hi, g_hi
        self.side[idx] = np.where(above, 1.0, -1.0)
