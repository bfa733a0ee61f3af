"""The Hapke model in JAX: scalar core with an analytic `custom_jvp`, lifted by `vmap`.

`reflectance_core(w, terms, key)` is the scalar model of configuration `key` (see
`family`) given the per-pixel terms; its JVP rule gives dr/dw analytically
(`equations.reflectance_and_slope`) and differentiates the w-independent terms by
autodiff, so `jax.grad`/`jax.jacfwd` through b, c, roughness, K and the geometry are
right too. `amsa_scalar` evaluates one pixel and one band from the geometry; `vmap` over
the band axis with the geometry unbatched computes the pixel terms once per pixel (JAX
batches only what depends on w), `amsa_vector` maps pixels and `amsa_image` rows and
columns.
"""

from __future__ import annotations

import functools

import jax
import jax.numpy as jnp
from jax.custom_derivatives import SymbolicZero

from .._params import HapkeParams
from .family import DEFAULT_KEY, ModelKey, jax_equations_for

__all__ = [
    "pixel_terms",
    "reflectance_core",
    "amsa_scalar",
    "amsa_spectrum",
    "amsa_vector",
    "amsa_image",
]


def pixel_terms(to_sun, to_sensor, normal, params: HapkeParams):
    """`equations.PixelTerms` for one pixel of the model `params`: vectors of shape (3,).

    The parameters are cast to the geometry's precision, so float32 geometry is
    evaluated in float32 even where the parameters are NumPy float64 scalars (and the
    default Legendre zeros do not promote it either).
    """
    dtype = jnp.result_type(to_sun, to_sensor, normal)
    legendre, use_legendre = params.legendre_coefficients(jnp, dtype)
    scalars = (jnp.asarray(value, dtype) for value in params.scalars())
    equations = jax_equations_for(params.model_key)
    return equations.pixel_terms(to_sun, to_sensor, normal, *scalars, legendre, use_legendre)


def reflectance_core(w, terms, key: ModelKey = DEFAULT_KEY):
    """Scalar r(w) [1/sr] of configuration `key` given its per-pixel terms
    (`equations.reflectance`), with the analytic dr/dw as its JVP rule."""
    return _reflectance_core_for(key)(w, terms)


@functools.cache
def _reflectance_core_for(key: ModelKey):
    equations = jax_equations_for(key)

    @jax.custom_jvp
    def core(w, terms):
        return equations.reflectance(w, terms)

    def core_jvp(primals, tangents):
        w, terms = primals
        w_dot, terms_dot = tangents
        r, dr_dw = equations.reflectance_and_slope(w, terms)
        r_dot = 0.0 * r if isinstance(w_dot, SymbolicZero) else dr_dw * w_dot
        terms_dot_leaves = jax.tree_util.tree_leaves(terms_dot)
        if not all(isinstance(t, SymbolicZero) for t in terms_dot_leaves):  # d/dterms: autodiff
            terms_dot = jax.tree_util.tree_map(
                lambda t: jnp.zeros(t.shape, t.dtype) if isinstance(t, SymbolicZero) else t,
                terms_dot,
                is_leaf=lambda t: isinstance(t, SymbolicZero),
            )
            r_dot = (
                r_dot + jax.jvp(lambda t: equations.reflectance(w, t), (terms,), (terms_dot,))[1]
            )
        return r, r_dot

    # Symbolic zeros: when only w carries a tangent (the solvers' case), no work is spent
    # on the terms' zero tangents.
    core.defjvp(core_jvp, symbolic_zeros=True)
    return core


def amsa_scalar(w, to_sun, to_sensor, normal, params: HapkeParams):
    """Bidirectional reflectance r [1/sr] for one pixel and one band.

    Args:
        w: single-scattering albedo, scalar in (0, 1).
        to_sun, to_sensor, normal: vectors of shape (3,) toward the source, toward the
            observer, and along the outward surface normal.
        params: the model and its other parameters.
    """
    return reflectance_core(w, pixel_terms(to_sun, to_sensor, normal, params), params.model_key)


amsa_spectrum = jax.vmap(amsa_scalar, in_axes=(0, None, None, None, None))
"""r for one pixel and all bands: w (bands,), geometry (3,) -> (bands,)."""

amsa_vector = jax.vmap(amsa_spectrum, in_axes=(0, 0, 0, 0, None))
"""r for a vector of pixels: w (pixels, bands), geometry (pixels, 3) -> (pixels, bands)."""

amsa_image = jax.vmap(amsa_vector, in_axes=(0, 0, 0, 0, None))
"""r for an image: w (rows, cols, bands), geometry (rows, cols, 3) -> (rows, cols, bands)."""
