"""`fit`: several Hapke parameters per pixel and band from multi-angle observations.

The same machinery as `invert`, which is its one-parameter, one-observation case: the
`ElementwiseLevenbergMarquardt` optimistix solver (JAX) or the numba kernel of
`numba_solver`, both following `lm_rules`, with per-problem status codes (`Status`).

Masks: an observation with non-finite reflectance or geometry, or outside the user's
`observation_limits`, is left out of its problem (`observation_masks`). Here it becomes
a NaN reflectance (and, for non-finite geometry, a harmless placeholder geometry), which
both solvers read as a zero residual row; so a masked problem is solved exactly as its
valid subset would be, with no per-problem branching in the solvers.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from ..._model.forward import precision_scope
from ..._model.numba_jacobian import hoisted_rows, model_columns
from ..._model.numba_model import observation_rows
from ..._params import PARAMETER_NAMES, HapkeParams
from ..._photometric import PhotometricFunction
from ..._shapes import check_band_sigma, check_choice, check_positive_int
from ..._status import Status
from ..albedo.invert import SOLVERS, albedo_bounds
from ..chunking import pad_pixels
from ..defaults import DEFAULT_FIT_MAX_ITER
from ..result import FitResult, at_bound_flags
from .arguments import (
    OBSERVATIONS_PER_CHUNK,
    albedo_start,
    check_arrays,
    check_bounds,
    check_free,
    check_iterations,
    checked_starts,
    default_bounds,
    default_chunk,
)
from .covariance import covariance as fit_covariance
from .jax_solver import solve_fit_jax
from .numba_solver import solve_numba
from .observation_masks import check_observation_limits, masked_chunk
from .reachability import mark_unreachable

__all__ = ["fit", "default_bounds", "OBSERVATIONS_PER_CHUNK"]  # the last two re-exported


def fit(
    refl,
    to_sun,
    to_sensor,
    normal,
    params: HapkeParams,
    free=("w", "b", "c"),
    solver: str = "jax",
    bounds: Mapping | None = None,
    *,
    start: Mapping | None = None,
    max_iter: int = DEFAULT_FIT_MAX_ITER,
    tol: float | None = None,
    refl_sigma=None,
    chunk_size: int | None = None,
    observation_limits: Mapping | None = None,
    min_observations: int | None = None,
    shared=(),
    prior: Mapping | None = None,
    regions=None,
    regional=(),
    starts=None,
):
    """Fit the free Hapke parameters of every pixel and band to several observations.

    Each (pixel, band) is its own least-squares problem over its observations: the
    parameters named in `free` are fitted, the others are fixed at `params`. Solved by
    Levenberg-Marquardt with per-problem damping, acceptance and early exit (the same
    machinery as `invert`, which is the case free=("w",) with one observation).

    Args:
        refl: observed bidirectional reflectance r [1/sr], shape
            ``pixels + (bands, observations)``: the observation axis is last. A
            non-finite observation (NaN or inf reflectance, or geometry) is left out of
            its problem; a problem with no finite observation at all gets status
            NONFINITE_INPUT.
        to_sun: vectors (east, north, up) from the surface toward the light source (the
            sun, or a laboratory lamp), one per observation: shape
            ``pixels + (observations, 3)``, or ``(observations, 3)`` for all pixels.
        to_sensor: vectors toward the sensor (the observer), same rule.
        normal: outward surface normals, same rule (typically the same for every
            observation of a pixel).
        params: `HapkeParams`: the fixed parameters and the starting values of the free
            ones. The phase function must be a closed form (``params.legendre``
            None); fitting roughness, hs/bs0 or hc/bc0 needs
            params.roughness, hs or hc > 0 (0 switches the effect off).
        free: names of the fitted parameters: "w" and any of "b", "c", "roughness",
            "hs", "bs0", "hc", "bc0", "porosity_k", "asymmetry" ("b", "c" with
            params.phase_function "dhg", "asymmetry" with "hg" or "cornette_shanks").
        solver: ``"jax"`` (optimistix; CPU or GPU; the default here) or ``"numba"``
            (CPU, parallel; the default of the file functions and the command line,
            which stream files on the CPU).
        bounds: {name: (lower, upper)} replacing `default_bounds` for those parameters;
            the iterates are projected onto the bounds.
        start: {name: starting value} for free parameters, each a scalar or an array of
            shape ``pixels + (bands,)``. By default every parameter but w starts at
            `params`, and w at the median over observations of the one-observation
            `invert` with the other parameters at `params`.
        max_iter: Levenberg-Marquardt steps per problem at most (default 200).
        tol: convergence tolerance on the step of every free parameter; default 1e-10
            (float64) or 1e-5 (float32).
        refl_sigma: 1-sigma uncertainty of every observation [1/sr], a scalar or one value
            per band; the covariance is then (J^T J)^-1 refl_sigma^2 instead of being
            scaled by the residual variance.
        chunk_size: pixels per chunk (memory is bounded by the chunk); default about
            131 k problem-observations per chunk. The JAX solver runs a smaller call as
            one chunk rounded up to one of a few sizes (`chunking.call_chunk`), so that
            calls of nearby sizes share their compiled programs.
        observation_limits: {angle: (lower, upper)} in radians, closed intervals, for
            any of "incidence" (between `to_sun` and `normal`), "emission" (`to_sensor`
            and `normal`) and "phase" (`to_sun` and `to_sensor`): an observation outside
            them is left out of its problem, e.g. ``{"incidence": (0, np.radians(70))}``.
            Default: no limits.
        min_observations: valid observations a problem needs (after leaving out the
            masked ones); a problem with fewer gets TOO_FEW_OBSERVATIONS. Default: the
            number of free parameters plus one. An observation whose source or observer
            is below the local horizon is not left out but makes its problem
            INVALID_GEOMETRY (exclude such observations with `observation_limits`).

        shared: names among `free` (not "w") that take one value per pixel for all its
            bands, e.g. ``("roughness", "hs")``: each pixel is then one joint problem
            (`JointFitResult`; docs/joint-fits.md).
        prior: {name: (mean, sigma)} Gaussian priors on free parameters (scalars or
            arrays broadcasting to the parameter's map), as extra residual rows
            (x - mean) / sigma: the MAP estimate of optimal estimation. Needs
            `refl_sigma`. Returns a `JointFitResult`.
        regions: an integer label map of shape ``pixels`` (tiles, geologic units), with
            `regional`: the parameters named in `regional` (among `free`, not "w") take
            one value per region for all its pixels and bands, fitted jointly with every
            pixel's own parameters; pixels labelled negative are left out
            (TOO_FEW_OBSERVATIONS, 0 observations). Returns a `JointFitResult`.
        regional: the names `regions` applies to, e.g. ``("roughness",)``.
        starts: restarts of a joint fit (`shared` or `prior`; not `regions`), for
            problems with more than one minimum: an int n for n whole fits, the usual
            start then n - 1 points of a coarse grid over the shared parameters'
            bounds (with nothing shared, over the free parameters but w): k =
            ceil((n - 1)^(1/s)) levels per parameter at the cell midpoints lower +
            (i + 1/2) (upper - lower) / k, an infinite upper bound of hs, hc (bs0,
            porosity_k) taken as 0.2 (3.0); n - 1 of the k^s points, evenly spaced,
            all where n - 1 = k^s (e.g. 5, 10). Or a sequence of {name: value}
            mappings (values as in `start`), each laid over `start`. Per problem the
            CONVERGED result of lowest cost is kept (values, covariance, cost and
            iterations of that start); it is MULTIMODAL where another start converged
            to a distinct minimum (some parameter more than 3 of the kept one's
            sigma away) with chi^2 less than 4 above it (without `refl_sigma`, the
            cost divided by the kept fit's residual variance). Default None (or 1):
            one start. docs/joint-fits.md#restarts.

    Returns:
        `FitResult` (a `JointFitResult` with `shared`, `prior` or `regions`): fitted
        values, status, iterations, residual norm, covariance and the number of valid
        observations of every problem. Results do not depend on the
        masked observations: a problem is solved exactly as its valid subset would be.

    Raises:
        ValueError: naming the argument, for an unknown solver or parameter name,
            mismatched shapes, a start outside the bounds, bad bounds, a free parameter
            whose effect is switched off in `params` or that its phase function does
            not use, non-positive tol, max_iter or
            chunk_size, a negative refl_sigma, limits that are not angles in [0, pi]
            rad, min_observations that is not positive or exceeds the observations, or
            starts that is not a positive int or a sequence of mappings of free names,
            grids an infinite bound, or is given to a fit that is not joint.
    """
    arrays = (refl, to_sun, to_sensor, normal)
    options = dict(
        start=start,
        max_iter=max_iter,
        tol=tol,
        refl_sigma=refl_sigma,
        chunk_size=chunk_size,
        observation_limits=observation_limits,
        min_observations=min_observations,
    )
    if starts is not None:  # several starts of a joint fit: `joint.restarts`
        restarted = _fit_restarts(
            arrays,
            (params, free, solver, bounds),
            starts,
            shared,
            prior,
            regions,
            regional,
            options,
        )
        if restarted is not None:
            return restarted
    if shared or prior or regional or regions is not None:  # joint problems: their own modules
        from ..joint.joint import fit_joint

        return fit_joint(
            arrays,
            params,
            free,
            solver,
            bounds,
            shared=shared,
            prior=prior,
            regions=regions,
            regional=regional,
            options=options,
        )
    return _fit_bands(arrays, params, free, solver, bounds, options)


def _fit_restarts(arrays, model, starts, shared, prior, regions, regional, options):
    """`fit` with `starts` (`joint.restarts`), or None where the starts are one start;
    model = (params, free, solver, bounds) as given to `fit`."""
    from ..joint.restarts import check_starts, run_starts

    joint, regional_fit = bool(shared or prior), bool(regional) or regions is not None
    starts = check_starts(starts, joint, regional_fit)
    if starts is None:
        return None
    params, free, _, bounds = model

    def fit_once(start):
        return fit(*arrays, *model, **{**options, "start": start}, shared=shared, prior=prior)

    return run_starts(
        fit_once,
        starts,
        arrays[0],
        params,
        free,
        bounds,
        shared,
        options["start"],
        options["max_iter"],
        options["tol"],
        options["refl_sigma"] is not None,
    )


class _Settings(NamedTuple):
    """A per-band `fit`'s checked settings: what every chunk's solve reads."""

    solver: str
    free: tuple[str, ...]
    params: HapkeParams
    lower: np.ndarray  # (p,) bounds of the free parameters
    upper: np.ndarray
    min_obs: int
    max_iter: int
    tol: float
    dtype: type
    band_sigma: np.ndarray | None  # (bands,) float64, or None
    limits: object  # checked observation limits
    chunk: int  # pixels per chunk
    start: dict  # the checked given starts, by name
    fixed: np.ndarray  # values of PARAMETER_NAMES (w's entry a placeholder)
    free_index: tuple[int, ...]


def _fit_bands(arrays, params, free, solver, bounds, options) -> FitResult:
    """`fit` where every (pixel, band) is its own problem; arrays = (refl, to_sun,
    to_sensor, normal) and options `fit`'s keywords, as given."""
    check_choice("solver", solver, SOLVERS)
    if isinstance(params, PhotometricFunction):  # linear in its albedo: nothing to fit
        raise ValueError(
            "fit takes a lumaxlike.HapkeParams; a PhotometricFunction is linear in its "
            "albedo, which lumaxlike.invert recovers in closed form: use invert"
        )
    if not isinstance(params, HapkeParams):
        raise ValueError(f"params must be a lumaxlike.HapkeParams, got {type(params).__name__}")
    free = check_free(free, params)
    refl, geometry = check_arrays(*arrays)
    settings = _check_settings(refl, params, free, solver, bounds, options)
    pixel_shape, (n_bands, n_obs) = refl.shape[:-2], refl.shape[-2:]
    n_pixels = int(np.prod(pixel_shape, dtype=np.int64))
    flat_refl = refl.reshape(n_pixels, n_bands, n_obs)
    flat_geometry = [
        np.broadcast_to(g, pixel_shape + (n_obs, 3)).reshape(n_pixels, n_obs, 3) for g in geometry
    ]
    n_free, dtype = len(free), settings.dtype
    fields: dict[str, np.ndarray] = {
        "values": np.empty((n_pixels, n_bands, n_free), dtype),
        "status": np.empty((n_pixels, n_bands), np.int8),
        "iterations": np.empty((n_pixels, n_bands), np.int32),
        "residual_norm": np.empty((n_pixels, n_bands), dtype),
        "covariance": np.empty((n_pixels, n_bands, n_free, n_free), dtype),
        "observations": np.empty((n_pixels, n_bands), np.int32),
    }
    for first in range(0, n_pixels, settings.chunk):
        last = min(first + settings.chunk, n_pixels)
        _fit_chunk(settings, flat_refl, flat_geometry, (first, last), fields)

    out_shape = pixel_shape + (n_bands,)
    values = fields["values"]
    by_name = {name: values[..., j].reshape(out_shape) for j, name in enumerate(free)}
    return FitResult(
        free=free,
        values=by_name,
        status=fields["status"].reshape(out_shape),
        iterations=fields["iterations"].reshape(out_shape),
        residual_norm=fields["residual_norm"].reshape(out_shape),
        covariance=fields["covariance"].reshape(out_shape + (n_free, n_free)),
        observations=fields["observations"].reshape(out_shape),
        at_bound=at_bound_flags(free, by_name, settings.lower, settings.upper),
    )


def _check_settings(refl, params, free, solver, bounds, options) -> _Settings:
    """A per-band `fit`'s settings from its checked refl, params and free names."""
    pixel_shape, (n_bands, n_obs) = refl.shape[:-2], refl.shape[-2:]
    dtype = np.float32 if refl.dtype == np.float32 else np.float64
    max_iter, tol = check_iterations(options["max_iter"], options["tol"], dtype)
    lower, upper = check_bounds(bounds, free, dtype)
    n_pixels = int(np.prod(pixel_shape, dtype=np.int64))
    limits = check_observation_limits(options["observation_limits"])
    min_observations = options["min_observations"]
    min_obs = (
        len(free) + 1
        if min_observations is None
        else check_positive_int("min_observations", min_observations)
    )
    if min_obs > n_obs:
        raise ValueError(
            f"min_observations = {min_obs}{' (free parameters + 1)' if min_observations is None else ''} "
            f"exceeds the {n_obs} observations of every problem: none could be fitted "
            f"(pass min_observations to fit with fewer)"
        )
    chunk = default_chunk(options["chunk_size"], n_bands, n_obs, n_pixels, solver)
    band_sigma = check_band_sigma(options["refl_sigma"], n_bands)
    if band_sigma is not None:
        band_sigma = np.broadcast_to(band_sigma.astype(np.float64), (n_bands,))
    given_start = checked_starts(
        options["start"], free, (), params, pixel_shape, n_bands, lower, upper
    )
    return _Settings(
        solver=solver,
        free=free,
        params=params,
        lower=lower,
        upper=upper,
        min_obs=min_obs,
        max_iter=max_iter,
        tol=tol,
        dtype=dtype,
        band_sigma=band_sigma,
        limits=limits,
        chunk=chunk,
        start=given_start,
        # all of PARAMETER_NAMES; w's entry is a placeholder (w is always free)
        fixed=np.array([0.5] + [float(v) for v in params.scalars()]),
        free_index=tuple(PARAMETER_NAMES.index(name) for name in free),
    )


def _fit_chunk(settings: _Settings, flat_refl, flat_geometry, span, fields):
    """Fit pixels span = (first, last) of the flat arrays into `fields`, in place."""
    first, last = span
    s = settings
    pieces, any_finite = masked_chunk(
        flat_refl[first:last], [g[first:last] for g in flat_geometry], s.limits
    )
    n_valid = np.sum(np.isfinite(pieces[0]), axis=-1)
    if s.solver == "jax":  # one chunk shape: each JAX program compiles once
        pieces = [pad_pixels(p, s.chunk, np.nan if i == 0 else 1.0) for i, p in enumerate(pieces)]
    piece_start = _chunk_start(
        s.start, first, last, s.free, s.params, pieces, s.solver, s.lower, s.upper
    )
    common = (
        s.fixed,
        s.free_index,
        s.lower,
        s.upper,
        s.min_obs,
        s.max_iter,
        s.tol,
        s.params.model_key,
    )
    if s.solver == "numba":
        solved = _solve_chunk_numba(pieces, piece_start, *common)
    else:
        solved = _solve_chunk_jax(pieces, piece_start, s.dtype, *common)
    n, n_bands, n_obs = last - first, flat_refl.shape[1], flat_refl.shape[2]
    w_index = s.free.index("w")
    chunk_status = solved["status"][:n].copy()
    chunk_status[~any_finite] = Status.NONFINITE_INPUT  # nothing finite to fit at all
    chunk_values = solved["values"][:n].copy()
    unreachable = mark_unreachable(
        chunk_status.reshape(-1),
        pieces[0][:n].reshape(n * n_bands, n_obs),
        chunk_values[..., w_index].reshape(-1),
        solved["cost"][:n].reshape(-1),
        (s.lower[w_index], s.upper[w_index]),
        albedo_bounds(s.dtype),
    ).reshape(n, n_bands)
    chunk_values[unreachable] = np.nan
    fields["covariance"][first:last] = fit_covariance(
        solved["jtj"][:n], solved["cost"][:n], chunk_status, n_valid, s.band_sigma
    )
    fields["observations"][first:last] = n_valid
    fields["values"][first:last] = chunk_values
    fields["status"][first:last] = chunk_status
    fields["iterations"][first:last] = solved["iterations"][:n]
    fields["residual_norm"][first:last] = np.sqrt(solved["cost"][:n])


def _chunk_start(given, first, last, free, params, pieces, solver, lower, upper):
    """(pixels of the chunk, bands, p) starting values; padded pixels get w's default."""
    refl, *geometry = pieces
    n_pixels, n_bands, _ = refl.shape
    columns = []
    for j, name in enumerate(free):
        if name in given:
            value = np.full((n_pixels, n_bands), 0.5 * (lower[j] + min(upper[j], lower[j] + 1.0)))
            value[: last - first] = given[name][first:last]
        elif name == "w":
            value = albedo_start(refl, geometry, params, solver, lower[j], upper[j])
        else:
            value = np.full((n_pixels, n_bands), float(getattr(params, name)))
        columns.append(value)
    return np.stack(columns, axis=-1)


def _solve_chunk_numba(pieces, start, fixed, free_index, lower, upper, min_obs, max_iter, tol, key):
    refl, to_sun, to_sensor, normal = pieces
    geometry_rows, valid = observation_rows(to_sun, to_sensor, normal)
    functions = model_columns(tuple(PARAMETER_NAMES[k] for k in free_index), key)
    rows = hoisted_rows(functions, geometry_rows, fixed)  # once per observation
    return solve_numba(
        functions,
        rows,
        valid,
        refl,
        start,
        fixed,
        np.array(free_index),
        lower,
        upper,
        min_obs,
        max_iter,
        tol,
    )


def _solve_chunk_jax(
    pieces, start, dtype, fixed, free_index, lower, upper, min_obs, max_iter, tol, key
):
    """One chunk (already padded to the chunk shape) through the JAX solver."""
    refl, to_sun, to_sensor, normal = pieces
    with precision_scope(np.empty(0, dtype)):
        solved = solve_fit_jax(
            jnp.asarray(refl, dtype),
            jnp.asarray(to_sun, dtype),
            jnp.asarray(to_sensor, dtype),
            jnp.asarray(normal, dtype),
            jnp.asarray(fixed, dtype),
            jnp.asarray(start, dtype),
            free_index,
            jnp.asarray(lower, dtype),
            jnp.asarray(upper, dtype),
            min_obs,
            max_iter,
            tol,
            key,
        )
        return {name: np.asarray(value) for name, value in jax.device_get(solved).items()}
