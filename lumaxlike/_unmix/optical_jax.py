"""The JAX solver of `unmix` with free grain sizes and npFe0 (`optical`): the twin of
`optical_numba`, step for step (the same held parameters, null-space step, projection,
inner solve and `lm_rules`), written for one pixel and mapped over a chunk with
`jax.vmap` (the `while_loop`s run until every pixel is done). float64.

The outer loop (`_iteration`) is an element-wise Levenberg-Marquardt over the nonlinear
parameters (ln D, phi) by `lm_rules`; its evaluation (`_evaluate`) solves the fractions
(`_fractions`: Gauss-Newton on the simplex with `jax_unmix.simplex_qp_lanes`, one lane)
and returns J^T J and J^T f of all of x there.
"""

from __future__ import annotations

import functools
from functools import partial

import jax
import jax.numpy as jnp
import numpy as np

from .._inverse import lm_rules
from .._inverse.chunking import pad_pixels
from .._model._backends import retarget_to_jax, slab_twins
from .._model.family import jax_equations_for
from .._model.forward import precision_scope
from .._model.jax_model import pixel_terms
from .._status import Status
from . import optical
from .jax_unmix import simplex_qp_lanes
from .optical import settled
from .simplex_qp import PIVOT_FLOOR, QP_OK

__all__ = ["solve_optical_jax"]

_lm = retarget_to_jax(lm_rules)


def _project_simplex(v):
    """`optical_numba.project_simplex` of one vector v (p,)."""
    ordered = jnp.sort(v)[::-1]
    candidates = (jnp.cumsum(ordered) - 1.0) / jnp.arange(1, v.shape[0] + 1)
    tau = jnp.max(jnp.where(ordered - candidates > 0.0, candidates, -jnp.inf))
    return jnp.maximum(v - jnp.maximum(tau, 0.0), 0.0)


def _endmember_rows(x, p, constants, variants):
    """`optical_numba._endmember_rows`: (w_j, dw_j/dln D_j, dw_j/dphi), each (p, bands)."""
    n, k, wavelength, s, iron_n, iron_k, density = constants
    grain, phi = jnp.exp(x[p : 2 * p]), x[2 * p]
    slab = slab_twins("jax", *variants).slab_albedo_and_slopes
    w, dw_dd, dw_df, _ = slab(
        n,
        k,
        wavelength[None, :],
        grain[:, None],
        s[:, None],
        phi,
        iron_n[None, :],
        iron_k[None, :],
        density[:, None],
        0.0,
    )
    return w, dw_dd * grain[:, None], dw_df


def _mixture(f, w, terms, refl, weights, key):
    """`optical_numba._mixture`: (cost, J_f^T J_f, J_f^T f, weighted residual, weighted
    dr/dw) at the fractions f (p,) of the endmembers' w (p, bands)."""
    r, slope = jax.vmap(jax_equations_for(key).reflectance_and_slope, in_axes=(0, None))(
        f @ w, terms
    )
    residual = (r - refl) * weights
    d = slope * weights
    columns = w.T * d[:, None]  # (bands, p)
    return jnp.sum(residual * residual), columns.T @ columns, columns.T @ residual, residual, d


def _halved(f, z, cost, limit, mixture):
    """The first of f + t (z - f), t = 1, 1/2, ... (at most `limit` tried) whose cost does
    not rise: (trial, its `_mixture`, found)."""

    def try_at(t):
        trial = f + t * (z - f)
        return trial, mixture(trial)

    def cond(state):
        return (state[3][0] > cost) & (state[1] < limit)

    def body(state):
        t, count, _, _ = state
        return (0.5 * t, count + 1, *try_at(0.5 * t))

    _, _, trial, evaluated = jax.lax.while_loop(cond, body, (1.0 + 0.0 * cost, 1, *try_at(1.0)))
    return trial, evaluated, evaluated[0] <= cost


