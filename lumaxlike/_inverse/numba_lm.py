"""The one numba Levenberg-Marquardt loop: every numba operation's problem solved by the
same step, acceptance, damping and convergence code, the rules of `lm_rules`.

The numba twin of `elementwise_lm.ElementwiseLevenbergMarquardt`. Where the JAX solver
steps a whole batch of problems at once, this loop solves one problem (a pixel, or a
pixel's band) from its start to its end, inside an operation's kernel, which runs it
over its problems. An operation supplies its pieces, each a numba function:

- ``evaluate(problem, point, equations) -> cost``: the cost (sum of squared weighted
  residuals) at `point`, and its normal equations written into `equations` (J^T J and
  J^T f, or their blocks);
- ``trial_step(problem, current, damping, trial) -> (solvable, size, decrease)``: the
  damped step from ``current = (point, equations)`` (`lm_rules.damped_diagonal`, the
  parameters at a bound held there, `lm_rules.pinned`), its trial point written into
  `trial` (projected on the bounds, or the solution of a constrained subproblem); the
  largest |step| and the decrease of the linearised cost along the step actually taken;
  solvable False where the damped system is singular;
- ``newton_step(problem, candidate) -> (size, decrease)``: the undamped (Gauss-Newton)
  step from ``candidate = (trial, equations there)``, its largest |step| and linearised
  decrease, both infinite where its system is singular (`lm_rules.converged`);
- ``take(problem, candidate, current)``: the trial point and its normal equations made
  the current ones.

`problem` is whatever the pieces need (the problem's data, bounds and scratch arrays);
`point` and `equations` are the operation's own. An operation compiles the loop over its
pieces with `lm_for` (`numba_cache.njit_variant`: its globals bound, no function passed
as an argument, so the kernel around it is cached on disk like the others).
"""

from __future__ import annotations

import math

import numba

from .._model._backends import retarget_to_numba
from .._model.numba_cache import njit_variant, variant_slot
from . import lm_rules

__all__ = ["levenberg_marquardt", "lm_for"]

_rules = retarget_to_numba(lm_rules)
accepted = _rules.accepted
next_damping = _rules.next_damping
gain_ratio = _rules.gain_ratio
converged = _rules.converged

# The operation's pieces, bound in each variant of `levenberg_marquardt` (`lm_for`).
evaluate = variant_slot("evaluate")
trial_step = variant_slot("trial_step")
newton_step = variant_slot("newton_step")
take = variant_slot("take")


@numba.njit(error_model="numpy")
def levenberg_marquardt(problem, current, candidate, settings):
    """Solve one problem from the point in `current` (the module doc says what the
    pieces do).

    Args:
        problem: the operation's data and scratch, passed on to its pieces.
        current: (point, equations): the start on entry, the solution on return.
        candidate: (trial point, equations there): scratch of the same layout.
        settings: (max_iter, tol): the iteration cap and the step tolerance of
            `lm_rules.converged`.
    Returns:
        (converged, iterations, cost): whether `lm_rules.converged` ended it (else
        max_iter did), the iterations taken, the cost at the solution.
    """
    max_iter, tol = settings
    cost = evaluate(problem, current[0], current[1])
    damping = 0.0
    growth = 2.0
    done = cost == 0.0
    iteration = 0
    while not done and iteration < max_iter:
        iteration += 1
        solvable, step_size, predicted = trial_step(problem, current, damping, candidate[0])
        if not solvable:
            damping, growth = next_damping(
                False, 0.0, damping, growth, math.inf, 0.0
            )  # singular: damp more
            continue
        cost_trial = evaluate(problem, candidate[0], candidate[1])
        newton_size, newton_decrease = newton_step(problem, candidate)
        accept = accepted(cost, cost_trial)
        done = converged(step_size, predicted, cost, newton_size, accept, damping, tol)
        damping, growth = next_damping(
            accept,
            gain_ratio(cost, cost_trial, predicted),
            damping,
            growth,
            newton_decrease,
            cost_trial,
        )
        if accept:
            take(problem, candidate, current)
            cost = cost_trial
    return done, iteration, cost


def lm_for(variant: str, *, evaluate, trial_step, newton_step, take):
    """`levenberg_marquardt` compiled over one operation's pieces (numba functions), a
    helper of the operation's kernel, inlined by numba into the kernel's function that
    calls it (``inline="always"``, as the pieces are best written too; as a function of
    its own it compiled slower still). `variant` names it apart from every other
    operation's and configuration's loop (`numba_cache.rebound`).

    Measured against kernels that spelled the loop out (same bits): on a fresh cache the
    first call of the fit, joint and one-step kernels took 1.3-2.3 s (9-20 %) longer,
    and a warm call 1-5 % longer (likely the tuple of arrays built per problem).
    """
    return njit_variant(
        levenberg_marquardt,
        variant,
        inline="always",
        evaluate=evaluate,
        trial_step=trial_step,
        newton_step=newton_step,
        take=take,
    )
