"""The numba kernel of `unmix`'s one-step route: Levenberg-Marquardt in reflectance space
over the mixture's cross-section fractions, each step a programme on the simplex
(`simplex_qp`); parallel over blocks of `numba_unmix.BLOCK` pixels
(`numba_threads.run_in_blocks`; scratch allocated once per block). float64. The two-step
route and the covariance are `numba_unmix`'s.
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np

from .._compat import numba_internals
from .._inverse import lm_rules, numba_lm
from .._inverse.numba_lm import lm_for
from .._model._backends import numba_equations, retarget_to_numba
from .._model.family import DEFAULT_KEY, ModelKey, numba_equations_for
from .._model.numba_cache import cached_njit, compile_variant, njit_variant
from .._model.numba_model import MODEL_MODULES, as_kernel_array, kernel_params, model_scalars
from .._model.numba_threads import run_in_blocks
from .._status import Status
from . import numba_unmix
from . import simplex_qp as _qp_module
from .numba_unmix import BLOCK
from .simplex_qp import QP_OK, simplex_qp

__all__ = ["one_step_numba"]

_rules = retarget_to_numba(lm_rules)
damped_diagonal = _rules.damped_diagonal
pixel_terms = numba_equations.pixel_terms
reflectance_and_slope = numba_equations.reflectance_and_slope
mixture_reflectance_and_slope = numba_equations.mixture_reflectance_and_slope
mixture_slope = numba_equations.mixture_slope

CONVERGED = int(Status.CONVERGED)
MAX_ITER = int(Status.MAX_ITER)
INVALID_GEOMETRY = int(Status.INVALID_GEOMETRY)
NONFINITE_INPUT = int(Status.NONFINITE_INPUT)


@numba.njit(error_model="numpy")
def _zero(hessian, gradient):
    """J^T J and J^T f set to zero before a pixel's bands are summed into them."""
    p = gradient.shape[0]
    for a in range(p):
        gradient[a] = 0.0
        for b in range(p):
            hessian[a, b] = 0.0


@numba.njit(error_model="numpy")
def _mirror_lower(hessian):
    """The upper triangle of J^T J copied from its lower one (where the sums went)."""
    p = hessian.shape[0]
    for a in range(p):
        for b in range(a):
            hessian[b, a] = hessian[a, b]


@numba.njit(error_model="numpy")
def _normal_equations(x, terms, albedo, phase, refl, weights, hessian, gradient, column):
    """Cost sum_k ((r_k - obs_k) / sigma_k)^2 at fractions x, and J^T J, J^T f, with the
    phase function shared by all endmembers (`phase` and the scratch `column` unused)."""
    p, n_bands = albedo.shape
    _zero(hessian, gradient)
    cost = 0.0
    for k in range(n_bands):
        w_mix = 0.0
        for a in range(p):
            w_mix += x[a] * albedo[a, k]
        r, slope = reflectance_and_slope(w_mix, terms)
        weight = weights[k]
        residual = (r - refl[k]) * weight
        cost += residual * residual
        d = slope * weight
        for a in range(p):
            column_a = d * albedo[a, k]
            gradient[a] += column_a * residual
            for b in range(a + 1):
                hessian[a, b] += column_a * d * albedo[b, k]
    _mirror_lower(hessian)
    return cost


