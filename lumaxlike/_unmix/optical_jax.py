"""The JAX solver of `unmix` with free grain sizes and npFe0 (`optical`): the twin of
`optical_numba`, step for step (the same held parameters, null-space step, projection,
inner solve and `lm_rules`). float64.

The outer problem, Levenberg-Marquardt over the nonlinear parameters (ln D, phi), is the
shared `ElementwiseLevenbergMarquardt` run by `optx.least_squares` on a chunk's pixels
(x of shape (pixels, 2p + 1)), with `optical`'s parts as its hooks, each written for one
pixel and mapped over the chunk with `jax.vmap`:

- `normal_equations` (`_evaluate`): the fractions solved at x's grain sizes and phi
  (`_fractions`: Gauss-Newton on the simplex with `jax_unmix.simplex_qp_lanes`, one lane;
  the inner problem, a bounded `while_loop` of at most `optical.MAX_FRACTION_STEPS`
  steps) and J^T J, J^T f of all of x there; it returns x with its fractions solved (the
  point the solver takes);
- `subproblem` (`_step`): the damped step in the null space of the sum, the held
  parameters (`_held`), the simplex projection and `optical.MAX_LN_STEP`;
- `settled`: `optical.settled`.
"""

from __future__ import annotations

import functools
from functools import partial
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx

from .._inverse import lm_rules
from .._inverse.chunking import pad_pixels
from .._inverse.elementwise_lm import ElementwiseLevenbergMarquardt, Subproblem
from .._inverse.ordered_sums import sum_last
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
    return sum_last(residual * residual), columns.T @ columns, columns.T @ residual, residual, d


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
            a_matrix[..., None],  # one lane: the lane axis last
            c[:, None],
            f[:, None],
            (f > 0.0)[:, None],
            jnp.ones(1, bool),
            jnp.ones(1, bool),
            jnp.asarray(True),
            6 * p + 10,
        )
        z, ok = z[:, 0], code[0] == QP_OK
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


def _evaluate(x, refl, terms, tol, context, *, p, key, variants):
    """`optical_numba._evaluate` for one pixel at x (2p + 1,): (weighted residual
    (bands,), J^T J (2p + 1, 2p + 1) and J^T f (2p + 1,) of all of x, x with its
    fractions solved); context = (constants, weights). Where the solved point is not
    finite, x and a NaN residual (a trial never accepted)."""
    constants, weights = context
    w, dw_du, dw_dphi = _endmember_rows(x, p, constants, variants)
    mixture = partial(_mixture, w=w, terms=terms, refl=refl, weights=weights, key=key)
    f, (_, _, _, residual, d) = _fractions(x[:p], mixture, tol)
    columns = (
        jnp.concatenate([w.T, f[None, :] * dw_du.T, (f @ dw_dphi)[:, None]], axis=1) * d[:, None]
    )  # (bands, 2p + 1)
    point = jnp.concatenate([f, x[p:]])
    finite = jnp.all(jnp.isfinite(point))
    return (
        jnp.where(finite, residual, jnp.nan),
        columns.T @ columns,
        columns.T @ residual,
        jnp.where(finite, point, x),
    )


def _normal_equations(y, args, *, p, key, variants):
    """The solver's `normal_equations` over a chunk, y (pixels, 2p + 1): `_evaluate` of
    every pixel, args = (refl (pixels, bands), terms, tol, context, box)."""
    refl, terms, tol, context, _ = args
    evaluate = partial(_evaluate, p=p, key=key, variants=variants)
    return jax.vmap(evaluate, in_axes=(0, 0, 0, None, None))(y, refl, terms, tol, context)


def _residuals(y, args, *, p, key, variants):
    """The residual function of the least-squares problem over x, y (pixels, 2p + 1):
    every pixel's weighted residual (bands,) at y's own fractions, which is
    `_normal_equations`' at a point it solved. The solver never evaluates it (the
    evaluation is `_normal_equations`); optimistix traces it, the cheaper the better."""
    refl, terms, _, (constants, weights), _ = args

    def one(x, refl, terms):
        w = _endmember_rows(x, p, constants, variants)[0]
        return _mixture(x[:p], w, terms, refl, weights, key)[3]

    return jax.vmap(one)(y, refl, terms)


