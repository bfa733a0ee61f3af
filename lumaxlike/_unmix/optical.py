"""Unmixing with free grain sizes and nanophase iron: endmembers from optical constants.

Each endmember's w_j(lambda; D_j, phi) comes from Hapke's equivalent slab
(`_model/slab_equations.py`) with its n, k on the cube's bands, its grain size D_j and
the pixel's one nanophase iron mass fraction phi (npFe0, shared by every endmember's
host; Lucey & Riner 2011). The mixture's w is Hapke's intimate-mixing rule (`mixing`):
w_mix = sum_j f_j w_j(D_j, phi), with cross-section fractions
f_j = M_j c_j / sum_k M_k c_k, c_j = Q_j / (rho_j D_j).

The solvers (`optical_numba`, `optical_jax`) fit per pixel the parameter vector

    x = (f_1..f_p, u_1..u_p, phi),   u_j = ln D_j,

in reflectance space by variable projection (Golub & Pereyra 1973; Kaufman 1975): f on
the simplex (sum f = 1, f_j >= 0), u_j in [ln D_lo, ln D_hi], phi in [phi_lo, phi_hi].

- Inner problem: at given u and phi the endmembers' w_j are fixed and w_mix is linear in
  f, so the cost is the fixed-grain one-step problem of `unmix`; its fractions are
  solved there by Gauss-Newton on the simplex, each step the programme of `simplex_qp`
  on J_f^T J_f (the one-step route's subproblem, undamped), halved until the cost does
  not rise (MAX_HALVINGS), until a step is a tie (FRACTION_TIE) or no longer than tol.
  r is not linear in w, so this is an iteration, not one programme; started from the
  outer step's linear prediction of f, it takes 1-3 steps.
- Outer problem: Levenberg-Marquardt over (u, phi) (the rules of `lm_rules`; in JAX
  the shared `ElementwiseLevenbergMarquardt`, these parts its hooks). Its system is
  the Gauss-Newton system of all of x (J^T J at the solved fractions) in the null
  space of the sum (relative to a reference fraction, the largest), damped in u and
  phi only: its (u, phi) part is then Kaufman's step, the Schur complement of the
  fractions, (J_t^T (I - P_f) J_t + lambda D) dt = -J_t^T r; its f part only starts the
  inner solve. It starts damped (START_DAMPING); u moves by at most MAX_LN_STEP a
  step. Held (the kernels' `_held`): a fraction at 0 (the inner solve put it there) and
  its endmember's grain size (it has no effect), a parameter fixed (not in `free`) or at
  a bound the cost pushes it through (`lm_rules.pinned`). Converged: `lm_rules.converged`
  or `settled`.

At the end the covariance of x (the inverse of J^T J on the parameters not held, with
the fractions at 0 held by their multipliers: `held`) is mapped to the mass fractions M_j
(which depend on f and D), the grain sizes D_j and phi here (`finish`). A pixel that
ends at max_iter with a grain size the data cannot tell from its abundance
(`flat_valley`) is UNDETERMINED.

The endmembers and their checks are in `optical_endmembers`; the choice of starts and
of the best per pixel (`unmix`'s ``starts``) in `optical_starts`.
"""

from __future__ import annotations

import numpy as np

from .._inverse.fit.covariance import MAX_VARIANCE_INFLATION
from .._status import Status
from .simplex_qp import MULTIPLIER_FLOOR

__all__ = [
    "FREE_PARAMETERS",
    "settled",
    "check_free",
    "check_free_names",
    "parameter_bounds",
    "held",
    "finish",
]

