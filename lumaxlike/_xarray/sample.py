"""`sample_dataarray`: `lumaxlike.sample` on a reflectance DataArray, chunk by chunk
(``xarray.apply_ufunc(..., dask="parallelized")``), lazily on dask; also the accessor
``refl.hapke.sample(...)``."""

from __future__ import annotations

import json

import numpy as np
import xarray as xr

from .._io.product_dataarray import refuse_normalised_dataarray
from .._io.units import check_units, to_bidirectional_reflectance, uncertainty_to_r
from .._provenance import make_provenance, python_call
from .._sample.maps import check_sample_options, chunk_seed, x64_for
from .chunks import chunked_inputs
from .chunks import result_attrs as _result_attrs
from .chunks import spectral_dim_of as _spectral_dim
from .geometry import VECTOR_DIM as _VECTOR_DIM

__all__ = ["QUANTILE_DIM", "sample_dataarray"]

QUANTILE_DIM = "quantile"


def _fields(free) -> tuple[str, ...]:
    per_parameter = [(name, f"mean_{name}", f"rhat_{name}", f"ess_{name}") for name in free]
    return (
        *(f for group in per_parameter for f in group),
        "status",
        "acceptance",
        "divergences",
        "observations",
    )


def _sample_chunk(refl, index, to_sun, to_sensor, normal, *, units, params, free, options, seed):
    """apply_ufunc kernel: refl (..., bands, observations), index (...) the pixels' linear
    indices, vectors (..., observations, 3) -> the maps in `_fields(free)` order."""
    from .._sample.sample import sample

    pixels, n_obs = refl.shape[:-2], refl.shape[-1]
    to_sun, to_sensor, normal = (
        np.broadcast_to(v, pixels + (n_obs, 3)) for v in (to_sun, to_sensor, normal)
    )
    refl = refl.astype(np.result_type(refl.dtype, np.float32), copy=False)
    r = np.moveaxis(
        to_bidirectional_reflectance(np.moveaxis(refl, -1, -2), units, to_sun, normal),
        -1,
        -2,
    )
    first = int(index.flat[0]) if index.size else 0  # one stream per chunk
    with x64_for(r):
        result = sample(
            r, to_sun, to_sensor, normal, params, free=free, seed=chunk_seed(seed, first),
            **options,
        )  # fmt: skip
    maps = {}
    for name in free:
        maps[name] = result.quantiles[name]
        maps.update({f"mean_{name}": result.mean[name], f"rhat_{name}": result.rhat[name],
                     f"ess_{name}": result.ess[name]})  # fmt: skip
    maps.update(status=result.status, acceptance=result.acceptance, divergences=result.divergences,
                observations=result.observations)  # fmt: skip
    return tuple(maps[field] for field in _fields(free))


