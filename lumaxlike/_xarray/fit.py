"""`fit_dataarray`: `lumaxlike.fit` on multi-angle observations in a DataArray (an
observation dim), chunk by chunk; also ``DataArray.hapke.fit``."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import NamedTuple

import numpy as np
import xarray as xr

from .._declared_options import refuse_unknown, takes_options
from .._inverse.fit.options import FitSettings
from .._io.missions.product_dataarray import (
    product_record_of,
    refuse_normalised_dataarray,
    with_bad_band_status,
)
from .._io.read.units import uncertainty_to_r
from .._options import SolverOptions, solver_options
from .._provenance import python_call
from .chunks import (
    ChunkedInputs,
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
    observations, 3) -> the fit's maps (`lumaxlike._operations.fit.fit_maps`), in
    `dataarray_fields` order. The noise is in `fit_options` (`refl_sigma` is None)."""
    from .._inverse.fit.fit import fit
    from .._inverse.joint.result import JointFitResult
    from .._operations.blocks import numba_threads
    from .._operations.fit import dataarray_fields, fit_maps

    solver = fit_options["solver"]
    num_threads = worker_num_threads(solver, num_threads)
    context = numba_threads(num_threads) if solver == "numba" else contextlib.nullcontext()
    with context:
        result = fit(r, to_sun, to_sensor, normal, params, free=free, **fit_options)
    joint = isinstance(result, JointFitResult)
    shared = fit_options.get("shared", ()) if joint else None
    maps = fit_maps(result, at_bound=not joint)
    return tuple(maps[field] for field, _ in dataarray_fields(free, shared))


class _Setup(NamedTuple):
    """`fit_dataarray`'s checked call: its chunked inputs, options and maps."""

    inputs: ChunkedInputs
    spec: str
    free: tuple[str, ...]
    options: SolverOptions
    fit_options: dict
    joint: bool
    shared: tuple[str, ...]
    regional: tuple[str, ...]
    dtype: np.dtype
    maps: list[ChunkMap]


def _setup(call: dict) -> _Setup:
    """`fit_dataarray`'s arguments (``call``) checked, in this order (ValueError naming
    one), and the chunked inputs, `lumaxlike.fit`'s options and the maps' layout."""
    from .._inverse.fit.arguments import check_free
    from .._operations.fit import dataarray_fields
    from .._params import HapkeParams

    refl, params, units = call["refl"], call["params"], call["units"]
    if not isinstance(refl, xr.DataArray):
        raise ValueError(f"refl must be an xarray.DataArray, got {type(refl).__name__}")
    if not isinstance(params, HapkeParams):
        raise ValueError(f"params must be a lumaxlike.HapkeParams, got {type(params).__name__}")
    check_front_end(refl, units, None)
    refuse_normalised_dataarray(refl, "fit_dataarray")
    solving = call["settings"].solver_keywords()
    options = solver_options(call["solver"], **solving, num_threads=call["num_threads"])
    free = check_free(call["free"], params)
    spec = spectral_dim_of(refl, call["spectral_dim"])
    limits, minimum = _check_observations(refl, free, call)
    inputs = chunked_inputs(refl, call["geometry"], spec, observation_dim=call["observation_dim"])
    fit_options = _fit_options(inputs, spec, options, limits, minimum, call)
    if (call["regions"] is None) != (not call["regional"]):
        raise ValueError(
            "regions (a label DataArray) and regional (the names it applies to) go together"
        )
    shared, regional = call["shared"], call["regional"]
    joint = bool(shared) or bool(call["prior"]) or bool(regional)
    if joint:
        shared, regional = _joint_options(fit_options, free, call)
    dtype = np.result_type(inputs.refl.dtype, np.float32)
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
        for field, band in dataarray_fields(free, shared + regional if joint else None)
    ]
    return _Setup(inputs, spec, free, options, fit_options, joint, shared, regional, dtype, maps)


def _check_observations(refl, free, call) -> tuple:
    """The observation dim, limits, minimum count and noise checked; (limits, minimum)."""
    from .._inverse.fit.observation_masks import check_observation_limits

    observation_dim, refl_sigma = call["observation_dim"], call["refl_sigma"]
    if observation_dim not in refl.dims:
        raise ValueError(f"observation_dim={observation_dim!r} is not a dim of refl {refl.dims}")
    n_obs = refl.sizes[observation_dim]
    limits = check_observation_limits(call["observation_limits"])
    minimum = len(free) + 1 if call["min_observations"] is None else int(call["min_observations"])
    if minimum < 1 or minimum > n_obs:
        raise ValueError(
            f"min_observations = {minimum} must lie in [1, {n_obs}] (the observations of refl)"
        )
    if refl_sigma is not None and (call["units"] == "reff" or not refl_sigma > 0):
        raise ValueError(
            f"refl_sigma must be a positive number, for units 'r' or 'radf'; got {refl_sigma!r}, {call['units']!r}"
        )
    return limits, minimum


