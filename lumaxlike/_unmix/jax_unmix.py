"""The JAX solver of `unmix`'s one-step route: Levenberg-Marquardt in reflectance space on
lanes of pixels, with the simplex programme of `simplex_qp` as its subproblem.

The LM is the shared `ElementwiseLevenbergMarquardt` (`_inverse.elementwise_lm`, run by
`optx.least_squares`: its acceptance, damping and convergence are `lm_rules`, as in the
numba kernel `numba_one_step._one_step_kernel`), with two hooks of its own: the normal
equations of the mixture (`_normal_equations`) and the damped subproblem
(`_simplex_subproblem`): the damped linearised programme on the simplex, solved by the
Lawson-Hanson active set of `simplex_qp` written over lanes (`simplex_qp_lanes`: every
lane keeps its own working set and phase; its bounded `while_loop` of pivots ends when
all lanes are done), started from the working set of the current point (the fractions
free to move and the sum constraint's flag, carried from step to step): the numba
kernel's steps, step for step. r and dr/dw come from the model's analytic
`equations.reflectance_and_slope` for the configuration of the `HapkeParams`
(`family.jax_equations_for`). It computes in the inputs' precision (float32 or float64).
The two-step route needs no JAX code of its own: `invert` (with the JAX solver) gives w,
and the w-space programme runs in the numba kernel (`numba_unmix.two_step_numba`; a small
CPU step after the inversion).
"""

from __future__ import annotations

import functools
from functools import partial
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import optimistix as optx

from .._inverse import lm_rules
from .._inverse.elementwise_lm import ElementwiseLevenbergMarquardt, Subproblem
from .._model._backends import retarget_to_jax
from .._model.family import jax_equations_for
from .._model.jax_model import pixel_terms
from .._status import Status
from .simplex_qp import (
    FRACTION_FLOOR,
    MULTIPLIER_FLOOR,
    PIVOT_FLOOR,
    QP_OK,
    QP_SINGULAR,
    QP_STALLED,
)

__all__ = ["simplex_qp_lanes", "solve_one_step_jax"]

_lm = retarget_to_jax(lm_rules)


def _scaled_cholesky_solve(system, rhs):
    """`simplex_qp.scaled_cholesky` + `scaled_solve` on lanes: system (n, p, p), rhs (n, p)."""
    p = rhs.shape[-1]
    diagonal = [system[..., a, a] for a in range(p)]
    ok = jnp.ones(rhs.shape[:-1], bool)
    scale = []
    for a in range(p):
        ok = ok & (diagonal[a] > 0.0)
        scale.append(jnp.sqrt(jnp.where(diagonal[a] > 0.0, diagonal[a], 1.0)))
    factor: list[list[Any]] = [[None] * p for _ in range(p)]  # None: not yet computed
    for j in range(p):
        pivot = system[..., j, j] / (scale[j] * scale[j]) - sum(
            (factor[j][k] * factor[j][k] for k in range(j)), 0.0
        )
        ok = ok & (pivot > PIVOT_FLOOR)
        root = jnp.sqrt(jnp.where(pivot > PIVOT_FLOOR, pivot, 1.0))
        factor[j][j] = root
        for i in range(j + 1, p):
            value = system[..., i, j] / (scale[i] * scale[j]) - sum(
                (factor[i][k] * factor[j][k] for k in range(j)), 0.0
            )
            factor[i][j] = value / root
    forward: list[Any] = []
    for i in range(p):
        value = rhs[..., i] / scale[i] - sum((factor[i][k] * forward[k] for k in range(i)), 0.0)
        forward.append(value / factor[i][i])
    solution: list[Any] = [None] * p
    for i in reversed(range(p)):
        value = forward[i] - sum((factor[k][i] * solution[k] for k in range(i + 1, p)), 0.0)
        solution[i] = value / factor[i][i]
    return jnp.stack([solution[i] / scale[i] for i in range(p)], axis=-1), ok


def _equality_solve(a_matrix, c, x, free, sum_active):
    """`simplex_qp.equality_solve` on lanes; returns (z, ok)."""
    p = c.shape[-1]
    reference = jnp.argmax(jnp.where(free, x, -jnp.inf), axis=-1)  # the first largest
    has_reference = sum_active
    is_reference = (jnp.arange(p)[None, :] == reference[:, None]) & has_reference[:, None]
    r = reference[:, None]
    a_ar = jnp.take_along_axis(a_matrix, r[:, :, None], axis=-1)[..., 0]  # A[:, a, r]
    a_rb = jnp.take_along_axis(a_matrix, r[:, :, None], axis=-2)[:, 0, :]  # A[:, r, b]
    a_rr = jnp.take_along_axis(a_ar, r, axis=-1)  # (n, 1)
    c_r = jnp.take_along_axis(c, r, axis=-1)
    correction = a_rr[:, :, None] - a_ar[:, :, None] - a_rb[:, None, :]
    system = a_matrix + jnp.where(has_reference[:, None, None], correction, 0.0)
    rhs = c + jnp.where(has_reference[:, None], a_rr - c_r - a_ar, 0.0)
    active = free & ~is_reference
    system = jnp.where(active[:, :, None] & active[:, None, :], system, 0.0)
    system = system + jnp.where(active, 0.0, 1.0)[:, :, None] * jnp.eye(p, dtype=system.dtype)[None]
    rhs = jnp.where(active, rhs, 0.0)
    y, ok = _scaled_cholesky_solve(system, rhs)
    z = jnp.where(active, y, 0.0)
    z = jnp.where(is_reference, 1.0 - jnp.sum(z, axis=-1, keepdims=True), z)
    return z, ok


