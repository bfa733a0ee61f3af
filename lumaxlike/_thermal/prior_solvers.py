"""``method="prior"``'s two solvers around `prior_rules` (written once): JAX (jitted, the
package's one Levenberg-Marquardt, `ElementwiseLevenbergMarquardt`, in its `rules` case:
each pixel's trial below, the bands vmapped, pixels vmapped) and numba (`prior_kernels`,
cached on disk, over blocks of pixels). Both take the same steps.

One Levenberg-Marquardt trial of a pixel (both drivers): the pixel's sums over bands
give the damped Schur step (`prior_rules`), t projected onto its bounds and each w_b's
step taken for the projected dt; the trial's undamped Gauss-Newton step tests
convergence; acceptance and damping follow `lm_rules` as every fit of the package does.

Arrays (float64): to_sun, to_sensor, normal (pixels, 3); coefficients (pixels,
N_EMISSIVITY); distance (pixels,); t (pixels,) the start of T / T_SCALE; w, mean (pixels,
n) the start of w and the prior means; wavelength, solar (n,); observed, weight
(pixels, n).

Output (pixels, 5 + n): t, cost, S (the Schur complement at the end, undamped: T's
posterior variance is T_SCALE^2 / S), status, iterations, then w of each band.
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
from . import prior_kernels, prior_rules, rules

__all__ = ["solve_prior"]

COLUMNS = 5  # t, cost, S, status, iterations; then w


@functools.cache
def _jax_rules(key: ModelKey):
    thermal = retarget_to_jax(thermal_equations)
    bindings = {
        "reflectance_and_slope": jax_equations_for(key).reflectance_and_slope,
        "clamped_albedo": thermal.clamped_albedo,
        "emissivity_and_slope": thermal.emissivity_and_slope,
        "thermal_factor_and_slope": thermal.thermal_factor_and_slope,
    }
    return retarget_to_jax(prior_rules, **bindings), retarget_to_jax(lm_rules)


def _jax_normal(compiled, w, t, band, pixel, inverse_sigma):
    per_band = jax.vmap(compiled.prior_band_terms, in_axes=(0, None, 0, None, None))
    cost, a, c, d, g, gt = per_band(w, t, band, pixel, inverse_sigma)
    return jnp.sum(cost), a, c, jnp.sum(d), g, jnp.sum(gt)


def _jax_step(rules_, normal, damping, t, free_t, bounds):
    """(dw, dt, predicted decrease, regular) of the damped Schur step from `normal`."""
    compiled, lm = rules_
    _, a, c, d, g, gt = normal
    largest = jnp.maximum(d, jnp.max(a))
    a_d, d_d = lm.damped_diagonal(a, largest, damping), lm.damped_diagonal(d, largest, damping)
    schur_s, schur_g = compiled.schur_terms(a_d, c, g)
    dt, regular = compiled.temperature_step(d_d, gt, jnp.sum(schur_s), jnp.sum(schur_g), free_t)
    dt = jnp.minimum(jnp.maximum(t + dt, bounds[0]), bounds[1]) - t
    dw = compiled.albedo_step(a_d, c, g, dt)
    predicted = jnp.sum(compiled.predicted_terms(a, c, g, dw, dt)) - (2 * dt * gt + d * dt * dt)
    return dw, dt, predicted, regular


def _jax_iterate(rules_, state, problem, free_t, limits):
    compiled, lm = rules_
    w, t, normal, damping, growth, status, iterations = state
    band, pixel, inverse_sigma = problem
    t_low, t_high, tol, max_iter = limits
    dw, dt, predicted, _ = _jax_step(rules_, normal, damping, t, free_t, (t_low, t_high))
    trial_normal = _jax_normal(compiled, w + dw, t + dt, band, pixel, inverse_sigma)
    nw, nt, _, regular = _jax_step(rules_, trial_normal, 0.0, t + dt, free_t, (-jnp.inf, jnp.inf))
    newton_size = jnp.where(regular, jnp.maximum(jnp.max(jnp.abs(nw)), jnp.abs(nt)), jnp.inf)
    newton_decrease = -(jnp.sum(nw * trial_normal[4]) + nt * trial_normal[5])
    cost, cost_t = normal[0], trial_normal[0]
    accept = lm.accepted(cost, cost_t) & (cost_t == cost_t)
    ratio = lm.gain_ratio(cost, cost_t, predicted)
    step_size = jnp.maximum(jnp.max(jnp.abs(dw)), jnp.abs(dt))
    done = lm.converged(step_size, predicted, cost, newton_size, accept, damping, tol)
    damping, growth = lm.next_damping(accept, ratio, damping, growth, newton_decrease, cost_t)
    iterations = iterations + 1
    status = jnp.where(
        done, rules.CONVERGED, jnp.where(iterations >= max_iter, rules.MAX_ITER, status)
    )
    normal = jax.tree_util.tree_map(lambda x, y: jnp.where(accept, x, y), trial_normal, normal)
    w, t = jnp.where(accept, w + dw, w), jnp.where(accept, t + dt, t)
    return w, t, normal, damping, growth, status, iterations


def _prior_start(rules_, w, t, problem):
    """One pixel's state at (w, t): w, t, the sums (`_jax_normal`), damping, growth,
    status (CONVERGED at once where the cost is 0), iterations."""
    normal = _jax_normal(rules_[0], w, t, *problem)
    zero = 0.0 * t
    status = jnp.where(normal[0] > 0, rules.SOLVING, rules.CONVERGED)
    return w, t, normal, zero, zero + 2.0, status, 0


def _prior_rules(rules_, settings, free_t, limits):
    """(start, iterate) of every pixel's prior fit (`_prior_start`, `_jax_iterate`,
    vmapped) for `ElementwiseLevenbergMarquardt`'s `rules`: y = t (pixels,), the w_b in
    the state only (one copy: XLA:CPU computed y's again); args = (the start's w
    (pixels, bands), pixel terms, coefficients, distance, observed, weight, mean), per
    pixel, and settings = (wavelength, solar, 1 / prior_sigma); a pixel is finished when
    its status is not SOLVING."""
    wavelength, solar, inverse_sigma = settings

    def problem(terms, coef, dist, obs, wt, mu):
        return (wavelength, solar, obs, wt, mu), (terms, coef, dist), inverse_sigma

    def start_one(t, w, *pixel):
        return _prior_start(rules_, w, t, problem(*pixel))

    def iterate_one(state, _, *pixel):
        return _jax_iterate(rules_, state, problem(*pixel), free_t, limits)

    def start(t, args):
        state = jax.vmap(start_one)(t, *args)
        return state, state[5] != rules.SOLVING

    def iterate(t, state, args):
        state = jax.vmap(iterate_one)(state, *args)
        # y is optimistix's copy (the output is the state's): finite, as `solvers`' fit
        return jnp.where(jnp.isfinite(state[1]), state[1], 0.0), state, state[5] != rules.SOLVING

    return start, iterate


@functools.partial(jax.jit, static_argnames=("key", "max_iter"))
def _solve_jax(params, arrays, settings, limits, key, max_iter):
    """Every pixel's prior fit by the shared `ElementwiseLevenbergMarquardt` with the fit's
    own rules (its `rules` case: the steps of numba's kernel); `solve_prior`'s output."""
    from .._model.jax_model import pixel_terms

    rules_ = _jax_rules(key)
    to_sun, to_sensor, normal_, coefficients, distance, t0, w0, mean = arrays[:8]
    wavelength, solar, observed, weight = arrays[8:]
    inverse_sigma, free_t = settings
    terms = jax.vmap(pixel_terms, in_axes=(0, 0, 0, None))(to_sun, to_sensor, normal_, params)
    start, iterate = _prior_rules(
        rules_, (wavelength, solar, inverse_sigma), free_t, (*limits, max_iter)
    )
    solver = ElementwiseLevenbergMarquardt(
        tol=limits[2], lower=limits[0], upper=limits[1], rules=(start, iterate)
    )
    solution: optx.Solution[Any, Any] = optx.least_squares(
        lambda t, args: start(t, args)[0][2][0],  # the cost (traced for its shape only)
        solver,
        t0,
        args=(w0, terms, coefficients, distance, observed, weight, mean),
        max_steps=max(max_iter, 1),  # one trial at least, as numba's kernel
        throw=False,
    )
    w, t, normal, _, _, status, iterations = solution.state.problem
    schur_s, _ = rules_[0].schur_terms(normal[1], normal[2], normal[4])
    s = normal[3] - jnp.sum(schur_s, axis=-1)
    head = jnp.stack([t, normal[0], s, status * 1.0, iterations * 1.0], axis=-1)
    return jnp.concatenate([head, w], axis=-1)


def solve_prior(params: HapkeParams, arrays: dict, settings, limits, solver: str) -> np.ndarray:
    """Solve every pixel's problem (see the module docstring for `arrays` and the output).

    Args:
        settings: (1 / prior_sigma, free_t: 1.0 or 0.0 to hold t).
        limits: (t_low, t_high, tol, max_iter).
    """
    pixel_keys = ("to_sun", "to_sensor", "normal", "coefficients", "distance", "t", "w", "mean")
    band_keys = ("wavelength", "solar", "observed", "weight")
    data = {k: np.ascontiguousarray(arrays[k], dtype=np.float64) for k in pixel_keys + band_keys}
    n, n_bands = data["observed"].shape
    t_low, t_high, tol, max_iter = limits
    settings = (float(settings[0]), float(settings[1]))
    if solver == "numba":
        out = np.empty((n, COLUMNS + n_bands))
        run_in_blocks(
            prior_kernels.prior_kernel_for(params.model_key),
            n,
            tuple(data[k] for k in pixel_keys[:3]),
            kernel_params(params),
            tuple(data[k] for k in pixel_keys[3:]),
            tuple(data[k] for k in band_keys),
            (settings, (float(t_low), float(t_high), float(tol), int(max_iter))),
            out,
        )
        return out
    with jax.enable_x64(True):
        out = _solve_jax(
            params,
            tuple(jnp.asarray(data[k]) for k in pixel_keys + band_keys),
            settings,
            (float(t_low), float(t_high), float(tol)),
            key=params.model_key,
            max_iter=int(max_iter),
        )
        return np.asarray(out, dtype=np.float64)
