"""One chunk of `sample`: every (pixel, band) problem's chains and their summaries, in
one jitted program (`kernel.sample_problem` under `jax.vmap` over bands and pixels)."""

from __future__ import annotations

from functools import partial

import jax
import jax.numpy as jnp
from blackjax.diagnostics import ess_bulk, rhat

from .._model.columns_program import split_columns
from .._params import PARAMETER_NAMES
from .density import log_likelihood_for, pixel_rows
from .kernel import sample_problem

__all__ = ["QUANTILE_LEVELS", "sample_chunk"]

QUANTILE_LEVELS = (0.025, 0.16, 0.5, 0.84, 0.975)


@partial(
    jax.jit,
    static_argnames=(
        "free_index", "key", "kinds", "num_chains", "num_warmup", "num_samples",
        "integration_steps",
    ),
)  # fmt: skip
def sample_chunk(
    rng, problem_ids, refl, to_sun, to_sensor, normal, fixed, z_center, metric, inv_var,
    prior_mean, prior_precision, lower, upper, *, free_index, key, kinds, num_chains,
    num_warmup, num_samples, integration_steps,
):  # fmt: skip
    """Sample every problem of a chunk and summarise its draws.

    Args:
        rng: the run's JAX key; problem_ids (pixels, bands) int: each problem's index in
            the whole run (its key is `rng` folded with it, so draws do not depend on
            the chunking); refl (pixels, bands, observations) with NaN for observations
            left out; geometry (pixels, observations, 3) each; fixed: values of
            `PARAMETER_NAMES`; z_center (pixels, bands, p) and metric (pixels, bands,
            p, p): the Laplace start in unconstrained coordinates; inv_var (bands,)
            1/refl_sigma^2; prior_mean, prior_precision, lower, upper (p,).
    Returns:
        dict of arrays over (pixels, bands): quantiles (..., p, 5), mean (..., p),
        covariance (..., p, p), rhat, ess (..., p), acceptance, step_size, divergences;
        draws (..., chains, draws, p) (always: one program whether the caller keeps
        them or not).
    """
    dtype = refl.dtype
    program = split_columns(tuple(PARAMETER_NAMES[k] for k in free_index), key, dtype)
    rows = jax.vmap(partial(pixel_rows, program, fixed=fixed, free_index=free_index, key=key))(
        to_sun, to_sensor, normal
    )
    use = jnp.isfinite(refl)
    refl = jnp.where(use, refl, 0.0)
    run = partial(
        sample_problem,
        log_likelihood=log_likelihood_for(free_index, key, dtype),
        kinds=kinds,
        lower=lower,
        upper=upper,
        num_chains=num_chains,
        num_warmup=num_warmup,
        num_samples=num_samples,
        integration_steps=integration_steps,
    )

    def problem(problem_id, rows, refl, use, inv_var, z_center, metric):
        data = (rows, refl, use, inv_var, prior_mean, prior_precision)
        return run(jax.random.fold_in(rng, problem_id), data, z_center, metric)

    per_band = jax.vmap(problem, in_axes=(0, None, 0, 0, 0, 0, 0))
    out = jax.vmap(per_band, in_axes=(0, 0, 0, 0, None, 0, 0))(
        problem_ids, rows, refl, use, inv_var, z_center, metric
    )
    draws = out.pop("draws")  # (pixels, bands, chains, draws, p)
    shape = draws.shape
    pooled = draws.reshape(shape[:2] + (shape[2] * shape[3], shape[4]))
    out["quantiles"] = jnp.moveaxis(
        jnp.quantile(pooled, jnp.asarray(QUANTILE_LEVELS, dtype), axis=2), 0, -1
    )
    out["mean"] = jnp.mean(pooled, axis=2)
    centred = pooled - out["mean"][:, :, None, :]
    out["covariance"] = jnp.einsum("...ki,...kj->...ij", centred, centred) / (pooled.shape[2] - 1)
    # (chains, draws, pixels x bands x p): blackjax's diagnostics squeeze axes of length 1
    by_chain = jnp.moveaxis(draws, (2, 3), (0, 1)).reshape(shape[2], shape[3], -1)
    summary_shape = shape[:2] + shape[4:]
    # blackjax's diagnostics broadcast by rank promotion (its own code): allowed here only
    with jax.numpy_rank_promotion("allow"):
        out["rhat"] = jnp.reshape(rhat(by_chain), summary_shape)
        out["ess"] = jnp.reshape(ess_bulk(by_chain), summary_shape)
    out["draws"] = draws
    return out
