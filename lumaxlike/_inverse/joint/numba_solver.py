"""The numba solver of joint problems: one Levenberg-Marquardt problem per pixel over all
its bands and observations, parallel over pixels.

A problem has per-band parameters (p per band) and shared ones (s, one value for all its
bands); its normal equations are accumulated as the arrow blocks of `schur` (A_k, C_k,
D, g) and solved by the Schur complement (`schur.arrow_step`), so the work grows
linearly with the bands. Each row is weighted by its band's 1 / refl_sigma; Gaussian
priors enter as extra rows (x - mu) / sigma_prior (`priors`). The iteration is
`numba_lm`'s loop (the rules of `lm_rules`) over this module's pieces, as in
`fit.numba_solver`, with the model's columns from the generated `ColumnFunctions` of all
the free parameters (per-band ones first, then the shared ones), compiled as a variant
per set of free parameters and cached on disk.
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np

from ..._compat import numba_internals
from ..._model import _backends, _scalar_math
from ..._model.numba_cache import cached_njit, compile_variant
from ..._model.numba_jacobian import columns, prepare
from ..._model.numba_threads import run_in_blocks
from ..._status import Status
from .. import lm_rules, numba_lm
from ..fit import numba_solver as fit_numba_solver
from ..numba_lm import levenberg_marquardt, lm_for
from . import schur
from .schur import arrow_step

__all__ = ["solve_joint_numba"]

SOLVING = -1
CONVERGED = int(Status.CONVERGED)
MAX_ITER = int(Status.MAX_ITER)
INVALID_GEOMETRY = int(Status.INVALID_GEOMETRY)
TOO_FEW_OBSERVATIONS = int(Status.TOO_FEW_OBSERVATIONS)


@cached_njit(error_model="numpy")
def _joint_normal_equations(x, blocks, parameters, indices, data, priors, scratch):
    """The cost (weighted sum of squares, prior rows included) and the arrow blocks:
    `numba_lm`'s evaluate, the state (x, blocks) first, then the data.

    Compiled only as variants (`joint_kernel_for`), with `prepare` and `columns` bound
    to generated code. parameters: the values of all `PARAMETER_NAMES` (scratch);
    indices = (band_index, shared_index); x = (xb (bands, p), xs (s,)); data = (rows,
    refl (bands, observations), NaN where left out, weight (bands,)); priors = (mean_b,
    weight_b, mean_s, weight_s) of the pixel; scratch = (step_values, out); blocks =
    (a_blocks, c_blocks, d_block, gb, gs), written.
    """
    band_index, shared_index = indices
    xb, xs = x
    rows, refl, weight = data
    prior_mean_b, prior_weight_b, prior_mean_s, prior_weight_s = priors
    step_values, out = scratch
    a_blocks, c_blocks, d_block, gb, gs = blocks
    n_bands, p = xb.shape
    s = xs.shape[0]
    cost = 0.0
    for q in range(s):
        parameters[shared_index[q]] = xs[q]
        gs[q] = 0.0
        for r in range(s):
            d_block[q, r] = 0.0
    for band in range(n_bands):
        for a in range(p):
            parameters[band_index[a]] = xb[band, a]
            gb[band, a] = 0.0
            for b in range(p):
                a_blocks[band, a, b] = 0.0
            for q in range(s):
                c_blocks[band, a, q] = 0.0
        prepare(parameters, step_values)  # the free parameters alone: once per band
        scale = weight[band]
        for k in range(refl.shape[1]):
            if not math.isfinite(refl[band, k]):  # a masked observation: a zero row
                continue
            columns(step_values, rows[k], out)
            residual = (out[0] - refl[band, k]) * scale
            cost += residual * residual
            for j in range(p + s):
                out[1 + j] *= scale
            for a in range(p):
                gb[band, a] += out[1 + a] * residual
                for b in range(a + 1):
                    a_blocks[band, a, b] += out[1 + a] * out[1 + b]
                for q in range(s):
                    c_blocks[band, a, q] += out[1 + a] * out[1 + p + q]
            for q in range(s):
                gs[q] += out[1 + p + q] * residual
                for r in range(q + 1):
                    d_block[q, r] += out[1 + p + q] * out[1 + p + r]
        for a in range(p):
            if prior_weight_b[band, a] > 0.0:
                residual = (xb[band, a] - prior_mean_b[band, a]) * prior_weight_b[band, a]
                cost += residual * residual
                gb[band, a] += prior_weight_b[band, a] * residual
                a_blocks[band, a, a] += prior_weight_b[band, a] * prior_weight_b[band, a]
            for b in range(a):
                a_blocks[band, b, a] = a_blocks[band, a, b]
    for q in range(s):
        if prior_weight_s[q] > 0.0:
            residual = (xs[q] - prior_mean_s[q]) * prior_weight_s[q]
            cost += residual * residual
            gs[q] += prior_weight_s[q] * residual
            d_block[q, q] += prior_weight_s[q] * prior_weight_s[q]
        for r in range(q):
            d_block[r, q] = d_block[q, r]
    return cost


@numba.njit(error_model="numpy", inline="always")
def _size_and_decrease(step_b, step_s, a_blocks, c_blocks, d_block, gb, gs):
    """The largest |step| of (step_b, step_s), and the decrease of the linearised cost along
    it, -(2 delta^T g + delta^T H delta), H and g as the arrow blocks."""
    n_bands, p = step_b.shape
    s = step_s.shape[0]
    size = 0.0
    decrease = 0.0
    for q in range(s):
        size = max(size, abs(step_s[q]))
        decrease -= 2.0 * step_s[q] * gs[q]
        for r in range(s):
            decrease -= step_s[q] * d_block[q, r] * step_s[r]
    for band in range(n_bands):
        for a in range(p):
            size = max(size, abs(step_b[band, a]))
            decrease -= 2.0 * step_b[band, a] * gb[band, a]
            for b in range(p):
                decrease -= step_b[band, a] * a_blocks[band, a, b] * step_b[band, b]
            for q in range(s):
                decrease -= 2.0 * step_b[band, a] * c_blocks[band, a, q] * step_s[q]
    return size, decrease


# The steps of `_solve_joint_pixel` below are inlined into it by numba
# (``inline="always"``): as calls, with their tuples of arrays, they cost ~3 % of its time.
@numba.njit(error_model="numpy", inline="always")
def _pixel_status(pixel, refl, rows_valid, min_observations):
    """SOLVING, or why the pixel's problem is not solved: an invalid geometry row under a
    finite observation, or a band with fewer than `min_observations` finite ones."""
    n_bands, n_obs = refl.shape[1], refl.shape[2]
    status = SOLVING
    for band in range(n_bands):
        used = 0
        for k in range(n_obs):
            if math.isfinite(refl[pixel, band, k]):
                used += 1
                if not rows_valid[pixel, k]:
                    status = INVALID_GEOMETRY
        if status == SOLVING and used < min_observations:
            status = TOO_FEW_OBSERVATIONS
    return status


@numba.njit(error_model="numpy", inline="always")
def _pixel_scratch(n_bands, p, s, step_length):
    """A pixel's working arrays: (the step's (values, columns) scratch, the state
    (xb, xs), trial state and step, the arrow blocks at x and at the trial,
    `arrow_step`'s scratch)."""
    scratch = (np.empty(max(step_length, 1)), np.empty(p + s + 1))
    x = (np.empty((n_bands, p)), np.empty(s))
    trial = (np.empty((n_bands, p)), np.empty(s))
    step = (np.empty((n_bands, p)), np.empty(s))
    blocks = (
        np.empty((n_bands, p, p)),
        np.empty((n_bands, p, s)),
        np.empty((s, s)),
        np.empty((n_bands, p)),
        np.empty(s),
    )
    blocks_trial = (
        np.empty((n_bands, p, p)),
        np.empty((n_bands, p, s)),
        np.empty((s, s)),
        np.empty((n_bands, p)),
        np.empty(s),
    )
    arrow_scratch = (
        np.empty((n_bands, p), np.bool_),
        np.empty(s, np.bool_),
        np.empty((p, p)),
        np.empty((p, p)),
        np.empty((n_bands, p, s)),
        np.empty((n_bands, p)),
        np.empty((s, s)),
        np.empty((s, s)),
        np.empty(s),
        np.empty(p),
        np.empty(p),
    )
    return scratch, x, trial, step, blocks, blocks_trial, arrow_scratch


