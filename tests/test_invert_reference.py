"""`invert` reproduces, bit for bit, the outputs stored by `data/make_invert_reference.py`
at commit b6da57f (before the numba kernel stepped a pixel's bands in lockstep and the JAX
solver got its one-parameter specialisation): both solvers, several model
configurations, float32 and float64 inputs, a given w0, MAX_ITER, and every status."""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

DATA = Path(__file__).resolve().parent / "data"
_spec = importlib.util.spec_from_file_location("make_invert_reference", DATA / "make_invert_reference.py")
make_reference = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(make_reference)
REFERENCE = np.load(DATA / "invert_reference.npz")


@pytest.mark.parametrize("solver", ["jax", "numba"])
@pytest.mark.parametrize("name", list(make_reference.CASES))
def test_invert_reproduces_the_stored_outputs_bit_for_bit(name, solver):
    params, dtype, kwargs = make_reference.CASES[name]
    inputs = {key: REFERENCE[f"{name}/{key}"] for key in ("refl", "to_sun", "to_sensor", "normal", "w0_far")}
    assert inputs["refl"].dtype == dtype
    result = make_reference.run_case(inputs, params, kwargs, solver)
    for field in make_reference.FIELDS:
        expected = REFERENCE[f"{name}/{solver}/{field}"]
        actual = getattr(result, field)
        assert actual.dtype == expected.dtype, field
        np.testing.assert_array_equal(actual, expected, err_msg=f"{name} {solver} {field}")
