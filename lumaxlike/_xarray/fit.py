"""`fit_dataarray`: `lumaxlike.fit` on multi-angle observations in a DataArray (an
observation dim), chunk by chunk; also ``DataArray.hapke.fit``."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping

import numpy as np
import xarray as xr

from .._io.product_dataarray import (
    refuse_normalised_dataarray,
)
from .._io.units import uncertainty_to_r
from .._provenance import make_provenance, python_call
from .._run.tasks import SolverOptions
from .chunks import (
    check_front_end,
    chunk_geometry,
    chunked_inputs,
    in_worker_thread,
    result_attrs,
    spectral_dim_of,
)
from .geometry import VECTOR_DIM, geometry_vectors

__all__ = ["fit_dataarray"]


def _fit_chunk(refl, to_sun, to_sensor, normal, *regions, units, params, free, fit_options,
               num_threads):  # fmt: skip
    """apply_ufunc kernel: refl (..., bands, observations), vectors (..., observations, 3)
    -> the fit's maps (..., bands), in `_fit_fields(free)` order (`_joint_fields` for a
    joint fit: shared parameters and per-pixel problems' fields without the band axis)."""
    from .._inverse.fit import fit
    from .._run.tasks import numba_threads

    pixels, n_obs = refl.shape[:-2], refl.shape[-1]
    # units are per observation (reff: its own cos i): convert with observations before bands
    r, to_sun, to_sensor, normal, _ = chunk_geometry(
        np.moveaxis(refl, -1, -2), to_sun, to_sensor, normal, units, None, pixels + (n_obs,)
    )
    r = np.moveaxis(r, -1, -2)
    if num_threads is None and fit_options["solver"] == "numba" and in_worker_thread():
        num_threads = 1
    context = (
        numba_threads(num_threads) if fit_options["solver"] == "numba" else contextlib.nullcontext()
    )
    with context:
        if regions:  # the label map of a regional fit (the whole image: one chunk)
            fit_options = {**fit_options, "regions": regions[0]}
        result = fit(r, to_sun, to_sensor, normal, params, free=free, **fit_options)
    maps = {name: result[name] for name in free}
    maps.update({f"sigma_{name}": result.sigma(name) for name in free})
    maps.update(
        status=result.status, iterations=result.iterations, observations=result.observations
    )
    if hasattr(result, "dfs"):  # a JointFitResult
        maps.update({f"dfs_{name}": result.dfs[name] for name in free}, cost=result.cost)
        no_band = tuple(fit_options.get("shared", ())) + tuple(fit_options.get("regional", ()))
        return tuple(maps[field] for field, _ in _joint_fields(free, no_band))
    maps["residual"] = result.residual_norm
    return tuple(maps[field] for field in _fit_fields(free))


