"""`jaxpr_split.SplitProgram`: a jaxpr evaluated in known, step and lane parts gives the
program's own values; each equation lands in the part its inputs allow; and the model's
derivative program (`columns_program.split_columns`) agrees with JAX's derivatives of the
forward model, for a scalar H-function and for the exact H (array-valued terms).
`jaxpr_split.elementwise`: a scalar function replayed on arrays gives its own bits."""

import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lumaxlike
from lumaxlike._model.columns_program import split_columns, traced_columns
from lumaxlike._model.family import jax_equations_for
from lumaxlike._model.jaxpr_split import SplitProgram, elementwise
from lumaxlike._params import PARAMETER_NAMES

from .helpers import random_geometry


def toy(x, y, a, b):
    """x, y known; a, b unknown."""
    known = jnp.sin(x) * jnp.cos(y)  # the row: one value (x and y themselves not needed)
    step = jnp.exp(a) + a * b  # a step value
    shared = jnp.sin(x) * jnp.cos(y)  # the same equations again: kept once
    return known * step + shared, step * step, known  # step * step: a step value too


def test_each_equation_runs_in_the_part_its_inputs_allow():
    program = SplitProgram(jax.make_jaxpr(toy)(0.1, 0.2, 0.3, 0.4), unknown=[2, 3])
    assert (program.n_row, program.n_step) == (1, 2)
    row, step = program.known(0.1, 0.2), program.step(0.3, 0.4)
    np.testing.assert_allclose(row, [math.sin(0.1) * math.cos(0.2)], rtol=1e-15)
    step_value = math.exp(0.3) + 0.3 * 0.4
    np.testing.assert_allclose(sorted(step), sorted([step_value, step_value**2]), rtol=1e-15)
    np.testing.assert_allclose(program.lane(row, step), toy(0.1, 0.2, 0.3, 0.4), rtol=1e-15)


def test_parts_run_on_arrays_as_under_vmap_with_the_programs_values():
    program = SplitProgram(jax.make_jaxpr(toy)(0.1, 0.2, 0.3, 0.4), unknown=[2, 3])
    assert program.elementwise  # its primitives bound to whole arrays, no vmap
    rng = np.random.default_rng(0)
    x, y = rng.uniform(-1, 1, (2, 5, 7))  # 5 problems x 7 observations
    a, b = rng.uniform(-1, 1, (2, 5))

    @jax.jit
    def on_arrays(x, y, a, b):
        rows = program.known(x, y)
        steps = program.step(a, b)
        return program.lane(rows, [s[:, None] for s in steps])  # across observations

    @jax.jit
    def vmapped(x, y, a, b):
        rows = jax.vmap(jax.vmap(program.known))(x, y)
        steps = jax.vmap(program.step)(a, b)
        return jax.vmap(jax.vmap(program.lane, in_axes=(0, None)))(rows, steps)

    whole = jax.vmap(jax.vmap(toy, in_axes=(0, 0, None, None)))(x, y, a, b)
    for got, under_vmap, expected in zip(on_arrays(x, y, a, b), vmapped(x, y, a, b), whole):
        assert got.shape == (5, 7)
        np.testing.assert_array_equal(got, under_vmap)
        np.testing.assert_allclose(got, expected, rtol=1e-14)
    # a scalar input is broadcast to the others' shape
    np.testing.assert_array_equal(
        program.known(x, 0.2)[0], program.known(x, np.full_like(x, 0.2))[0]
    )


