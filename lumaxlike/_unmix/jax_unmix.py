"""The JAX solver of `unmix`'s one-step route: Levenberg-Marquardt in reflectance space on
lanes of pixels, with the simplex programme of `simplex_qp` as its subproblem.

Every per-pixel quantity keeps the pixel axis last (`_Bands` says where the spectra's
band axis is). The LM is the shared `ElementwiseLevenbergMarquardt`
(`_inverse.elementwise_lm`, run by `optx.least_squares`: its acceptance, damping and
convergence are `lm_rules`, as in the numba kernel `numba_one_step._one_step_kernel`), with two hooks of its own: the normal
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
from .._inverse.ordered_sums import sum_in_order
from .._model._backends import retarget_to_jax
from .._model.family import jax_equations_for
from .._model.jax_executables import stored_jit
from .._model.jax_model import pixel_terms
from .._status import Status
from .simplex_qp import (
    FLOAT32_FRACTION_FLOOR,
    FLOAT32_MULTIPLIER_FLOOR,
    FRACTION_FLOOR,
    MULTIPLIER_FLOOR,
    PIVOT_FLOOR,
    QP_OK,
    QP_SINGULAR,
    QP_STALLED,
)

__all__ = ["simplex_qp_lanes", "solve_one_step_jax"]

_lm = retarget_to_jax(lm_rules)

# Layout: every per-pixel quantity has the pixel axis last (structure of arrays): fractions
# and flags (p, n), matrices (p, p, n), spectra (bands, n). On a TPU an array's two last
# axes fill (8, 128) tiles: with p = 4-5 on the last axis (the pixels first), a tile held a
# few percent of useful lanes. No products go to the matrix unit: every sum is written out
# (`sum_in_order`, in index order as the numba kernels add).


def _take(array, index):
    """array[index[i], ..., i] for every pixel i: array (p, ..., n), index (n,) ints."""
    picked = array[0]
    for j in range(1, array.shape[0]):
        picked = jnp.where(index == j, array[j], picked)
    return picked


def _matvec(matrix, vector):
    """matrix @ vector for every pixel: (p, q, n) x (q, n) -> (p, n), in index order."""
    return sum_in_order([matrix[:, b] * vector[b][None, :] for b in range(vector.shape[0])])


def _scaled_cholesky_solve(system, rhs):
    """`simplex_qp.scaled_cholesky` + `scaled_solve` on lanes: system (p, p, n), rhs (p, n)."""
    p = rhs.shape[0]
    diagonal = [system[a, a] for a in range(p)]
    ok = jnp.ones(rhs.shape[1:], bool)
    scale = []
    for a in range(p):
        ok = ok & (diagonal[a] > 0.0)
        scale.append(jnp.sqrt(jnp.where(diagonal[a] > 0.0, diagonal[a], 1.0)))
    factor: list[list[Any]] = [[None] * p for _ in range(p)]  # None: not yet computed
    for j in range(p):
        pivot = system[j, j] / (scale[j] * scale[j]) - sum(
            (factor[j][k] * factor[j][k] for k in range(j)), 0.0
        )
        ok = ok & (pivot > PIVOT_FLOOR)
        root = jnp.sqrt(jnp.where(pivot > PIVOT_FLOOR, pivot, 1.0))
        factor[j][j] = root
        for i in range(j + 1, p):
            value = system[i, j] / (scale[i] * scale[j]) - sum(
                (factor[i][k] * factor[j][k] for k in range(j)), 0.0
            )
            factor[i][j] = value / root
    forward: list[Any] = []
    for i in range(p):
        value = rhs[i] / scale[i] - sum((factor[i][k] * forward[k] for k in range(i)), 0.0)
        forward.append(value / factor[i][i])
    solution: list[Any] = [None] * p
    for i in reversed(range(p)):
        value = forward[i] - sum((factor[k][i] * solution[k] for k in range(i + 1, p)), 0.0)
        solution[i] = value / factor[i][i]
    return jnp.stack([solution[i] / scale[i] for i in range(p)]), ok


def _equality_solve(a_matrix, c, x, free, sum_active):
    """`simplex_qp.equality_solve` on lanes (a_matrix (p, p, n); c, x, free (p, n);
    sum_active (n,)); returns (z (p, n), ok (n,))."""
    p = c.shape[0]
    reference = jnp.argmax(jnp.where(free, x, -jnp.inf), axis=0)  # the first largest
    has_reference = sum_active
    is_reference = (jnp.arange(p)[:, None] == reference[None, :]) & has_reference[None, :]
    a_ar = _take(jnp.swapaxes(a_matrix, 0, 1), reference)  # A[a, r] (p, n)
    a_rb = _take(a_matrix, reference)  # A[r, b] (p, n)
    a_rr = _take(a_ar, reference)[None, :]  # (1, n)
    c_r = _take(c, reference)[None, :]
    correction = a_rr[None] - a_ar[:, None, :] - a_rb[None, :, :]
    system = a_matrix + jnp.where(has_reference[None, None, :], correction, 0.0)
    rhs = c + jnp.where(has_reference[None, :], a_rr - c_r - a_ar, 0.0)
    active = free & ~is_reference
    system = jnp.where(active[:, None, :] & active[None, :, :], system, 0.0)
    identity = jnp.eye(p, dtype=system.dtype)[:, :, None]
    system = system + jnp.where(active, 0.0, 1.0)[:, None, :] * identity
    rhs = jnp.where(active, rhs, 0.0)
    y, ok = _scaled_cholesky_solve(system, rhs)
    z = jnp.where(active, y, 0.0)
    z = jnp.where(is_reference, 1.0 - sum_in_order(z)[None, :], z)
    return z, ok


def simplex_qp_lanes(a_matrix, c, x, free, sum_active, active, equality, max_steps):
    """`simplex_qp.simplex_qp` for lanes of problems, the pixel axis last (a_matrix
    (p, p, n); c, x, free (p, n); sum_active, active (n,); `equality` a traced bool, so
    one compiled program serves both modes); inactive lanes are left as they are.

    Returns:
        (x, free, sum_active, code): code QP_OK, QP_SINGULAR or QP_STALLED per lane.
    """
    n = c.shape[1]
    fraction_floor, multiplier_floor = _floors(c.dtype)
    floor = multiplier_floor * jnp.max(jnp.stack([a_matrix[a, a] for a in range(c.shape[0])]), 0)

    def body(state):
        x, free, sum_active, inner, done, code, step = state
        x_inner, free_inner, sum_inner, blocked, ok = _inner_phase(
            a_matrix, c, x, free, sum_active, equality, fraction_floor
        )
        free_outer, sum_outer, optimal = _outer_phase(
            a_matrix, c, x, free, sum_active, equality, floor
        )
        # each lane takes its phase's update
        singular = inner & ~ok
        moving = ~done
        new_x = jnp.where((moving & inner & ok)[None, :], x_inner, x)
        new_free = jnp.where(
            moving[None, :], jnp.where(inner[None, :], free_inner, free_outer), free
        )
        new_sum = jnp.where(moving, jnp.where(inner, sum_inner, sum_outer), sum_active)
        finished = jnp.where(inner, singular, optimal)
        new_inner = jnp.where(moving, jnp.where(inner, blocked, ~optimal), inner)
        new_code = jnp.where(moving & singular, QP_SINGULAR, code)
        return new_x, new_free, new_sum, new_inner, done | (moving & finished), new_code, step + 1

    def cond(state):
        return ~jnp.all(state[4]) & (state[6] < max_steps)

    init = (x, free, sum_active, jnp.ones(n, bool), ~active, jnp.full(n, QP_OK, jnp.int32), 0)
    x, free, sum_active, _, done, code, _ = jax.lax.while_loop(cond, body, init)
    return x, free, sum_active, jnp.where(done, code, QP_STALLED)


def _floors(dtype):
    """(fraction floor, multiplier floor) of the programme in `dtype` (`simplex_qp`)."""
    if dtype == jnp.float32:
        return FLOAT32_FRACTION_FLOOR, FLOAT32_MULTIPLIER_FLOOR
    return FRACTION_FLOOR, MULTIPLIER_FLOOR


def _inner_phase(a_matrix, c, x, free, sum_active, equality, fraction_floor):
    """`simplex_qp_lanes`' inner phase: step toward the equality-constrained solution z
    until a variable (or the sum) reaches its bound (a z_j at or below `fraction_floor`
    counts as reaching it). Returns (x, free, sum_active) after
    it, whether a bound blocked the step, and whether z was solvable."""
    index = jnp.arange(c.shape[0])[:, None]
    z, ok = _equality_solve(a_matrix, c, x, free, sum_active)
    candidate = free & (z <= fraction_floor)
    gap = x - z
    ratio = jnp.where(
        candidate, jnp.where(gap > 0.0, x / jnp.where(gap > 0.0, gap, 1.0), 0.0), jnp.inf
    )
    block = jnp.argmin(ratio, axis=0)
    bound_blocked = jnp.any(candidate, axis=0)
    alpha = jnp.minimum(jnp.min(ratio, axis=0), 1.0)
    # with the sum inequality (not `equality`) out of the working set: the sum may block
    total_x = sum_in_order(x)
    total_z = sum_in_order(z)
    sum_candidate = ~equality & ~sum_active & (total_z > 1.0)
    t_sum = jnp.maximum(0.0, (1.0 - total_x) / jnp.where(sum_candidate, total_z - total_x, 1.0))
    sum_first = sum_candidate & (~bound_blocked | (t_sum < alpha))
    alpha = jnp.where(sum_first, jnp.minimum(t_sum, 1.0), alpha)
    blocked = bound_blocked | sum_candidate
    stepped = jnp.where(free, x + alpha[None, :] * (z - x), x)
    stepped = jnp.where(
        (index == block[None, :]) & (bound_blocked & ~sum_first)[None, :], 0.0, stepped
    )
    drop = free & (stepped <= 0.0)
    x_inner = jnp.where(blocked[None, :], jnp.where(drop, 0.0, stepped), z)
    free_inner = jnp.where(blocked[None, :], free & ~drop, free)
    return x_inner, free_inner, sum_active | sum_first, blocked, ok


def _outer_phase(a_matrix, c, x, free, sum_active, equality, floor):
    """`simplex_qp_lanes`' outer phase: the most negative multiplier of a bound (or of
    the sum inequality) at x. Returns the working set (free, sum_active) with it
    released, and whether x is optimal (none below -floor)."""
    index = jnp.arange(c.shape[0])[:, None]
    gradient = _matvec(a_matrix, x) - c
    count = jnp.sum(free, axis=0)
    nu = jnp.where(
        sum_active & (count > 0),
        -sum_in_order(jnp.where(free, gradient, 0.0)) / jnp.maximum(count, 1),
        0.0,
    )
    multiplier = jnp.where(free, jnp.inf, gradient + nu[None, :])
    best = jnp.min(multiplier, axis=0)
    release = jnp.argmin(multiplier, axis=0)
    release_sum = ~equality & sum_active & (nu < jnp.minimum(best, -floor))
    release_bound = (best < -floor) & ~release_sum
    optimal = ~release_sum & ~release_bound
    free_outer = free | ((index == release[None, :]) & release_bound[None, :])
    return free_outer, sum_active & ~release_sum, optimal


def _subproblem(hessian, gradient, x0, damping):
    """`numba_one_step._subproblem` on lanes: (A, c) of the damped linearised programme
    (hessian (p, p, n); gradient, x0 (p, n); damping (n,))."""
    p = x0.shape[0]
    diagonal = jnp.stack([hessian[a, a] for a in range(p)])
    largest = jnp.max(diagonal, axis=0)
    damped = _lm.damped_diagonal(diagonal, largest[None, :], damping[None, :])
    eye = jnp.eye(p, dtype=hessian.dtype)[:, :, None]
    a_matrix = hessian * (1.0 - eye) + damped[:, None, :] * eye
    return a_matrix, _matvec(a_matrix, x0) - gradient


def _stacked(jtj, jtf):
    """J^T J (p, p, n) and J^T f (p, n) from their LM-state form (`_normal_equations`:
    nested tuples of (n,) entries, `elementwise_lm.entries`, which the solver's default
    `linear_decrease` reads as they are)."""
    return jnp.stack([jnp.stack(row) for row in jtj]), jnp.stack(jtf)


class _UnmixArgs(NamedTuple):
    """The arguments of the one-step least-squares problem of a chunk of n pixels."""

    terms: Any  # the pixels' `pixel_terms`, (n,) each
    albedo: Any  # (p, bands) the endmembers' w
    refl: Any  # spectra (`_Bands`): observed r [1/sr] (0 where the pixel is not solved)
    weights: Any  # (bands,) 1 / sigma of every band [sr]
    phase: Any  # None, or the endmembers' own phase terms (4, p) + spectra of 1 or all bands
    equality: Any  # traced bool: sum f = 1 (else sum f <= 1)


def _simplex_subproblem(x, args, hessian, gradient, damping, *, carried, active, max_steps, **_):
    """`ElementwiseLevenbergMarquardt`'s `subproblem` hook of the one-step route: the
    damped linearised programme (`_subproblem`) on the simplex, solved by
    `simplex_qp_lanes` from the working set `carried` = (free, sum_active (n,)): the
    fractions allowed to move (those above 0 at a solution; p (n,) flags) and the sum
    constraint's flag, for the `active` lanes only. x: (n, p); hessian, gradient: the
    state's form (`_stacked`). The programme has its own constraints: the solver's
    bounds (`**_`) are not read.

    Returns:
        `Subproblem`: the programme's solution (n, p) (its fractions at a bound exactly
        0), the step to it, solvable where the programme was solved (`QP_OK`), and the
        working set at the solution.
    """
    free, sum_active = carried
    x = x.T
    hessian, gradient = _stacked(hessian, gradient)
    a_matrix, c = _subproblem(hessian, gradient, x, damping)
    point, free, sum_active, code = simplex_qp_lanes(
        a_matrix, c, x, jnp.stack(free), sum_active, active, args.equality, max_steps
    )
    return Subproblem(point.T, (point - x).T, code == QP_OK, (tuple(free), sum_active))


def _band_cost(summary):
    """The cost of every pixel from `_normal_equations`' summary of its residuals."""
    return summary[0]