@numba.njit(error_model="numpy", inline="always")
def _project(x, step, lower, upper, trial):
    """The trial point x + step projected on the bounds (into `trial`), and `step` made
    the projected step."""
    xb, xs = x
    step_b, step_s = step
    xb_trial, xs_trial = trial
    n_bands, p = xb.shape
    for band in range(n_bands):
        for a in range(p):
            value = min(upper[a], max(lower[a], xb[band, a] + step_b[band, a]))
            xb_trial[band, a] = value
            step_b[band, a] = value - xb[band, a]  # the projected step
    for q in range(xs.shape[0]):
        value = min(upper[p + q], max(lower[p + q], xs[q] + step_s[q]))
        xs_trial[q] = value
        step_s[q] = value - xs[q]


# `numba_lm`'s other pieces (its solve is `schur.arrow_step`), leaves: a state is (x,
# blocks), steps = (bounds, `arrow_step`'s scratch, the step (step_b, step_s)).
@numba.njit(error_model="numpy")
def _trial(x, blocks, trial, blocks_trial, bounds, arrow_scratch, step):
    """`numba_lm`'s trial: x + step projected on the bounds into `trial` (and `step`
    made the projected step); (largest step, linearised decrease)."""
    _project(x, step, bounds[0], bounds[1], trial)
    a_blocks, c_blocks, d_block, gb, gs = blocks
    return _size_and_decrease(step[0], step[1], a_blocks, c_blocks, d_block, gb, gs)


