"""``method="prior"``'s numba kernel (`prior_solvers`' numba driver), cached on disk
as every kernel of the package (`numba_cache.cached_njit`; another model
configuration's kernel is a variant, `compile_variant`), run over blocks of pixels on
`numba_threads.run_in_blocks`'s threads. Its steps are those of the JAX driver
(`prior_solvers`), band by band in loops.
"""

from __future__ import annotations

import functools

import numpy as np

from .._inverse import lm_rules
from .._model import thermal as thermal_equations
from .._model._backends import numba_equations, retarget_to_numba
from .._model.family import DEFAULT_KEY, ModelKey, numba_equations_for
from .._model.numba_cache import cached_njit, compile_variant
from .._model.numba_model import MODEL_MODULES, model_scalars
from . import prior_rules, rules

__all__ = ["prior_kernel_for"]

_thermal = retarget_to_numba(thermal_equations, inline=tuple(thermal_equations.__all__))
_INLINES = (prior_rules, rules, thermal_equations, lm_rules, *MODEL_MODULES)


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
_lm = retarget_to_numba(lm_rules, inline=tuple(lm_rules.__all__))
pixel_terms = numba_equations.pixel_terms
band_terms = _default.prior_band_terms
schur_terms, temperature_step = _default.schur_terms, _default.temperature_step
albedo_step, predicted_terms = _default.albedo_step, _default.predicted_terms
damped_diagonal, accepted, gain_ratio = _lm.damped_diagonal, _lm.accepted, _lm.gain_ratio
converged, next_damping = _lm.converged, _lm.next_damping
SOLVING, CONVERGED, MAX_ITER = rules.SOLVING, rules.CONVERGED, rules.MAX_ITER


@cached_njit(inlines=_INLINES, nogil=True, error_model="numpy")
def _normal(w, t, band_data, p, mean, pixel, inverse_sigma, abcg):
    """The pixel's sums (cost, D, g_t) at (w, t); A, C, g of each band into abcg (3, n)."""
    wavelength, solar, observed, weight = band_data
    cost, d, gt = 0.0, 0.0, 0.0
    for k in range(w.shape[0]):
        band = (wavelength[k], solar[k], observed[p, k], weight[p, k], mean[p, k])
        cost_k, a, c, d_k, g, gt_k = band_terms(w[k], t, band, pixel, inverse_sigma)
        cost, d, gt = cost + cost_k, d + d_k, gt + gt_k
        abcg[0, k], abcg[1, k], abcg[2, k] = a, c, g
    return cost, d, gt


@cached_njit(inlines=_INLINES, nogil=True, error_model="numpy")
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


@cached_njit(inlines=_INLINES, nogil=True, error_model="numpy")
def _pixel(p, pixel, data, settings, out, scratch):
    """Pixel p's fit into out[p] (`prior_solvers`' output row)."""
    t0, w0, mean, band_data = data
    (inverse_sigma, free_t), (t_low, t_high, tol, max_iter) = settings
    w, trial, dw, nw, abcg, abcg_t = scratch
    n = w.shape[0]
    t = t0[p]
    for k in range(n):
        w[k] = w0[p, k]
    cost, d, gt = _normal(w, t, band_data, p, mean, pixel, inverse_sigma, abcg)
    damping, growth, iterations = 0.0, 2.0, 0
    status = SOLVING if cost > 0 else CONVERGED
    while status == SOLVING:
        dt, predicted, _, size = _step(abcg, d, gt, damping, t, free_t, (t_low, t_high), dw)
        for k in range(n):
            trial[k] = w[k] + dw[k]
        cost_t, d_t, gt_t = _normal(trial, t + dt, band_data, p, mean, pixel, inverse_sigma, abcg_t)
        nt, _, regular, newton_size = _step(
            abcg_t, d_t, gt_t, 0.0, t + dt, free_t, (-np.inf, np.inf), nw
        )
        newton_decrease = -nt * gt_t
        for k in range(n):
            newton_decrease -= nw[k] * abcg_t[2, k]
        newton_size = max(newton_size, abs(nt)) if regular else np.inf
        accept = accepted(cost, cost_t) & (cost_t == cost_t)
        ratio = gain_ratio(cost, cost_t, predicted)
        done = converged(max(size, abs(dt)), predicted, cost, newton_size, accept, damping, tol)
        damping, growth = next_damping(accept, ratio, damping, growth, newton_decrease, cost_t)
        iterations += 1
        status = CONVERGED if done else (MAX_ITER if iterations >= max_iter else status)
        if accept:
            cost, d, gt, t = cost_t, d_t, gt_t, t + dt
            w[:] = trial
            abcg[:, :] = abcg_t
    schur = 0.0
    for k in range(n):
        schur += schur_terms(abcg[0, k], abcg[1, k], abcg[2, k])[0]
    out[p, 0], out[p, 1], out[p, 2], out[p, 3], out[p, 4] = t, cost, d - schur, status, iterations
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
        np.empty(n),
        np.empty((3, n)),
        np.empty((3, n)),
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
    normal = compile_variant(_normal, key.name, band_terms=compiled.prior_band_terms)
    pixel = compile_variant(_pixel, key.name, _normal=normal)
    return compile_variant(_prior_kernel, key.name, pixel_terms=equations.pixel_terms, _pixel=pixel)