def simplex_qp_lanes(a_matrix, c, x, free, sum_active, active, equality, max_steps):
    """`simplex_qp.simplex_qp` for lanes of problems (a_matrix (n, p, p), c, x, free
    (n, p), sum_active, active (n,); `equality` a traced bool, so one compiled program
    serves both modes); inactive lanes are left as they are.

    Returns:
        (x, free, sum_active, code): code QP_OK, QP_SINGULAR or QP_STALLED per lane.
    """
    p = c.shape[-1]
    index = jnp.arange(p)[None, :]
    floor = MULTIPLIER_FLOOR * jnp.max(jnp.diagonal(a_matrix, axis1=-2, axis2=-1), axis=-1)

    def body(state):
        x, free, sum_active, inner, done, code, step = state
        z, ok = _equality_solve(a_matrix, c, x, free, sum_active)
        # inner phase: step toward z until a variable (or the sum) reaches its bound
        candidate = free & (z <= FRACTION_FLOOR)
        gap = x - z
        ratio = jnp.where(
            candidate, jnp.where(gap > 0.0, x / jnp.where(gap > 0.0, gap, 1.0), 0.0), jnp.inf
        )
        block = jnp.argmin(ratio, axis=-1)
        bound_blocked = jnp.any(candidate, axis=-1)
        alpha = jnp.minimum(jnp.min(ratio, axis=-1), 1.0)
        # with the sum inequality (not `equality`) out of the working set: the sum may block
        total_x = jnp.sum(x, axis=-1)
        total_z = jnp.sum(z, axis=-1)
        sum_candidate = ~equality & ~sum_active & (total_z > 1.0)
        t_sum = jnp.maximum(0.0, (1.0 - total_x) / jnp.where(sum_candidate, total_z - total_x, 1.0))
        sum_first = sum_candidate & (~bound_blocked | (t_sum < alpha))
        alpha = jnp.where(sum_first, jnp.minimum(t_sum, 1.0), alpha)
        blocked = bound_blocked | sum_candidate
        stepped = jnp.where(free, x + alpha[:, None] * (z - x), x)
        stepped = jnp.where(
            (index == block[:, None]) & (bound_blocked & ~sum_first)[:, None], 0.0, stepped
        )
        drop = free & (stepped <= 0.0)
        x_inner = jnp.where(blocked[:, None], jnp.where(drop, 0.0, stepped), z)
        free_inner = jnp.where(blocked[:, None], free & ~drop, free)
        sum_inner = sum_active | sum_first
        # outer phase: the most negative multiplier of a bound (or of the sum inequality)
        gradient = jnp.einsum("nab,nb->na", a_matrix, x) - c
        count = jnp.sum(free, axis=-1)
        nu = jnp.where(
            sum_active & (count > 0),
            -jnp.sum(jnp.where(free, gradient, 0.0), axis=-1) / jnp.maximum(count, 1),
            0.0,
        )
        multiplier = jnp.where(free, jnp.inf, gradient + nu[:, None])
        best = jnp.min(multiplier, axis=-1)
        release = jnp.argmin(multiplier, axis=-1)
        release_sum = ~equality & sum_active & (nu < jnp.minimum(best, -floor))
        release_bound = (best < -floor) & ~release_sum
        optimal = ~release_sum & ~release_bound
        free_outer = free | ((index == release[:, None]) & release_bound[:, None])
        sum_outer = sum_active & ~release_sum
        # each lane takes its phase's update
        singular = inner & ~ok
        moving = ~done
        new_x = jnp.where((moving & inner & ok)[:, None], x_inner, x)
        new_free = jnp.where(
            moving[:, None], jnp.where(inner[:, None], free_inner, free_outer), free
        )
        new_sum = jnp.where(moving, jnp.where(inner, sum_inner, sum_outer), sum_active)
        finished = jnp.where(inner, singular, optimal)
        new_inner = jnp.where(moving, jnp.where(inner, blocked, ~optimal), inner)
        new_code = jnp.where(moving & singular, QP_SINGULAR, code)
        return new_x, new_free, new_sum, new_inner, done | (moving & finished), new_code, step + 1

    def cond(state):
        return ~jnp.all(state[4]) & (state[6] < max_steps)

    n = c.shape[0]
    init = (x, free, sum_active, jnp.ones(n, bool), ~active, jnp.full(n, QP_OK, jnp.int32), 0)
    x, free, sum_active, _, done, code, _ = jax.lax.while_loop(cond, body, init)
    return x, free, sum_active, jnp.where(done, code, QP_STALLED)


