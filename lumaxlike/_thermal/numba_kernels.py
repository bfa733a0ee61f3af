"""The thermal solvers' numba kernels, cached on disk as every kernel of the package
(`numba_cache.cached_njit`; another model configuration's kernels are variants,
`compile_variant`), run over blocks of pixels on `numba_threads.run_in_blocks`'s threads.

- `window_kernel_for`: the continuum fit of `rules` (one Levenberg-Marquardt problem in
  (a, b, t) per pixel), its normal equations in passes over the bands (`_window_pixel`):
  Planck's exponentials in a loop of their own, the band rows in a branch-free loop of
  independent bands, every rule inlined, the sums in band order (the JAX solver's
  numbers). (The rows' loop stays scalar: numba's `math.sqrt` is a call of libm's
  `sqrt`, which LLVM does not vectorise; as LLVM's `llvm.sqrt` it vectorised, no faster.)
- `bands_kernel_for`: every band's w at its pixel's T (`band_rules`), in `invert`'s
  blocked form (`_inverse/albedo/numba_solver.py`): the bands of a pixel step in
  lockstep, `BLOCK` at a time, each iteration two branch-free loops (the trials with
  their eps, then the rest) over the range of the block's unfinished bands (a finished
  band inside keeps its values by selection), its state in one contiguous row, every
  rule inlined, so that the compiler can vectorise the loops; a band's own sequence of
  operations is that of the band stepped alone (the JAX solver's).

Arrays as `solvers`' (float64).
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np

from .._inverse import lm_rules
from .._inverse.albedo import numba_solver as albedo_numba
from .._inverse.albedo import rules as albedo_rules
from .._model import thermal as thermal_equations
from .._model._backends import inlined, numba_equations, retarget_to_numba
from .._model.family import DEFAULT_KEY, ModelKey, numba_equations_for
from .._model.numba_cache import cached_njit, compile_variant
from .._model.numba_model import MODEL_MODULES, model_scalars
from . import band_rules, rules

__all__ = ["BLOCK", "bands_kernel_for", "window_kernel_for"]

_thermal = retarget_to_numba(thermal_equations)
_thermal_inline = retarget_to_numba(thermal_equations, inline=tuple(thermal_equations.__all__))
_lm = retarget_to_numba(lm_rules)
# the modules the kernels compile in (editing one invalidates their cache)
_INLINES = (rules, band_rules, thermal_equations, albedo_rules, lm_rules, *MODEL_MODULES)


def _fit_rules(equations):
    """`rules` compiled over the model `equations` (a retargeted namespace), the pieces
    that `_window_pixel` calls inlined (r, eps, E and the albedo clamp too): its loops
    over the bands make no calls (but expm1's) and none passes arrays (each such call
    costs atomic reference counts)."""
    return retarget_to_numba(
        rules,
        inline=_WINDOW_INLINED,
        reflectance_and_slope=inlined(equations.reflectance_and_slope),
        clamped_albedo=_thermal_inline.clamped_albedo,
        emissivity_and_slope=_thermal_inline.emissivity_and_slope,
        planck_exponent=_thermal_inline.planck_exponent,
        thermal_factor_from_exponent=_thermal_inline.thermal_factor_from_exponent,
        **{name: getattr(_lm, name) for name in lm_rules.__all__},
    )


_WINDOW_INLINED = (
    "band_exponent",
    "band_emission",
    "band_row",
    "add_band",
    "no_sums",
    "start_at",
    "trial_point",
    "tried",
)


def _window_bindings(compiled) -> dict:
    """`_window_pixel`'s global names of the rules, from `_fit_rules`' `compiled`."""
    return {f"fit_{name}": getattr(compiled, name) for name in _WINDOW_INLINED}


@numba.njit(error_model="numpy", inline="always")
def _no_emissivity(w, coefficients):
    """eps and its slope as 0: `band_rules` without emission (E = 0), `invert`'s problem
    with the same bits, the emissivity series left out."""
    return 0.0 * w, 0.0 * w


@numba.njit(error_model="numpy", inline="always")
def _no_emission(wavelength, temperature, solar_irradiance, distance_au):
    return 0.0 * wavelength, 0.0 * wavelength


def _band_rules(equations, albedo, emissivity_and_slope=_thermal_inline.emissivity_and_slope):
    """`band_rules` compiled over `equations` and `invert`'s rules `albedo`, inlined."""
    return retarget_to_numba(
        band_rules,
        inline=tuple(band_rules.__all__),
        reflectance_and_slope=inlined(equations.reflectance_and_slope),
        emissivity_and_slope=emissivity_and_slope,
        starting_albedo=albedo.starting_albedo,
        propose=albedo.propose,
        update=albedo.update,
    )