@numba.njit(error_model="numpy")
def _newton(trial, blocks_trial, bounds, arrow_scratch, step):
    """`numba_lm`'s newton: the largest |step| and linearised decrease of `step`."""
    a_trial, c_trial, d_trial, gb_trial, gs_trial = blocks_trial
    return _size_and_decrease(step[0], step[1], a_trial, c_trial, d_trial, gb_trial, gs_trial)


@numba.njit(error_model="numpy")
def _take(trial, blocks_trial, x, blocks, bounds, arrow_scratch, step):
    """`numba_lm`'s take: the trial's state and arrow blocks made the current ones
    (element by element: a slice assignment would be a call, and this piece no leaf)."""
    xb_trial, xs_trial = trial
    a_trial, c_trial, d_trial, gb_trial, gs_trial = blocks_trial
    xb, xs = x
    a_blocks, c_blocks, d_block, gb, gs = blocks
    n_bands, p = xb.shape
    s = xs.shape[0]
    for q in range(s):
        xs[q] = xs_trial[q]
        gs[q] = gs_trial[q]
        for r in range(s):
            d_block[q, r] = d_trial[q, r]
    for band in range(n_bands):
        for a in range(p):
            xb[band, a] = xb_trial[band, a]
            gb[band, a] = gb_trial[band, a]
            for b in range(p):
                a_blocks[band, a, b] = a_trial[band, a, b]
            for q in range(s):
                c_blocks[band, a, q] = c_trial[band, a, q]


@numba.njit(error_model="numpy", inline="always")
def _write_pixel(pixel, outputs, status, iterations, cost, x, blocks):
    """A solved pixel's outputs: status, iterations, cost, values x = (xb, xs) and arrow
    blocks (a, c, d, gb, gs)."""
    values_b, values_s, status_out, iterations_out, cost_out = outputs[:5]
    a_out, c_out, d_out, gb_out, gs_out = outputs[5:]
    status_out[pixel] = status
    iterations_out[pixel] = iterations
    cost_out[pixel] = cost
    values_b[pixel] = x[0]
    values_s[pixel] = x[1]
    a_out[pixel] = blocks[0]
    c_out[pixel] = blocks[1]
    d_out[pixel] = blocks[2]
    gb_out[pixel] = blocks[3]
    gs_out[pixel] = blocks[4]