@numba.njit(error_model="numpy")
def _normal_equations_mixed(x, terms, albedo, phase, refl, weights, hessian, gradient, column):
    """`_normal_equations` with per-endmember phase functions: the mixture's phase terms
    are sum_j f_j w_j X_j / w_mix, so dr_k/df_j = w_jk `mixture_slope`: the change of
    the mixture's phase function with f_j included.

    phase: (p, 1 or bands, 4) the pixel's `phase.phase_table`; column: scratch (p,).
    """
    p, n_bands = albedo.shape
    per_band = phase.shape[1] > 1
    _zero(hessian, gradient)
    cost = 0.0
    for k in range(n_bands):
        slot = k if per_band else 0
        w_mix = 0.0
        sum_sh = 0.0
        sum_mu0e = 0.0
        sum_mue = 0.0
        sum_bar = 0.0
        for a in range(p):
            weighted = x[a] * albedo[a, k]
            w_mix += weighted
            sum_sh += weighted * phase[a, slot, 0]
            sum_mu0e += weighted * phase[a, slot, 1]
            sum_mue += weighted * phase[a, slot, 2]
            sum_bar += weighted * phase[a, slot, 3]
        r, h_mu0e_m1, h_mue_m1, common = mixture_reflectance_and_slope(
            w_mix, sum_sh, sum_mu0e, sum_mue, sum_bar, terms
        )
        weight = weights[k]
        residual = (r - refl[k]) * weight
        cost += residual * residual
        for a in range(p):
            column[a] = (
                weight
                * albedo[a, k]
                * mixture_slope(
                    phase[a, slot, 0],
                    phase[a, slot, 1],
                    phase[a, slot, 2],
                    phase[a, slot, 3],
                    h_mu0e_m1,
                    h_mue_m1,
                    common,
                    terms.scale,
                )
            )
        for a in range(p):
            gradient[a] += column[a] * residual
            for b in range(a + 1):
                hessian[a, b] += column[a] * column[b]
    _mirror_lower(hessian)
    return cost


@numba.njit(error_model="numpy")
def _pixel_normal_equations(
    x, hessian, gradient, free, sum_state, terms, albedo, phase, refl, weights, column
):
    """`_normal_equations_mixed` where the endmembers have their own phase functions (the
    pixel's `phase` has a row per endmember), `_normal_equations` otherwise (no rows):
    one kernel serves both, the shared case running exactly its own code. `numba_lm`'s
    evaluate: the state (x, hessian, gradient, free, sum_state) first, then the data."""
    if phase.shape[0] > 0:
        return _normal_equations_mixed(
            x, terms, albedo, phase, refl, weights, hessian, gradient, column
        )
    return _normal_equations(x, terms, albedo, phase, refl, weights, hessian, gradient, column)


@numba.njit(error_model="numpy", inline="always")
def _subproblem(hessian, gradient, x0, damping, a_matrix, c):
    """The damped linearised subproblem at x0 as a programme in the new point x:
    A = J^T J + lambda D (`lm_rules.damped_diagonal`), c = A x0 - J^T f."""
    p = x0.shape[0]
    largest = 0.0
    for a in range(p):
        largest = max(largest, hessian[a, a])
    for a in range(p):
        for b in range(p):
            a_matrix[a, b] = hessian[a, b]
        a_matrix[a, a] = damped_diagonal(hessian[a, a], largest, damping)
    for a in range(p):
        value = -gradient[a]
        for b in range(p):
            value += a_matrix[a, b] * x0[b]
        c[a] = value


# The steps below are inlined by numba into their callers (``inline="always"``):
# as calls, with their tuples of arrays, they cost the kernel ~5 % of its time.
@numba.njit(error_model="numpy", inline="always")
def _block_scratch(p):
    """A block's working arrays for p endmembers: the states (fractions, free flags, sum
    constraint active) at x, at the trial and at the Newton point from the trial, J^T J
    and J^T f at x and at the trial, the subproblem (A, c), `simplex_qp`'s scratch and a
    column."""
    states = (
        (np.empty(p), np.empty(p, np.bool_), np.empty(1, np.bool_)),
        (np.empty(p), np.empty(p, np.bool_), np.empty(1, np.bool_)),
        (np.empty(p), np.empty(p, np.bool_), np.empty(1, np.bool_)),
    )
    equations = ((np.empty((p, p)), np.empty(p)), (np.empty((p, p)), np.empty(p)))
    subproblem = (np.empty((p, p)), np.empty(p))
    qp_scratch = (np.empty((p, p)), np.empty((p, p)), np.empty(p), np.empty(p), np.empty(p))
    return states, equations, subproblem, qp_scratch, np.empty(p)


