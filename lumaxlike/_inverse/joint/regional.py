"""Regional parameters: one value per region for all its pixels and bands (`fit`'s
``regions=`` and ``regional=``), solved jointly with every pixel's own parameters.

A region's problem has the per-band parameters of every band of every pixel in it, each
pixel's shared parameters, and the regional ones. Its normal equations nest the arrow of
`schur` twice: per pixel, the bands' blocks and the pixel's shared block, bordered by the
regional block coupling all the region's pixels. The damped step eliminates, per pixel,
first its bands (level 1) and then its shared parameters (level 2), leaving an r x r
reduced system per pixel that is summed over the region's pixels:

    M = sum_i (S_rr,i - S_rs,i S_ss,i^-1 S_sr,i) + damping + prior,

solved for the regional step; the pixels' steps follow by back-substitution. So memory
and work are linear in the region's pixels (no dense region-sized matrix is formed), and
the reduced system is accumulated over chunks of pixels. The damping, acceptance and
convergence are `lm_rules`', per region (one damping for the whole region's problem,
Marquardt's diagonal with the floor relative to the largest diagonal entry of the
region's H). The model's blocks at a point come from the joint solvers themselves (the
numba or JAX kernel of `joint` run for 0 steps, the regional parameters appended to the
pixel's shared ones), so both solvers' physics and derivatives are the same as in a
per-pixel joint fit; the reduction and the steps are NumPy, the same for both.

Memory: besides the inputs, the arrow blocks of every pixel (bands x p x (p + s + r)
values per pixel, the size of the covariance the result returns) and, per region, r x r.
"""

from __future__ import annotations

import numpy as np

from ..._model._backends import retarget_to_numpy
from ..._status import Status
from .. import lm_rules
from .covariance import _positive_definite, arrow_covariance

__all__ = ["solve_regions"]

_lm = retarget_to_numpy(lm_rules)  # float64 NumPy, whatever JAX's x64 flag


def _np(function):
    def call(*args):
        result = function(*args)
        return (
            tuple(np.asarray(r) for r in result)
            if isinstance(result, tuple)
            else np.asarray(result)
        )

    return call


_pinned, _damped_diagonal = _np(_lm.pinned), _np(_lm.damped_diagonal)
_accepted, _converged = _np(_lm.accepted), _np(_lm.converged)
_gain_ratio, _next_damping = _np(_lm.gain_ratio), _np(_lm.next_damping)


def _solve_pd(matrix, rhs):
    """Solve symmetric positive definite (..., m, m) systems for (..., m, k) right-hand
    sides; returns (solution, ok), solution 0 where a matrix is not positive definite."""
    m = matrix.shape[-1]
    ok = _positive_definite(matrix) if m else np.ones(matrix.shape[:-2], bool)
    safe = np.where(ok[..., None, None], matrix, np.eye(m))
    solution = np.linalg.solve(safe, rhs) if m else rhs
    return np.where(ok[..., None, None], solution, 0.0), ok


