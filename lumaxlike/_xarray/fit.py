"""`fit_dataarray`: `lumaxlike.fit` on multi-angle observations in a DataArray (an
observation dim), chunk by chunk; also ``DataArray.hapke.fit``."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping

import numpy as np
import xarray as xr

from .._io.missions.product_dataarray import (
    product_record_of,
    refuse_normalised_dataarray,
    with_bad_band_status,
)
from .._io.read.units import uncertainty_to_r
from .._options import SolverOptions, solver_options
from .._provenance import python_call
from .chunks import (
    ChunkMap,
    apply_to_chunks,
    check_front_end,
    chunked_inputs,
    provenance_of,
    result_dataset,
    spectral_dim_of,
    worker_num_threads,
)

__all__ = ["fit_dataarray"]


def _fit_block(r, to_sun, to_sensor, normal, refl_sigma, *, params, free, fit_options, num_threads):
    """One chunk (`apply_to_chunks`): r (..., bands, observations), vectors (...,
    observations, 3) -> the fit's maps (..., bands), in `_fit_fields(free)` order
    (`_joint_fields` for a joint fit: shared parameters and per-pixel problems' fields
    without the band axis). The noise is in `fit_options` (`refl_sigma` is None)."""
    from .._inverse.fit.fit import fit
    from .._inverse.joint.result import JointFitResult
    from .._operations.blocks import numba_threads

    solver = fit_options["solver"]
    num_threads = worker_num_threads(solver, num_threads)
    context = numba_threads(num_threads) if solver == "numba" else contextlib.nullcontext()
    with context:
        result = fit(r, to_sun, to_sensor, normal, params, free=free, **fit_options)
    maps = {name: result[name] for name in free}
    maps.update({f"sigma_{name}": result.sigma(name) for name in free})
    maps.update(
        status=result.status, iterations=result.iterations, observations=result.observations
    )
    if isinstance(result, JointFitResult):
        maps.update({f"dfs_{name}": result.dfs[name] for name in free}, cost=result.cost)
        fields = _joint_fields(free, fit_options.get("shared", ()))
        return tuple(maps[field] for field, _ in fields)
    maps["residual"] = result.residual_norm
    maps.update({f"at_bound_{name}": result.at_bound[name] for name in free})
    return tuple(maps[field] for field in _fit_fields(free))


def _fit_fields(free) -> tuple[str, ...]:
    return (
        *free,
        *(f"sigma_{name}" for name in free),
        "status",
        "iterations",
        "residual",
        "observations",
        *(f"at_bound_{name}" for name in free),
    )


def _joint_fields(free, shared) -> tuple[tuple[str, bool], ...]:
    """(field, has a band axis) of a joint fit's maps, in `_fit_chunk`'s order."""
    per_band = {name: name not in shared for name in free}
    problem = not shared  # with shared parameters a problem is a pixel (no band axis)
    return (
        *((name, per_band[name]) for name in free),
        *((f"sigma_{name}", per_band[name]) for name in free),
        *((f"dfs_{name}", per_band[name]) for name in free),
        ("status", problem),
        ("iterations", problem),
        ("cost", problem),
        ("observations", True),
    )


def _fit_regional(
    inputs, regions, regional, region_memory, maps, units, params, free, fit_options, num_threads
) -> dict:
    """`fit_dataarray`'s regional fit (`lumaxlike._xarray.regions`): labels checked,
    regions grouped under the cap (refused above it), the groups fitted in this process."""
    from .._inverse.fit.arguments import OBSERVATIONS_PER_CHUNK
    from .._operations.blocks import numba_threads
    from .._run.region_groups import REGION_MEMORY_BYTES, region_pixel_bytes
    from .regions import checked_labels, fit_regions, region_groups

    memory = REGION_MEMORY_BYTES if region_memory is None else region_memory
    if isinstance(memory, bool) or not (isinstance(memory, (int, float)) and memory > 0):
        raise ValueError(f"region_memory must be a positive number of bytes, got {memory!r}")
    labels = checked_labels(regions, inputs.refl, inputs.pixel_dims)
    n_bands = inputs.refl.sizes[inputs.spec]
    n_obs = inputs.refl.sizes[inputs.observation_dim]
    shared = fit_options.get("shared", ())
    n_band_free = len([n for n in free if n not in shared + regional])
    pixel_bytes = region_pixel_bytes(n_bands, n_obs, n_band_free, len(shared) + len(regional))
    groups = region_groups(labels, pixel_bytes, memory)
    per_chunk = max(1, OBSERVATIONS_PER_CHUNK // max(1, n_bands * n_obs))
    # one chunk size for every group: the JAX programs compile once
    options = {
        **fit_options,
        "free": free,
        "regional": regional,
        "chunk_size": min(per_chunk, max(len(g) for g in groups)),
    }
    solver = fit_options["solver"]
    context = numba_threads(num_threads) if solver == "numba" else contextlib.nullcontext()
    with context:
        return fit_regions(
            inputs, labels, groups, maps, units=units, params=params, fit_options=options
        )


def fit_dataarray(
    refl: xr.DataArray,
    geometry,
    params,
    free=("w", "b", "c"),
    solver: str | SolverOptions = "jax",
    *,
    units: str,
    observation_dim: str = "observation",
    spectral_dim: str | None = None,
    observation_limits: Mapping | None = None,
    min_observations: int | None = None,
    refl_sigma: float | None = None,
    bounds: Mapping | None = None,
    max_iter: int | None = None,
    tol: float | None = None,
    num_threads: int | None = None,
    shared=(),
    prior: Mapping | None = None,
    regions: xr.DataArray | None = None,
    regional=(),
    region_memory: float | None = None,
) -> xr.Dataset:
    """Fit Hapke parameters per pixel and band to multi-angle observations, chunk by chunk.

    `lumaxlike.fit` through ``xarray.apply_ufunc(..., dask="parallelized")``; also the
    accessor ``refl.hapke.fit(...)``.

    Args:
        refl: reflectance with a spectral dim (``band``/``wavelength`` or
            `spectral_dim`) and an observation dim (`observation_dim`); every other dim
            is a pixel dim. NumPy- or dask-backed (the spectral and observation dims are
            each rechunked into one chunk). NaN observations are left out of their
            problem (`lumaxlike.fit`'s masks). Bands its attrs mark bad (from
            `lumaxlike.open_product`) get the status ``BAD_BAND``; a product normalised
            to a standard geometry is refused.
        geometry: as for `lumaxlike.invert_dataarray` (angles [deg] or vectors, optional
            ``normal``), with the observation dim on the variables that vary with it.
        params: `lumaxlike.HapkeParams`: fixed parameters and the free ones' start.
        free: as for `lumaxlike.fit` (so are ``solver``, its name or a
            `lumaxlike.SolverOptions`, ``observation_limits`` in radians,
            ``min_observations``, ``bounds``, ``max_iter`` and ``tol``).
        units: ``"r"``, ``"radf"`` or ``"reff"`` (each observation with its own cos i).
        refl_sigma: standard uncertainty of ``refl`` in ``units`` (``"r"`` or ``"radf"``).
        num_threads: numba threads per chunk; None = one inside dask workers, else all.
        shared: names among `free` shared by a pixel's bands (`lumaxlike.fit`): their
            maps, and status, iterations and ``cost``, have no spectral dim.
        prior: {name: (mean, sigma)} scalar Gaussian priors in the parameters' units
            (`lumaxlike.fit`); needs `refl_sigma`.
        regions: an integer DataArray of region labels on ``refl``'s pixel dims (same
            names, sizes and coordinates; negative, or NaN, = left out), with
            `regional`: `lumaxlike.fit`'s ``regions=``. A region couples all its
            pixels, so it is not fitted chunk by chunk: the regions are fitted in groups
            under `region_memory`, each group's pixels gathered from ``refl`` (from
            every dask chunk they lie in), and the result is computed at the call
            (NumPy-backed, also for a dask-backed ``refl``); docs/joint-fits.md.
        regional: the names among `free` (not "w") that take one value per region.
        region_memory: cap on the memory of the regions fitted at once [bytes]
            (default 4 GiB, as ``lumaxlike fit --regions``); a region whose fit needs
            more is refused before any fit.

    Returns:
        With `shared`, `prior` or `regions`: as below, plus ``dfs_<name>`` (degrees of
        freedom for signal) and ``cost`` (the objective) in place of ``residual``; with
        `regions` also, on a ``region`` dim (the labels, ascending), ``region_<name>``
        and ``region_sigma_<name>`` of each regional parameter, ``region_status``,
        ``region_iterations`` and ``region_cost`` (a regional parameter's map holds its
        region's value at each pixel, NaN outside every region). Otherwise:
        Dataset with one variable per free parameter (``w``, ``b``, ...), ``sigma_<name>``
        for each, ``status`` (int8), ``iterations`` (int32), ``residual`` (residual norm
        [1/sr]), ``observations`` (int32, valid observations used) and
        ``at_bound_<name>`` for each (bool: the value sits on its bound, where
        ``sigma_<name>`` is no measure of its uncertainty), dims of ``refl``
        without the observation dim; lazy when ``refl`` is dask-backed. attrs: ``refl``'s
        plus the ``lumaxlike_*`` record and ``lumaxlike_fit_free``.

    Raises:
        ValueError: naming the argument: not a DataArray, missing dims, bad units,
            misaligned geometry, limits or min_observations, `regions` not on refl's
            pixel dims or not integer, a region above `region_memory` (checked before
            any work).
    """

    from .._inverse.fit.arguments import OBSERVATIONS_PER_CHUNK, check_free
    from .._inverse.fit.observation_masks import check_observation_limits
    from .._params import HapkeParams

    if not isinstance(refl, xr.DataArray):
        raise ValueError(f"refl must be an xarray.DataArray, got {type(refl).__name__}")
    if not isinstance(params, HapkeParams):
        raise ValueError(f"params must be a lumaxlike.HapkeParams, got {type(params).__name__}")
    check_front_end(refl, units, None)
    refuse_normalised_dataarray(refl, "fit_dataarray")
    options = solver_options(solver, max_iter=max_iter, tol=tol, num_threads=num_threads)
    solver, max_iter, tol, num_threads = (
        options.solver,
        options.max_iter,
        options.tol,
        options.num_threads,
    )
    free = check_free(free, params)
    spec = spectral_dim_of(refl, spectral_dim)
    if observation_dim not in refl.dims:
        raise ValueError(f"observation_dim={observation_dim!r} is not a dim of refl {refl.dims}")
    n_obs = refl.sizes[observation_dim]
    limits = check_observation_limits(observation_limits)
    minimum = len(free) + 1 if min_observations is None else int(min_observations)
    if minimum < 1 or minimum > n_obs:
        raise ValueError(
            f"min_observations = {minimum} must lie in [1, {n_obs}] (the observations of refl)"
        )
    if refl_sigma is not None and (units == "reff" or not refl_sigma > 0):
        raise ValueError(
            f"refl_sigma must be a positive number, for units 'r' or 'radf'; got {refl_sigma!r}, {units!r}"
        )
    inputs = chunked_inputs(refl, geometry, spec, observation_dim=observation_dim)
    refl = inputs.refl
    dtype = np.result_type(refl.dtype, np.float32)
    per_chunk = max(1, OBSERVATIONS_PER_CHUNK // max(1, refl.sizes[spec] * n_obs))
    fit_options = {
        "solver": solver,
        "observation_limits": limits,
        "min_observations": minimum,
        "chunk_size": min(inputs.largest, per_chunk),
        "bounds": bounds,
    }
    fit_options.update({k: v for k, v in (("max_iter", max_iter), ("tol", tol)) if v is not None})
    if refl_sigma is not None:
        fit_options["refl_sigma"] = float(uncertainty_to_r(refl_sigma, units))
    if (regions is None) != (not regional):
        raise ValueError(
            "regions (a label DataArray) and regional (the names it applies to) go together"
        )
    joint = bool(shared) or bool(prior) or bool(regional)
    if joint:
        from .._inverse.joint.joint import check_shared

        shared = check_shared(shared, free)
        regional = check_shared(regional, free, "regional")
        if set(shared) & set(regional):
            raise ValueError(
                f"shared and regional must not both name {sorted(set(shared) & set(regional))}"
            )
        for name, pair in (prior or {}).items():
            if np.ndim(pair[0]) or np.ndim(pair[1]):
                raise ValueError(
                    f"prior[{name!r}]: fit_dataarray takes scalar priors (mean, sigma)"
                )
        if prior and refl_sigma is None:
            raise ValueError("prior needs refl_sigma (the observations' noise weighs the prior)")
        fit_options.update(shared=shared, prior=prior)
        if min_observations is None:  # joint fits' default: per-band parameters + 1
            per_band = [n for n in free if n not in shared + regional]
            fit_options["min_observations"] = len(per_band) + 1
        with_band = _joint_fields(free, shared + regional)
    else:
        with_band = tuple((field, True) for field in _fit_fields(free))
    integer: dict[str, type[np.generic]] = {
        "status": np.int8,
        "iterations": np.int32,
        "observations": np.int32,
    }
    integer.update({f"at_bound_{name}": np.bool_ for name in free})
    maps = [
        ChunkMap(
            field,
            integer.get(field, dtype),
            (spec,) if band else (),
            {"long_name": f"lumaxlike.fit {field}"},
        )
        for field, band in with_band
    ]
    if regional:
        variables = _fit_regional(
            inputs,
            regions,
            regional,
            region_memory,
            maps,
            units,
            params,
            free,
            fit_options,
            num_threads,
        )
    else:
        variables = apply_to_chunks(
            _fit_block,
            inputs,
            maps,
            units=units,
            kwargs={
                "params": params,
                "free": free,
                "fit_options": fit_options,
                "num_threads": num_threads,
            },
        )
    variables["status"] = with_bad_band_status(variables["status"], refl, spec)
    provenance = provenance_of(
        refl,
        geometry,
        params=[params] * refl.sizes[spec],
        units=units,
        solver=solver,
        tol=tol,
        max_iter=max_iter,
        refl_sigma=refl_sigma,
        dtype=dtype,
        product=product_record_of(refl, False),
        command=python_call(
            "fit_dataarray",
            refl,
            geometry,
            params,
            free,
            solver,
            units=units,
            observation_dim=observation_dim,
            observation_limits=observation_limits,
            min_observations=min_observations,
            refl_sigma=refl_sigma,
        ),
    )
    attrs = {"lumaxlike_fit_free": json.dumps(list(free))}
    if joint:
        attrs["lumaxlike_fit_shared"] = json.dumps(list(shared))
        attrs["lumaxlike_fit_prior"] = json.dumps(
            {name: [float(v) for v in pair] for name, pair in (prior or {}).items()}
        )
    if regional:
        attrs["lumaxlike_fit_regional"] = json.dumps(list(regional))
    return result_dataset(variables, refl, provenance, attrs)
