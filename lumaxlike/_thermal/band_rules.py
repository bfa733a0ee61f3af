"""The thermal correction of one band at a known temperature, written once for both
solvers (the dialect of `_model/equations.py`; retargeted by `_backends` with the
model's `reflectance_and_slope` and `invert`'s one-parameter rules bound).

With T fixed, each band's w is one unknown and one equation,

    g(w) = r(w) + eps(w) E - r_obs = 0,    E = B_lambda(T) d^2 / F_sun  [1/sr],

`invert`'s problem (`_inverse/albedo/rules.py`) with the emission added: the same
start (the pixel's Hermite table of w(r), here at the emission-subtracted r_obs -
eps(w_s) E, w_s the table's w at r_obs), the same damped Newton step (`propose`) and
acceptance, damping and convergence (`update`). E is computed once per band (one Planck
evaluation), the pixel's terms and table once per pixel (the drivers). With E = 0
the problem, start and steps are `invert`'s.

The start is three rules (`plain_emissivity`, `starting_point`, `start_state`) and a
Newton trial two, `band_trial` (the trial point) and `band_accept` (given eps and its
slope there), so that the numba kernel can evaluate the series of a block's bands in
loops of their own (short loops overlap the series' long chains of dependent
operations). JAX's solver runs the start's rules and `invert`'s `propose` and `update`
through the shared Levenberg-Marquardt's one-parameter case.

State (a tuple): w, g, g', eps (at w), damping, growth, status
(SOLVING, CONVERGED, MAX_ITER), iterations. The emission removed is eps E, eps the
state's (no further evaluation of the series).
"""

from .._inverse.albedo.rules import propose, starting_albedo, update
from .._model._scalar_math import isfinite, where
from .._model.equations import reflectance_and_slope
from .._model.thermal import emissivity_and_slope

__all__ = [
    "emission_factor",
    "band_residual",
    "plain_emissivity",
    "starting_point",
    "start_state",
    "band_trial",
    "band_accept",
]

SOLVING = -1
CONVERGED = 0
MAX_ITER = 1
# E below this fraction of r_obs is dropped (E = 0: `invert`'s problem exactly): it moves
# r and w by less than 1e-12 relative, below the solvers' step tolerance and far below
# any noise (at 400 K, the bands short of ~1 um)
NEGLIGIBLE_EMISSION = 1e-12


def emission_factor(factor, observed):
    """E [1/sr] as the band's problem takes it: 0 where negligible (`NEGLIGIBLE_EMISSION`)."""
    return where(factor < NEGLIGIBLE_EMISSION * abs(observed), 0.0 * factor, factor)


def band_residual(w, observed, emission_factor, terms, eps_and_slope):
    """(g, dg/dw) [1/sr] at w, given (eps, d eps/dw) at w."""
    r, dr = reflectance_and_slope(w, terms)
    eps, deps = eps_and_slope
    return r + eps * emission_factor - observed, dr + deps * emission_factor


def plain_emissivity(observed, table, coefficients, bounds):
    """eps at the table's w at r_obs (the emission not removed); bounds = (w_lower,
    w_upper)."""
    w_plain = starting_albedo(observed, table, bounds[0], bounds[1])
    return emissivity_and_slope(w_plain, coefficients)[0]


def starting_point(observed, emission_factor, table, eps_plain, bounds):
    """The start w_s: the table's w at r_obs - eps E, eps from `plain_emissivity`."""
    return starting_albedo(observed - eps_plain * emission_factor, table, bounds[0], bounds[1])


def start_state(w, eps_and_slope, observed, emission_factor, terms):
    """The state at the start w_s, given (eps, d eps/dw) at w_s."""
    g, slope = band_residual(w, observed, emission_factor, terms, eps_and_slope)
    zero = 0.0 * g
    # a non-finite r_obs is not solved (MAX_ITER at once, not after max_iter steps)
    status = where(isfinite(observed), where(g == 0.0, CONVERGED, SOLVING), MAX_ITER)
    return w, g, slope, eps_and_slope[0], zero, 2.0 + zero, status, 0


def band_trial(state, limits):
    """The damped Newton trial point (`propose`); limits = (w_lower, w_upper, ...)."""
    w, g, slope, _, damping, _, _, _ = state
    return propose(w, g, slope, damping, limits[0], limits[1])


def band_accept(state, trial, eps_and_slope, observed, emission_factor, terms, limits):
    """The state after the trial (`update`), given (eps, d eps/dw) at the trial; limits =
    (w_lower, w_upper, tol, max_iter)."""
    w, g, slope, eps, damping, growth, status, iterations = state
    g_trial, slope_trial = band_residual(trial, observed, emission_factor, terms, eps_and_slope)
    w_new, g, slope, damping, growth, done = update(
        w, g, slope, damping, growth, trial, g_trial, slope_trial, limits[2]
    )
    # the trial's eps where it was accepted (w_new == trial: where a rejected trial equals
    # w, so are their eps)
    eps = where(w_new == trial, eps_and_slope[0], eps)
    iterations = iterations + 1
    status = where(done, CONVERGED, where(iterations >= limits[3], MAX_ITER, status))
    return w_new, g, slope, eps, damping, growth, status, iterations
