"""float64 on a device whose float64 is emulated (a TPU) is refused with what to do
(`lumaxlike/_model/device_precision.py`); checked on the CPU by naming the platform."""

import re

import numpy as np
import pytest

import lumaxlike
from lumaxlike._model import device_precision
from lumaxlike.testing import default_params, random_geometry


def test_float64_refused_on_a_tpu_only():
    for platform in ("cpu", "gpu", "cuda", "rocm"):
        device_precision.check_float64_platform(platform, {})  # hardware float64: allowed
    for platform in ("tpu", "TPU"):
        with pytest.raises(ValueError) as error:
            device_precision.check_float64_platform(platform, {})
        message = str(error.value)
        assert "float64" in message and "TPU" in message
        assert "float32" in message and "solver='numba', w0=" in message  # what to do
        assert device_precision.EMULATED_FLOAT64_ENV in message
    # the documented way to run it emulated anyway (to measure it)
    device_precision.check_float64_platform("tpu", {device_precision.EMULATED_FLOAT64_ENV: "1"})
    with pytest.raises(ValueError):
        device_precision.check_float64_platform("tpu", {device_precision.EMULATED_FLOAT64_ENV: "0"})


def test_jax_front_ends_refuse_float64_where_the_default_device_is_a_tpu(monkeypatch):
    """With JAX's default platform reported as a TPU: float64 through `invert` and
    `amsa` with JAX raises before any work, float32 runs (here on the CPU), and the
    numba solver in float64 is untouched (it never runs on the device)."""
    rng = np.random.default_rng(0)
    geometry = random_geometry(8, rng)
    params = default_params()
    refl = lumaxlike.amsa(np.full((8, 2), 0.4), *geometry, params, backend="numba")
    monkeypatch.delenv(device_precision.EMULATED_FLOAT64_ENV, raising=False)
    monkeypatch.setattr(device_precision, "default_platform", lambda: "tpu")
    with pytest.raises(ValueError, match=re.escape("no float64 hardware")):
        lumaxlike.invert(refl, *geometry, params, solver="jax")
    with pytest.raises(ValueError, match=re.escape("no float64 hardware")):
        lumaxlike.amsa(np.full((8, 2), 0.4), *geometry, params, backend="jax")
    f32 = [np.asarray(a, np.float32) for a in (refl, *geometry)]
    result32 = lumaxlike.invert(*f32[:1], *f32[1:], params, solver="jax")
    assert result32.w.dtype == np.float32
    # the refinement the message recommends: float64 on the host, from the float32 answer
    refined = lumaxlike.invert(refl, *geometry, params, solver="numba", w0=result32.w)
    assert refined.w.dtype == np.float64
    np.testing.assert_allclose(refined.w, 0.4, atol=1e-9)  # noise-free: the truth


def test_jax_paths_trace_matrix_products_at_highest_precision():
    """Inside `precision_scope` (every JAX operation's solve runs in it) einsum and matmul
    are traced at HIGHEST precision: a TPU computes float32 products at default precision
    in one bfloat16 pass. Outside it JAX's default (no precision) is left alone."""
    import jax
    import jax.numpy as jnp

    from lumaxlike._model.forward import precision_scope

    a, b = np.ones((2, 3, 3), np.float32), np.ones((2, 3), np.float32)

    def precisions():
        jaxpr = jax.make_jaxpr(lambda a, b: (jnp.einsum("nab,nb->na", a, b), a @ a))(a, b)
        return [
            e.params["precision"] for e in jaxpr.jaxpr.eqns if e.primitive.name == "dot_general"
        ]

    highest = (jax.lax.Precision.HIGHEST, jax.lax.Precision.HIGHEST)
    with precision_scope(a):
        assert precisions() == [highest, highest]
    assert precisions() == [None, None]