class _Bands(NamedTuple):
    """Where the band axis of a chunk's spectra is: last, (n, bands), the pixels' spectra
    contiguous (a CPU sums over bands along them: 5x faster than across, measured in
    float64), or first, (bands, n), the pixels on the lanes (an accelerator). Per-pixel
    matrices and vectors keep the pixels last either way."""

    last: bool

    def of_pixels(self, values):
        """(n,) or (..., n) values broadcast against spectra."""
        return values[..., :, None] if self.last else values[..., None, :]

    def of_bands(self, values):
        """(bands,) or (..., bands) values broadcast against spectra."""
        return values[..., None, :] if self.last else values[..., :, None]

    def total(self, spectra):
        """The sum over bands of (..., spectra) -> (..., n)."""
        return jnp.sum(spectra, axis=-1 if self.last else -2)

    def lay_out(self, spectra):
        """(n, bands) spectra (what the host sends) in this layout."""
        return spectra if self.last else spectra.T

    def vmapped(self, function, n_spectra):
        """`function` of n_spectra band values and a pixel's terms, over spectra."""
        per_band = (0,) * n_spectra
        if self.last:
            over_bands = jax.vmap(function, in_axes=per_band + (None,))
            return jax.vmap(over_bands, in_axes=per_band + (0,))
        over_pixels = jax.vmap(function, in_axes=per_band + (0,))
        return jax.vmap(over_pixels, in_axes=per_band + (None,))


