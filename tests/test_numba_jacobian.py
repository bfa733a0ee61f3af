"""The numba derivative code generated from JAX: against JAX's own derivatives and against
finite differences; the jaxpr translator's refusals."""

import math
import os
import time

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from lumaxlike._model import cache_temporaries, numba_jacobian
from lumaxlike._model._backends import jax_equations, numba_equations
from lumaxlike._model._jaxpr_to_python import scalar_jaxpr_to_split_source
from lumaxlike._params import PARAMETER_NAMES

from .helpers import random_geometry

ALL_FREE = PARAMETER_NAMES  # w, b, c, roughness, hs, bs0, hc, bc0, porosity_k
PARAMETERS = np.array([0.6, 0.25, 0.5, math.radians(20.0), 0.06, 0.9, 0.03, 0.5, 1.3, 0.0])


def geometry_rows(n, seed):
    rng = np.random.default_rng(seed)
    incidence, emission, normal = random_geometry(n, rng)
    rows = []
    for k in range(n):
        geometry = numba_equations.geometry_terms(incidence[k], emission[k], normal[k])
        if geometry.valid:
            rows.append(np.array([float(v) for v in geometry]))
    return np.array(rows)


def jax_reflectance(parameters, row):
    geometry = jax_equations.GeometryTerms(*row[:-1], row[-1] != 0.0)
    w, *scalars = (parameters[k] for k in range(len(PARAMETER_NAMES)))
    terms = jax_equations.terms_from_geometry(geometry, *scalars, None, False)
    return jax_equations.reflectance(w, terms)


def evaluate(functions, parameters, geometry_row, out):
    """r and the derivative columns: the per-observation, per-step and remaining parts."""
    row = np.empty(max(functions.row_length, 1))
    step = np.empty(max(functions.step_length, 1))
    functions.hoist(parameters, geometry_row, row)
    functions.prepare(parameters, step)
    functions.columns(step, row, out)


@pytest.fixture(scope="module")
def all_columns():
    return numba_jacobian.model_columns(ALL_FREE)


def test_columns_match_jax_autodiff(all_columns):
    rows = geometry_rows(200, seed=0)
    out = np.empty(len(ALL_FREE) + 1)
    gradient = jax.jit(jax.grad(jax_reflectance))
    value = jax.jit(jax_reflectance)
    for row in rows:
        evaluate(all_columns, PARAMETERS, row, out)
        expected = np.asarray(gradient(jnp.asarray(PARAMETERS), jnp.asarray(row)))
        # fast-math code (reassociated sums, shared reciprocals): last-bits differences
        np.testing.assert_allclose(
            out[0], float(value(jnp.asarray(PARAMETERS), jnp.asarray(row))), rtol=1e-12
        )
        np.testing.assert_allclose(
            out[1:], expected, rtol=1e-9, atol=1e-12 * np.max(np.abs(expected))
        )


def test_columns_match_finite_differences(all_columns):
    rows = geometry_rows(50, seed=1)
    out = np.empty(len(ALL_FREE) + 1)
    plus, minus = np.empty_like(out), np.empty_like(out)
    for row in rows:
        evaluate(all_columns, PARAMETERS, row, out)
        for j in range(len(ALL_FREE)):
            step = 1e-6 * max(1.0, abs(PARAMETERS[j]))
            shifted = PARAMETERS.copy()
            shifted[j] += step
            evaluate(all_columns, shifted, row, plus)
            shifted[j] -= 2 * step
            evaluate(all_columns, shifted, row, minus)
            central = (plus[0] - minus[0]) / (2 * step)
            # central differences: truncation ~ step^2 r''' and rounding ~ eps r / step
            assert abs(out[1 + j] - central) <= 1e-6 * abs(out[1 + j]) + 1e-9, (
                PARAMETER_NAMES[j],
                row,
            )


def test_subset_columns_equal_full_columns(all_columns):
    free = ("c", "w", "hs")
    columns = numba_jacobian.model_columns(free)
    rows = geometry_rows(20, seed=2)
    out_all, out = np.empty(len(ALL_FREE) + 1), np.empty(len(free) + 1)
    for row in rows:
        evaluate(all_columns, PARAMETERS, row, out_all)
        evaluate(columns, PARAMETERS, row, out)
        expected = [out_all[0]] + [out_all[1 + PARAMETER_NAMES.index(n)] for n in free]
        np.testing.assert_allclose(out, expected, rtol=1e-12)


