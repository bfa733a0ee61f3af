"""`sample`: the posterior of the free Hapke parameters of every pixel and band, by HMC
(blackjax), warm-started from `fit`."""

from __future__ import annotations

import math
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np

from .._inverse.fit import fit
from .._inverse.fit_arguments import check_bounds as _check_bounds
from .._inverse.fit_arguments import check_free
from .._inverse.invert import pad_pixels
from .._inverse.observation_masks import check_observation_limits
from .._inverse.observation_masks import masked_chunk as _masked
from .._inverse.status import Status
from .._model.forward import precision_scope
from .._params import PARAMETER_NAMES, HapkeParams
from .._shapes import as_float_array, check_band_sigma, check_positive_int
from . import transform
from .program import sample_chunk
from .result import SampleResult

__all__ = ["CHUNK_BYTES", "DEFAULT_INTEGRATION_STEPS", "sample"]

# Leapfrog steps per HMC transition (fixed, so every lane of the batch does the same
# work); with the Laplace-preconditioned metric the tuned step size makes a trajectory
# of about a quarter period of the whitened posterior (benchmarks/bench_sample.py).
DEFAULT_INTEGRATION_STEPS = 8
# Bytes of draws a chunk holds (its memory bound: the draws and the warm-up's path).
CHUNK_BYTES = 1 << 26
# Margin inside a finite interval where a start on its bound is moved to (relative).
_START_MARGIN = 1e-4
# Largest standard deviation of the start in unconstrained coordinates (a logistic
# distribution, a flat prior's image in logit coordinates, has 1.8).
_MAX_START_SIGMA = 2.0
_SAMPLED = (Status.CONVERGED, Status.MAX_ITER, Status.UNDETERMINED)


def _check_prior(prior, free):
    mean = np.zeros(len(free))
    precision = np.zeros(len(free))
    for name, value in (prior or {}).items():
        if name not in free:
            raise ValueError(f"prior names {name!r}, which is not in free={free!r}")
        try:
            centre, sigma = (float(v) for v in value)
        except (TypeError, ValueError):
            raise ValueError(
                f"prior[{name!r}] must be a pair (mean, sigma), got {value!r}"
            ) from None
        if not (math.isfinite(centre) and math.isfinite(sigma) and sigma > 0.0):
            raise ValueError(
                f"prior[{name!r}] needs a finite mean and a positive finite sigma, got {value!r}"
            )
        j = free.index(name)
        mean[j], precision[j] = centre, 1.0 / sigma**2
    return mean, precision


