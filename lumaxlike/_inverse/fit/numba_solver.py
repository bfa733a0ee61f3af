"""The numba solver for p free parameters: a hand-written Levenberg-Marquardt, parallel
over pixels, each band of each pixel its own problem.

The model enters as a "column" function (`_model.numba_jacobian`): from one
observation's row (what does not depend on the free parameters, computed once per
observation) and the current parameters, it writes r and the derivatives along the free
parameters. The kernel accumulates J^T J (p x p) and J^T f over the observations as it
goes (no observations x parameters Jacobian is stored) and solves the damped system by
Cholesky: the pieces (`_cost_and_normal_equations`, `_damped_step`, `_trial`,
`_newton`, `_take`) of `numba_lm`'s loop, which follows `lm_rules` for the step,
acceptance, damping and convergence. It returns J^T J at the solution for the covariance (`covariance`). Scratch
arrays are allocated once per pixel, not per problem or iteration. Computes in float64.

An observation whose reflectance is NaN is left out of its problem (`fit`'s masks): its
residual row is a zero row, skipped in the sums. The kernel is compiled per set of free
parameters as a variant (`lm_kernel_for`) with the generated model functions bound as
its globals, and cached on disk like the generated code.
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np
from jaxtyping import Bool, Float

from ..._compat import numba_internals
from ..._model import _backends, _scalar_math
from ..._model._backends import retarget_to_numba
from ..._model.numba_cache import cached_njit, compile_variant
from ..._model.numba_jacobian import columns, prepare
from ..._model.numba_threads import run_in_blocks
from ..._status import Status
from .. import lm_rules, numba_lm
from ..numba_lm import levenberg_marquardt, lm_for

__all__ = ["solve_numba", "cholesky", "cholesky_solve"]

_rules = retarget_to_numba(lm_rules)
pinned = _rules.pinned
damped_diagonal = _rules.damped_diagonal
SOLVING = -1
CONVERGED = int(Status.CONVERGED)
MAX_ITER = int(Status.MAX_ITER)
INVALID_GEOMETRY = int(Status.INVALID_GEOMETRY)
NONFINITE_INPUT = int(Status.NONFINITE_INPUT)
TOO_FEW_OBSERVATIONS = int(Status.TOO_FEW_OBSERVATIONS)


@cached_njit(error_model="numpy")
def cholesky(matrix, factor):
    """Lower Cholesky factor of the p x p `matrix` into `factor`; False if not positive definite."""
    p = matrix.shape[0]
    for j in range(p):
        pivot = matrix[j, j]
        for k in range(j):
            pivot -= factor[j, k] * factor[j, k]
        if not pivot > 0.0:
            return False
        root = math.sqrt(pivot)
        factor[j, j] = root
        for i in range(j + 1, p):
            value = matrix[i, j]
            for k in range(j):
                value -= factor[i, k] * factor[j, k]
            factor[i, j] = value / root
    return True


@cached_njit(error_model="numpy")
def cholesky_solve(factor, rhs, solution):
    """Solve L L^T x = rhs into `solution`."""
    p = rhs.shape[0]
    for i in range(p):
        value = rhs[i]
        for k in range(i):
            value -= factor[i, k] * solution[k]
        solution[i] = value / factor[i, i]
    for i in range(p - 1, -1, -1):
        value = solution[i]
        for k in range(i + 1, p):
            value -= factor[k, i] * solution[k]
        solution[i] = value / factor[i, i]


@numba.njit(error_model="numpy", inline="always")
def _size_and_decrease(step, jtj, jtf):
    """The largest |step|, and the decrease of the linearised cost along `step`."""
    size = 0.0
    decrease = 0.0
    for a in range(step.shape[0]):
        size = max(size, abs(step[a]))
        decrease -= 2.0 * step[a] * jtf[a]
        for b in range(step.shape[0]):
            decrease -= step[a] * jtj[a, b] * step[b]
    return size, decrease


@cached_njit(error_model="numpy")
def _cost_and_normal_equations(parameters, jtj, jtf, rows, refl, free_count, step_values, out):
    """sum_k f_k^2, and J^T J, J^T f accumulated over the observations (lower triangle):
    `numba_lm`'s evaluate, the state (parameters, jtj, jtf) first, then the data (rows,
    refl, free_count, step_values, out).

    Compiled only as variants (`lm_kernel_for`), with `prepare` and `columns` bound to
    generated code (as globals: a function passed as an argument could not be cached).
    """
    prepare(parameters, step_values)  # what depends on the free parameters alone: once
    cost = 0.0
    for a in range(free_count):
        jtf[a] = 0.0
        for b in range(a + 1):
            jtj[a, b] = 0.0
    for k in range(refl.shape[0]):
        if not math.isfinite(refl[k]):  # a masked observation: a zero row
            continue
        columns(step_values, rows[k], out)
        residual = out[0] - refl[k]
        cost += residual * residual
        for a in range(free_count):
            jtf[a] += out[1 + a] * residual
            for b in range(a + 1):
                jtj[a, b] += out[1 + a] * out[1 + b]
    for a in range(free_count):
        for b in range(a):
            jtj[b, a] = jtj[a, b]
    return cost


@numba.njit(error_model="numpy")
def _damped_step(
    damping, parameters, jtj, jtf, free_index, lower, upper, system, factor, rhs, step
):
    """`numba_lm`'s solve: the damped system (`lm_rules.damped_diagonal`) at (parameters,
    jtj, jtf) solved for `step`, parameters at a bound held there (`lm_rules.pinned`,
    step 0); False if singular. system, factor, rhs: scratch."""
    p = jtf.shape[0]
    largest = 0.0
    for a in range(p):
        largest = max(largest, jtj[a, a])
    for a in range(p):
        held_a = pinned(parameters[free_index[a]], lower[a], upper[a], jtf[a])
        rhs[a] = 0.0 if held_a else jtf[a]
        for b in range(p):
            held_b = pinned(parameters[free_index[b]], lower[b], upper[b], jtf[b])
            system[a, b] = 0.0 if held_a or held_b else jtj[a, b]
        system[a, a] = 1.0 if held_a else damped_diagonal(jtj[a, a], largest, damping)
    if not cholesky(system, factor):
        return False
    cholesky_solve(factor, rhs, step)
    for a in range(p):
        step[a] = -step[a]
    return True


@numba.njit(error_model="numpy")
def _band_status(refl_problem, rows_valid, pixel, min_observations):
    """SOLVING, INVALID_GEOMETRY (an observation used whose geometry is not valid) or
    TOO_FEW_OBSERVATIONS for one (pixel, band) problem (`_solve_lm_pixel`)."""
    used = 0
    invalid = False
    for k in range(refl_problem.shape[0]):
        if math.isfinite(refl_problem[k]):
            used += 1
            invalid = invalid or not rows_valid[pixel, k]
    status = SOLVING
    if invalid:
        status = INVALID_GEOMETRY
    elif used < min_observations:
        status = TOO_FEW_OBSERVATIONS
    return status


@numba.njit(error_model="numpy", inline="always")
def _projected_step(parameters, trial, step, free_index, bounds, jtj, jtf):
    """Projects the trial point parameters + step onto the bounds (writing `trial` and
    the projected `step`); returns (largest step, decrease of the linearised cost)."""
    lower, upper = bounds
    p = free_index.shape[0]
    step_size = 0.0
    for a in range(p):
        index = free_index[a]
        value = min(upper[a], max(lower[a], parameters[index] + step[a]))
        trial[index] = value
        step[a] = value - parameters[index]  # the projected step
        step_size = max(step_size, abs(step[a]))
    predicted = 0.0  # decrease of the linearised cost along the step
    for a in range(p):
        predicted -= 2.0 * step[a] * jtf[a]
        for b in range(p):
            predicted -= step[a] * jtj[a, b] * step[b]
    return step_size, predicted


# `numba_lm`'s other pieces, leaves (what they call is inlined): a state is (parameters,
# jtj, jtf), steps = (free_index, lower, upper, system, factor, rhs, step), `_damped_step`'s
# arguments after the state.
@numba.njit(error_model="numpy")
def _trial(
    parameters,
    jtj,
    jtf,
    trial,
    jtj_trial,
    jtf_trial,
    free_index,
    lower,
    upper,
    system,
    factor,
    rhs,
    step,
):
    """`numba_lm`'s trial: parameters + step projected on the bounds into `trial` (and
    `step` made the projected step); (largest step, linearised decrease)."""
    for a in range(free_index.shape[0]):
        trial[free_index[a]] = parameters[free_index[a]]
    return _projected_step(parameters, trial, step, free_index, (lower, upper), jtj, jtf)


@numba.njit(error_model="numpy")
def _newton(trial, jtj, jtf, free_index, lower, upper, system, factor, rhs, step):
    """`numba_lm`'s newton: the largest |step| and linearised decrease of `step`."""
    return _size_and_decrease(step, jtj, jtf)