def test_albedo_alone_hoists_every_w_independent_term():
    """For w alone, the per-step part is the analytic r(w), dr/dw of the pixel terms."""
    functions = numba_jacobian.model_columns(("w",))
    out = np.empty(2)
    legendre = np.zeros(16)
    for row in geometry_rows(20, seed=3):
        geometry = numba_equations.GeometryTerms(*row[:-1], row[-1] != 0.0)
        terms = numba_equations.terms_from_geometry(geometry, *PARAMETERS[1:], legendre, False)
        evaluate(functions, PARAMETERS, row, out)
        np.testing.assert_allclose(
            out, numba_equations.reflectance_and_slope(PARAMETERS[0], terms), rtol=1e-12
        )
    # the hoisted row: the terms' scalars (the H-function pieces are tuples) + 2 as before
    # + the two H-functions' branch-point flags (x > 0: dH/dw is +inf at w = 1 there)
    n_scalars = len(jax.tree_util.tree_leaves(tuple(terms)))
    assert functions.row_length <= n_scalars + 2 + 2


def test_split_source_puts_each_statement_where_its_inputs_allow():
    def function(x, y):
        slow = jnp.exp(x) * 2.0  # the known input x only: once per observation
        step = jnp.log1p(y) * 3.0  # the unknown input y only: once per step
        return (slow * step + slow, y * y)

    with jax.enable_x64(True):
        jaxpr = jax.make_jaxpr(function)(jnp.float64(0.3), jnp.float64(0.7))
    split = scalar_jaxpr_to_split_source(jaxpr, ["x", "y"], ["y"], "known", "step", "rest")
    namespace = {"math": math}
    exec(split.source, namespace)
    known, step, rest = (
        split.source.split(f"def {name}(")[1].split("def ")[0] for name in ("known", "step", "rest")
    )
    assert "exp" in known and "log1p" in step
    assert "exp" not in step + rest and "log1p" not in known + rest
    residuals, step_values = namespace["known"](0.3), namespace["step"](0.7)
    assert (len(residuals), len(step_values)) == (split.n_residuals, split.n_step_values)
    expected = [float(v) for v in function(0.3, 0.7)]
    np.testing.assert_allclose(namespace["rest"](*residuals, *step_values), expected, rtol=1e-15)


def test_unknown_parameter_name_is_refused():
    with pytest.raises(ValueError, match="unknown parameter"):
        numba_jacobian.model_columns(("w", "albedo"))


def test_translator_refuses_arrays_and_unknown_primitives():
    with jax.enable_x64(True):
        vector = jax.make_jaxpr(lambda x: jnp.sum(x * x))(jnp.ones(3))
        special = jax.make_jaxpr(jax.lax.erf)(jnp.float64(0.5))
    with pytest.raises(ValueError, match="only scalar"):
        scalar_jaxpr_to_split_source(vector, ["x"], [], "known", "step", "rest")
    with pytest.raises(ValueError, match="erf"):
        scalar_jaxpr_to_split_source(special, ["x"], [], "known", "step", "rest")


def test_translated_source_runs_as_python():
    def function(x, y):
        return jnp.where(x > y, jnp.exp(x) / y, jnp.log1p(y) ** 3), jnp.arctan2(x, y)

    with jax.enable_x64(True):
        jaxpr = jax.make_jaxpr(function)(jnp.float64(0.3), jnp.float64(0.7))
        expected = [float(v) for v in function(jnp.float64(0.3), jnp.float64(0.7))]
    namespace = {"math": math}
    split = scalar_jaxpr_to_split_source(jaxpr, ["x", "y"], ["x", "y"], "known", "step", "rest")
    exec(split.source, namespace)
    namespace["f"] = lambda x, y: namespace["rest"](*namespace["step"](x, y)[: split.n_step_values])
    np.testing.assert_allclose(namespace["f"](0.3, 0.7), expected, rtol=1e-15)


def test_generating_a_module_removes_temporaries_that_killed_writers_left(tmp_path, monkeypatch):
    monkeypatch.setenv("LUMAXLIKE_CACHE_DIR", str(tmp_path))
    cache_temporaries.remove_stale_temporaries.cache_clear()
    folder = tmp_path / "generated"
    folder.mkdir()
    stale, fresh = folder / ".tmp-killed.py", folder / ".tmp-writing.py"
    for path in (stale, fresh):
        path.write_text("# partial")
    old = time.time() - cache_temporaries.STALE_TEMPORARY_SECONDS - 60
    os.utime(stale, (old, old))
    _, in_file = numba_jacobian._generated_module(
        ("w",), numba_jacobian.DEFAULT_KEY, "test-stale-temporaries"
    )
    assert in_file and (folder / "columns_test-stale-temporaries.py").is_file()
    assert not stale.exists()  # a writer killed between writing and renaming
    assert fresh.exists()  # another process's write under way
    assert [p.name for p in folder.glob(".tmp-*")] == [fresh.name]  # its own renamed
    cache_temporaries.remove_stale_temporaries.cache_clear()
