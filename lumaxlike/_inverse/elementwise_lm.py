"""The one JAX Levenberg-Marquardt: `ElementwiseLevenbergMarquardt`, an optimistix
least-squares solver for many independent small problems at once, every JAX operation's
solver (`invert` and `normalize` through the one-parameter case, `fit`, its joint fits
through `normal_equations` in arrow blocks, `unmix` through `subproblem`,
`remove_thermal` through `rules`).

Why this formulation (the design alternatives and their measured rates are in
`benchmarks/README.md` and the guide): `jax.vmap` over one `optx.least_squares` per
problem runs every lane until the slowest converges with dense linear algebra per lane;
the whole chunk as one least-squares problem has one damping for millions of
independent problems (some diverge). So `y` is a whole chunk of independent problems,
each with p free parameters (batch + (p,)) and its own observations, with per-problem
damping, acceptance and convergence; `optx.least_squares` runs the one bounded, rolled
loop (a `lax.while_loop` of at most `max_steps` steps, ended when every problem has
converged).

An operation supplies its residual function and, optionally, the pieces of its normal
equations, in one of three forms, or its own rules for the whole trial (the solver's fields):

- `jacobian`: (y, args) -> (residuals, the p columns of the Jacobian): J^T J and J^T f are
  formed here (`fit`, from the model's derivative program evaluated part by part);
- `normal_equations`: (y, args) -> (residuals, J^T J, J^T f), formed by the operation;
- `one_parameter`: the one-parameter, one-observation case (`invert`): y has shape
  `batch`, and the operation gives (y, args) -> (residual, slope) with its p = 1 rules
  (`albedo.rules.propose` and `update`, the same scalar code numba's kernel runs), so a
  step is one division, without p x p algebra;
- `rules`: the operation's own scalar rules for the whole trial (start, iterate), written
  once with its numba kernel on `lm_rules` (`remove_thermal`'s fits: a 3 x 3 Cramer solve
  with held parameters, a Schur step over bands), applied element-wise; this solver keeps
  the loop, the freezing of finished problems and their iteration counts;

and without any, the columns come from one linearisation of the residual function and p
JVPs. The damped subproblem, from J^T J, J^T f and the damping to the trial point, is
another hook (`subproblem`): by default (`box_subproblem`) the p x p damped system with
the parameters at a bound held there, solved by an unrolled Cholesky over lanes of
problems, its step projected onto the bounds; an operation with other constraints or
structure gives its own (`unmix`: the damped programme on the simplex, solved by an
active set whose working set is carried from step to step; `unmix` with free grain
sizes: the step of the nonlinear parameters with the fractions solved exactly, which
`normal_equations` returns as a fourth output, the point it is at: variable
projection; the joint fits: J^T J in arrow blocks, a pytree that their `subproblem`, a
Schur-complement step, and their `linear_decrease` read). The step, acceptance,
damping and convergence rules are `lm_rules`, the same scalar code the numba solvers
run, applied element-wise (their cost tie scales with the dtype, so float32 reaches
them); converged problems are frozen. Sums over observations
and parameters are written as additions in index order (`sum_last`), not XLA
reductions, whose rounding depends on the batch's shape: a problem's steps are the same
in any chunk or batch.
"""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import equinox as eqx
import jax
import jax.numpy as jnp
import optimistix as optx

from .._model._backends import retarget_to_jax
from . import lm_rules
from .lm_algebra import (
    Subproblem,
    box_subproblem,
    dense_decrease,
    entries,
    normal_equations_from_columns,
    stacked,
)
from .ordered_sums import sum_last

__all__ = [
    "ElementwiseLevenbergMarquardt",
    "Subproblem",
    "box_subproblem",
    "dense_decrease",
    "entries",
    "ordered_cost",
    "stacked",
]

_lm = retarget_to_jax(lm_rules)


def ordered_cost(residual):
    """The cost of every problem, sum_k f_k^2 over the last axis of `residual`, as
    additions in index order (`sum_last`): a problem's cost has the same bits in a batch
    of any shape. The default `cost_function`."""
    return sum_last(residual * residual)


