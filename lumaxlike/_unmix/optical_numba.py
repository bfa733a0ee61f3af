"""The numba solver of `unmix` with free grain sizes and npFe0 (`optical`): variable
projection per pixel, Levenberg-Marquardt over (ln D, phi) with the fractions solved on
the simplex at each point (`_fractions`, `simplex_qp`), parallel over blocks of `BLOCK`
pixels. float64. The rules are `optical`'s (held parameters, the null-space step, the
projection, the inner solve) and `lm_rules`'s (acceptance, damping, convergence);
`optical_jax` is the twin.

The slab's terms that depend on the band and the endmember only (S_e, S_i, alpha_host,
dalpha/df, <D>/D: `slab_equations.slab_band_terms`) are computed once per block of
pixels into a table (bands, p, 5); each outer evaluation then costs one
`slab_slopes_from_terms` per band and endmember (`_endmember_rows`), and each step of
the inner solve one mixture per band (`_mixture`).

The kernels take their arguments grouped in plain tuples (unpacked on their first lines):
problem = (refl (pixels, bands), to_sun, to_sensor, normal (pixels, 3)); model =
`kernel_params`'s (scalars, legendre, use_legendre); optics = (n, k (p, bands),
wavelength (bands,), s (p,), iron_n, iron_k (bands,), density (p,), weights (bands,));
settings = (start (pixels, 2p + 1), lower, upper (2p + 1,), fixed (2p + 1,) bool,
max_iter, tol); outputs = the arrays of `solve_optical_numba`'s dict in its order.
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np

from .._compat import numba_internals
from .._inverse import lm_rules, numba_lm
from .._inverse.lm_rules import COST_TIE
from .._inverse.numba_lm import lm_for
from .._model import slab_equations
from .._model._backends import numba_equations, retarget_to_numba, slab_twins
from .._model.family import DEFAULT_KEY, numba_equations_for
from .._model.numba_cache import cached_njit, compile_variant, njit_variant
from .._model.numba_model import MODEL_MODULES, as_kernel_array, kernel_params
from .._model.numba_threads import run_in_blocks
from .._status import Status
from . import numba_one_step, optical
from . import simplex_qp as _qp_module
from .numba_one_step import pixel_status
from .simplex_qp import QP_OK, scaled_cholesky, scaled_solve, simplex_qp

__all__ = ["solve_optical_numba", "project_simplex"]

BLOCK = 64
_rules = retarget_to_numba(lm_rules)
damped_diagonal = _rules.damped_diagonal
pinned = _rules.pinned
settled = numba.njit(error_model="numpy")(optical.settled)
reflectance_and_slope = numba_equations.reflectance_and_slope
band_terms = slab_twins("numba").slab_band_terms
slopes_from_terms = slab_twins("numba").slab_slopes_from_terms

CONVERGED = int(Status.CONVERGED)
MAX_ITER = int(Status.MAX_ITER)


@numba.njit(error_model="numpy")
def project_simplex(v, p):
    """v[:p] projected (Euclidean) onto {f >= 0, sum f = 1}, in place; values already at
    0 that the projection keeps at or below 0 stay exactly 0."""
    ordered = np.sort(v[:p])[::-1]
    total = 0.0
    tau = 0.0
    for i in range(p):
        total += ordered[i]
        candidate = (total - 1.0) / (i + 1)
        if ordered[i] - candidate > 0.0:
            tau = candidate
    tau = max(tau, 0.0)
    for i in range(p):
        v[i] = max(v[i] - tau, 0.0)


@numba.njit(error_model="numpy")
def _band_table(optics):
    """`slab_band_terms` of every band and endmember, (bands, p, 5)."""
    n, k, wavelength, _, iron_n, iron_k, density, _ = optics
    table = np.empty((n.shape[1], n.shape[0], 5))
    for band in range(n.shape[1]):
        for j in range(n.shape[0]):
            terms = band_terms(
                n[j, band], k[j, band], wavelength[band], iron_n[band], iron_k[band], density[j]
            )
            for t in range(5):
                table[band, j, t] = terms[t]
    return table


@numba.njit(error_model="numpy")
def _endmember_rows(x, p, table, s, raw):
    """The endmembers' w_j, dw_j/dln D_j and dw_j/dphi per band at x's grain sizes and
    phi into raw (3p, bands) (rows j, p + j, 2p + j); table from `_band_table`."""
    phi = x[2 * p]
    for j in range(p):
        grain = math.exp(x[p + j])
        for band in range(raw.shape[1]):
            band_j = (
                table[band, j, 0],
                table[band, j, 1],
                table[band, j, 2],
                table[band, j, 3],
                table[band, j, 4],
            )
            w, dw_dd, dw_df, _ = slopes_from_terms(band_j, grain, s[j], phi, 0.0)
            raw[j, band] = w
            raw[p + j, band] = dw_dd * grain
            raw[2 * p + j, band] = dw_df


@numba.njit(error_model="numpy")
def _mixture(f, p, raw, terms, refl, weights, res, slope, a_matrix, gradient):
    """Weighted cost at the fractions f (the endmembers' w in raw, `_endmember_rows`),
    with the weighted residual and dr/dw per band into res and slope (bands,), and the
    fractions' normal equations J_f^T J_f into a_matrix (p, p), J_f^T f into gradient."""
    for a in range(p):
        gradient[a] = 0.0
        for b in range(p):
            a_matrix[a, b] = 0.0
    cost = 0.0
    for band in range(refl.shape[0]):
        w_mix = 0.0
        for j in range(p):
            w_mix += f[j] * raw[j, band]
        r, d = reflectance_and_slope(w_mix, terms)
        residual = (r - refl[band]) * weights[band]
        d *= weights[band]
        cost += residual * residual
        res[band] = residual
        slope[band] = d
        for a in range(p):
            column = d * raw[a, band]
            gradient[a] += column * residual
            for b in range(a + 1):
                a_matrix[a, b] += column * d * raw[b, band]
    for a in range(p):
        for b in range(a):
            a_matrix[b, a] = a_matrix[a, b]
    return cost


@numba.njit(error_model="numpy")
def _dot(rows, a, b):
    """sum over bands of rows[a] rows[b], in four interleaved partial sums (independent
    chains of additions: about four times the throughput of one)."""
    n = rows.shape[1]
    s0 = s1 = s2 = s3 = 0.0
    last = n - n % 4
    for band in range(0, last, 4):
        s0 += rows[a, band] * rows[b, band]
        s1 += rows[a, band + 1] * rows[b, band + 1]
        s2 += rows[a, band + 2] * rows[b, band + 2]
        s3 += rows[a, band + 3] * rows[b, band + 3]
    for band in range(last, n):
        s0 += rows[a, band] * rows[b, band]
    return (s0 + s1) + (s2 + s3)


@numba.njit(error_model="numpy")
def _normal_equations(x, p, raw, res, slope, rows, hessian, gradient):
    """J^T J and J^T f of all of x = (f, ln D, phi) at x, from the endmembers' rows raw
    (`_endmember_rows`) and the weighted residual and dr/dw at x's fractions (res,
    slope: `_mixture`). Scratch: rows (2p + 1, bands) holds J^T, one row per parameter.
    J^T J (both triangles) and J^T f are sums over bands (`_dot`): the inner loops run
    along the bands, not the 2p + 1 parameters."""
    size = 2 * p + 1
    for band in range(res.shape[0]):
        d = slope[band]
        dphi = 0.0
        for j in range(p):
            rows[j, band] = d * raw[j, band]
            rows[p + j, band] = d * x[j] * raw[p + j, band]
            dphi += x[j] * raw[2 * p + j, band]
        rows[2 * p, band] = d * dphi
        rows[size, band] = res[band]
    for a in range(size):
        gradient[a] = _dot(rows, a, size)
        for b in range(a + 1):
            hessian[a, b] = _dot(rows, a, b)
            hessian[b, a] = hessian[a, b]


@numba.njit(error_model="numpy")
def _inner_work(p, bands):
    """The fraction solve's scratch (`_fractions`): (res, slope, a_matrix, gradient) at
    the fractions and at their trial, the trial, the programme's (c, z, free, sum state)
    and `simplex_qp`'s scratch."""
    return (
        (np.empty(bands), np.empty(bands), np.empty((p, p)), np.empty(p)),
        (np.empty(bands), np.empty(bands), np.empty((p, p)), np.empty(p)),
        np.empty(p),
        (np.empty(p), np.empty(p), np.empty(p, np.bool_), np.empty(1, np.bool_)),
        (np.empty((p, p)), np.empty((p, p)), np.empty(p), np.empty(p), np.empty(p)),
    )


@numba.njit(error_model="numpy")
def _take(source, target):
    """The fractions' evaluation `source` (res, slope, a_matrix, gradient) into `target`."""
    target[0][:] = source[0]
    target[1][:] = source[1]
    target[2][:, :] = source[2]
    target[3][:] = source[3]


@numba.njit(error_model="numpy")
def _fractions(x, p, raw, terms, refl, weights, tol, inner):
    """The fractions of x (x[:p], in place) that minimise the cost at x's grain sizes and
    phi (`optical`'s FRACTION_TIE and step counts): Gauss-Newton on the simplex, each step the
    programme of `simplex_qp` on J_f^T J_f, halved until the cost does not rise. Returns
    the cost; inner[0] holds res, slope (and J_f's normal equations) at the fractions."""
    here, there, trial, qp_state, qp_scratch = inner
    res, slope, a_matrix, gradient = here
    c, z, free, sum_state = qp_state
    cost = _mixture(x, p, raw, terms, refl, weights, res, slope, a_matrix, gradient)
    for _ in range(optical.MAX_FRACTION_STEPS):
        for a in range(p):
            c[a] = -gradient[a]
            for b in range(p):
                c[a] += a_matrix[a, b] * x[b]
            z[a] = x[a]
            free[a] = x[a] > 0.0
        sum_state[0] = True
        system, factor, scale, rhs, y = qp_scratch
        if (
            simplex_qp(
                a_matrix, c, z, free, sum_state, True, 6 * p + 10, system, factor, scale, rhs, y
            )
            != QP_OK
        ):
            break
        size, decrease = _size_and_decrease_f(z, x, gradient, a_matrix, p)
        if size <= tol or decrease <= optical.FRACTION_TIE * cost:
            break  # a tie: the fractions are solved
        t = 1.0
        moved = False
        for _ in range(optical.MAX_HALVINGS):
            for a in range(p):
                trial[a] = x[a] + t * (z[a] - x[a])
            cost_t = _mixture(trial, p, raw, terms, refl, weights, *there)
            if cost_t <= cost:
                moved = True
                break
            t *= 0.5
        if not moved:
            break
        cost = cost_t
        x[:p] = trial
        _take(there, here)
    return cost


@numba.njit(error_model="numpy")
def _size_and_decrease_f(z, x, gradient, a_matrix, p):
    """The largest |z - f| and the decrease of the linearised cost along it."""
    size = 0.0
    decrease = 0.0
    for a in range(p):
        d_a = z[a] - x[a]
        size = max(size, abs(d_a))
        decrease -= 2.0 * d_a * gradient[a]
        for b in range(p):
            decrease -= d_a * a_matrix[a, b] * (z[b] - x[b])
    return size, decrease


@numba.njit(error_model="numpy")
def _held(x, gradient, lower, upper, fixed, p, out):
    """What an outer step leaves where it is, into out (2p + 1,) bool: a fraction at 0
    (the fraction solve put it there), a grain size fixed, of an absent endmember or
    `pinned` at a bound, phi fixed or pinned (`optical`'s outer problem)."""
    for j in range(p):
        out[j] = not x[j] > 0.0
    for a in range(p, 2 * p + 1):
        out[a] = fixed[a] or pinned(x[a], lower[a], upper[a], gradient[a])
        if a < 2 * p and not x[a - p] > 0.0:
            out[a] = True


@numba.njit(error_model="numpy")
def _reduced_system(x, hessian, gradient, damping, held, p, system, rhs):
    """The system in the null space of sum f = 1, relative to the largest fraction not
    held (returned, -1 if none), damped in ln D and phi only (`optical`: the fractions'
    part of the step is their linear prediction, the start of the fraction solve):
    B = T^T A T (identity rows for what does not move) into system, -T^T g into rhs."""
    size = 2 * p + 1
    reference = -1
    best = -math.inf
    for j in range(p):
        if not held[j] and x[j] > best:
            best = x[j]
            reference = j
    largest = 0.0
    for a in range(size):
        largest = max(largest, hessian[a, a])
    for a in range(size):
        moves_a = not held[a] and a != reference
        ref_a = reference >= 0 and a < p
        for b in range(size):
            moves_b = not held[b] and b != reference
            value = 0.0
            if moves_a and moves_b:
                ref_b = reference >= 0 and b < p
                value = hessian[a, b]
                if a == b and a >= p:
                    value = damped_diagonal(hessian[a, a], largest, damping)
                if ref_a:
                    value -= hessian[reference, b]
                if ref_b:
                    value -= hessian[a, reference]
                if ref_a and ref_b:
                    value += hessian[reference, reference]
            system[a, b] = value
        if moves_a:
            rhs[a] = -gradient[a] + (gradient[reference] if ref_a else 0.0)
        else:
            rhs[a] = 0.0
            system[a, a] = 1.0
    return reference


@numba.njit(error_model="numpy")
def _step(x, hessian, gradient, damping, held, bounds, p, scratch, out, reach=math.inf):
    """The projected damped Gauss-Newton trial point into out; False if singular.
    bounds = (lower, upper); scratch = (system, factor, scale, rhs, y) (`_work`)."""
    lower, upper = bounds
    system, factor, scale, rhs, y = scratch
    size = 2 * p + 1
    reference = _reduced_system(x, hessian, gradient, damping, held, p, system, rhs)
    if not scaled_cholesky(system, factor, scale):
        return False
    scaled_solve(factor, scale, rhs, y)
    moved = 0.0
    for a in range(size):
        step = y[a] if (not held[a] and a != reference) else 0.0
        out[a] = x[a] + step
        if a < p:
            moved += step
    if reference >= 0:
        out[reference] -= moved
    project_simplex(out, p)
    for a in range(p, size):
        out[a] = min(max(out[a], lower[a]), upper[a])
        if a < 2 * p:  # ln D moves by at most `reach` (`optical.MAX_LN_STEP`)
            out[a] = min(max(out[a], x[a] - reach), x[a] + reach)
    return True


@numba.njit(error_model="numpy")
def _decrease(x, trial, hessian, gradient):
    """-(2 d.g + d.H d) along d = trial - x; also the largest |d|."""
    size = x.shape[0]
    predicted = 0.0
    largest = 0.0
    for a in range(size):
        d_a = trial[a] - x[a]
        largest = max(largest, abs(d_a))
        predicted -= 2.0 * d_a * gradient[a]
        for b in range(size):
            predicted -= d_a * hessian[a, b] * (trial[b] - x[b])
    return predicted, largest


@numba.njit(error_model="numpy")
def _work(size, bands):
    """One block's scratch: (x, trial, newton, hessian, gradient, hessian_trial,
    gradient_trial, rows, held, (system, factor, scale, rhs, y), raw, inner, (cost,
    cost_trial, metric)) (rows: `_normal_equations`', raw: `_endmember_rows`', inner:
    `_inner_work`; the last three (1,) each, `_solve_pixel`'s)."""
    p = (size - 1) // 2
    matrix = (size, size)
    return (
        np.empty(size),
        np.empty(size),
        np.empty(size),
        np.empty(matrix),
        np.empty(size),
        np.empty(matrix),
        np.empty(size),
        np.empty((size + 1, bands)),
        np.empty(size, np.bool_),
        (np.empty(matrix), np.empty(matrix), np.empty(size), np.empty(size), np.empty(size)),
        np.empty((3 * p, bands)),
        _inner_work(p, bands),
        (np.empty(1), np.empty(1), np.empty(1)),
    )


# `numba_lm`'s pieces. A state is (x, hessian, gradient, out, reach, cost): the point,
# J^T J and J^T f there, where `_step` writes the step's point from it (the current
# state's: the trial's x; the trial's: `newton`), how far that step moves ln D (the
# current state's: `optical.MAX_LN_STEP`; the trial's Gauss-Newton step: unbounded) and
# the state's cost (1,). steps = (lower, upper, fixed, p, held, scratch, metric, bands):
# metric (1,) the trial's d^T J^T J d (`_newton`), bands the pixel's count.
@numba.njit(error_model="numpy")
def _evaluate(x, hessian, gradient, out, reach, cost, p, terms, table, optics, tol, work):
    """`numba_lm`'s evaluate: at x's grain sizes and phi, the endmembers' rows, the
    fractions solved into x (`_fractions`), J^T J and J^T f of all of x there; data =
    (p, terms, table, optics (with the pixel's refl last), tol, work). The cost, also
    into `cost`."""
    s, weights = optics[3], optics[7]
    rows, raw, inner = work[7], work[10], work[11]
    _endmember_rows(x, p, table, s, raw)
    cost[0] = _fractions(x, p, raw, terms, optics[8], weights, tol, inner)
    _normal_equations(x, p, raw, inner[0][0], inner[0][1], rows, hessian, gradient)
    return cost[0]


@numba.njit(error_model="numpy")
def _solve(damping, x, hessian, gradient, out, reach, cost, lower, upper, fixed, p, held, *rest):
    """`numba_lm`'s solve: what stays where it is (`_held`), then the projected damped
    step's point into `out` (`_step`); False where its system is singular."""
    scratch = rest[0]
    _held(x, gradient, lower, upper, fixed, p, held)
    return _step(x, hessian, gradient, damping, held, (lower, upper), p, scratch, out, reach)


@numba.njit(error_model="numpy")
def _trial(x, hessian, gradient, out, reach, cost, trial, *rest):
    """`numba_lm`'s trial (`_solve` wrote the trial point): (largest |step|, decrease of
    the linearised cost along it); the trial's metric reset (infinite until `_newton`)."""
    metric = rest[-2]
    metric[0] = math.inf
    predicted, size = _decrease(x, trial, hessian, gradient)
    return size, predicted


@numba.njit(error_model="numpy")
def _moved(size, x, hessian, gradient, out, reach, cost, trial, *rest):
    """`numba_lm`'s measure: the largest |step| to the trial point once its fractions
    are solved (`_evaluate`)."""
    step_size = 0.0
    for a in range(x.shape[0]):
        step_size = max(step_size, abs(trial[a] - x[a]))
    return step_size


@numba.njit(error_model="numpy")
def _newton(trial, hessian, gradient, newton, reach, cost, lower, upper, fixed, p, *rest):
    """`numba_lm`'s newton (of an accepted trial): (newton_size, newton_decrease) of the
    undamped projected step d at the trial point, `_solve`'s: its largest |d| and the
    decrease of the linearised cost along it, infinite where the bounds cut it (not the
    last step); d^T J^T J d into `metric` (for `optical.settled`; infinite where d
    moves ln D or phi onto a bound)."""
    metric = rest[-2]
    newton_decrease, newton_size = _decrease(trial, newton, hessian, gradient)
    value = 0.0
    for a in range(trial.shape[0]):
        for b in range(trial.shape[0]):
            value += (newton[a] - trial[a]) * hessian[a, b] * (newton[b] - trial[b])
        if a >= p and newton[a] != trial[a] and (newton[a] <= lower[a] or newton[a] >= upper[a]):
            value = math.inf  # a step onto a bound: taken before `settled` (`optical`)
    metric[0] = value
    if newton_decrease < -COST_TIE * cost[0]:  # cut by the bounds: not the last step
        newton_decrease = math.inf
    return newton_size, newton_decrease


@numba.njit(error_model="numpy")
def _take_trial(trial, hessian_t, gradient_t, newton, reach_t, cost_t, x, hessian, gradient, *rest):
    """`numba_lm`'s take: the trial's x, J^T J and J^T f made the current ones."""
    for a in range(x.shape[0]):
        x[a] = trial[a]
        gradient[a] = gradient_t[a]
        for b in range(x.shape[0]):
            hessian[a, b] = hessian_t[a, b]


@numba.njit(error_model="numpy")
def _settled(accept, cost_trial, trial, hessian, gradient, newton, reach, cost, *steps):
    """`numba_lm`'s stop: `optical.settled` from `_newton`'s metric."""
    p, metric, bands = steps[3], steps[6], steps[7]
    return settled(accept, metric[0], cost_trial, bands, p)


@numba.njit(error_model="numpy", inline="always")
def _start(cost):
    """`numba_lm`'s start: a start of cost 0 is the solution; lambda
    `optical.START_DAMPING` (the outer LM starts damped), nu 2."""
    return cost == 0.0, optical.START_DAMPING, 2.0


def _lm(variant, evaluate):
    return lm_for(
        variant,
        evaluate=evaluate,
        solve=_solve,
        trial=_trial,
        newton=_newton,
        take=_take_trial,
        start=_start,
        measure=_moved,
        stop=_settled,
        newton_where_rejected=False,
    )


_levenberg_marquardt = _lm("optical", _evaluate)


@numba.njit(error_model="numpy")
def _solve_pixel(refl, terms, table, optics, settings, start, work):
    """Variable projection for one pixel (refl (bands,)) from start: Levenberg-Marquardt
    over ln D and phi (`numba_lm.levenberg_marquardt` over this module's pieces), the
    fractions solved at every point (`optical`). Returns (cost, iterations, done); x,
    hessian and gradient at the end in work (`_work`)."""
    _, lower, upper, fixed, max_iter, tol = settings
    x, trial, newton, hessian, gradient, hessian_t, gradient_t, _, held, scratch = work[:10]
    cost, cost_trial, metric = work[12]
    p = optics[3].shape[0]
    optics = optics[:8] + (refl,)
    for a in range(2 * p + 1):
        x[a] = start[a]
    done, iteration, cost_end = _levenberg_marquardt(
        (p, terms, table, optics, tol, work),
        (lower, upper, fixed, p, held, scratch, metric, refl.shape[0]),
        (x, hessian, gradient, trial, optical.MAX_LN_STEP, cost),
        (trial, hessian_t, gradient_t, newton, math.inf, cost_trial),
        (max_iter, tol),
    )
    return cost_end, iteration, done


@numba.njit(error_model="numpy")
def _write_pixel(pixel, status, iterations, cost, work, outputs):
    """One pixel's results into outputs; NaN (and no iterations) where status is not
    CONVERGED or MAX_ITER."""
    x_out, status_out, iterations_out, cost_out, hessian_out, gradient_out = outputs
    x, hessian, gradient = work[0], work[3], work[4]
    solved = status == CONVERGED or status == MAX_ITER
    status_out[pixel] = status
    iterations_out[pixel] = iterations if solved else 0
    cost_out[pixel] = cost if solved else math.nan
    for a in range(x.shape[0]):
        x_out[pixel, a] = x[a] if solved else math.nan
        gradient_out[pixel, a] = gradient[a] if solved else math.nan
        for b in range(x.shape[0]):
            hessian_out[pixel, a, b] = hessian[a, b] if solved else math.nan


@numba.njit(error_model="numpy")
def _optical_block(block, problem, model, optics, settings, outputs):
    """The pixels of one block (the argument groups of the module docstring)."""
    refl = problem[0]
    start = settings[0]
    work = _work(2 * optics[0].shape[0] + 1, refl.shape[1])
    table = _band_table(optics)
    for pixel in range(block * BLOCK, min(refl.shape[0], (block + 1) * BLOCK)):
        status, terms = pixel_status(pixel, problem, model)
        if status >= 0:
            _write_pixel(pixel, status, 0, math.nan, work, outputs)
            continue
        cost, iterations, done = _solve_pixel(
            refl[pixel], terms, table, optics, settings, start[pixel], work
        )
        _write_pixel(pixel, CONVERGED if done else MAX_ITER, iterations, cost, work, outputs)


@cached_njit(
    inlines=(
        lm_rules,
        numba_lm,
        numba_internals,
        slab_equations,
        optical,
        numba_one_step,
        _qp_module,
        *MODEL_MODULES,
    ),
    nogil=True,
    error_model="numpy",
)
def _optical_kernel(first, last, problem, model, optics, settings, outputs):
    """Blocks first to last - 1 of `BLOCK` pixels (`numba_threads.run_in_blocks`); the
    argument groups of the module docstring."""
    for block in range(first, last):
        _optical_block(block, problem, model, optics, settings, outputs)


@functools.cache
def _kernel_for(key, reflections: str, mean_path: str):
    if (key, reflections, mean_path) == (DEFAULT_KEY, "hapke1993", "hapke2001"):
        return _optical_kernel
    equations = numba_equations if key == DEFAULT_KEY else numba_equations_for(key)
    tag = f"{key.name}_{reflections}_{mean_path}".replace("-", "_")
    mixture = njit_variant(_mixture, tag, reflectance_and_slope=equations.reflectance_and_slope)
    evaluate = njit_variant(
        _evaluate, tag, _fractions=njit_variant(_fractions, tag, _mixture=mixture)
    )
    block = njit_variant(
        _optical_block,
        tag,
        pixel_status=njit_variant(pixel_status, tag, pixel_terms=equations.pixel_terms),
        _band_table=njit_variant(
            _band_table,
            tag,
            band_terms=slab_twins("numba", reflections, mean_path).slab_band_terms,
        ),
        _solve_pixel=njit_variant(
            _solve_pixel, tag, _levenberg_marquardt=_lm(f"optical_{tag}", evaluate)
        ),
    )
    return compile_variant(_optical_kernel, tag, _optical_block=block)


def solve_optical_numba(problem, params, endmembers, weights, bounds, settings, pad_to=None):
    """One chunk: problem = (refl (pixels, bands), to_sun, to_sensor, normal (pixels, 3)),
    bounds = (start, lower, upper, fixed) with `start` (2p + 1,) or one per pixel
    (pixels, 2p + 1), settings = (max_iter, tol). A dict of x (pixels, 2p + 1), status
    int8, iterations, cost, hessian, gradient (J^T J and J^T f at x); NaN where
    unsolved. (`pad_to`: `optical_jax`'s, unused.)"""
    optical = endmembers.optical
    refl = problem[0]
    start, lower, upper, fixed = bounds
    n_pixels = refl.shape[0]
    size = 2 * endmembers.n_endmembers + 1
    out = {
        "x": np.empty((n_pixels, size)),
        "status": np.empty(n_pixels, np.int8),
        "iterations": np.empty(n_pixels, np.int32),
        "cost": np.empty(n_pixels),
        "hessian": np.empty((n_pixels, size, size)),
        "gradient": np.empty((n_pixels, size)),
    }
    if n_pixels == 0:
        return out
    start = np.broadcast_to(start, (n_pixels, size))  # one start, or one per pixel
    optics = (
        optical.n,
        optical.k,
        endmembers.wavelengths,
        optical.internal_scattering,
        optical.iron_n,
        optical.iron_k,
        endmembers.density,
        weights,
    )
    run_in_blocks(
        _kernel_for(params.model_key, optical.reflections, optical.mean_path),
        (n_pixels + BLOCK - 1) // BLOCK,
        tuple(as_kernel_array(a) for a in problem),
        tuple(kernel_params(params)),
        tuple(as_kernel_array(a) for a in optics),
        (
            *(as_kernel_array(a) for a in (start, lower, upper)),
            np.require(fixed, np.bool_, ("C", "W")),
            int(settings[0]),
            float(settings[1]),
        ),
        tuple(out.values()),
    )
    return out