# Module-level names for the default configuration (numba resolves globals, not
# attributes of a namespace); `compile_variant` rebinds them for the others.
_default_fit = _fit_rules(numba_equations)
_default_bands = _band_rules(numba_equations, albedo_numba._rules)
pixel_terms = numba_equations.pixel_terms
albedo_table = albedo_numba._rules.albedo_table
fit_band_exponent, fit_band_emission = _default_fit.band_exponent, _default_fit.band_emission
fit_band_row, fit_add_band, fit_no_sums = (
    _default_fit.band_row,
    _default_fit.add_band,
    _default_fit.no_sums,
)
fit_start_at, fit_trial_point, fit_tried = (
    _default_fit.start_at,
    _default_fit.trial_point,
    _default_fit.tried,
)
plain_emissivity, starting_point = _default_bands.plain_emissivity, _default_bands.starting_point
start_state, band_trial = _default_bands.start_state, _default_bands.band_trial
band_accept = _default_bands.band_accept
emission_factor = _default_bands.emission_factor
emissivity = _thermal_inline.emissivity_and_slope
thermal_factor = _thermal_inline.thermal_factor_and_slope
SOLVING = band_rules.SOLVING
CONVERGED = band_rules.CONVERGED
# Bands solved together (the rows of a block's state): one pixel's, for most cubes (M3's
# 85: the bands with emission in one block, their sweeps narrowed to the slow ones).
BLOCK = 128
# Where each field of a block of bands starts in the state row (BLOCK each): the state
# of `band_rules`, r_obs, E, and a sweep's trial point with eps and d eps/dw there.
(
    _W,
    _G,
    _SLOPE,
    _EPS,
    _DAMPING,
    _GROWTH,
    _STATUS,
    _ITERATIONS,
    _R_OBS,
    _FACTOR,
    _TRIAL,
    _EPS_TRIAL,
    _DEPS_TRIAL,
) = (k * BLOCK for k in range(13))
_STATE_LENGTH = 13 * BLOCK


