"""``method="prior"``'s numba kernel (`prior_solvers`' numba driver), cached on disk
as every kernel of the package (`numba_cache.cached_njit`; another model
configuration's kernel is a variant, `compile_variant`), run over blocks of pixels on
`numba_threads.run_in_blocks`'s threads. Its steps are those of the JAX driver
(`prior_solvers`), band by band in loops; the iteration is `numba_lm`'s loop (the rules
of `lm_rules`) over this module's pieces.
"""

from __future__ import annotations

import functools

import numba
import numpy as np

from .._compat import numba_internals
from .._inverse import lm_rules, numba_lm
from .._inverse.numba_lm import lm_for
from .._model import thermal as thermal_equations
from .._model._backends import numba_equations, retarget_to_numba
from .._model.family import DEFAULT_KEY, ModelKey, numba_equations_for
from .._model.numba_cache import cached_njit, compile_variant, njit_variant
from .._model.numba_model import MODEL_MODULES, model_scalars
from . import prior_rules, rules

__all__ = ["prior_kernel_for"]

_thermal = retarget_to_numba(thermal_equations, inline=tuple(thermal_equations.__all__))
_INLINES = (
    prior_rules,
    rules,
    thermal_equations,
    lm_rules,
    numba_lm,
    numba_internals,
    *MODEL_MODULES,
)


def _prior_rules(equations):
    return retarget_to_numba(
        prior_rules,
        inline=tuple(prior_rules.__all__),
        reflectance_and_slope=equations.reflectance_and_slope,
        clamped_albedo=_thermal.clamped_albedo,
        emissivity_and_slope=_thermal.emissivity_and_slope,
        thermal_factor_and_slope=_thermal.thermal_factor_and_slope,
    )


_default = _prior_rules(numba_equations)
_rules = retarget_to_numba(lm_rules, inline=tuple(lm_rules.__all__))
pixel_terms = numba_equations.pixel_terms
band_terms = _default.prior_band_terms
schur_terms, temperature_step = _default.schur_terms, _default.temperature_step
albedo_step, predicted_terms = _default.albedo_step, _default.predicted_terms
damped_diagonal = _rules.damped_diagonal
CONVERGED, MAX_ITER = rules.CONVERGED, rules.MAX_ITER


@numba.njit(error_model="numpy")
def _evaluate(w, abcg, sums, bounds, band_data, p, mean, pixel, inverse_sigma):
    """`numba_lm`'s evaluate: the pixel's cost at the state (w (n,), abcg, sums = (t,
    D, g_t), bounds), its sums D and g_t into sums[1:], each band's A, C, g into abcg
    (3, n); data = (band_data, p, mean, pixel, inverse_sigma) as `_pixel`'s."""
    wavelength, solar, observed, weight = band_data
    t = sums[0]
    cost, d, gt = 0.0, 0.0, 0.0
    for k in range(w.shape[0]):
        band = (wavelength[k], solar[k], observed[p, k], weight[p, k], mean[p, k])
        cost_k, a, c, d_k, g, gt_k = band_terms(w[k], t, band, pixel, inverse_sigma)
        cost, d, gt = cost + cost_k, d + d_k, gt + gt_k
        abcg[0, k], abcg[1, k], abcg[2, k] = a, c, g
    sums[1], sums[2] = d, gt
    return cost


@numba.njit(error_model="numpy", inline="always")
def _step(abcg, d, gt, damping, t, free_t, bounds, dw):
    """The damped Schur step into dw; (dt, predicted decrease, regular, max |dw|)."""
    n = dw.shape[0]
    largest = d
    for k in range(n):
        largest = max(largest, abcg[0, k])
    d_d = damped_diagonal(d, largest, damping)
    schur_s, schur_g = 0.0, 0.0
    for k in range(n):
        s_k, g_k = schur_terms(
            damped_diagonal(abcg[0, k], largest, damping), abcg[1, k], abcg[2, k]
        )
        schur_s, schur_g = schur_s + s_k, schur_g + g_k
    dt, regular = temperature_step(d_d, gt, schur_s, schur_g, free_t)
    dt = min(max(t + dt, bounds[0]), bounds[1]) - t
    predicted, size = 0.0 - (2 * dt * gt + d * dt * dt), 0.0
    for k in range(n):
        a = abcg[0, k]
        dw[k] = albedo_step(damped_diagonal(a, largest, damping), abcg[1, k], abcg[2, k], dt)
        predicted += predicted_terms(a, abcg[1, k], abcg[2, k], dw[k], dt)
        size = max(size, abs(dw[k]))
    return dt, predicted, regular, size


# `numba_lm`'s other pieces. A state is (w, abcg, sums, bounds): `bounds` are T's, on
# which the state's step is projected: the current point's (t_low, t_high), the trial's
# (-inf, inf), its Gauss-Newton step of `lm_rules.converged` not projected (as the JAX
# driver's). steps = (free_t, dw, step): dw (n,) the step of w, step = (dt, predicted
# decrease, regular: 1.0 or 0.0, max |dw|) of `_step`.
@numba.njit(error_model="numpy")
def _solve(damping, w, abcg, sums, bounds, free_t, dw, step):
    """`numba_lm`'s solve: `_step` at the state into (dw, step); never singular (a
    singular S gives dt = 0, `prior_rules.temperature_step`)."""
    dt, predicted, regular, size = _step(
        abcg, sums[1], sums[2], damping, sums[0], free_t, bounds, dw
    )
    step[0], step[1], step[2], step[3] = dt, predicted, 1.0 if regular else 0.0, size
    return True


