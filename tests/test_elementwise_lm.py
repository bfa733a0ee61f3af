"""`ElementwiseLevenbergMarquardt` as a user meets it: an optimistix solver for many
independent small least-squares problems at once, with its Jacobian by linearisation of
the residual function or from a function that gives the columns."""

import jax.numpy as jnp
import numpy as np
import optimistix as optx

import lumaxlike

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


def halving_rules():
    """A problem's own rules (the `rules` case): halve y until its first entry is at most
    `limit`; the state counts the halvings. Exact in floats, so the counts are known."""

    def start(y, limit):
        return {"halvings": jnp.zeros(y.shape[:-1])}, y[..., 0] <= limit

    def iterate(y, state, limit):
        y = y / 2.0
        return y, {"halvings": state["halvings"] + 1.0}, y[..., 0] <= limit

    return start, iterate


def test_own_rules_run_until_each_problem_finishes():
    """Every problem steps by the operation's rules until they say it has finished (its y
    and state frozen there, its iterations counted), for at most `max_steps`; problems
    frozen by the caller never step."""
    needed = np.arange(8)  # problem k needs k halvings of 2^k
    start = jnp.stack([2.0**needed, -(2.0**needed)], axis=-1)  # batch (8,) + (2,)
    frozen = jnp.asarray(needed == 3)
    solver = lumaxlike.ElementwiseLevenbergMarquardt(
        tol=0.0, lower=-jnp.inf, upper=jnp.inf, rules=halving_rules()
    )
    solution = optx.least_squares(
        lambda y, limit: y[..., 0] - limit,
        solver,
        start,
        args=jnp.ones(8),
        options={"frozen": frozen},
        max_steps=5,
        throw=False,
    )
    halvings = np.where(needed == 3, 0, np.minimum(needed, 5))
    np.testing.assert_array_equal(solution.state.problem["halvings"], halvings)
    np.testing.assert_array_equal(solution.state.iterations, halvings)
    np.testing.assert_array_equal(solution.value, np.asarray(start) / 2.0 ** halvings[:, None])
    np.testing.assert_array_equal(solution.state.converged, (needed <= 5) | (needed == 3))
    assert solution.result == optx.RESULTS.nonlinear_max_steps_reached  # 6 and 7 unfinished