@numba.njit(error_model="numpy")
def _take(
    trial,
    jtj_trial,
    jtf_trial,
    parameters,
    jtj,
    jtf,
    free_index,
    lower,
    upper,
    system,
    factor,
    rhs,
    step,
):
    """`numba_lm`'s take: the trial's free parameters, J^T J and J^T f made the current
    ones (the steps' arrays after free_index unused)."""
    for a in range(free_index.shape[0]):
        parameters[free_index[a]] = trial[free_index[a]]
        jtf[a] = jtf_trial[a]
        for b in range(free_index.shape[0]):
            jtj[a, b] = jtj_trial[a, b]


@numba.njit(error_model="numpy")
def _write_unsolved(outputs, pixel, band, status, p):
    """Writes the outputs of a problem that is not solved: its status, NaN values."""
    values_out, status_out, iterations_out, cost_out, jtj_out = outputs
    status_out[pixel, band] = status
    iterations_out[pixel, band] = 0
    cost_out[pixel, band] = math.nan
    for a in range(p):
        values_out[pixel, band, a] = math.nan
        for b in range(p):
            jtj_out[pixel, band, a, b] = math.nan


@numba.njit(error_model="numpy")
def _write_solved(outputs, pixel, band, solved, parameters, jtj, free_index):
    """Writes a solved problem's outputs: solved = (status, iterations, cost), the free
    parameters and J^T J."""
    values_out, status_out, iterations_out, cost_out, jtj_out = outputs
    status, iteration, cost = solved
    status_out[pixel, band] = status
    iterations_out[pixel, band] = iteration
    cost_out[pixel, band] = cost
    for a in range(free_index.shape[0]):
        values_out[pixel, band, a] = parameters[free_index[a]]
        for b in range(free_index.shape[0]):
            jtj_out[pixel, band, a, b] = jtj[a, b]