@numba.njit(error_model="numpy", inline="always")
def input_status(pixel, refl, to_sun, to_sensor, normal):
    """-1 (solvable so far), or NONFINITE_INPUT for a pixel with a non-finite vector
    component or reflectance."""
    status = -1
    for k in range(3):
        if not (
            math.isfinite(to_sun[pixel, k])
            and math.isfinite(to_sensor[pixel, k])
            and math.isfinite(normal[pixel, k])
        ):
            status = NONFINITE_INPUT
    for k in range(refl.shape[1]):
        if not math.isfinite(refl[pixel, k]):
            status = NONFINITE_INPUT
    return status


@numba.njit(error_model="numpy")
def pixel_status(pixel, problem, model):
    """(-1, or NONFINITE_INPUT / INVALID_GEOMETRY; the pixel's `pixel_terms`); problem =
    (refl, to_sun, to_sensor, normal), model = `kernel_params`'s."""
    refl, to_sun, to_sensor, normal = problem
    scalars, legendre, use_legendre = model
    status = input_status(pixel, refl, to_sun, to_sensor, normal)
    terms = pixel_terms(
        to_sun[pixel],
        to_sensor[pixel],
        normal[pixel],
        *model_scalars(scalars),
        legendre,
        use_legendre,
    )
    if status < 0 and not math.isfinite(terms.scale):
        status = INVALID_GEOMETRY
    return status, terms


@numba.njit(error_model="numpy", inline="always")
def _size_and_decrease(new, x, gradient, hessian):
    """The largest |step| of new - x, and the decrease of the linearised cost along it,
    -(2 step^T g + step^T H step)."""
    size = 0.0
    decrease = 0.0
    for a in range(x.shape[0]):
        step_a = new[a] - x[a]
        size = max(size, abs(step_a))
        decrease -= 2.0 * step_a * gradient[a]
        for b in range(x.shape[0]):
            decrease -= step_a * hessian[a, b] * (new[b] - x[b])
    return size, decrease


@numba.njit(error_model="numpy", inline="always")
def _accept(trial, trial_sum, hessian_trial, gradient_trial, x, sum_state, hessian, gradient):
    """The trial's fractions, sum state, J^T J and J^T f made the current ones."""
    for a in range(x.shape[0]):
        x[a] = trial[a]
        gradient[a] = gradient_trial[a]
        for b in range(x.shape[0]):
            hessian[a, b] = hessian_trial[a, b]
    sum_state[0] = trial_sum[0]


@numba.njit(error_model="numpy", inline="always")
def _write_pixel(pixel, outputs, status, iteration, cost, sum_active, x, hessian, gradient):
    """A pixel's outputs; for a pixel not solved (status an input's) NaN fractions, cost
    and normal equations, as `x` and `equations` are not read."""
    fractions_out, status_out, iterations_out, cost_out = outputs[:4]
    hessian_out, gradient_out, sum_out = outputs[4:]
    solved = status == CONVERGED or status == MAX_ITER
    status_out[pixel] = status
    iterations_out[pixel] = iteration
    cost_out[pixel] = cost if solved else math.nan
    sum_out[pixel] = sum_active
    for a in range(x.shape[0]):
        fractions_out[pixel, a] = x[a] if solved else math.nan
        gradient_out[pixel, a] = gradient[a] if solved else math.nan
        for b in range(x.shape[0]):
            hessian_out[pixel, a, b] = hessian[a, b] if solved else math.nan


# `numba_lm`'s other pieces: a state is (fractions, hessian, gradient, free flags, sum
# active), steps = (A, c, `simplex_qp`'s scratch, (equality, max_steps), the state
# (fractions, free flags, sum active) the last programme was solved into).
@numba.njit(error_model="numpy")
def _solve(damping, x, hessian, gradient, free, sum_state, a_matrix, c, qp_scratch, qp, solution):
    """`numba_lm`'s solve: the damped subproblem at x (`_subproblem`) solved on the
    simplex from (x, free, sum_state) into `solution`; False where `simplex_qp` fails."""
    _subproblem(hessian, gradient, x, damping, a_matrix, c)
    solved, solved_free, solved_sum = solution
    for a in range(x.shape[0]):
        solved[a] = x[a]
        solved_free[a] = free[a]
    solved_sum[0] = sum_state[0]
    equality, max_steps = qp
    system, factor, scale, rhs, z = qp_scratch
    code = simplex_qp(
        a_matrix,
        c,
        solved,
        solved_free,
        solved_sum,
        equality,
        max_steps,
        system,
        factor,
        scale,
        rhs,
        z,
    )
    return code == QP_OK


