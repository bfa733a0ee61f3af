"""Translate a scalar jaxpr into straight-line Python source that numba compiles.

The numba solvers need derivatives of the model with respect to every Hapke parameter;
numba has no autodiff, and the physics must stay written once (`equations`). So the
derivative code is JAX's own: the caller traces `jax.jvp` of the equations to a jaxpr,
and this module prints that jaxpr, one primitive per line, as a Python function over
floats. Nothing here differentiates; it only spells out JAX's primitives in `math`.

Only scalar (shape ``()``) programs are accepted, with the primitives in `_BINARY`,
`_UNARY` and a few more, plus nested `jit` calls (inlined). Identical equations (same
primitive, parameters and operands) are emitted once, so the primal part shared by
several JVPs is computed once. `scalar_jaxpr_to_split_source` also splits the program by
data dependence, like partial evaluation: what depends only on the "known" inputs goes to
one function, run once per observation; what depends only on the "unknown" ones to
another, run once per step; the rest to a third, run per observation and step.
"""

from __future__ import annotations

import keyword
import re
from typing import NamedTuple

import numpy as np

from .._compat.jax_internals import (
    INLINED_CALLS,
    SHAPE_ONLY,
    Literal,
    call_name,
    called_jaxpr,
    converted_dtype,
    integer_exponent,
)

__all__ = ["scalar_jaxpr_to_split_source", "SplitSource"]

_NAME = re.compile(r"[A-Za-z_][A-Za-z_0-9]*")

_BINARY = {
    "add": "({0} + {1})",
    "add_any": "({0} + {1})",
    "sub": "({0} - {1})",
    "mul": "({0} * {1})",
    "div": "({0} / {1})",
    "pow": "({0} ** {1})",
    "max": "({0} if {0} > {1} else {1})",
    "min": "({0} if {0} < {1} else {1})",
    "atan2": "math.atan2({0}, {1})",
    "gt": "({0} > {1})",
    "ge": "({0} >= {1})",
    "lt": "({0} < {1})",
    "le": "({0} <= {1})",
    "eq": "({0} == {1})",
    "ne": "({0} != {1})",
    "and": "({0} & {1})",
    "or": "({0} | {1})",
}
_UNARY = {
    "neg": "(-{0})",
    "sqrt": "math.sqrt({0})",
    "exp": "math.exp({0})",
    "expm1": "math.expm1({0})",
    "log": "math.log({0})",
    "log1p": "math.log1p({0})",
    "tan": "math.tan({0})",
    "abs": "abs({0})",
    "square": "({0} * {0})",
    "not": "(not {0})",
}


def _literal(value) -> str:
    value = np.asarray(value)
    if value.shape != ():
        raise ValueError(f"only scalar literals can be translated, got shape {value.shape}")
    if value.dtype == np.bool_:
        return "True" if bool(value) else "False"
    if np.issubdtype(value.dtype, np.integer):
        return repr(int(value))
    number = float(value)
    if np.isnan(number):
        return "math.nan"
    if np.isinf(number):
        return "math.inf" if number > 0 else "(-math.inf)"
    return repr(number)