@cached_njit(inlines=_INLINES, error_model="numpy")
def _window_pixel(p, geometry, model, pixel_data, band_data, settings, rows):
    """The continuum fit of pixel p (`rules.start_at`, then `rules.trial_point` and `tried` until it ends):
    its normal equations in passes over the bands, each a loop over the bands in their
    order with a band's own operations (every x, every expm1(x) (x and expm1(x) kept
    while t stays: T held), every row, the sums), so the same numbers as
    `rules.normal_equations`; rows = the scratch (7, bands). wavelength, solar, weight:
    (pixels, bands) or (1, bands). Returns the final state."""
    to_sun, to_sensor, normal = geometry
    scalars, legendre, use_legendre = model
    coefficients, distance, theta0 = pixel_data
    wavelength, solar, observed, weight, reference = band_data
    free, limits = settings
    x, denominator, offset, f, da, db, dt = (
        rows[0],
        rows[1],
        rows[2],
        rows[3],
        rows[4],
        rows[5],
        rows[6],
    )
    # wavelength, solar, weight: one row per pixel, or one for all (`solvers._band_rows`)
    wl, sol = wavelength[min(p, wavelength.shape[0] - 1)], solar[min(p, solar.shape[0] - 1)]
    obs, wt, coef = observed[p], weight[min(p, weight.shape[0] - 1)], coefficients[p]
    terms = pixel_terms(
        to_sun[p], to_sensor[p], normal[p], *model_scalars(scalars), legendre, use_legendre
    )
    n = obs.shape[0]
    for k in range(n):
        offset[k] = wl[k] - reference[p]
    theta = (theta0[p, 0], theta0[p, 1], theta0[p, 2])
    trial = (theta, 0.0 * theta[0], 0.0 * theta[0])
    state = fit_start_at(theta, fit_no_sums(theta[0]))
    held = np.nan  # the t of x and expm1(x) (NaN: none yet)
    started = False
    while True:
        a, b, t = trial[0]
        if t != held:
            for k in range(n):
                x[k] = fit_band_exponent(t, wl[k])
            for k in range(n):
                denominator[k] = math.expm1(x[k])
            held = t
        for k in range(n):
            emission = fit_band_emission(t, x[k], denominator[k], wl[k], sol[k], distance[p])
            row = fit_band_row(a, b, offset[k], obs[k], wt[k], emission, terms, coef)
            f[k], da[k], db[k], dt[k] = row
        sums = fit_no_sums(a)
        for k in range(n):
            sums = fit_add_band(sums, (f[k], da[k], db[k], dt[k]), free)
        if started:
            state = fit_tried(state, trial, sums, free, limits)
        else:
            state = fit_start_at(trial[0], sums)
            started = True
        if state[6] != SOLVING:
            return state
        trial = fit_trial_point(state, free, limits)


@cached_njit(inlines=_INLINES, nogil=True, error_model="numpy")
def _window_kernel(first, last, geometry, model, pixel_data, band_data, settings, out):
    """The continuum fits of pixels first to last - 1 (`_window_pixel`): out (pixels, 12)
    as `solvers.solve_thermal` returns it."""
    rows = np.empty((7, band_data[2].shape[1]))
    for p in range(first, last):
        state = _window_pixel(p, geometry, model, pixel_data, band_data, settings, rows)
        out[p, 0], out[p, 1], out[p, 2] = state[0]
        out[p, 3] = state[1]
        for i in range(6):
            out[p, 4 + i] = state[2][i]
        out[p, 10], out[p, 11] = state[6], state[7]