FREE_PARAMETERS = ("grain_size", "npfe")
NEGLIGIBLE = 1e-20  # diag(J^T J) of a parameter, relative to the largest: no effect
# Converged besides `lm_rules.converged`: an accepted trial whose undamped step d (the
# Gauss-Newton step on the parameters not held, projected onto the bounds) moves it by
# no more than sqrt(SETTLED) = 0.1 standard errors in the metric of J^T J:
# d^T J^T J d <= SETTLED times the residual variance per band (cost over
# bands - (2p + 1)), i.e. the cost (chi^2 with refl_sigma given) is within ~SETTLED of
# its minimum. The projected step is the fixed point test of the constrained minimum: a
# step that the bounds cut still moves the point there. In the long, curved valleys of a
# grain size against its endmember's abundance, Levenberg-Marquardt approaches the
# minimum slowly: 1e-3 standard errors (SETTLED = 1e-6) took 2-3x the iterations of 0.1
# for a change of the estimates far below their errors (docs/benchmarks.md). A
# noise-free pixel (cost -> 0) is unaffected: its step removes the whole cost until
# rounding.
SETTLED = 1e-2
# The fraction solve at fixed grain sizes and phi (variable projection, the inner
# problem): Gauss-Newton steps on the simplex (each the programme of `simplex_qp`), each
# halved up to MAX_HALVINGS times until the cost does not rise; it ends (that step not
# taken) when a step is no longer than `tol` or could lower the cost by no more than
# FRACTION_TIE of it, or after MAX_FRACTION_STEPS steps (the outer step's linear
# prediction of the fractions starts it next to the minimum: 1-3 steps).
FRACTION_TIE = 1e-10
# An outer step moves each ln D by at most MAX_LN_STEP (a factor 2 in D): with the
# fractions solved, a grain size whose endmember the fraction solve makes minor has a
# column of J ~ f_j, and Gauss-Newton would throw it across its bounds into a local
# minimum (seen from the default start, 50 um, on the tests' two-endmember mixtures).
MAX_LN_STEP = 0.7
# The outer LM starts damped (lambda = START_DAMPING, then Nielsen's rule), not with a
# plain Gauss-Newton step: from the start the fractions solved at the starting grain
# sizes can put a pixel's first full step into another basin (a noise-free 2-endmember
# pixel of 10 bands ended CONVERGED with its grain sizes swapped, 103/28 um for 40/73).
START_DAMPING = 1.0
MAX_FRACTION_STEPS = 10
MAX_HALVINGS = 10


def settled(accept, metric, cost_trial, n_bands: int, p: int):
    """Whether an accepted trial is within `SETTLED` of the minimum (both solvers):
    `metric` d^T J^T J d of its undamped projected step d."""
    return accept & (metric <= SETTLED * cost_trial / max(n_bands - 2 * p - 1, 1))


def check_free_names(free) -> tuple[str, ...]:
    """`unmix`'s ``free`` as a tuple of distinct names among :data:`FREE_PARAMETERS`
    (`UnmixSettings`' check, before the endmembers are known); ValueError naming it."""
    names = (free,) if isinstance(free, str) else tuple(free)
    unknown = [name for name in names if name not in FREE_PARAMETERS]
    if unknown or len(set(names)) != len(names):
        raise ValueError(
            f"free must name distinct parameters among {FREE_PARAMETERS}, got {free!r}"
        )
    return names


def check_free(free, endmembers, route: str, sum_to_one) -> tuple[bool, bool]:
    """(grain size free, npFe0 free) from `unmix`'s `free`; ValueError naming it."""
    names = check_free_names(free)
    if endmembers.optical is None:
        raise ValueError(
            "free needs endmembers made from optical constants (Endmembers.from_optical_constants): "
            "under library mixing a grain size only rescales the cross-section"
        )
    if route != "one_step":
        raise ValueError(f"free={names!r} is solved by route='one_step' only, got route={route!r}")
    if sum_to_one is not True:
        raise ValueError("free grain sizes or npFe0 need sum_to_one=True (no unmodelled remainder)")
    if endmembers.phase is not None:
        raise ValueError(
            "free grain sizes or npFe0 take one shared phase function: endmembers.phase must be None"
        )
    if "npfe" in names and not endmembers.optical.npfe_bounds[1] > 0.0:
        raise ValueError(
            "free='npfe' with npfe_bounds (0, 0): the endmembers were made without iron"
        )
    if "npfe" in names and not np.all(endmembers.optical.iron_n > 0.0):
        raise ValueError(
            "free='npfe' needs iron's n, k on every band: the endmembers were made with "
            "npfe_fraction 0 and an iron (Endmembers.from_optical_constants' iron=) that "
            "does not cover the bands"
        )
    return "grain_size" in names, "npfe" in names


def parameter_bounds(endmembers, grain_free: bool, npfe_free: bool):
    """(start, lower, upper, fixed) of x = (f, ln D, phi), each (2p + 1,)."""
    optical = endmembers.optical
    p = endmembers.n_endmembers
    start = np.concatenate(
        [np.full(p, 1.0 / p), np.log(endmembers.grain_size), [optical.npfe_fraction]]
    )
    lower = np.concatenate(
        [np.zeros(p), np.log(optical.grain_size_bounds[:, 0]), optical.npfe_bounds[:1]]
    )
    upper = np.concatenate(
        [np.ones(p), np.log(optical.grain_size_bounds[:, 1]), optical.npfe_bounds[1:]]
    )
    fixed = np.concatenate([np.zeros(p, bool), np.full(p, not grain_free), [not npfe_free]])
    return start, lower, upper, fixed