def _fit_options(inputs, spec, options, limits, minimum, call) -> dict:
    """`lumaxlike.fit`'s keywords for a chunk of `inputs` (a per-band fit's)."""
    from .._inverse.fit.arguments import OBSERVATIONS_PER_CHUNK

    n_obs = inputs.refl.sizes[inputs.observation_dim]
    per_chunk = max(1, OBSERVATIONS_PER_CHUNK // max(1, inputs.refl.sizes[spec] * n_obs))
    fit_options = {
        "solver": options.solver,
        "observation_limits": limits,
        "min_observations": minimum,
        "chunk_size": min(inputs.largest, per_chunk),
        "bounds": call["bounds"],
    }
    fit_options.update(
        {k: v for k, v in (("max_iter", options.max_iter), ("tol", options.tol)) if v is not None}
    )
    if call["refl_sigma"] is not None:
        fit_options["refl_sigma"] = float(uncertainty_to_r(call["refl_sigma"], call["units"]))
    return fit_options


def _joint_options(fit_options, free, call) -> tuple:
    """A joint fit's names checked and its keywords added to `fit_options` (in place);
    (shared, regional)."""
    from .._inverse.joint.joint import check_shared

    prior = call["prior"]
    shared = check_shared(call["shared"], free)
    regional = check_shared(call["regional"], free, "regional")
    if set(shared) & set(regional):
        raise ValueError(
            f"shared and regional must not both name {sorted(set(shared) & set(regional))}"
        )
    for name, pair in (prior or {}).items():
        if np.ndim(pair[0]) or np.ndim(pair[1]):
            raise ValueError(f"prior[{name!r}]: fit_dataarray takes scalar priors (mean, sigma)")
    if prior and call["refl_sigma"] is None:
        raise ValueError("prior needs refl_sigma (the observations' noise weighs the prior)")
    fit_options.update(shared=shared, prior=prior)
    if call["starts"] is not None:
        fit_options["starts"] = call["starts"]
    if call["min_observations"] is None:  # joint fits' default: per-band parameters + 1
        per_band = [n for n in free if n not in shared + regional]
        fit_options["min_observations"] = len(per_band) + 1
    return shared, regional


def _fit_regional(setup: _Setup, call: dict) -> dict:
    """`fit_dataarray`'s regional fit (`lumaxlike._xarray.regions`): labels checked,
    regions grouped under the cap (refused above it), the groups fitted in this process."""
    from .._inverse.fit.arguments import OBSERVATIONS_PER_CHUNK
    from .._operations.blocks import numba_threads
    from .._run.region_groups import REGION_MEMORY_BYTES, region_pixel_bytes
    from .regions import checked_labels, fit_regions, region_groups

    inputs, free, shared, regional = setup.inputs, setup.free, setup.shared, setup.regional
    region_memory = call["region_memory"]
    memory = REGION_MEMORY_BYTES if region_memory is None else region_memory
    if isinstance(memory, bool) or not (isinstance(memory, (int, float)) and memory > 0):
        raise ValueError(f"region_memory must be a positive number of bytes, got {memory!r}")
    labels = checked_labels(call["regions"], inputs.refl, inputs.pixel_dims)
    n_bands = inputs.refl.sizes[inputs.spec]
    n_obs = inputs.refl.sizes[inputs.observation_dim]
    n_band_free = len([n for n in free if n not in shared + regional])
    pixel_bytes = region_pixel_bytes(n_bands, n_obs, n_band_free, len(shared) + len(regional))
    groups = region_groups(labels, pixel_bytes, memory)
    per_chunk = max(1, OBSERVATIONS_PER_CHUNK // max(1, n_bands * n_obs))
    # one chunk size for every group: the JAX programs compile once
    options = {
        **setup.fit_options,
        "free": free,
        "regional": regional,
        "chunk_size": min(per_chunk, max(len(g) for g in groups)),
    }
    solver, num_threads = setup.options.solver, setup.options.num_threads
    context = numba_threads(num_threads) if solver == "numba" else contextlib.nullcontext()
    with context:
        return fit_regions(
            inputs,
            labels,
            groups,
            setup.maps,
            units=call["units"],
            params=call["params"],
            fit_options=options,
        )


def _provenance(setup: _Setup, call: dict):
    """The provenance record of `fit_dataarray`'s result."""
    refl, options = setup.inputs.refl, setup.options
    return provenance_of(
        refl,
        call["geometry"],
        params=[call["params"]] * refl.sizes[setup.spec],
        units=call["units"],
        solver=options.solver,
        tol=options.tol,
        max_iter=options.max_iter,
        refl_sigma=call["refl_sigma"],
        dtype=setup.dtype,
        product=product_record_of(refl, False),
        command=python_call(
            "fit_dataarray",
            refl,
            call["geometry"],
            call["params"],
            setup.free,
            options.solver,
            units=call["units"],
            observation_dim=call["observation_dim"],
            observation_limits=call["observation_limits"],
            min_observations=call["min_observations"],
            refl_sigma=call["refl_sigma"],
        ),
    )


def _result_attrs(setup: _Setup, prior) -> dict:
    """The ``lumaxlike_fit_*`` attrs: free, and a joint fit's shared, prior, regional."""
    attrs = {"lumaxlike_fit_free": json.dumps(list(setup.free))}
    if setup.joint:
        attrs["lumaxlike_fit_shared"] = json.dumps(list(setup.shared))
        attrs["lumaxlike_fit_prior"] = json.dumps(
            {name: [float(v) for v in pair] for name, pair in (prior or {}).items()}
        )
    if setup.regional:
        attrs["lumaxlike_fit_regional"] = json.dumps(list(setup.regional))
    return attrs


@takes_options(FitSettings)
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
    bounds: Mapping | None = None,
    num_threads: int | None = None,
    regions: xr.DataArray | None = None,
    region_memory: float | None = None,
    settings: FitSettings | None = None,
    **keywords,
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
            `lumaxlike.SolverOptions`, and ``bounds``).
        units: ``"r"``, ``"radf"`` or ``"reff"`` (each observation with its own cos i).
        num_threads: numba threads per chunk; None = one inside dask workers, else all.
        settings: the fit's options as one `lumaxlike.FitSettings` (None: the defaults).
        **keywords: the options of `lumaxlike.FitSettings` by name (``refl_sigma``: one
            number in ``units``, ``"r"`` or ``"radf"``; ``prior``: scalar pairs;
            ``shared``: their maps, and status, iterations and ``cost``, then have no
            spectral dim; ``profile``, no map, is refused).
        regions: an integer DataArray of region labels on ``refl``'s pixel dims (same
            names, sizes and coordinates; negative, or NaN, = left out), with the option
            ``regional``: `lumaxlike.fit`'s ``regions=``. A region couples all its
            pixels, so it is not fitted chunk by chunk: the regions are fitted in groups
            under `region_memory`, each group's pixels gathered from ``refl`` (from
            every dask chunk they lie in), and the result is computed at the call
            (NumPy-backed, also for a dask-backed ``refl``); docs/joint-fits.md.
        region_memory: cap on the memory of the regions fitted at once [bytes]
            (default 4 GiB, as ``lumaxlike fit --regions``); a region whose fit needs
            more is refused before any fit.

    Returns:
        Dataset, dims of ``refl`` without the observation dim (lazy when ``refl`` is
        dask-backed): one variable per free parameter (``w``, ``b``, ...),
        ``sigma_<name>`` for each, ``status`` (int8), ``iterations`` (int32),
        ``residual`` (residual norm [1/sr]), ``observations`` (int32, valid observations
        used) and ``at_bound_<name>`` (bool: the value sits on its bound, where
        ``sigma_<name>`` is no measure of its uncertainty). With `shared`, `prior` or
        `regions`: ``dfs_<name>`` (degrees of freedom for signal) and ``cost`` (the
        objective) in place of ``residual`` and ``at_bound_<name>``; with `regions`
        also, on a ``region`` dim (the labels, ascending), ``region_<name>``,
        ``region_sigma_<name>``, ``region_status``, ``region_iterations`` and
        ``region_cost`` (a regional parameter's map holds its region's value at each
        pixel, NaN outside every region). attrs: ``refl``'s plus the ``lumaxlike_*``
        record and ``lumaxlike_fit_free``.

    Raises:
        ValueError: naming the argument: not a DataArray, missing dims, bad units,
            misaligned geometry, limits or min_observations, `regions` not on refl's
            pixel dims or not integer, a region above `region_memory` (checked before
            any work).
        TypeError: a keyword that is no option.
    """
    settings = FitSettings.merged(settings, keywords)
    refuse_unknown("fit_dataarray", keywords)
    if settings.profile:
        raise ValueError("profile is lumaxlike.fit's only (its intervals are no map)")
    call = {**locals(), **vars(settings)}
    setup = _setup(call)
    if setup.regional:
        variables = _fit_regional(setup, call)
    else:
        kwargs = {
            "params": params,
            "free": setup.free,
            "fit_options": setup.fit_options,
            "num_threads": setup.options.num_threads,
        }
        variables = apply_to_chunks(
            _fit_block, setup.inputs, setup.maps, units=units, kwargs=kwargs
        )
    refl = setup.inputs.refl
    variables["status"] = with_bad_band_status(variables["status"], refl, setup.spec)
    return result_dataset(
        variables, refl, _provenance(setup, call), _result_attrs(setup, settings.prior)
    )