def _fractions(f, mixture, tol):
    """`optical_numba._fractions`: the fractions that minimise the cost at fixed grain
    sizes and phi, from f; (f, `_mixture` there)."""
    p = f.shape[0]

    def body(state):
        f, evaluated, _, count = state
        cost, a_matrix, gradient = evaluated[:3]
        c = a_matrix @ f - gradient
        z, _, _, code = simplex_qp_lanes(
            a_matrix[None],
            c[None],
            f[None],
            (f > 0.0)[None],
            jnp.ones(1, bool),
            jnp.ones(1, bool),
            jnp.asarray(True),
            6 * p + 10,
        )
        z, ok = z[0], code[0] == QP_OK
        d = z - f
        size = jnp.max(jnp.abs(d))
        decrease = -(2.0 * d @ gradient + d @ a_matrix @ d)
        small = (size <= tol) | (decrease <= optical.FRACTION_TIE * cost)
        trial, evaluated_t, found = _halved(f, z, cost, optical.MAX_HALVINGS, mixture)
        take = ok & found & ~small  # a tie: the fractions are solved
        stop = ~ok | small | ~found
        new = jax.tree_util.tree_map(lambda a, b: jnp.where(take, a, b), evaluated_t, evaluated)
        return jnp.where(take, trial, f), new, stop, count + 1

    def cond(state):
        return ~state[2] & (state[3] < optical.MAX_FRACTION_STEPS)

    f, evaluated, _, _ = jax.lax.while_loop(cond, body, (f, mixture(f), False, 0))
    return f, evaluated


def _evaluate(x, p, mixture_at, rows_at, tol):
    """`optical_numba._evaluate`: (x with its fractions solved, cost, J^T J, J^T f)."""
    w, dw_du, dw_dphi = rows_at(x)
    f, (cost, _, _, residual, d) = _fractions(x[:p], partial(mixture_at, w=w), tol)
    columns = (
        jnp.concatenate([w.T, f[None, :] * dw_du.T, (f @ dw_dphi)[:, None]], axis=1) * d[:, None]
    )  # (bands, 2p + 1)
    return jnp.concatenate([f, x[p:]]), cost, columns.T @ columns, columns.T @ residual


def _held(x, gradient, lower, upper, fixed, p):
    """`optical_numba._held` for one pixel."""
    positive = x[:p] > 0.0
    box_held = fixed[p:] | _lm.pinned(x[p:], lower[p:], upper[p:], gradient[p:])
    box_held = box_held | jnp.concatenate([~positive, jnp.zeros(1, bool)])
    return jnp.concatenate([~positive, box_held])


def _step(x, hessian, gradient, damping, held, lower, upper, p, reach=jnp.inf):
    """`optical_numba._step`: (trial point, ok)."""
    size = x.shape[0]
    reference = jnp.argmax(jnp.where(~held[:p], x[:p], -jnp.inf))
    index = jnp.arange(size)
    is_reference = index == reference
    columns = ~held & ~is_reference
    largest = jnp.max(jnp.diagonal(hessian))
    damped = jnp.where(
        index >= p,
        _lm.damped_diagonal(jnp.diagonal(hessian), largest, damping),
        jnp.diagonal(hessian),
    )
    a_matrix = hessian * (1.0 - jnp.eye(size)) + jnp.diag(damped)
    t = jnp.eye(size) * columns[None, :]
    t = t - (is_reference[:, None] & ((index < p) & columns)[None, :])
    system = t.T @ a_matrix @ t + jnp.diag(jnp.where(columns, 0.0, 1.0))
    rhs = -(t.T @ gradient)
    diagonal = jnp.diagonal(system)
    ok = jnp.all(diagonal > 0.0)
    scale = jnp.sqrt(jnp.where(diagonal > 0.0, diagonal, 1.0))
    correlation = system / (scale[:, None] * scale[None, :])
    factor = jnp.linalg.cholesky(correlation)
    ok = ok & jnp.all(jnp.diagonal(factor) ** 2 > PIVOT_FLOOR)
    factor = jnp.where(ok, factor, jnp.eye(size))
    y = jax.scipy.linalg.cho_solve((factor, True), rhs / scale) / scale
    trial = x + t @ y
    box = jnp.clip(trial[p:], lower[p:], upper[p:])
    reach = jnp.where(index[p:] < 2 * p, reach, jnp.inf)  # ln D: at most `reach`
    box = jnp.clip(box, x[p:] - reach, x[p:] + reach)
    trial = jnp.concatenate([_project_simplex(trial[:p]), box])
    return jnp.where(ok, trial, x), ok


