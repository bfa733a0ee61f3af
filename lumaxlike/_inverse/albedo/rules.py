"""One Levenberg-Marquardt problem in w, written once for both solvers.

Scalar, branch-free functions, retargeted to JAX and numba like the model's
`equations` (same rules: `where` instead of `if` on data). Both solvers use the table,
start and status, and both step with `propose` and `update`, the p = 1 case of
`lm_rules` (numba's fused kernel per band, JAX's `_solve_albedo_lm`
element-wise over a chunk). So the two solvers take the same steps and agree to rounding.

The problem: find w in (0, 1) with r(w) = r_obs, r strictly increasing in w. It is the
one-parameter, one-observation case of `lm_rules` (whose acceptance, damping and
convergence rules `update` applies): the step is dw = -f / (f' (1 + lambda)) with
f = r(w) - r_obs, projected onto [w_lower, w_upper]. The start comes from a
per-pixel table of r and dr/dw at 8 albedos (and w = 0), interpolated as a cubic Hermite
spline of w(r), so one or two steps suffice.
"""

from ..._model._scalar_math import isfinite, maximum, minimum, where
from ..._model.equations import reflectance_and_slope
from ..._status import Status
from ..lm_rules import accepted, converged, damped_diagonal, gain_ratio, next_damping

__all__ = [
    "table_point",
    "albedo_table",
    "problem_status",
    "starting_albedo",
    "propose",
    "newton_size",
    "update",
]

# Albedos of the starting table, denser toward 1 where r(w) bends: w_k = 1 - (1 - k/8)^2.
TABLE_ALBEDOS = (0.234375, 0.4375, 0.609375, 0.75, 0.859375, 0.9375, 0.984375, 1.0)
N_TABLE = 8
SOLVING = -1  # internal: a problem still to solve (never returned)
CONVERGED = int(Status.CONVERGED)
MAX_ITER = int(Status.MAX_ITER)
UNREACHABLE = int(Status.UNREACHABLE)
INVALID_GEOMETRY = int(Status.INVALID_GEOMETRY)
NONFINITE_INPUT = int(Status.NONFINITE_INPUT)


def table_point(w, terms):
    """(r [1/sr], dw/dr [sr]) at albedo w for one pixel's terms."""
    r, slope = reflectance_and_slope(w, terms)
    return r, 1.0 / slope  # dw/dr; 0 at w = 1, where dr/dw is unbounded


def albedo_table(terms):
    """r [1/sr] at the 8 `TABLE_ALBEDOS`, then dw/dr [sr] at w = 0 and at each of them.

    A flat 17-tuple for one pixel (tuples travel through numba and `jax.vmap` alike):
    entries 0-7 are r(w_k), entry 7 being r(w = 1); entries 8-16 are dw/dr at w = 0, w_1, ...
    """
    r_1, m_1 = table_point(TABLE_ALBEDOS[0], terms)
    r_2, m_2 = table_point(TABLE_ALBEDOS[1], terms)
    r_3, m_3 = table_point(TABLE_ALBEDOS[2], terms)
    r_4, m_4 = table_point(TABLE_ALBEDOS[3], terms)
    r_5, m_5 = table_point(TABLE_ALBEDOS[4], terms)
    r_6, m_6 = table_point(TABLE_ALBEDOS[5], terms)
    r_7, m_7 = table_point(TABLE_ALBEDOS[6], terms)
    r_8, m_8 = table_point(TABLE_ALBEDOS[7], terms)
    _, m_0 = table_point(0.0, terms)
    return (r_1, r_2, r_3, r_4, r_5, r_6, r_7, r_8, m_0, m_1, m_2, m_3, m_4, m_5, m_6, m_7, m_8)


def problem_status(refl, geometry_finite, scale, r_max):
    """NONFINITE_INPUT, INVALID_GEOMETRY, UNREACHABLE, or SOLVING for one problem."""
    reachable = (refl > 0.0) & (refl < r_max)
    return where(
        isfinite(refl) & geometry_finite,
        where(isfinite(scale), where(reachable, SOLVING, UNREACHABLE), INVALID_GEOMETRY),
        NONFINITE_INPUT,
    )


def starting_albedo(refl, table, w_lower, w_upper):
    """w at r = refl by cubic Hermite interpolation of w(r) in the pixel's table.

    On each interval of the table (and r(0) = 0) w(r) is interpolated from its values and
    derivatives dw/dr = 1/(dr/dw) at both ends: errors of order (interval)^4, so one or
    two Newton steps finish the job.
    """
    # select the bracketing interval (cheap selects), then evaluate one cubic
    r_low = 0.0 * refl
    w_low = 0.0
    m_low = table[N_TABLE]
    bracket = (r_low, r_low + table[0], w_low, TABLE_ALBEDOS[0], m_low, table[N_TABLE + 1])
    for k in range(N_TABLE):
        r_high = table[k]
        m_high = table[N_TABLE + 1 + k]
        w_high = TABLE_ALBEDOS[k]
        inside = (refl > r_low) & (refl <= r_high)
        bracket = (
            where(inside, r_low, bracket[0]),
            where(inside, r_high, bracket[1]),
            where(inside, w_low, bracket[2]),
            where(inside, w_high, bracket[3]),
            where(inside, m_low, bracket[4]),
            where(inside, m_high, bracket[5]),
        )
        r_low = r_high
        w_low = w_high
        m_low = m_high
    r_low, r_high, w_low, w_high, m_low, m_high = bracket
    width = r_high - r_low
    t = (refl - r_low) / where(width > 0.0, width, 1.0)
    t2 = t * t
    t3 = t2 * t
    start = (
        (2.0 * t3 - 3.0 * t2 + 1.0) * w_low
        + (t3 - 2.0 * t2 + t) * width * m_low
        + (3.0 * t2 - 2.0 * t3) * w_high
        + (t3 - t2) * width * m_high
    )
    return maximum(w_lower, minimum(w_upper, start))


def propose(w, residual, slope, damping, w_lower, w_upper):
    """The damped Newton trial point (`lm_rules.damped_diagonal`), projected onto [w_lower, w_upper]."""
    positive = slope > 0.0
    slope_safe = where(positive, slope, 1.0)
    square = slope_safe * slope_safe  # J^T J of the one-observation problem
    step = -residual * slope_safe / damped_diagonal(square, square, damping)
    return maximum(w_lower, minimum(w_upper, w + where(positive, step, 0.0 * step)))


def newton_size(residual, slope):
    """|f / f'|, the length of the Newton step (inf where f' = 0)."""
    return abs(residual) / where(slope != 0.0, abs(slope), 0.0 * slope)


def update(w, residual, slope, damping, growth, w_trial, residual_trial, slope_trial, tol):
    """Accept or reject the trial point (`lm_rules`).

    Returns:
        (w, residual, slope, damping, growth, converged).
    """
    cost, cost_trial = residual * residual, residual_trial * residual_trial
    step = w_trial - w
    predicted = -(2.0 * step * slope * residual + step * slope * slope * step)
    accept = accepted(cost, cost_trial)
    # the Newton step at the trial point takes its residual to 0 in the linear model
    newton = newton_size(residual_trial, slope_trial)
    done = converged(abs(step), predicted, cost, newton, accept, damping, tol)
    damping, growth = next_damping(
        accept, gain_ratio(cost, cost_trial, predicted), damping, growth, cost_trial, cost_trial
    )
    return (
        where(accept, w_trial, w),
        where(accept, residual_trial, residual),
        where(accept, slope_trial, slope),
        damping,
        growth,
        done,
    )
