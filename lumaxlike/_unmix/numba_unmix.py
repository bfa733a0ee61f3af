"""The numba kernels of `unmix`: the two-step route's w-space programme, the one-step
route's Levenberg-Marquardt in reflectance space, and the covariance; parallel over
pixels (`prange` over blocks of pixels, scratch allocated once per block). float64.
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np

from .._inverse import lm_rules
from .._inverse.status import Status
from .._model._backends import numba_equations, retarget_to_numba
from .._model.family import DEFAULT_KEY, ModelKey, numba_equations_for
from .._model.numba_cache import cached_njit, compile_variant
from .._model.numba_model import MODEL_MODULES, as_kernel_array, kernel_params
from . import mixing
from . import simplex_qp as _qp_module
from .simplex_qp import (
    QP_OK,
    QP_SINGULAR,
    interior_start,
    reduced_covariance,
    simplex_qp,
    vertex_start,
)

__all__ = ["two_step_numba", "one_step_numba", "finish_numba", "BLOCK"]

_rules = retarget_to_numba(lm_rules)
accepted = _rules.accepted
next_damping = _rules.next_damping
gain_ratio = _rules.gain_ratio
converged = _rules.converged
damped_diagonal = _rules.damped_diagonal
pixel_terms = numba_equations.pixel_terms
reflectance_and_slope = numba_equations.reflectance_and_slope
mixture_reflectance_and_slope = numba_equations.mixture_reflectance_and_slope
mixture_slope = numba_equations.mixture_slope

BLOCK = 64  # pixels per prange task: scratch arrays are allocated once per block
CONVERGED = int(Status.CONVERGED)
MAX_ITER = int(Status.MAX_ITER)
INVALID_GEOMETRY = int(Status.INVALID_GEOMETRY)
NONFINITE_INPUT = int(Status.NONFINITE_INPUT)
UNDETERMINED = int(Status.UNDETERMINED)


@numba.njit(error_model="numpy", fastmath={"reassoc", "contract"})
def _normal_equations_in_w(pixel, w, sigma_w, albedo, shared_hessian, weights, a_matrix, c):
    """One pixel's A = W S W^T and c = W S w (S = diag(1/sigma_w^2), or I when `sigma_w`
    is empty; A then the precomputed `shared_hessian`), into `a_matrix` and `c`.

    Each entry is a dot product over the bands, compiled with `reassoc` so that it
    vectorises: its rounding depends on the order of summation (~1e-16 relative).
    """
    n_bands = w.shape[1]
    p = albedo.shape[0]
    weighted = sigma_w.shape[0] > 0
    for k in range(n_bands):
        weights[k] = 1.0 / (sigma_w[pixel, k] * sigma_w[pixel, k]) if weighted else 1.0
    for a in range(p):
        total = 0.0
        for k in range(n_bands):
            total += albedo[a, k] * weights[k] * w[pixel, k]
        c[a] = total
        for b in range(a + 1):
            if weighted:
                total = 0.0
                for k in range(n_bands):
                    total += albedo[a, k] * weights[k] * albedo[b, k]
                a_matrix[a, b] = total
            else:
                a_matrix[a, b] = shared_hessian[a, b]
            a_matrix[b, a] = a_matrix[a, b]


@numba.njit(error_model="numpy")
def _two_step_block(block, w, sigma_w, solve, albedo, shared_hessian, equality, max_steps,
                    fractions_out, cost_out, hessian_out, gradient_out, sum_out, code_out):  # fmt: skip
    """The pixels of one block of `_two_step_kernel`, with their scratch arrays. A band's
    weight is 1/sigma_w^2 (all 1 when `sigma_w` is empty); an unsolved pixel's w and
    sigma_w are not read."""
    n_pixels, n_bands = w.shape
    p = albedo.shape[0]
    weighted = sigma_w.shape[0] > 0
    a_matrix = np.empty((p, p))
    c = np.empty(p)
    x = np.empty(p)
    free = np.empty(p, np.bool_)
    sum_state = np.empty(1, np.bool_)
    system = np.empty((p, p))
    factor = np.empty((p, p))
    scale = np.empty(p)
    rhs = np.empty(p)
    z = np.empty(p)
    weights = np.empty(n_bands)
    for pixel in range(block * BLOCK, min(n_pixels, (block + 1) * BLOCK)):
        if not solve[pixel]:
            for a in range(p):
                fractions_out[pixel, a] = math.nan
                gradient_out[pixel, a] = math.nan
                for b in range(p):
                    hessian_out[pixel, a, b] = math.nan
            cost_out[pixel] = math.nan
            sum_out[pixel] = False
            code_out[pixel] = QP_OK
            continue
        _normal_equations_in_w(pixel, w, sigma_w, albedo, shared_hessian, weights, a_matrix, c)
        # from the centre with every fraction free: one solve where the solution is
        # interior (most pixels); if that system is singular (collinear endmembers), from
        # the best vertex, which frees only what the data ask for
        interior_start(x, free, sum_state, equality)
        code = simplex_qp(
            a_matrix, c, x, free, sum_state, equality, max_steps, system, factor, scale, rhs, z
        )
        if code == QP_SINGULAR:
            vertex_start(a_matrix, c, x, free, sum_state, equality)
            code = simplex_qp(
                a_matrix, c, x, free, sum_state, equality, max_steps, system, factor, scale, rhs, z
            )
        code_out[pixel] = code
        cost = 0.0
        for k in range(n_bands):
            residual = -w[pixel, k]
            for a in range(p):
                residual += x[a] * albedo[a, k]
            cost += (
                residual
                * residual
                * (1.0 / (sigma_w[pixel, k] * sigma_w[pixel, k]) if weighted else 1.0)
            )
        cost_out[pixel] = cost
        sum_out[pixel] = sum_state[0]
        for a in range(p):
            fractions_out[pixel, a] = x[a]
            gradient_out[pixel, a] = -c[a]  # A x - c: half the gradient of the cost
            for b in range(p):
                hessian_out[pixel, a, b] = a_matrix[a, b]
                gradient_out[pixel, a] += a_matrix[a, b] * x[b]


@cached_njit(inlines=(_qp_module,), parallel=True, error_model="numpy")
def _two_step_kernel(w, sigma_w, solve, albedo, shared_hessian, equality, max_steps,
                     fractions_out, cost_out, hessian_out, gradient_out, sum_out, code_out):  # fmt: skip
    n_pixels = w.shape[0]
    for block in numba.prange((n_pixels + BLOCK - 1) // BLOCK):
        _two_step_block(
            block,
            w,
            sigma_w,
            solve,
            albedo,
            shared_hessian,
            equality,
            max_steps,
            fractions_out,
            cost_out,
            hessian_out,
            gradient_out,
            sum_out,
            code_out,
        )


def two_step_numba(w, sigma_w, solve, albedo, equality, max_steps):
    """The w-space programme of every pixel of one chunk.

    Args:
        w: (pixels, bands) albedo from `invert`; sigma_w: (pixels, bands) its standard
            deviation (bands weigh 1/sigma_w^2), or None (all bands weigh 1); solve:
            (pixels,) bool, pixels to solve (the others' w and sigma_w are not read).
        albedo: (p, bands) endmember albedos; equality: sum to one (else <= 1).
    Returns:
        dict: fractions (pixels, p) cross-section fractions, cost (pixels,) weighted sum of
        squared w residuals, hessian (pixels, p, p) = W S W^T, gradient (pixels, p) =
        W S (W^T f - w) at the solution, sum_active (pixels,) bool,
        code (pixels,) int8 QP code.
    """
    n, p = w.shape[0], albedo.shape[0]
    albedo = as_kernel_array(albedo)
    out = {
        "fractions": np.empty((n, p)),
        "cost": np.empty(n),
        "hessian": np.empty((n, p, p)),
        "gradient": np.empty((n, p)),
        "sum_active": np.empty(n, np.bool_),
        "code": np.empty(n, np.int8),
    }
    sigma_w = np.empty((0, 0)) if sigma_w is None else as_kernel_array(sigma_w)
    _two_step_kernel(
        as_kernel_array(w), sigma_w, np.require(solve, np.bool_, ("C", "W")), albedo, albedo @ albedo.T,
        bool(equality), int(max_steps),
        out["fractions"], out["cost"], out["hessian"], out["gradient"], out["sum_active"], out["code"],
    )  # fmt: skip
    return out


@numba.njit(error_model="numpy")
def _normal_equations(x, terms, albedo, phase, refl, weights, hessian, gradient, column):
    """Cost sum_k ((r_k - obs_k) / sigma_k)^2 at fractions x, and J^T J, J^T f, with the
    phase function shared by all endmembers (`phase` and the scratch `column` unused)."""
    p, n_bands = albedo.shape
    for a in range(p):
        gradient[a] = 0.0
        for b in range(p):
            hessian[a, b] = 0.0
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
    for a in range(p):
        for b in range(a):
            hessian[b, a] = hessian[a, b]
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
    for a in range(p):
        gradient[a] = 0.0
        for b in range(p):
            hessian[a, b] = 0.0
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
            column[a] = weight * albedo[a, k] * mixture_slope(
                phase[a, slot, 0], phase[a, slot, 1], phase[a, slot, 2], phase[a, slot, 3], h_mu0e_m1, h_mue_m1,
                common, terms.scale,
            )  # fmt: skip
        for a in range(p):
            gradient[a] += column[a] * residual
            for b in range(a + 1):
                hessian[a, b] += column[a] * column[b]
    for a in range(p):
        for b in range(a):
            hessian[b, a] = hessian[a, b]
    return cost


@numba.njit(error_model="numpy")
def _pixel_normal_equations(x, terms, albedo, phase, refl, weights, hessian, gradient, column):
    """`_normal_equations_mixed` where the endmembers have their own phase functions (the
    pixel's `phase` has a row per endmember), `_normal_equations` otherwise (no rows):
    one kernel serves both, the shared case running exactly its own code."""
    if phase.shape[0] > 0:
        return _normal_equations_mixed(
            x, terms, albedo, phase, refl, weights, hessian, gradient, column
        )
    return _normal_equations(x, terms, albedo, phase, refl, weights, hessian, gradient, column)


@numba.njit(error_model="numpy")
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


@numba.njit(error_model="numpy")
def _one_step_block(
    block,
    refl, to_sun, to_sensor, normal, scalars, legendre, use_legendre, albedo, phase, band_weights, start,
    equality, max_iter, tol, max_steps,
    fractions_out, status_out, iterations_out, cost_out, hessian_out, gradient_out, sum_out,
):  # fmt: skip
    """The pixels of one block of `_one_step_kernel`, with their scratch arrays."""
    b_, c_, roughness, hs, bs0, hc, bc0, porosity_k, asymmetry = (
        scalars[0], scalars[1], scalars[2], scalars[3], scalars[4], scalars[5], scalars[6], scalars[7], scalars[8]
    )  # fmt: skip
    n_pixels, n_bands = refl.shape
    p = albedo.shape[0]
    x = np.empty(p)
    trial = np.empty(p)
    newton = np.empty(p)
    free = np.empty(p, np.bool_)
    sum_state = np.empty(1, np.bool_)
    trial_free = np.empty(p, np.bool_)
    trial_sum = np.empty(1, np.bool_)
    newton_free = np.empty(p, np.bool_)
    newton_sum = np.empty(1, np.bool_)
    hessian = np.empty((p, p))
    gradient = np.empty(p)
    hessian_trial = np.empty((p, p))
    gradient_trial = np.empty(p)
    a_matrix = np.empty((p, p))
    c = np.empty(p)
    system = np.empty((p, p))
    factor = np.empty((p, p))
    scale = np.empty(p)
    rhs = np.empty(p)
    z = np.empty(p)
    column = np.empty(p)
    for pixel in range(block * BLOCK, min(n_pixels, (block + 1) * BLOCK)):
        status = -1
        for k in range(3):
            if not (math.isfinite(to_sun[pixel, k]) and math.isfinite(to_sensor[pixel, k])
                    and math.isfinite(normal[pixel, k])):  # fmt: skip
                status = NONFINITE_INPUT
        for k in range(n_bands):
            if not math.isfinite(refl[pixel, k]):
                status = NONFINITE_INPUT
        terms = pixel_terms(
            to_sun[pixel], to_sensor[pixel], normal[pixel],
            b_, c_, roughness, hs, bs0, hc, bc0, porosity_k, asymmetry, legendre, use_legendre,
        )  # fmt: skip
        if status < 0 and not math.isfinite(terms.scale):
            status = INVALID_GEOMETRY
        if status >= 0:
            status_out[pixel] = status
            iterations_out[pixel] = 0
            cost_out[pixel] = math.nan
            sum_out[pixel] = False
            for a in range(p):
                fractions_out[pixel, a] = math.nan
                gradient_out[pixel, a] = math.nan
                for b in range(p):
                    hessian_out[pixel, a, b] = math.nan
            continue
        sum_state[0] = equality
        for a in range(p):
            x[a] = start[a]
            free[a] = x[a] > 0.0
        cost = _pixel_normal_equations(
            x, terms, albedo, phase[pixel], refl[pixel], band_weights, hessian, gradient, column
        )
        damping = 0.0
        growth = 2.0
        done = cost == 0.0
        iteration = 0
        while not done and iteration < max_iter:
            iteration += 1
            _subproblem(hessian, gradient, x, damping, a_matrix, c)
            for a in range(p):
                trial[a] = x[a]
                trial_free[a] = free[a]
            trial_sum[0] = sum_state[0]
            code = simplex_qp(a_matrix, c, trial, trial_free, trial_sum, equality, max_steps,
                              system, factor, scale, rhs, z)  # fmt: skip
            if code != QP_OK:
                damping, growth = next_damping(False, 0.0, damping, growth)  # singular: damp more
                continue
            step_size = 0.0
            predicted = 0.0  # decrease of the linearised cost along the step
            for a in range(p):
                step_a = trial[a] - x[a]
                step_size = max(step_size, abs(step_a))
                predicted -= 2.0 * step_a * gradient[a]
                for b in range(p):
                    predicted -= step_a * hessian[a, b] * (trial[b] - x[b])
            cost_trial = _pixel_normal_equations(trial, terms, albedo, phase[pixel], refl[pixel], band_weights,
                                                 hessian_trial, gradient_trial, column)  # fmt: skip
            # the undamped step from the trial point, to test convergence
            _subproblem(hessian_trial, gradient_trial, trial, 0.0, a_matrix, c)
            newton_size = math.inf
            for a in range(p):
                newton[a] = trial[a]
                newton_free[a] = trial_free[a]
            newton_sum[0] = trial_sum[0]
            if simplex_qp(a_matrix, c, newton, newton_free, newton_sum, equality, max_steps,
                          system, factor, scale, rhs, z) == QP_OK:  # fmt: skip
                newton_size = 0.0
                for a in range(p):
                    newton_size = max(newton_size, abs(newton[a] - trial[a]))
            accept = accepted(cost, cost_trial)
            done = converged(step_size, newton_size, accept, tol)
            damping, growth = next_damping(
                accept, gain_ratio(cost, cost_trial, predicted), damping, growth
            )
            if accept:
                for a in range(p):
                    x[a] = trial[a]
                    gradient[a] = gradient_trial[a]
                    for b in range(p):
                        hessian[a, b] = hessian_trial[a, b]
                sum_state[0] = trial_sum[0]
                cost = cost_trial
            for a in range(p):
                free[a] = x[a] > 0.0
        status_out[pixel] = CONVERGED if done else MAX_ITER
        iterations_out[pixel] = iteration
        cost_out[pixel] = cost
        sum_out[pixel] = sum_state[0]
        for a in range(p):
            fractions_out[pixel, a] = x[a]
            gradient_out[pixel, a] = gradient[a]
            for b in range(p):
                hessian_out[pixel, a, b] = hessian[a, b]


@cached_njit(inlines=(_qp_module, lm_rules, *MODEL_MODULES), parallel=True, error_model="numpy")
def _one_step_kernel(
    refl, to_sun, to_sensor, normal, scalars, legendre, use_legendre, albedo, phase, band_weights, start,
    equality, max_iter, tol, max_steps,
    fractions_out, status_out, iterations_out, cost_out, hessian_out, gradient_out, sum_out,
):  # fmt: skip
    n_pixels = refl.shape[0]
    for block in numba.prange((n_pixels + BLOCK - 1) // BLOCK):
        _one_step_block(
            block,
            refl, to_sun, to_sensor, normal, scalars, legendre, use_legendre, albedo, phase, band_weights, start,
            equality, max_iter, tol, max_steps,
            fractions_out, status_out, iterations_out, cost_out, hessian_out, gradient_out, sum_out,
        )  # fmt: skip


def _rebound(function, tag, **bindings):
    """`function` (an njit function) compiled again with some of its globals rebound; its
    qualified name tagged so that the machine code of variants never shares a symbol."""
    py_func = function.py_func
    clone = type(py_func)(py_func.__code__, {**py_func.__globals__, **bindings}, py_func.__name__)
    clone.__qualname__ = f"{py_func.__qualname__}__{tag}"
    return numba.njit(error_model="numpy")(clone)


@functools.cache
def _one_step_kernel_for(key: ModelKey):
    if key == DEFAULT_KEY:
        return _one_step_kernel
    equations = numba_equations_for(key)
    tag = key.name.replace("-", "_")
    shared = _rebound(_normal_equations, tag, reflectance_and_slope=equations.reflectance_and_slope)
    mixed = _rebound(
        _normal_equations_mixed, tag, mixture_reflectance_and_slope=equations.mixture_reflectance_and_slope,
        mixture_slope=equations.mixture_slope,
    )  # fmt: skip
    either = _rebound(
        _pixel_normal_equations, tag, _normal_equations=shared, _normal_equations_mixed=mixed
    )
    block = _rebound(
        _one_step_block, tag, pixel_terms=equations.pixel_terms, _pixel_normal_equations=either
    )
    return compile_variant(_one_step_kernel, key.name, _one_step_block=block)


def one_step_numba(refl, to_sun, to_sensor, normal, params, albedo, band_weights, start, equality,
                   max_iter, tol, max_steps, phase=None):  # fmt: skip
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
    _one_step_kernel_for(params.model_key)(
        as_kernel_array(refl), *(as_kernel_array(g) for g in (to_sun, to_sensor, normal)), *kernel_params(params),
        as_kernel_array(albedo), phase, as_kernel_array(band_weights), as_kernel_array(start),
        bool(equality), int(max_iter), float(tol), int(max_steps),
        out["fractions"], out["status"], out["iterations"], out["cost"], out["hessian"], out["gradient"],
        out["sum_active"],
    )  # fmt: skip
    return out


_pixel_mass_fractions = numba.njit(error_model="numpy")(mixing.pixel_mass_fractions)


@cached_njit(inlines=(_qp_module, mixing), parallel=True, error_model="numpy")
def _finish_kernel(hessian, gradient, fractions, sum_active, cost, status, per_mass, weighted, equality, n_bands,
                   mass_out, covariance_out, at_bound_out, remainder_out):  # fmt: skip
    n, p = fractions.shape
    for block in numba.prange((n + BLOCK - 1) // BLOCK):
        # Per-block scratch; a pixel's rows are copied in and out (a view of a shared
        # array in a parallel loop updates the array's one reference count from every
        # thread: contention that cost more than the covariance itself).
        system = np.empty((p, p))
        factor = np.empty((p, p))
        scale = np.empty(p)
        rhs = np.empty(p)
        column = np.empty(p)
        covariance = np.empty((p, p))
        released = np.empty(p)
        released_covariance = np.empty((p, p))
        free = np.empty(p, np.bool_)
        tested = np.empty(p, np.bool_)
        x = np.empty(p)
        pixel_hessian = np.empty((p, p))
        pixel_gradient = np.empty(p)
        mass = np.empty(p)
        mass_covariance = np.empty((p, p))
        for pixel in range(block * BLOCK, min(n, (block + 1) * BLOCK)):
            code = status[pixel]
            if not (code == CONVERGED or code == MAX_ITER or code == UNDETERMINED):
                remainder_out[pixel] = math.nan
                for a in range(p):
                    fractions[pixel, a] = math.nan
                    mass_out[pixel, a] = math.nan
                    at_bound_out[pixel, a] = False
                    for b in range(p):
                        covariance_out[pixel, a, b] = math.nan
                continue
            for a in range(p):
                x[a] = fractions[pixel, a]
                pixel_gradient[a] = gradient[pixel, a]
                for b in range(p):
                    pixel_hessian[a, b] = hessian[pixel, a, b]
            determined = reduced_covariance(
                pixel_hessian,
                pixel_gradient,
                x,
                sum_active[pixel],
                system,
                factor,
                scale,
                rhs,
                column,
                free,
                tested,
                covariance,
            )
            if code == CONVERGED and not determined:
                status[pixel] = UNDETERMINED
            variance = 1.0  # weighted by 1/sigma^2: (J^T W J)^-1 is the covariance
            if not weighted:  # the residual variance
                dof = n_bands + (1 if sum_active[pixel] else 0)
                for a in range(p):
                    dof -= 1 if x[a] > 0.0 else 0
                variance = cost[pixel] / dof if dof > 0 else math.nan
            if status[pixel] == CONVERGED:
                # The covariance above holds the active bounds. Released (only the sum
                # constraint kept), a fraction whose 1-sigma exceeds its whole range [0, 1]
                # is not determined by the data: noise may have put the solution on its
                # vertex (signal below the noise, e.g. at grazing incidence).
                for a in range(p):
                    released[a] = 1.0 / p
                if not reduced_covariance(
                    pixel_hessian,
                    pixel_gradient,
                    released,
                    sum_active[pixel],
                    system,
                    factor,
                    scale,
                    rhs,
                    column,
                    free,
                    tested,
                    released_covariance,
                ):
                    status[pixel] = UNDETERMINED
                else:
                    for a in range(p):
                        if not released_covariance[a, a] * variance <= 1.0:
                            status[pixel] = UNDETERMINED
            if status[pixel] == UNDETERMINED:
                variance = math.nan
            total = 0.0
            for a in range(p):
                at_bound_out[pixel, a] = x[a] == 0.0
                total += x[a]
                for b in range(p):
                    covariance[a, b] *= variance
            remainder_out[pixel] = 0.0 if equality else 1.0 - total
            _pixel_mass_fractions(x, per_mass, covariance, mass, mass_covariance, column)
            for a in range(p):
                mass_out[pixel, a] = mass[a]
                for b in range(p):
                    covariance_out[pixel, a, b] = mass_covariance[a, b]


def finish_numba(solved, status, per_mass, weighted, equality, n_bands):
    """Covariance, UNDETERMINED status and mass fractions of one chunk (numba, parallel).

    Args:
        solved: a route's output (fractions, hessian, gradient, sum_active, cost; the
            fractions are overwritten with NaN where unsolved); status: (pixels,) int8,
            updated in place; per_mass: (p,) c_j; weighted: refl_sigma given;
            equality: sum to one; n_bands: observations per pixel.
    Returns:
        dict: fractions (mass), covariance (of the mass fractions), at_bound, remainder.
    """
    n, p = solved["fractions"].shape
    out = {
        "fractions": np.empty((n, p)),
        "covariance": np.empty((n, p, p)),
        "at_bound": np.empty((n, p), np.bool_),
        "remainder": np.empty(n),
    }
    _finish_kernel(
        as_kernel_array(solved["hessian"]), as_kernel_array(solved["gradient"]), solved["fractions"],
        np.require(solved["sum_active"], np.bool_, ("C", "W")), as_kernel_array(solved["cost"]), status,
        as_kernel_array(per_mass), bool(weighted), bool(equality), int(n_bands),
        out["fractions"], out["covariance"], out["at_bound"], out["remainder"],
    )  # fmt: skip
    return out
