"""Restarts of a joint `fit` (its ``starts=``): several starts, the lowest minimum kept.

A joint problem (`joint`) can end CONVERGED at a local minimum: measured on 6-band,
16-observation scenes with roughness and h_S shared, one pixel in 20 ended at a cost
1.0 (chi^2) above the global minimum, with h_S 0.144 against 0.014. Each start here is a
whole `fit` (same solver, chunking, masks), started at a different point; per problem
the CONVERGED result of lowest cost is kept, and a problem where another start converged
to a distinct minimum almost as good is MULTIMODAL.

By default a fit with `shared` (no regions) takes two starts (`probe_points`): the usual
one and a probe low in the shared opposition parameters. The starts (`start_points`):
an int n is start 0 (the fit's usual start: `start`, else
`params`) and n - 1 points of a coarse grid over the grid parameters (the shared ones;
with nothing shared, a `prior` fit's free parameters but w): k = ceil((n - 1)^(1/s))
levels per parameter at the cell midpoints lower + (i + 1/2) (upper - lower) / k,
i = 0..k-1, of the parameter's bounds (an infinite bound replaced by `GRID_SPAN`'s end);
of the k^s grid points (first parameter slowest), n - 1 evenly spaced in that order:
all of them where n - 1 = k^s (n = 5 or 10 with two shared parameters). A sequence of
{name: value} mappings is the starts themselves, each laid over `start`.

The choice (`best_of`), per problem: a later start that CONVERGED replaces the kept
one where it is the kept one's minimum and the kept one did not converge, or where its
cost is lower and it is a distinct minimum (a distinct minimum of higher cost never
replaces a kept point that did not converge: that point is lower, and says MAX_ITER): some parameter (in some band) differs by more than `SEPARATION_SIGMAS` of the
kept one's 1-sigma or sqrt(tol), whichever is larger (sqrt(tol) too where the sigma is
unknown). The same minimum reached again never replaces the earlier start, so a
unimodal problem keeps start 0's result bit for bit.

MULTIMODAL (`multimodal`): the kept result is CONVERGED and another start CONVERGED at a
distinct minimum with chi^2 within `CHI2_GAP` of the kept one. With refl_sigma the cost
is chi^2 (priors included: -2 log posterior); without, the cost (a sum of squares) is
divided by the residual variance of the kept fit, cost / (observations - parameters),
the same estimate its covariance uses (noise-free data: any other minimum lies far
outside; no degrees of freedom: never MULTIMODAL).
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from collections.abc import Mapping

import numpy as np

from ..._status import Status
from ..fit.arguments import check_bounds, check_free, check_iterations

__all__ = [
    "CHI2_GAP",
    "GRID_SPAN",
    "SEPARATION_SIGMAS",
    "check_starts",
    "fit_with_starts",
    "run_starts",
]

# A second minimum within this chi^2 of the best is a MULTIMODAL problem: Delta chi^2 = 4
# is the 2-sigma interval of one parameter (95 %), a likelihood ratio exp(-2) = 0.14: the
# data do not reject the second minimum, whose values may be the true ones.
CHI2_GAP = 4.0
# Two minima are distinct where some parameter differs by more than this many of the
# best's 1-sigma (two converged fits of one minimum differ by rounding, far less).
SEPARATION_SIGMAS = 3.0
# The grid's end for a parameter whose bound is infinite by default: h_S, h_C of
# published fits lie within 0.01-0.2, B_S0 within 0-3, porosity K within 1-3.
GRID_SPAN = {"hs": 0.2, "hc": 0.2, "bs0": 3.0, "porosity_k": 3.0}


def check_starts(starts, joint: bool, regional: bool):
    """`starts` as None (one start, today's fit), "probe" (`probe_points`; `fit`'s
    default with `shared`), an int n >= 2 or a list of mappings; ValueError naming it
    where its form is wrong or the fit takes no starts."""
    if starts is None or (_is_int(starts) and starts == 1):
        return None
    if isinstance(starts, str) and starts == "probe" and joint and not regional:
        return starts
    if _is_int(starts):
        if starts < 1:
            raise ValueError(
                f"starts must be a positive int or a sequence of mappings, got {starts}"
            )
        starts = int(starts)
    elif isinstance(starts, (str, bytes, Mapping)) or not hasattr(starts, "__iter__"):
        raise ValueError(
            f"starts must be a positive int or a sequence of {{name: value}} mappings, "
            f"got {type(starts).__name__}"
        )
    else:
        starts = list(starts)
        if not starts or not all(isinstance(one, Mapping) for one in starts):
            raise ValueError("starts must be a non-empty sequence of {name: value} mappings")
    if regional:
        raise ValueError(
            "starts is not supported with regions= and regional= (per-pixel joint fits only)"
        )
    if not joint:
        raise ValueError(
            "starts needs a joint fit: pass shared= or prior= (starts=1 is the plain fit)"
        )
    return starts


def _is_int(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def probe_points(names, lower, upper) -> list[dict]:
    """`fit`'s default starts with `shared` = `names` (bounds lower, upper): the usual
    start and one probe, each shared parameter of `GRID_SPAN` (the opposition widths
    and amplitudes, porosity) at 1/12 of its span above its lower bound (h_S 0.0167),
    the others at their usual start; with none of those shared, the others at 1/4 of
    their bounds. The probe is low in the opposition parameters because that is where
    the local minima measured lie (a pixel at h_S 0.014 stuck at 0.144 from 0.08)."""
    span = {
        name: (lo, GRID_SPAN.get(name, hi) if math.isinf(hi) else hi)
        for name, lo, hi in zip(names, lower, upper)
    }
    opposition = [name for name in names if name in GRID_SPAN]
    chosen, fraction = (opposition, 1.0 / 12.0) if opposition else (list(names), 0.25)
    probe = {}
    for name in chosen:
        lo, hi = span[name]
        if math.isinf(lo) or math.isinf(hi):
            continue
        probe[name] = float(lo + fraction * (hi - lo))
    return [{}, probe] if probe else [{}]


def start_points(starts, names, lower, upper) -> list[dict]:
    """The {name: value} of each start (module docstring); `names` the grid parameters,
    lower, upper (len(names),) their bounds."""
    if not isinstance(starts, int):
        return [dict(one) for one in starts]
    s, count = len(names), starts - 1
    if not s:
        raise ValueError(f"starts={starts} has no parameter to grid (only w is free)")
    k = 1
    while k**s < count:
        k += 1
    levels = []
    for name, lo, hi in zip(names, lower, upper):
        hi = GRID_SPAN.get(name, hi) if math.isinf(hi) else hi
        if math.isinf(lo) or math.isinf(hi):
            raise ValueError(
                f"starts={starts} grids {name!r} over its bounds, which are infinite: "
                f"pass finite bounds[{name!r}] or a sequence of starts"
            )
        levels.append(lo + (np.arange(k) + 0.5) * (hi - lo) / k)
    grid = np.stack(np.meshgrid(*levels, indexing="ij"), axis=-1).reshape(-1, s)
    chosen = np.round(np.linspace(0, k**s - 1, count)).astype(int)
    return [{}] + [dict(zip(names, map(float, grid[i]))) for i in chosen]


def fit_with_starts(fit_once, points, start, tol, weighted):
    """Every start a `fit_once(start=...)` (a `JointFitResult`), then per problem the best
    (`best_of`) with MULTIMODAL marked (`multimodal`)."""
    results = [fit_once(start={**dict(start or {}), **point}) for point in points]
    chosen = best_of(results, tol)
    fields = {
        name: _pick(chosen, [getattr(r, name) for r in results])
        for name in (
            "status",
            "iterations",
            "cost",
            "covariance_bands",
            "covariance_shared",
            "covariance_cross",
        )
    }
    for name in ("values", "dfs", "at_bound"):
        fields[name] = {
            key: _pick(chosen, [getattr(r, name)[key] for r in results])
            for key in getattr(results[0], name)
        }
    best = dataclasses.replace(results[0], **fields)
    best.status[multimodal(best, results, tol, weighted)] = Status.MULTIMODAL
    return best


def _pick(chosen, arrays):
    """The array of start chosen[problem] for every problem (leading axes: problem shape)."""
    out = arrays[0].copy()
    for k, array in enumerate(arrays[1:], 1):
        mask = (chosen == k).reshape(chosen.shape + (1,) * (array.ndim - chosen.ndim))
        out = np.where(mask, array, out)
    return out


def best_of(results, tol):
    """(problem shape) int: the start kept for every problem (module docstring)."""
    chosen = np.zeros(results[0].status.shape, int)
    for k, result in enumerate(results[1:], 1):
        kept_converged = _pick(chosen, [r.status for r in results]) == Status.CONVERGED
        values = {n: _pick(chosen, [r.values[n] for r in results]) for n in result.free}
        sigmas = {n: _pick(chosen, [r.sigma(n) for r in results]) for n in result.free}
        lower = result.cost < _pick(chosen, [r.cost for r in results])
        distinct = _distinct(result, values, sigmas, tol)
        # the kept point's own minimum converged, or a lower one (a distinct minimum
        # above a kept point that did not converge is no better: it stays)
        better = np.where(distinct, lower, ~kept_converged)
        chosen[(result.status == Status.CONVERGED) & better] = k
    return chosen


def _distinct(other, values, sigmas, tol):
    """(problem shape) bool: `other`'s values differ from `values` ({name: array}) beyond
    SEPARATION_SIGMAS of `sigmas` or sqrt(tol), in some parameter and band."""
    apart = np.zeros(other.status.shape, bool)
    for name in other.free:
        scale = np.fmax(SEPARATION_SIGMAS * sigmas[name], math.sqrt(tol))
        with np.errstate(invalid="ignore"):
            far = np.abs(other.values[name] - values[name]) > scale
        apart |= np.any(far, axis=tuple(range(apart.ndim, far.ndim)))
    return apart


def multimodal(best, results, tol, weighted):
    """(problem shape) bool: `best` CONVERGED and another start CONVERGED at a distinct
    minimum within CHI2_GAP of it (module docstring). weighted: refl_sigma was given."""
    scale = np.ones(best.cost.shape) if weighted else _residual_variance(best)
    sigmas = {name: best.sigma(name) for name in best.free}
    found = np.zeros(best.status.shape, bool)
    for result in results:
        with np.errstate(invalid="ignore", divide="ignore"):
            near = (result.cost - best.cost) / scale < CHI2_GAP
        near &= result.status == Status.CONVERGED
        found |= near & _distinct(result, best.values, sigmas, tol)
    return found & (best.status == Status.CONVERGED)


def _residual_variance(best):
    """cost / (observations - parameters) of every problem (inf without degrees of freedom)."""
    n_band_free = len(best.free) - len(best.shared)
    observations, n_parameters = best.observations, n_band_free
    if best.shared:  # a problem is a pixel with all its bands
        observations = observations.sum(axis=-1)
        n_parameters = best.observations.shape[-1] * n_band_free + len(best.shared)
    dof = observations - n_parameters
    return np.where(dof > 0, best.cost / np.maximum(dof, 1), np.inf)


def run_starts(
    fit_once, starts, refl, params, free, bounds, shared, start, max_iter, tol, weighted
):
    """`fit`'s `starts`: the start points of the grid parameters, then `fit_with_starts`.
    fit_once(start) is `fit` with every other argument bound; starts as `check_starts`."""
    from ..fit.arguments import check_shared

    dtype = np.float32 if np.asarray(refl).dtype == np.float32 else np.float64
    _, tol = check_iterations(max_iter, tol, dtype)
    free = check_free(free, params)
    names = check_shared(shared, free) or tuple(name for name in free if name != "w")
    lower, upper = check_bounds(bounds, names, dtype)
    if starts == "probe":
        points = probe_points(names, lower, upper)
        if len(points) == 1:  # nothing to probe: the plain fit
            return fit_once(start)
    else:
        points = start_points(starts, names, lower, upper)
    for i, point in enumerate(points):
        for name in point:
            if name not in free:
                raise ValueError(f"starts[{i}] names {name!r}, which is not in free={free!r}")
    return fit_with_starts(fit_once, points, start, tol, weighted)