@cached_njit(
    inlines=(lm_rules, numba_lm, numba_internals, _backends, _scalar_math), error_model="numpy"
)
def _solve_lm_pixel(pixel, problem, model, settings, outputs):
    """Every band of one pixel (`_lm_kernel`'s loop body; arguments as there), each by
    `numba_lm.levenberg_marquardt` over this module's pieces (`lm_kernel_for`)."""
    rows, rows_valid, refl, start = problem
    step_length, parameters_fixed, free_index, lower, upper = model
    min_observations, max_iter, tol = settings
    n_bands = refl.shape[1]
    p = free_index.shape[0]
    parameters = parameters_fixed.copy()
    trial = parameters_fixed.copy()
    jtj = np.empty((p, p))
    jtf = np.empty(p)
    jtj_trial = np.empty((p, p))
    jtf_trial = np.empty(p)
    step_values = np.empty(max(step_length, 1))
    out = np.empty(p + 1)
    steps = (free_index, lower, upper, np.empty((p, p)), np.empty((p, p)), np.empty(p), np.empty(p))
    current = (parameters, jtj, jtf)
    candidate = (trial, jtj_trial, jtf_trial)
    rows_pixel = rows[pixel]
    for band in range(n_bands):
        refl_problem = refl[pixel, band]
        status = _band_status(refl_problem, rows_valid, pixel, min_observations)
        if status != SOLVING:
            _write_unsolved(outputs, pixel, band, status, p)
            continue
        for a in range(p):
            parameters[free_index[a]] = start[pixel, band, a]
        done, iteration, cost = levenberg_marquardt(
            (rows_pixel, refl_problem, p, step_values, out),
            steps,
            current,
            candidate,
            (max_iter, tol),
        )
        solved = (CONVERGED if done else MAX_ITER, iteration, cost)
        _write_solved(outputs, pixel, band, solved, parameters, jtj, free_index)


