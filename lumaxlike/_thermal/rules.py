"""The per-pixel thermal fit, written once for both solvers (the dialect of
`_model/equations.py`; retargeted by `_backends` with the model's `reflectance_and_slope`
and the LM rules of `_inverse/lm_rules.py` bound).

One problem: the bands of `bands` = (wavelength [um], F_sun at 1 au [W m^-2 um^-1],
observed r [1/sr], weight 1/sigma [sr]) of one pixel, three parameters theta =
(a, b, t): w(lambda) = a + b (lambda - lambda_ref) and T = t T_SCALE,

    f_k = weight_k [r(w_k) + eps(w_k) B(lambda_k, T) d^2 / F_k - r_obs,k],

minimised by Levenberg-Marquardt with the package's rules (`lm_rules`: acceptance,
Nielsen's damping, Marquardt's scaling, convergence). `free` = (1, free_b, free_t) holds b
or t fixed (0): the continuum fit frees all three, the correction of one band at a
known T (`method="given"`, and every band after a fit) frees a alone. t is projected
onto its bounds; w is held inside (0, 1) where r and eps are evaluated
(`clamped_albedo`, whose derivative is then 0).

State (a tuple): theta (3), cost, J^T J (6: 00 01 02 11 12 22), J^T f (3), damping,
growth, status, iterations.
"""

from .._inverse.lm_rules import accepted, converged, damped_diagonal, gain_ratio, next_damping
from .._model._scalar_math import expm1, maximum, minimum, where
from .._model.equations import reflectance_and_slope
from .._model.thermal import (
    clamped_albedo,
    emissivity_and_slope,
    planck_exponent,
    thermal_factor_from_exponent,
)

__all__ = [
    "band_exponent",
    "band_emission",
    "band_row",
    "add_band",
    "no_sums",
    "normal_equations",
    "solve3",
    "start_at",
    "damped",
    "trial_point",
    "tried",
]

T_SCALE = 100.0  # [K]: t = T / T_SCALE, so that the step tolerance means alike in a, b, t
SOLVING = -1
CONVERGED = 0
MAX_ITER = 1
INFINITY = float("inf")
# J^T J is singular where its determinant is below this fraction of its diagonal's product
SINGULAR = 1e-14


def band_exponent(t, wavelength):
    """Planck's exponent x (`planck_exponent`) of a band at T = t T_SCALE (wavelength [um])."""
    return planck_exponent(wavelength, t * T_SCALE)


def band_emission(t, x, denominator, wavelength, solar, distance):
    """E = B(lambda, T) d^2 / F [1/sr] of a band at T = t T_SCALE and its derivative in T,
    from its x (`band_exponent`) and expm1(x) (solar: F at 1 au; distance: d [au])."""
    return thermal_factor_from_exponent(wavelength, t * T_SCALE, solar, distance, x, denominator)


def band_row(a, b, offset, observed, weight, emission, terms, coefficients):
    """Residual f and its derivatives in (a, b, t) of one band (weighted, see the module):
    offset = lambda - lambda_ref [um], emission = `band_emission` at t."""
    factor, dfactor = emission
    w, inside = clamped_albedo(a + b * offset)
    r, dr = reflectance_and_slope(w, terms)
    eps, deps = emissivity_and_slope(w, coefficients)
    dw = (dr + deps * factor) * inside * weight
    residual = (r + eps * factor - observed) * weight
    return residual, dw, dw * offset, eps * dfactor * T_SCALE * weight


def add_band(sums, row, free):
    """`sums` = (cost, J^T J (6), J^T f (3)) with one band's `row` (f, df/da, df/db, df/dt)
    added, fixed parameters' derivatives as 0."""
    cost, (j00, j01, j02, j11, j12, j22), (g0, g1, g2) = sums
    f, da, db, dt = row
    db, dt = db * free[1], dt * free[2]
    return (
        cost + f * f,
        (j00 + da * da, j01 + da * db, j02 + da * dt, j11 + db * db, j12 + db * dt, j22 + dt * dt),
        (g0 + da * f, g1 + db * f, g2 + dt * f),
    )


def no_sums(a):
    """(cost, J^T J, J^T f) of no band: zeros (`add_band` adds the bands in their order)."""
    zero = 0.0 * a
    return zero, (zero, zero, zero, zero, zero, zero), (zero, zero, zero)


def normal_equations(theta, pixel, bands, reference, free, kept):
    """(cost, J^T J as 6 entries, J^T f as 3) at theta; fixed parameters' columns are 0.

    The bands are summed in their order; `kept(row)` is each band's row as it is summed
    (the row itself: JAX's solver stores it there, `solvers._stored`). numba's kernel
    takes the same steps in passes over the bands (every x, every expm1(x), every row,
    then the sums: branch-free loops of independent bands, no calls but expm1's): the
    same numbers.
    """
    a, b, t = theta
    terms, coefficients, distance = pixel
    wavelength, solar, observed, weight = bands
    sums = no_sums(a)
    for k in range(observed.shape[0]):
        x = band_exponent(t, wavelength[k])
        emission = band_emission(t, x, expm1(x), wavelength[k], solar[k], distance)
        offset = wavelength[k] - reference
        row = band_row(a, b, offset, observed[k], weight[k], emission, terms, coefficients)
        sums = add_band(sums, kept(row), free)
    return sums


