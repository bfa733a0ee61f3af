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
import numpy as np
from jaxtyping import ArrayLike, Float

from ..._declared_options import refuse_unknown, takes_options
from ..._model.device_precision import default_is_cpu
from ..._model.forward import precision_scope
from ..._model.numba_jacobian import hoisted_rows, model_columns
from ..._model.numba_model import observation_rows
from ..._params import PARAMETER_NAMES, HapkeParams
from ..._photometric import PhotometricFunction
from ..._shapes import check_band_sigma, check_choice, check_positive_int
from ..._status import Status
from ..albedo.invert import SOLVERS, albedo_bounds
from ..chunking import pad_pixels
from ..defaults import DEFAULT_MAX_ITER
from ..joint.result import JointFitResult
from ..result import FitResult, at_bound_flags
from .arguments import (
    ALBEDO_START_TOL,
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
from .jax_solver import solve_fit_jax, solve_fit_jax_ahead
from .jax_start import albedo_start_jax
from .numba_solver import solve_numba
from .observation_masks import check_observation_limits, masked_chunk
from .options import FitSettings
from .reachability import mark_unreachable

__all__ = ["fit", "default_bounds", "OBSERVATIONS_PER_CHUNK"]  # the last two re-exported


@takes_options(FitSettings)
def fit(
    refl: Float[ArrayLike, "*pixels bands observations"],
    to_sun: Float[ArrayLike, "*#pixels observations 3"],
    to_sensor: Float[ArrayLike, "*#pixels observations 3"],
    normal: Float[ArrayLike, "*#pixels observations 3"],
    params: HapkeParams,
    free=("w", "b", "c"),
    solver: str = "jax",
    bounds: Mapping | None = None,
    *,
    start: Mapping | None = None,
    chunk_size: int | None = None,
    regions=None,
    settings: FitSettings | None = None,
    **options,
) -> FitResult | JointFitResult:
    """Fit the free Hapke parameters of every pixel and band to several observations
    (docs/fit.md; joint fits: docs/joint-fits.md).

    Each (pixel, band) is its own least-squares problem over its observations: the
    parameters in `free` are fitted, the others fixed at `params`, by Levenberg-Marquardt
    (the machinery of `invert`, which is the case free=("w",) with one observation).

    Args:
        refl: reflectance r [1/sr], shape ``pixels + (bands, observations)``; a
            non-finite observation (refl or geometry) is left out of its problem.
        to_sun: vectors (east, north, up) toward the light source, one per observation:
            ``pixels + (observations, 3)``, or ``(observations, 3)`` for all pixels.
        to_sensor: vectors toward the sensor (the observer), same rule.
        normal: outward surface normals, same rule.
        params: `HapkeParams`: fixed values and starts of the free ones; a closed-form
            phase function (``legendre`` None); roughness, hs or hc > 0 to fit their effect.
        free: fitted names: "w" and any of "b", "c" ("dhg"), "asymmetry" ("hg",
            "cornette_shanks"), "roughness", "hs", "bs0", "hc", "bc0", "porosity_k".
        solver: ``"jax"`` (CPU or GPU; the default here) or ``"numba"`` (CPU, parallel).
        bounds: {name: (lower, upper)} replacing `default_bounds`; iterates are projected.
        start: {name: value} for free parameters, scalars or ``pixels + (bands,)`` arrays;
            default `params`, and w the median of one-observation inversions.
        chunk_size: pixels per chunk (bounds memory); default about 131 k
            problem-observations for numba, 4x for JAX on a CPU and 8x on an
            accelerator (docs/invert.md#chunks-and-memory).
        regions: integer label map of shape ``pixels`` for the option ``regional``;
            negative labels are left out (TOO_FEW_OBSERVATIONS).
        settings: the options below as one `FitSettings` (None: the defaults).
        **options: the options of `FitSettings` by name (each there with its unit,
            default and meaning): ``max_iter``, ``tol``, ``refl_sigma``
            (1-sigma of every observation [1/sr], a scalar or one per band),
            ``observation_limits`` [rad], ``min_observations``, and the joint fit's
            ``shared``, ``prior``, ``regional``, ``starts`` and ``profile``.

    Returns:
        `FitResult` (a `JointFitResult` with `shared`, `prior` or `regions`): values,
        status, iterations, residual norm, covariance and valid observations per problem.

    Raises:
        ValueError: naming the argument, for an unknown solver or parameter, mismatched
            shapes, a start outside the bounds, bad bounds, a free parameter `params`
            switches off or does not use, non-positive tol, max_iter or chunk_size,
            negative refl_sigma, limits outside [0, pi], bad min_observations or starts.
        TypeError: a keyword that is no option.
    """
    settings = FitSettings.merged(settings, options)
    refuse_unknown("fit", options)
    keywords = dict(start=start, chunk_size=chunk_size)
    keywords.update(
        (name, getattr(settings, name))
        for name in ("max_iter", "tol", "refl_sigma", "observation_limits", "min_observations")
    )
    joint = dict(
        shared=settings.shared, prior=settings.prior, regions=regions, regional=settings.regional
    )
    model = (params, free, solver, bounds)
    arrays = (refl, to_sun, to_sensor, normal)
    if settings.profile:
        from ..joint.profile_fit import fit_with_profile

        starts_profile = (settings.starts, settings.profile)
        return fit_with_profile(arrays, model, starts_profile, joint, keywords, _dispatch)
    return _dispatch(arrays, model, settings.starts, joint, keywords)


def _dispatch(arrays, model, starts, joint, options):
    """`fit`'s route: restarts (`_fit_restarts`), a joint fit (`joint.fit_joint`) or the
    per-band fit (`_fit_bands`); model = (params, free, solver, bounds), joint = `fit`'s
    shared, prior, regions and regional, options its other keywords."""
    params, free, solver, bounds = model
    shared, prior, regions, regional = (
        joint[k] for k in ("shared", "prior", "regions", "regional")
    )
    if starts is None and shared and not regional and regions is None:
        starts = "probe"  # the default of shared fits: `joint.restarts.probe_points`
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

        return fit_joint(arrays, params, free, solver, bounds, **joint, options=options)
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
        options_once = {**options, "start": start}
        return fit(*arrays, *model, **options_once, shared=shared, prior=prior, starts=1)

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
    # w's start found on an accelerator (`albedo_start_jax`), where the chunk is; on a
    # CPU, by the host's `albedo_start` (faster there: 31-42 against 51-59 ms on 2048
    # pixels x 16 bands x 16 observations, 2-core VM; the same values)
    w_start_on_device: bool


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
    if solver == "jax":
        _compile_ahead(settings, n_bands, n_obs)
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
        w_start_on_device=solver == "jax" and "w" not in given_start and not default_is_cpu(),
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
    piece_start = _chunk_start(s, first, last, pieces)
    if s.solver == "numba":
        solved = _solve_chunk_numba(s, pieces, piece_start)
    else:
        solved = _solve_chunk_jax(s, pieces, piece_start)
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


def _chunk_start(s: _Settings, first: int, last: int, pieces) -> np.ndarray:
    """(pixels of the chunk, bands, p) starting values; padded pixels get w's default;
    w's NaN where it is found on the device (`_solve_chunk_jax`)."""
    refl, *geometry = pieces
    n_pixels, n_bands, _ = refl.shape
    columns = []
    for j, name in enumerate(s.free):
        lower, upper = s.lower[j], s.upper[j]
        if name in s.start:
            value = np.full((n_pixels, n_bands), 0.5 * (lower + min(upper, lower + 1.0)))
            value[: last - first] = s.start[name][first:last]
        elif name == "w" and s.w_start_on_device:
            value = np.full((n_pixels, n_bands), np.nan)
        elif name == "w":
            value = albedo_start(refl, geometry, s.params, s.solver, lower, upper)
        else:
            value = np.full((n_pixels, n_bands), float(getattr(s.params, name)))
        columns.append(value)
    return np.stack(columns, axis=-1)


def _solve_chunk_numba(s: _Settings, pieces, start):
    """One chunk through the numba solver."""
    refl, to_sun, to_sensor, normal = pieces
    geometry_rows, valid = observation_rows(to_sun, to_sensor, normal)
    functions = model_columns(s.free, s.params.model_key)
    rows = hoisted_rows(functions, geometry_rows, s.fixed)  # once per observation
    return solve_numba(
        functions,
        rows,
        valid,
        refl,
        start,
        s.fixed,
        np.array(s.free_index),
        s.lower,
        s.upper,
        s.min_obs,
        s.max_iter,
        s.tol,
    )


def _compile_ahead(s: _Settings, n_bands: int, n_obs: int) -> None:
    """Start compiling the JAX solver's programs at the chunk's shape
    (`solve_fit_jax_ahead`), side by side on worker threads, and on an accelerator the
    starting w's (`albedo_start_jax`) first; then numba's covariance kernel, which the
    first chunk's results need (~3 s on a TPU v5e's host, on the calling thread while XLA
    compiles). On a CPU the starting w (`invert`'s program) compiles at the first chunk,
    while the others compile (compiling it ahead there measured no faster: 15.3-15.5 s
    first call on 2 CPU cores against 15.2-17.7)."""

    def chunk_of(*shape):
        return jax.ShapeDtypeStruct((s.chunk, *shape), s.dtype)

    geometry = chunk_of(n_obs, 3)
    refl = chunk_of(n_bands, n_obs)
    with precision_scope(np.empty(0, s.dtype)):
        if s.w_start_on_device:  # first: the first chunk needs it first
            albedo_start_jax.ahead(
                chunk_of(n_bands, len(s.free)),
                refl=refl,
                to_sun=geometry,
                to_sensor=geometry,
                normal=geometry,
                **_w_start(s),
            )
        solve_fit_jax_ahead(
            refl,
            geometry,
            geometry,
            geometry,
            np.asarray(s.fixed, s.dtype),  # NumPy: only their shapes and dtypes count
            chunk_of(n_bands, len(s.free)),
            s.free_index,
            (np.asarray(s.lower, s.dtype), np.asarray(s.upper, s.dtype)),
            s.min_obs,
            s.max_iter,
            s.tol,
            s.params.model_key,
        )
    # numba's covariance kernel compiled (a call on no problems) while XLA compiles
    n_free = len(s.free)
    fit_covariance(
        np.empty((0, 1, n_free, n_free)), np.empty((0, 1)), np.empty((0, 1), np.int8), 0, None
    )


def _w_start(s: _Settings) -> dict:
    """`albedo_start_jax`'s arguments other than the chunk's arrays."""
    column = s.free.index("w")
    return dict(
        column=column,
        params=s.params,
        lower=s.lower[column],
        upper=s.upper[column],
        max_iter=DEFAULT_MAX_ITER,
        tol=ALBEDO_START_TOL,
        w_bounds=albedo_bounds(s.dtype),
    )


def _solve_chunk_jax(s: _Settings, pieces, start):
    """One chunk (already padded to the chunk shape) through the JAX solver; w's start,
    unless given, found on the device (`albedo_start_jax`)."""
    dtype = s.dtype

    def on_device(a):  # converted on the host and put: no program compiled for either
        return jax.device_put(np.asarray(a, dtype))

    with precision_scope(np.empty(0, dtype)):
        refl, to_sun, to_sensor, normal = (on_device(p) for p in pieces)
        start = on_device(start)
        if s.w_start_on_device:
            start = albedo_start_jax(
                start, refl=refl, to_sun=to_sun, to_sensor=to_sensor, normal=normal, **_w_start(s)
            )
        solved = solve_fit_jax(
            refl,
            to_sun,
            to_sensor,
            normal,
            on_device(s.fixed),
            start,
            s.free_index,
            (on_device(s.lower), on_device(s.upper)),
            s.min_obs,
            s.max_iter,
            s.tol,
            s.params.model_key,
        )
        return {name: np.asarray(value) for name, value in jax.device_get(solved).items()}
