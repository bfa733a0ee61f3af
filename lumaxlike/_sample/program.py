"""One chunk of `sample`: every problem's chains and their summaries, in one jitted
program (`kernel.sample_problem` under `jax.vmap`): over pixels and bands where each
(pixel, band) is its own problem (`sample_chunk`), over pixels where a pixel's bands
share parameters (`sample_joint_chunk`)."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp

from .._model.columns_program import split_columns
from .._model.jax_executables import stored_jit
from .._params import PARAMETER_NAMES
from . import transform
from .density import joint_log_density, log_density, log_likelihood_for, pixel_rows
from .kernel import sample_problem

__all__ = ["QUANTILE_LEVELS", "sample_chunk", "sample_joint_chunk"]

QUANTILE_LEVELS: tuple[float, ...] = (0.025, 0.16, 0.5, 0.84, 0.975)
_STATIC = ("free_index", "key", "kinds", "chains")


def _rows_and_likelihood(geometry, fixed, free_index, key, dtype):
    to_sun, to_sensor, normal = geometry
    program = split_columns(tuple(PARAMETER_NAMES[k] for k in free_index), key, dtype)
    rows = jax.vmap(partial(pixel_rows, program, fixed=fixed, free_index=free_index, key=key))(
        to_sun, to_sensor, normal
    )
    return rows, log_likelihood_for(free_index, key)


# store_on_cpu=False: on the CPU kept in the process, not stored (`stored_jit`'s docstring)
@stored_jit(static_argnames=_STATIC, store_on_cpu=False)
def sample_chunk(
    rng,
    problem_ids,
    refl,
    geometry,
    fixed,
    start,
    inv_var,
    prior,
    bounds,
    *,
    free_index,
    key,
    kinds,
    chains,
):
    """Sample every (pixel, band) problem of a chunk and summarise its draws.

    Args:
        rng: the run's JAX key; problem_ids (pixels, bands) int: each problem's index in
            the whole run (its key is `rng` folded with it, so draws do not depend on
            the chunking); refl (pixels, bands, observations) with NaN for observations
            left out; geometry (to_sun, to_sensor, normal), (pixels, observations, 3)
            each; fixed: values of `PARAMETER_NAMES`; start = (z_center (pixels, bands,
            p), metric (pixels, bands, p, p)): the Laplace start in unconstrained
            coordinates; inv_var (bands,) 1/refl_sigma^2; prior = (prior_mean,
            prior_precision) (pixels, bands, p); bounds = (lower, upper) (p,); chains =
            (num_chains, num_warmup, num_samples, integration_steps), static.
    Returns:
        dict of arrays over (pixels, bands): quantiles (..., p, 5), mean, minimum,
        maximum (..., p), covariance (..., p, p), acceptance, step_size, divergences;
        draws (..., chains, draws, p) (always: the host computes R-hat and ESS from them,
        `diagnostics.chain_diagnostics`).
    """
    dtype = refl.dtype
    rows, log_likelihood = _rows_and_likelihood(geometry, fixed, free_index, key, dtype)
    (z_center, metric), (prior_mean, prior_precision), (lower, upper) = start, prior, bounds
    use = jnp.isfinite(refl)
    refl = jnp.where(use, refl, 0.0)
    density = partial(
        log_density, log_likelihood=log_likelihood, kinds=kinds, lower=lower, upper=upper
    )
    num_chains, num_warmup, num_samples, integration_steps = chains
    run = partial(
        sample_problem,
        num_chains=num_chains,
        num_warmup=num_warmup,
        num_samples=num_samples,
        integration_steps=integration_steps,
    )

    def problem(problem_id, rows, refl, use, inv_var, z_center, metric, mean, precision):
        data = (rows, refl, use, inv_var, mean, precision)
        return run(
            jax.random.fold_in(rng, problem_id), partial(density, data=data), z_center, metric
        )

    per_band = jax.vmap(problem, in_axes=(0, None, 0, 0, 0, 0, 0, 0, 0))
    out = jax.vmap(per_band, in_axes=(0, 0, 0, 0, None, 0, 0, 0, 0))(
        problem_ids, rows, refl, use, inv_var, z_center, metric, prior_mean, prior_precision
    )
    draws = transform.to_constrained(out.pop("path"), kinds, lower, upper)
    return _summaries(out, draws, dtype)


@stored_jit(static_argnames=_STATIC + ("n_band_free",), store_on_cpu=False)
def sample_joint_chunk(
    rng,
    problem_ids,
    refl,
    geometry,
    fixed,
    start,
    inv_var,
    prior,
    bounds,
    *,
    free_index,
    key,
    kinds,
    n_band_free,
    chains,
):
    """Sample every pixel's joint problem of a chunk (parameters shared by its bands).

    Args:
        As `sample_chunk`, with a problem per pixel: problem_ids (pixels,); start =
        (z_center (pixels, D), metric (pixels, D, D)), D = bands p + s (band 0's per-band
        parameters, band 1's, ..., the shared ones; `n_band_free` = p); prior
        (pixels, D) each; bounds and `kinds` (D,); `free_index` the
        parameters of one band's likelihood (per-band ones, then shared).
    Returns:
        dict of arrays over pixels: quantiles (..., D, 5), mean, minimum, maximum
        (..., D), covariance (..., D, D), acceptance, step_size, divergences; draws
        (..., chains, draws, D).
    """
    dtype = refl.dtype
    rows, log_likelihood = _rows_and_likelihood(geometry, fixed, free_index, key, dtype)
    (z_center, metric), (prior_mean, prior_precision), (lower, upper) = start, prior, bounds
    use = jnp.isfinite(refl)
    refl = jnp.where(use, refl, 0.0)
    density = partial(
        joint_log_density,
        log_likelihood=log_likelihood,
        kinds=kinds,
        lower=lower,
        upper=upper,
        n_band_free=n_band_free,
    )
    num_chains, num_warmup, num_samples, integration_steps = chains
    run = partial(
        sample_problem,
        num_chains=num_chains,
        num_warmup=num_warmup,
        num_samples=num_samples,
        integration_steps=integration_steps,
    )

    def problem(problem_id, rows, refl, use, z_center, metric, mean, precision):
        data = (rows, refl, use, inv_var, mean, precision)
        return run(
            jax.random.fold_in(rng, problem_id), partial(density, data=data), z_center, metric
        )

    out = jax.vmap(problem)(
        problem_ids, rows, refl, use, z_center, metric, prior_mean, prior_precision
    )
    draws = transform.to_constrained(out.pop("path"), kinds, lower, upper)
    return _summaries(out, draws, dtype)


def _summaries(out, draws, dtype):
    """`out` with the summaries of `draws` (problems..., chains, draws, p) added: all but
    the chains' diagnostics, which need an FFT (`diagnostics`: on the host)."""
    batch = draws.ndim - 3
    shape = draws.shape
    pooled = draws.reshape(shape[:batch] + (shape[batch] * shape[batch + 1], shape[-1]))
    out["quantiles"] = jnp.moveaxis(
        jnp.quantile(pooled, jnp.asarray(QUANTILE_LEVELS, dtype), axis=batch), 0, -1
    )
    out["mean"] = jnp.mean(pooled, axis=batch)
    out["minimum"] = jnp.min(pooled, axis=batch)
    out["maximum"] = jnp.max(pooled, axis=batch)
    centred = pooled - jnp.expand_dims(out["mean"], batch)
    out["covariance"] = jnp.einsum("...ki,...kj->...ij", centred, centred) / (
        pooled.shape[batch] - 1
    )
    out["draws"] = draws
    return out
