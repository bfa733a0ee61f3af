"""``method="continuum"``: T of each pixel with w linear in wavelength over the window
(Clark et al. 2011's assumption), the emission's significance test, and T's one-sided
95 % upper limit where the data do not bound it (`continuum_fit`)."""

from __future__ import annotations

import numpy as np
from scipy import special

from .._status import Status
from .fit_common import PER_PIXEL, brightness_start, unbounded_limits
from .rules import T_SCALE
from .solvers import solve_thermal
from .upper_limit import UPPER_LIMIT_CHI2, upper_limit

__all__ = ["FALSE_ALARM", "T_NULL", "continuum_fit"]

# The emission's significance test (`_emission_significant`): a pixel's T is CONVERGED
# only where the fit with emission beats the fit without it (T held at T_NULL, where the
# emission in any window short of 3 um is < 1e-15 of r) by more than the rise noise
# alone exceeds with probability FALSE_ALARM (nominal; the measured rate of cold pixels
# called CONVERGED is in docs/thermal.md: T's freedom to pick the noise's best shape
# makes the rate above nominal)
FALSE_ALARM = 3e-4
T_NULL = 100.0 / T_SCALE


def _covariance_tt(jtj: np.ndarray) -> np.ndarray:
    """(J^T J)^-1's (t, t) entry from the 6 entries (pixels, 6); inf where singular."""
    j00, j01, j02, j11, j12, j22 = jtj.T
    c22 = j00 * j11 - j01 * j01
    det = (
        j00 * (j11 * j22 - j12 * j12)
        - j01 * (j01 * j22 - j02 * j12)
        + j02 * (j01 * j12 - j02 * j11)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        value = c22 / det
    return np.where((det > 0) & (value > 0), value, np.inf)


def _window_problems(arrays, observed, w_first, spectral, bounds):
    """The continuum fit's problems over the window (a dict for `solve_thermal`); w_first:
    the start's w at the window's first band (pixels,)."""
    wavelengths, solar, sigma, inside = spectral
    first = np.flatnonzero(inside)[0]
    a0 = np.where(np.isfinite(w_first), np.clip(w_first, 0.01, 0.99), 0.2)
    t0 = brightness_start(observed[:, inside], wavelengths[inside], solar[inside], arrays, bounds)
    problems = dict(arrays)
    problems.update(
        theta=np.stack([a0, 0.0 * a0, t0 / T_SCALE], axis=-1),
        wavelength=wavelengths[inside],
        solar=solar[inside],
        observed=observed[:, inside],
        weight=np.broadcast_to(1.0 / sigma[inside], observed[:, inside].shape),
        reference=wavelengths[first],
    )
    return problems


def _fit_temperature(problems, estimate, bounds, max_sigma, settings):
    """(T [K], its 1-sigma [K], status, the solver's output) of each pixel by the
    continuum fit."""
    t_low, t_high = bounds[0] / T_SCALE, bounds[1] / T_SCALE
    out = solve_thermal(
        settings["params"],
        problems,
        (1.0, 1.0, 1.0),
        (t_low, t_high, settings["tol"], settings["max_iter"]),
        settings["solver"],
    )
    variance = _covariance_tt(out[:, 4:10])
    if estimate:
        variance = variance * out[:, 3] / (problems["observed"].shape[1] - 3)
    t_sigma = np.sqrt(variance) * T_SCALE
    status = np.where(out[:, 10] == 0, Status.CONVERGED, Status.MAX_ITER)
    converged = status == Status.CONVERGED
    on_bound = (out[:, 2] <= t_low) | (out[:, 2] >= t_high)
    status = np.where(on_bound & converged, Status.UNREACHABLE, status)
    # too cold to bound T: its sigma is large, and the cost so flat in T that the fit
    # may also end on the lower bound or take max_iter steps there
    status = np.where(~(t_sigma <= max_sigma), Status.NOT_CONSTRAINED, status)
    return out[:, 2] * T_SCALE, t_sigma, status.astype(np.int8), out


def _profiled_cost(problems, out, active, t, settings):
    """The cost of the pixels `active` (indices into `problems`' and `out`'s rows) with
    t = T / T_SCALE held at `t` and (a, b) fitted from the fit's `out`."""
    bounds = settings["bounds"]
    limits = (bounds[0] / T_SCALE, bounds[1] / T_SCALE, settings["tol"], settings["max_iter"])
    # JAX: every pixel each time (one shape, one compilation; the others' values unused)
    subset = active if settings["solver"] == "numba" else np.arange(len(out))
    fixed = {k: (v[subset] if k in PER_PIXEL else v) for k, v in problems.items()}
    t_all = out[:, 2].copy()
    t_all[active] = t
    fixed["theta"] = np.stack([out[subset, 0], out[subset, 1], t_all[subset]], axis=-1)
    cost = solve_thermal(settings["params"], fixed, (1.0, 1.0, 0.0), limits, settings["solver"])
    return cost[:, 3] if settings["solver"] == "numba" else cost[active, 3]


def _upper_limit(problems, out, estimate, bounds, settings):
    """T's one-sided 95 % upper limit [K] of each pixel (`upper_limit`)."""
    n_bands = problems["observed"].shape[1]
    scale = out[:, 3] / (n_bands - 3) if estimate else np.ones(len(out))
    return upper_limit(
        lambda active, t: _profiled_cost(problems, out, active, t, settings),
        out,
        UPPER_LIMIT_CHI2 * scale,
        _covariance_tt(out[:, 4:10]),
        bounds[1] / T_SCALE,
        problems["wavelength"][-1],
    )


def continuum_fit(arrays, observed, w_first, spectral, estimate, bounds, max_sigma, settings):
    """(T [K], 1-sigma [K], status) by the continuum fit; NOT_CONSTRAINED pixels (T's
    sigma above `max_sigma`, or emission not significant: `_emission_significant`) get
    T's 95 % upper limit and a NaN sigma."""
    problems = _window_problems(arrays, observed, w_first, spectral, bounds)
    inside = spectral[3]
    temp, tsig, status, out = _fit_temperature(problems, estimate, bounds, max_sigma, settings)
    tested = np.flatnonzero(status == Status.CONVERGED)
    if tested.size:
        null = _profiled_cost(problems, out, tested, np.full(tested.size, T_NULL), settings)
        significant = _emission_significant(
            null - out[tested, 3], out[tested, 3], inside.sum() - 3, estimate
        )
        status[tested[~significant]] = Status.NOT_CONSTRAINED
    loose = np.flatnonzero(status == Status.NOT_CONSTRAINED)
    if loose.size:
        subset = {k: (v[loose] if k in PER_PIXEL else v) for k, v in problems.items()}
        temp[loose] = _upper_limit(subset, out[loose], estimate, bounds, settings)
        tsig[loose] = np.nan
    return temp, tsig, unbounded_limits(temp, status, bounds)


def _emission_significant(rise, minimum, dof, estimate):
    """Whether the emission is significant: the cost's rise from the fit to no emission
    (T held at `T_NULL`, the other parameters refitted), a likelihood-ratio statistic,
    above its `FALSE_ALARM` point. With refl_sigma known the rise is chi^2 with 1 degree
    of freedom, halved (T's emission is >= 0: a parameter on its boundary, Chernoff
    1954); with refl_sigma estimated (None) the rise over the residual's variance
    (minimum / dof) is F(1, dof), halved alike: at 9 bands (dof 6) the threshold is
    43.1, 3.7x the known-sigma one (11.8): the price of a variance estimated from 6
    residuals (fewer warm pixels at 350 K pass: docs/thermal.md)."""
    if not estimate:  # P(chi^2_1 > z^2) = 2 P(N(0, 1) > z)
        return rise >= special.ndtri(1.0 - FALSE_ALARM) ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        ratio = np.where(minimum > 0, rise * dof / minimum, np.where(rise > 0, np.inf, 0.0))
    return ratio >= special.stdtrit(dof, 1.0 - FALSE_ALARM) ** 2  # F(1, dof) = t_dof^2