def _step(state, label, n_regions, bounds, damping, prior):
    """The damped step of every region (two-level Schur complement); see the module doc.

    state: dict of xb (P, B, p), xs (P, s), xr (R, r) and the blocks a (P, B, p, p),
    c (P, B, p, s + r), d (P, s + r, s + r), gb (P, B, p), g (P, s + r) of the pixels in
    regions (label (P,) in 0..R-1). Returns (step_b, step_s, step_r, solvable (R,)).
    """
    xb, xs, xr = state["xb"], state["xs"], state["xr"]
    a, c, d, gb, g = state["a"], state["c"], state["d"], state["gb"], state["g"]
    (lower_b, upper_b), (lower_s, upper_s), (lower_r, upper_r) = bounds
    prior_mean, prior_weight = prior
    n_pixels, n_bands, p = xb.shape
    s, r = xs.shape[1], xr.shape[1]
    h_rr, g_r, largest = _regional_rows(state, label, n_regions, prior)
    held_b = _pinned(xb, lower_b, upper_b, gb)
    held_s = _pinned(xs, lower_s, upper_s, g[:, :s])
    held_r = _pinned(xr, lower_r, upper_r, g_r)
    held_sr = np.concatenate([held_s, held_r[label]], axis=1)  # (P, s + r)
    pixel_damping, pixel_top = damping[label], largest[label]
    # level 1: the bands
    a_damped = np.where(held_b[..., :, None] | held_b[..., None, :], 0.0, a)
    diagonal = _damped_diagonal(
        np.diagonal(a, axis1=-2, axis2=-1),
        pixel_top[:, None, None],
        pixel_damping[:, None, None],
    )
    a_damped[..., range(p), range(p)] = np.where(held_b, 1.0, diagonal)
    c_masked = np.where(held_b[..., :, None] | held_sr[:, None, None, :], 0.0, c)
    gb_masked = np.where(held_b, 0.0, gb)
    solved, ok_bands = _solve_pd(
        a_damped, np.concatenate([gb_masked[..., None], c_masked], axis=-1)
    )
    y_vector, y_blocks = solved[..., 0], solved[..., 1:]
    d_masked = np.where(held_sr[:, :, None] | held_sr[:, None, :], 0.0, d)
    if s:
        diagonal = _damped_diagonal(
            np.diagonal(d[:, :s, :s], axis1=-2, axis2=-1),
            pixel_top[:, None],
            pixel_damping[:, None],
        )
        d_masked[:, range(s), range(s)] = np.where(held_s, 1.0, diagonal)
    if r:  # the regional diagonal is damped once, for the region, below
        d_masked[:, range(s, s + r), range(s, s + r)] = np.where(
            held_r[label], 0.0, d[:, range(s, s + r), range(s, s + r)]
        )
    schur = d_masked - np.einsum("nbpq,nbpt->nqt", c_masked, y_blocks)
    rhs = np.where(held_sr, 0.0, g) - np.einsum("nbpq,nbp->nq", c_masked, y_vector)
    # level 2: the pixel's shared parameters
    z_all, ok_shared = _solve_pd(
        schur[:, :s, :s], np.concatenate([rhs[:, :s, None], schur[:, :s, s:]], axis=-1)
    )
    z_vector, z_blocks = z_all[..., 0], z_all[..., 1:]  # (P, s), (P, s, r)
    reduced = schur[:, s:, s:] - np.einsum("nqr,nqt->nrt", schur[:, :s, s:], z_blocks)
    reduced_rhs = rhs[:, s:] - np.einsum("nqr,nq->nr", schur[:, :s, s:], z_vector)
    pixel_ok = np.all(ok_bands, axis=-1) & ok_shared
    solvable = np.ones(n_regions, bool)
    np.logical_and.at(solvable, label, pixel_ok)
    # the region: sum over its pixels, prior and damping
    m = np.zeros((n_regions, r, r))
    np.add.at(m, label, reduced)
    m_rhs = np.zeros((n_regions, r))
    np.add.at(m_rhs, label, reduced_rhs)
    m_rhs += prior_weight * np.where(prior_weight > 0.0, (xr - prior_mean) * prior_weight, 0.0)
    m_rhs = np.where(held_r, 0.0, m_rhs)
    m[:, range(r), range(r)] += prior_weight**2
    m = np.where(held_r[:, :, None] | held_r[:, None, :], 0.0, m + 0.0)
    if r:
        region_diagonal = np.diagonal(h_rr, axis1=-2, axis2=-1)
        extra = (
            _damped_diagonal(region_diagonal, largest[:, None], damping[:, None]) - region_diagonal
        )
        m[:, range(r), range(r)] = np.where(held_r, 1.0, m[:, range(r), range(r)] + extra)
    step_r, ok_regions = _solve_pd(m, -m_rhs[..., None])
    step_r = step_r[..., 0]
    solvable &= ok_regions
    pixel_step_r = step_r[label]
    step_s = -(z_vector + np.einsum("nqr,nr->nq", z_blocks, pixel_step_r))
    step_sr = np.concatenate([step_s, pixel_step_r], axis=1)
    step_b = -(y_vector + np.einsum("nbpq,nq->nbp", y_blocks, step_sr))
    fine = solvable[label]
    return (
        np.where(fine[:, None, None], step_b, 0.0),
        np.where(fine[:, None], step_s, 0.0),
        np.where(solvable[:, None], step_r, 0.0),
        solvable,
        reduced,
    )


