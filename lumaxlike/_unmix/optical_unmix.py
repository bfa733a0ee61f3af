"""`unmix` with free grain sizes and nanophase iron (`unmix_optical`): the arguments
checked, the problems cut into chunks for the numba or JAX solver, the result assembled."""

from __future__ import annotations

import numpy as np

from .._status import Status
from .optical import (
    best_of,
    check_free,
    check_starts,
    finish,
    parameter_bounds,
    reentry_points,
    start_points,
)

__all__ = ["unmix_optical"]


def unmix_optical(
    refl,
    to_sun,
    to_sensor,
    normal,
    endmembers,
    params,
    solver,
    *,
    free,
    starts=None,
    route,
    sum_to_one,
    refl_sigma,
    max_iter,
    tol,
    chunk_size,
    wavelengths,
):
    """`unmix` with `free` parameters (its arguments; checked here)."""
    from .._inverse.albedo.invert import SOLVERS
    from .._inverse.chunking import call_chunk
    from .._params import HapkeParams
    from .._shapes import as_float_array, check_band_sigma, check_choice, check_positive_int, layout
    from .band_matching import band_order
    from .endmembers import Endmembers
    from .result import UnmixResult

    check_choice("solver", solver, SOLVERS)
    if not isinstance(endmembers, Endmembers):
        raise ValueError(
            f"endmembers must be a lumaxlike.Endmembers, got {type(endmembers).__name__}"
        )
    grain_free, npfe_free = check_free(free, endmembers, route, sum_to_one)
    count = check_starts(starts)
    if not isinstance(params, HapkeParams):
        raise ValueError(f"params must be a lumaxlike.HapkeParams, got {type(params).__name__}")
    refl = as_float_array("refl", refl)
    geometry = {
        name: as_float_array(name, g)
        for name, g in zip(("to_sun", "to_sensor", "normal"), (to_sun, to_sensor, normal))
    }
    shape = layout("refl", refl, geometry)
    if (
        refl.ndim == 0
        or refl.shape[-1] != endmembers.n_bands
        or shape.n_bands != endmembers.n_bands
    ):
        raise ValueError(
            f"refl has shape {refl.shape}: its last axis must hold the endmembers' {endmembers.n_bands} bands"
        )
    max_iter = check_positive_int("max_iter", max_iter)
    tol = 1e-10 if tol is None else float(tol)
    if not tol > 0.0:
        raise ValueError(f"tol must be positive, got {tol!r}")
    band_sigma = check_band_sigma(refl_sigma, shape.n_bands)
    if wavelengths is not None:
        wavelengths = as_float_array("wavelengths", wavelengths)
        if wavelengths.shape != (shape.n_bands,):
            raise ValueError(
                f"wavelengths must hold refl's {shape.n_bands} band centres [um], got shape {wavelengths.shape}"
            )
    order = band_order(wavelengths, endmembers)
    if order is not None and not np.array_equal(order, np.arange(shape.n_bands)):
        refl = refl[..., order]
        if band_sigma is not None and np.ndim(band_sigma) == 1:
            band_sigma = band_sigma[order]
    n_pixels, n_bands, p = shape.n_pixels, shape.n_bands, endmembers.n_endmembers
    weights = np.broadcast_to(
        1.0 if band_sigma is None else 1.0 / np.asarray(band_sigma, np.float64), (n_bands,)
    ).copy()
    start, lower, upper, fixed = parameter_bounds(endmembers, grain_free, npfe_free)
    points = start_points(start, lower, upper, fixed, p, count)
    largest = max(1, (1 << 20) // max(1, n_bands * (2 * p + 2)))
    chunk = largest if chunk_size is None else check_positive_int("chunk_size", chunk_size)
    chunk = call_chunk(solver, max(n_pixels, 1), chunk)
    flat = refl.reshape(n_pixels, n_bands)
    vectors = [
        np.broadcast_to(g, shape.pixel_shape + (3,)).reshape(n_pixels, 3) for g in geometry.values()
    ]
    pieces = []
    for first in range(0, max(n_pixels, 1), chunk):
        last = min(first + chunk, n_pixels)
        problem = (flat[first:last], *(v[first:last] for v in vectors))
        sun, sensor, up = problem[1], problem[2], problem[3]
        if solver == "numba":
            from .optical_numba import solve_optical_numba as solve
        else:
            from .optical_jax import solve_optical_jax as solve
        solved = None
        for point in points:  # each start on every pixel, the best kept (`best_of`)
            tried = solve(
                problem[0],
                sun,
                sensor,
                up,
                params,
                endmembers,
                weights,
                point,
                lower,
                upper,
                fixed,
                max_iter,
                tol,
                chunk,
            )
            if count > 1 and grain_free:  # stuck grain sizes put back once (`reentry_points`)
                again, need = reentry_points(tried, point, lower, upper, fixed, p)
                if np.any(need):
                    retried = solve(
                        problem[0][need],
                        sun[need],
                        sensor[need],
                        up[need],
                        params,
                        endmembers,
                        weights,
                        again[need],
                        lower,
                        upper,
                        fixed,
                        max_iter,
                        tol,
                        chunk,
                    )
                    subset = {key: value[need] for key, value in tried.items()}
                    tried = {key: np.array(value) for key, value in tried.items()}
                    for key, value in best_of(subset, retried).items():
                        tried[key][need] = value
            solved = tried if solved is None else best_of(solved, tried)
        assert solved is not None
        with np.errstate(invalid="ignore"):
            dark = ~np.any(problem[0] > 0.0, axis=-1) & np.isin(
                solved["status"], (Status.CONVERGED, Status.MAX_ITER)
            )
        solved["status"] = np.where(dark, np.int8(Status.UNREACHABLE), solved["status"]).astype(
            np.int8
        )
        pieces.append(
            finish(solved, endmembers, lower, upper, fixed, band_sigma is not None, n_bands)
        )
    outputs = {k: np.concatenate([piece[k] for piece in pieces]) for k in pieces[0]}
    if refl.dtype == np.float32:
        outputs = {
            k: v.astype(np.float32) if v.dtype == np.float64 else v for k, v in outputs.items()
        }
    return UnmixResult(
        names=endmembers.names,
        route="one_step",
        **{k: v.reshape(shape.pixel_shape + v.shape[1:]) for k, v in outputs.items()},
    )
