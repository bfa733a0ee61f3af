"""`numba_lm.levenberg_marquardt`, the numba Levenberg-Marquardt loop of every numba
kernel, on a problem whose pieces are written here: one parameter x, one residual
f = x - 3 (J = 1). Its undamped step is exact, so each count below follows from the rules
of `lm_rules` alone. The kernels that run the loop are checked through their operations
(test_fit.py, test_fit_joint.py, test_unmix.py)."""

import numba
import numpy as np

from lumaxlike._inverse.lm_rules import MIN_DAMPING
from lumaxlike._inverse.numba_lm import lm_for

TARGET = 3.0

# A state is (x, jtj, jtf), each of shape (1,); steps = (calls, dampings, step): calls =
# (singular solves left, solves made), the damping of each solve, the last solution.


@numba.njit
def evaluate(point, jtj, jtf):
    residual = point[0] - TARGET
    jtj[0] = 1.0
    jtf[0] = residual
    return residual * residual


@numba.njit
def solve(damping, point, jtj, jtf, calls, dampings, step):
    if calls[1] < dampings.shape[0]:
        dampings[calls[1]] = damping
    calls[1] += 1
    if calls[0] > 0:  # the first solves find a singular system
        calls[0] -= 1
        return False
    step[0] = -jtf[0] / (jtj[0] * (1.0 + damping))  # Marquardt's scaling
    return True


@numba.njit
def trial(point, jtj, jtf, trial_point, jtj_trial, jtf_trial, calls, dampings, step):
    trial_point[0] = point[0] + step[0]
    return abs(step[0]), -(2.0 * step[0] * jtf[0] + step[0] * jtj[0] * step[0])


@numba.njit
def newton(point, jtj, jtf, calls, dampings, step):
    return abs(step[0]), -(2.0 * step[0] * jtf[0] + step[0] * jtj[0] * step[0])


@numba.njit
def take(trial_point, jtj_trial, jtf_trial, point, jtj, jtf, calls, dampings, step):
    point[0] = trial_point[0]
    jtj[0] = jtj_trial[0]
    jtf[0] = jtf_trial[0]


SOLVE = lm_for(
    "test_numba_lm", evaluate=evaluate, solve=solve, trial=trial, newton=newton, take=take
)


@numba.njit
def below_ten(cost):
    return cost < 10.0, 0.0, 2.0


# `start` replaces the default test of the start (cost 0)
SOLVE_BELOW_TEN = lm_for(
    "test_numba_lm_solved",
    evaluate=evaluate,
    solve=solve,
    trial=trial,
    newton=newton,
    take=take,
    start=below_ten,
)


@numba.njit
def solve_far(damping, point, jtj, jtf, calls, dampings, step):
    """`solve`, the step three times too long: the undamped trial from 0 (x = 9) is
    rejected."""
    solvable = solve(damping, point, jtj, jtf, calls, dampings, step)
    step[0] *= 3.0
    return solvable


@numba.njit
def no_size(size, *states):
    return 0.0


@numba.njit
def stop_when_accepted(accept, cost_trial, *states):
    return accept


def _solver(variant, **pieces):
    given = dict(evaluate=evaluate, solve=solve, trial=trial, newton=newton, take=take)
    return lm_for(f"test_numba_lm_{variant}", **{**given, **pieces})


SOLVE_FAR = _solver("far", solve=solve_far)
SOLVE_FAR_NO_SIZE = _solver("far_no_size", solve=solve_far, measure=no_size)
SOLVE_FAR_NEWTON_ACCEPTED = _solver("far_accepted", solve=solve_far, newton_where_rejected=False)
SOLVE_STOP = _solver("stop", stop=stop_when_accepted)


def run(singular_calls, max_iter, solver=SOLVE, start=0.0):
    """(converged, iterations, cost, x, the damping of the first three solves, the solves
    made) from x = 0."""
    calls = np.array([singular_calls, 0])
    dampings = np.full(3, np.nan)
    point = np.full(1, start)
    current = (point, np.empty(1), np.empty(1))
    candidate = (np.empty(1), np.empty(1), np.empty(1))
    steps = (calls, dampings, np.empty(1))
    done, iterations, cost = solver((), steps, current, candidate, (max_iter, 1e-12))
    return done, iterations, cost, point[0], dampings, calls[1]