def _regional_rows(state, label, n_regions, prior):
    """`_step`'s regional rows of H (R, r, r) and g (R, r): the sums over each region's
    pixels, plus the prior; and each region's largest diagonal entry of H (R,), the
    damping's scale."""
    xs, xr = state["xs"], state["xr"]
    a, d, g = state["a"], state["d"], state["g"]
    prior_mean, prior_weight = prior
    s, r = xs.shape[1], xr.shape[1]
    h_rr = np.zeros((n_regions, r, r))
    np.add.at(h_rr, label, d[:, s:, s:])
    h_rr[:, range(r), range(r)] += prior_weight**2
    g_r = np.zeros((n_regions, r))
    np.add.at(g_r, label, g[:, s:])
    g_r += prior_weight * np.where(prior_weight > 0.0, (xr - prior_mean) * prior_weight, 0.0)
    largest = np.zeros(n_regions)
    pixel_largest = np.max(np.diagonal(a, axis1=-2, axis2=-1), axis=(-2, -1))
    if s:
        pixel_largest = np.maximum(
            pixel_largest,
            np.max(np.diagonal(d[:, :s, :s], axis1=-2, axis2=-1), axis=-1),
        )
    np.maximum.at(largest, label, pixel_largest)
    if r:
        largest = np.maximum(largest, np.max(np.diagonal(h_rr, axis1=-2, axis2=-1), axis=-1))
    return h_rr, g_r, largest


def _region_sum(values, label, n_regions):
    total = np.zeros(n_regions)
    np.add.at(total, label, values)
    return total


def solve_regions(
    evaluate, label, n_regions, start_b, start_s, start_r, bounds, prior, max_iter, tol
):
    """Levenberg-Marquardt over every region's whole problem at once.

    Args:
        evaluate: (xb, xs_and_r) -> dict of cost (P,), a, c, d, gb, g (the pixels' arrow
            blocks with the regional parameters appended to the shared ones).
        label: (P,) region index of every pixel solved (0..n_regions-1).
        start_b (P, B, p), start_s (P, s), start_r (n_regions, r): starting values.
        bounds: ((lower_b, upper_b), (lower_s, upper_s), (lower_r, upper_r)), arrays.
        prior: (mean (R, r), weight (R, r)) of the regional parameters (weight 0: none).
    Returns:
        dict: xb, xs, xr and the blocks at the solution, cost (R,) the regions'
        objective, pixel_cost (P,) the pixels' parts of it (without the regional
        prior), status (R,) CONVERGED or MAX_ITER, iterations (R,).
    """
    prior_mean, prior_weight = prior
    state = {"xb": start_b, "xs": start_s, "xr": start_r}

    def region_cost(pixel_cost, xr):
        prior_rows = np.where(prior_weight > 0.0, (xr - prior_mean) * prior_weight, 0.0)
        return _region_sum(pixel_cost, label, n_regions) + np.sum(prior_rows**2, axis=-1)

    def with_blocks(point):
        blocks = evaluate(point["xb"], np.concatenate([point["xs"], point["xr"][label]], axis=1))
        return {
            **point,
            **blocks,
            "region_cost": region_cost(blocks["cost"], point["xr"]),
        }

    state = with_blocks(state)
    damping = np.zeros(n_regions)
    growth = np.full(n_regions, 2.0)
    done = state["region_cost"] == 0.0
    iterations = np.zeros(n_regions, np.int32)
    for _ in range(max_iter):
        if np.all(done):
            break
        step_b, step_s, step_r, solvable, _ = _step(state, label, n_regions, bounds, damping, prior)
        (lower_b, upper_b), (lower_s, upper_s), (lower_r, upper_r) = bounds
        trial = {
            "xb": np.clip(state["xb"] + step_b, lower_b, upper_b),
            "xs": np.clip(state["xs"] + step_s, lower_s, upper_s),
            "xr": np.clip(state["xr"] + step_r, lower_r, upper_r),
        }
        moving = ~done[label]  # converged regions' pixels keep their point
        for name in ("xb", "xs"):
            trial[name] = np.where(
                moving.reshape((-1,) + (1,) * (trial[name].ndim - 1)),
                trial[name],
                state[name],
            )
        trial["xr"] = np.where(~done[:, None], trial["xr"], state["xr"])
        trial = with_blocks(trial)
        newton_b, newton_s, newton_r, newton_ok, _ = _step(
            trial, label, n_regions, bounds, np.zeros(n_regions), prior
        )
        projected = {name: trial[name] - state[name] for name in ("xb", "xs", "xr")}
        step_size = _region_max(projected, label, n_regions)
        newton = {"xb": newton_b, "xs": newton_s, "xr": newton_r}
        newton_size = np.where(newton_ok, _region_max(newton, label, n_regions), np.inf)
        newton_decrease = np.where(
            newton_ok, -_region_linear_and_quadratic(trial, newton, label, n_regions, prior), np.inf
        )
        predicted = -_region_linear_and_quadratic(state, projected, label, n_regions, prior)
        cost, cost_trial = state["region_cost"], trial["region_cost"]
        accept = _accepted(cost, cost_trial) & solvable & ~done
        now = _converged(step_size, predicted, cost, newton_size, accept, damping, tol)
        now = now & solvable
        new_damping, new_growth = _next_damping(
            accept,
            _gain_ratio(cost, cost_trial, predicted),
            damping,
            growth,
            newton_decrease,
            cost_trial,
        )
        damping = np.where(done, damping, new_damping)
        growth = np.where(done, growth, new_growth)
        iterations += np.where(done, 0, 1).astype(np.int32)
        take = accept[label]
        for name, value in state.items():
            if name in ("xr", "region_cost"):
                state[name] = np.where(
                    accept.reshape((-1,) + (1,) * (value.ndim - 1)), trial[name], value
                )
            else:
                state[name] = np.where(
                    take.reshape((-1,) + (1,) * (value.ndim - 1)), trial[name], value
                )
        done = done | now
    return {
        **state,
        "pixel_cost": state["cost"],
        "cost": state["region_cost"],
        "status": np.where(done, Status.CONVERGED, Status.MAX_ITER).astype(np.int8),
        "iterations": iterations,
    }


