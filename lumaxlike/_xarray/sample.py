"""`sample_dataarray`: `lumaxlike.sample` on a reflectance DataArray, chunk by chunk
(`apply_to_chunks`: ``xarray.apply_ufunc(..., dask="parallelized")``), lazily on dask;
also the accessor ``refl.hapke.sample(...)``."""

from __future__ import annotations

import json

import numpy as np
import xarray as xr

from .._declared_options import refuse_unknown, takes_options
from .._io.missions.product_dataarray import refuse_normalised_dataarray
from .._io.read.units import check_units, uncertainty_to_r
from .._provenance import python_call
from .._sample.maps import PARAMETER_SUMMARIES, check_sample_options, chunk_seed
from .._sample.options import SampleSettings
from .._shapes import check_band_sigma
from .chunks import (
    ChunkMap,
    apply_to_chunks,
    chunked_inputs,
    provenance_of,
    result_dataset,
    spectral_dim_of,
)

__all__ = ["QUANTILE_DIM", "sample_dataarray"]

QUANTILE_DIM = "quantile"

_INTEGER = {"status": np.int8, "divergences": np.int32, "observations": np.int32}

# `lumaxlike.sample`'s keywords that are no option, passed on (beside the options)
_PASSED = {"bounds": None, "chunk_size": None, "fit_solver": None}
# the options a chunk's `sample` call takes apart from the others (`_sample_block`)
_OWN = ("shared", "seed")


def _fields(free, shared) -> tuple[tuple[str, tuple[str, ...]], ...]:
    """(map, its dims after the pixel dims: "band" for the spectral dim, "quantile") of
    `_sample_block`'s maps, in order; a shared parameter's and a joint problem's
    (status, acceptance, divergences) without the spectral dim."""
    fields = []
    for name in free:
        band = () if name in shared else ("band",)
        fields += [(name, band + (QUANTILE_DIM,))]
        fields += [(f"{summary}_{name}", band) for summary in PARAMETER_SUMMARIES]
    problem = () if shared else ("band",)
    fields += [("status", problem), ("acceptance", problem), ("divergences", problem)]
    return (*fields, ("observations", ("band",)))


def _sample_block(
    r, to_sun, to_sensor, normal, refl_sigma, index, *, params, free, shared, options, seed
):
    """One chunk (`apply_to_chunks`): r [1/sr] (..., bands, observations), vectors (...,
    observations, 3), index (...) the pixels' linear indices -> the maps of
    `_fields(free, shared)`. The noise is in `options` (`refl_sigma` is None)."""
    from .._sample.sample import sample

    first = int(index.flat[0]) if index.size else 0  # one stream per chunk
    result = sample(
        r,
        to_sun,
        to_sensor,
        normal,
        params,
        free=free,
        shared=shared,
        seed=chunk_seed(seed, first),
        **options,
    )
    maps = {
        "status": result.status,
        "acceptance": result.acceptance,
        "divergences": result.divergences,
        "observations": result.observations,
    }
    for name in free:
        maps[name] = result.quantiles[name]
        for summary in PARAMETER_SUMMARIES:
            maps[f"{summary}_{name}"] = getattr(result, summary)[name]
    return tuple(maps[field] for field, _ in _fields(free, shared))


def _check_arguments(refl, params, free, units, settings: SampleSettings, passed) -> tuple:
    """`sample_dataarray`'s first checks, in this order (ValueError naming the argument);
    (free, shared) checked."""
    from .._inverse.fit.fit import check_free
    from .._inverse.joint.joint import check_shared
    from .._params import HapkeParams

    if not isinstance(refl, xr.DataArray):
        raise ValueError(f"refl must be an xarray.DataArray, got {type(refl).__name__}")
    if not isinstance(params, HapkeParams):
        raise ValueError(f"params must be a lumaxlike.HapkeParams, got {type(params).__name__}")
    check_units(units)
    refuse_normalised_dataarray(refl, "sample_dataarray")
    if units == "reff":
        raise ValueError("sample_dataarray takes units 'r' or 'radf' (one noise scale), not 'reff'")
    if "return_samples" in passed:
        raise ValueError("sample_dataarray returns maps: call lumaxlike.sample for the draws")
    free = check_free(free, params)
    shared = check_shared(settings.shared, free)
    for name, pair in (settings.prior or {}).items():
        if (
            not isinstance(pair, (tuple, list))
            or len(pair) != 2
            or np.ndim(pair[0]) + np.ndim(pair[1])
        ):
            raise ValueError(f"prior[{name!r}]: sample_dataarray takes scalar priors (mean, sigma)")
    return free, shared