@numba.njit(error_model="numpy")
def _trial(
    x,
    hessian,
    gradient,
    free,
    sum_state,
    trial,
    hessian_trial,
    gradient_trial,
    trial_free,
    trial_sum,
    a_matrix,
    c,
    qp_scratch,
    qp,
    solution,
):
    """`numba_lm`'s trial: the solution made the trial state; (largest step, linearised
    decrease) from x."""
    solved, solved_free, solved_sum = solution
    for a in range(x.shape[0]):
        trial[a] = solved[a]
        trial_free[a] = solved_free[a]
    trial_sum[0] = solved_sum[0]
    return _size_and_decrease(trial, x, gradient, hessian)


@numba.njit(error_model="numpy")
def _newton(
    trial,
    hessian_trial,
    gradient_trial,
    trial_free,
    trial_sum,
    a_matrix,
    c,
    qp_scratch,
    qp,
    solution,
):
    """`numba_lm`'s newton: (largest step, linearised decrease) of the solution from the
    trial."""
    return _size_and_decrease(solution[0], trial, gradient_trial, hessian_trial)


@numba.njit(error_model="numpy")
def _take(
    trial,
    hessian_trial,
    gradient_trial,
    trial_free,
    trial_sum,
    x,
    hessian,
    gradient,
    free,
    sum_state,
    a_matrix,
    c,
    qp_scratch,
    qp,
    solution,
):
    """`numba_lm`'s take: the trial's fractions, sum state, J^T J and J^T f made the
    current ones, and the free flags those of the new fractions."""
    _accept(trial, trial_sum, hessian_trial, gradient_trial, x, sum_state, hessian, gradient)
    for a in range(x.shape[0]):
        free[a] = x[a] > 0.0


_levenberg_marquardt = lm_for(
    "one_step",
    evaluate=_pixel_normal_equations,
    solve=_solve,
    trial=_trial,
    newton=_newton,
    take=_take,
)


@numba.njit(error_model="numpy")
def _one_step_block(block, arrays, model, mixture, settings, outputs):
    """The pixels of one block of `_one_step_kernel` (arguments as there), with their
    scratch arrays; each pixel by `numba_lm.levenberg_marquardt` over this module's
    pieces."""
    refl = arrays[0]
    albedo, phase, band_weights, start = mixture
    equality, max_iter, tol, max_steps = settings
    states, equations, subproblem, qp_scratch, column = _block_scratch(albedo.shape[0])
    (x, free, sum_state), trial_state, newton_state = states
    hessian, gradient = equations[0]
    hessian_trial, gradient_trial = equations[1]
    current = (x, hessian, gradient, free, sum_state)
    candidate = (trial_state[0], hessian_trial, gradient_trial, trial_state[1], trial_state[2])
    steps = (subproblem[0], subproblem[1], qp_scratch, (equality, max_steps), newton_state)
    for pixel in range(block * BLOCK, min(refl.shape[0], (block + 1) * BLOCK)):
        status, terms = pixel_status(pixel, arrays, model)
        if status >= 0:
            _write_pixel(pixel, outputs, status, 0, math.nan, False, x, hessian, gradient)
            continue
        sum_state[0] = equality
        for a in range(x.shape[0]):
            x[a] = start[a]
            free[a] = x[a] > 0.0
        data = (terms, albedo, phase[pixel], refl[pixel], band_weights, column)
        done, iteration, cost = _levenberg_marquardt(
            data, steps, current, candidate, (max_iter, tol)
        )
        status = CONVERGED if done else MAX_ITER
        _write_pixel(pixel, outputs, status, iteration, cost, sum_state[0], x, hessian, gradient)