class _OneParameterState(NamedTuple):
    # the one-parameter, one-observation case; y has shape batch
    residual: Any  # batch: f
    slope: Any  # batch: df/dy
    damping: Any
    growth: Any
    converged: Any
    iterations: Any


class _LMState(NamedTuple):
    # a named tuple, not an equinox module: its tree survives pickling, so the programs
    # that return it can be stored compiled (`jax_executables`)
    residual: Any  # batch + (observations,) (or a pytree), or None (`keep_residuals` False)
    cost: Any  # batch: the sum of the squared residuals (`cost_function`)
    # J^T J and J^T f: their `entries` on the default path (`jacobian`, or none), else
    # what `normal_equations` gives (arrays, or the operation's structure: `linear_decrease`)
    jtj: Any
    jtf: Any
    damping: Any  # batch: lambda
    growth: Any  # batch: nu, lambda's growth factor on rejection
    converged: Any
    iterations: Any
    # the subproblem's per-problem state at y (`Subproblem.carried`; None by default)
    carried: Any = None
    # batch bool: not yet evaluated at y (`options["unevaluated"]`), or None: all were
    fresh: Any = None


class _RulesState(NamedTuple):
    # the operation's own rules (`rules`)
    problem: Any  # the operation's state of every problem: a pytree, batch leading
    converged: Any  # batch: finished (converged, or stopped by the rules)
    iterations: Any


def _stopped(state, options):
    """The problems that are not stepped (batch bool): converged, or, where
    `options["max_iterations"]` (an int, possibly traced, unlike optimistix's
    `max_steps`) is given, at that many iterations."""
    limit = (options or {}).get("max_iterations")
    if limit is None:
        return state.converged
    return state.converged | (state.iterations >= limit)


def _keep_where(keep, old, new):
    """`old` where `keep` (batch), else `new`, leaf by leaf of a pytree whose leaves
    have the batch axes first."""

    def select(a, b):
        return jnp.where(keep.reshape(keep.shape + (1,) * (jnp.ndim(a) - keep.ndim)), a, b)

    return jax.tree_util.tree_map(select, old, new)


def _all_zero(residual, batch_ndim):
    """Whether every residual of a problem is 0 (batch bool), over every leaf of the
    pytree `residual`, whose leaves have the `batch_ndim` batch axes first."""
    zero = [
        jnp.all(leaf == 0.0, axis=tuple(range(batch_ndim, jnp.ndim(leaf))))
        for leaf in jax.tree_util.tree_leaves(residual)
    ]
    return functools.reduce(jnp.logical_and, zero)


def _evaluated_at(fn, y, args, jacobian, normal_equations):
    """(the point, (f, J^T J, J^T f)) of every problem: `normal_equations`' fourth output
    where it gives one (the point with the entries it solves exactly), else y."""
    if normal_equations is not None:
        evaluated = normal_equations(y, args)
        if len(evaluated) == 4:
            return evaluated[3], tuple(evaluated[:3])
        return y, evaluated
    return y, normal_equations_from_columns(fn, y, args, jacobian)


