"""The numba kernels of `unmix`'s two-step route (the w-space programme after a per-band
inversion) and of the covariance and mass fractions both routes finish with; parallel
over blocks of `BLOCK` pixels (`numba_threads.run_in_blocks`; scratch allocated once per
block).
float64. The one-step route's kernel is `numba_one_step`.
"""

from __future__ import annotations

import math

import numba
import numpy as np

from .._model.numba_cache import cached_njit
from .._model.numba_model import as_kernel_array
from .._model.numba_threads import run_in_blocks
from .._status import Status
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

__all__ = ["BLOCK", "finish_numba", "two_step_numba"]

BLOCK = 64  # pixels per block: scratch arrays are allocated once per block
CONVERGED = int(Status.CONVERGED)
MAX_ITER = int(Status.MAX_ITER)
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
def _two_step_block(block, data, settings, outputs):
    """The pixels of one block of `_two_step_kernel`, with their scratch arrays. A band's
    weight is 1/sigma_w^2 (all 1 when `sigma_w` is empty); an unsolved pixel's w and
    sigma_w are not read. Arguments as `_two_step_kernel`'s."""
    w, sigma_w, solve, albedo, shared_hessian = data
    equality, max_steps = settings
    fractions_out, cost_out, hessian_out, gradient_out, sum_out, code_out = outputs
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


@cached_njit(inlines=(_qp_module,), nogil=True, error_model="numpy")
def _two_step_kernel(first, last, data, settings, outputs):
    """Blocks first to last - 1 of `BLOCK` pixels (`numba_threads.run_in_blocks`): data =
    (w, sigma_w, solve, albedo, shared_hessian = albedo albedo^T), settings = (equality,
    max_steps), outputs = the arrays of `two_step_numba`'s dict in its order."""
    for block in range(first, last):
        _two_step_block(block, data, settings, outputs)


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
    data = (
        as_kernel_array(w),
        sigma_w,
        np.require(solve, np.bool_, ("C", "W")),
        albedo,
        albedo @ albedo.T,
    )
    settings = (bool(equality), int(max_steps))
    run_in_blocks(_two_step_kernel, (n + BLOCK - 1) // BLOCK, data, settings, tuple(out.values()))
    return out


_pixel_mass_fractions = numba.njit(error_model="numpy")(mixing.pixel_mass_fractions)


@cached_njit(inlines=(_qp_module, mixing), error_model="numpy")
def _finish_pixel(pixel, solved, settings, outputs, scratch):
    """One pixel of `_finish_kernel`, with its block's scratch arrays: the loop body as a
    function of its own (when the loop was numba's prange, whose parallel passes grow with
    its body, and this one inlines `reduced_covariance` twice: the kernel compiled in
    35 s with the body inline, 19 s so). Arguments as `_finish_kernel`'s."""
    hessian, gradient, fractions, sum_active, cost, status = solved
    per_mass, weighted, equality, n_bands = settings
    mass_out, covariance_out, at_bound_out, remainder_out = outputs
    system, factor, scale, rhs, column, covariance, released, released_covariance = scratch[:8]
    free, tested, x, pixel_hessian, pixel_gradient, mass, mass_covariance = scratch[8:]
    p = fractions.shape[1]
    code = status[pixel]
    if not (code == CONVERGED or code == MAX_ITER or code == UNDETERMINED):
        remainder_out[pixel] = math.nan
        for a in range(p):
            fractions[pixel, a] = math.nan
            mass_out[pixel, a] = math.nan
            at_bound_out[pixel, a] = False
            for b in range(p):
                covariance_out[pixel, a, b] = math.nan
        return
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


@cached_njit(inlines=(_qp_module, mixing), nogil=True, error_model="numpy")
def _finish_kernel(first, last, solved, settings, outputs):
    """Blocks first to last - 1 of `BLOCK` pixels (`numba_threads.run_in_blocks`): solved =
    (hessian, gradient, fractions, sum_active, cost, status), settings = (per_mass,
    weighted, equality, n_bands), outputs = the arrays of `finish_numba`'s dict in its
    order."""
    n, p = solved[2].shape
    for block in range(first, last):
        # Per-block scratch; a pixel's rows are copied in and out (a view of a shared
        # array updated by parallel threads updates the array's one reference count from
        # every thread: contention that cost more than the covariance itself).
        scratch = (
            np.empty((p, p)),  # system
            np.empty((p, p)),  # factor
            np.empty(p),  # scale
            np.empty(p),  # rhs
            np.empty(p),  # column
            np.empty((p, p)),  # covariance
            np.empty(p),  # released
            np.empty((p, p)),  # released_covariance
            np.empty(p, np.bool_),  # free
            np.empty(p, np.bool_),  # tested
            np.empty(p),  # x
            np.empty((p, p)),  # pixel_hessian
            np.empty(p),  # pixel_gradient
            np.empty(p),  # mass
            np.empty((p, p)),  # mass_covariance
        )
        for pixel in range(block * BLOCK, min(n, (block + 1) * BLOCK)):
            _finish_pixel(pixel, solved, settings, outputs, scratch)


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
    arrays = (
        as_kernel_array(solved["hessian"]),
        as_kernel_array(solved["gradient"]),
        solved["fractions"],
        np.require(solved["sum_active"], np.bool_, ("C", "W")),
        as_kernel_array(solved["cost"]),
        status,
    )
    settings = (as_kernel_array(per_mass), bool(weighted), bool(equality), int(n_bands))
    run_in_blocks(_finish_kernel, (n + BLOCK - 1) // BLOCK, arrays, settings, tuple(out.values()))
    return out