def held(x, gradient, hessian, lower, upper, fixed, p):
    """Which parameters a step leaves where they are, (..., 2p + 1) bool (NumPy).

    A fraction at 0 whose multiplier g_j + nu is not below -`MULTIPLIER_FLOOR` max diag
    (nu = -mean of g over the positive fractions); a grain size that is fixed, of an
    absent endmember, or at a bound the cost pushes it through (`lm_rules.pinned`); phi
    fixed or at such a bound. The covariance (`finish`) follows this rule; the solvers' steps hold the fractions
    at 0 (their inner solve decides them).
    """
    f, g_f = x[..., :p], gradient[..., :p]
    positive = f > 0.0
    count = np.maximum(np.sum(positive, axis=-1, keepdims=True), 1)
    nu = -np.sum(np.where(positive, g_f, 0.0), axis=-1, keepdims=True) / count
    floor = MULTIPLIER_FLOOR * np.max(
        np.diagonal(hessian, axis1=-2, axis2=-1), axis=-1, keepdims=True
    )
    f_held = ~positive & (g_f + nu >= -floor)
    box = x[..., p:]
    g_box = gradient[..., p:]
    pinned = ((box <= lower[p:]) & (g_box > 0.0)) | ((box >= upper[p:]) & (g_box < 0.0))
    box_held = fixed[p:] | pinned
    box_held = np.concatenate([box_held[..., :p] | ~positive, box_held[..., p:]], axis=-1)
    return np.concatenate([f_held, box_held], axis=-1)


def _reduction(x, mobile, p):
    """T (..., P, P): the columns of the parameters that move (mobile, not the reference
    fraction, the largest mobile one), e_a - e_r for a fraction, e_a otherwise."""
    size = x.shape[-1]
    f = np.where(mobile[..., :p], x[..., :p], -np.inf)
    reference = np.argmax(f, axis=-1)
    eye = np.eye(size)
    is_reference = np.arange(size) == reference[..., None]
    columns = mobile & ~is_reference
    t = eye * columns[..., None, :]
    is_fraction = np.arange(size) < p
    t = t - (is_reference[..., :, None] & (is_fraction & columns)[..., None, :])
    return t, columns


def _covariance_of_x(hessian, x, mobile, p):
    """(covariance (..., P, P), determined (...,), degrees of freedom (...,))."""
    t, columns = _reduction(x, mobile, p)
    reduced = np.einsum("...ka,...kl,...lb->...ab", t, hessian, t)
    reduced = reduced + np.eye(x.shape[-1]) * ~columns[..., None, :]
    diagonal = np.diagonal(reduced, axis1=-2, axis2=-1)
    good = np.all(np.isfinite(reduced), axis=(-2, -1)) & np.all(diagonal > 0.0, axis=-1)
    # a parameter whose effect on the data is nil against the others' (an opaque grain's
    # size: dw/dD ~ exp(-alpha <D>)) is not determined either, though scaling hides it
    largest = np.max(np.where(columns, diagonal, 0.0), axis=-1, keepdims=True)
    good &= np.all(~columns | (diagonal > NEGLIGIBLE * largest), axis=-1)
    scale = np.sqrt(np.where(diagonal > 0.0, diagonal, 1.0))
    scale = np.where(good[..., None], scale, 1.0)
    correlation = np.where(
        good[..., None, None],
        reduced / (scale[..., :, None] * scale[..., None, :]),
        np.eye(x.shape[-1]),
    )
    with np.errstate(all="ignore"):
        eigen = np.linalg.eigvalsh(correlation)
        good &= eigen[..., 0] > 1.0 / MAX_VARIANCE_INFLATION
        inverse = np.linalg.inv(np.where(good[..., None, None], correlation, np.eye(x.shape[-1])))
    inflation = np.max(np.diagonal(inverse, axis1=-2, axis2=-1), axis=-1)
    good &= inflation <= MAX_VARIANCE_INFLATION
    inverse = (
        inverse
        / (scale[..., :, None] * scale[..., None, :])
        * columns[..., :, None]
        * columns[..., None, :]
    )
    covariance = np.einsum("...ak,...kl,...bl->...ab", t, inverse, t)
    return covariance, good, np.sum(columns, axis=-1)


def flat_valley(cov_x, holding, lower, upper, p: int):
    """(pixels,) bool: a free grain size whose standard error of ln D exceeds the width
    of its bounds, ln(upper / lower): the data cannot tell it (and its endmember's
    abundance) within its bounds. A pixel that ends at `max_iter` there has crawled along
    such a valley: UNDETERMINED, not MAX_ITER (`finish`)."""
    grain = slice(p, 2 * p)
    variance = np.diagonal(cov_x, axis1=-2, axis2=-1)[:, grain]
    with np.errstate(invalid="ignore"):
        wide = variance > (upper[grain] - lower[grain]) ** 2
    return np.any(wide & ~holding[:, grain], axis=-1)


