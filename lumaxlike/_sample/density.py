"""The log posterior density of one problem, in the sampler's unconstrained coordinates.

log p(z | r_obs) = -1/2 sum_k (r_k(x) - r_obs,k)^2 / sigma^2  (Gaussian noise)
                   - 1/2 sum_j prior_precision_j (x_j - prior_mean_j)^2   (Gaussian priors;
                     precision 0: flat within the bounds)
                   + log |dx/dz|   (`transform`), x = x(z), up to a constant.

The likelihood's value and gradient come from the model's derivative program
(`columns_program.split_columns`) through `fit`'s own `residuals_and_columns`: its known
part (what depends on the geometry and the fixed parameters) is computed once per pixel
and observation (the "rows"), its step part once per problem and gradient evaluation, its
lane part per observation. The gradient is sum_k residual_k dr_k/dx / sigma^2 from the
program's columns (the analytic dr/dw, autodiff for the others): the likelihood is a
`jax.custom_jvp` function whose rule is that gradient, so `jax.grad` (which blackjax
calls) never differentiates the program itself.
"""

from __future__ import annotations

import jax
import jax.numpy as jnp

from .._inverse.fit.residual_columns import residuals_and_columns
from .._inverse.ordered_sums import dot_last
from .._model.family import jax_equations_for
from . import transform

__all__ = ["joint_log_density", "log_density", "log_likelihood_for", "pixel_rows"]


def pixel_rows(program, to_sun, to_sensor, normal, fixed, free_index, key):
    """The rows of one pixel: the known part of the derivative program for each of its
    observations. Geometry (observations, 3) each; fixed: values of `PARAMETER_NAMES`.
    Returns a tuple of (observations,) arrays."""
    equations = jax_equations_for(key)
    geometry = jax.vmap(equations.geometry_terms)(to_sun, to_sensor, normal)
    known = [fixed[k] for k in range(fixed.shape[0]) if k not in free_index]
    return program.known(*known, *geometry)


def log_likelihood_for(free_index: tuple[int, ...], key):
    """The Gaussian log-likelihood of one problem, ``f(x, rows, refl, use, inv_var)``:
    x (p,) the free parameters in the order of `free_index`; rows from `pixel_rows`;
    refl, use (observations,) (observations with use False count for nothing);
    inv_var 1/sigma^2 [sr^2]. A `jax.custom_jvp` function of x (its data get no
    derivative). The program runs in the precision of x."""

    def value_and_gradient(x, rows, refl, use, inv_var):
        # `fit`'s residuals and columns, with its run-time 1 (`unit`: inv_var / inv_var
        # is exactly 1): the work its outputs share is then stored once, where XLA:CPU otherwise
        # fused it into the sum of each column and computed it again there (4x the
        # gradient's time inside the sampler's loops; benchmarks/bench_sample.py)
        unit = inv_var / inv_var
        residual, columns = residuals_and_columns(x, (rows, refl, use, unit), free_index, key)
        value = -0.5 * inv_var * dot_last(residual, residual)
        gradient = -inv_var * jnp.stack([dot_last(c, residual) for c in columns])
        return value, gradient

    @jax.custom_jvp
    def log_likelihood(x, rows, refl, use, inv_var):
        return value_and_gradient(x, rows, refl, use, inv_var)[0]

    @log_likelihood.defjvp
    def _jvp(primals, tangents):
        value, gradient = value_and_gradient(*primals)
        return value, jnp.sum(gradient * tangents[0])  # the data's tangents: none wanted

    return log_likelihood


def log_density(z, data, log_likelihood, kinds, lower, upper):
    """log p(z | r_obs) up to a constant (module docstring); z (p,), data = (rows,
    refl, use, inv_var, prior_mean, prior_precision)."""
    rows, refl, use, inv_var, prior_mean, prior_precision = data
    x = transform.to_constrained(z, kinds, lower, upper)
    deviation = x - prior_mean
    log_prior = -0.5 * jnp.sum(prior_precision * deviation * deviation)
    return (
        log_likelihood(x, rows, refl, use, inv_var)
        + log_prior
        + transform.log_jacobian(z, kinds, lower, upper)
    )


def joint_log_density(z, data, log_likelihood, kinds, lower, upper, n_band_free):
    """log p(z | r_obs) of a pixel's joint problem (parameters shared by its bands) up
    to a constant. z (bands p + s,): band 0's p per-band parameters (p =
    `n_band_free`), band 1's, ..., then the s shared ones; data = (rows, refl (bands,
    observations), use (bands, observations), inv_var (bands,), prior_mean,
    prior_precision (bands p + s,)). The likelihood is the sum of the bands' own, each
    of its per-band parameters and the shared ones (in that order: `log_likelihood`'s)."""
    rows, refl, use, inv_var, prior_mean, prior_precision = data
    n_bands = refl.shape[0]
    x = transform.to_constrained(z, kinds, lower, upper)
    n_per_band = n_bands * n_band_free
    per_band = jnp.reshape(x[:n_per_band], (n_bands, n_band_free))
    shared = jnp.broadcast_to(x[n_per_band:], (n_bands, x.shape[0] - n_per_band))
    likelihood = jax.vmap(log_likelihood, in_axes=(0, None, 0, 0, 0))(
        jnp.concatenate([per_band, shared], axis=1), rows, refl, use, inv_var
    )
    deviation = x - prior_mean
    log_prior = -0.5 * jnp.sum(prior_precision * deviation * deviation)
    return jnp.sum(likelihood) + log_prior + transform.log_jacobian(z, kinds, lower, upper)
