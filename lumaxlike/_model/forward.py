"""The public forward model `amsa`, with the backend chosen by one argument."""

from __future__ import annotations

import contextlib

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float

from .._params import HapkeParams
from .._shapes import check_choice, check_float_dtype, layout
from . import device_precision, jax_model, numba_model
from ._backends import jax_equations, jax_h_functions
from .jax_cache import compilation_cache_scope

__all__ = ["amsa", "h_function"]

BACKENDS = ("jax", "numba")


@jax.jit
def _amsa_flat(w, to_sun, to_sensor, normal, params):
    return jax_model.amsa_vector(w, to_sun, to_sensor, normal, params)


@contextlib.contextmanager
def precision_scope(*arrays):
    """A context in which JAX computes in the inputs' precision, with lumaxlike's
    persistent compilation cache (`jax_cache.compilation_cache_scope`).

    Float64 inputs run under a local `jax.enable_x64(True)` scope (thread-local); global
    JAX configuration is never changed. Float64 where JAX's default device is a TPU is
    refused (`device_precision.refuse_emulated_float64`: ValueError). Matrix products
    (einsum, matmul) are traced at `"highest"` precision
    (`jax.default_matmul_precision`): a TPU otherwise computes float32 products in one
    bfloat16 pass (~3 significant digits), which left `unmix`'s float32 stopping rule
    unreachable there (3 % of pixels converged; a CPU is exact either way).
    """
    # The dtype attribute where there is one: np.asarray would copy device arrays to the
    # host and fails on tracers (jax.grad through `amsa`).
    x64 = any(
        (a.dtype if hasattr(a, "dtype") else np.asarray(a).dtype) == np.float64 for a in arrays
    )
    if x64:
        device_precision.refuse_emulated_float64()
    with (
        compilation_cache_scope(),
        jax.default_matmul_precision("highest"),
        jax.enable_x64(True) if x64 else contextlib.nullcontext(),
    ):
        yield


def amsa(
    w: Float[ArrayLike, "*pixels bands"],
    to_sun: Float[ArrayLike, "*#pixels 3"],
    to_sensor: Float[ArrayLike, "*#pixels 3"],
    normal: Float[ArrayLike, "*#pixels 3"],
    params: HapkeParams,
    backend: str = "jax",
) -> Float[np.ndarray | jax.Array, "*pixels bands"]:
    """Hapke (2002) AMSA bidirectional reflectance with Hapke (1984) roughness.

    Args:
        w: single-scattering albedo in [0, 1], shape ``pixels + (bands,)``: the last
            axis holds the bands, whatever the geometry's shape (``pixels`` alone is one
            band when the geometry has that pixel shape).
        to_sun: vectors (east, north, up) from the surface toward the light source (the
            sun, or a laboratory lamp), shape ``pixels + (3,)`` or ``(3,)`` for all
            pixels; any length > 0.
        to_sensor: vectors toward the sensor (the observer), same rule.
        normal: outward surface normals, same rule (need not be unit length).
        params: `HapkeParams` (phase function, roughness [rad], opposition effects).
        backend: ``"jax"`` (jitted XLA; CPU or GPU) or ``"numba"`` (CPU, parallel).

    Returns:
        r [1/sr] (RADF = pi r), a NumPy array of the shape of ``w`` whichever backend
        ran: float32 when every input is float32, else float64 (float16 is refused).
        NaN where the geometry is invalid (cos i <= 0 or cos e <= 0 in the local frame)
        or w is NaN. Inside a JAX transformation (``jax.grad``, ``jax.jit``, inputs
        that are tracers) the JAX backend returns the traced JAX array instead, so the
        model can be differentiated.
    """
    check_choice("backend", backend, BACKENDS)
    if not isinstance(params, HapkeParams):
        raise ValueError(f"params must be a lumaxlike.HapkeParams, got {type(params).__name__}")
    given = {"w": w, "to_sun": to_sun, "to_sensor": to_sensor, "normal": normal}
    arrays: dict[str, np.ndarray | jax.Array] = {
        k: (v if isinstance(v, jax.Array) else np.asarray(v)) for k, v in given.items()
    }
    for name, array in arrays.items():
        check_float_dtype(name, array.dtype)
    traced = any(isinstance(a, jax.core.Tracer) for a in arrays.values())
    w, geometry = arrays.pop("w"), arrays
    shape = layout("w", w, geometry)
    dtype = np.result_type(w.dtype, *(g.dtype for g in geometry.values()), np.float32)
    if backend == "numba":
        to_sun, to_sensor, normal = (
            np.broadcast_to(g, shape.pixel_shape + (3,)).reshape(shape.n_pixels, 3)
            for g in geometry.values()
        )
        w_rows = np.asarray(w).reshape(shape.n_pixels, shape.n_bands)
        r = numba_model.amsa_pixels(w_rows, to_sun, to_sensor, normal, params)
        return r.astype(dtype, copy=False).reshape(w.shape)
    with precision_scope(w, *geometry.values()):
        flat_geometry = [
            jnp.broadcast_to(jnp.asarray(g, dtype), shape.pixel_shape + (3,)).reshape(
                shape.n_pixels, 3
            )
            for g in geometry.values()
        ]
        flat_w = jnp.asarray(w, dtype).reshape(shape.n_pixels, shape.n_bands)
        # Parameters in the inputs' precision: float64 leaves (e.g. np.float64 from
        # np.radians) would otherwise promote a float32 call to float64 under x64.
        params = jax.tree_util.tree_map(lambda leaf: jnp.asarray(leaf, dtype), params)
        r = _amsa_flat(flat_w, *flat_geometry, params).reshape(w.shape)
    return r if traced else np.asarray(r)


