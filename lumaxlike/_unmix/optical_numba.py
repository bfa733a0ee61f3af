"""The numba solver of `unmix` with free grain sizes and npFe0 (`optical`): projected
Levenberg-Marquardt per pixel over x = (f, ln D, phi), parallel over blocks of `BLOCK`
pixels. float64. The rules are `optical`'s (held parameters, the null-space step, the
projection) and `lm_rules`'s (acceptance, damping, convergence); `optical_jax` is the twin.
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np

from .._inverse import lm_rules
from .._model import slab_equations
from .._model._backends import numba_equations, retarget_to_numba, slab_twins
from .._model.family import DEFAULT_KEY, numba_equations_for
from .._model.numba_cache import cached_njit, compile_variant
from .._model.numba_model import MODEL_MODULES, as_kernel_array, kernel_params
from .._model.numba_threads import run_in_blocks
from .._status import Status
from .simplex_qp import MULTIPLIER_FLOOR, scaled_cholesky, scaled_solve

__all__ = ["solve_optical_numba", "project_simplex"]

BLOCK = 64
_rules = retarget_to_numba(lm_rules)
accepted = _rules.accepted
next_damping = _rules.next_damping
gain_ratio = _rules.gain_ratio
converged = _rules.converged
damped_diagonal = _rules.damped_diagonal
pinned = _rules.pinned
pixel_terms = numba_equations.pixel_terms
reflectance_and_slope = numba_equations.reflectance_and_slope
slab = slab_twins("numba").slab_albedo_and_slopes

CONVERGED = int(Status.CONVERGED)
MAX_ITER = int(Status.MAX_ITER)
INVALID_GEOMETRY = int(Status.INVALID_GEOMETRY)
NONFINITE_INPUT = int(Status.NONFINITE_INPUT)


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
def _normal_equations(
    x,
    p,
    terms,
    n,
    k,
    wavelength,
    s,
    iron_n,
    iron_k,
    density,
    refl,
    weights,
    hessian,
    gradient,
    column,
):
    """Weighted cost at x, with J^T J and J^T f (the lower triangle mirrored)."""
    size = 2 * p + 1
    for a in range(size):
        gradient[a] = 0.0
        for b in range(size):
            hessian[a, b] = 0.0
    cost = 0.0
    phi = x[2 * p]
    for band in range(refl.shape[0]):
        w_mix = 0.0
        dphi = 0.0
        for j in range(p):
            grain = math.exp(x[p + j])
            w, dw_dd, dw_df, _ = slab(
                n[j, band],
                k[j, band],
                wavelength[band],
                grain,
                s[j],
                phi,
                iron_n[band],
                iron_k[band],
                density[j],
                0.0,
            )
            column[j] = w
            column[p + j] = x[j] * dw_dd * grain
            dphi += x[j] * dw_df
            w_mix += x[j] * w
        column[2 * p] = dphi
        r, slope = reflectance_and_slope(w_mix, terms)
        residual = (r - refl[band]) * weights[band]
        cost += residual * residual
        d = slope * weights[band]
        for a in range(size):
            column[a] *= d
            gradient[a] += column[a] * residual
            for b in range(a + 1):
                hessian[a, b] += column[a] * column[b]
    for a in range(size):
        for b in range(a):
            hessian[b, a] = hessian[a, b]
    return cost


@numba.njit(error_model="numpy")
def _held(x, gradient, hessian, lower, upper, fixed, p, out):
    """`optical.held` for one pixel, into out (2p + 1,) bool."""
    count = 0
    total = 0.0
    largest = 0.0
    for a in range(2 * p + 1):
        largest = max(largest, hessian[a, a])
    for j in range(p):
        if x[j] > 0.0:
            count += 1
            total += gradient[j]
    nu = -total / max(count, 1)
    for j in range(p):
        out[j] = x[j] <= 0.0 and gradient[j] + nu >= -MULTIPLIER_FLOOR * largest
    for a in range(p, 2 * p + 1):
        out[a] = fixed[a] or pinned(x[a], lower[a], upper[a], gradient[a])
        if a < 2 * p and not x[a - p] > 0.0:
            out[a] = True


@numba.njit(error_model="numpy")
def _step(x, hessian, gradient, damping, held, lower, upper, p, system, factor, scale, rhs, y, out):
    """The projected damped Gauss-Newton trial point into out; False if singular."""
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
    # reduced system B = T^T A T (identity rows for what does not move), rhs = -T^T g
    for a in range(size):
        moves_a = not held[a] and a != reference
        ref_a = reference >= 0 and a < p
        for b in range(size):
            moves_b = not held[b] and b != reference
            value = 0.0
            if moves_a and moves_b:
                ref_b = reference >= 0 and b < p
                value = hessian[a, b]
                if a == b:
                    value = damped_diagonal(hessian[a, a], largest, damping)
                if ref_a:
                    value -= hessian[reference, b]
                if ref_b:
                    value -= hessian[a, reference]
                if ref_a and ref_b:
                    value += damped_diagonal(hessian[reference, reference], largest, damping)
            system[a, b] = value
        if moves_a:
            rhs[a] = -gradient[a] + (gradient[reference] if ref_a else 0.0)
        else:
            rhs[a] = 0.0
            system[a, a] = 1.0
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
def _optical_block(
    block,
    refl,
    to_sun,
    to_sensor,
    normal,
    scalars,
    legendre,
    use_legendre,
    n,
    k,
    wavelength,
    s,
    iron_n,
    iron_k,
    density,
    weights,
    start,
    lower,
    upper,
    fixed,
    max_iter,
    tol,
    x_out,
    status_out,
    iterations_out,
    cost_out,
    hessian_out,
    gradient_out,
):
    """The pixels of one block."""
    n_pixels = refl.shape[0]
    p = n.shape[0]
    size = 2 * p + 1
    x = np.empty(size)
    trial = np.empty(size)
    newton = np.empty(size)
    hessian = np.empty((size, size))
    gradient = np.empty(size)
    hessian_trial = np.empty((size, size))
    gradient_trial = np.empty(size)
    system = np.empty((size, size))
    factor = np.empty((size, size))
    scale = np.empty(size)
    rhs = np.empty(size)
    y = np.empty(size)
    column = np.empty(size)
    held = np.empty(size, np.bool_)
    for pixel in range(block * BLOCK, min(n_pixels, (block + 1) * BLOCK)):
        status = -1
        for c in range(3):
            if not (
                math.isfinite(to_sun[pixel, c])
                and math.isfinite(to_sensor[pixel, c])
                and math.isfinite(normal[pixel, c])
            ):
                status = NONFINITE_INPUT
        for band in range(refl.shape[1]):
            if not math.isfinite(refl[pixel, band]):
                status = NONFINITE_INPUT
        terms = pixel_terms(
            to_sun[pixel],
            to_sensor[pixel],
            normal[pixel],
            scalars[0],
            scalars[1],
            scalars[2],
            scalars[3],
            scalars[4],
            scalars[5],
            scalars[6],
            scalars[7],
            scalars[8],
            legendre,
            use_legendre,
        )
        if status < 0 and not math.isfinite(terms.scale):
            status = INVALID_GEOMETRY
        if status >= 0:
            status_out[pixel] = status
            iterations_out[pixel] = 0
            cost_out[pixel] = math.nan
            for a in range(size):
                x_out[pixel, a] = math.nan
                gradient_out[pixel, a] = math.nan
                for b in range(size):
                    hessian_out[pixel, a, b] = math.nan
            continue
        for a in range(size):
            x[a] = start[pixel, a]
        cost = _normal_equations(
            x,
            p,
            terms,
            n,
            k,
            wavelength,
            s,
            iron_n,
            iron_k,
            density,
            refl[pixel],
            weights,
            hessian,
            gradient,
            column,
        )
        damping = 0.0
        growth = 2.0
        done = cost == 0.0
        iteration = 0
        while not done and iteration < max_iter:
            iteration += 1
            _held(x, gradient, hessian, lower, upper, fixed, p, held)
            if not _step(
                x,
                hessian,
                gradient,
                damping,
                held,
                lower,
                upper,
                p,
                system,
                factor,
                scale,
                rhs,
                y,
                trial,
            ):
                damping, growth = next_damping(False, 0.0, damping, growth, math.inf, 0.0)
                continue
            predicted, step_size = _decrease(x, trial, hessian, gradient)
            cost_trial = _normal_equations(
                trial,
                p,
                terms,
                n,
                k,
                wavelength,
                s,
                iron_n,
                iron_k,
                density,
                refl[pixel],
                weights,
                hessian_trial,
                gradient_trial,
                column,
            )
            _held(trial, gradient_trial, hessian_trial, lower, upper, fixed, p, held)
            newton_size, newton_decrease = math.inf, math.inf
            if _step(
                trial,
                hessian_trial,
                gradient_trial,
                0.0,
                held,
                lower,
                upper,
                p,
                system,
                factor,
                scale,
                rhs,
                y,
                newton,
            ):
                newton_decrease, newton_size = _decrease(
                    trial, newton, hessian_trial, gradient_trial
                )
            accept = accepted(cost, cost_trial)
            done = converged(step_size, predicted, cost, newton_size, accept, damping, tol)
            damping, growth = next_damping(
                accept,
                gain_ratio(cost, cost_trial, predicted),
                damping,
                growth,
                newton_decrease,
                cost_trial,
            )
            if accept:
                cost = cost_trial
                for a in range(size):
                    x[a] = trial[a]
                    gradient[a] = gradient_trial[a]
                    for b in range(size):
                        hessian[a, b] = hessian_trial[a, b]
        status_out[pixel] = CONVERGED if done else MAX_ITER
        iterations_out[pixel] = iteration
        cost_out[pixel] = cost
        for a in range(size):
            x_out[pixel, a] = x[a]
            gradient_out[pixel, a] = gradient[a]
            for b in range(size):
                hessian_out[pixel, a, b] = hessian[a, b]


@cached_njit(inlines=(lm_rules, slab_equations, *MODEL_MODULES), nogil=True, error_model="numpy")
def _optical_kernel(
    first,
    last,
    refl,
    to_sun,
    to_sensor,
    normal,
    scalars,
    legendre,
    use_legendre,
    n,
    k,
    wavelength,
    s,
    iron_n,
    iron_k,
    density,
    weights,
    start,
    lower,
    upper,
    fixed,
    max_iter,
    tol,
    x_out,
    status_out,
    iterations_out,
    cost_out,
    hessian_out,
    gradient_out,
):
    """Blocks first to last - 1 of `BLOCK` pixels (`numba_threads.run_in_blocks`)."""
    for block in range(first, last):
        _optical_block(
            block,
            refl,
            to_sun,
            to_sensor,
            normal,
            scalars,
            legendre,
            use_legendre,
            n,
            k,
            wavelength,
            s,
            iron_n,
            iron_k,
            density,
            weights,
            start,
            lower,
            upper,
            fixed,
            max_iter,
            tol,
            x_out,
            status_out,
            iterations_out,
            cost_out,
            hessian_out,
            gradient_out,
        )


def _rebound(function, tag, **bindings):
    """An njit function compiled again with some of its globals rebound (tagged name)."""
    py_func = function.py_func
    clone = type(py_func)(py_func.__code__, {**py_func.__globals__, **bindings}, py_func.__name__)
    clone.__qualname__ = f"{py_func.__qualname__}__{tag}"
    return numba.njit(error_model="numpy")(clone)


@functools.cache
def _kernel_for(key, reflections: str, mean_path: str):
    if (key, reflections, mean_path) == (DEFAULT_KEY, "hapke1993", "hapke2001"):
        return _optical_kernel
    equations = numba_equations if key == DEFAULT_KEY else numba_equations_for(key)
    tag = f"{key.name}_{reflections}_{mean_path}".replace("-", "_")
    normal_equations = _rebound(
        _normal_equations,
        tag,
        reflectance_and_slope=equations.reflectance_and_slope,
        slab=slab_twins("numba", reflections, mean_path).slab_albedo_and_slopes,
    )
    block = _rebound(
        _optical_block, tag, pixel_terms=equations.pixel_terms, _normal_equations=normal_equations
    )
    return compile_variant(_optical_kernel, tag, _optical_block=block)


def solve_optical_numba(
    refl,
    to_sun,
    to_sensor,
    normal,
    params,
    endmembers,
    weights,
    start,
    lower,
    upper,
    fixed,
    max_iter,
    tol,
    pad_to=None,
):
    """One chunk from `start` (2p + 1,) or one per pixel (pixels, 2p + 1): dict of x
    (pixels, 2p + 1), status int8, iterations, cost, hessian, gradient (J^T J and J^T f
    at x); NaN where unsolved."""
    optical = endmembers.optical
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
    run_in_blocks(
        _kernel_for(params.model_key, optical.reflections, optical.mean_path),
        (n_pixels + BLOCK - 1) // BLOCK,
        as_kernel_array(refl),
        *(as_kernel_array(g) for g in (to_sun, to_sensor, normal)),
        *kernel_params(params),
        *(
            as_kernel_array(a)
            for a in (
                optical.n,
                optical.k,
                endmembers.wavelengths,
                optical.internal_scattering,
                optical.iron_n,
                optical.iron_k,
                endmembers.density,
                weights,
                start,
                lower,
                upper,
            )
        ),
        np.require(fixed, np.bool_, ("C", "W")),
        int(max_iter),
        float(tol),
        out["x"],
        out["status"],
        out["iterations"],
        out["cost"],
        out["hessian"],
        out["gradient"],
    )
    return out
