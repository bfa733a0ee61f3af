"""Joint fits: parameters shared by a pixel's bands, and Gaussian priors (`fit`'s
``shared=`` and ``prior=``).

With `shared` names, each pixel is one Levenberg-Marquardt problem over all its bands
and observations: the per-band parameters of every band and the shared ones, solved by
the Schur complement of its arrow-structured normal equations (`schur`) in both solvers
(`numba_solver`, `jax_solver`). With a `prior` and nothing shared, each (pixel, band) is
its own problem as in `fit`, with the prior rows. Priors are optimal estimation's
(`priors`); the covariance covers every parameter of a problem (`covariance`).
Masks, starting values, bounds and statuses are `fit`'s.
"""

from __future__ import annotations

import dataclasses

import numpy as np

from ..._params import HapkeParams
from ..._photometric import PhotometricFunction
from ..._shapes import check_band_sigma, check_choice, check_positive_int
from ..._status import Status
from ..albedo.invert import SOLVERS
from ..fit.arguments import (
    check_arrays,
    check_bounds,
    check_free,
    check_iterations,
    check_shared,
    checked_starts,
    default_chunk,
)
from ..fit.observation_masks import check_observation_limits, masked_chunk
from ..result import at_bound_flags
from .chunk import chunk_starts, solve_chunk
from .covariance import arrow_covariance
from .priors import check_priors, degrees_of_freedom, prior_arrays
from .result import JointFitResult
from .setup import JointSetup

__all__ = ["JointSetup", "fit_joint", "check_shared"]


def fit_joint(
    arrays, params, free, solver, bounds, *, shared, prior, regions, regional, options
) -> JointFitResult:
    """`fit` with `shared` or `regional` parameters and/or a `prior` (see `fit`).

    arrays = (refl, to_sun, to_sensor, normal) and options `fit`'s other keywords
    (start, max_iter, tol, refl_sigma, chunk_size, observation_limits,
    min_observations), as given to `fit`.
    """
    model = (params, free, solver, bounds)
    setup = _check_setup(arrays, model, shared, prior, (regions, regional), options)
    if setup.regional:
        from .regional_fit import fit_regional

        return _with_at_bound(fit_regional(setup), setup.lower, setup.upper)
    return _with_at_bound(_fit_problems(setup), setup.lower, setup.upper)


def _check_setup(arrays, model, shared, prior, regional_fit, options) -> JointSetup:
    """A joint fit's checked arguments; model = (params, free, solver, bounds) and
    regional_fit = (regions, regional), as given to `fit`."""
    params, free, solver, bounds = model
    regions, regional = regional_fit
    check_choice("solver", solver, SOLVERS)
    if isinstance(params, PhotometricFunction) or not isinstance(params, HapkeParams):
        raise ValueError(f"params must be a lumaxlike.HapkeParams, got {type(params).__name__}")
    free = check_free(free, params)
    shared = check_shared(shared, free)
    regional = check_shared(regional, free, "regional")
    if set(shared) & set(regional):
        raise ValueError(
            f"shared and regional must not both name {sorted(set(shared) & set(regional))}"
        )
    if (regions is None) != (not regional):
        raise ValueError("regions (a label map) and regional (the names it applies to) go together")
    band_free = tuple(name for name in free if name not in shared + regional)
    free = band_free + shared + regional  # per-band parameters first: the solvers' order
    refl, geometry = check_arrays(*arrays)
    pixel_shape, (n_bands, n_obs) = refl.shape[:-2], refl.shape[-2:]
    if n_bands == 0:
        raise ValueError(f"refl has no bands (shape {refl.shape})")
    dtype = np.float32 if refl.dtype == np.float32 else np.float64
    max_iter, tol = check_iterations(options["max_iter"], options["tol"], dtype)
    lower, upper = check_bounds(bounds, free, dtype)
    n_pixels = int(np.prod(pixel_shape, dtype=np.int64))
    limits = check_observation_limits(options["observation_limits"])
    min_obs = _check_min_observations(options["min_observations"], len(band_free) + 1, n_obs)
    band_sigma = check_band_sigma(options["refl_sigma"], n_bands)
    if band_sigma is not None:
        band_sigma = np.broadcast_to(band_sigma.astype(np.float64), (n_bands,))
    bounds_by_name = dict(zip(free, zip(lower, upper)))
    fixed_names = shared + regional
    priors = check_priors(
        prior, free, fixed_names, pixel_shape, n_bands, band_sigma is not None, bounds_by_name
    )
    given = checked_starts(
        options["start"], free, fixed_names, params, pixel_shape, n_bands, lower, upper
    )
    return JointSetup(
        flat_refl=refl.reshape(n_pixels, n_bands, n_obs),
        flat_geometry=[
            np.broadcast_to(g, pixel_shape + (n_obs, 3)).reshape(n_pixels, n_obs, 3)
            for g in geometry
        ],
        pixel_shape=pixel_shape,
        regions=regions,
        free=free,
        band_free=band_free,
        shared=shared,
        regional=regional,
        params=params,
        solver=solver,
        lower=lower,
        upper=upper,
        priors=priors,
        given=given,
        band_sigma=band_sigma,
        limits=limits,
        chunk=default_chunk(options["chunk_size"], n_bands, n_obs, n_pixels, solver),
        dtype=dtype,
        fixed=np.array([0.5] + [float(v) for v in params.scalars()]),
        min_obs=min_obs,
        max_iter=max_iter,
        tol=tol,
    )


