"""The algebra of `ElementwiseLevenbergMarquardt`'s default path, over many small problems
at once: the normal equations from the Jacobian's columns, kept as their `entries`
(arrays of problems, no trailing (p, p) axes); the default damped subproblem
(`box_subproblem`: an unrolled Cholesky over lanes of problems with the parameters at a
bound held) and its `Subproblem` result; the decrease of the linearised cost
(`dense_decrease`). Sums in index order (`ordered_sums`)."""

from __future__ import annotations

import functools
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp

from .._model._backends import retarget_to_jax
from .._model.jaxpr_split import elementwise
from . import lm_rules
from .ordered_sums import dot_slices, last_slices, sum_in_order

__all__ = [
    "Subproblem",
    "box_subproblem",
    "dense_decrease",
    "entries",
    "normal_equations_from_columns",
    "solve_damped",
    "stacked",
]

_lm = retarget_to_jax(lm_rules)


def entries(jtj, jtf):
    """J^T J and J^T f as their entries: nested tuples of arrays of shape `batch` (J^T J's
    p x p, J^T f's p), the form the solver's default path keeps in its state (`_LMState`),
    from that form or from arrays (batch + (p, p), batch + (p,)). Each entry is a whole
    array of problems: on an accelerator, trailing (p, p) or (p,) axes would fill a few
    lanes of each (8, 128) tile (`unmix`'s solver ran 21x faster on a TPU without them)."""
    if isinstance(jtf, tuple):
        return jtj, jtf
    p = jtf.shape[-1]
    rows = tuple(tuple(jtj[..., a, b] for b in range(p)) for a in range(p))
    return rows, tuple(jtf[..., a] for a in range(p))


def stacked(jtj, jtf):
    """`entries`' inverse: J^T J (batch + (p, p)) and J^T f (batch + (p,)) as arrays."""
    if not isinstance(jtf, tuple):
        return jtj, jtf
    return jnp.stack([jnp.stack(row, axis=-1) for row in jtj], axis=-2), jnp.stack(jtf, axis=-1)


def dense_decrease(step, jtj, jtf):
    """Decrease of the linearised cost along `step` (batch + (p,)) of every problem,
    -(2 step.J^T f + step.J^T J step), from J^T J and J^T f (arrays or `entries`): the
    default `linear_decrease` hook. Sums in index order."""
    jtj, jtf = entries(jtj, jtf)
    return _decrease_entries(tuple(last_slices(step)), jtj, jtf)


@elementwise  # traced once, bound to the lanes in each program that holds it
def _decrease_entries(steps, jtj, jtf):
    """`dense_decrease` of one problem, its step's p entries as scalars."""
    p = len(jtf)
    along = sum_in_order(steps[a] * jtf[a] for a in range(p))
    curvature = sum_in_order(
        steps[a] * sum_in_order(jtj[a][b] * steps[b] for b in range(p)) for a in range(p)
    )
    return -(2.0 * along + curvature)


class Subproblem(NamedTuple):
    """A damped subproblem's solution for every problem (what a `subproblem` hook returns).

    Attributes:
        point: batch + (p,): the trial point, inside the parameters' bounds or
            constraints; the step to it (point - y) is the one whose predicted decrease
            the gain ratio divides by, and whose size, where the damping is 0, tests
            convergence (`lm_rules.converged`).
        step: batch + (p,): the subproblem's step before any projection onto the
            bounds; only the undamped step at the trial point is read (its size and
            decrease, `lm_rules.converged` and `next_damping`).
        solvable: batch bool: whether the subproblem was solved (else the trial is
            rejected and the damping grows).
        carried: the per-problem state at `point` (a pytree of arrays with the batch
            axes first, e.g. an active set's working set), given to the next subproblem
            from `point`: the one at the trial point, and every later one once the
            trial is accepted. None where there is none.
    """

    point: Any
    step: Any
    solvable: Any
    carried: Any