_h_function_jit = jax.jit(jax_equations.h_function)
H_FUNCTION_KINDS = ("hapke2002", "hapke1981", "exact")
_h_function_flat_jit = {
    "hapke1981": jax.jit(jax.vmap(jax_h_functions.h_hapke1981)),
    "exact": jax.jit(jax.vmap(jax_h_functions.h_exact)),
}


def h_function(
    w: Float[ArrayLike, "*#shape"], x: Float[ArrayLike, "*#shape"], kind: str = "hapke2002"
) -> Float[np.ndarray, "*shape"]:
    """Chandrasekhar's H-function for isotropic scatterers, exact or approximated.

    ``kind`` (gamma = sqrt(1 - w)):

    - ``"hapke2002"`` (default): Hapke (2002, Icarus 157:523, eq. 13),
      H(x) = 1 / (1 - w x [r0 + (1 - 2 r0 x)/2 ln((1 + x)/x)]), r0 = (1 - gamma)/(1 + gamma);
      within 1e-2 relative of the exact H (7.7e-3 at w = 1).
    - ``"hapke1981"``: Hapke's (1981, JGR 86:3039) two-stream approximation,
      H(x) = (1 + 2x)/(1 + 2 gamma x), as in USGS ISIS3 ``photomet``; ~4 % off.
    - ``"exact"``: Chandrasekhar's (1960, Radiative Transfer, ch. V) H, the solution of
      H(x) = 1 + (w/2) x H(x) integral_0^1 H(y)/(x + y) dy, i.e.
      ln H(x) = -(x/pi) integral_0^(pi/2) ln(1 - w t cot t)/(cos^2 t + x^2 sin^2 t) dt,
      to 1e-13 relative (a Chebyshev series in gamma, see `_model._exact_h_tables`).

    All three give H(w, 0) = H(0, x) = 1.

    Args:
        w: single-scattering albedo in [0, 1]; any shape broadcasting against `x`.
        x: cosine of an angle (mu0e or mue) in [0, 1].
        kind: ``"hapke2002"``, ``"hapke1981"`` or ``"exact"``.
    Returns:
        NumPy array of H values [-], the broadcast shape: float32 if both inputs are
        float32, else float64 (float16 is refused).
    """
    check_choice("kind", kind, H_FUNCTION_KINDS)
    w, x = np.asarray(w), np.asarray(x)
    check_float_dtype("w", w.dtype)
    check_float_dtype("x", x.dtype)
    w, x = np.broadcast_arrays(w, x)
    dtype = np.result_type(w.dtype, x.dtype, np.float32)
    with precision_scope(np.empty(0, dtype)):
        w_jax, x_jax = jnp.asarray(w, dtype), jnp.asarray(x, dtype)
        if kind == "hapke2002":
            return np.asarray(_h_function_jit(w_jax, x_jax))
        h = _h_function_flat_jit[kind](w_jax.reshape(-1), x_jax.reshape(-1))
        return np.asarray(h, dtype).reshape(w.shape)