def _check_min_observations(min_observations, default_min, n_obs) -> int:
    """The valid observations a band needs: `min_observations`, checked, or the default."""
    min_obs = (
        default_min
        if min_observations is None
        else check_positive_int("min_observations", min_observations)
    )
    if min_obs > n_obs:
        raise ValueError(
            f"min_observations = {min_obs} exceeds the {n_obs} observations of every band: "
            f"none could be fitted (pass min_observations to fit with fewer)"
        )
    return min_obs


def _fit_problems(setup: JointSetup) -> JointFitResult:
    """A joint fit without regions: one problem per pixel (`shared`), else per pixel
    and band (a `prior` alone)."""
    n_pixels, n_bands, _ = setup.flat_refl.shape
    per_pixel = bool(setup.shared)  # one problem per pixel; else per pixel and band
    p, s = len(setup.band_free), len(setup.shared)
    n_problems = n_pixels if per_pixel else n_pixels * n_bands
    problem_bands = n_bands if per_pixel else 1
    out = {
        "values_b": np.empty((n_problems, problem_bands, p)),
        "values_s": np.empty((n_problems, s)),
        "status": np.empty(n_problems, np.int8),
        "iterations": np.empty(n_problems, np.int32),
        "cost": np.empty(n_problems),
        "cov_b": np.empty((n_problems, problem_bands, p, p)),
        "cov_s": np.empty((n_problems, s, s)),
        "cov_x": np.empty((n_problems, problem_bands, p, s)),
    }
    observations = np.empty((n_pixels, n_bands), np.int32)
    for first in range(0, n_pixels, setup.chunk):
        last = min(first + setup.chunk, n_pixels)
        _fit_chunk(setup, (first, last), out, observations)
    return _result(
        out,
        observations,
        setup.free,
        setup.shared,
        setup.band_free,
        setup.priors,
        setup.pixel_shape,
        n_bands,
        per_pixel,
        setup.dtype,
    )


def _fit_chunk(setup: JointSetup, span, out, observations):
    """Solve the problems of pixels span = (first, last) into `out` and `observations`
    (`_fit_problems`' arrays), in place."""
    first, last = span
    n, n_bands = last - first, setup.flat_refl.shape[1]
    per_pixel = bool(setup.shared)
    pieces, any_finite = masked_chunk(
        setup.flat_refl[first:last], [g[first:last] for g in setup.flat_geometry], setup.limits
    )
    n_valid = np.sum(np.isfinite(pieces[0]), axis=-1)
    observations[first:last] = n_valid
    start_b, start_s = chunk_starts(
        setup.given,
        first,
        last,
        setup.free,
        setup.shared,
        setup.params,
        pieces,
        setup.solver,
        setup.lower,
        setup.upper,
    )
    chunk_priors = prior_arrays(setup.priors, setup.band_free, setup.shared, first, last, n_bands)
    weight_of_band = np.ones(n_bands) if setup.band_sigma is None else 1.0 / setup.band_sigma
    weight = np.broadcast_to(weight_of_band, (n, n_bands))
    arrays = [pieces[0], weight, start_b, start_s, *chunk_priors]
    geometry_chunk = pieces[1:]
    per_problem = 1 if per_pixel else n_bands  # problems per pixel
    if not per_pixel:  # every (pixel, band) its own problem with one band
        arrays, geometry_chunk = _one_band_problems(arrays, geometry_chunk)
    solver_setup = dict(
        free=setup.free,
        n_band_free=len(setup.band_free),
        fixed=setup.fixed,
        lower=setup.lower,
        upper=setup.upper,
        min_obs=setup.min_obs,
        max_iter=setup.max_iter,
        tol=setup.tol,
        key=setup.params.model_key,
        dtype=setup.dtype,
    )
    solved = solve_chunk(
        setup.solver, arrays, geometry_chunk, setup.chunk * per_problem, solver_setup
    )
    status = solved["status"]
    no_data = ~np.any(any_finite, axis=1) if per_pixel else ~any_finite.reshape(-1)
    status[no_data] = Status.NONFINITE_INPUT
    valid_count = np.sum(n_valid, axis=1) if per_pixel else n_valid.reshape(-1)
    cov_b, cov_s, cov_x = _chunk_covariance(setup, solved, status, valid_count)
    rows = slice(first * per_problem, last * per_problem)
    for name, value in (
        ("values_b", solved["values_b"]),
        ("values_s", solved["values_s"]),
        ("status", status),
        ("iterations", solved["iterations"]),
        ("cost", solved["cost"]),
        ("cov_b", cov_b),
        ("cov_s", cov_s),
        ("cov_x", cov_x),
    ):
        out[name][rows] = value