def solve3(m, g, free):
    """x with M x = -g for symmetric M (6 entries), fixed parameters held (x = 0 there),
    by Cramer's rule; and whether M (restricted to the free ones) is regular."""
    m00 = m[0]
    m11 = where(free[1] > 0.0, m[3], 1.0 + 0.0 * m[3])
    m22 = where(free[2] > 0.0, m[5], 1.0 + 0.0 * m[5])
    m01, m02, m12 = m[1], m[2], m[4]
    c00, c01, c02 = m11 * m22 - m12 * m12, m02 * m12 - m01 * m22, m01 * m12 - m02 * m11
    c11, c12, c22 = m00 * m22 - m02 * m02, m01 * m02 - m00 * m12, m00 * m11 - m01 * m01
    det = m00 * c00 + m01 * c01 + m02 * c02
    regular = det > SINGULAR * maximum(m00 * m11 * m22, 0.0 * det)
    inverse_det = where(regular, 1.0 / where(regular, det, 1.0), 0.0 * det)
    x0 = -(c00 * g[0] + c01 * g[1] + c02 * g[2]) * inverse_det
    x1 = -(c01 * g[0] + c11 * g[1] + c12 * g[2]) * inverse_det
    x2 = -(c02 * g[0] + c12 * g[1] + c22 * g[2]) * inverse_det
    return x0, x1 * free[1], x2 * free[2], regular


def start_at(theta, equations):
    """The state at the starting point theta, `equations` = `normal_equations` there."""
    cost, jtj, jtf = equations
    zero = 0.0 * cost
    return theta, cost, jtj, jtf, zero, 2.0 + zero, SOLVING + 0 * (cost > 0.0), 0


def damped(jtj, damping):
    largest = maximum(maximum(jtj[0], jtj[3]), jtj[5])
    return (
        damped_diagonal(jtj[0], largest, damping),
        jtj[1],
        jtj[2],
        damped_diagonal(jtj[3], largest, damping),
        jtj[4],
        damped_diagonal(jtj[5], largest, damping),
    )


def trial_point(state, free, limits):
    """The trial point of a Levenberg-Marquardt step from `state` (t projected onto its
    bounds), the decrease of the linearised cost along it, and its largest |step|;
    `limits` = (t_low, t_high, tol, max_iter)."""
    theta, _, jtj, jtf, damping, _, _, _ = state
    x0, x1, x2, _ = solve3(damped(jtj, damping), jtf, free)
    t_trial = minimum(maximum(theta[2] + x2, limits[0]), limits[1])
    x2 = t_trial - theta[2]
    trial = (theta[0] + x0, theta[1] + x1, t_trial)
    quad = (
        jtj[0] * x0 * x0
        + jtj[3] * x1 * x1
        + jtj[5] * x2 * x2
        + 2.0 * (jtj[1] * x0 * x1 + jtj[2] * x0 * x2 + jtj[4] * x1 * x2)
    )
    predicted = 0.0 - (2.0 * (x0 * jtf[0] + x1 * jtf[1] + x2 * jtf[2]) + quad)
    return trial, predicted, maximum(maximum(abs(x0), abs(x1)), abs(x2))


def tried(state, trial, equations, free, limits):
    """The state after the trial `trial` = `trial_point`'s three values, `equations` =
    `normal_equations` at the trial point."""
    theta, cost, jtj, jtf, damping, growth, status, iterations = state
    trial, predicted, step_size = trial
    cost_t, jtj_t, jtf_t = equations
    n0, n1, n2, regular = solve3(jtj_t, jtf_t, free)
    newton_size = where(regular, maximum(maximum(abs(n0), abs(n1)), abs(n2)), INFINITY + 0.0 * n0)
    newton_decrease = 0.0 - (n0 * jtf_t[0] + n1 * jtf_t[1] + n2 * jtf_t[2])
    accept = accepted(cost, cost_t) & (cost_t == cost_t)
    ratio = gain_ratio(cost, cost_t, predicted)
    done = converged(step_size, predicted, cost, newton_size, accept, damping, limits[2])
    damping_next, growth_next = next_damping(
        accept, ratio, damping, growth, newton_decrease, cost_t
    )
    iterations_next = iterations + 1
    status_next = where(done, CONVERGED, where(iterations_next >= limits[3], MAX_ITER, status))
    return (
        (
            where(accept, trial[0], theta[0]),
            where(accept, trial[1], theta[1]),
            where(accept, trial[2], theta[2]),
        ),
        where(accept, cost_t, cost),
        (
            where(accept, jtj_t[0], jtj[0]),
            where(accept, jtj_t[1], jtj[1]),
            where(accept, jtj_t[2], jtj[2]),
            where(accept, jtj_t[3], jtj[3]),
            where(accept, jtj_t[4], jtj[4]),
            where(accept, jtj_t[5], jtj[5]),
        ),
        (
            where(accept, jtf_t[0], jtf[0]),
            where(accept, jtf_t[1], jtf[1]),
            where(accept, jtf_t[2], jtf[2]),
        ),
        damping_next,
        growth_next,
        status_next,
        iterations_next,
    )