@cached_njit(inlines=_INLINES, error_model="numpy")
def _bands_block(st, size, r_obs, wavelength, solar, pixel, limits):
    """One block of `size` bands of a pixel solved in `st` (see the module docstring);
    pixel = (terms, table, coefficients, T [K] (<= 0: no emission), distance [au])."""
    terms, table, coef, temperature, distance = pixel
    bounds = limits[:2]
    on = temperature > 0.0
    t = temperature if on else 300.0
    for j in range(size):
        factor = thermal_factor(wavelength[j], t, solar[j], distance)[0]
        st[_FACTOR + j] = emission_factor(factor if on else 0.0, r_obs[j])
    for j in range(size):
        st[_R_OBS + j] = r_obs[j]
    # the start (`band_rules`' three start rules) and each sweep in short loops: the
    # emissivity series' long chains of dependent operations of successive bands overlap
    for j in range(size):
        st[_EPS_TRIAL + j] = plain_emissivity(st[_R_OBS + j], table, coef, bounds)
    for j in range(size):
        w = starting_point(st[_R_OBS + j], st[_FACTOR + j], table, st[_EPS_TRIAL + j], bounds)
        st[_TRIAL + j] = w
        st[_EPS_TRIAL + j], st[_DEPS_TRIAL + j] = emissivity(w, coef)
    for j in range(size):
        eps_and_slope = (st[_EPS_TRIAL + j], st[_DEPS_TRIAL + j])
        state = start_state(st[_TRIAL + j], eps_and_slope, st[_R_OBS + j], st[_FACTOR + j], terms)
        st[_W + j], st[_G + j], st[_SLOPE + j], st[_EPS + j] = state[:4]
        st[_DAMPING + j], st[_GROWTH + j], st[_STATUS + j] = state[4:7]
        st[_ITERATIONS + j] = 0.0
    # the sweeps run over the range [lo, hi) of the unfinished bands, narrowed after each
    # (the slow bands sit together, at the long wavelengths): a finished band in between
    # keeps its values by selection, as in a sweep over the whole block
    lo, hi = _unfinished_range(st, 0, size)
    while lo < hi:
        # a view from lo, indexed by the loop counter alone (an index lo + j could be
        # negative to numba, which would then wrap it, and the loops would not vectorise)
        at = st[lo:]
        for j in range(hi - lo):
            state = (at[_W + j], at[_G + j], at[_SLOPE + j], 0.0, at[_DAMPING + j], 0.0, 0.0, 0.0)
            trial = band_trial(state, limits)
            at[_TRIAL + j] = trial
            at[_EPS_TRIAL + j], at[_DEPS_TRIAL + j] = emissivity(trial, coef)
        for j in range(hi - lo):
            status = at[_STATUS + j]
            solving = status == SOLVING
            w, g, slope, eps = at[_W + j], at[_G + j], at[_SLOPE + j], at[_EPS + j]
            damping, growth, iterations = at[_DAMPING + j], at[_GROWTH + j], at[_ITERATIONS + j]
            state = (w, g, slope, eps, damping, growth, status, iterations)
            eps_trial = (at[_EPS_TRIAL + j], at[_DEPS_TRIAL + j])
            new = band_accept(
                state, at[_TRIAL + j], eps_trial, at[_R_OBS + j], at[_FACTOR + j], terms, limits
            )
            at[_W + j] = new[0] if solving else w
            at[_G + j] = new[1] if solving else g
            at[_SLOPE + j] = new[2] if solving else slope
            at[_EPS + j] = new[3] if solving else eps
            at[_DAMPING + j] = new[4] if solving else damping
            at[_GROWTH + j] = new[5] if solving else growth
            at[_STATUS + j] = new[6] if solving else status
            at[_ITERATIONS + j] = new[7] if solving else iterations
        lo, hi = _unfinished_range(st, lo, hi)


@numba.njit(error_model="numpy", inline="always")
def _unfinished_range(st, lo, hi):
    """[lo, hi) narrowed to the block's first and last unfinished band (lo == hi: none)."""
    while lo < hi and st[_STATUS + lo] != SOLVING:
        lo += 1
    while hi > lo and st[_STATUS + hi - 1] != SOLVING:
        hi -= 1
    return lo, hi


def _plain_variant(bands, name: str):
    """`_bands_block` without emission (`_no_emissivity`, `_no_emission`), `bands` the
    band rules compiled over it."""
    return compile_variant(
        _bands_block,
        name,
        plain_emissivity=bands.plain_emissivity,
        starting_point=bands.starting_point,
        start_state=bands.start_state,
        band_trial=bands.band_trial,
        band_accept=bands.band_accept,
        emissivity=_no_emissivity,
        thermal_factor=_no_emission,
    )


_plain_block = _plain_variant(
    _band_rules(numba_equations, albedo_numba._rules, _no_emissivity), "plain"
)


