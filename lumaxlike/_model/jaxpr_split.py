"""A jaxpr's equations split by data dependence, and evaluated part by part in JAX.

The JAX twin of what `_jaxpr_to_python.scalar_jaxpr_to_split_source` prints for numba:
a program evaluated for many (problem, observation) pairs over many steps, whose inputs
are "known" (an observation's geometry and the fixed parameters: the same at every
step) or "unknown" (the free parameters: new at every step), is cut into

- the known part, everything that depends on no unknown input: run once, its values
  that the rest needs (the "row") kept;
- the step part, what depends on the unknown inputs alone: run once per problem and
  step;
- the lane part, the rest: run per problem, observation and step, from the row and the
  step values.

XLA:CPU, given the whole program at every step, recomputes the known part at every step
and, as it fuses each of the program's outputs into its own loop, the shared work once
per output. Here each part is its own set of arrays, so the caller can compute the row
once and keep the step values and the outputs as materialised arrays.

The parts are evaluated by binding the jaxpr's own primitives (as `jax.core.eval_jaxpr`
does), under `jax.jit` and `jax.vmap`, on arrays of many elements at once (their
shapes broadcast by NumPy's rules): an element-wise program's primitives are bound to the
whole arrays, any other program runs under one `jax.vmap` per axis. Calls
(`jit`, `custom_jvp_call`, ...) are inlined, identical equations kept once, equations of
constants folded, and what no output needs dropped.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence

import jax
import jax.numpy as jnp
import numpy as np

from .._compat.jax_internals import INLINED_CALLS, SHAPE_ONLY, Literal, called_jaxpr

__all__ = ["SplitProgram", "elementwise"]


class _Variable:
    """A value of the flattened program (identity is the variable)."""

    __slots__ = ()


class _Constant:
    """A constant of the flattened program."""

    __slots__ = ("value",)

    def __init__(self, value):
        self.value = value

    def key(self):
        value = np.asarray(self.value)
        if value.ndim == 0:
            return ("scalar", value.dtype.str, value.tobytes())
        return ("array", id(self.value))  # kept alive by the program's equations


def _flatten(closed_jaxpr):
    """(inputs, equations, outputs, the names of the primitives kept that are not
    element-wise) of `closed_jaxpr` with calls inlined, duplicate equations merged and
    constant equations folded. An equation is (primitive, params, operands, results);
    operands are `_Variable` or `_Constant`."""
    equations = []
    not_elementwise: list[str] = []
    seen = {}

    def run(jaxpr, consts, arguments):
        env: dict[object, _Variable | _Constant] = {}

        def read(atom):
            return _Constant(atom.val) if isinstance(atom, Literal) else env[atom]

        env.update(zip(jaxpr.constvars, (_Constant(c) for c in consts)))
        env.update(zip(jaxpr.invars, arguments))
        for eqn in jaxpr.eqns:
            operands = [read(v) for v in eqn.invars]
            name = eqn.primitive.name
            if name in INLINED_CALLS:
                inner, inner_consts = called_jaxpr(eqn)
                results = run(inner, inner_consts, operands)
                env.update(zip(eqn.outvars, results))
                continue
            if name in SHAPE_ONLY and eqn.invars[0].aval.shape == eqn.outvars[0].aval.shape:
                env[eqn.outvars[0]] = operands[0]  # the identity
                continue
            if all(isinstance(a, _Constant) for a in operands):
                # now, even inside a trace; on the host's CPU, where an accelerator would
                # compile a program for each primitive (~0.06-0.4 s each on a TPU v5e)
                with jax.ensure_compile_time_eval(), jax.default_device(jax.devices("cpu")[0]):
                    values = eqn.primitive.bind(*(a.value for a in operands), **eqn.params)
                values = values if eqn.primitive.multiple_results else [values]
                env.update(zip(eqn.outvars, (_Constant(np.asarray(v)) for v in values)))
                continue
            key = (
                name,
                repr(sorted(eqn.params.items())),
                tuple(a.key() if isinstance(a, _Constant) else id(a) for a in operands),
            )
            if key not in seen:
                seen[key] = [_Variable() for _ in eqn.outvars]
                equations.append((eqn.primitive, eqn.params, operands, seen[key]))
                if not _is_elementwise(eqn):
                    not_elementwise.append(name)
            env.update(zip(eqn.outvars, seen[key]))
        return [read(v) for v in jaxpr.outvars]

    inputs = [_Variable() for _ in closed_jaxpr.jaxpr.invars]
    outputs = run(closed_jaxpr.jaxpr, closed_jaxpr.consts, inputs)
    return inputs, equations, outputs, not_elementwise


def _is_elementwise(eqn) -> bool:
    """Whether an equation of a scalar program is one value per element of its operands:
    scalars in and out, and no program of its own (a loop's or a branch's)."""
    atoms = [*eqn.invars, *eqn.outvars]
    if any(getattr(atom.aval, "shape", ()) != () for atom in atoms):
        return False
    return not any(
        hasattr(value, "eqns") or hasattr(value, "jaxpr") for value in eqn.params.values()
    )


def _evaluate(equations, env):
    """`env` (variable -> value) with the results of `equations`, bound in order."""
    for primitive, params, operands, results in equations:
        values = primitive.bind(
            *(a.value if isinstance(a, _Constant) else env[a] for a in operands), **params
        )
        env.update(zip(results, values if primitive.multiple_results else [values]))
    return env


def _evaluate_elementwise(equations, env, shape):
    """`_evaluate` of element-wise equations on arrays of one `shape`: every value of
    `env` already that shape, each constant broadcast to it where used (once)."""
    broadcast = {}

    def operand(atom):
        if not isinstance(atom, _Constant):
            return env[atom]
        key = atom.key()
        if key not in broadcast:
            broadcast[key] = jax.lax.broadcast_in_dim(atom.value, shape, ())
        return broadcast[key]

    for primitive, params, operands, results in equations:
        values = primitive.bind(*(operand(a) for a in operands), **params)
        env.update(zip(results, values if primitive.multiple_results else [values]))
    return env


def _bound_to_arrays(equations, variables, values, wanted) -> list:
    """The values of `wanted` once the element-wise `equations` have run from
    `variables` = `values` (broadcast by NumPy's rules to one shape), their primitives
    bound to the whole arrays; each a full array of that shape."""
    shape = np.broadcast_shapes(*(np.shape(v) for v in values))
    env = dict(zip(variables, (jnp.broadcast_to(v, shape) for v in values)))
    env = _evaluate_elementwise(equations, env, shape) if shape else _evaluate(equations, env)
    return [
        jnp.broadcast_to(a.value if isinstance(a, _Constant) else env[a], shape) for a in wanted
    ]


class SplitProgram:
    """A closed jaxpr split into known, step and lane parts (see the module docstring).

    Args:
        closed_jaxpr: the program; tracing it under the dtype and ``jax_enable_x64``
            setting of its use keeps its constants in that precision.
        unknown: positions of the unknown inputs among the program's inputs.

    Attributes:
        n_row, n_step: lengths of the row and of the step values.
        elementwise: whether every equation gives one value per element of its operands
            (then the parts bind the primitives to whole arrays; else they run under
            `jax.vmap`).
    """

    def __init__(self, closed_jaxpr, unknown: Sequence[int]):
        inputs, equations, self._outputs, not_elementwise = _flatten(closed_jaxpr)
        self.elementwise = not not_elementwise
        unknown = sorted(set(unknown))
        self._unknown_inputs = [inputs[i] for i in unknown]
        self._known_inputs = [a for i, a in enumerate(inputs) if i not in unknown]
        needed = {a for a in self._outputs if isinstance(a, _Variable)}
        live = []
        for equation in reversed(equations):  # what the outputs need
            if any(r in needed for r in equation[3]):
                live.append(equation)
                needed.update(a for a in equation[2] if isinstance(a, _Variable))
        live.reverse()
        late, from_known = set(self._unknown_inputs), set(self._known_inputs)
        parts: dict[str, list] = {"known": [], "step": [], "lane": []}
        for equation in live:
            operands = [a for a in equation[2] if isinstance(a, _Variable)]
            is_late = any(a in late for a in operands)
            uses_known = any(a in from_known for a in operands)
            if is_late:
                late.update(equation[3])
            if uses_known:
                from_known.update(equation[3])
            parts["known" if not is_late else "lane" if uses_known else "step"].append(equation)
        self._known, self._step, self._lane = parts["known"], parts["step"], parts["lane"]
        lane_reads = [a for e in self._lane for a in e[2] if isinstance(a, _Variable)]
        lane_reads += [a for a in self._outputs if isinstance(a, _Variable)]
        self._row = list(dict.fromkeys(a for a in lane_reads if a not in late))
        self._step_values = list(
            dict.fromkeys(a for a in lane_reads if a in late and a not in from_known)
        )
        self.n_row, self.n_step = len(self._row), len(self._step_values)

    def known(self, *known_inputs) -> tuple:
        """The row (`n_row` values) from the known inputs, in the program's input order."""
        return self._run(self._known, self._known_inputs, known_inputs, self._row)

    def step(self, *unknown_inputs) -> tuple:
        """The step values (`n_step`) from the unknown inputs, in the program's input order."""
        return self._run(self._step, self._unknown_inputs, unknown_inputs, self._step_values)

    def lane(self, row: Sequence, step_values: Sequence) -> tuple:
        """The program's outputs from a row and the step values."""
        variables = [*self._row, *self._step_values]
        return self._run(self._lane, variables, [*row, *step_values], self._outputs)

    def _run(self, equations, variables, values, wanted) -> tuple:
        """The values of `wanted` once `equations` have run from `variables` = `values`:
        arrays (or scalars) broadcast by NumPy's rules to one shape, the program run for
        each of its elements. An element-wise program binds its primitives to the whole
        arrays; any other runs under one `jax.vmap` per axis. The results are the
        same, but each `jax.vmap` level handles every primitive again as it traces: on the
        2-core VM, `fit`'s lockstep round (65 536 problems) traced in 0.13-0.20 s
        element-wise against 0.28-0.38 s under the three levels it had (its compiled
        program's results the same to the bit)."""
        if self.elementwise:
            return tuple(_bound_to_arrays(equations, variables, values, wanted))

        def per_element(*values):
            env = _evaluate(equations, dict(zip(variables, values)))
            return tuple(a.value if isinstance(a, _Constant) else env[a] for a in wanted)

        shape = np.broadcast_shapes(*(np.shape(v) for v in values))
        for _ in shape:
            per_element = jax.vmap(per_element)
        return per_element(*(jnp.broadcast_to(v, shape) for v in values))


def elementwise(function: Callable) -> Callable:
    """`function` of scalars (pytrees of them in and out, every operation element-wise)
    as a function of arrays broadcast to one shape, traced once per input tree, dtypes
    and precision and then bound to whole arrays (`_flatten`, `_evaluate_elementwise`).

    The results are those of calling `function` on the arrays (the same primitives),
    but a later trace costs one `bind` per equation: a program that holds it traces
    faster (through `jax.numpy`, each operator of a traced array is a call of a jitted
    function). For the small dense algebra of the solvers' steps (`lm_algebra`).

    Raises:
        ValueError: `function` holds an operation that is not element-wise.
    """

    @functools.cache
    def program(treedef, avals: tuple, x64: bool):
        del x64  # (a key: the precision the constants are traced in)
        shapes = [jax.ShapeDtypeStruct((), dtype, weak_type=weak) for dtype, weak in avals]
        closed, out_shapes = jax.make_jaxpr(
            lambda *leaves: function(*jax.tree_util.tree_unflatten(treedef, leaves)),
            return_shape=True,
        )(*shapes)
        inputs, equations, outputs, not_elementwise = _flatten(closed)
        if not_elementwise:
            raise ValueError(f"{function.__name__} is not element-wise: {not_elementwise}")
        return inputs, equations, outputs, jax.tree_util.tree_structure(out_shapes)

    @functools.wraps(function)
    def call(*args):
        leaves, treedef = jax.tree_util.tree_flatten(args)
        avals = tuple((jax.typeof(a).dtype, jax.typeof(a).weak_type) for a in leaves)
        x64 = jax.dtypes.canonicalize_dtype(np.float64) == np.float64  # in this thread
        inputs, equations, outputs, out_tree = program(treedef, avals, bool(x64))
        results = _bound_to_arrays(equations, inputs, leaves, outputs)
        return jax.tree_util.tree_unflatten(out_tree, results)

    return call