@cached_njit(
    inlines=(_qp_module, lm_rules, numba_lm, numba_internals, *MODEL_MODULES, numba_unmix),
    nogil=True,
    error_model="numpy",
)
def _one_step_kernel(first, last, arrays, model, mixture, settings, outputs):
    """Blocks first to last - 1 of `BLOCK` pixels (`numba_threads.run_in_blocks`): arrays
    = (refl, to_sun, to_sensor, normal), model = `kernel_params`'s (scalars, legendre,
    use_legendre), mixture = (albedo, phase, band_weights, start), settings = (equality,
    max_iter, tol, max_steps), outputs = the arrays of `one_step_numba`'s dict in its
    order."""
    for block in range(first, last):
        _one_step_block(block, arrays, model, mixture, settings, outputs)


@functools.cache
def _one_step_kernel_for(key: ModelKey):
    if key == DEFAULT_KEY:
        return _one_step_kernel
    equations = numba_equations_for(key)
    tag = key.name.replace("-", "_")
    shared = njit_variant(
        _normal_equations, tag, reflectance_and_slope=equations.reflectance_and_slope
    )
    mixed = njit_variant(
        _normal_equations_mixed,
        tag,
        mixture_reflectance_and_slope=equations.mixture_reflectance_and_slope,
        mixture_slope=equations.mixture_slope,
    )
    either = njit_variant(
        _pixel_normal_equations, tag, _normal_equations=shared, _normal_equations_mixed=mixed
    )
    solve = lm_for(
        f"one_step_{tag}",
        evaluate=either,
        solve=_solve,
        trial=_trial,
        newton=_newton,
        take=_take,
    )
    block = njit_variant(
        _one_step_block,
        tag,
        pixel_status=njit_variant(pixel_status, tag, pixel_terms=equations.pixel_terms),
        _levenberg_marquardt=solve,
    )
    return compile_variant(_one_step_kernel, key.name, _one_step_block=block)


def one_step_numba(
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
    phase=None,
):
    """Levenberg-Marquardt in reflectance space for every pixel of one chunk.

    Args:
        refl: (pixels, bands) r [1/sr]; to_sun, to_sensor, normal: (pixels, 3).
        params: `HapkeParams` (the shared phase function and the other parameters).
        phase: None (the phase function of `params`, shared) or (pixels, p, 1 or bands,
            4) the endmembers' own phase terms (`phase.phase_table`), mixed per band.
        albedo: (p, bands) endmember albedos; band_weights: (bands,) 1/sigma_k (ones
            without refl_sigma); start: (p,) feasible starting cross-section fractions.
        equality: sum to one (else <= 1); max_iter, tol: LM cap and step tolerance.
    Returns:
        dict: fractions (pixels, p), status int8, iterations int32, cost (weighted sum of
        squared residuals), hessian (pixels, p, p) J^T J and gradient (pixels, p) J^T f at
        the solution, sum_active bool.
    """
    n, p = refl.shape[0], albedo.shape[0]
    out = {
        "fractions": np.empty((n, p)),
        "status": np.empty(n, np.int8),
        "iterations": np.empty(n, np.int32),
        "cost": np.empty(n),
        "hessian": np.empty((n, p, p)),
        "gradient": np.empty((n, p)),
        "sum_active": np.empty(n, np.bool_),
    }
    phase = np.empty((n, 0, 1, 4)) if phase is None else as_kernel_array(phase)
    arrays = tuple(as_kernel_array(a) for a in (refl, to_sun, to_sensor, normal))
    mixture = (
        as_kernel_array(albedo),
        phase,
        as_kernel_array(band_weights),
        as_kernel_array(start),
    )
    settings = (bool(equality), int(max_iter), float(tol), int(max_steps))
    run_in_blocks(
        _one_step_kernel_for(params.model_key),
        (n + BLOCK - 1) // BLOCK,
        arrays,
        kernel_params(params),
        mixture,
        settings,
        tuple(out.values()),
    )
    return out
