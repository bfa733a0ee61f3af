"""The Levenberg-Marquardt rules every problem follows, written once for both solvers.

Scalar, branch-free functions, retargeted to JAX and numba like the model's `equations`.
One problem: minimise the cost F = sum_k f_k^2 over p free parameters theta, f = model
minus observed, J = df/dtheta. From theta, the trial point is the damped Gauss-Newton
step, (J^T J + lambda D) delta = -J^T f with D = diag(J^T J) (Marquardt's scaling, see
`damped_diagonal`), projected onto the parameters' bounds; a parameter at a bound
that the cost would push it through is held there (`pinned`: its row and column leave
the system, so the others take the step that is best with it fixed). The trial is accepted when the
cost decreases (or stays equal to rounding, `COST_TIE`). lambda follows Nielsen's rule (Madsen, Nielsen & Tingleff 2004, "Methods
for non-linear least squares problems", eq. 3.16 with Marquardt's scaling): after an
accepted step lambda *= max(1/3, 1 - (2 rho - 1)^3), rho being the ratio of the actual
to the predicted decrease of F, and the growth factor nu resets to 2; after a rejected one
lambda *= nu (from at least `MIN_DAMPING`) and nu doubles. lambda starts at 0: the first
step is plain Gauss-Newton. The problem has converged when an undamped
(lambda = 0) trial step is no longer than `tol` in every parameter or can no longer
lower the cost beyond rounding, or when the trial is accepted and the undamped
Gauss-Newton step at the trial point is no longer than `tol` (it estimates the remaining
distance to the minimum; this saves the one extra evaluation that would only confirm a
step of ~tol); see `converged`. A damped step, however short, is no test of
convergence: its length is set by lambda. For one parameter and one
observation (`invert`) the step is the damped Newton step -f / (f' (1 + lambda)).
"""

from .._model._scalar_math import epsilon, maximum, where

__all__ = [
    "accepted",
    "gain_ratio",
    "next_damping",
    "converged",
    "damped_diagonal",
    "pinned",
    "cost_tie",
]

MIN_DAMPING = 1e-3
# Damping never scales a diagonal entry of J^T J below this fraction of the largest one, so
# a parameter with a vanishing derivative (e.g. at a bound where its effect switches off)
# still gets a finite, damped step instead of a singular system.
DIAGONAL_FLOOR = 1e-12
# Near the minimum, costs of nearby points differ by rounding only (a sum of many squared
# residuals carries several ulps, 1e-15 relative in float64): a trial within this fraction
# above the current cost is a tie, and accepted. Without it, whether the last, converging
# step is taken turns on rounding, and the damping grows until the steps fall below tol
# wherever they are in a flat valley.
COST_TIE = 1e-12
# COST_TIE is for float64; in another precision it scales with the machine epsilon
# (`cost_tie`: 5.4e-4 in float32, where a sum of squared residuals of 1e-4 on reflectances
# of 0.1 carries ~1e-4 relative rounding), so that the stopping rules stay reachable.
FLOAT64_EPSILON = 2.220446049250313e-16
# `newton_size` where the Gauss-Newton system at the trial point is singular.
INFINITY = float("inf")


def cost_tie(x):
    """`COST_TIE` in the precision of x: exactly COST_TIE in float64, scaled by the ratio of
    machine epsilons in another precision (float32: 5.4e-4)."""
    return COST_TIE * (epsilon(x) / FLOAT64_EPSILON)


def accepted(cost, cost_trial):
    """Whether the trial point is accepted: its cost is lower, or equal within rounding."""
    return (cost_trial < cost) | (cost_trial <= cost * (1.0 + cost_tie(cost)))


