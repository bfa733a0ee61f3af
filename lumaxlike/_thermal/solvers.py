"""The thermal fits' two solvers, one driver each around the rules written once
(`rules`, `band_rules`): JAX (jitted, the package's one Levenberg-Marquardt,
`ElementwiseLevenbergMarquardt`, element-wise over a chunk: the bands' w in its
one-parameter case with `invert`'s `propose` and `update`, the continuum fit with
`rules`' own trial in its `rules` case) and numba (`numba_kernels`: cached on disk, over
blocks of pixels on `numba_threads.run_in_blocks`'s threads, as every kernel of the
package). Both take the same arrays and run the same rules, so they take the same steps
(values to rounding: XLA:CPU contracts a * b + c into fused multiply-adds, numba does not).

Arrays (float64): to_sun, to_sensor, normal (pixels, 3); coefficients (pixels,
N_EMISSIVITY); distance (pixels,); theta (pixels, 3) the starts; wavelength, solar
(n,) or (pixels, n) for the bands of each problem; observed, weight (pixels, n).
"""

from __future__ import annotations

import functools
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

from .._inverse import lm_rules
from .._inverse.elementwise_lm import ElementwiseLevenbergMarquardt
from .._model import thermal as thermal_equations
from .._model._backends import retarget_to_jax
from .._model.family import ModelKey, jax_equations_for
from .._model.numba_model import kernel_params
from .._model.numba_threads import run_in_blocks
from .._params import HapkeParams
from . import band_rules, numba_kernels, rules

__all__ = ["solve_thermal", "solve_bands"]


def _bindings(equations, thermal, lm) -> dict:
    return {
        "reflectance_and_slope": equations.reflectance_and_slope,
        "clamped_albedo": thermal.clamped_albedo,
        "emissivity_and_slope": thermal.emissivity_and_slope,
        "planck_exponent": thermal.planck_exponent,
        "thermal_factor_from_exponent": thermal.thermal_factor_from_exponent,
        **{name: getattr(lm, name) for name in lm_rules.__all__},
    }


@functools.cache
def _jax_rules(key: ModelKey):
    thermal = retarget_to_jax(thermal_equations)
    lm = retarget_to_jax(lm_rules)
    return retarget_to_jax(rules, **_bindings(jax_equations_for(key), thermal, lm))


def _band_bindings(albedo, equations, thermal) -> dict:
    return {
        "reflectance_and_slope": equations.reflectance_and_slope,
        "emissivity_and_slope": thermal.emissivity_and_slope,
        "starting_albedo": albedo.starting_albedo,
        "propose": albedo.propose,
        "update": albedo.update,
    }


@functools.cache
def _jax_band_rules(key: ModelKey):
    from .._inverse.albedo.jax_solver import _rules_for

    thermal = retarget_to_jax(thermal_equations)
    albedo = _rules_for(key)
    bindings = _band_bindings(albedo, jax_equations_for(key), thermal)
    return retarget_to_jax(band_rules, **bindings), albedo, thermal


def _band_problems(params, arrays, key, bounds):
    """Every band's problem: (w_s, E, the pixels' terms), w_s the start (`band_rules`,
    NaN where r_obs is not finite), E [1/sr] (0 where T <= 0: nothing removed),
    (pixels, bands) each but the terms (pixels,)."""
    from .._model.jax_model import pixel_terms

    compiled, albedo, thermal = _jax_band_rules(key)
    to_sun, to_sensor, normal, coefficients, distance, temperature = arrays[:6]
    wavelength, solar, observed = arrays[6:]
    terms = jax.vmap(pixel_terms, in_axes=(0, 0, 0, None))(to_sun, to_sensor, normal, params)
    table = jax.vmap(albedo.albedo_table)(terms)

    def band(r_obs, wl, sol, table, coef, dist, temp):
        on = temp > 0.0
        factor, _ = thermal.thermal_factor_and_slope(wl, jnp.where(on, temp, 300.0), sol, dist)
        factor = compiled.emission_factor(jnp.where(on, factor, 0.0), r_obs)
        eps_plain = compiled.plain_emissivity(r_obs, table, coef, bounds)
        return compiled.starting_point(r_obs, factor, table, eps_plain, bounds), factor

    per_band = jax.vmap(band, in_axes=(0, 0, 0, None, None, None, None))
    start, factor = jax.vmap(per_band, in_axes=(0, None, None, 0, 0, 0, 0))(
        observed, wavelength, solar, table, coefficients, distance, temperature
    )
    return start, factor, terms


