"""`unmix` with free grain sizes and nanophase iron (`unmix_optical`): the arguments
checked, the problems cut into chunks for the numba or JAX solver, the result assembled."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np

from .._status import Status
from .optical import check_free, finish, parameter_bounds
from .optical_starts import best_of, check_starts, reentry_points, start_points

__all__ = ["unmix_optical"]


@dataclasses.dataclass(frozen=True)
class _Options:
    """`unmix`'s keywords that `unmix_optical` takes as given (checked in `_check`)."""

    free: Any
    route: str
    sum_to_one: Any
    refl_sigma: Any
    max_iter: Any
    tol: Any
    chunk_size: Any
    starts: Any = None


class _Problem(NamedTuple):
    """The checked problem: refl (pixels, bands) in the endmembers' band order, geometry
    (3 arrays (pixels, 3)), the pixel shape, the band weights, whether refl_sigma was
    given, the bounds (start, lower, upper, fixed), the starts, the settings
    (max_iter, tol), the pixels per chunk and whether grain sizes are free."""

    refl: np.ndarray
    geometry: tuple
    pixel_shape: tuple
    weights: np.ndarray
    weighted: bool
    bounds: tuple
    points: list
    settings: tuple
    chunk: int
    grain_free: bool
    dtype: np.dtype


def unmix_optical(
    refl, to_sun, to_sensor, normal, endmembers, params, solver, *, wavelengths, **options
):
    """`unmix` with `free` parameters (its arguments, `options` its keywords free,
    starts, route, sum_to_one, refl_sigma, max_iter, tol, chunk_size; checked here)."""
    from .result import UnmixResult

    settings = _Options(**options)
    problem = _check(
        refl, (to_sun, to_sensor, normal), endmembers, params, solver, settings, wavelengths
    )
    n_pixels = problem.refl.shape[0]
    pieces = []
    for first in range(0, max(n_pixels, 1), problem.chunk):
        last = min(first + problem.chunk, n_pixels)
        chunk = (problem.refl[first:last], *(v[first:last] for v in problem.geometry))
        solved = _solve_chunk(chunk, problem, endmembers, params, solver)
        with np.errstate(invalid="ignore"):
            dark = ~np.any(chunk[0] > 0.0, axis=-1) & np.isin(
                solved["status"], (Status.CONVERGED, Status.MAX_ITER)
            )
        solved["status"] = np.where(dark, np.int8(Status.UNREACHABLE), solved["status"]).astype(
            np.int8
        )
        _, lower, upper, fixed = problem.bounds
        n_bands = problem.refl.shape[1]
        pieces.append(finish(solved, endmembers, lower, upper, fixed, problem.weighted, n_bands))
    outputs = {k: np.concatenate([piece[k] for piece in pieces]) for k in pieces[0]}
    if problem.dtype == np.float32:
        outputs = {
            k: v.astype(np.float32) if v.dtype == np.float64 else v for k, v in outputs.items()
        }
    return UnmixResult(
        names=endmembers.names,
        route="one_step",
        **{k: v.reshape(problem.pixel_shape + v.shape[1:]) for k, v in outputs.items()},
    )