def sample(
    refl,
    to_sun,
    to_sensor,
    normal,
    params: HapkeParams,
    free=("w", "b", "c"),
    *,
    refl_sigma=None,
    prior: Mapping | None = None,
    shared=None,
    num_samples: int = 1000,
    num_chains: int = 4,
    num_warmup: int = 300,
    seed: int = 0,
    bounds: Mapping | None = None,
    observation_limits: Mapping | None = None,
    min_observations: int | None = None,
    min_ess: float = 400.0,
    max_rhat: float = 1.01,
    integration_steps: int = DEFAULT_INTEGRATION_STEPS,
    chunk_size: int | None = None,
    return_samples: bool = False,
    fit_solver: str | None = None,
) -> SampleResult:
    """Sample the posterior of the free Hapke parameters of every pixel and band.

    The problems are `fit`'s: each (pixel, band) with its observations, the parameters in
    `free` unknown, the others fixed at `params`. The posterior is
    p(x | r_obs) proportional to exp(-sum_k (r_k(x) - r_obs,k)^2 / (2 refl_sigma^2))
    times the prior: flat within the bounds (`lumaxlike.default_bounds`, or `bounds`),
    times a Gaussian for each parameter in `prior`. It is sampled by HMC (blackjax) in
    unconstrained coordinates (a logit or log transform of each bounded parameter, with
    its Jacobian), every problem's chains in one batched, jitted JAX program (CPU or
    GPU, in the precision of `refl`), warm-started from `fit`'s solution and Laplace
    covariance, with a per-problem step size (dual averaging) and dense metric (the
    Laplace covariance, then the warm-up draws' covariance).

    Args:
        refl: observed bidirectional reflectance r [1/sr], ``pixels + (bands,
            observations)``, float32 or float64 (the sampler's precision); non-finite
            observations are left out of their problem, as in `fit`.
        to_sun: vectors toward the light source, ``pixels + (observations, 3)`` or
            ``(observations, 3)``, as in `fit`.
        to_sensor: vectors toward the sensor, same rule.
        normal: outward surface normals, same rule.
        params: `HapkeParams`: the fixed parameters (and the fit's starting values).
        free: the sampled parameters, as in `fit` ("w" and any of "b", "c", "roughness",
            "hs", "bs0", "hc", "bc0", "porosity_k", "asymmetry").
        refl_sigma: 1-sigma Gaussian noise of every observation [1/sr], a scalar or one
            value per band (required: the posterior's width is set by it).
        prior: {name: (mean, sigma)}: a Gaussian prior on that free parameter (in its
            units), within its bounds; the others are flat within their bounds.
        shared: not supported yet (a ValueError if given).
        num_samples: draws per chain kept after warm-up.
        num_chains: chains per problem (at least 2, for R-hat).
        num_warmup: adaptation transitions per chain (discarded), at least 10.
        seed: the random seed; a problem's draws depend on the seed and its position
            in the image alone (not on the chunking).
        bounds: {name: (lower, upper)} replacing `lumaxlike.default_bounds`, as in `fit`
            (the flat prior's support).
        observation_limits: {angle: (lower, upper)} [rad], as in `fit`.
        min_observations: valid observations a problem needs, as in `fit`.
        min_ess: a problem whose bulk ESS is below this in any free parameter is
            NOT_MIXED.
        max_rhat: a problem whose R-hat exceeds this in any free parameter is NOT_MIXED.
        integration_steps: leapfrog steps per HMC transition.
        chunk_size: pixels per chunk (memory is bounded by the chunk: its draws take
            pixels x bands x chains x (num_samples + num_warmup) x p floats); default
            about 64 MB of draws.
        return_samples: keep the draws in the result (`SampleResult.draws`; write them
            with `SampleResult.to_zarr`); memory then grows with the image: use it for a
            region of interest.
        fit_solver: the solver of the warm-start `fit`: default "numba" ("jax" for
            ``params.h_function="exact"``, which numba's fit does not support).

    Returns:
        `SampleResult`: per problem, quantiles at 2.5, 16, 50, 84 and 97.5 %, mean,
        covariance, R-hat, ESS, acceptance rate, divergences and status (CONVERGED or
        NOT_MIXED where sampled), and the warm-start fit.

    Raises:
        ValueError: naming the argument, for anything `fit` refuses, a missing or
            non-positive refl_sigma, a prior on a parameter not in `free` or without a
            positive sigma, fewer than 2 chains, fewer than 10 warm-up or 4 samples,
            non-positive min_ess, max_rhat not above 1, or `shared`.
    """
    if shared:
        raise ValueError(
            "sample(shared=...) is not supported yet: sample each band's problem on its own"
        )
    if not isinstance(params, HapkeParams):
        raise ValueError(f"params must be a lumaxlike.HapkeParams, got {type(params).__name__}")
    free = check_free(free, params)
    refl = as_float_array("refl", refl)
    if refl.ndim < 2:
        raise ValueError(f"refl must have shape pixels + (bands, observations), got {refl.shape}")
    pixel_shape, (n_bands, n_obs) = refl.shape[:-2], refl.shape[-2:]
    if refl_sigma is None:
        raise ValueError("refl_sigma is required: the 1-sigma noise of the observations [1/sr]")
    band_sigma = check_band_sigma(refl_sigma, n_bands)
    if not np.all(band_sigma > 0.0):
        raise ValueError("refl_sigma must be positive")
    num_chains = check_positive_int("num_chains", num_chains)
    if num_chains < 2:
        raise ValueError(f"num_chains must be at least 2 (R-hat compares chains), got {num_chains}")
    num_samples = check_positive_int("num_samples", num_samples)
    num_warmup = check_positive_int("num_warmup", num_warmup)
    if num_samples < 4 or num_warmup < 10:
        raise ValueError(
            f"num_samples must be >= 4 and num_warmup >= 10, got {num_samples}, {num_warmup}"
        )
    integration_steps = check_positive_int("integration_steps", integration_steps)
    if not float(min_ess) > 0.0:
        raise ValueError(f"min_ess must be positive, got {min_ess!r}")
    if not float(max_rhat) > 1.0:
        raise ValueError(f"max_rhat must exceed 1, got {max_rhat!r}")
    prior_mean, prior_precision = _check_prior(prior, free)
    dtype = np.float32 if refl.dtype == np.float32 else np.float64
    lower, upper = _check_bounds(bounds, free, dtype)
    kinds = transform.kinds_of(lower, upper)
    if fit_solver is None:
        fit_solver = "jax" if params.h_function == "exact" else "numba"

    warm = fit(
        refl, to_sun, to_sensor, normal, params, free=free, solver=fit_solver, bounds=bounds,
        refl_sigma=band_sigma, observation_limits=observation_limits,
        min_observations=min_observations,
    )  # fmt: skip
    n_pixels = int(np.prod(pixel_shape, dtype=np.int64))
    n_free = len(free)

    def flat(a):
        return np.reshape(a, (n_pixels, n_bands) + np.shape(a)[len(pixel_shape) + 1 :])

    values = np.stack([flat(warm.values[name]) for name in free], axis=-1)
    z_center, metric = _laplace_start(
        values, flat(warm.covariance), kinds, lower, upper, prior_mean, prior_precision
    )
    sampled = np.isin(flat(warm.status), np.array(_SAMPLED, np.int8))

    geometry = [
        as_float_array(n, g)
        for n, g in (("to_sun", to_sun), ("to_sensor", to_sensor), ("normal", normal))
    ]
    flat_refl = refl.reshape(n_pixels, n_bands, n_obs)
    flat_geometry = [
        np.broadcast_to(g, pixel_shape + (n_obs, 3)).reshape(n_pixels, n_obs, 3) for g in geometry
    ]
    limits = check_observation_limits(observation_limits)
    per_pixel = (
        n_bands * num_chains * (num_samples + num_warmup) * n_free * np.dtype(dtype).itemsize
    )
    chunk = (
        max(1, CHUNK_BYTES // per_pixel)
        if chunk_size is None
        else check_positive_int("chunk_size", chunk_size)
    )
    # one chunk shape per power of two: calls with a few pixels share their compilation
    chunk = min(chunk, 1 << max(n_pixels - 1, 0).bit_length())

    outputs = {
        "quantiles": np.full((n_pixels, n_bands, n_free, 5), np.nan, dtype),
        "mean": np.full((n_pixels, n_bands, n_free), np.nan, dtype),
        "covariance": np.full((n_pixels, n_bands, n_free, n_free), np.nan, dtype),
        "rhat": np.full((n_pixels, n_bands, n_free), np.nan, dtype),
        "ess": np.full((n_pixels, n_bands, n_free), np.nan, dtype),
        "acceptance": np.full((n_pixels, n_bands), np.nan, dtype),
        "divergences": np.zeros((n_pixels, n_bands), np.int32),
    }
    if return_samples:
        outputs["draws"] = np.full(
            (n_pixels, n_bands, num_chains, num_samples, n_free), np.nan, dtype
        )
    fixed = np.array([0.5] + [float(v) for v in params.scalars()])
    free_index = tuple(PARAMETER_NAMES.index(name) for name in free)
    inv_var = 1.0 / np.broadcast_to(band_sigma, (n_bands,)) ** 2
    ids = np.arange(n_pixels * n_bands, dtype=np.int64).reshape(n_pixels, n_bands)
    # float32: JAX's 64-bit mode off in this scope too (blackjax draws its momenta in
    # the default float type, which would promote the float32 chains to float64)
    with precision_scope(np.empty(0, dtype)), jax.enable_x64(dtype == np.float64):
        rng = jax.random.key(int(seed))
        constants = [
            jnp.asarray(a, dtype)
            for a in (fixed, inv_var, prior_mean, prior_precision, lower, upper)
        ]
        for first in range(0, n_pixels, chunk):
            last = min(first + chunk, n_pixels)
            if not sampled[first:last].any():
                continue
            pieces, _ = _masked(
                flat_refl[first:last], [g[first:last] for g in flat_geometry], limits
            )
            active = sampled[first:last]
            pieces[0] = np.where(active[..., None], pieces[0], np.nan)
            padded = [pad_pixels(p, chunk, np.nan if i == 0 else 1.0) for i, p in enumerate(pieces)]
            centre = pad_pixels(np.where(active[..., None], z_center[first:last], 0.0), chunk, 0.0)
            eye = np.broadcast_to(np.eye(n_free), metric[first:last].shape)
            scale = pad_pixels(
                np.where(active[..., None, None], metric[first:last], eye), chunk, 0.0
            )
            scale[last - first :] = np.eye(n_free)
            chunk_ids = pad_pixels(ids[first:last], chunk, 0)
            solved = sample_chunk(
                rng, jnp.asarray(chunk_ids), *(jnp.asarray(p, dtype) for p in padded),
                constants[0], jnp.asarray(centre, dtype), jnp.asarray(scale, dtype), *constants[1:],
                free_index=free_index, key=params.model_key, kinds=kinds, num_chains=num_chains,
                num_warmup=num_warmup, num_samples=num_samples,
                integration_steps=integration_steps,
            )  # fmt: skip
            solved = jax.device_get(
                {k: v for k, v in solved.items() if k != "draws" or return_samples}
            )
            n = last - first
            for name, array in outputs.items():
                value = np.asarray(solved[name][:n])
                mask = active.reshape(active.shape + (1,) * (value.ndim - 2))
                array[first:last] = np.where(mask, value, array[first:last])

    status = flat(warm.status).copy()
    mixed = np.all(outputs["rhat"] <= max_rhat, axis=-1) & np.all(
        outputs["ess"] >= min_ess, axis=-1
    )
    status[sampled] = np.where(mixed[sampled], Status.CONVERGED, Status.NOT_MIXED)
    shape = pixel_shape + (n_bands,)

    def by_name(a):
        return {name: a[..., j].reshape(shape + a.shape[3:]) for j, name in enumerate(free)}

    return SampleResult(
        free=free,
        quantiles={
            name: outputs["quantiles"][:, :, j].reshape(shape + (5,)) for j, name in enumerate(free)
        },
        mean=by_name(outputs["mean"]),
        covariance=outputs["covariance"].reshape(shape + (n_free, n_free)),
        rhat=by_name(outputs["rhat"]),
        ess=by_name(outputs["ess"]),
        acceptance=outputs["acceptance"].reshape(shape),
        divergences=outputs["divergences"].reshape(shape),
        status=status.reshape(shape),
        observations=warm.observations,
        fit=warm,
        draws=outputs["draws"].reshape(shape + outputs["draws"].shape[2:])
        if return_samples
        else None,
    )


def _laplace_start(values, covariance, kinds, lower, upper, prior_mean, prior_precision):
    """The chains' Gaussian start in unconstrained coordinates from the fit: (centre (n,
    bands, p), covariance (n, bands, p, p)).

    The fit's Laplace precision plus the prior's gives the start's precision; its centre
    is the Gaussian product's mean (one Newton step from the fit toward the maximum a
    posteriori), moved inside the bounds by its standard deviation (between
    `_START_MARGIN` and 5 % of the interval: a fit on a bound, where the Laplace
    Gaussian says little), and both are mapped through the transform (the covariance by
    its Jacobian at the centre), each unconstrained standard deviation at most
    `_MAX_START_SIGMA`. Where the fit gave no usable covariance (UNDETERMINED, or not
    positive definite) the start is the unit Gaussian around the centre.
    """
    p = values.shape[-1]
    eye = np.eye(p)
    bounds = [jnp.asarray(b) for b in (lower, upper)]
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        finite = np.all(np.isfinite(values), axis=-1)
        usable = np.all(np.isfinite(covariance), axis=(-2, -1)) & finite
        safe = np.where(usable[..., None, None], covariance, eye)
        usable &= np.all(np.linalg.eigvalsh(safe) > 0.0, axis=-1)
        safe = np.where(usable[..., None, None], covariance, eye)
        posterior = np.linalg.inv(np.linalg.inv(safe) + prior_precision * eye)
        centre = np.where(
            np.isfinite(values), values, 0.5 * (lower + np.minimum(upper, lower + 1.0))
        )
        shift = np.einsum("...ij,...j->...i", posterior, prior_precision * (prior_mean - centre))
        centre = centre + np.where(usable[..., None], shift, 0.0)
        span = np.where(np.isfinite(upper - lower), upper - lower, 1.0)
        sigma = np.sqrt(np.diagonal(posterior, axis1=-2, axis2=-1))
        margin = np.clip(
            np.where(usable[..., None], sigma, 0.05 * span),
            _START_MARGIN * span,
            0.05 * span,
        )
        centre = np.clip(
            centre, lower + margin, np.where(np.isfinite(upper), upper - margin, np.inf)
        )
        slope = np.asarray(transform.dz_dx(jnp.asarray(centre), kinds, *bounds))
        metric = slope[..., :, None] * posterior * slope[..., None, :]
        z = np.asarray(transform.to_unconstrained(jnp.asarray(centre), kinds, *bounds))
        z_sigma = np.sqrt(np.diagonal(metric, axis1=-2, axis2=-1))
        capped = np.minimum(z_sigma, _MAX_START_SIGMA) / z_sigma
        metric = capped[..., :, None] * metric * capped[..., None, :]
    good = usable & np.all(np.isfinite(metric), axis=(-2, -1))
    metric = np.where(good[..., None, None], metric, eye)
    return z, metric