def _normal_equations(x, args, key, bands):
    """The residuals' summary, J^T J and J^T f of every lane at fractions x (n, p):
    `_columns_shared` or, with the endmembers' own phase functions, `_columns_mixed`
    give the Jacobian's columns (p, spectra) and the weighted residuals (spectra) in the
    `_Bands` layout. The summary (cost (n,), the largest |residual| (n,)) is what the
    solver reads of the residuals (`_band_cost`; all residuals are 0 where the largest
    is), so that the residuals never leave their layout. J^T J and J^T f come as nested
    tuples of (n,) entries (`_stacked`)."""
    x = x.T
    columns_of = _columns_shared if args.phase is None else _columns_mixed
    residual, columns = columns_of(x, args, key, bands)
    summary = (
        bands.total(residual * residual),
        jnp.max(jnp.abs(residual), axis=-1 if bands.last else 0),
    )
    p = x.shape[0]
    hessian: list[list[Any]] = [[None] * p for _ in range(p)]
    for a in range(p):
        for b in range(a + 1):  # J^T J is symmetric: its lower triangle, mirrored
            hessian[a][b] = hessian[b][a] = bands.total(columns[a] * columns[b])
    gradient = tuple(bands.total(columns[a] * residual) for a in range(p))
    return summary, tuple(tuple(row) for row in hessian), gradient


