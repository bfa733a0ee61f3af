"""`ElementwiseLevenbergMarquardt` as a user meets it: an optimistix solver for many
independent small least-squares problems at once, with its Jacobian by linearisation of
the residual function or from a function that gives the columns."""

import jax.numpy as jnp
import numpy as np
import optimistix as optx

import lumaxlike
from lumaxlike._inverse import elementwise_lm as lumaxlike_lm

TIMES = jnp.linspace(0.0, 3.0, 8)


def times_for(y):
    return jnp.broadcast_to(TIMES, y.shape[:-1] + TIMES.shape)


def residuals(y, data):
    """A exp(-k t) - data for y = (A, k) of every problem: batch + (observations,)."""
    return y[..., :1] * jnp.exp(-y[..., 1:] * times_for(y)) - data


def residuals_and_columns(y, data):
    decay = jnp.exp(-y[..., 1:] * times_for(y))
    return y[..., :1] * decay - data, [decay, -y[..., :1] * times_for(y) * decay]


def test_decays_fitted_with_linearised_or_given_jacobian():
    rng = np.random.default_rng(0)
    truth = np.stack([rng.uniform(0.5, 2.0, (40, 3)), rng.uniform(0.2, 1.5, (40, 3))], axis=-1)
    data = residuals(jnp.asarray(truth), 0.0)
    start = jnp.broadcast_to(jnp.asarray([1.0, 0.8]), truth.shape)
    solutions = {}
    for jacobian in (None, residuals_and_columns):
        solver = lumaxlike.ElementwiseLevenbergMarquardt(
            tol=1e-12,
            lower=jnp.asarray([0.0, 0.0]),
            upper=jnp.asarray([10.0, 10.0]),
            jacobian=jacobian,
        )
        solution = optx.least_squares(
            residuals, solver, start, args=data, max_steps=100, throw=False
        )
        assert solution.result == optx.RESULTS.successful
        assert bool(jnp.all(solution.state.converged))
        np.testing.assert_allclose(solution.value, truth, rtol=1e-10)
        solutions[jacobian] = solution
    # the same rules on the same (up to rounding) Jacobian: the same steps
    np.testing.assert_array_equal(
        solutions[None].state.iterations, solutions[residuals_and_columns].state.iterations
    )


def residuals_and_normal_equations(y, data):
    """The operation's own J^T J and J^T f (here from the columns, in NumPy's order)."""
    residual, columns = residuals_and_columns(y, data)
    jacobian = jnp.stack(columns, axis=-1)  # batch + (observations, p)
    jtj = jnp.einsum("...ka,...kb->...ab", jacobian, jacobian)
    jtf = jnp.einsum("...ka,...k->...a", jacobian, residual)
    return residual, jtj, jtf


def test_decays_fitted_with_given_normal_equations():
    rng = np.random.default_rng(1)
    truth = np.stack([rng.uniform(0.5, 2.0, (30,)), rng.uniform(0.2, 1.5, (30,))], axis=-1)
    data = residuals(jnp.asarray(truth), 0.0)
    solver = lumaxlike.ElementwiseLevenbergMarquardt(
        tol=1e-12,
        lower=jnp.asarray([0.0, 0.0]),
        upper=jnp.asarray([10.0, 10.0]),
        normal_equations=residuals_and_normal_equations,
    )
    start = jnp.broadcast_to(jnp.asarray([1.0, 0.8]), truth.shape)
    solution = optx.least_squares(residuals, solver, start, args=data, max_steps=100, throw=False)
    assert solution.result == optx.RESULTS.successful
    assert bool(jnp.all(solution.state.converged))
    np.testing.assert_allclose(solution.value, truth, rtol=1e-10)


def test_a_subproblem_hook_steps_on_its_own_constraint_and_carries_state():
    """The damped subproblem is a hook (`unmix` gives its simplex programme): here the
    decays with k tied to A (k = A / 2), every step taken along (2, 1) from a start on
    that line; the carried state counts each problem's accepted steps."""
    direction = jnp.asarray([[2.0, 1.0]]) / jnp.sqrt(5.0)  # (1, p): rank promotion is an error

    def along_the_line(y, args, jtj, jtf, damping, *, lower, upper, carried, active):
        slope = jnp.sum(jtf * direction, axis=-1)
        curvature = jnp.einsum("nab,a,b->n", jtj, direction[0], direction[0])
        length = -slope / (curvature * (1.0 + damping))
        step = length[..., None] * direction
        return lumaxlike_lm.Subproblem(y + step, step, curvature > 0.0, carried + 1)

    rng = np.random.default_rng(2)
    amplitude = rng.uniform(0.5, 2.0, 25)
    truth = np.stack([amplitude, amplitude / 2.0], axis=-1)
    data = residuals(jnp.asarray(truth), 0.0)
    solver = lumaxlike.ElementwiseLevenbergMarquardt(
        tol=1e-12, lower=0.0, upper=10.0, subproblem=along_the_line
    )
    start = jnp.broadcast_to(jnp.asarray([1.0, 0.5]), truth.shape)
    options = {"carried": jnp.zeros(25, jnp.int32)}
    solution = optx.least_squares(
        residuals, solver, start, args=data, options=options, max_steps=100, throw=False
    )
    assert bool(jnp.all(solution.state.converged))
    np.testing.assert_allclose(solution.value, truth, rtol=1e-10)
    accepted = np.asarray(solution.state.carried)
    assert np.all(accepted >= 1) and np.all(accepted <= np.asarray(solution.state.iterations))