def _chunk_maps(free, shared, spec: str, dtype) -> list[ChunkMap]:
    """The maps of `_fields(free, shared)`, "band" being the spectral dim `spec`."""
    return [
        ChunkMap(
            field,
            _INTEGER.get(field, dtype),
            tuple(spec if d == "band" else d for d in dims),
            {"long_name": f"lumaxlike.sample {field}"},
        )
        for field, dims in _fields(free, shared)
    ]


def _pixel_index(refl: xr.DataArray, pixel_dims) -> xr.DataArray:
    """Each pixel's linear index (a chunk's random stream), chunked as ``refl``'s pixels."""
    index = xr.DataArray(
        np.arange(int(np.prod([refl.sizes[d] for d in pixel_dims], dtype=np.int64))).reshape(
            [refl.sizes[d] for d in pixel_dims]
        ),
        dims=pixel_dims,
    )
    if refl.chunks is not None:
        index = index.chunk({d: refl.chunksizes[d] for d in pixel_dims})
    return index


def _provenance(refl, spec, sigma, dtype, free, shared, call: dict):
    """The provenance record of `sample_dataarray`'s result (``refl`` the chunked one)."""
    return provenance_of(
        refl,
        call["geometry"],
        params=[call["params"]] * refl.sizes[spec],
        units=call["units"],
        solver="jax",
        tol=None,
        max_iter=None,
        refl_sigma=float(np.max(sigma)),
        dtype=dtype,
        command=python_call(
            "sample_dataarray",
            refl,
            call["geometry"],
            call["params"],
            free,
            units=call["units"],
            refl_sigma=call["refl_sigma"],
            observation_dim=call["observation_dim"],
            seed=call["seed"],
            **({"shared": shared} if shared else {}),
        ),
    )


