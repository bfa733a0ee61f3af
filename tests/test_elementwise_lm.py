"""`ElementwiseLevenbergMarquardt` as a user meets it: an optimistix solver for many
independent small least-squares problems at once, with its Jacobian by linearisation of
the residual function or from a function that gives the columns."""

import jax
import jax.numpy as jnp
import numpy as np
import optimistix as optx
import pytest

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


def solved_amplitude(y, data):
    """Variable projection of the decays: A solved exactly at y's k (the residuals are
    linear in A); (residuals, J^T J, J^T f, y with A solved)."""
    decay = jnp.exp(-y[..., 1:] * times_for(y))
    amplitude = jnp.sum(decay * data, axis=-1, keepdims=True) / jnp.sum(
        decay * decay, axis=-1, keepdims=True
    )
    point = jnp.concatenate([amplitude, y[..., 1:]], axis=-1)
    return (*residuals_and_normal_equations(point, data), point)


def decays(seed, n=30):
    rng = np.random.default_rng(seed)
    truth = np.stack([rng.uniform(0.5, 2.0, (n,)), rng.uniform(0.5, 1.1, (n,))], axis=-1)
    start = jnp.broadcast_to(jnp.asarray([1.0, 0.8]), truth.shape)
    return truth, residuals(jnp.asarray(truth), 0.0), start


def test_normal_equations_that_solve_part_of_the_point_move_it():
    """A `normal_equations` with a fourth output (the point it solved A at): the solve
    takes that point, so every iterate has its least-squares A; the start must be such
    a point with its evaluation given (init cannot move y)."""
    truth, data, start = decays(2)
    solver = lumaxlike.ElementwiseLevenbergMarquardt(
        tol=1e-12, lower=0.0, upper=10.0, normal_equations=solved_amplitude
    )
    with pytest.raises(ValueError, match="moves the point"):
        optx.least_squares(residuals, solver, start, args=data, max_steps=5, throw=False)
    *evaluated, start = solved_amplitude(start, data)
    options = {"evaluated": tuple(evaluated)}
    for steps in (2, 100):
        solution = optx.least_squares(
            residuals, solver, start, args=data, options=options, max_steps=steps, throw=False
        )
        amplitude = solved_amplitude(solution.value, data)[3][:, 0]
        np.testing.assert_allclose(solution.value[:, 0], amplitude, rtol=1e-14, atol=0)
    assert bool(jnp.all(solution.state.converged))
    np.testing.assert_allclose(solution.value, truth, rtol=1e-10)


def k_step(y, args, jtj, jtf, damping, *, newton, carried, **_):
    """A subproblem that steps k alone (A is solved by the evaluation): the damped step
    -g_k / (H_kk (1 + lambda)), undamped for the Newton step."""
    assert isinstance(newton, bool)  # static: the two steps may differ in kind
    curvature = jtj[..., 1, 1] * (1.0 + damping)
    step = -jtf[..., 1] / jnp.where(curvature > 0.0, curvature, 1.0)
    point = y.at[..., 1].add(step)
    return lumaxlike_lm.Subproblem(point, point - y, curvature > 0.0, carried)


def test_subproblem_and_settled_hooks():
    """A `subproblem` (k stepped alone, A solved by the evaluation) reaches the truth;
    a `settled` that accepts every trial ends each problem at its first accepted step;
    `start_damping` is the first damping."""
    truth, data, start = decays(3)
    *evaluated, start = solved_amplitude(start, data)
    options = {"evaluated": tuple(evaluated)}

    def solve(**hooks):
        solver = lumaxlike.ElementwiseLevenbergMarquardt(
            tol=1e-12, lower=0.0, upper=10.0, normal_equations=solved_amplitude, **hooks
        )
        return optx.least_squares(
            residuals, solver, start, args=data, options=options, max_steps=100, throw=False
        )

    solution = solve(subproblem=k_step)
    assert bool(jnp.all(solution.state.converged))
    np.testing.assert_allclose(solution.value, truth, rtol=1e-10)
    assert int(jnp.min(solution.state.iterations)) > 1
    everywhere = solve(subproblem=k_step, settled=lambda trial, *_: jnp.ones(trial.shape[0], bool))
    assert bool(jnp.all(everywhere.state.converged))
    assert bool(jnp.all(everywhere.state.iterations == 1))  # first steps accepted here
    damped = lumaxlike.ElementwiseLevenbergMarquardt(
        tol=1e-12, lower=0.0, upper=10.0, normal_equations=solved_amplitude, start_damping=0.5
    )
    state = damped.init(residuals, start, data, options, None, None, None)
    assert bool(jnp.all(state.damping == 0.5)) and bool(jnp.all(state.jtj == evaluated[1]))


def test_a_subproblem_hook_steps_on_its_own_constraint_and_carries_state():
    """The damped subproblem is a hook (`unmix` gives its simplex programme): here the
    decays with k tied to A (k = A / 2), every step taken along (2, 1) from a start on
    that line; the carried state counts each problem's accepted steps."""
    direction = jnp.asarray([[2.0, 1.0]]) / jnp.sqrt(5.0)  # (1, p): rank promotion is an error

    def along_the_line(y, args, jtj, jtf, damping, *, carried, **_):
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