def box_subproblem(y, args, jtj, jtf, damping, *, lower, upper, carried, active, newton):
    """The default `subproblem`: (J^T J + lambda D) delta = -J^T f (`lm_rules.
    damped_diagonal`) with the parameters at a bound that the cost pushes outward held
    there (`lm_rules.pinned`), by `solve_damped`; the point y + delta clipped to the
    bounds (lower, upper: y's shape). Reads neither `args`, `active` nor `newton`;
    `carried` is passed through."""
    held = _lm.pinned(y, lower, upper, stacked(jtj, jtf)[1])
    jtj, jtf = entries(jtj, jtf)
    step, solvable = solve_damped(jtj, jtf, damping, held)
    return Subproblem(jnp.clip(y + step, lower, upper), step, solvable, carried)


def normal_equations_from_columns(fn, y, args, jacobian):
    """Residuals f, J^T J and J^T f of every problem, from the Jacobian's columns: those
    `jacobian` (y, args) -> (f, columns) gives where given, else one linearisation of
    `fn` and p JVPs. A column is batch + (observations,) (one chunk's, never the whole
    image's)."""
    n_free = y.shape[-1]
    if jacobian is None:
        residual, linear = jax.linearize(lambda y: fn(y, args)[0], y)
        columns = [linear(jnp.zeros_like(y).at[..., j].set(1.0)) for j in range(n_free)]
    else:
        residual, columns = jacobian(y, args)
    sliced = [last_slices(column) for column in columns]  # each sliced once
    jtj: list[list[Any]] = [[None] * n_free for _ in range(n_free)]
    for a in range(n_free):
        for b in range(a, n_free):
            jtj[a][b] = jtj[b][a] = dot_slices(sliced[a], sliced[b])
    residual_slices = last_slices(residual)
    jtf = tuple(dot_slices(column, residual_slices) for column in sliced)
    return residual, tuple(tuple(row) for row in jtj), jtf


def solve_damped(jtj, jtf, damping, held):
    """The damped step (`lm_rules.damped_diagonal`) of every problem from J^T J and J^T f
    as `entries`; returns (x (batch + (p,)), solvable).

    Parameters marked in `held` (batch + (p,), `lm_rules.pinned`) leave the system: their
    step is 0 and the others' is the best with them fixed.

    p is small and static: an unrolled Cholesky over whole lanes of problems (one
    division for p = 1), far faster on CPU than batched LAPACK calls on tiny matrices.
    """
    solution, solvable = _damped_entries(jtj, jtf, damping, tuple(last_slices(held)))
    step = jnp.stack(solution, axis=-1)
    return jnp.where(solvable[..., None], step, 0.0), solvable


@elementwise  # traced once, bound to the lanes in each program that holds it
def _damped_entries(jtj, jtf, damping, held):
    """`solve_damped` of one problem: J^T J, J^T f, the damping and `held` (p bools) as
    scalars; returns (the step's p entries, solvable)."""
    n_free = len(jtf)
    largest = functools.reduce(jnp.maximum, [jtj[a][a] for a in range(n_free)])
    system = [
        [jnp.where(held[a] | held[b], 0.0, jtj[a][b]) for b in range(n_free)] for a in range(n_free)
    ]
    for a in range(n_free):
        damped = _lm.damped_diagonal(jtj[a][a], largest, damping)
        system[a][a] = jnp.where(held[a], 1.0, damped)
    jtf = [jnp.where(held[a], 0.0, jtf[a]) for a in range(n_free)]
    factor: list[list[Any]] = [[None] * n_free for _ in range(n_free)]
    solvable = jnp.ones(jnp.shape(jtf[0]), bool)
    for j in range(n_free):
        pivot = system[j][j] - sum((factor[j][k] * factor[j][k] for k in range(j)), 0.0)
        solvable = solvable & (pivot > 0.0)
        factor[j][j] = jnp.sqrt(jnp.where(pivot > 0.0, pivot, 1.0))
        for i in range(j + 1, n_free):
            value = system[i][j] - sum((factor[i][k] * factor[j][k] for k in range(j)), 0.0)
            factor[i][j] = value / factor[j][j]
    forward: list[Any] = []
    for i in range(n_free):
        value = -jtf[i] - sum((factor[i][k] * forward[k] for k in range(i)), 0.0)
        forward.append(value / factor[i][i])
    solution: list[Any] = [None] * n_free
    for i in reversed(range(n_free)):
        value = forward[i] - sum((factor[k][i] * solution[k] for k in range(i + 1, n_free)), 0.0)
        solution[i] = value / factor[i][i]
    return tuple(solution), solvable
