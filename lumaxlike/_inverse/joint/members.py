"""A regional fit's members checked against their region (`regional_fit.fit_regional`).

A region's values are fitted to all its pixels at once, so one pixel stuck in another
minimum of its own parameters drags them: measured on a noise-free scene (6 bands, 16
observations, roughness regional), one pixel at a cost of 7.8e-4 against 1e-7 pulled its
region's roughness from 30 to 30.29 deg and the other 19 pixels 2e-3 off in w. So after
the regions' fit:

1. Suspects (`far_above`): a pixel whose cost is above the chi^2 quantile 1 - `P_SUSPECT`
   of its degrees of freedom (observations - its own parameters), the cost scaled by the
   region's noise variance (`noise_variance`): 1 with refl_sigma (the cost is chi^2),
   else the median over the region's pixels of cost / degrees of freedom, at least
   (sqrt(tol) median |r|)^2 (noise-free data: the rounding of a converged fit).
2. Each suspect's own joint fit (its regional parameters its own), from `OWN_STARTS`
   starts (`restarts.start_points` over its shared and regional parameters); its lowest
   minimum is its new start, and the regions are fitted again from there (the others
   from their solution).
3. Excluded (`excluded`): a suspect whose cost at its region's values is still above its
   own lowest minimum by more than the chi^2 quantile 1 - `P_EXCLUDE` of the regional
   parameters' count (the region's values lie outside the pixel's own 5-sigma region: it
   does not share them), where fewer than half of the region's pixels are so (the region
   is what most of its pixels agree on). Excluded pixels are left out and their regions
   fitted again; they are EXCLUDED with their own fit's values, and so are their regions
   (converged without them).
"""

from __future__ import annotations

import math

import numpy as np
import scipy.stats

__all__ = [
    "OWN_STARTS",
    "P_EXCLUDE",
    "P_SUSPECT",
    "ROUNDS",
    "ROUNDS",
    "excluded",
    "far_above",
    "noise_variance",
]

# A pixel's cost above this chi^2 tail probability is checked by its own fit (1 false
# alarm in 1000 pixels costs 1 restart in 1000).
P_SUSPECT = 1e-3
# The region's values this far into the tail of the pixel's own fit (chi^2 of the
# regional parameters; 24 for one, 5 sigma) are not the pixel's: it is left out.
P_EXCLUDE = 5.7e-7
# Starts of a suspect's own fit: its usual start and 9 grid points (`restarts`).
OWN_STARTS = 10
# Rounds of suspects, own fits and the regions fitted again (a region freed of one
# member's pull can show the next).
ROUNDS = 3


def noise_variance(cost, dof, label, n_regions, floor, weighted):
    """(n_regions,) the residual variance each region's costs are scaled by: 1 where
    `weighted` (refl_sigma given: costs are chi^2), else the median over the region's
    pixels of cost / dof (pixels with dof > 0), at least `floor`."""
    if weighted:
        return np.ones(n_regions)
    variance = np.full(n_regions, floor)
    usable = dof > 0
    ratio = cost[usable] / dof[usable]
    of_region = label[usable]
    order = np.lexsort((ratio, of_region))
    ratio, of_region = ratio[order], of_region[order]
    starts = np.searchsorted(of_region, np.arange(n_regions))
    counts = np.bincount(of_region, minlength=n_regions)
    has = counts > 0
    lower = ratio[starts[has] + (counts[has] - 1) // 2]
    upper = ratio[starts[has] + counts[has] // 2]
    variance[has] = np.maximum(0.5 * (lower + upper), floor)
    return variance


def variance_floor(refl, tol) -> float:
    """The residual variance of a converged fit to noise-free data: (sqrt(tol) median
    |r|)^2 over the finite reflectances `refl`."""
    finite = np.abs(refl[np.isfinite(refl)])
    return (math.sqrt(tol) * float(np.median(finite))) ** 2 if finite.size else 0.0


def far_above(cost, variance, dof, probability):
    """(P,) bool: cost / variance above the chi^2(dof) quantile 1 - probability."""
    with np.errstate(invalid="ignore", divide="ignore"):
        limit = scipy.stats.chi2.isf(probability, np.maximum(dof, 1))
        return (dof > 0) & (cost / variance > limit)


def excluded(cost, own_cost, variance, label, n_regions, n_regional, checked):
    """(P,) bool: the `checked` pixels whose cost at their region's values exceeds their
    own minimum `own_cost` by more than chi^2(n_regional)'s 1 - P_EXCLUDE quantile
    (scaled by `variance` (P,)), in regions where fewer than half the pixels are so."""
    limit = scipy.stats.chi2.isf(P_EXCLUDE, max(n_regional, 1))
    with np.errstate(invalid="ignore", divide="ignore"):
        out = checked & ((cost - own_cost) / variance > limit)
    flagged = np.bincount(label[out], minlength=n_regions)
    members = np.bincount(label, minlength=n_regions)
    return out & (2 * flagged < members)[label]