@numba.njit(error_model="numpy", inline="always")
def _write_unsolved(pixel, outputs, status):
    """The outputs of a pixel whose problem is not solved: its status, NaN elsewhere."""
    values_b, values_s, status_out, iterations_out, cost_out = outputs[:5]
    a_out, c_out, d_out, gb_out, gs_out = outputs[5:]
    status_out[pixel] = status
    iterations_out[pixel] = 0
    cost_out[pixel] = math.nan
    values_b[pixel] = math.nan
    values_s[pixel] = math.nan
    a_out[pixel] = math.nan
    c_out[pixel] = math.nan
    d_out[pixel] = math.nan
    gb_out[pixel] = math.nan
    gs_out[pixel] = math.nan


@cached_njit(
    inlines=(lm_rules, numba_lm, numba_internals, _backends, _scalar_math, schur, fit_numba_solver),
    error_model="numpy",
)
def _solve_joint_pixel(pixel, problem, priors, model, settings, outputs):
    """One pixel's joint problem (`_joint_kernel`'s loop body; arguments as there), by
    `numba_lm.levenberg_marquardt` over this module's pieces (`joint_kernel_for`)."""
    rows, rows_valid, refl, weight, start_b, start_s = problem
    prior_mean_b, prior_weight_b, prior_mean_s, prior_weight_s = priors
    step_length, parameters_fixed, band_index, shared_index, lower, upper = model
    min_observations, max_iter, tol = settings
    status = _pixel_status(pixel, refl, rows_valid, min_observations)
    if status != SOLVING:
        _write_unsolved(pixel, outputs, status)
        return
    parameters = parameters_fixed.copy()
    scratch, x, trial, step, blocks, blocks_trial, arrow_scratch = _pixel_scratch(
        refl.shape[1], band_index.shape[0], shared_index.shape[0], step_length
    )
    x[0][:] = start_b[pixel]
    x[1][:] = start_s[pixel]
    pixel_priors = (
        prior_mean_b[pixel],
        prior_weight_b[pixel],
        prior_mean_s[pixel],
        prior_weight_s[pixel],
    )
    data = (
        parameters,
        (band_index, shared_index),
        (rows[pixel], refl[pixel], weight[pixel]),
        pixel_priors,
        scratch,
    )
    done, iteration, cost = levenberg_marquardt(
        data,
        ((lower, upper), arrow_scratch, step),
        (x, blocks),
        (trial, blocks_trial),
        (max_iter, tol),
    )
    _write_pixel(pixel, outputs, CONVERGED if done else MAX_ITER, iteration, cost, x, blocks)


@cached_njit(
    inlines=(lm_rules, numba_lm, numba_internals, _backends, _scalar_math, schur, fit_numba_solver),
    nogil=True,
    error_model="numpy",
)
def _joint_kernel(first, last, problem, priors, model, settings, outputs):
    """Solve the joint problems of pixels first to last - 1 (`numba_threads.run_in_blocks`
    runs the blocks): problem = (rows, rows_valid, refl, weight, start_b, start_s),
    priors = (mean_b, weight_b, mean_s, weight_s), model = (step_length,
    parameters_fixed, band_index, shared_index, lower, upper), settings =
    (min_observations, max_iter, tol), outputs = the ten arrays of `solve_joint_numba`'s
    dict in its order (see there for the shapes).

    Compiled only as variants (`joint_kernel_for`), with `numba_lm`'s loop bound to this
    module's pieces over the generated code.
    """
    for pixel in range(first, last):
        _solve_joint_pixel(pixel, problem, priors, model, settings, outputs)