def test_undamped_first_step_solves_a_linear_problem():
    """lambda starts at 0: the first trial is the exact Gauss-Newton step, accepted, and
    the Newton step at the trial (0) ends the problem there: one iteration, cost 0, two
    solves (the damped one and the Newton one, both undamped)."""
    done, iterations, cost, x, dampings, solves = run(0, max_iter=10)
    assert done and iterations == 1 and cost == 0.0 and x == TARGET
    assert solves == 2 and dampings[0] == 0.0 and dampings[1] == 0.0


def test_singular_systems_damp_more_and_count_as_iterations():
    """Two singular systems: lambda from 0 to MIN_DAMPING, then times nu (2, doubled to 4
    by the first rejection); each counts as an iteration, the point stays. Then the
    damped steps approach x = 3 and converge."""
    done, iterations, cost, x, dampings, _ = run(2, max_iter=50)
    np.testing.assert_array_equal(dampings, [0.0, MIN_DAMPING, 4.0 * MIN_DAMPING])
    assert done and iterations > 3 and abs(x - TARGET) < 1e-12 and cost < 1e-24
    stopped = run(2, max_iter=2)
    assert stopped[:4] == (False, 2, TARGET**2, 0.0)  # the cap: not converged, not moved
    assert stopped[5] == 2  # no Newton solve after a singular one


def test_a_start_that_start_accepts_is_the_solution():
    """`start` (here cost < 10) ends the problem at its start: converged, no iteration,
    no solve; a start it refuses is solved as with the default (cost 0 only)."""
    at_start = run(0, max_iter=10, solver=SOLVE_BELOW_TEN, start=1.0)
    assert at_start[:4] == (True, 0, 4.0, 1.0) and at_start[5] == 0
    assert run(0, max_iter=10, start=1.0)[:4] == (True, 1, 0.0, TARGET)
    assert run(0, max_iter=10, solver=SOLVE_BELOW_TEN, start=-1.0)[:4] == (True, 1, 0.0, TARGET)
    assert run(0, max_iter=10, start=TARGET)[:2] == (True, 0)  # cost 0: the default


def test_measure_replaces_the_trial_size():
    """`measure` gives `lm_rules.converged` the step's size: an undamped trial of size 0
    (here `no_size`) ends the problem though it is rejected, the point kept; by default
    the rejected trial's size (9) does not."""
    assert run(0, max_iter=1, solver=SOLVE_FAR_NO_SIZE)[:4] == (True, 1, TARGET**2, 0.0)
    assert run(0, max_iter=1, solver=SOLVE_FAR)[:4] == (False, 1, TARGET**2, 0.0)


def test_newton_where_rejected():
    """By default the Newton solve is made at a rejected trial too (two solves in the
    first iteration); with ``newton_where_rejected=False`` only the damped one. The rules
    read the Newton step of an accepted trial only: the same iterations and point."""
    assert run(0, max_iter=1, solver=SOLVE_FAR)[5] == 2
    assert run(0, max_iter=1, solver=SOLVE_FAR_NEWTON_ACCEPTED)[5] == 1
    every, accepted_only = (run(0, 50, solver) for solver in (SOLVE_FAR, SOLVE_FAR_NEWTON_ACCEPTED))
    assert every[:4] == accepted_only[:4] and every[1] > 2
    assert every[5] > accepted_only[5]  # fewer solves


def test_stop_ends_the_problem_beside_converged():
    """`stop` (here: at the first accepted trial) ends the problem where
    `lm_rules.converged` would not: after two singular systems, the first (damped) step
    is taken and the problem ends there, short of x = 3; without it more steps follow."""
    done, iterations, _, x, _, _ = run(2, max_iter=50, solver=SOLVE_STOP)
    assert done and iterations == 3 and x == TARGET / (1.0 + 4.0 * MIN_DAMPING)
    assert run(2, max_iter=50)[1] > 3