def _subproblem(y, args, hessian, gradient, damping, *, newton, carried, p, **_):
    """The solver's `subproblem` (`Subproblem`): `_step` of every pixel with its `_held`
    parameters (box = (lower, upper, fixed) (2p + 1,) in args); ln D moves by at most
    `optical.MAX_LN_STEP` in a trial step, without limit in the Newton step. Its step is
    the point's difference from y (what the convergence test reads)."""
    lower, upper, fixed = args[4]
    reach = jnp.inf if newton else optical.MAX_LN_STEP

    def one(x, hessian, gradient, damping):
        held = _held(x, gradient, lower, upper, fixed, p)
        return _step(x, hessian, gradient, damping, held, lower, upper, p, reach)

    point, solvable = jax.vmap(one)(y, hessian, gradient, damping)
    return Subproblem(point, point - y, solvable, carried)


def _settled(trial, newton, hessian, cost, args, *, p):
    """The solver's `settled`: `optical.settled` of every pixel's undamped step d =
    newton - trial, d^T J^T J d its metric, infinite where d moves ln D or phi onto a
    bound (taken before `settled`)."""
    lower, upper, _ = args[4]
    n_bands = args[0].shape[-1]

    def one(trial, newton, hessian, cost):
        moved, out = newton[p:] != trial[p:], newton[p:]
        onto_bound = moved & ((out <= lower[p:]) | (out >= upper[p:]))
        d = newton - trial
        metric = jnp.where(jnp.any(onto_bound), jnp.inf, d @ hessian @ d)
        return settled(True, metric, cost, n_bands, p)

    return jax.vmap(one)(trial, newton, hessian, cost)


def _solve_chunk(pixels, params, context, bounds, tol, *, key, variants, max_iter):
    """Every pixel of a chunk: pixels = (refl (pixels, bands), to_sun, to_sensor, normal
    (pixels, 3)), context = (constants, weights), bounds = (start (pixels, 2p + 1),
    lower, upper, fixed (2p + 1,)); `ElementwiseLevenbergMarquardt` over x with the
    fractions solved at every point (`_normal_equations`), `optical`'s step
    (`_subproblem`) and stopping test (`_settled`). The dict of `solve_optical_jax`, and
    whether the solve met a non-finite point."""
    refl, *geometry = pixels
    start, lower, upper, fixed = bounds
    p = context[0][0].shape[0]
    status, terms = jax.vmap(_pixel_status, in_axes=(0, 0, None))(refl, tuple(geometry), params)
    active = status < 0
    args = (jnp.where(active[:, None], refl, 0.0), terms, tol, context, (lower, upper, fixed))
    solver = ElementwiseLevenbergMarquardt(
        tol=tol,
        lower=lower,
        upper=upper,
        normal_equations=partial(_normal_equations, p=p, key=key, variants=variants),
        subproblem=partial(_subproblem, p=p),
        settled=partial(_settled, p=p),
        newton_cut=True,
        start_damping=optical.START_DAMPING,
    )
    *evaluated, start = solver.normal_equations(start, args)  # the start's fractions solved
    solution: optx.Solution[Any, Any] = optx.least_squares(
        partial(_residuals, p=p, key=key, variants=variants),
        solver,
        start,
        args,
        options={"frozen": ~active, "evaluated": tuple(evaluated)},
        max_steps=max_iter,
        throw=False,
    )
    state = solution.state
    cost = sum_last(state.residual * state.residual)
    solved = jnp.where(state.converged, int(Status.CONVERGED), int(Status.MAX_ITER))
    found = active & jnp.isfinite(cost)
    nan = jnp.nan
    return {
        "x": jnp.where(found[:, None], solution.value, nan),
        "status": jnp.where(active, solved, status).astype(jnp.int8),
        "iterations": jnp.where(active, state.iterations, 0).astype(jnp.int32),
        "cost": jnp.where(active, cost, nan),
        "hessian": jnp.where(active[:, None, None], state.jtj, nan),
        "gradient": jnp.where(active[:, None], state.jtf, nan),
    }, solution.result == optx.RESULTS.nonfinite


@functools.cache
def _program(key, variants, max_iter):
    return jax.jit(partial(_solve_chunk, key=key, variants=variants, max_iter=max_iter))


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
        context = (
            tuple(jnp.asarray(c, jnp.float64) for c in constants),
            jnp.asarray(weights, jnp.float64),
        )
        box = (*(jnp.asarray(a, jnp.float64) for a in (lower, upper)), jnp.asarray(fixed))
        solved, nonfinite = _program(
            params.model_key, (optical.reflections, optical.mean_path), int(max_iter)
        )(tuple(arrays[:4]), params, context, (arrays[4], *box), jnp.asarray(tol, jnp.float64))
        if bool(nonfinite):  # `_evaluate` keeps every accepted point finite
            raise RuntimeError("the optical unmix solve met a non-finite point")
        return {k: np.asarray(v)[:n_pixels] for k, v in jax.device_get(solved).items()}
