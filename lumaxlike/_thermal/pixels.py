"""The pixels of `remove_thermal` solved by chunks (`solve_pixels`): each chunk's T (by
the continuum or prior fit, or given) and every band corrected at it, the status and the
outputs written in place."""

from __future__ import annotations

import numpy as np

from .._inverse.albedo.invert import invert, solver_chunk_pixels
from .._status import Status
from . import emissivity
from .continuum import continuum_fit
from .correction import correct
from .prior import prior_fit

__all__ = ["CHUNK", "solve_pixels"]

# pixels per call of the JAX solvers (the correction solves pixels x bands problems, each
# with its own state); the numba solvers' chunks are `invert`'s (`solver_chunk_pixels`)
CHUNK = 4096


def solve_pixels(flat, geometry_and_cos_e, spectral, settings, status) -> dict:
    """The outputs (`ThermalResult`'s fields but status, flat) of the pixels still
    CONVERGED in `status` (to be solved), by chunks (`CHUNK` for JAX, `invert`'s for
    numba); the others' are NaN. Allocated without a fill: every value is written once."""
    geometry, cos_e = geometry_and_cos_e
    outputs = {k: np.empty(flat.shape[:1]) for k in ("temperature", "temperature_sigma")}
    outputs.update({k: np.empty(flat.shape) for k in ("w", "reflectance", "emission")})
    unsolved = status != Status.CONVERGED
    for value in outputs.values():
        value[unsolved] = np.nan
    good = np.flatnonzero(~unsolved)
    if not good.size:
        return outputs
    params, solver = settings["params"], settings["solver"]
    table = emissivity.cached_emissivity_table(
        (cos_e[good].min(), cos_e[good].max()), params, solver
    )
    size = solver_chunk_pixels(solver, flat.shape[1], np.float64) if solver == "numba" else CHUNK
    for indices in np.array_split(good, -(-good.size // size)):
        chunk = _rows(indices)
        arrays = {k: v[chunk] for k, v in geometry.items()}
        arrays["coefficients"] = emissivity.pixel_coefficients(cos_e[chunk], table)
        _solve_chunk(chunk, arrays, flat[chunk], spectral, settings, status, outputs)
    return outputs


def _rows(indices: np.ndarray):
    """A slice of the flat arrays for consecutive `indices` (views, copies without a
    gather), else `indices`."""
    if indices[-1] - indices[0] + 1 == indices.size:
        return slice(int(indices[0]), int(indices[-1]) + 1)
    return indices


def _solve_chunk(chunk, arrays, observed, spectral, settings, status, outputs):
    """T (by the continuum fit or given) and the correction of the pixels `chunk` (indices
    into the flat outputs, or a slice; arrays: their problem arrays, observed their r); writes
    `status` and `outputs` there."""
    wavelengths, solar, _, inside = spectral
    if settings["method"] == "continuum":
        # the continuum's start: invert's w at the window's first band
        first = int(np.flatnonzero(inside)[0])
        vectors = (arrays["to_sun"], arrays["to_sensor"], arrays["normal"])
        w_first = invert(
            observed[:, first : first + 1], *vectors, settings["params"], settings["solver"]
        ).w
        temp, tsig, status[chunk] = continuum_fit(
            arrays,
            observed,
            w_first[:, 0],
            spectral,
            settings["estimate"],
            settings["bounds"],
            settings["max_sigma"],
            settings,
        )
    elif settings["method"] == "prior":
        temp, tsig, status[chunk] = prior_fit(chunk, arrays, observed, spectral, settings)
    else:
        temp, tsig = settings["given"][chunk], np.full(observed.shape[0], np.nan)
    # UNREACHABLE: no T within temperature_bounds (on a bound, or no upper limit below
    # the upper one): every output NaN, as `invert`'s
    unreachable = status[chunk] == Status.UNREACHABLE
    temp, tsig = np.where(unreachable, np.nan, temp), np.where(unreachable, np.nan, tsig)
    outputs["temperature"][chunk], outputs["temperature_sigma"][chunk] = temp, tsig
    # NOT_CONSTRAINED: T is an upper limit only; nothing is removed (see docs)
    removed = np.where(status[chunk] == Status.NOT_CONSTRAINED, np.nan, temp)
    names = ("w", "reflectance", "emission")
    views = isinstance(chunk, slice)  # rows of the outputs: written in place
    into = tuple(outputs[k][chunk] if views else np.empty(observed.shape) for k in names)
    correct(arrays, observed, removed, wavelengths, solar, settings, into)
    for values in into:
        values[unreachable] = np.nan
    # a band of a solved pixel that could not be corrected (NaN where r_obs is finite)
    failed = np.any(np.isnan(into[0]) & np.isfinite(observed), axis=-1)
    band_failed = failed & (status[chunk] == Status.CONVERGED)
    status[chunk] = np.where(band_failed, Status.BAND_FAILED, status[chunk])
    if not views:
        for name, values in zip(names, into):
            outputs[name][chunk] = values