class _Printer:
    def __init__(self, opaque_calls=None, opaque_jvps=None) -> None:
        self.statements: list[tuple[str, str]] = []  # (temporary, expression)
        self.bound: dict[str, str] = {}  # expression -> temporary holding it
        self.count = 0
        self.opaque_calls = dict(opaque_calls or {})  # jit name -> (function, arity)
        self.opaque_jvps = dict(opaque_jvps or {})  # jit name -> (function, outputs)

    def bind(self, expression: str) -> str:
        if expression in self.bound:
            return self.bound[expression]
        name = f"_t{self.count}"
        self.count += 1
        self.statements.append((name, expression))
        self.bound[expression] = name
        return name

    def integer_power(self, base: str, power: int) -> str:
        """x**n by repeated squaring, each product bound once (shared across powers)."""
        if power == 0:
            return "1.0"
        if power < 0:
            return f"(1.0 / {self.bind(self.integer_power(base, -power))})"
        if power == 1:
            return base
        half = self.bind(self.integer_power(base, power // 2))
        square = f"({half} * {half})"
        return square if power % 2 == 0 else f"({self.bind(square)} * {base})"

    def run(self, jaxpr, consts, args) -> list[str]:
        env: dict[object, str] = {}

        def read(atom):
            if isinstance(atom, Literal):
                return _literal(atom.val)
            return env[atom]

        for var, value in zip(jaxpr.constvars, consts):
            env[var] = _literal(value)
        for var, value in zip(jaxpr.invars, args):
            env[var] = value
        for eqn in jaxpr.eqns:
            for var in (*eqn.invars, *eqn.outvars):
                if getattr(var.aval, "shape", ()) != ():
                    raise ValueError(
                        f"{eqn.primitive.name}: only scalar programs can be translated"
                    )
            name = eqn.primitive.name
            operands = [read(v) for v in eqn.invars]
            opaque = self.opaque_calls.get(call_name(eqn)) if name in INLINED_CALLS else None
            if opaque is not None and len(operands) == opaque[1]:
                call = self.bind(f"{opaque[0]}({', '.join(operands)})")
                for k, var in enumerate(eqn.outvars):
                    env[var] = self.bind(f"{call}[{k}]")
                continue
            jvp = self.opaque_jvps.get(call_name(eqn)) if name in INLINED_CALLS else None
            if jvp is not None and len(operands) == 2 and len(eqn.outvars) == 2 * jvp[1]:
                # the JVP of a one-input call (x, dx) -> (outputs, their tangents), none of
                # them a symbolic zero (JAX drops those): outputs and d outputs/dx from one
                # call of `jvp[0](x)`, the same for every tangent dx (bound once), each
                # tangent its slope times dx
                x, dx = operands
                call = self.bind(f"{jvp[0]}({x})")
                for k, var in enumerate(eqn.outvars):
                    value = self.bind(f"{call}[{k}]")
                    env[var] = value if k < jvp[1] else self.bind(f"({value} * {dx})")
                continue
            if name in INLINED_CALLS:
                inner, inner_consts = called_jaxpr(eqn)
                results = self.run(inner, inner_consts, operands)
                for var, value in zip(eqn.outvars, results):
                    env[var] = value
                continue
            if name in _BINARY:
                expression = _BINARY[name].format(*operands)
            elif name in _UNARY:
                expression = _UNARY[name].format(*operands)
            elif name == "integer_pow":
                expression = self.integer_power(operands[0], integer_exponent(eqn))
            elif name == "select_n":
                if len(operands) != 3:
                    raise ValueError("select_n: only two-way selects can be translated")
                predicate, if_false, if_true = operands
                expression = f"({if_true} if {predicate} else {if_false})"
            elif name == "convert_element_type":
                dtype = converted_dtype(eqn)
                from_bool = getattr(eqn.invars[0].aval, "dtype", None) == np.bool_
                if dtype == np.bool_:
                    expression = f"({operands[0]} != 0)"
                elif np.issubdtype(dtype, np.integer):
                    expression = (
                        f"(1 if {operands[0]} else 0)" if from_bool else f"int({operands[0]})"
                    )
                else:  # numba has no float(bool)
                    expression = (
                        f"(1.0 if {operands[0]} else 0.0)" if from_bool else f"float({operands[0]})"
                    )
            elif name in SHAPE_ONLY:
                env[eqn.outvars[0]] = operands[0]  # the identity on scalars
                continue
            else:
                raise ValueError(f"primitive {name!r} cannot be translated to Python")
            env[eqn.outvars[0]] = self.bind(expression)
        return [read(v) for v in jaxpr.outvars]


def _checked_names(argument_names) -> list[str]:
    argument_names = list(argument_names)
    if any(name.startswith("_t") for name in argument_names):
        raise ValueError("argument names must not start with '_t' (reserved for temporaries)")
    return argument_names


def _function(name: str, arguments, statements, outputs) -> str:
    body = [f"    {target} = {expression}" for target, expression in statements]
    return (
        "\n".join(
            [f"def {name}({', '.join(arguments)}):", *body, f"    return ({', '.join(outputs)},)"]
        )
        + "\n"
    )


def _split(statements, outputs, late_roots, operands):
    """Split `statements` into those that do not depend on `late_roots` and those that do.

    Returns:
        (early statements the late ones need, late statements, interface): the interface
        lists the early values (statements' targets or arguments) that the late
        statements or the outputs use, in order of first use.
    """
    late = set(late_roots)
    for target, expression in statements:
        if any(n in late for n in operands(expression)):
            late.add(target)
    late_statements = [s for s in statements if s[0] in late]
    used = [n for _, e in late_statements for n in operands(e) if n not in late]
    used += [n for n in outputs if n in operands(n) and n not in late]
    interface = list(dict.fromkeys(used))
    live = set(interface)  # early statements the interface needs (the rest is dead code)
    early_statements = []
    for target, expression in reversed(statements):
        if target in live and target not in late:
            early_statements.append((target, expression))
            live.update(operands(expression))
    early_statements.reverse()
    return early_statements, late_statements, interface


class SplitSource(NamedTuple):
    """Source of three functions computing one scalar jaxpr (`scalar_jaxpr_to_split_source`)."""

    source: str
    n_residuals: int  # values the known part returns
    n_step_values: int  # values the step part returns


def scalar_jaxpr_to_split_source(
    closed_jaxpr,
    argument_names,
    unknown_names,
    known_name: str,
    step_name: str,
    unknown_name: str,
    opaque_calls=None,
    opaque_jvps=None,
) -> SplitSource:
    """Three functions that together compute `closed_jaxpr`, split by data dependence.

    Made for many evaluations that share their "known" arguments (an observation's
    geometry, fixed parameters) and, within one step, their "unknown" ones (the free
    parameters):
    ``known_name(*known arguments)`` computes everything that does not depend on the
    arguments in `unknown_names` and returns the residuals the rest needs;
    ``step_name(*unknown arguments)`` computes what depends on the unknown arguments
    alone and returns the step values the rest needs;
    ``unknown_name(*residuals, *step values)`` computes the jaxpr's outputs. Arguments
    keep their order in `argument_names`.

    opaque_calls: {name of a nested `jit`: (name of a function, number of inputs)}: such
    a call with that many inputs is printed as a call of that function (which must return
    the call's outputs as a flat tuple and be in the generated code's globals) instead of
    being inlined. (Its JVP, a `jit` of the same name with the tangents as further
    inputs, is inlined, unless `opaque_jvps` names it.)

    opaque_jvps: {name of a nested one-input `jit`: (name of a function, number of
    outputs n)}: the call's JVP (inputs x and its tangent dx; the n outputs, then their n
    tangents) is printed as one call of that function with x, which must return the
    outputs and then their derivatives with respect to x as one flat tuple, each tangent
    its derivative times dx. (A JVP with fewer tangents, some of them symbolic zeros, is
    inlined.)

    Raises:
        ValueError: for a non-scalar value, a primitive without a translation, or an
            argument name starting with '_t' (reserved for temporaries).
    """
    argument_names = _checked_names(argument_names)
    unknown_names = [name for name in argument_names if name in set(unknown_names)]
    known_names = [name for name in argument_names if name not in set(unknown_names)]
    printer = _Printer(opaque_calls, opaque_jvps)
    outputs = printer.run(closed_jaxpr.jaxpr, closed_jaxpr.consts, argument_names)
    variables = set(argument_names) | {target for target, _ in printer.statements}

    def operands(expression):
        return [n for n in _NAME.findall(expression) if n in variables and not keyword.iskeyword(n)]

    known_statements, unknown_statements, residuals = _split(
        printer.statements, outputs, unknown_names, operands
    )
    step_statements, lane_statements, step_values = _split(
        unknown_statements, outputs, residuals, operands
    )
    source = "\n\n".join(
        [
            _function(known_name, known_names, known_statements, residuals or ["0.0"]),
            _function(step_name, unknown_names, step_statements, step_values or ["0.0"]),
            _function(unknown_name, residuals + step_values, lane_statements, outputs),
        ]
    )
    return SplitSource(source, len(residuals), len(step_values))