def gain_ratio(cost, cost_trial, predicted_decrease):
    """rho: actual over predicted decrease of the cost (-1 if none was predicted).

    `predicted_decrease` is -(2 delta^T J^T f + delta^T J^T J delta), the decrease of the
    linearised cost along the (projected) step delta.
    """
    positive = predicted_decrease > 0.0
    return where(
        positive, (cost - cost_trial) / where(positive, predicted_decrease, 1.0), -1.0 + 0.0 * cost
    )


def next_damping(accept, ratio, damping, growth, newton_decrease, cost_trial):
    """(lambda, nu) after an accepted or a rejected trial (Nielsen's rule).

    After an accepted trial whose Gauss-Newton step could lower the cost by no more than a
    tie (`newton_decrease` <= `COST_TIE` `cost_trial`), lambda is 0: that step is the last
    one (`converged`), taken undamped, so the problem ends at the minimum, not one step
    short of it.
    """
    centred = 2.0 * ratio - 1.0
    shrink = maximum(1.0 / 3.0, 1.0 - centred * centred * centred)
    last_step = accept & (newton_decrease <= cost_tie(cost_trial) * cost_trial)
    return (
        where(
            last_step,
            0.0 * damping,
            where(accept, damping * shrink, maximum(damping * growth, MIN_DAMPING)),
        ),
        where(accept, 2.0 + 0.0 * growth, 2.0 * growth),
    )


def converged(step_size, predicted, cost, newton_size, accept, damping, tol):
    """Whether the problem has converged, from its trial step and the Gauss-Newton step there.

    `step_size` is the largest |step| of the trial, computed with damping `damping`, and
    `predicted` the decrease of the linearised cost along it from the current point, of
    cost `cost`; `newton_size` the largest |step| of the undamped Gauss-Newton step at the
    trial point (the parameters held at their bounds, `pinned`, left out; infinite where
    its system is singular). Converged:

    - an undamped trial step (the Gauss-Newton step) no longer than `tol`, or one that
      could lower the cost by no more than `COST_TIE` of it: no step can then make a
      decrease that is not a tie, i.e. the gradient of the whole problem is zero to
      rounding in the metric of J^T J (g^T (J^T J)^-1 g <= COST_TIE F). The trial is taken
      if accepted. This ends ill-conditioned problems with a residual, whose Gauss-Newton
      step at the minimum is rounding amplified by the conditioning and can stay above
      `tol`. An accepted trial whose own Gauss-Newton step is such a tie sets lambda to 0
      (`next_damping`), so that this last step follows: stopping at the tie instead would
      leave the problem up to sqrt(COST_TIE F / curvature) from its minimum (2e-7 seen).
      A damped step, however short, says nothing: its length is set by lambda;
    - or an accepted trial whose Gauss-Newton step is no longer than `tol`;
    - or, where the Gauss-Newton system at the trial point is singular (`newton_size`
      infinite: the minimum is not a point, e.g. collinear endmembers), an accepted trial
      step no longer than `tol`. Such a problem is reported UNDETERMINED by its
      covariance, never as a determined minimum.

    A rejected trial leaves the problem at its previous point, which was tested when it
    was accepted.
    """
    no_gain = (0.0 <= predicted) & (predicted <= cost_tie(cost) * cost)
    last_step = (damping == 0.0) & ((step_size <= tol) | no_gain)
    singular_and_short = (newton_size == INFINITY) & (step_size <= tol)
    return last_step | (accept & ((newton_size <= tol) | singular_and_short))


def damped_diagonal(jtj_diagonal, largest_diagonal, damping):
    """A diagonal entry of the damped system J^T J + lambda max(diag(J^T J), floor)."""
    return jtj_diagonal + damping * maximum(jtj_diagonal, DIAGONAL_FLOOR * largest_diagonal)


def pinned(value, lower, upper, gradient):
    """Whether a parameter is held at its bound: it is there and the cost decreases outward.

    `gradient` is the parameter's entry of J^T f (half the cost's gradient).
    """
    return ((value <= lower) & (gradient > 0.0)) | ((value >= upper) & (gradient < 0.0))