def _region_max(steps, label, n_regions):
    size = np.zeros(n_regions)
    pixel = np.max(np.abs(steps["xb"]), axis=(-2, -1))
    if steps["xs"].shape[1]:
        pixel = np.maximum(pixel, np.max(np.abs(steps["xs"]), axis=-1))
    np.maximum.at(size, label, pixel)
    if steps["xr"].shape[1]:
        size = np.maximum(size, np.max(np.abs(steps["xr"]), axis=-1))
    return size


def _region_linear_and_quadratic(state, step, label, n_regions, prior):
    """2 delta^T g + delta^T H delta of every region (its pixels' blocks and the prior)."""
    sr = np.concatenate([step["xs"], step["xr"][label]], axis=1)
    pixel = 2.0 * np.einsum("nbp,nbp->n", step["xb"], state["gb"]) + 2.0 * np.einsum(
        "nq,nq->n", sr, state["g"]
    )
    pixel += np.einsum("nbp,nbpq,nbq->n", step["xb"], state["a"], step["xb"])
    pixel += 2.0 * np.einsum("nbp,nbpq,nq->n", step["xb"], state["c"], sr)
    pixel += np.einsum("nq,nqt,nt->n", sr, state["d"], sr)
    total = _region_sum(pixel, label, n_regions)
    prior_mean, prior_weight = prior
    prior_gradient = prior_weight**2 * np.where(prior_weight > 0.0, state["xr"] - prior_mean, 0.0)
    return total + np.sum(
        step["xr"] ** 2 * prior_weight**2 + 2.0 * step["xr"] * prior_gradient, axis=-1
    )


def regional_covariance(state, label, n_regions, prior, variance, solved):
    """Per-pixel covariance blocks of a regional fit, and where they are determined.

    Pixel i's marginal problem over its own parameters and the regional ones is its arrow
    with the regional block D_rr,i replaced by D_rr,i + (M - M_i): the information on the
    regional parameters that the region's other pixels and the prior carry (M the
    region's reduced information at the solution, undamped, M_i pixel i's part of it).
    `arrow_covariance` of that gives pixel i's blocks, the regional ones included (the
    shared block then covers the pixel's shared parameters and the regional ones).

    Args:
        state: `solve_regions`' result; label (P,); prior: (mean, weight) (R, r);
        variance: (P,) factor of the inverse (1 with refl_sigma); solved: (P,) bool.
    Returns:
        (cov_b, cov_sr, cov_x, determined) as `arrow_covariance`'s, over s + r shared.
    """
    s = state["xs"].shape[1]
    r = state["xr"].shape[1]
    free = tuple(
        (np.full_like(a, -np.inf), np.full_like(a, np.inf))
        for a in (state["xb"][0], state["xs"][0], state["xr"][0])
    )
    *_, reduced = _step(state, label, n_regions, free, np.zeros(n_regions), prior)
    m = np.zeros((n_regions, r, r))
    np.add.at(m, label, reduced)
    m[:, range(r), range(r)] += prior[1] ** 2
    d = state["d"].copy()
    d[:, s:, s:] += m[label] - reduced
    return arrow_covariance(state["a"], state["c"], d, variance, solved)