def _fit_fields(free) -> tuple[str, ...]:
    return (
        *free,
        *(f"sigma_{name}" for name in free),
        "status",
        "iterations",
        "residual",
        "observations",
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


def fit_dataarray(
    refl: xr.DataArray,
    geometry,
    params,
    free=("w", "b", "c"),
    solver: str = "jax",
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
) -> xr.Dataset:
    """Fit Hapke parameters per pixel and band to multi-angle observations, chunk by chunk.

    `lumaxlike.fit` through ``xarray.apply_ufunc(..., dask="parallelized")``; also the
    accessor ``refl.hapke.fit(...)``.

    Args:
        refl: reflectance with a spectral dim (``band``/``wavelength`` or
            `spectral_dim`) and an observation dim (`observation_dim`); every other dim
            is a pixel dim. NumPy- or dask-backed (the spectral and observation dims are
            each rechunked into one chunk). NaN observations are left out of their
            problem (`lumaxlike.fit`'s masks).
        geometry: as for `lumaxlike.invert_dataarray` (angles [deg] or vectors, optional
            ``normal``), with the observation dim on the variables that vary with it.
        params: `lumaxlike.HapkeParams`: fixed parameters and the free ones' start.
        free: as for `lumaxlike.fit` (so are ``solver``, ``observation_limits`` in
            radians, ``min_observations``, ``bounds``, ``max_iter`` and ``tol``).
        units: ``"r"``, ``"radf"`` or ``"reff"`` (each observation with its own cos i).
        refl_sigma: standard uncertainty of ``refl`` in ``units`` (``"r"`` or ``"radf"``).
        num_threads: numba threads per chunk; None = one inside dask workers, else all.
        shared: names among `free` shared by a pixel's bands (`lumaxlike.fit`): their
            maps, and status, iterations and ``cost``, have no spectral dim.
        prior: {name: (mean, sigma)} scalar Gaussian priors in the parameters' units
            (`lumaxlike.fit`); needs `refl_sigma`.
        regions: integer labels over the pixel dims (a DataArray with those dims; tiles,
            geologic units; negative: left out), with `regional`: the names among `free`
            taking one value per region for all its pixels and bands (`lumaxlike.fit`);
            their maps have no spectral dim, as the shared ones. A region couples all its
            pixels, so the pixel dims are fitted as one chunk (in memory; for images
            larger than memory, `lumaxlike fit --regions` streams them from files).

    Returns:
        With `shared` or `prior`: as below, plus ``dfs_<name>`` (degrees of freedom for
        signal) and ``cost`` (the objective) in place of ``residual``. Otherwise:
        Dataset with one variable per free parameter (``w``, ``b``, ...), ``sigma_<name>``
        for each, ``status`` (int8), ``iterations`` (int32), ``residual`` (residual norm
        [1/sr]) and ``observations`` (int32, valid observations used), dims of ``refl``
        without the observation dim; lazy when ``refl`` is dask-backed. attrs: ``refl``'s
        plus the ``lumaxlike_*`` record and ``lumaxlike_fit_free``.

    Raises:
        ValueError: naming the argument: not a DataArray, missing dims, bad units,
            misaligned geometry, limits or min_observations (checked before any work).
    """

    from .._inverse.fit import check_free
    from .._inverse.observation_masks import check_observation_limits
    from .._params import HapkeParams

    if not isinstance(refl, xr.DataArray):
        raise ValueError(f"refl must be an xarray.DataArray, got {type(refl).__name__}")
    if not isinstance(params, HapkeParams):
        raise ValueError(f"params must be a lumaxlike.HapkeParams, got {type(params).__name__}")
    check_front_end(refl, units, None)
    refuse_normalised_dataarray(refl, "fit_dataarray")
    SolverOptions(solver)  # checks the name
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
    pixel_dims = [dim for dim in refl.dims if dim not in (spec, observation_dim)]
    regional = (regional,) if isinstance(regional, str) else tuple(regional)
    if (regions is None) != (not regional):
        raise ValueError("regions (a label map) and regional (the names it applies to) go together")
    if regions is not None:
        if not isinstance(regions, xr.DataArray) or set(regions.dims) != set(pixel_dims):
            raise ValueError(
                f"regions must be a DataArray over the pixel dims {tuple(pixel_dims)}, got "
                f"{getattr(regions, 'dims', type(regions).__name__)}"
            )
        # one chunk over the pixels: a region's problem needs all its pixels at once
        refl = refl.chunk({dim: -1 for dim in refl.dims}) if refl.chunks else refl
    inputs = chunked_inputs(
        refl,
        geometry_vectors(geometry, [*pixel_dims, observation_dim]),
        spec,
        pixel_dims,
        observation_dim=observation_dim,
    )
    refl, vectors, largest = inputs.refl, inputs.vectors, inputs.largest
    dtype = np.result_type(refl.dtype, np.float32)
    per_chunk = max(
        1, (1 << 17) // max(1, refl.sizes[spec] * n_obs)
    )  # fit's OBSERVATIONS_PER_CHUNK
    fit_options = {
        "solver": solver,
        "observation_limits": limits,
        "min_observations": minimum,
        "chunk_size": min(largest, per_chunk),
        "bounds": bounds,
    }
    fit_options.update({k: v for k, v in (("max_iter", max_iter), ("tol", tol)) if v is not None})
    if refl_sigma is not None:
        fit_options["refl_sigma"] = float(uncertainty_to_r(refl_sigma, units))
    joint = bool(shared) or bool(prior) or bool(regional)
    if joint:
        from .._inverse.joint import check_shared

        shared = check_shared(shared, free)
        if regional:
            regional = check_shared(regional, free, "regional")
            fit_options["regional"] = regional
        for name, pair in (prior or {}).items():
            if np.ndim(pair[0]) or np.ndim(pair[1]):
                raise ValueError(
                    f"prior[{name!r}]: fit_dataarray takes scalar priors (mean, sigma)"
                )
        if prior and refl_sigma is None:
            raise ValueError("prior needs refl_sigma (the observations' noise weighs the prior)")
        fit_options.update(shared=shared, prior=prior)
        if min_observations is None:  # joint fits' default: per-band parameters + 1
            fit_options["min_observations"] = (
                len([n for n in free if n not in shared + regional]) + 1
            )
        with_band = _joint_fields(free, shared + regional)
        fields = tuple(field for field, _ in with_band)
        core_dims = [[spec] if band else [] for _, band in with_band]
    else:
        fields = _fit_fields(free)
        core_dims = [[spec]] * len(fields)
    integer = {"status": np.int8, "iterations": np.int32, "observations": np.int32}
    labels = []
    if regions is not None:
        labels = [regions.transpose(*[d for d in refl.dims if d in pixel_dims])]
        vectors = [v.chunk({dim: -1 for dim in v.dims}) if v.chunks else v for v in vectors]
        if refl.chunks:
            labels = [labels[0].chunk({dim: -1 for dim in labels[0].dims})]
    outputs = xr.apply_ufunc(
        _fit_chunk,
        refl,
        *vectors,
        *labels,
        input_core_dims=[[spec, observation_dim]]
        + [[observation_dim, VECTOR_DIM]] * 3
        + [[]] * len(labels),
        output_core_dims=core_dims,
        dask="parallelized",
        output_dtypes=[integer.get(field, dtype) for field in fields],
        kwargs={
            "units": units,
            "params": params,
            "free": free,
            "fit_options": fit_options,
            "num_threads": num_threads,
        },
        keep_attrs="override",
    )
    variables = {}
    for field, output in zip(fields, outputs):
        output = output.transpose(
            *[d for d in refl.dims if d != observation_dim and d in output.dims]
        )
        output.attrs = {"long_name": f"lumaxlike.fit {field}"}
        if "spatial_ref" in refl.coords:
            output.attrs["grid_mapping"] = "spatial_ref"
        variables[field] = output
    provenance = make_provenance(
        params=[params] * refl.sizes[spec],
        units=units,
        solver=solver,
        tol=tol,
        max_iter=max_iter,
        refl_sigma=refl_sigma,
        dtype=dtype,
        cube=refl.encoding.get("source"),
        geometry=None,
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
    attrs = result_attrs(refl.attrs, provenance)
    attrs["lumaxlike_fit_free"] = json.dumps(list(free))
    if joint:
        attrs["lumaxlike_fit_shared"] = json.dumps(list(shared))
        if regional:
            attrs["lumaxlike_fit_regional"] = json.dumps(list(regional))
        attrs["lumaxlike_fit_prior"] = json.dumps(
            {name: [float(v) for v in pair] for name, pair in (prior or {}).items()}
        )
    return xr.Dataset(variables, attrs=attrs)
