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


@numba.njit
def evaluate(problem, point, equations):
    residual = point[0] - TARGET
    jtj, jtf = equations
    jtj[0] = 1.0
    jtf[0] = residual
    return residual * residual


@numba.njit
def trial_step(problem, current, damping, trial):
    calls, dampings = problem  # (singular calls left, calls made), each call's damping
    if calls[1] < dampings.shape[0]:
        dampings[calls[1]] = damping
    calls[1] += 1
    if calls[0] > 0:  # the first calls find a singular system
        calls[0] -= 1
        return False, 0.0, 0.0
    point, (jtj, jtf) = current
    step = -jtf[0] / (jtj[0] * (1.0 + damping))  # Marquardt's scaling
    trial[0] = point[0] + step
    return True, abs(step), -(2.0 * step * jtf[0] + step * jtj[0] * step)


@numba.njit
def newton_step(problem, candidate):
    trial, (jtj, jtf) = candidate
    step = -jtf[0] / jtj[0]
    return abs(step), -(2.0 * step * jtf[0] + step * jtj[0] * step)


@numba.njit
def take(problem, candidate, current):
    current[0][0] = candidate[0][0]
    current[1][0][0] = candidate[1][0][0]
    current[1][1][0] = candidate[1][1][0]


SOLVE = lm_for(
    "test_numba_lm", evaluate=evaluate, trial_step=trial_step, newton_step=newton_step, take=take
)


def solve(singular_calls, max_iter):
    """(converged, iterations, cost, x, the damping of each trial_step call) from x = 0."""
    calls = np.array([singular_calls, 0])
    dampings = np.full(3, np.nan)
    point = np.zeros(1)
    current = (point, (np.empty(1), np.empty(1)))
    candidate = (np.empty(1), (np.empty(1), np.empty(1)))
    done, iterations, cost = SOLVE((calls, dampings), current, candidate, (max_iter, 1e-12))
    return done, iterations, cost, point[0], dampings


def test_undamped_first_step_solves_a_linear_problem():
    """lambda starts at 0: the first trial is the exact Gauss-Newton step, accepted, and
    its Newton step at the trial (0) ends the problem there: one iteration, cost 0."""
    done, iterations, cost, x, dampings = solve(0, max_iter=10)
    assert done and iterations == 1 and cost == 0.0 and x == TARGET
    assert dampings[0] == 0.0 and np.isnan(dampings[1])  # one trial step only


def test_singular_systems_damp_more_and_count_as_iterations():
    """Two singular systems: lambda from 0 to MIN_DAMPING, then times nu (2, doubled to 4
    by the first rejection); each counts as an iteration, the point stays. Then the
    damped steps approach x = 3 and converge."""
    done, iterations, cost, x, dampings = solve(2, max_iter=50)
    np.testing.assert_array_equal(dampings, [0.0, MIN_DAMPING, 4.0 * MIN_DAMPING])
    assert done and iterations > 3 and abs(x - TARGET) < 1e-12 and cost < 1e-24
    stopped = solve(2, max_iter=2)
    assert stopped[:4] == (False, 2, TARGET**2, 0.0)  # the cap: not converged, not moved