@pytest.mark.parametrize("h_function", ["hapke2002", "exact"])
def test_model_columns_in_parts_equal_jax_derivatives_of_the_model(h_function):
    params = lumaxlike.HapkeParams(
        b=0.3,
        c=0.4,
        roughness=math.radians(20.0),
        hs=0.06,
        bs0=0.9,
        hc=0.03,
        bc0=0.5,
        h_function=h_function,
    )
    key = params.model_key
    free = ("w", "c", "roughness", "hs")
    values = np.array([0.6] + [float(v) for v in params.scalars()])
    program = split_columns(free, key, np.float64)
    equations = jax_equations_for(key)
    rng = np.random.default_rng(1)
    # each step jitted: run eagerly, its primitives compile one by one (~180 programs)
    geometry = jax.jit(jax.vmap(equations.geometry_terms))(
        *(jnp.asarray(g) for g in random_geometry(30, rng))
    )
    known = [values[k] for k, name in enumerate(PARAMETER_NAMES) if name not in free]
    # the exact H's terms are arrays (its quadrature): its program runs under vmap
    assert program.elementwise == (h_function != "exact")
    rows = jax.jit(lambda g: program.known(*known, *g))(geometry)
    step = jax.jit(program.step)(*(values[PARAMETER_NAMES.index(name)] for name in free))
    r, *columns = jax.jit(program.lane)(rows, step)

    def reflectance(free_values, g):
        parameters = list(values)
        for name, value in zip(free, free_values):
            parameters[PARAMETER_NAMES.index(name)] = value
        w, *scalars = parameters
        return equations.reflectance(w, equations.terms_from_geometry(g, *scalars, None, False))

    free_values = jnp.asarray([values[PARAMETER_NAMES.index(name)] for name in free])
    expected_r = jax.jit(jax.vmap(reflectance, in_axes=(None, 0)))(free_values, geometry)
    expected_columns = jax.jit(jax.vmap(jax.jacfwd(reflectance), in_axes=(None, 0)))(
        free_values, geometry
    )
    valid = np.asarray(geometry.valid)
    assert valid.sum() > 20
    np.testing.assert_allclose(np.asarray(r)[valid], np.asarray(expected_r)[valid], rtol=1e-13)
    for j in range(len(free)):
        np.testing.assert_allclose(
            np.asarray(columns[j])[valid],
            np.asarray(expected_columns)[valid, j],
            rtol=1e-11,
            atol=1e-15,
        )


def test_float32_program_keeps_float32():
    with jax.enable_x64(False):
        key = lumaxlike.HapkeParams(b=0.3, c=0.4).model_key
        program = split_columns(("w", "b"), key, np.float32)
        closed = traced_columns(("w", "b"), key, np.float32)
    assert all(v.aval.dtype in (np.float32, np.bool_) for v in closed.jaxpr.invars)
    assert program.n_step > 0


def _cholesky_like(pair, scale, flag):
    """Scalars in a pytree: divisions, a square root, a select, a constant output."""
    a, b = pair
    root = jnp.sqrt(jnp.where(flag, a * a + b, 1.0))
    return {"ratio": (a - b) / root * scale, "flag": flag & (root > 1.0), "one": 1.0}


def test_elementwise_replay_gives_the_functions_own_bits_and_traces_once():
    replayed = elementwise(_cholesky_like)
    rng = np.random.default_rng(0)
    for dtype in (np.float32, np.float64):
        with jax.enable_x64(dtype == np.float64):
            a, b = (jnp.asarray(rng.normal(size=(5, 3)), dtype) for _ in range(2))
            scale = jnp.asarray(rng.normal(size=(1, 3)), dtype)  # broadcast to (5, 3)
            flag = jnp.asarray(rng.normal(size=(5, 3)) > 0.0)
            direct = jax.jit(_cholesky_like)((a, b), scale, flag)
            again = jax.jit(replayed)((a, b), scale, flag)
        assert jax.tree_util.tree_structure(again) == jax.tree_util.tree_structure(direct)
        assert again["ratio"].dtype == dtype
        for name in ("ratio", "flag"):
            assert again[name].dtype == direct[name].dtype
            np.testing.assert_array_equal(again[name], direct[name])  # to the bit
        np.testing.assert_array_equal(again["one"], np.ones((5, 3)))
    calls = []
    counted = elementwise(lambda x: calls.append(1) or x * 2.0)
    for _ in range(3):
        jax.jit(counted)(jnp.ones(4))  # a new jit each time: traced again, replayed
    assert len(calls) == 1
    with pytest.raises(ValueError, match="not element-wise"):
        elementwise(lambda x: jnp.cumsum(x))(jnp.ones(4))