def _band_residual(key):
    """`band_rules.band_residual` of every band, (w, (r_obs, E, terms, coefficients)) ->
    (g, dg/dw) [1/sr], (pixels, bands) each: the one-parameter case's `evaluate`."""
    compiled, _, thermal = _jax_band_rules(key)

    def band(w, r_obs, factor, terms, coef):
        return compiled.band_residual(
            w, r_obs, factor, terms, thermal.emissivity_and_slope(w, coef)
        )

    per_band = jax.vmap(band, in_axes=(0, 0, 0, None, None))

    def evaluate(w, args):
        return jax.vmap(per_band)(w, *args)

    return evaluate


@functools.partial(jax.jit, static_argnames=("key", "max_iter"))
def _solve_bands_jax(params, arrays, limits, key, max_iter):
    """Every band's w (`band_rules`) by the shared `ElementwiseLevenbergMarquardt` in its
    one-parameter case (`invert`'s `propose` and `update`, as numba's kernel). Returns (w,
    eps E [1/sr], converged), (pixels, bands) each; a band whose r_obs or start is not
    finite is not solved (not converged)."""
    _, albedo, thermal = _jax_band_rules(key)
    w_lower, w_upper, tol = limits
    start, factor, terms = _band_problems(params, arrays, key, (w_lower, w_upper))
    observed, coefficients = arrays[-1], arrays[3]
    solvable = jnp.isfinite(observed) & jnp.isfinite(start)
    evaluate = _band_residual(key)
    solver = ElementwiseLevenbergMarquardt(
        tol=tol,
        lower=w_lower,
        upper=w_upper,
        one_parameter=(evaluate, albedo.propose, albedo.update),
    )
    args = (observed, factor, terms, coefficients)
    solution: optx.Solution[Any, Any] = optx.least_squares(
        lambda w, args: evaluate(w, args)[0],
        solver,
        jnp.where(solvable, start, 0.5),  # a finite start everywhere: optimistix stops at NaN
        args=args,
        options={"frozen": ~solvable},
        max_steps=max(max_iter, 1),  # `band_rules`: one trial at least
        throw=False,
    )
    w = solution.value
    eps = jax.vmap(jax.vmap(thermal.emissivity_and_slope, in_axes=(0, None)))(w, coefficients)[0]
    return w, eps * factor, solution.state.converged & solvable


def solve_bands(params: HapkeParams, arrays: dict, limits, solver: str, out=None):
    """Every band's w at its pixel's T (`band_rules`), the emission removed and the
    corrected reflectance, NaN where a band's solve did not converge (or r_obs is not
    finite).

    Args:
        arrays: to_sun, to_sensor, normal (pixels, 3); coefficients (pixels,
            N_EMISSIVITY); distance (pixels,) [au]; temperature (pixels,) [K], <= 0 or NaN
            where nothing is to be removed (E = 0: `invert`'s problem); observed (pixels,
            bands) [1/sr]; wavelength, solar (bands,).
        limits: (w_lower, w_upper, tol, max_iter).
        out: None, or three C-contiguous float64 arrays (pixels, bands) the results are
            written into (the numba kernel writes them directly: no copies) and returned.
    Returns:
        (w, emission eps E [1/sr], reflectance r_obs - eps E [1/sr]), each (pixels,
        bands).
    """
    observed = np.ascontiguousarray(arrays["observed"], dtype=np.float64)
    temperature = np.nan_to_num(np.asarray(arrays["temperature"], np.float64), nan=0.0)
    w_lower, w_upper, tol, max_iter = limits
    out = _band_outputs(out, observed.shape)
    pixel_keys = ("to_sun", "to_sensor", "normal", "coefficients", "distance")
    if solver == "numba":
        run_in_blocks(
            numba_kernels.bands_kernel_for(params.model_key),
            observed.shape[0],
            tuple(np.ascontiguousarray(arrays[k], np.float64) for k in pixel_keys[:3]),
            kernel_params(params),
            (
                np.ascontiguousarray(arrays["coefficients"], np.float64),
                np.ascontiguousarray(arrays["distance"], np.float64),
                temperature,
            ),
            tuple(np.ascontiguousarray(arrays[k], np.float64) for k in ("wavelength", "solar"))
            + (observed,),
            (float(w_lower), float(w_upper), float(tol), int(max_iter)),
            out,
        )
        return out
    with jax.enable_x64(True):
        stacked = [jnp.asarray(arrays[k], jnp.float64) for k in pixel_keys]
        stacked += [jnp.asarray(temperature)]
        stacked += [jnp.asarray(arrays[k], jnp.float64) for k in ("wavelength", "solar")]
        stacked += [jnp.asarray(observed)]
        results = _solve_bands_jax(
            params,
            tuple(stacked),
            (float(w_lower), float(w_upper), float(tol)),
            key=params.model_key,
            max_iter=int(max_iter),
        )
        w, emission = (np.asarray(result, dtype=np.float64) for result in results[:2])
        unsolved = ~np.asarray(results[2])
        out[0][...] = np.where(unsolved, np.nan, w)
        out[1][...] = np.where(unsolved, np.nan, emission)
        np.subtract(observed, out[1], out=out[2])
        return out