def _mixed_albedo(x, albedo, bands):
    """w of the mixture (spectra) at fractions x (p, n): sum_a x_a w_a in index order."""
    return sum_in_order(
        [bands.of_bands(albedo[a]) * bands.of_pixels(x[a]) for a in range(x.shape[0])]
    )


@functools.cache
def _model_for(key, bands):
    return bands.vmapped(jax_equations_for(key).reflectance_and_slope, 1)


def _columns_shared(x, args, key, bands):
    """Weighted residuals (spectra) and Jacobian columns (p, spectra) with one phase
    function (`params`') for the mixture."""
    r, slope = _model_for(key, bands)(_mixed_albedo(x, args.albedo, bands), args.terms)
    weights = bands.of_bands(args.weights)
    residual = (r - args.refl) * weights
    columns = (slope * weights)[None] * bands.of_bands(args.albedo)
    return residual, columns


@functools.cache
def _mixture_model_for(key, bands):
    equations = jax_equations_for(key)
    return bands.vmapped(equations.mixture_reflectance_and_slope, 5), equations.mixture_slope


def _columns_mixed(x, args, key, bands):
    """`_columns_shared` with per-endmember phase functions (`numba_one_step.
    _normal_equations_mixed` on lanes); args.phase: (4, p) + spectra of 1 or all
    bands, the `phase.phase_table` terms."""
    albedo, phase = args.albedo, args.phase
    weighted = bands.of_pixels(x) * bands.of_bands(albedo)  # (p, spectra)
    sums = [sum_in_order(weighted * phase[k]) for k in range(4)]  # (spectra) each
    mixture, mixture_slope = _mixture_model_for(key, bands)
    r, h_mu0e_m1, h_mue_m1, common = mixture(_mixed_albedo(x, albedo, bands), *sums, args.terms)
    slope = mixture_slope(
        *phase,
        h_mu0e_m1[None],
        h_mue_m1[None],
        common[None],
        bands.of_pixels(args.terms.scale)[None],
    )  # (p, spectra)
    weights = bands.of_bands(args.weights)
    residual = (r - args.refl) * weights
    columns = slope * bands.of_bands(albedo) * weights[None]
    return residual, columns