def _subproblem(hessian, gradient, x0, damping):
    """`numba_one_step._subproblem` on lanes: (A, c) of the damped linearised programme."""
    diagonal = jnp.diagonal(hessian, axis1=-2, axis2=-1)
    largest = jnp.max(diagonal, axis=-1, keepdims=True)
    damped = _lm.damped_diagonal(diagonal, largest, damping[:, None])
    p = x0.shape[-1]
    eye = jnp.eye(p, dtype=hessian.dtype)[None]
    a_matrix = hessian * (1.0 - eye) + damped[:, :, None] * eye
    return a_matrix, jnp.einsum("nab,nb->na", a_matrix, x0) - gradient


class _UnmixArgs(NamedTuple):
    """The arguments of the one-step least-squares problem of a chunk of n pixels."""

    terms: Any  # the pixels' `pixel_terms`, (n,) each
    albedo: Any  # (p, bands) the endmembers' w
    refl: Any  # (n, bands) observed r [1/sr] (0 where the pixel is not solved)
    weights: Any  # (bands,) 1 / sigma of every band [sr]
    phase: Any  # None, or the endmembers' own phase terms (n, p, 1 or bands, 4)
    equality: Any  # traced bool: sum f = 1 (else sum f <= 1)


def _simplex_subproblem(x, args, hessian, gradient, damping, *, carried, active, max_steps, **_):
    """`ElementwiseLevenbergMarquardt`'s `subproblem` hook of the one-step route: the
    damped linearised programme (`_subproblem`) on the simplex, solved by
    `simplex_qp_lanes` from the working set `carried` = (free (n, p), sum_active (n,)):
    the fractions allowed to move (those above 0 at a solution) and the sum constraint's
    flag, for the `active` lanes only. The programme has its own constraints: the
    solver's bounds (`**_`) are not read.

    Returns:
        `Subproblem`: the programme's solution (its fractions at a bound exactly 0), the
        step to it, solvable where the programme was solved (`QP_OK`), and the working
        set at the solution.
    """
    free, sum_active = carried
    a_matrix, c = _subproblem(hessian, gradient, x, damping)
    point, free, sum_active, code = simplex_qp_lanes(
        a_matrix, c, x, free, sum_active, active, args.equality, max_steps
    )
    return Subproblem(point, point - x, code == QP_OK, (free, sum_active))


def _band_cost(residual):
    """The cost of every pixel, the sum of its squared weighted residuals (n, bands) -> (n,),
    by XLA's reduction over the bands: the one-step route's chunks have one padded shape,
    and in-order additions (`elementwise_lm.ordered_cost`) cost ~7 % of its time on a CPU."""
    return jnp.sum(residual * residual, axis=-1)


@functools.cache
def _model_for(key):
    equations = jax_equations_for(key)
    return jax.vmap(jax.vmap(equations.reflectance_and_slope, in_axes=(0, None)), in_axes=(0, 0))


def _normal_equations(x, args, key):
    """Weighted residuals (n, bands), J^T J (n, p, p) and J^T f (n, p) of every lane at
    fractions x (n, p): `_normal_equations_shared` or, with the endmembers' own phase
    functions, `_normal_equations_mixed`."""
    if args.phase is not None:
        return _normal_equations_mixed(x, args, key)
    return _normal_equations_shared(x, args, key)


def _normal_equations_shared(x, args, key):
    """`_normal_equations` with one phase function (`params`') for the mixture."""
    w_mix = jnp.einsum("np,pk->nk", x, args.albedo)
    r, slope = _model_for(key)(w_mix, args.terms)
    residual = (r - args.refl) * args.weights[None, :]
    columns = (slope * args.weights[None, :])[:, :, None] * args.albedo.T[None, :, :]
    hessian = jnp.einsum("nka,nkb->nab", columns, columns)  # columns: (n, bands, p)
    gradient = jnp.einsum("nka,nk->na", columns, residual)
    return residual, hessian, gradient


@functools.cache
def _mixture_model_for(key):
    equations = jax_equations_for(key)
    per_band = jax.vmap(equations.mixture_reflectance_and_slope, in_axes=(0, 0, 0, 0, 0, None))
    return jax.vmap(per_band, in_axes=(0, 0, 0, 0, 0, 0)), equations.mixture_slope


