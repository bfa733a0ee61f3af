"""Modes the chains may have missed: optima of the posterior near a bound.

HMC's chains start from `fit`'s solution and stay in its mode. With flat priors a Hapke
posterior can have a second mode at a bound, away from the fit's: b -> 1, where both
Henyey-Greenstein lobes narrow onto g = 0 and 180 deg, the single-scattering term
vanishes at the observed phase angles and a larger w fits the data through multiple
scattering alone (c then barely matters). On such problems (w, b, c free, 5-16
observations, refl_sigma 1e-3, tests/test_sample.py) the chains never leave the fit's
mode, agree with each other (R-hat 1.00) and miss 1-7 % of the posterior's mass at
b > 0.9.

The probe: `fit` again, with the same free parameters and data, started near each bound
of each bounded parameter but w (``PROBE_START`` of the interval inside it). Where a
probe ends at an optimum whose log posterior is within `LOG_DENSITY_GAP` of the warm
start's and outside the box the draws covered (widened by `VISIT_MARGIN` of its width),
the chains missed a mode: the problem is MULTIMODAL. Measured on the problems above: a
probe's log posterior 0.1-0.8 below (or above) the fit's where the quadrature gives
1-7 % of the mass at b > 0.9, 6.9 below where it gives 1e-4, 20 below where none.

A mode the chains visited rarely (`rarely_visited`): a probe's optimum within the gap
and away from the draws' bulk (outside their central 95 % interval in some parameter),
in a region the chains entered too seldom for its mass to be known. The region: the
draws beyond the midpoint between the warm start and the probe's optimum, along the
parameter in which they are farthest apart in units of the draws' spread; the measure:
the ESS of the indicator "draw in the region" (blackjax's estimator, on the host), which
must reach `min_ess` as every other ESS of a CONVERGED problem must (its mass is then
known to sqrt(p (1 - p) / min_ess)). Issue 55: b = 0.08, flat priors, 14 observations,
where quadrature puts 3.1 % of the mass at b > 0.6, one replica in four ended CONVERGED
with 0.6 % there (a 97.5 % quantile of 0.39 against 0.80): its chains had entered the
mode at b -> 1 a few times, so its optimum lay inside the box of the draws.
"""

from __future__ import annotations

import numpy as np

from .._status import Status

__all__ = [
    "LOG_DENSITY_GAP",
    "rarely_visited",
    "PROBE_START",
    "VISIT_MARGIN",
    "log_posterior",
    "missed_mode",
    "probe_starts",
]

# Where a probe starts inside a bound, relative to the interval.
PROBE_START = 1e-3
# A probe's optimum counts where its log posterior is at most this below the fit's
# (exp(-5): a mode of the fit's own volume would hold 0.7 % of the mass).
LOG_DENSITY_GAP = 5.0
# The box of the draws is widened by this fraction of its width on each side.
VISIT_MARGIN = 0.1
# Statuses whose values are a point of the posterior.
_SOLVED = (Status.CONVERGED, Status.MAX_ITER, Status.UNDETERMINED)


def probe_starts(free, lower, upper) -> list[dict]:
    """The `start` of each probe fit: {name: value} near each finite bound of each
    parameter but w with both bounds finite. free (p,) names; lower, upper (p,)."""
    starts = []
    for name, lo, hi in zip(free, np.asarray(lower, float), np.asarray(upper, float)):
        if name == "w" or not (np.isfinite(lo) and np.isfinite(hi)):
            continue
        inside = PROBE_START * (hi - lo)
        starts += [{name: lo + inside}, {name: hi - inside}]
    return starts


def log_posterior(result, inv_var):
    """The log posterior (up to its constant) at a `fit` result's values, shaped like
    its status: -cost / 2 of a `JointFitResult` (priors included), else
    -residual_norm^2 / (2 refl_sigma^2); inv_var 1/refl_sigma^2 (bands,)."""
    if hasattr(result, "cost"):
        return -0.5 * result.cost
    return -0.5 * result.residual_norm**2 * inv_var


def missed_mode(best, probes, minimum, maximum):
    """Where a probe found a mode the chains did not visit (module docstring).

    Args:
        best: (problems...) the warm start's log posterior (`log_posterior`);
        probes: a list of (values (problems..., p), log posterior, status
            (problems...)) of the probe fits; minimum, maximum (problems..., p): the
            draws' extent.
    Returns:
        bool (problems...).
    """
    width = VISIT_MARGIN * (maximum - minimum)
    missed = np.zeros(best.shape, bool)
    with np.errstate(invalid="ignore"):
        for values, level, status in probes:
            outside = np.any((values < minimum - width) | (values > maximum + width), axis=-1)
            solved = np.isin(status, np.array(_SOLVED, np.int8))
            missed |= solved & (level >= best - LOG_DENSITY_GAP) & outside
    return missed


def rarely_visited(best, probes, fit_values, draws, min_ess, indicator_ess):
    """Where a probe found a mode that the chains entered too seldom (module docstring).

    Args:
        best: (problems,) the warm start's log posterior; probes: as `missed_mode`'s,
            over the same (problems,); fit_values (problems, p): the warm start;
        draws (problems, chains, draws, p); min_ess: the ESS a CONVERGED problem needs;
        indicator_ess: (problems, chains, draws) bool -> (problems,) ESS of each row.
    Returns:
        bool (problems,).
    """
    low, high = np.quantile(draws, [0.025, 0.975], axis=(1, 2))  # (problems, p)
    spread = np.std(draws, axis=(1, 2))
    flagged = np.zeros(best.shape, bool)
    rows = np.arange(best.shape[0])
    with np.errstate(invalid="ignore", divide="ignore"):
        for values, level, status in probes:
            away = np.any((values < low) | (values > high), axis=-1)
            solved = np.isin(status, np.array(_SOLVED, np.int8))
            candidate = solved & (level >= best - LOG_DENSITY_GAP) & away
            if not candidate.any():
                continue
            distance = np.where(spread > 0, np.abs(values - fit_values) / spread, 0.0)
            axis = np.argmax(np.nan_to_num(distance, nan=0.0), axis=-1)
            toward = values[rows, axis]
            middle = 0.5 * (toward + fit_values[rows, axis])
            direction = np.sign(toward - fit_values[rows, axis])
            along = np.take_along_axis(draws, axis[:, None, None, None], axis=-1)[..., 0]
            inside = direction[:, None, None] * (along - middle[:, None, None]) > 0
            ess = indicator_ess(inside)
            flagged |= candidate & ~(ess >= min_ess)  # never entered: NaN, flagged too
    return flagged