@numba.njit(error_model="numpy")
def _trial(w, abcg, sums, bounds, trial, abcg_t, sums_t, bounds_t, free_t, dw, step):
    """`numba_lm`'s trial: (w + dw, t + dt) into the trial state; (largest step,
    predicted decrease)."""
    for k in range(w.shape[0]):
        trial[k] = w[k] + dw[k]
    sums_t[0] = sums[0] + step[0]
    return max(step[3], abs(step[0])), step[1]


@numba.njit(error_model="numpy")
def _newton(trial, abcg_t, sums_t, bounds_t, free_t, nw, step):
    """`numba_lm`'s newton: the largest |step| of the Gauss-Newton step (nw, step[0])
    (infinite where S is singular) and -(its step . g)."""
    nt = step[0]
    decrease = -nt * sums_t[2]
    for k in range(nw.shape[0]):
        decrease -= nw[k] * abcg_t[2, k]
    return (max(step[3], abs(nt)) if step[2] > 0.0 else np.inf), decrease


@numba.njit(error_model="numpy")
def _take(trial, abcg_t, sums_t, bounds_t, w, abcg, sums, bounds, free_t, dw, step):
    """`numba_lm`'s take: the trial state made the current one."""
    for k in range(w.shape[0]):
        w[k] = trial[k]
        abcg[0, k], abcg[1, k], abcg[2, k] = abcg_t[0, k], abcg_t[1, k], abcg_t[2, k]
    sums[0], sums[1], sums[2] = sums_t[0], sums_t[1], sums_t[2]


@numba.njit(error_model="numpy", inline="always")
def _start(cost):
    """`numba_lm`'s start: a start of cost 0, or NaN (a band's data or prior mean
    missing), is left there, CONVERGED (as the JAX driver); lambda 0, nu 2."""
    return not cost > 0.0, 0.0, 2.0


def _lm(variant, evaluate):
    return lm_for(
        variant,
        evaluate=evaluate,
        solve=_solve,
        trial=_trial,
        newton=_newton,
        take=_take,
        start=_start,
    )


_levenberg_marquardt = _lm("prior", _evaluate)


@numba.njit(error_model="numpy")
def _pixel(p, pixel, data, settings, out, scratch):
    """Pixel p's fit into out[p] (`prior_solvers`' output row), by
    `numba_lm.levenberg_marquardt` over this module's pieces."""
    t0, w0, mean, band_data = data
    (inverse_sigma, free_t), (t_low, t_high, tol, max_iter) = settings
    w, trial, dw, abcg, abcg_t, sums, sums_t, step = scratch
    n = w.shape[0]
    sums[0] = t0[p]
    for k in range(n):
        w[k] = w0[p, k]
    done, iterations, cost = _levenberg_marquardt(
        (band_data, p, mean, pixel, inverse_sigma),
        (free_t, dw, step),
        (w, abcg, sums, (t_low, t_high)),
        (trial, abcg_t, sums_t, (-np.inf, np.inf)),
        (max(max_iter, 1), tol),  # one trial at least, as the JAX driver
    )
    schur = 0.0
    for k in range(n):
        schur += schur_terms(abcg[0, k], abcg[1, k], abcg[2, k])[0]
    status = CONVERGED if done else MAX_ITER
    out[p, 0], out[p, 1], out[p, 2] = sums[0], cost, sums[1] - schur
    out[p, 3], out[p, 4] = status, iterations
    for k in range(n):
        out[p, 5 + k] = w[k]


@cached_njit(inlines=_INLINES, nogil=True, error_model="numpy")
def _prior_kernel(first, last, geometry, model, pixel_data, band_data, settings, out):
    """The prior fits of pixels first to last - 1 (`prior_solvers.solve_prior`'s numba
    arguments)."""
    to_sun, to_sensor, normal = geometry
    scalars, legendre, use_legendre = model
    coefficients, distance, t0, w0, mean = pixel_data
    n = w0.shape[1]
    scratch = (
        np.empty(n),
        np.empty(n),
        np.empty(n),
        np.empty((3, n)),
        np.empty((3, n)),
        np.empty(3),
        np.empty(3),
        np.empty(4),
    )
    for p in range(first, last):
        terms = pixel_terms(
            to_sun[p], to_sensor[p], normal[p], *model_scalars(scalars), legendre, use_legendre
        )
        pixel = (terms, coefficients[p], distance[p])
        _pixel(p, pixel, (t0, w0, mean, band_data), settings, out, scratch)


@functools.cache
def prior_kernel_for(key: ModelKey):
    """The prior fit's kernel for model configuration `key` (the default's is the
    module's own; another's, the same code over its equations)."""
    if key == DEFAULT_KEY:
        return _prior_kernel
    equations = numba_equations_for(key)
    compiled = _prior_rules(equations)
    tag = key.name.replace("-", "_")
    evaluate = njit_variant(_evaluate, tag, band_terms=compiled.prior_band_terms)
    pixel = njit_variant(_pixel, tag, _levenberg_marquardt=_lm(f"prior_{tag}", evaluate))
    return compile_variant(_prior_kernel, key.name, pixel_terms=equations.pixel_terms, _pixel=pixel)