class ElementwiseLevenbergMarquardt(optx.AbstractLeastSquaresSolver):
    """Levenberg-Marquardt for many independent small problems at once.

    `y` has shape ``batch + (p,)``: the p free parameters of every problem; the residual
    function maps it to ``batch + (observations,)``, where the residuals of a problem
    depend on that problem's parameters only. Every problem keeps its own damping,
    acceptance and convergence (`lm_rules`); the solve terminates when all problems have
    converged. Problems marked in `options["frozen"]` (a boolean array of shape `batch`)
    are never stepped; `options["state"]`, a final state of an earlier solve at `y`, continues
    that solve (its problems' steps are the same as in one longer solve);
    `options["carried"]` is the `subproblem`'s per-problem state at `y` to start from
    (`Subproblem.carried`; default None); `options["evaluated"]`, (residuals, J^T J,
    J^T f) at `y`, spares init their evaluation; `options["unevaluated"]` True (with a
    `jacobian`) defers it: every problem's first step evaluates it at `y` and takes
    no step (its iterations do not count it), so that the program that makes the
    start holds no copy of the residual function (`fit`'s setup); `options["max_iterations"]`, an int
    that may be traced (optimistix's `max_steps` is a Python int: a program for each
    value), ends the solve once every problem has converged or taken that many
    iterations (its state's count; where all start at 0, after that many steps, as
    `max_steps` would); a problem that has taken that many is not stepped further, so
    problems resumed at different counts (`fit`'s refilled batches) each stop at their
    own. The final state holds each problem's
    residuals (unless `keep_residuals` is False), their cost (the sum of their squares),
    J^T J, J^T f and the carried state. Without `normal_equations`, the state keeps J^T J
    and J^T f as their `entries` (nested tuples of arrays of shape `batch`; `stacked` makes
    arrays of them), and a `subproblem`, `linear_decrease` or `settled` hook given by the
    caller receives them as arrays.

    Attributes:
        tol: convergence tolerance on the step of every parameter.
        lower: lower bounds each parameter is projected onto, shape (p,) or a scalar.
        upper: upper bounds, the same way.
        jacobian: None (the Jacobian by `jax.linearize` of the residual function), or a
            function (y, args) -> (residuals, columns) that gives the residuals and the
            p columns of the Jacobian (each batch + (observations,)) together, such as
            `fit`'s, which evaluates the model's derivative program part by part.
        normal_equations: None, or a function (y, args) -> (residuals, J^T J, J^T f)
            (batch + (observations,), batch + (p, p), batch + (p,)): the operation forms
            its normal equations itself (`jacobian` is then unused). It may return a
            fourth output, batch + (p,): the point they are at, y with the entries the
            operation solves exactly at every point (variable projection: `unmix`'s
            fractions at given grain sizes); a trial is then taken at that point. The
            solve must then start at such a point, with its normal equations given as
            `options["evaluated"]` (init cannot move y). J^T J and J^T f may come in
            the operation's own structure, pytrees with the batch axes first (the joint
            fits' arrow blocks), read by its `subproblem` and `linear_decrease` alone;
            the residuals may be a pytree, with `cost_function` reading it.
        one_parameter: None, or the one-parameter, one-observation case: a tuple
            (evaluate, propose, update) where `evaluate(y, args)` gives (residual, slope),
            each of shape `batch` like y (no parameter axis), and `propose`, `update` are
            the p = 1 rules (`albedo.rules` over jax.numpy, the scalar code numba's
            `invert` runs). A step is then one division. Its state holds the residual and
            the slope instead of J^T J.
        rules: None, or the operation's own scalar rules for the whole trial, element-wise
            (written once with its numba kernel, on `lm_rules`): a pair (start, iterate),
            `start(y, args)` -> (state, finished), `iterate(y, state, args)` -> (y, state,
            finished), where state is the operation's pytree of arrays with the batch
            leading and finished (batch) marks problems done (converged or stopped by
            the rules; how, the state says). Finished problems are frozen as converged
            ones; `lower`, `upper` and `tol` are the rules' own business (unused). The
            final state holds the operation's state as `problem`.
        subproblem: the damped subproblem (not with `one_parameter` or `rules`): a
            function (y, args, J^T J, J^T f, damping, *, lower, upper, carried, active,
            newton) -> `Subproblem` (damping: batch; lower, upper: y's shape; carried: the
            state's `carried`; active: batch bool, the problems still stepping: the
            others' solution is discarded, a hook may skip them; newton: a Python bool).
            Called twice per step: with the damping at y (newton False), and undamped at
            the trial point with the carried state the first call returned (newton True:
            the Gauss-Newton step the convergence test reads). Default `box_subproblem`
            (the damped Cholesky step with the parameters at a bound held, projected
            onto the bounds).
        settled: None, or a function (trial, Newton point, J^T J, cost, args) -> bool
            (batch) at the trial: a convergence test of the operation's besides
            `lm_rules.converged`, applied to accepted trials whose Newton step is
            solvable (`optical.settled`: within 0.1 standard errors of the minimum).
        newton_cut: whether a Newton step that the subproblem's constraints cut into a
            rise of the linearised cost (below -`lm_rules.cost_tie`) is not taken as the
            last step (`lm_rules.next_damping`), as unmix's numba kernel with free grain
            sizes does; False: the decrease as computed.
        start_damping: lambda at the start (lm_rules: 0, the first step plain
            Gauss-Newton).
        keep_residuals: whether the state holds every problem's residuals (else only
            their cost): False saves a chunk's largest array from being stored at every
            step where the operation needs the cost alone (`unmix`).
        cost_function: residuals (batch + (observations,)) -> the cost of every problem
            (batch); default `ordered_cost` (in index order, the same bits in any batch).
        linear_decrease: (step (batch + (p,)), J^T J, J^T f) -> the decrease of the
            linearised cost along the step (batch), -(2 step.J^T f + step.J^T J step),
            for the gain ratio and the Newton step's tests; default `dense_decrease`.
    """

    tol: float
    lower: Any
    upper: Any
    jacobian: Any = eqx.field(static=True, default=None)
    normal_equations: Any = eqx.field(static=True, default=None)
    one_parameter: Any = eqx.field(static=True, default=None)
    rules: Any = eqx.field(static=True, default=None)
    subproblem: Any = eqx.field(static=True, default=box_subproblem)
    settled: Any = eqx.field(static=True, default=None)
    newton_cut: bool = eqx.field(static=True, default=False)
    start_damping: float = 0.0
    keep_residuals: bool = eqx.field(static=True, default=True)
    cost_function: Any = eqx.field(static=True, default=ordered_cost)
    linear_decrease: Any = eqx.field(static=True, default=dense_decrease)
    # optimistix's abstract attributes, unused: convergence is per problem, on the step
    # (`tol`). Keyword-only: type checkers order a redeclared base field at the base's place.
    rtol: float = eqx.field(default=0.0, kw_only=True)
    atol: float = eqx.field(default=0.0, kw_only=True)
    norm: Any = eqx.field(default=optx.max_norm, kw_only=True)

    def init(self, fn, y, args, options, f_struct, aux_struct, tags):
        resume = (options or {}).get("state")
        if resume is not None:  # a solve continued (`compaction`): its state at `y`
            return resume
        if self.one_parameter is not None:
            return self._init_one_parameter(y, args, options)
        if self.rules is not None:
            return self._init_rules(y, args, options)
        if (options or {}).get("unevaluated"):
            return self._init_unevaluated(y, options, f_struct)
        evaluated = (options or {}).get("evaluated")
        if evaluated is None:
            point, evaluated = _evaluated_at(fn, y, args, self.jacobian, self.normal_equations)
            if point is not y:
                raise ValueError(
                    "normal_equations moves the point: start at a point it has solved, with "
                    'options["evaluated"] its normal equations there'
                )
        residual, jtj, jtf = evaluated
        batch = y.shape[:-1]
        frozen = (options or {}).get("frozen", jnp.zeros(batch, bool))
        return _LMState(
            residual=residual if self.keep_residuals else None,
            cost=self.cost_function(residual),
            jtj=jtj,
            jtf=jtf,
            damping=jnp.full(batch, self.start_damping, y.dtype),
            growth=jnp.full(batch, 2.0, y.dtype),
            converged=frozen | _all_zero(residual, len(batch)),
            iterations=jnp.zeros(batch, jnp.int32),
            carried=(options or {}).get("carried"),
        )

    def step(self, fn, y, args, options, state, tags):
        done = _stopped(state, options)
        if self.one_parameter is not None:
            return self._step_one_parameter(y, args, state, done)
        if self.rules is not None:
            return self._step_rules(y, args, state, done)
        lower, upper = (
            jnp.broadcast_to(jnp.asarray(b, y.dtype), y.shape) for b in (self.lower, self.upper)
        )
        bounds = dict(lower=lower, upper=upper)
        moving = ~done
        damped = self.subproblem(
            y,
            args,
            *self._hooked(self.subproblem, box_subproblem, state.jtj, state.jtf),
            state.damping,
            **bounds,
            carried=state.carried,
            active=moving,
            newton=False,
        )
        solvable = damped.solvable
        starting = jnp.zeros_like(done) if state.fresh is None else state.fresh & moving
        point = jnp.where(starting[..., None], y, damped.point)  # fresh: evaluated at y
        predicted = self.linear_decrease(
            point - y, *self._hooked(self.linear_decrease, dense_decrease, state.jtj, state.jtf)
        )
        trial, evaluated = _evaluated_at(fn, point, args, self.jacobian, self.normal_equations)
        residual_trial, jtj_trial, jtf_trial = evaluated
        cost_trial = self.cost_function(residual_trial)
        newton = self.subproblem(
            trial,
            args,
            *self._hooked(self.subproblem, box_subproblem, jtj_trial, jtf_trial),
            jnp.zeros_like(state.damping),
            **bounds,
            carried=damped.carried,
            active=moving & solvable,
            newton=True,
        )
        newton_size, newton_decrease = self._newton_tests(newton, jtj_trial, jtf_trial, cost_trial)
        step_size = jnp.max(jnp.abs(trial - y), axis=-1)
        cost = state.cost
        accept = _lm.accepted(cost, cost_trial) & solvable
        converged = _lm.converged(
            step_size, predicted, cost, newton_size, accept, state.damping, self.tol
        )
        if self.settled is not None:
            jtj_hooked = self._hooked(self.settled, None, jtj_trial, jtf_trial)[0]
            settled = self.settled(trial, newton.point, jtj_hooked, cost_trial, args)
            converged = converged | (accept & newton.solvable & settled)
        converged = converged & solvable & moving
        damping, growth = _lm.next_damping(
            accept,
            _lm.gain_ratio(cost, cost_trial, predicted),
            state.damping,
            state.growth,
            newton_decrease,
            cost_trial,
        )
        # a fresh problem takes its evaluation at y, as `init` would have, and no step
        accept = accept | starting
        converged = jnp.where(starting, _all_zero(residual_trial, done.ndim), converged)
        keep = done | ~accept  # problems whose point does not move
        done = done | starting  # damping, growth and iterations unchanged
        new_state = _LMState(
            residual=(
                _keep_where(keep, state.residual, residual_trial) if self.keep_residuals else None
            ),
            cost=jnp.where(keep, cost, cost_trial),
            jtj=_keep_where(keep, state.jtj, jtj_trial),
            jtf=_keep_where(keep, state.jtf, jtf_trial),
            damping=jnp.where(done, state.damping, damping),
            growth=jnp.where(done, state.growth, growth),
            converged=state.converged | converged,
            iterations=state.iterations + jnp.where(done, 0, 1).astype(jnp.int32),
            carried=_keep_where(keep | starting, state.carried, damped.carried),
            fresh=None if state.fresh is None else state.fresh & ~moving,
        )
        return jnp.where(keep[..., None], y, trial), new_state, None

    def _hooked(self, hook, default, jtj, jtf):
        """J^T J and J^T f as `hook` takes them: as the state keeps them for the built-in
        hook (`default`) and with an operation's own `normal_equations` (its form); as
        arrays (`stacked`) for a hook given with the default path's `entries`."""
        if self.normal_equations is not None or hook is default:
            return jtj, jtf
        return stacked(jtj, jtf)

    def _init_unevaluated(self, y, options, f_struct):
        """The state of problems not yet evaluated at y (`options["unevaluated"]`): each
        one's first step evaluates it there (no step: `init`'s evaluation, in the
        step's program), so that the program that makes the start holds no copy of the
        residual function and its Jacobian (`fit`'s setup: half its compile)."""
        if self.jacobian is None or self.normal_equations is not None:
            raise ValueError(
                'options["unevaluated"] needs a `jacobian` (and no `normal_equations`)'
            )
        batch, p = y.shape[:-1], y.shape[-1]
        frozen = options.get("frozen", jnp.zeros(batch, bool))
        return _LMState(
            residual=jnp.zeros(f_struct.shape, f_struct.dtype) if self.keep_residuals else None,
            cost=jnp.zeros(batch, y.dtype),
            jtj=tuple(tuple(jnp.zeros(batch, y.dtype) for _ in range(p)) for _ in range(p)),
            jtf=tuple(jnp.zeros(batch, y.dtype) for _ in range(p)),
            damping=jnp.full(batch, self.start_damping, y.dtype),
            growth=jnp.full(batch, 2.0, y.dtype),
            converged=frozen,
            iterations=jnp.zeros(batch, jnp.int32),
            carried=options.get("carried"),
            fresh=~frozen,
        )

    def _newton_tests(self, newton, jtj, jtf, cost):
        """The undamped subproblem's solution at the trial point, whose normal equations
        are (J^T J, J^T f) and cost `cost`: its step's largest |entry| and the decrease of
        the linearised cost along it (`lm_rules.converged`, `next_damping`), both infinite
        where the subproblem is not solvable (the decrease also where `newton_cut` and
        the constraints cut the step into a rise)."""
        size = jnp.where(newton.solvable, jnp.max(jnp.abs(newton.step), axis=-1), jnp.inf)
        decrease = self.linear_decrease(
            newton.step, *self._hooked(self.linear_decrease, dense_decrease, jtj, jtf)
        )
        usable = newton.solvable
        if self.newton_cut:
            usable = usable & ~(decrease < -_lm.cost_tie(cost) * cost)
        return size, jnp.where(usable, decrease, jnp.inf)

    def _init_one_parameter(self, y, args, options):
        evaluate, _, _ = self.one_parameter
        residual, slope = evaluate(y, args)
        frozen = (options or {}).get("frozen", jnp.zeros(y.shape, bool))
        return _OneParameterState(
            residual=residual,
            slope=slope,
            damping=jnp.zeros_like(y),
            growth=jnp.full_like(y, 2.0),
            converged=frozen | (residual == 0.0),
            iterations=jnp.zeros(y.shape, jnp.int32),
        )

    def _step_one_parameter(self, y, args, state, done):
        """One step of every problem of the one-parameter case: the p = 1 rules
        (`propose`, `update`) applied element-wise; the problems `done` (batch bool:
        converged, or at their iteration limit) stay as they are."""
        evaluate, propose, update = self.one_parameter
        lower, upper = (jnp.asarray(b, y.dtype) for b in (self.lower, self.upper))
        trial = propose(y, state.residual, state.slope, state.damping, lower, upper)
        residual_trial, slope_trial = evaluate(trial, args)
        stepped = update(
            y,
            state.residual,
            state.slope,
            state.damping,
            state.growth,
            trial,
            residual_trial,
            slope_trial,
            self.tol,
        )
        kept = (y, state.residual, state.slope, state.damping, state.growth)
        y, residual, slope, damping, growth = (
            jnp.where(done, old, new) for old, new in zip(kept, stepped[:5])
        )
        new_state = _OneParameterState(
            residual=residual,
            slope=slope,
            damping=damping,
            growth=growth,
            converged=state.converged | (stepped[5] & ~done),
            iterations=state.iterations + jnp.where(done, 0, 1).astype(jnp.int32),
        )
        return y, new_state, None

    def _init_rules(self, y, args, options):
        start, _ = self.rules
        problem, finished = start(y, args)
        frozen = (options or {}).get("frozen", jnp.zeros(finished.shape, bool))
        return _RulesState(
            problem=problem,
            converged=frozen | finished,
            iterations=jnp.zeros(finished.shape, jnp.int32),
        )

    def _step_rules(self, y, args, state, done):
        """One trial of every problem by the operation's `rules`; the problems `done`
        (batch bool: finished, or at their iteration limit) stay as they are."""
        _, iterate = self.rules
        y_new, problem, finished = iterate(y, state.problem, args)
        y, problem = _keep_where(done, (y, state.problem), (y_new, problem))
        new_state = _RulesState(
            problem=problem,
            converged=state.converged | (finished & ~done),
            iterations=state.iterations + jnp.where(done, 0, 1).astype(jnp.int32),
        )
        return y, new_state, None

    def terminate(self, fn, y, args, options, state, tags):
        return jnp.all(_stopped(state, options)), optx.RESULTS.successful

    def postprocess(self, fn, y, aux, args, options, state, tags, result):
        return y, aux, {}