def _one_band_problems(arrays, geometry):
    """A chunk's solver arrays (refl, weight, start_b, start_s, prior mean_b, weight_b,
    mean_s, weight_s) and geometry with every (pixel, band) its own one-band problem."""
    refl, weight, start_b, _, mean_b, weight_b, _, _ = arrays
    n, n_bands = refl.shape[:2]
    empty = np.zeros((n * n_bands, 0))

    def one_band(a):
        return a.reshape((n * n_bands, 1) + a.shape[2:])

    arrays = [
        one_band(refl),
        one_band(weight),
        one_band(start_b),
        empty,
        one_band(mean_b),
        one_band(weight_b),
        empty,
        empty,
    ]
    return arrays, [np.repeat(g, n_bands, axis=0) for g in geometry]


def _chunk_covariance(setup: JointSetup, solved, status, valid_count):
    """The chunk's covariance blocks (cov_b, cov_s, cov_x); marks CONVERGED problems
    whose covariance is undetermined UNDETERMINED in `status`, in place."""
    p, s = len(setup.band_free), len(setup.shared)
    problem_bands = setup.flat_refl.shape[1] if setup.shared else 1
    if setup.band_sigma is not None:
        variance = np.ones(status.shape)
    else:
        dof = valid_count - (problem_bands * p + s)
        with np.errstate(invalid="ignore", divide="ignore"):
            variance = np.where(dof > 0, solved["cost"] / np.maximum(dof, 1), np.nan)
    is_solved = (status == Status.CONVERGED) | (status == Status.MAX_ITER)
    cov_b, cov_s, cov_x, determined = arrow_covariance(
        solved["a_blocks"],
        solved["c_blocks"],
        solved["d_block"],
        variance,
        is_solved,
    )
    status[(status == Status.CONVERGED) & ~determined] = Status.UNDETERMINED
    return cov_b, cov_s, cov_x


def _with_at_bound(result, lower, upper):
    """`result` with its `at_bound` flags: each free parameter's values on their bounds."""
    return dataclasses.replace(
        result, at_bound=at_bound_flags(result.free, result.values, lower, upper)
    )


def _result(
    out,
    observations,
    free,
    shared,
    band_free,
    priors,
    pixel_shape,
    n_bands,
    per_pixel,
    dtype,
):
    problem_shape = pixel_shape if per_pixel else pixel_shape + (n_bands,)
    values, dfs = {}, {}
    cov_b = out["cov_b"].reshape(pixel_shape + (n_bands,) + out["cov_b"].shape[-2:])
    cov_x = out["cov_x"].reshape(pixel_shape + (n_bands,) + out["cov_x"].shape[-2:])
    cov_s = out["cov_s"].reshape(problem_shape + out["cov_s"].shape[-2:])
    for j, name in enumerate(band_free):
        values[name] = out["values_b"][..., j].reshape(pixel_shape + (n_bands,)).astype(dtype)
        variance = cov_b[..., j, j]
        sigma = None if name not in priors else priors[name][1].reshape(pixel_shape + (n_bands,))
        dfs[name] = degrees_of_freedom(variance, sigma).astype(dtype)
    for q, name in enumerate(shared):
        values[name] = out["values_s"][:, q].reshape(pixel_shape).astype(dtype)
        sigma = None if name not in priors else priors[name][1].reshape(pixel_shape)
        dfs[name] = degrees_of_freedom(cov_s[..., q, q], sigma).astype(dtype)
    return JointFitResult(
        free=free,
        shared=shared,
        values=values,
        status=out["status"].reshape(problem_shape),
        iterations=out["iterations"].reshape(problem_shape),
        cost=out["cost"].reshape(problem_shape).astype(dtype),
        covariance_bands=cov_b.astype(dtype),
        covariance_shared=cov_s.astype(dtype),
        covariance_cross=cov_x.astype(dtype),
        dfs=dfs,
        observations=observations.reshape(pixel_shape + (n_bands,)),
    )