def _check(refl, geometry, endmembers, params, solver, options, wavelengths) -> _Problem:
    """`unmix_optical`'s arguments checked (ValueError naming the argument)."""
    from .._inverse.albedo.invert import SOLVERS
    from .._inverse.chunking import call_chunk
    from .._params import HapkeParams
    from .._shapes import as_float_array, check_band_sigma, check_choice, check_positive_int, layout
    from .endmembers import Endmembers

    check_choice("solver", solver, SOLVERS)
    if not isinstance(endmembers, Endmembers):
        raise ValueError(
            f"endmembers must be a lumaxlike.Endmembers, got {type(endmembers).__name__}"
        )
    grain_free, npfe_free = check_free(options.free, endmembers, options.route, options.sum_to_one)
    count = check_starts(options.starts)
    if not isinstance(params, HapkeParams):
        raise ValueError(f"params must be a lumaxlike.HapkeParams, got {type(params).__name__}")
    refl = as_float_array("refl", refl)
    names = ("to_sun", "to_sensor", "normal")
    vectors = {name: as_float_array(name, g) for name, g in zip(names, geometry)}
    shape = layout("refl", refl, vectors)
    if (
        refl.ndim == 0
        or refl.shape[-1] != endmembers.n_bands
        or shape.n_bands != endmembers.n_bands
    ):
        raise ValueError(
            f"refl has shape {refl.shape}: its last axis must hold the endmembers' {endmembers.n_bands} bands"
        )
    max_iter = check_positive_int("max_iter", options.max_iter)
    tol = 1e-10 if options.tol is None else float(options.tol)
    if not tol > 0.0:
        raise ValueError(f"tol must be positive, got {tol!r}")
    band_sigma = check_band_sigma(options.refl_sigma, shape.n_bands)
    refl, band_sigma = _in_band_order(refl, band_sigma, wavelengths, endmembers, shape.n_bands)
    n_pixels, n_bands, p = shape.n_pixels, shape.n_bands, endmembers.n_endmembers
    weights = np.broadcast_to(
        1.0 if band_sigma is None else 1.0 / np.asarray(band_sigma, np.float64), (n_bands,)
    ).copy()
    start, lower, upper, fixed = bounds = parameter_bounds(endmembers, grain_free, npfe_free)
    largest = max(1, (1 << 20) // max(1, n_bands * (2 * p + 2)))
    chunk_size = options.chunk_size
    chunk = largest if chunk_size is None else check_positive_int("chunk_size", chunk_size)
    return _Problem(
        refl=refl.reshape(n_pixels, n_bands),
        geometry=tuple(
            np.broadcast_to(g, shape.pixel_shape + (3,)).reshape(n_pixels, 3)
            for g in vectors.values()
        ),
        pixel_shape=shape.pixel_shape,
        weights=weights,
        weighted=band_sigma is not None,
        bounds=bounds,
        points=start_points(start, lower, upper, fixed, p, count),
        settings=(max_iter, tol),
        chunk=call_chunk(solver, max(n_pixels, 1), chunk),
        grain_free=grain_free,
        dtype=refl.dtype,
    )


def _in_band_order(refl, band_sigma, wavelengths, endmembers, n_bands):
    """(refl, band_sigma) with the bands in the endmembers' order (`band_order`)."""
    from .._shapes import as_float_array
    from .band_matching import band_order

    if wavelengths is not None:
        wavelengths = as_float_array("wavelengths", wavelengths)
        if wavelengths.shape != (n_bands,):
            raise ValueError(
                f"wavelengths must hold refl's {n_bands} band centres [um], got shape {wavelengths.shape}"
            )
    order = band_order(wavelengths, endmembers)
    if order is not None and not np.array_equal(order, np.arange(n_bands)):
        refl = refl[..., order]
        if band_sigma is not None and np.ndim(band_sigma) == 1:
            band_sigma = band_sigma[order]
    return refl, band_sigma


def _solve_chunk(chunk, problem: _Problem, endmembers, params, solver) -> dict:
    """One chunk (refl, to_sun, to_sensor, normal) from each start (`start_points`), the
    best per pixel kept (`best_of`); with several starts, stuck grain sizes put back once
    (`reentry_points`)."""
    if solver == "numba":
        from .optical_numba import solve_optical_numba as solve
    else:
        from .optical_jax import solve_optical_jax as solve
    _, lower, upper, fixed = problem.bounds
    p = endmembers.n_endmembers

    def run(pixels, point):
        bounds = (point, lower, upper, fixed)
        return solve(
            pixels, params, endmembers, problem.weights, bounds, problem.settings, problem.chunk
        )

    solved = None
    for point in problem.points:
        tried = run(chunk, point)
        if len(problem.points) > 1 and problem.grain_free:
            again, need = reentry_points(tried, point, lower, upper, fixed, p)
            if np.any(need):
                retried = run(tuple(a[need] for a in chunk), again[need])
                subset = {key: value[need] for key, value in tried.items()}
                tried = {key: np.array(value) for key, value in tried.items()}
                for key, value in best_of(subset, retried).items():
                    tried[key][need] = value
        solved = tried if solved is None else best_of(solved, tried)
    assert solved is not None
    return solved
