"""`fit_dataarray(..., regions=labels, regional=(...))`: regional fits of a DataArray.

A region's problem couples all its pixels (its regional parameters are one value for all
of them), so it cannot be solved chunk by chunk as the other fits are. The labels are
read whole (an integer per pixel), the regions packed into groups under a memory cap
(``region_memory``, with `lumaxlike._run.region_groups.region_pixel_bytes` per pixel, as
``lumaxlike fit --regions`` does; a region above the cap is refused before any fit),
and for each group its pixels are gathered from ``refl`` and its geometry (a dask-backed
array computes only those pixels, from every chunk they lie in), converted to r and
fitted in memory by `lumaxlike.fit(regions=...)`. A region's fit does not depend on the
other regions solved with it, so the maps equal those of one call on the whole image.
The result is NumPy-backed (computed at the call) even for a dask-backed ``refl``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import xarray as xr

from .._run.region_groups import pack_regions
from .chunks import ChunkedInputs, ChunkMap, _chunk_kernel, _with_map_attrs
from .geometry import VECTOR_DIM

__all__ = ["checked_labels", "fit_regions", "region_groups"]


def checked_labels(regions, refl: xr.DataArray, pixel_dims: Sequence[str]) -> np.ndarray:
    """The region labels of every pixel, flat (int64, in ``refl``'s pixel order); NaN
    (from a label raster's nodata) becomes -1, left out like any negative label.

    Raises:
        ValueError: naming ``regions``: not a DataArray, not on ``refl``'s pixel dims
            (names, sizes, coordinates), not integer labels, or no label >= 0.
    """
    pixel_dims = tuple(pixel_dims)
    if not isinstance(regions, xr.DataArray):
        raise ValueError(
            f"regions must be an xarray.DataArray of integer labels on refl's pixel dims "
            f"{pixel_dims}, got {type(regions).__name__}"
        )
    if set(regions.dims) != set(pixel_dims):
        raise ValueError(
            f"regions must have refl's pixel dims {pixel_dims} (no other), it has {regions.dims}"
        )
    sizes = {d: refl.sizes[d] for d in pixel_dims}
    if any(regions.sizes[d] != sizes[d] for d in pixel_dims):
        raise ValueError(f"regions has sizes {dict(regions.sizes)}, refl's pixels are {sizes}")
    try:
        xr.align(refl, regions, join="exact")
    except ValueError as error:
        raise ValueError(f"regions is not aligned with refl: {error}") from None
    labels = np.asarray(regions.transpose(*pixel_dims).values).reshape(-1)
    if labels.dtype.kind == "f":
        finite = np.isfinite(labels)
        if not np.all(labels[finite] == np.round(labels[finite])):
            raise ValueError("regions must hold integer labels (it holds fractional values)")
        labels = np.where(finite, labels, -1)
    elif labels.dtype.kind not in "iu":
        raise ValueError(f"regions must hold integer labels, got dtype {labels.dtype}")
    labels = labels.astype(np.int64)
    if not np.any(labels >= 0):
        raise ValueError("regions holds no region (no label >= 0)")
    return labels


def region_groups(labels: np.ndarray, pixel_bytes: int, memory: float) -> list[np.ndarray]:
    """The flat pixel indices (ascending) of each group of regions fitted at once: the
    regions in the order of their first pixel, packed under ``memory`` bytes
    (`pack_regions`).

    Raises:
        ValueError: naming ``region_memory``, for a region whose fit needs more.
    """
    found, first, counts = np.unique(labels[labels >= 0], return_index=True, return_counts=True)
    order = np.argsort(first, kind="stable")
    groups = pack_regions(found, counts, order, pixel_bytes, memory)
    return [np.nonzero(np.isin(labels, group))[0] for group in groups]


def _gather(array: xr.DataArray, index, pixel_dims, core) -> np.ndarray:
    """``array``'s values at the flat pixels ``index`` (``(M,) + core``, or ``core`` when
    it has none of the pixel dims): only those pixels are computed from a dask array."""
    where = {d: xr.DataArray(i, dims="pixel") for d, i in zip(pixel_dims, index) if d in array.dims}
    picked = array.isel(where) if where else array
    order = (["pixel"] if where else []) + [d for d in core]
    return np.asarray(picked.transpose(*order).values)


def _group_block(r, to_sun, to_sensor, normal, refl_sigma, *, labels, params, options):
    from .._inverse.fit.fit import fit

    return (fit(r, to_sun, to_sensor, normal, params, regions=labels, **options),)


def fit_regions(
    inputs: ChunkedInputs,
    labels: np.ndarray,
    groups: Sequence[np.ndarray],
    maps: Sequence[ChunkMap],
    *,
    units: str,
    params,
    fit_options: dict,
) -> dict[str, xr.DataArray]:
    """The maps and per-region variables of a regional fit, group by group.

    Args:
        inputs: `chunked_inputs` of the fit; labels: `checked_labels`; groups:
            `region_groups`.
        maps: the per-pixel maps, in `lumaxlike.fit`'s joint fields (a regional
            parameter without the spectral dim).
        units: of ``refl``; params, fit_options: `lumaxlike.fit`'s (``free``,
            ``regional`` and the rest, ``chunk_size`` one for all groups).

    Returns:
        ``{name: DataArray}``: the `maps` on ``refl``'s pixel dims (pixels in no region:
        NaN, 0 observations and iterations, TOO_FEW_OBSERVATIONS), and on a ``region``
        dim (the labels, ascending): ``region_<name>`` and ``region_sigma_<name>`` of each
        regional parameter, ``region_status``, ``region_iterations``, ``region_cost``.
    """
    from .._status import Status

    refl, spec, pixel_dims = inputs.refl, inputs.spec, inputs.pixel_dims
    observation_dim = inputs.observation_dim
    n_pixels = labels.size
    sizes = [refl.sizes[d] for d in pixel_dims]
    n_bands = refl.sizes[spec]
    out = {}
    for m in maps:
        fill: float = Status.TOO_FEW_OBSERVATIONS if m.name == "status" else 0
        if np.issubdtype(m.dtype, np.floating):
            fill = np.nan
        out[m.name] = np.full((n_pixels,) + ((n_bands,) if m.dims else ()), fill, m.dtype)
    regional = fit_options["regional"]
    per_region: dict[str, list] = {"labels": []}
    for index in groups:
        where = np.unravel_index(index, sizes)
        cube = _gather(refl, where, pixel_dims, [spec, observation_dim])
        vectors = [
            _gather(v, where, pixel_dims, [observation_dim, VECTOR_DIM]) for v in inputs.vectors
        ]
        (result,) = _chunk_kernel(
            cube,
            *vectors,
            block=_group_block,
            units=units,
            sigma=None,
            observations=True,
            refl_dtype=None,
            kwargs={"labels": labels[index], "params": params, "options": fit_options},
        )
        values = {name: result[name] for name in result.free}
        values.update({f"sigma_{name}": result.sigma(name) for name in result.free})
        values.update({f"dfs_{name}": result.dfs[name] for name in result.free})
        values.update(
            status=result.status,
            iterations=result.iterations,
            cost=result.cost,
            observations=result.observations,
        )
        for m in maps:
            out[m.name][index] = values[m.name]
        per_region["labels"].append(result.region_labels)
        for name in regional:
            per_region.setdefault(f"region_{name}", []).append(result.region_values[name])
            per_region.setdefault(f"region_sigma_{name}", []).append(result.region_sigma[name])
        for name in ("status", "iterations", "cost"):
            per_region.setdefault(f"region_{name}", []).append(getattr(result, f"region_{name}"))
    coords = {
        name: coord
        for name, coord in refl.coords.items()
        if set(coord.dims) <= set(pixel_dims) | {spec}
    }
    variables = {}
    for m in maps:
        dims = [*pixel_dims, *m.dims]
        array = xr.DataArray(
            out[m.name].reshape(sizes + [n_bands] * len(m.dims)),
            dims=dims,
            coords={k: c for k, c in coords.items() if set(c.dims) <= set(dims)},
        )
        variables[m.name] = _with_map_attrs(array, m.attrs, refl)
    region_labels = np.concatenate(per_region.pop("labels"))
    order = np.argsort(region_labels, kind="stable")
    for name, pieces in per_region.items():
        variables[name] = xr.DataArray(
            np.concatenate(pieces)[order],
            dims=("region",),
            coords={"region": region_labels[order]},
            attrs={"long_name": f"lumaxlike.fit {name} per region"},
        )
    return variables