@functools.cache
def joint_kernel_for(functions):
    """`_joint_kernel` compiled over the generated functions of one set of free parameters."""
    inlines = () if functions.module is None else (functions.module,)
    normal_equations = compile_variant(
        _joint_normal_equations,
        functions.name,
        inlines=inlines,
        prepare=functions.prepare,
        columns=functions.columns,
    )
    solve = lm_for(
        f"joint_{functions.name}",
        evaluate=normal_equations,
        solve=arrow_step,
        trial=_trial,
        newton=_newton,
        take=_take,
    )
    solve_pixel = compile_variant(
        _solve_joint_pixel, functions.name, inlines=inlines, levenberg_marquardt=solve
    )
    return compile_variant(
        _joint_kernel, functions.name, inlines=inlines, _solve_joint_pixel=solve_pixel
    )


def solve_joint_numba(
    functions,
    rows,
    rows_valid,
    refl,
    weight,
    start_b,
    start_s,
    priors,
    parameters_fixed,
    band_index,
    shared_index,
    bounds,
    settings,
):
    """Solve one chunk of joint problems with the numba kernel (float64).

    Args:
        functions: the `ColumnFunctions` of the free parameters, per-band ones first.
        rows: (problems, observations, row length) observation rows (`hoisted_rows`).
        rows_valid: (problems, observations) bool: geometry valid.
        refl: (problems, bands, observations) observed r [1/sr], NaN where left out. A
            problem using an observation whose geometry is not valid gets
            INVALID_GEOMETRY; one with a band of fewer than `min_observations`
            observations, TOO_FEW_OBSERVATIONS.
        weight: (problems, bands) 1 / refl_sigma of each band's rows (1 for none).
        start_b: (problems, bands, p), start_s: (problems, s) starting values.
        priors: (mean_b, weight_b, mean_s, weight_s): prior means and 1 / sigma_prior of
            shapes (problems, bands, p) and (problems, s); a weight of 0 is no prior.
        parameters_fixed: values of all `PARAMETER_NAMES` (the free ones overwritten).
        band_index (p,), shared_index (s,): the free parameters' indices in
            `PARAMETER_NAMES`.
        bounds: (lower, upper), (p + s,) each, per-band ones first.
        settings: (min_observations, max_iter, tol), as `solve_numba`'s.
    Returns:
        dict: values_b, values_s, status (problems,) int8, iterations int32, cost (the
        objective), a_blocks, c_blocks, d_block (H at the solution, prior included), gb
        (problems, bands, p), gs (problems, s): g = J^T f there (half the gradient).
    """
    n, n_bands, _ = refl.shape
    p, s = len(band_index), len(shared_index)
    out = {
        "values_b": np.empty((n, n_bands, p)),
        "values_s": np.empty((n, s)),
        "status": np.empty(n, np.int8),
        "iterations": np.empty(n, np.int32),
        "cost": np.empty(n),
        "a_blocks": np.empty((n, n_bands, p, p)),
        "c_blocks": np.empty((n, n_bands, p, s)),
        "d_block": np.empty((n, s, s)),
        "gb": np.empty((n, n_bands, p)),
        "gs": np.empty((n, s)),
    }

    def as_float(a):
        return np.require(a, np.float64, ("C", "W"))

    def as_int(a):
        return np.require(np.asarray(a, np.int64).reshape(-1), np.int64, ("C", "W"))

    min_observations, max_iter, tol = settings
    problem = (
        as_float(rows),
        np.require(rows_valid, np.bool_, ("C", "W")),
        as_float(refl),
        as_float(weight),
        as_float(start_b),
        as_float(start_s),
    )
    model = (
        functions.step_length,
        as_float(parameters_fixed),
        as_int(band_index),
        as_int(shared_index),
        as_float(bounds[0]),
        as_float(bounds[1]),
    )
    run_in_blocks(
        joint_kernel_for(functions),
        n,
        problem,
        tuple(as_float(a) for a in priors),
        model,
        (int(min_observations), int(max_iter), float(tol)),
        tuple(out.values()),
    )
    return out