def _decrease(x, trial, hessian, gradient):
    d = trial - x
    return -(2.0 * d @ gradient + d @ hessian @ d), jnp.max(jnp.abs(d))


def _iteration(state, evaluate, box, p, n_bands, tol):
    """One outer iteration of one pixel: state = (x, cost, hessian, gradient, damping,
    growth, done, iteration); box = (lower, upper, fixed); `optical_numba._solve_pixel`'s
    loop: an element-wise LM over ln D and phi (`lm_rules`), the fractions solved at
    each trial point by `evaluate`."""
    lower, upper, fixed = box
    x, cost, hessian, gradient, damping, growth, done, iteration = state
    held = _held(x, gradient, lower, upper, fixed, p)
    trial, ok = _step(x, hessian, gradient, damping, held, lower, upper, p, optical.MAX_LN_STEP)
    predicted, _ = _decrease(x, trial, hessian, gradient)
    trial, cost_t, hessian_t, gradient_t = evaluate(trial)
    step_size = jnp.max(jnp.abs(trial - x))
    held_t = _held(trial, gradient_t, lower, upper, fixed, p)
    newton, newton_ok = _step(trial, hessian_t, gradient_t, 0.0, held_t, lower, upper, p)
    newton_decrease, newton_size = _decrease(trial, newton, hessian_t, gradient_t)
    # not where the bounds cut the step into no decrease: not the last step
    cut = newton_decrease < -lm_rules.COST_TIE * cost_t
    newton_decrease = jnp.where(newton_ok & ~cut, newton_decrease, jnp.inf)
    newton_size = jnp.where(newton_ok, newton_size, jnp.inf)
    accept = _lm.accepted(cost, cost_t) & ok
    finished = _lm.converged(step_size, predicted, cost, newton_size, accept, damping, tol)
    onto_bound = (newton[p:] != trial[p:]) & ((newton[p:] <= lower[p:]) | (newton[p:] >= upper[p:]))
    newton_metric = jnp.where(
        newton_ok & ~jnp.any(onto_bound),
        (newton - trial) @ hessian_t @ (newton - trial),
        jnp.inf,
    )
    finished = finished | settled(accept, newton_metric, cost_t, n_bands, p)
    finished = finished & ok
    new_damping, new_growth = _lm.next_damping(
        accept,
        _lm.gain_ratio(cost, cost_t, predicted),
        damping,
        growth,
        newton_decrease,
        cost_t,
    )
    singular_damping, singular_growth = _lm.next_damping(False, 0.0, damping, growth, jnp.inf, 0.0)
    new_damping = jnp.where(ok, new_damping, singular_damping)
    new_growth = jnp.where(ok, new_growth, singular_growth)
    return (
        jnp.where(accept, trial, x),
        jnp.where(accept, cost_t, cost),
        jnp.where(accept, hessian_t, hessian),
        jnp.where(accept, gradient_t, gradient),
        new_damping,
        new_growth,
        finished,
        iteration + 1,
    )


def _pixel_status(refl, geometry, params):
    """(-1 or NONFINITE_INPUT / INVALID_GEOMETRY, the pixel's `pixel_terms`)."""
    to_sun, to_sensor, normal = geometry
    terms = pixel_terms(to_sun, to_sensor, normal, params)
    finite = jnp.all(jnp.isfinite(to_sun) & jnp.isfinite(to_sensor) & jnp.isfinite(normal))
    finite = finite & jnp.all(jnp.isfinite(refl))
    status = jnp.where(
        finite,
        jnp.where(jnp.isfinite(terms.scale), -1, int(Status.INVALID_GEOMETRY)),
        int(Status.NONFINITE_INPUT),
    )
    return status, terms