def sample_dataarray(refl: xr.DataArray, geometry, params, free=("w", "b", "c"), *, units: str,
                     refl_sigma, observation_dim: str = "observation", spectral_dim: str | None = None,
                     seed: int = 0, **options) -> xr.Dataset:  # fmt: skip
    """The posterior of the free Hapke parameters per pixel and band, chunk by chunk.

    `lumaxlike.sample` through ``xarray.apply_ufunc(..., dask="parallelized")``; also the
    accessor ``refl.hapke.sample(...)``. A dask-backed `refl` gives a lazy Dataset,
    computed chunk by chunk (each chunk's random stream from `seed` and its first pixel).

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
        refl_sigma: 1-sigma noise of ``refl`` in ``units``: a number, or one per band.
        seed: the random seed.
        **options: passed to `lumaxlike.sample` (prior, num_samples, num_chains,
            num_warmup, bounds, observation_limits, min_observations, min_ess,
            max_rhat, integration_steps, chunk_size, fit_solver).

    Returns:
        Dataset with, per free parameter, ``<name>`` (its quantiles: dims of ``refl``
        without the observation dim, plus ``quantile`` = 0.025, 0.16, 0.5, 0.84, 0.975),
        ``mean_<name>``, ``rhat_<name>``, ``ess_<name>``; ``status`` (int8),
        ``acceptance``, ``divergences`` (int32) and ``observations`` (int32). attrs:
        ``refl``'s plus the ``lumaxlike_*`` record and ``lumaxlike_sample_free``.

    Raises:
        ValueError: naming the argument: not a DataArray, a product normalised to a
            standard geometry (`lumaxlike.open_product`), missing dims, bad units or
            refl_sigma, misaligned geometry, or an option `lumaxlike.sample` refuses
            (checked on a small problem before any chunk is computed).
    """
    from .._inverse.fit import check_free
    from .._params import HapkeParams
    from .._sample.program import QUANTILE_LEVELS

    if not isinstance(refl, xr.DataArray):
        raise ValueError(f"refl must be an xarray.DataArray, got {type(refl).__name__}")
    if not isinstance(params, HapkeParams):
        raise ValueError(f"params must be a lumaxlike.HapkeParams, got {type(params).__name__}")
    check_units(units)
    refuse_normalised_dataarray(refl, "sample_dataarray")
    if units == "reff":
        raise ValueError("sample_dataarray takes units 'r' or 'radf' (one noise scale), not 'reff'")
    if "return_samples" in options or "shared" in options:
        raise ValueError("sample_dataarray returns maps: call lumaxlike.sample for draws or shared")
    free = check_free(free, params)
    spec = _spectral_dim(refl, spectral_dim)
    if observation_dim not in refl.dims:
        raise ValueError(f"observation_dim={observation_dim!r} is not a dim of refl {refl.dims}")
    sigma = np.asarray(refl_sigma, float)
    if (
        sigma.ndim > 1
        or (sigma.ndim == 1 and sigma.shape[0] != refl.sizes[spec])
        or not np.all(sigma > 0)
    ):
        raise ValueError(
            f"refl_sigma must be positive, a number or one per band; got {refl_sigma!r}"
        )
    n_obs = refl.sizes[observation_dim]
    pixel_dims = [dim for dim in refl.dims if dim not in (spec, observation_dim)]
    index = xr.DataArray(  # each pixel's linear index: a chunk's random stream
        np.arange(int(np.prod([refl.sizes[d] for d in pixel_dims], dtype=np.int64))).reshape(
            [refl.sizes[d] for d in pixel_dims]
        ),
        dims=pixel_dims,
    )
    if refl.chunks is not None:
        index = index.chunk({d: refl.chunksizes[d] for d in pixel_dims})
    inputs = chunked_inputs(refl, geometry, spec, observation_dim=observation_dim, extra=[index])
    refl, vectors, (index,) = inputs.refl, inputs.vectors, inputs.extra
    dtype = np.result_type(refl.dtype, np.float32)
    options = {"refl_sigma": uncertainty_to_r(sigma, units), **options}
    check_sample_options(params, {"free": free, **options}, refl.sizes[spec], n_obs)
    fields = _fields(free)
    integer = {"status": np.int8, "divergences": np.int32, "observations": np.int32}
    quantile_fields = set(free)
    outputs = xr.apply_ufunc(
        _sample_chunk, refl, index, *vectors,
        input_core_dims=[[spec, observation_dim], []] + [[observation_dim, _VECTOR_DIM]] * 3,
        output_core_dims=[[spec, QUANTILE_DIM] if f in quantile_fields else [spec] for f in fields],
        dask="parallelized",
        output_dtypes=[integer.get(field, dtype) for field in fields],
        dask_gufunc_kwargs={"output_sizes": {QUANTILE_DIM: len(QUANTILE_LEVELS)}},
        kwargs={"units": units, "params": params, "free": free, "options": options, "seed": int(seed)},
        keep_attrs="override",
    )  # fmt: skip
    variables = {}
    for field, output in zip(fields, outputs):
        dims = [d for d in refl.dims if d != observation_dim] + (
            [QUANTILE_DIM] if field in quantile_fields else []
        )
        output = output.transpose(*dims)
        output.attrs = {"long_name": f"lumaxlike.sample {field}"}
        if "spatial_ref" in refl.coords:
            output.attrs["grid_mapping"] = "spatial_ref"
        variables[field] = output
    provenance = make_provenance(
        params=[params] * refl.sizes[spec], units=units, solver="jax", tol=None, max_iter=None,
        refl_sigma=float(np.max(sigma)), dtype=dtype, cube=refl.encoding.get("source"), geometry=None,
        command=python_call("sample_dataarray", refl, geometry, params, free, units=units,
                            refl_sigma=refl_sigma, observation_dim=observation_dim, seed=seed),
    )  # fmt: skip
    attrs = _result_attrs(refl.attrs, provenance)
    attrs["lumaxlike_sample_free"] = json.dumps(list(free))
    attrs["lumaxlike_sample_options"] = json.dumps(
        {k: v for k, v in options.items() if isinstance(v, (int, float, str))} | {"seed": int(seed)}
    )
    return xr.Dataset(variables, attrs=attrs).assign_coords({QUANTILE_DIM: list(QUANTILE_LEVELS)})
