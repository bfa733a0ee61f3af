"""Profile-likelihood intervals of shared parameters (`fit`'s ``profile=``).

The Laplace sigma of h_S is too narrow: measured on 200 pixels (4 bands, 12-14
observations, noise 1e-3, roughness and h_S shared), +-2 sigma covered the truth in 87 %
of the pixels (94 % once the probe start finds the lower minima), and (estimate - truth)
/ sigma spread 2.1 where it should be 1: h_S acts on the few observations near
opposition, and its chi^2 is far from a parabola. A profile-likelihood interval follows
the chi^2 itself: its ends are the values h where the minimum of chi^2 over every other
parameter, with the parameter held at h, is `PROFILE_DELTA` above the fit's minimum.

Each end is found per problem by `PROFILE_STEPS` refits of the whole fit (all its
problems at once; same solver, masks, other priors) with the parameter held at a trial
h by a Gaussian prior of sigma `HOLD` x its Laplace sigma (the held fit's data chi^2 is
its cost less that prior's row). The first trial is the Laplace end, value +- 2 sigma;
each next one puts the parabola through the last trial's rise, h = value +- |h - value|
2 / sqrt(rise) (clipped to the bounds). An end is kept where its rise is within
`SETTLED` of 4, or where it reached a bound with a rise below 4 (the interval then
reaches the bound); else it is NaN (the chi^2 does not settle: too flat or not one
valley). It needs `refl_sigma` (the cost is then chi^2).
"""

from __future__ import annotations

import numpy as np

from ..._status import Status

__all__ = ["HOLD", "PROFILE_DELTA", "PROFILE_STEPS", "SETTLED", "profile_ends"]

# chi^2 rise at the interval's ends: the 2-sigma (95.4 %) interval of one parameter
PROFILE_DELTA = 4.0
# refits per end
PROFILE_STEPS = 5
# the holding prior's sigma as a fraction of the Laplace sigma: it moves the held value
# by HOLD^2 of a sigma and adds a rise of HOLD^2 (1e-8) of chi^2
HOLD = 1e-4
# an end's rise within this of PROFILE_DELTA is settled (3.5-4.5: 1.87-2.12 sigma)
SETTLED = 0.5
# or the bracket around it narrower than this fraction of its distance to the value
NARROW = 0.05
# held fits that converged (the hold can leave H singular to working precision)
HELD_SOLVED = (Status.CONVERGED, Status.MULTIMODAL, Status.UNDETERMINED)


def profile_ends(fit_held, result, name, lower, upper):
    """(problem shape + (2,)) the profile interval of the shared parameter `name`
    (module docstring); fit_held(start, prior) is the fit with every other argument
    bound (its priors with `prior` laid over them), result its fit, lower, upper the
    parameter's bounds."""
    value, sigma = result[name], result.sigma(name)
    solved = np.isin(result.status, [Status.CONVERGED, Status.MULTIMODAL]) & np.isfinite(sigma)
    ends = np.full(value.shape + (2,), np.nan)
    start = {n: np.nan_to_num(result[n], nan=_middle(result[n])) for n in result.free}
    middle = np.clip(_middle(value), lower, upper)
    for k, side in enumerate((-1.0, 1.0)):
        bound = lower if side < 0 else upper
        inner = (np.where(solved, value, middle), np.zeros(value.shape))  # (h, sqrt(rise))
        outer = (np.full(value.shape, np.nan), np.full(value.shape, np.nan))
        trial = np.clip(value + side * 2.0 * sigma, lower, upper)
        for _ in range(PROFILE_STEPS):
            trial = np.where(solved, trial, middle)
            hold = np.where(solved, HOLD * sigma, 1.0)
            held = fit_held({**start, name: trial}, {name: (trial, hold)})
            held_row = ((held[name] - trial) / hold) ** 2
            rise = np.maximum(held.cost - held_row - result.cost, 0.0)
            fine = solved & np.isin(held.status, HELD_SOLVED)
            settled = np.abs(rise - PROFILE_DELTA) <= SETTLED
            bounded = (trial == bound) & (rise < PROFILE_DELTA)
            found = fine & (settled | bounded) & np.isnan(ends[..., k])
            ends[..., k] = np.where(found, trial, ends[..., k])
            # a held fit at max_iter bounds the profile from above: it brackets too
            stepped = solved & np.isin(held.status, HELD_SOLVED + (Status.MAX_ITER,))
            inner, outer = _bracket(inner, outer, trial, np.sqrt(rise), stepped)
            trial = np.clip(_next_trial(inner, outer, value), lower, upper)
        narrow = np.abs(outer[0] - inner[0]) <= NARROW * np.abs(trial - value)
        ends[..., k] = np.where(np.isnan(ends[..., k]) & narrow, trial, ends[..., k])
    return ends


def _bracket(inner, outer, trial, root_rise, fine):
    """The bracket (inner: rise below PROFILE_DELTA, outer: above; each (h, sqrt(rise)))
    updated with a trial; the end kept a second time has its distance to the target
    halved (the Illinois rule: regula falsi does not stall on one side)."""
    target = np.sqrt(PROFILE_DELTA)
    below = fine & (root_rise < target)
    above = fine & ~below
    (h_in, r_in), (h_out, r_out) = inner, outer
    r_out = np.where(below & np.isfinite(h_out), target + 0.5 * (r_out - target), r_out)
    r_in = np.where(above, target - 0.5 * (target - r_in), r_in)
    inner = (np.where(below, trial, h_in), np.where(below, root_rise, r_in))
    outer = (np.where(above, trial, h_out), np.where(above, root_rise, r_out))
    return inner, outer


def _next_trial(inner, outer, value):
    """Where sqrt(rise), linear in h between the bracket's ends, reaches
    sqrt(PROFILE_DELTA); where no outer end is known yet, along the line from the
    fitted `value` (sqrt(rise) 0) through the inner end, at most 4 times as far."""
    (h_in, r_in), (h_out, r_out) = inner, outer
    target = np.sqrt(PROFILE_DELTA)
    with np.errstate(invalid="ignore", divide="ignore"):
        between = h_in + (target - r_in) * (h_out - h_in) / (r_out - r_in)
        reach = np.minimum((target / r_in) ** 2, 4.0)  # sqrt(rise) flattens: overshoot
        beyond = value + np.where(np.isfinite(reach), reach, 4.0) * (h_in - value)
    return np.where(np.isnan(h_out), beyond, between)


def _middle(values):
    finite = np.asarray(values)[np.isfinite(values)]
    return float(np.median(finite)) if finite.size else 0.5