def _solve_pixel(pixel, params, constants, weights, bounds, tol, *, max_iter, key, variants):
    """One pixel: pixel = (refl (bands,), to_sun, to_sensor, normal (3,)), bounds =
    (start, lower, upper, fixed) (2p + 1,) each; the dict of `solve_optical_jax`."""
    refl = pixel[0]
    start, lower, upper, fixed = bounds
    p = constants[0].shape[0]
    status, terms = _pixel_status(refl, pixel[1:], params)
    active = status < 0
    refl = jnp.where(active, refl, 0.0)
    evaluate = partial(
        _evaluate,
        p=p,
        mixture_at=partial(_mixture, terms=terms, refl=refl, weights=weights, key=key),
        rows_at=partial(_endmember_rows, p=p, constants=constants, variants=variants),
        tol=tol,
    )
    start, cost, hessian, gradient = evaluate(start)
    box = (lower, upper, fixed)
    body = partial(_iteration, evaluate=evaluate, box=box, p=p, n_bands=refl.shape[0], tol=tol)

    def cond(state):
        return ~state[6] & (state[7] < max_iter)

    init = (
        start,
        cost,
        hessian,
        gradient,
        optical.START_DAMPING + 0.0 * cost,
        2.0 + 0.0 * cost,
        ~active | (cost == 0.0),
        0,
    )
    x, cost, hessian, gradient, _, _, done, iteration = jax.lax.while_loop(cond, body, init)
    solved = jnp.where(done, int(Status.CONVERGED), int(Status.MAX_ITER))
    nan = jnp.nan
    return {
        "x": jnp.where(active, x, nan),
        "status": jnp.where(active, solved, status).astype(jnp.int8),
        "iterations": jnp.where(active, iteration, 0).astype(jnp.int32),
        "cost": jnp.where(active, cost, nan),
        "hessian": jnp.where(active, hessian, nan),
        "gradient": jnp.where(active, gradient, nan),
    }


@functools.cache
def _program(key, variants, max_iter):
    mapped = jax.vmap(
        partial(_solve_pixel, key=key, variants=variants, max_iter=max_iter),
        in_axes=((0, 0, 0, 0), None, None, None, (0, None, None, None), None),
    )
    return jax.jit(mapped)


def solve_optical_jax(problem, params, endmembers, weights, bounds, settings, pad_to=None):
    """One chunk, padded to `pad_to` pixels (one compile per chunk shape); the contract
    of `optical_numba.solve_optical_numba`."""
    optical = endmembers.optical
    start, lower, upper, fixed = bounds
    max_iter, tol = settings
    n_pixels = problem[0].shape[0]
    pad_to = max(pad_to or n_pixels, n_pixels, 1)
    start = np.broadcast_to(start, (n_pixels, len(lower)))  # one start, or one per pixel
    pieces = [
        pad_pixels(a, pad_to, np.nan if i == 0 else 1.0) for i, a in enumerate((*problem, start))
    ]
    constants = (
        optical.n,
        optical.k,
        endmembers.wavelengths,
        optical.internal_scattering,
        optical.iron_n,
        optical.iron_k,
        endmembers.density,
    )
    with precision_scope(np.empty(0, np.float64)):
        arrays = [jnp.asarray(a, jnp.float64) for a in pieces]
        solved = _program(
            params.model_key, (optical.reflections, optical.mean_path), int(max_iter)
        )(
            tuple(arrays[:4]),
            params,
            tuple(jnp.asarray(c, jnp.float64) for c in constants),
            jnp.asarray(weights, jnp.float64),
            (arrays[4], *(jnp.asarray(a, jnp.float64) for a in (lower, upper)), jnp.asarray(fixed)),
            jnp.asarray(tol, jnp.float64),
        )
        return {k: np.asarray(v)[:n_pixels] for k, v in jax.device_get(solved).items()}
