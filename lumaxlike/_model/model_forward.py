"""The public forward model of any lumaxlike model, `reflectance`: a Hapke model
(`HapkeParams`, evaluated by `amsa`) or an empirical photometric function
(`PhotometricFunction`)."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float

from .._params import HapkeParams
from .._photometric import PhotometricFunction
from .._shapes import check_choice, check_float_dtype, layout
from .forward import BACKENDS, amsa, precision_scope
from .numba_model import as_kernel_array
from .photometric_backends import jax_photometric_for, reflectance_numba

__all__ = ["reflectance", "photometric_scale_jax"]


def photometric_scale_jax(to_sun, to_sensor, normal, model: PhotometricFunction):
    """pht/pi [1/sr] of one pixel (vectors of shape (3,)) in JAX; NaN where the
    geometry is invalid."""
    return jax_photometric_for(model.kind).photometric_scale(
        to_sun, to_sensor, normal, *model.scalars()
    )


@jax.jit
def _photometric_flat(albedo, to_sun, to_sensor, normal, model):
    scale = jax.vmap(photometric_scale_jax, in_axes=(0, 0, 0, None))(
        to_sun, to_sensor, normal, model
    )
    return albedo * scale[:, None]


def reflectance(
    albedo: Float[ArrayLike, "*pixels bands"],
    to_sun: Float[ArrayLike, "*#pixels 3"],
    to_sensor: Float[ArrayLike, "*#pixels 3"],
    normal: Float[ArrayLike, "*#pixels 3"],
    model: HapkeParams | PhotometricFunction,
    backend: str = "jax",
) -> Float[np.ndarray | jax.Array, "*pixels bands"]:
    """Bidirectional reflectance r [1/sr] of any lumaxlike model.

    Args:
        albedo: the model's albedo, shape ``pixels + (bands,)`` (the last axis holds the
            bands; ``pixels`` alone is one band when the geometry has that pixel shape):
            the single-scattering albedo w in [0, 1] for a `HapkeParams`, the albedo A
            (>= 0) of a `PhotometricFunction` (r = A pht / pi).
        to_sun: direction vectors (east, north, up) toward the light source, shape
            ``pixels + (3,)`` or ``(3,)`` for all pixels; any length > 0.
        to_sensor: direction vectors toward the sensor, same rule.
        normal: outward surface normals, same rule.
        model: `HapkeParams` (then exactly `lumaxlike.amsa`) or `PhotometricFunction`.
        backend: ``"jax"`` (CPU or GPU) or ``"numba"`` (CPU, parallel).

    Returns:
        r [1/sr] (RADF = pi r), a NumPy array of the shape of ``albedo``: float32 when
        every input is float32, else float64 (float16 is refused). NaN where the
        geometry is invalid (cos i <= 0 or cos e <= 0 locally) or the albedo is NaN.
        Inside a JAX transformation (inputs or a PhotometricFunction's parameters that are
        tracers) the JAX backend returns the traced array, so `jax.grad` works through
        the albedo and the parameters.

    Raises:
        ValueError: naming the argument, for another model type, an unknown backend,
            mismatched shapes or float16 arrays.
    """
    if isinstance(model, HapkeParams):
        return amsa(albedo, to_sun, to_sensor, normal, model, backend=backend)
    check_choice("backend", backend, BACKENDS)
    if not isinstance(model, PhotometricFunction):
        raise ValueError(
            f"model must be a lumaxlike.HapkeParams or lumaxlike.PhotometricFunction, got {type(model).__name__}"
        )
    given = {"albedo": albedo, "to_sun": to_sun, "to_sensor": to_sensor, "normal": normal}
    arrays: dict[str, np.ndarray | jax.Array] = {
        k: (v if isinstance(v, jax.Array) else np.asarray(v)) for k, v in given.items()
    }
    for name, array in arrays.items():
        check_float_dtype(name, array.dtype)
    leaves = [*arrays.values(), *jax.tree_util.tree_leaves(model)]
    traced = any(isinstance(a, jax.core.Tracer) for a in leaves)
    albedo, geometry = arrays.pop("albedo"), arrays
    shape = layout("albedo", albedo, geometry)
    dtype = np.result_type(albedo.dtype, *(g.dtype for g in geometry.values()), np.float32)
    if backend == "numba":
        to_sun, to_sensor, normal = (
            as_kernel_array(np.broadcast_to(g, shape.pixel_shape + (3,)).reshape(shape.n_pixels, 3))
            for g in geometry.values()
        )
        flat = as_kernel_array(np.asarray(albedo).reshape(shape.n_pixels, shape.n_bands))
        r = reflectance_numba(flat, to_sun, to_sensor, normal, model)
        return r.astype(dtype, copy=False).reshape(albedo.shape)
    with precision_scope(albedo, *geometry.values()):
        flat_geometry = [
            jnp.broadcast_to(jnp.asarray(g, dtype), shape.pixel_shape + (3,)).reshape(
                shape.n_pixels, 3
            )
            for g in geometry.values()
        ]
        flat = jnp.asarray(albedo, dtype).reshape(shape.n_pixels, shape.n_bands)
        model = jax.tree_util.tree_map(lambda leaf: jnp.asarray(leaf, dtype), model)
        r = _photometric_flat(flat, *flat_geometry, model).reshape(albedo.shape)
    return r if traced else np.asarray(r)