def finish(solved, endmembers, lower, upper, fixed, weighted, n_bands):
    """The `UnmixResult` fields of one chunk from a solver's x, J^T J, J^T f and cost.

    The covariance of x maps to z = (M, D, phi) by the Jacobian G = dz/dx:
    m_j = f_j rho_j D_j / Q_j, M_j = m_j / sum m; dm_j/df_j = m_j / f_j, dm_j/du_j = m_j,
    dM_j/dm_l = (delta_jl - M_j) / sum m; dD_j/du_j = D_j.
    """
    p = endmembers.n_endmembers
    x, hessian, gradient = solved["x"], solved["hessian"], solved["gradient"]
    status = solved["status"].astype(np.int8)
    solved_mask = np.isin(status, (Status.CONVERGED, Status.MAX_ITER))
    safe_x = np.where(
        solved_mask[:, None], x, np.concatenate([np.full(p, 1.0 / p), np.zeros(p + 1)])
    )
    safe_h = np.where(solved_mask[:, None, None], hessian, np.eye(x.shape[-1]))
    safe_g = np.where(solved_mask[:, None], gradient, 0.0)
    holding = held(safe_x, safe_g, safe_h, lower, upper, fixed, p)
    cov_x, determined, free_count = _covariance_of_x(safe_h, safe_x, ~holding, p)
    if not weighted:
        dof = n_bands - free_count
        with np.errstate(all="ignore"):
            variance = np.where(dof > 0, solved["cost"] / np.maximum(dof, 1), np.nan)
        cov_x = cov_x * variance[:, None, None]
    status[solved_mask & ~determined] = Status.UNDETERMINED
    status[(status == Status.MAX_ITER) & flat_valley(cov_x, holding, lower, upper, p)] = (
        Status.UNDETERMINED
    )
    f, u, phi = safe_x[:, :p], safe_x[:, p : 2 * p], safe_x[:, 2 * p]
    grain = np.where(fixed[p : 2 * p], endmembers.grain_size, np.exp(u))
    per = endmembers.density / endmembers.extinction_efficiency
    m = f * per * grain
    total = np.sum(m, axis=-1, keepdims=True)
    mass = m / total
    jac = np.zeros(x.shape[:1] + (2 * p + 1,) * 2)
    dm = np.zeros(x.shape[:1] + (p, 2 * p + 1))
    idx = np.arange(p)
    dm[:, idx, idx] = per * grain
    dm[:, idx, p + idx] = m
    jac[:, :p, :] = np.einsum(
        "njl,nlc->njc", (np.eye(p) - mass[:, :, None]) / total[:, :, None], dm
    )
    jac[:, p + idx, p + idx] = grain
    jac[:, 2 * p, 2 * p] = 1.0
    covariance = np.einsum("nac,ncd,nbd->nab", jac, cov_x, jac)
    unsolved = ~solved_mask
    covariance[unsolved | (status == Status.UNDETERMINED)] = np.nan
    absent = (f <= 0.0) & ~fixed[p : 2 * p]  # a free grain size of an absent endmember
    grain = np.where(absent, np.nan, grain)
    at_bound = holding[:, :p] & (f <= 0.0)
    box_at_bound = ((safe_x[:, p:] <= lower[p:]) | (safe_x[:, p:] >= upper[p:])) & ~fixed[p:]
    out = {
        "fractions": mass,
        "covariance": covariance[:, :p, :p],
        "at_bound": at_bound,
        "cross_section": f,
        "remainder": np.zeros(x.shape[0]),
        "status": status,
        "iterations": solved["iterations"].astype(np.int32),
        "residual_norm": np.sqrt(solved["cost"]),
        "grain_size": grain,
        "npfe_fraction": phi,
        "parameter_covariance": covariance,
        "grain_size_at_bound": box_at_bound[:, :p] & ~absent,
        "npfe_at_bound": box_at_bound[:, p],
    }
    for name in ("fractions", "cross_section", "grain_size", "npfe_fraction", "residual_norm"):
        out[name] = np.where(
            unsolved.reshape((-1,) + (1,) * (out[name].ndim - 1)), np.nan, out[name]
        )
    out["remainder"] = np.where(unsolved, np.nan, out["remainder"])
    for name in ("at_bound", "grain_size_at_bound", "npfe_at_bound"):
        out[name] = out[name] & solved_mask.reshape((-1,) + (1,) * (out[name].ndim - 1))
    return out
