"""The one numba Levenberg-Marquardt loop: every numba operation's problem solved by the
same step, acceptance, damping and convergence code, the rules of `lm_rules`.

The numba twin of `elementwise_lm.ElementwiseLevenbergMarquardt`. Where the JAX solver
steps a whole batch of problems at once, this loop solves one problem (a pixel, or a
pixel's band) from its start to its end, inside an operation's kernel, which runs it
over its problems. An operation supplies its pieces, each a numba function, and four
tuples: ``data`` (what its normal equations read), ``steps`` (what its steps read and
write: bounds, scratch, the solution of the last system solved), and the states
``current`` and ``candidate`` (a point and its normal equations, e.g. (parameters,
J^T J, J^T f); the start on entry and the solution on return, and a trial's scratch of
the same layout). The loop calls

- ``evaluate(*point, *data) -> cost``: the cost (sum of squared weighted residuals) at
  the state `point` (current or candidate), its normal equations written into it;
- ``solve(damping, *point, *steps) -> solvable``: the damped subproblem at `point`
  (`lm_rules.damped_diagonal`; damping 0: the Gauss-Newton one) solved into `steps`
  (parameters at a bound held there, `lm_rules.pinned`, or a constrained programme);
  False where it is singular;
- ``trial(*current, *candidate, *steps) -> (size, decrease)``: the trial point from the
  current one and the damped solution, written into the candidate's (projected on the
  bounds where there are bounds); the largest |step| and the decrease of the linearised
  cost along the step taken;
- ``newton(*candidate, *steps) -> (size, decrease)``: the same two of the undamped
  solution at the trial point (`lm_rules.converged`);
- ``take(*candidate, *current, *steps)``: the trial point and its normal equations made
  the current ones;
- ``start(cost) -> (done, damping, growth)``: from the cost at the start, whether it is
  the solution already (no iteration) and the damping lambda and its growth nu to start
  with; by default `zero_cost_start`: done where the cost is 0, lambda 0 (the first step
  Gauss-Newton's), nu 2;
- ``measure(size, *current, *candidate) -> size``: the trial's largest |step| once
  evaluate has run at the candidate, which may move it (optical unmixing solves the
  fractions there); by default `trial_size`: trial's `size`;
- ``stop(accept, cost_trial, *candidate, *steps) -> stop``: an operation's own test of
  convergence beside `lm_rules.converged` (optical unmixing's `settled`, from what its
  newton left in `steps`); by default `never_stop`.

``newton_where_rejected`` (`lm_for`): whether newton's solve is made at a rejected trial
too (the rules read its results only where the trial is accepted; True keeps the work of
the kernels written so, False spares a rejected trial its solve).

Each piece takes the tuples' items as its arguments (`call_flat`), and all but evaluate
are inlined into the loop by LLVM (`call_inlined`): numba counts a reference to every array it takes out of a tuple, and
to every array argument of a function that calls others, and in the loop those counts are
not pruned. Measured against the loop written out in each kernel (same bits): pieces
that took the tuples and unpacked them (inlined by numba) ran fit's and unmix's
one-step kernels 4-5 % slower; flat pieces left as calls, 1-5 %; inlined, as here, see
`lm_for`.

An operation compiles the loop over its pieces with `lm_for` (`numba_cache.njit_variant`:
its globals bound, no function passed as an argument of the kernel, so the kernel around
it is cached on disk like the others).
"""

from __future__ import annotations

import math

import numba

from .._compat.numba_internals import call_flat, call_inlined
from .._model._backends import retarget_to_numba
from .._model.numba_cache import njit_variant, variant_slot
from . import lm_rules

__all__ = ["call_flat", "call_inlined", "levenberg_marquardt", "lm_for"]

_rules = retarget_to_numba(lm_rules)
accepted = _rules.accepted
next_damping = _rules.next_damping
gain_ratio = _rules.gain_ratio
converged = _rules.converged