def _normal_equations_mixed(x, args, key):
    """`_normal_equations` with per-endmember phase functions (`numba_one_step.
    _normal_equations_mixed` on lanes); args.phase: (n, p, 1 or bands, 4)
    `phase.phase_table`."""
    albedo, phase = args.albedo, args.phase
    w_mix = jnp.einsum("np,pk->nk", x, albedo)
    weighted = (x[:, :, None] * albedo[None, :, :])[..., None]  # (n, p, bands, 1)
    sums = jnp.sum(weighted * phase, axis=1)  # (n, bands, 4): elementwise, fused (no small dots)
    mixture, mixture_slope = _mixture_model_for(key)
    r, h_mu0e_m1, h_mue_m1, common = mixture(
        w_mix, sums[..., 0], sums[..., 1], sums[..., 2], sums[..., 3], args.terms
    )
    slope = mixture_slope(
        phase[..., 0],
        phase[..., 1],
        phase[..., 2],
        phase[..., 3],
        h_mu0e_m1[:, None, :],
        h_mue_m1[:, None, :],
        common[:, None, :],
        args.terms.scale[:, None, None],
    )  # (n, p, bands)
    residual = (r - args.refl) * args.weights[None, :]
    columns = jnp.swapaxes(
        slope * albedo[None, :, :] * args.weights[None, None, :], 1, 2
    )  # (n, bands, p)
    hessian = jnp.einsum("nka,nkb->nab", columns, columns)
    gradient = jnp.einsum("nka,nk->na", columns, residual)
    return residual, hessian, gradient


@partial(jax.jit, static_argnames=("max_iter", "max_steps", "key"))
def solve_one_step_jax(
    refl,
    to_sun,
    to_sensor,
    normal,
    params,
    albedo,
    band_weights,
    start,
    equality,
    max_iter,
    tol,
    max_steps,
    key,
    phase=None,
):
    """One chunk of the one-step route (jitted; the contract of `numba_one_step.one_step_numba`;
    `phase`: None, or the endmembers' own phase terms (n, p, 1 or bands, 4)), in the
    precision of the inputs (all of one float dtype).

    Returns:
        dict: fractions (n, p), status int8, iterations int32, cost (the weighted sum of
        squared residuals, `_band_cost`), hessian (n, p, p), gradient (n, p), sum_active
        bool; NaN for unsolved pixels.
    """
    n, p = refl.shape[0], albedo.shape[0]
    terms = jax.vmap(pixel_terms, in_axes=(0, 0, 0, None))(to_sun, to_sensor, normal, params)
    finite = jnp.all(jnp.isfinite(to_sun) & jnp.isfinite(to_sensor) & jnp.isfinite(normal), axis=-1)
    finite = finite & jnp.all(jnp.isfinite(refl), axis=-1)
    status = jnp.where(
        finite,
        jnp.where(jnp.isfinite(terms.scale), -1, int(Status.INVALID_GEOMETRY)),
        int(Status.NONFINITE_INPUT),
    )
    active = status < 0
    args = _UnmixArgs(
        terms, albedo, jnp.where(active[:, None], refl, 0.0), band_weights, phase, equality
    )
    solver = ElementwiseLevenbergMarquardt(
        tol=tol,
        lower=0.0,  # the fractions' bounds, for the record: the subproblem keeps them
        upper=1.0,
        normal_equations=partial(_normal_equations, key=key),
        subproblem=partial(_simplex_subproblem, max_steps=max_steps),
        keep_residuals=False,  # the results need their cost alone
        cost_function=_band_cost,
    )
    x = jnp.broadcast_to(start[None, :], (n, p))
    working_set = (x > 0.0, jnp.broadcast_to(equality, (n,)))
    solution: optx.Solution[Any, Any] = optx.least_squares(
        lambda x, args: _normal_equations(x, args, key)[0],
        solver,
        x,
        args=args,
        options={"frozen": ~active, "carried": working_set},
        max_steps=max_iter,
        throw=False,
    )
    return _one_step_results(solution.value, solution.state, active, status)


def _one_step_results(x, state, active, status):
    """`solve_one_step_jax`'s dict from the solver's final fractions and state."""
    solved_status = jnp.where(state.converged, int(Status.CONVERGED), int(Status.MAX_ITER))
    nan = jnp.nan
    return {
        "fractions": jnp.where(active[:, None], x, nan),
        "status": jnp.where(active, solved_status, status).astype(jnp.int8),
        "iterations": jnp.where(active, state.iterations, 0),
        "cost": jnp.where(active, state.cost, nan),
        "hessian": jnp.where(active[:, None, None], state.jtj, nan),
        "gradient": jnp.where(active[:, None], state.jtf, nan),
        "sum_active": jnp.where(active, state.carried[1], False),
    }