@cached_njit(inlines=_INLINES, error_model="numpy")
def _bands_pixel(p, geometry, model, pixel_data, spectral, limits, out, scratch):
    """Every band of pixel p (`_bands_kernel`'s loop body); scratch = (st, sun, sensor,
    up, coefficients): the state row and the pixel's own copies of its vectors. Writes
    w, the emission eps E and the corrected r = r_obs - eps E, all three NaN where the
    band did not converge or r_obs is not finite."""
    to_sun, to_sensor, normal = geometry
    scalars, legendre, use_legendre = model
    coefficients, distance, temperature = pixel_data
    wavelength, solar, observed = spectral
    w_out, emission_out, reflectance_out = out
    st, sun, sensor, up, coef = scratch
    for k in range(3):
        sun[k], sensor[k], up[k] = to_sun[p, k], to_sensor[p, k], normal[p, k]
    for k in range(coef.shape[0]):
        coef[k] = coefficients[p, k]
    terms = pixel_terms(sun, sensor, up, *model_scalars(scalars), legendre, use_legendre)
    pixel = (terms, albedo_table(terms), coef, temperature[p], distance[p])
    n_bands = observed.shape[1]
    # the leading bands whose emission is negligible (all of them where T <= 0): E = 0,
    # solved without the emissivity series (`_plain_block`, the same bits)
    plain = 0
    if temperature[p] > 0.0:
        while plain < n_bands and (
            emission_factor(
                thermal_factor(wavelength[plain], temperature[p], solar[plain], distance[p])[0],
                observed[p, plain],
            )
            == 0.0
        ):
            plain += 1
    else:
        plain = n_bands
    block = 0
    while block < n_bands:
        end = min(block + BLOCK, plain if block < plain else n_bands)
        size = end - block
        r_obs, wl, sol = observed[p, block:end], wavelength[block:end], solar[block:end]
        if block < plain:
            _plain_block(st, size, r_obs, wl, sol, pixel, limits)
        else:
            _bands_block(st, size, r_obs, wl, sol, pixel, limits)
        w_row, e_row, r_row = (
            w_out[p, block:end],
            emission_out[p, block:end],
            reflectance_out[p, block:end],
        )
        for j in range(size):
            emission = 0.0 if block < plain else st[_EPS + j] * st[_FACTOR + j]
            if st[_STATUS + j] == CONVERGED and math.isfinite(r_obs[j]):
                w_row[j], e_row[j], r_row[j] = st[_W + j], emission, r_obs[j] - emission
            else:
                w_row[j], e_row[j], r_row[j] = math.nan, math.nan, math.nan
        block = end


@cached_njit(inlines=_INLINES, nogil=True, error_model="numpy")
def _bands_kernel(first, last, geometry, model, pixel_data, spectral, limits, out):
    """Pixels first to last - 1 (`numba_threads.run_in_blocks`), with one state row;
    arguments as `solvers.solve_bands` passes them."""
    n_coefficients = pixel_data[0].shape[1]
    scratch = (
        np.empty(_STATE_LENGTH),
        np.empty(3),
        np.empty(3),
        np.empty(3),
        np.empty(n_coefficients),
    )
    for p in range(first, last):
        _bands_pixel(p, geometry, model, pixel_data, spectral, limits, out, scratch)


@functools.cache
def window_kernel_for(key: ModelKey):
    """The continuum fit's kernel for model configuration `key` (the default's is the
    module's own; another's, the same code over its equations)."""
    if key == DEFAULT_KEY:
        return _window_kernel
    equations = numba_equations_for(key)
    pixel = compile_variant(
        _window_pixel,
        key.name,
        pixel_terms=equations.pixel_terms,
        **_window_bindings(_fit_rules(equations)),
    )
    return compile_variant(_window_kernel, key.name, _window_pixel=pixel)


@functools.cache
def bands_kernel_for(key: ModelKey):
    """The band correction's kernel for model configuration `key` (as `window_kernel_for`)."""
    if key == DEFAULT_KEY:
        return _bands_kernel
    equations = numba_equations_for(key)
    albedo = albedo_numba._rules_for(equations)
    compiled = _band_rules(equations, albedo)
    block = compile_variant(
        _bands_block,
        key.name,
        plain_emissivity=compiled.plain_emissivity,
        starting_point=compiled.starting_point,
        start_state=compiled.start_state,
        band_trial=compiled.band_trial,
        band_accept=compiled.band_accept,
    )
    plain = _plain_variant(_band_rules(equations, albedo, _no_emissivity), f"{key.name}_plain")
    pixel = compile_variant(
        _bands_pixel,
        key.name,
        pixel_terms=equations.pixel_terms,
        albedo_table=albedo.albedo_table,
        _bands_block=block,
        _plain_block=plain,
    )
    return compile_variant(_bands_kernel, key.name, _bands_pixel=pixel)