# The operation's pieces, bound in each variant of `levenberg_marquardt` (`lm_for`).
evaluate = variant_slot("evaluate")
solve = variant_slot("solve")
trial = variant_slot("trial")
newton = variant_slot("newton")
take = variant_slot("take")
start = variant_slot("start")
measure = variant_slot("measure")
stop = variant_slot("stop")
# Whether newton's solve is made at a rejected trial (`lm_for`): a constant of each variant.
newton_where_rejected = True


@numba.njit(error_model="numpy", inline="always")
def zero_cost_start(cost):
    """The default of `levenberg_marquardt`'s ``start``: a start of cost 0 is the
    solution; lambda 0, nu 2 (`lm_rules`)."""
    return cost == 0.0, 0.0, 2.0


@numba.njit(error_model="numpy")
def trial_size(size, *states):
    """The default of `levenberg_marquardt`'s ``measure``: trial's size."""
    return size


@numba.njit(error_model="numpy")
def never_stop(accept, cost_trial, *states):
    """The default of `levenberg_marquardt`'s ``stop``: `lm_rules.converged` alone."""
    return False


@numba.njit(error_model="numpy")
def levenberg_marquardt(data, steps, current, candidate, settings):
    """Solve one problem from the point in `current` (the module doc says what the
    tuples hold and what the pieces do).

    Args:
        data, steps: the operation's tuples, passed on to its pieces.
        current: the state at the start on entry, at the solution on return.
        candidate: a state of the same layout, scratch.
        settings: (max_iter, tol): the iteration cap and the step tolerance of
            `lm_rules.converged`.
    Returns:
        (converged, iterations, cost): whether `lm_rules.converged` ended it (else
        max_iter did), the iterations taken, the cost at the solution.
    """
    max_iter, tol = settings
    cost = call_flat(evaluate, current, data, (), ())
    done, damping, growth = start(cost)
    iteration = 0
    while not done and iteration < max_iter:
        iteration += 1
        if not call_inlined(solve, (damping,), current, steps, ()):
            damping, growth = next_damping(
                False, 0.0, damping, growth, math.inf, 0.0
            )  # singular: damp more
            continue
        step_size, predicted = call_inlined(trial, current, candidate, steps, ())
        cost_trial = call_flat(evaluate, candidate, data, (), ())
        step_size = call_inlined(measure, (step_size,), current, candidate, ())
        accept = accepted(cost, cost_trial)
        newton_size, newton_decrease = math.inf, math.inf
        if (newton_where_rejected or accept) and call_inlined(solve, (0.0,), candidate, steps, ()):
            newton_size, newton_decrease = call_inlined(newton, candidate, steps, (), ())
        done = converged(step_size, predicted, cost, newton_size, accept, damping, tol)
        if not done:
            done = call_inlined(stop, (accept, cost_trial), candidate, steps, ())
        damping, growth = next_damping(
            accept,
            gain_ratio(cost, cost_trial, predicted),
            damping,
            growth,
            newton_decrease,
            cost_trial,
        )
        if accept:
            call_inlined(take, candidate, current, steps, ())
            cost = cost_trial
    return done, iteration, cost


def lm_for(
    variant: str,
    *,
    evaluate,
    solve,
    trial,
    newton,
    take,
    start=zero_cost_start,
    measure=trial_size,
    stop=never_stop,
    newton_where_rejected: bool = True,
):
    """`levenberg_marquardt` compiled over one operation's pieces (numba functions), a
    helper of the operation's kernel, inlined by numba into the kernel's function that
    calls it (``inline="always"``). `variant` names it apart from every other
    operation's and configuration's loop (`numba_cache.rebound`);
    `newton_where_rejected` (a constant of the variant) as the module doc says.
    """
    return njit_variant(
        levenberg_marquardt,
        variant,
        inline="always",
        evaluate=evaluate,
        solve=solve,
        trial=trial,
        newton=newton,
        take=take,
        start=start,
        measure=measure,
        stop=stop,
        newton_where_rejected=bool(newton_where_rejected),
    )