def _band_outputs(out, shape) -> tuple:
    """`solve_bands`' three output arrays: `out` checked, or new ones."""
    if out is None:
        return (np.empty(shape), np.empty(shape), np.empty(shape))
    out = tuple(out)
    if len(out) != 3 or not all(
        isinstance(a, np.ndarray)
        and a.shape == shape
        and a.dtype == np.float64
        and a.flags.c_contiguous
        and a.flags.writeable
        for a in out
    ):
        raise ValueError(
            f"out must be three writeable C-contiguous float64 arrays of shape {shape}"
        )
    return out


def _stored(value, one):
    """`value` / a run-time 1 (every leaf): x / 1 = x, but a division is an operation XLA
    does not duplicate, so `value` is computed once and stored; otherwise XLA:CPU fuses
    a band's evaluation (the model, the emissivity series, Planck's exponential) into
    every consumer of it, recomputing it for each of the sums and each of the state's
    outputs (as `invert`'s `_residual_and_slope`). The fusions' boundaries move, and with
    them where XLA:CPU contracts a * b + c into a fused multiply-add: ulps."""
    return jax.tree_util.tree_map(lambda v: v / one, value)


def _fit_rules(compiled, free, settings):
    """(start, iterate) of every pixel's fit (`rules.start_at`, `rules.normal_equations`,
    `trial_point` and `tried`, vmapped) for `ElementwiseLevenbergMarquardt`'s `rules`:
    y = theta (pixels, 3); args =
    (pixel terms, coefficients, distance, wavelength, solar, observed, weight,
    reference), each per pixel; a pixel is finished when its status is not SOLVING
    (CONVERGED, MAX_ITER); settings = (t_low, t_high, tol, max_iter)."""
    one = settings[0] / settings[0]  # 1 (t_low > 0), not a constant XLA could fold

    def kept(row):  # each band's row stored, not recomputed in every sum (`_stored`)
        return _stored(row, one)

    def start_one(th, terms, coef, dist, wl, sol, obs, wt, ref):
        theta = (th[0], th[1], th[2])
        problem = ((terms, coef, dist), (wl, sol, obs, wt), ref)
        return compiled.start_at(theta, compiled.normal_equations(theta, *problem, free, kept))

    def iterate_one(state, terms, coef, dist, wl, sol, obs, wt, ref):
        problem = ((terms, coef, dist), (wl, sol, obs, wt), ref)
        trial = compiled.trial_point(state, free, settings)
        sums = compiled.normal_equations(trial[0], *problem, free, kept)
        return compiled.tried(state, trial, _stored(sums, one), free, settings)

    def start(theta, args):
        state = jax.vmap(start_one)(theta, *args)
        return state, state[6] != rules.SOLVING

    def iterate(theta, state, args):
        state = jax.vmap(iterate_one)(state, *args)
        # y is optimistix's copy (the output is the state's theta): finite, since
        # optimistix ends every problem's solve at a non-finite y, where numba's kernel
        # lets that pixel's own rules run on
        theta = jnp.stack(state[0], axis=-1)
        return jnp.where(jnp.isfinite(theta), theta, 0.0), state, state[6] != rules.SOLVING

    return start, iterate