def test_a_traced_iteration_bound_stops_the_solve_as_max_steps_does():
    """`options["max_iterations"]` may be traced: one program stops after any number of
    steps, with the same problems stepped and left unfinished as optimistix's `max_steps`
    (a Python int: a program for each value) gives."""
    needed = np.arange(8)  # problem k needs k halvings of 2^k
    start = jnp.stack([2.0**needed, -(2.0**needed)], axis=-1)
    solver = lumaxlike.ElementwiseLevenbergMarquardt(
        tol=0.0, lower=-jnp.inf, upper=jnp.inf, rules=halving_rules()
    )
    traced = []

    @jax.jit
    def bounded(bound):
        traced.append(bound)
        options = {"max_iterations": bound}
        return optx.least_squares(
            lambda y, limit: y[..., 0] - limit, solver, start, jnp.ones(8), options, max_steps=None
        )

    for bound in (0, 3, 5):
        solution = bounded(bound)
        stepped = optx.least_squares(
            lambda y, limit: y[..., 0] - limit,
            solver,
            start,
            args=jnp.ones(8),
            max_steps=bound,
            throw=False,
        )
        np.testing.assert_array_equal(solution.state.iterations, np.minimum(needed, bound))
        np.testing.assert_array_equal(solution.value, stepped.value)
        np.testing.assert_array_equal(solution.state.converged, stepped.state.converged)
    assert len(traced) == 1


def test_max_iterations_stops_each_problem_at_its_own_count():
    """options["max_iterations"] on a resumed state whose problems have taken different
    numbers of iterations: each takes steps until its own count reaches the limit, the
    same steps as in one solve of that many steps (`fit` refills its batch so)."""
    rng = np.random.default_rng(4)
    truth = np.stack([rng.uniform(0.5, 2.0, 24), rng.uniform(0.2, 1.5, 24)], axis=-1)
    data = residuals(jnp.asarray(truth), 0.0) + rng.normal(0.0, 0.05, (24, TIMES.size))
    solver = lumaxlike.ElementwiseLevenbergMarquardt(
        tol=1e-300, lower=jnp.asarray([0.0, 0.0]), upper=jnp.asarray([10.0, 10.0])
    )
    start = jnp.broadcast_to(jnp.asarray([5.0, 4.0]), truth.shape)

    def solve(y, max_steps, options=None):
        return optx.least_squares(
            residuals, solver, y, args=data, options=options, max_steps=max_steps, throw=False
        )

    after_2, after_3, after_5 = (solve(start, n) for n in (2, 3, 5))
    assert not bool(jnp.any(after_5.state.converged))  # every problem steps throughout
    late = jnp.arange(24) % 2 == 0  # as if these had just entered: their count restarts
    state = after_2.state._replace(iterations=jnp.where(late, 0, after_2.state.iterations))
    resumed = solve(after_2.value, None, {"state": state, "max_iterations": 3})
    np.testing.assert_array_equal(resumed.state.iterations, np.full(24, 3))
    expected = jnp.where(late[:, None], after_5.value, after_3.value)
    np.testing.assert_array_equal(resumed.value, expected)


def test_an_unevaluated_start_is_evaluated_by_the_first_step():
    """options["unevaluated"]: init evaluates nothing; each problem's first step
    evaluates it at its start and takes no step, so one more step gives the evaluated
    start's solve: the same iterations and (but for rounding) values; a problem whose
    residuals are all 0 at its start is converged after that step, with 0 iterations,
    as init marks it; a problem frozen is never evaluated."""
    rng = np.random.default_rng(5)
    truth = np.stack([rng.uniform(0.5, 2.0, 12), rng.uniform(0.2, 1.5, 12)], axis=-1)
    data = residuals(jnp.asarray(truth), 0.0) + rng.normal(0.0, 0.02, (12, TIMES.size))
    start = jnp.broadcast_to(jnp.asarray([1.0, 0.8]), truth.shape)
    data = data.at[0].set(residuals(start[:1], 0.0)[0])  # problem 0 fits at its start
    solver = lumaxlike.ElementwiseLevenbergMarquardt(
        tol=1e-10,
        lower=jnp.asarray([0.0, 0.0]),
        upper=jnp.asarray([10.0, 10.0]),
        jacobian=residuals_and_columns,
    )
    frozen = jnp.arange(12) == 11
    evaluated = optx.least_squares(
        residuals,
        solver,
        start,
        args=data,
        options={"frozen": frozen},
        max_steps=40,
        throw=False,
    )
    deferred = optx.least_squares(
        residuals,
        solver,
        start,
        args=data,
        options={"frozen": frozen, "unevaluated": True},
        max_steps=41,
        throw=False,
    )
    np.testing.assert_array_equal(deferred.state.iterations, evaluated.state.iterations)
    np.testing.assert_allclose(deferred.value, evaluated.value, rtol=1e-13)
    assert int(deferred.state.iterations[0]) == 0 and bool(deferred.state.converged[0])
    assert bool(jnp.all(deferred.state.converged[:11]))
    assert not bool(jnp.any(deferred.state.fresh))
    assert float(deferred.state.cost[11]) == 0.0 < float(evaluated.state.cost[11])
    with pytest.raises(ValueError, match="unevaluated"):  # it needs the jacobian
        optx.least_squares(
            residuals,
            lumaxlike.ElementwiseLevenbergMarquardt(tol=1e-10, lower=0.0, upper=10.0),
            start,
            args=data,
            options={"unevaluated": True},
            max_steps=2,
            throw=False,
        )