@takes_options(SampleSettings, _PASSED)
def sample_dataarray(
    refl: xr.DataArray,
    geometry,
    params,
    free=("w", "b", "c"),
    *,
    units: str,
    observation_dim: str = "observation",
    spectral_dim: str | None = None,
    settings: SampleSettings | None = None,
    **keywords,
) -> xr.Dataset:
    """The posterior of the free Hapke parameters per pixel and band, chunk by chunk.

    `lumaxlike.sample` through ``xarray.apply_ufunc(..., dask="parallelized")``; also the
    accessor ``refl.hapke.sample(...)``. A dask-backed `refl` gives a lazy Dataset,
    computed chunk by chunk (each chunk's random stream from the option ``seed`` and its
    first pixel).

    Args:
        refl: reflectance with a spectral dim (``band``/``wavelength`` or
            `spectral_dim`) and an observation dim (`observation_dim`); every other dim
            is a pixel dim. NumPy- or dask-backed (the spectral and observation dims are
            each rechunked into one chunk).
        geometry: as for `lumaxlike.fit_dataarray` (angles [deg] or vectors).
        params: `lumaxlike.HapkeParams`: the fixed parameters.
        free: the sampled parameters.
        units: ``"r"`` or ``"radf"`` (the noise model needs one scale for all
            observations, so not ``"reff"``).
        settings: the sampling's options as one `lumaxlike.SampleSettings` (None: the
            defaults).
        **keywords: the options of `lumaxlike.SampleSettings` by name (``refl_sigma``,
            required: the noise of ``refl`` in ``units``, a number or one per band;
            ``prior``: scalar (mean, sigma) pairs; ``shared``: their maps, and status,
            acceptance and divergences, then have no spectral dim), and
            `lumaxlike.sample`'s ``bounds``, ``chunk_size`` and ``fit_solver``.

    Returns:
        Dataset with, per free parameter, ``<name>`` (its quantiles: dims of ``refl``
        without the observation dim, plus ``quantile`` = 0.025, 0.16, 0.5, 0.84, 0.975),
        ``mean_<name>``, ``rhat_<name>``, ``ess_<name>`` (bulk), ``ess_tail_<name>``;
        ``status`` (int8), ``acceptance``, ``divergences`` (int32) and ``observations``
        (int32). attrs: ``refl``'s plus the ``lumaxlike_*`` record,
        ``lumaxlike_sample_free`` and ``lumaxlike_sample_shared``.

    Raises:
        ValueError: naming the argument: not a DataArray, a product normalised to a
            standard geometry (`lumaxlike.open_product`), missing dims, bad units or
            refl_sigma, misaligned geometry, a prior map (not scalars), or an option
            `lumaxlike.sample` refuses (checked on a small problem before any chunk is
            computed).
        TypeError: a keyword that is none of these.
    """
    from .._sample.program import QUANTILE_LEVELS

    given = dict(keywords)  # as the call gave them, for the record
    settings = SampleSettings.merged(settings, keywords)
    refuse_unknown("sample_dataarray", keywords, (*_PASSED, "return_samples"))
    free, shared = _check_arguments(refl, params, free, units, settings, keywords)
    spec = spectral_dim_of(refl, spectral_dim)
    if observation_dim not in refl.dims:
        raise ValueError(f"observation_dim={observation_dim!r} is not a dim of refl {refl.dims}")
    if settings.refl_sigma is None:
        raise ValueError("refl_sigma is required: the 1-sigma noise of the observations")
    sigma = np.asarray(check_band_sigma(settings.refl_sigma, refl.sizes[spec]), float)
    index = _pixel_index(refl, [dim for dim in refl.dims if dim not in (spec, observation_dim)])
    inputs = chunked_inputs(refl, geometry, spec, observation_dim=observation_dim, extra=[index])
    dtype = np.result_type(inputs.refl.dtype, np.float32)
    options = {name: value for name, value in vars(settings).items() if name not in _OWN}
    options.update(refl_sigma=uncertainty_to_r(sigma, units), **keywords)
    sizes = inputs.refl.sizes
    check_sample_options(
        params, {"free": free, "shared": shared, **options}, sizes[spec], sizes[observation_dim]
    )
    maps = _chunk_maps(free, shared, spec, dtype)
    kwargs = {"params": params, "free": free, "shared": shared, "options": options}
    variables = apply_to_chunks(
        _sample_block,
        inputs,
        maps,
        units=units,
        sizes={QUANTILE_DIM: len(QUANTILE_LEVELS)},
        kwargs={**kwargs, "seed": int(settings.seed)},
    )
    call = {"geometry": geometry, "params": params, "units": units}
    call.update(refl_sigma=settings.refl_sigma, observation_dim=observation_dim, seed=settings.seed)
    provenance = _provenance(inputs.refl, spec, sigma, dtype, free, shared, call)
    attrs = {
        "lumaxlike_sample_free": json.dumps(list(free)),
        "lumaxlike_sample_shared": json.dumps(list(shared)),
        "lumaxlike_sample_options": _options_record(given, settings, options["refl_sigma"]),
    }
    dataset = result_dataset(variables, inputs.refl, provenance, attrs)
    return dataset.assign_coords({QUANTILE_DIM: list(QUANTILE_LEVELS)})


def _options_record(given: dict, settings: SampleSettings, sigma_r) -> str:
    """``lumaxlike_sample_options``: the noise in r where it is one number, the scalar
    options and `lumaxlike.sample` keywords the call gave (by name, in its order, then
    those of ``settings=`` not at their defaults), and the seed, as JSON."""
    named = {k: v for k, v in given.items() if k not in ("refl_sigma", *_OWN)}
    for name, value in settings.changed().items():
        if name not in ("refl_sigma", *_OWN):
            named.setdefault(name, value)
    scalars = {"refl_sigma": sigma_r, **named}
    scalars = {k: v for k, v in scalars.items() if isinstance(v, (int, float, str))}
    return json.dumps(scalars | {"seed": int(settings.seed)})