# The band axis of the spectra on an accelerator (`_Bands`): first, the pixels on the lanes.
ACCELERATOR_BANDS_LAST = False


def bands_last_on(platform: str) -> bool:
    """Whether the one-step solver keeps the spectra bands-last (`_Bands`) on `platform`."""
    return True if platform == "cpu" else ACCELERATOR_BANDS_LAST


@stored_jit(static_argnames=("max_iter", "max_steps", "key", "bands_last"))
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
    bands_last=True,
):
    """One chunk of the one-step route (jitted; the contract of `numba_one_step.one_step_numba`;
    `phase`: None, or the endmembers' own phase terms (n, p, 1 or bands, 4)), in the
    precision of the inputs (all of one float dtype); `bands_last`: the layout of the
    spectra on the device (`_Bands`, `bands_last_on`).

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
    bands = _Bands(bands_last)
    refl = jnp.where(bands.of_pixels(active), bands.lay_out(refl), 0.0)
    if phase is not None:  # (n, p, 1 or bands, 4) -> (4, p) + spectra
        phase = jnp.transpose(phase, (3, 1, 0, 2) if bands_last else (3, 1, 2, 0))
    args = _UnmixArgs(terms, albedo, refl, band_weights, phase, equality)
    solver = ElementwiseLevenbergMarquardt(
        tol=tol,
        lower=0.0,  # the fractions' bounds, for the record: the subproblem keeps them
        upper=1.0,
        normal_equations=partial(_normal_equations, key=key, bands=bands),
        subproblem=partial(_simplex_subproblem, max_steps=max_steps),
        keep_residuals=False,  # the results need their cost alone
        cost_function=_band_cost,
    )
    x = jnp.broadcast_to(start[None, :], (n, p))
    free = tuple(jnp.broadcast_to(start[a] > 0.0, (n,)) for a in range(p))
    working_set = (free, jnp.broadcast_to(equality, (n,)))
    solution: optx.Solution[Any, Any] = optx.least_squares(
        lambda x, args: _normal_equations(x, args, key, bands)[0],
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
    hessian, gradient = _stacked(state.jtj, state.jtf)
    return {
        "fractions": jnp.where(active[:, None], x, nan),
        "status": jnp.where(active, solved_status, status).astype(jnp.int8),
        "iterations": jnp.where(active, state.iterations, 0),
        "cost": jnp.where(active, state.cost, nan),
        "hessian": jnp.where(active[:, None, None], jnp.transpose(hessian, (2, 0, 1)), nan),
        "gradient": jnp.where(active[:, None], gradient.T, nan),
        "sum_active": jnp.where(active, state.carried[1], False),
    }