@functools.partial(jax.jit, static_argnames=("key", "max_iter"))
def _solve_jax(params, arrays, free, limits, key, max_iter):
    """Every pixel's fit (`rules`) by the shared `ElementwiseLevenbergMarquardt` with the
    fit's own rules (its `rules` case: the steps of numba's kernel); `solve_thermal`'s
    output rows."""
    from .._model.jax_model import pixel_terms

    compiled = _jax_rules(key)
    to_sun, to_sensor, normal, coefficients, distance, theta0 = arrays[:6]
    terms = jax.vmap(pixel_terms, in_axes=(0, 0, 0, None))(to_sun, to_sensor, normal, params)
    problem = (terms, coefficients, distance, *arrays[6:])
    start, iterate = _fit_rules(compiled, free, (*limits, max_iter))
    solver = ElementwiseLevenbergMarquardt(
        tol=limits[2], lower=limits[0], upper=limits[1], rules=(start, iterate)
    )
    solution: optx.Solution[Any, Any] = optx.least_squares(
        lambda theta, args: start(theta, args)[0][1],  # the cost (traced for its shape only)
        solver,
        theta0,
        args=problem,
        max_steps=max(max_iter, 1),  # `rules.tried`: one trial at least
        throw=False,
    )
    theta, cost, jtj, _, _, _, status, iterations = solution.state.problem
    return jnp.stack([*theta, cost, *jtj, status * 1.0, iterations * 1.0], axis=-1)


def _band_rows(values, shape) -> np.ndarray:
    """`values` (bands,) or `shape` = (pixels, bands) as the numba kernel takes them:
    contiguous float64, one row (1, bands) where every pixel has the same (1-D, one row
    or a broadcast view: no copy per pixel), else (pixels, bands). The row is a writable
    copy: numba types a read-only array (a broadcast view's) apart, and would compile the
    kernel again for it."""
    values = np.asarray(values, dtype=np.float64)
    if values.ndim == 2 and values.shape[0] > 1 and values.strides[0] != 0:
        return np.ascontiguousarray(values)
    return np.array(np.broadcast_to(values, shape)[:1])


def solve_thermal(params: HapkeParams, arrays: dict, free, limits, solver: str) -> np.ndarray:
    """Solve every pixel's problem (see the module docstring for `arrays`' keys).

    Args:
        free: (1, free_b, free_t) as floats; limits: (t_low, t_high, tol, max_iter).
    Returns:
        (pixels, 12) float64: a, b, t, cost, J^T J (6), status, iterations.
    """
    n = arrays["observed"].shape[0]
    reference = np.broadcast_to(np.asarray(arrays["reference"], float), (n,))
    free = tuple(float(f) for f in free)
    t_low, t_high, tol, max_iter = limits
    if solver == "numba":
        out = np.empty((n, 12))
        run_in_blocks(
            numba_kernels.window_kernel_for(params.model_key),
            n,
            tuple(np.ascontiguousarray(arrays[k]) for k in ("to_sun", "to_sensor", "normal")),
            kernel_params(params),
            tuple(np.ascontiguousarray(arrays[k]) for k in ("coefficients", "distance", "theta")),
            (
                _band_rows(arrays["wavelength"], arrays["observed"].shape),
                _band_rows(arrays["solar"], arrays["observed"].shape),
                np.ascontiguousarray(arrays["observed"]),
                _band_rows(arrays["weight"], arrays["observed"].shape),
                np.array(reference),  # writable, as `_band_rows`'s row
            ),
            (free, (float(t_low), float(t_high), float(tol), int(max_iter))),
            out,
        )
        return out
    band = {
        k: np.broadcast_to(np.asarray(arrays[k], np.float64), arrays["observed"].shape)
        for k in ("wavelength", "solar")
    }
    with jax.enable_x64(True):
        keys = ("to_sun", "to_sensor", "normal", "coefficients", "distance", "theta")
        stacked = [jnp.asarray(arrays[k], jnp.float64) for k in keys]
        stacked += [jnp.asarray(band["wavelength"]), jnp.asarray(band["solar"])]
        stacked += [jnp.asarray(arrays[k], jnp.float64) for k in ("observed", "weight")]
        stacked += [jnp.asarray(reference, jnp.float64)]
        out = _solve_jax(
            params,
            tuple(stacked),
            free,
            (float(t_low), float(t_high), float(tol)),
            key=params.model_key,
            max_iter=int(max_iter),
        )
        return np.asarray(out, dtype=np.float64)