@cached_njit(
    inlines=(lm_rules, numba_lm, numba_internals, _backends, _scalar_math),
    nogil=True,
    error_model="numpy",
)
def _lm_kernel(first, last, problem, model, settings, outputs):
    """Solve problems (pixel, band) with observations along the last axis of `refl`.

    Compiled only as variants (`lm_kernel_for`), with `numba_lm`'s loop bound to this
    module's pieces over the generated code. problem = (rows, rows_valid, refl, start):
    rows (pixels, observations, row length); rows_valid (pixels, observations) bool;
    refl (pixels, bands, observations), NaN where an observation is left out; start
    (pixels, bands, p). model = (step_length, parameters_fixed, free_index, lower,
    upper), settings = (min_observations, max_iter, tol), outputs = (values (pixels,
    bands, p), status, iterations, cost, jtj (pixels, bands, p, p) J^T J at the
    solution), as `solve_numba` documents them. Solves pixels first to last - 1
    (`numba_threads.run_in_blocks`).
    """
    for pixel in range(first, last):
        _solve_lm_pixel(pixel, problem, model, settings, outputs)


@functools.cache
def lm_kernel_for(functions):
    """`_lm_kernel` compiled over the generated functions of one set of free parameters."""
    inlines = () if functions.module is None else (functions.module,)
    cost_and_normal_equations = compile_variant(
        _cost_and_normal_equations,
        functions.name,
        inlines=inlines,
        prepare=functions.prepare,
        columns=functions.columns,
    )
    solve = lm_for(
        f"fit_{functions.name}",
        evaluate=cost_and_normal_equations,
        solve=_damped_step,
        trial=_trial,
        newton=_newton,
        take=_take,
    )
    solve_pixel = compile_variant(
        _solve_lm_pixel, functions.name, inlines=inlines, levenberg_marquardt=solve
    )
    return compile_variant(_lm_kernel, functions.name, inlines=inlines, _solve_lm_pixel=solve_pixel)


def solve_numba(
    functions,
    rows: Float[np.ndarray, "pixels observations row"],
    rows_valid: Bool[np.ndarray, "pixels observations"],
    refl: Float[np.ndarray, "pixels bands observations"],
    start: Float[np.ndarray, "pixels bands p"],
    parameters_fixed,
    free_index,
    lower: Float[np.ndarray, " p"],
    upper: Float[np.ndarray, " p"],
    min_observations,
    max_iter,
    tol,
):
    """Solve one chunk of problems with the numba kernel (float64).

    Args:
        functions: the `_model.numba_jacobian.ColumnFunctions` of the free parameters.
        rows: (pixels, observations, row length) precomputed observation rows.
        rows_valid: (pixels, observations) bool: geometry valid (source and observer
            above the local horizon).
        refl: (pixels, bands, observations) observed r [1/sr]; NaN leaves an observation
            out of its problem. A problem using an observation whose geometry is not
            valid gets INVALID_GEOMETRY; one with fewer than `min_observations` left,
            TOO_FEW_OBSERVATIONS.
        start: (pixels, bands, p) starting values of the free parameters.
        parameters_fixed: values of all `PARAMETER_NAMES` (the free ones are overwritten).
        free_index: (p,) int indices of the free parameters in `PARAMETER_NAMES`.
        lower, upper: (p,) bounds the free parameters are projected onto.
        max_iter, tol: iteration cap and step tolerance.
    Returns:
        dict: values (pixels, bands, p), status int8, iterations int32, cost (sum of
        squared residuals), jtj (pixels, bands, p, p).
    """
    n_pixels, n_bands, _ = refl.shape
    p = len(free_index)
    out = {
        "values": np.empty((n_pixels, n_bands, p)),
        "status": np.empty((n_pixels, n_bands), np.int8),
        "iterations": np.empty((n_pixels, n_bands), np.int32),
        "cost": np.empty((n_pixels, n_bands)),
        "jtj": np.empty((n_pixels, n_bands, p, p)),
    }
    as_float = lambda a: np.require(a, np.float64, ("C", "W"))  # noqa: E731
    problem = (
        as_float(rows),
        np.require(rows_valid, np.bool_, ("C", "W")),
        as_float(refl),
        as_float(start),
    )
    model = (
        functions.step_length,
        as_float(parameters_fixed),
        np.require(free_index, np.int64, ("C", "W")),
        as_float(lower),
        as_float(upper),
    )
    settings = (int(min_observations), int(max_iter), float(tol))
    outputs = (out["values"], out["status"], out["iterations"], out["cost"], out["jtj"])
    run_in_blocks(lm_kernel_for(functions), n_pixels, problem, model, settings, outputs)
    return out
