"""`sample`: the posterior of the free Hapke parameters of every pixel and band, by HMC
(blackjax), warm-started from `fit`."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np

from .._declared_options import refuse_unknown, takes_options
from .._inverse.chunking import balanced_chunk
from .._inverse.fit.arguments import check_bounds as _check_bounds
from .._inverse.fit.arguments import check_free
from .._inverse.fit.fit import fit
from .._inverse.fit.observation_masks import check_observation_limits
from .._inverse.joint.joint import check_shared
from .._inverse.joint.priors import check_priors
from .._params import PARAMETER_NAMES, HapkeParams
from .._shapes import as_float_array, check_band_sigma, check_positive_int
from .._status import Status
from . import transform
from .chunks import ChunkProgram, ModeCheck, Problems, compile_chunk_ahead, sample_chunks
from .layout import ProblemLayout
from .modes import log_posterior, missed_mode, probe_starts
from .options import DEFAULT_INTEGRATION_STEPS, SampleSettings
from .program import sample_chunk, sample_joint_chunk
from .result import SampleResult
from .start import laplace_start

__all__ = ["CHUNK_BYTES", "DEFAULT_INTEGRATION_STEPS", "sample"]  # the second re-exported

# Bytes of draws a chunk holds (its memory bound: the draws and the warm-up's path).
CHUNK_BYTES = 1 << 26
_SAMPLED = (Status.CONVERGED, Status.MAX_ITER, Status.UNDETERMINED)


@takes_options(SampleSettings)
def sample(
    refl,
    to_sun,
    to_sensor,
    normal,
    params: HapkeParams,
    free=("w", "b", "c"),
    *,
    bounds: Mapping | None = None,
    chunk_size: int | None = None,
    return_samples: bool = False,
    fit_solver: str | None = None,
    settings: SampleSettings | None = None,
    **options,
) -> SampleResult:
    """Sample the posterior of the free Hapke parameters of every pixel and band
    (docs/sampling.md).

    The problems are `fit`'s (with the option ``shared``, each pixel is one joint problem
    over its bands); the posterior is the Gaussian likelihood of ``refl_sigma`` times a
    prior flat within the bounds and Gaussian for each parameter in ``prior``. It is
    sampled by HMC (blackjax) in unconstrained coordinates, all problems' chains in one
    batched JAX program (CPU or GPU, in `refl`'s precision), warm-started from `fit`.

    Args:
        refl: reflectance r [1/sr], ``pixels + (bands, observations)``, float32 or
            float64; non-finite observations are left out, as in `fit`.
        to_sun: vectors toward the light source, ``pixels + (observations, 3)`` or
            ``(observations, 3)``, as in `fit`.
        to_sensor: vectors toward the sensor, same rule.
        normal: outward surface normals, same rule.
        params: `HapkeParams`: the fixed parameters (and the fit's starting values).
        free: the sampled parameters, as in `fit`.
        bounds: {name: (lower, upper)} replacing `default_bounds` (the flat prior's support).
        chunk_size: the most pixels per chunk (bounds memory); default about 64 MB of draws.
        return_samples: keep the draws (`SampleResult.draws`, `to_zarr`); memory then
            grows with the image.
        fit_solver: the warm-start `fit`'s solver: default "numba" ("jax" for
            ``params.h_function="exact"``).
        settings: the options below as one `SampleSettings` (None: the defaults).
        **options: the options of `SampleSettings` by name (each there with its unit,
            default and meaning): ``refl_sigma`` (required: 1-sigma noise of every
            observation [1/sr], a scalar or one per band), ``prior`` (as in `fit`; sigma
            inf: no prior), ``shared``, ``observation_limits`` [rad] and
            ``min_observations`` (as in `fit`), and the sampler's ``num_samples``,
            ``num_chains``, ``num_warmup``, ``seed`` (the draws depend on it and the
            problem's position alone), ``min_ess``, ``max_rhat`` and
            ``integration_steps``.

    Returns:
        `SampleResult`: per problem quantiles, mean, covariance, R-hat, ESS, acceptance,
        divergences, status (CONVERGED, NOT_MIXED or MULTIMODAL where sampled) and the
        warm-start fit; shared parameters and a joint call's per-problem arrays have no
        band axis (docs/sampling.md#outputs-sampleresult).

    Raises:
        ValueError: naming the argument, for anything `fit` refuses, a missing or
            non-positive refl_sigma, fewer than 2 chains, 10 warm-up or 4 samples,
            non-positive min_ess, or max_rhat not above 1.
        TypeError: a keyword that is no option.
    """
    settings = SampleSettings.merged(settings, options)
    refuse_unknown("sample", options)
    if not isinstance(params, HapkeParams):
        raise ValueError(f"params must be a lumaxlike.HapkeParams, got {type(params).__name__}")
    model = _check_model(refl, params, free, bounds, settings)
    if fit_solver is None:
        fit_solver = "jax" if params.h_function == "exact" else "numba"
    warm_fit = functools.partial(
        fit,
        model.refl,
        to_sun,
        to_sensor,
        normal,
        params,
        free=model.free,
        solver=fit_solver,
        bounds=bounds,
        refl_sigma=model.band_sigma,
        observation_limits=settings.observation_limits,
        min_observations=settings.min_observations,
        shared=model.shared,
        prior=settings.prior,
        starts=1,  # one start, as before fit's default probe (its own probes: `modes`)
    )
    geometry = (to_sun, to_sensor, normal)
    run = (settings.seed, chunk_size, return_samples)
    return _sample_model(model, params, warm_fit, geometry, settings.observation_limits, run)


class _Model(NamedTuple):
    """`sample`'s checked arguments: refl (as a float array), the free names (per-band
    first), band_sigma, dtype, bounds (lower, upper), priors, chain settings."""

    refl: np.ndarray
    free: tuple
    band_free: tuple
    shared: tuple
    band_sigma: np.ndarray
    dtype: type
    bounds: tuple
    priors: object
    chains: _Chains
    layout: ProblemLayout


def _check_model(refl, params, free, bounds, settings: SampleSettings) -> _Model:
    """Checks `sample`'s model arguments and its options (ValueError naming the argument,
    in the order of the signature's use)."""
    free = check_free(free, params)
    shared = check_shared(settings.shared, free)
    band_free = tuple(name for name in free if name not in shared)
    free = band_free + shared  # per-band parameters first, as in fit's joint problems
    refl = as_float_array("refl", refl)
    if refl.ndim < 2:
        raise ValueError(f"refl must have shape pixels + (bands, observations), got {refl.shape}")
    pixel_shape, n_bands = refl.shape[:-2], refl.shape[-2]
    if settings.refl_sigma is None:
        raise ValueError("refl_sigma is required: the 1-sigma noise of the observations [1/sr]")
    band_sigma = check_band_sigma(settings.refl_sigma, n_bands)
    chains = _check_chains(settings)
    dtype = np.float32 if refl.dtype == np.float32 else np.float64
    lower, upper = _check_bounds(bounds, free, dtype)
    priors = check_priors(
        settings.prior, free, shared, pixel_shape, n_bands, True, dict(zip(free, zip(lower, upper)))
    )
    layout = ProblemLayout(pixel_shape, n_bands, band_free, shared)
    return _Model(
        refl, free, band_free, shared, band_sigma, dtype, (lower, upper), priors, chains, layout
    )


def _sample_model(model: _Model, params, warm_fit, geometry, observation_limits, run):
    """`sample` after its checks: the warm-start fit, the chains chunk by chunk, the
    statuses (MULTIMODAL from probe fits) and the result; run = (seed, chunk_size,
    return_samples)."""
    seed, chunk_size, return_samples = run
    free, layout = model.free, model.layout
    program = _program_of(model, params, chunk_size, seed)
    # the chunk program compiles on a worker thread while the warm start is fitted
    compile_chunk_ahead(program, layout.n_bands, bool(model.shared), geometry[0].shape[-2])
    warm = warm_fit()
    problems = _problems(
        warm, layout, model.priors, model.bounds, model.refl, geometry, observation_limits
    )
    outputs = _empty_outputs(problems, model.chains, model.dtype, return_samples)
    probes = None
    if not model.shared and problems.sampled.any():
        probes = _probe_fits(
            warm_fit, warm, layout, program.inv_var, (free, problems.lower, problems.upper)
        )
    sample_chunks(problems, program, outputs, ModeCheck(probes, model.chains.min_ess))
    status = _statuses(warm, layout, problems.sampled, outputs, model.chains)
    if probes is not None:
        best, _, found = probes
        missed = missed_mode(best, found, outputs["minimum"], outputs["maximum"])
        missed |= outputs.pop("rarely_visited")
        status[problems.sampled & missed] = Status.MULTIMODAL
    outputs.pop("rarely_visited", None)
    return _result(warm, layout, free, model.shared, outputs, status, return_samples)


def _program_of(model: _Model, params, chunk_size, seed) -> ChunkProgram:
    """The chunk program of a `sample` call and what every chunk passes it (what the
    warm-start fit does not change: the problems' layout, bounds and chains)."""
    layout, chains = model.layout, model.chains
    lower, upper = (layout.per_problem(bound) for bound in model.bounds)
    problem_axes = (layout.n_bands,) if not model.shared else ()
    return ChunkProgram(
        program=sample_joint_chunk if model.shared else sample_chunk,
        static=_static_arguments(
            params,
            model.free,
            model.band_free,
            model.shared,
            transform.kinds_of(lower, upper),
            chains,
        ),
        fixed=np.array([0.5] + [float(v) for v in params.scalars()]),
        inv_var=1.0 / np.broadcast_to(model.band_sigma, (layout.n_bands,)) ** 2,
        chunk=_chunk_pixels(
            layout.n_pixels, problem_axes, lower.size, chains, model.dtype, chunk_size
        ),
        seed=seed,
        dtype=model.dtype,
    )


class _Chains(NamedTuple):
    """`sample`'s checked chain settings and mixing criteria."""

    num_chains: int
    num_samples: int
    num_warmup: int
    integration_steps: int
    min_ess: float
    max_rhat: float


def _check_chains(settings: SampleSettings) -> _Chains:
    """`sample`'s chain settings (positive integers, `SampleSettings` checked them), at
    least what sampling needs (ValueError naming the option)."""
    num_chains, num_samples, num_warmup = (
        settings.num_chains,
        settings.num_samples,
        settings.num_warmup,
    )
    if num_chains < 2:
        raise ValueError(f"num_chains must be at least 2 (R-hat compares chains), got {num_chains}")
    if num_samples < 4 or num_warmup < 10:
        raise ValueError(
            f"num_samples must be >= 4 and num_warmup >= 10, got {num_samples}, {num_warmup}"
        )
    return _Chains(
        num_chains,
        num_samples,
        num_warmup,
        settings.integration_steps,
        settings.min_ess,
        settings.max_rhat,
    )


def _problems(warm, layout, priors, bounds, refl, geometry, observation_limits) -> Problems:
    """The problems of a `sample` call from its warm-start fit `warm`; bounds (lower,
    upper) per free parameter; geometry (to_sun, to_sensor, normal) as given."""
    values, covariance = layout.fit_start(warm)
    prior_mean, prior_precision = layout.prior_vectors(priors)
    lower, upper = layout.per_problem(bounds[0]), layout.per_problem(bounds[1])
    kinds = transform.kinds_of(lower, upper)
    z_center, metric = laplace_start(values, covariance, kinds, lower, upper)
    sampled = np.isin(layout.flat_status(warm.status), np.array(_SAMPLED, np.int8))
    n_pixels, pixel_shape = layout.n_pixels, refl.shape[:-2]
    n_obs = refl.shape[-1]
    checked = [as_float_array(n, g) for n, g in zip(("to_sun", "to_sensor", "normal"), geometry)]
    return Problems(
        refl=refl.reshape(n_pixels, refl.shape[-2], n_obs),
        geometry=[
            np.broadcast_to(g, pixel_shape + (n_obs, 3)).reshape(n_pixels, n_obs, 3)
            for g in checked
        ],
        limits=check_observation_limits(observation_limits),
        sampled=sampled,
        z_center=z_center,
        metric=metric,
        prior_mean=prior_mean,
        prior_precision=prior_precision,
        lower=lower,
        upper=upper,
        kinds=kinds,
    )


def _chunk_pixels(n_pixels, problem_axes, n_parameters, chains: _Chains, dtype, chunk_size) -> int:
    """Pixels per chunk: `chunk_size`, or what holds about `CHUNK_BYTES` of draws;
    problem_axes: a pixel's problems ((bands,), or () for joint problems), each of
    `n_parameters`."""
    per_pixel = (
        int(np.prod(problem_axes, dtype=np.int64))
        * chains.num_chains
        * (chains.num_samples + chains.num_warmup)
        * n_parameters
        * np.dtype(dtype).itemsize
    )
    largest = (
        max(1, CHUNK_BYTES // per_pixel)
        if chunk_size is None
        else check_positive_int("chunk_size", chunk_size)
    )
    return balanced_chunk(n_pixels, largest)


def _empty_outputs(problems: Problems, chains: _Chains, dtype, return_samples) -> dict:
    """The summaries' arrays, NaN (no divergences) until a problem is sampled."""
    z_center, metric = problems.z_center, problems.metric
    outputs = {
        "quantiles": np.full(z_center.shape + (5,), np.nan, dtype),
        "mean": np.full(z_center.shape, np.nan, dtype),
        "covariance": np.full(metric.shape, np.nan, dtype),
        "rhat": np.full(z_center.shape, np.nan, dtype),
        "ess": np.full(z_center.shape, np.nan, dtype),
        "ess_tail": np.full(z_center.shape, np.nan, dtype),
        "acceptance": np.full(z_center.shape[:-1], np.nan, dtype),
        "divergences": np.zeros(z_center.shape[:-1], np.int32),
        "minimum": np.full(z_center.shape, np.nan, dtype),
        "maximum": np.full(z_center.shape, np.nan, dtype),
        "rarely_visited": np.zeros(z_center.shape[:-1], bool),
    }
    if return_samples:
        outputs["draws"] = np.full(
            z_center.shape[:-1] + (chains.num_chains, chains.num_samples, z_center.shape[-1]),
            np.nan,
            dtype,
        )
    return outputs


def _static_arguments(params, free, band_free, shared, kinds, chains: _Chains) -> dict:
    """The chunk program's static (compile-time) keywords."""
    static = dict(
        free_index=tuple(PARAMETER_NAMES.index(name) for name in free),
        key=params.model_key,
        kinds=kinds,
        chains=(
            chains.num_chains,
            chains.num_warmup,
            chains.num_samples,
            chains.integration_steps,
        ),
    )
    if shared:
        static["n_band_free"] = len(band_free)
    return static


def _statuses(warm, layout, sampled, outputs, chains: _Chains) -> np.ndarray:
    """Flat statuses: the warm fit's, CONVERGED or NOT_MIXED where sampled."""
    status = layout.flat_status(warm.status).copy()
    mixed = np.all(
        (outputs["rhat"] <= chains.max_rhat)
        & (outputs["ess"] >= chains.min_ess)
        & (outputs["ess_tail"] >= chains.min_ess),
        axis=-1,
    )
    status[sampled] = np.where(mixed[sampled], Status.CONVERGED, Status.NOT_MIXED)
    return status


def _result(warm, layout, free, shared, outputs, status, return_samples) -> SampleResult:
    """The `SampleResult` of the flat summaries, in the image's layout."""
    return SampleResult(
        free=free,
        shared=shared,
        quantiles=layout.by_name(outputs["quantiles"]),
        mean=layout.by_name(outputs["mean"]),
        covariance=layout.problem_array(outputs["covariance"]),
        rhat=layout.by_name(outputs["rhat"]),
        ess=layout.by_name(outputs["ess"]),
        ess_tail=layout.by_name(outputs["ess_tail"]),
        acceptance=layout.problem_array(outputs["acceptance"]),
        divergences=layout.problem_array(outputs["divergences"]),
        status=layout.problem_array(status),
        observations=warm.observations,
        fit=warm,
        draws=layout.problem_array(outputs["draws"]) if return_samples else None,
    )


def _probe_fits(warm_fit, warm, layout, inv_var, bounds):
    """`modes`' probe fits (`warm_fit(start)`) from near each bound: (the warm start's log
    posterior, its values (..., p), [(values, log posterior, status)]) over (pixels,
    bands); bounds = (free, lower, upper) (per-band problems only)."""
    probes = []
    shape = (layout.n_pixels, layout.n_bands)
    for start in probe_starts(*bounds):
        probe = warm_fit(start=start)
        level = np.reshape(log_posterior(probe, inv_var), shape)
        probes.append((layout.fit_start(probe)[0], level, layout.flat_status(probe.status)))
    best = np.reshape(log_posterior(warm, inv_var), shape)
    return best, layout.fit_start(warm)[0], probes
