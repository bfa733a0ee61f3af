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
"""

from __future__ import annotations

import numpy as np

from .._status import Status

__all__ = [
    "LOG_DENSITY_GAP",
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
