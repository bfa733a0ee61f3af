"""`normalize_dataarray`: photometric normalisation of a reflectance DataArray
(`lumaxlike.normalize`), chunk by chunk; also ``DataArray.hapke.normalize``."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np
import xarray as xr

from .._declared_options import refuse_unknown, takes_options
from .._inverse.albedo.invert import default_chunk_pixels
from .._io.missions.product_dataarray import (
    product_geometry_of,
    product_record_of,
    with_bad_band_status,
)
from .._normalize.options import NormalizeSettings
from .._operations.blocks import per_band_params
from .._options import SolverOptions, solver_options
from .._provenance import python_call
from .chunks import (
    apply_to_chunks,
    band_maps,
    check_front_end,
    chunk_options,
    chunked_inputs,
    provenance_of,
    result_dataset,
    solver_record,
    spectral_dim_of,
)

__all__ = ["normalize_dataarray"]


def _normalize_block(
    r,
    to_sun,
    to_sensor,
    normal,
    refl_sigma,
    *maps,
    names,
    per_band,
    units,
    params,
    options,
    settings,
):
    """One chunk (`apply_to_chunks`): r (..., bands), vectors (..., 3) and the parameter
    maps -> normalised reflectance, status, sigma."""
    from .._operations.normalize import NORMALIZATION_FIELDS, normalize_block

    pixels = r.shape[:-1]
    param_maps = {
        name: np.broadcast_to(values, r.shape if band else pixels)
        for name, values, band in zip(names, maps, per_band)
    }
    fields = normalize_block(
        r,
        to_sun,
        to_sensor,
        normal,
        params,
        chunk_options(options),
        refl_sigma=refl_sigma,
        settings=settings,
        units=units,
        param_maps=param_maps or None,
    )
    return tuple(fields[field] for field in NORMALIZATION_FIELDS)


def _checked_param_maps(param_maps, refl: xr.DataArray) -> dict:
    """``param_maps`` as a dict of DataArrays on ``refl``'s dims; ValueError naming it."""
    if param_maps is not None and not isinstance(param_maps, Mapping):
        raise ValueError(
            f"param_maps must be a mapping of HapkeParams fields to DataArrays, got "
            f"{type(param_maps).__name__}"
        )
    maps = dict(param_maps or {})
    for name, values in maps.items():
        if not isinstance(values, xr.DataArray) or not set(values.dims) <= set(refl.dims):
            raise ValueError(f"param_maps[{name!r}] must be a DataArray on refl's dims {refl.dims}")
    return maps


@takes_options(NormalizeSettings)
def normalize_dataarray(
    refl: xr.DataArray,
    geometry,
    params,
    solver: str | SolverOptions = "jax",
    *,
    units: str,
    param_maps: Mapping | None = None,
    spectral_dim: str | None = None,
    num_threads: int | None = None,
    settings: NormalizeSettings | None = None,
    **keywords,
) -> xr.Dataset:
    """Photometric normalisation of a reflectance DataArray to a standard geometry, chunk by chunk.

    As `invert_dataarray` (same ``refl``, ``geometry``, ``params``, ``solver``,
    ``units``, ``spectral_dim``, ``num_threads``), with `lumaxlike.normalize` per chunk.

    Args:
        param_maps: optional ``{HapkeParams field: DataArray}`` of per-pixel parameters
            on ``refl``'s pixel dims (and optionally its spectral dim), in the field's
            units (roughness [rad]); see `lumaxlike.normalize`.
        settings: the normalisation's options as one `lumaxlike.NormalizeSettings`
            (None: the defaults).
        **keywords: the options of `lumaxlike.NormalizeSettings` by name: ``standard``
            [rad], ``refl_sigma`` (one number, in ``units``), ``max_iter``, ``tol``.

    Returns:
        Dataset with ``reflectance`` (in ``units``, at the standard geometry; REFF with
        the standard incidence), ``status`` (int8, the inversion's) and ``sigma`` (in
        ``units``; NaN without ``refl_sigma``), with ``refl``'s dims, coords and chunks
        (lazy when ``refl`` is dask-backed) and the provenance attributes of
        `invert_dataarray` plus the standard geometry.

    Raises:
        ValueError: bad argument (names it), misaligned geometry or maps.
        TypeError: a keyword that is no option.
    """
    from .._operations.normalize import NORMALIZE

    settings = NormalizeSettings.merged(settings, keywords)
    refuse_unknown("normalize_dataarray", keywords)
    standard, refl_sigma = settings.standard, settings.refl_sigma
    check_front_end(refl, units, refl_sigma)
    used_standard = geometry is None
    geometry = product_geometry_of(refl, geometry)  # a normalised product: flat at its geometry
    solving = settings.solver_keywords()
    options = solver_options(solver, **solving, num_threads=num_threads)
    spec = spectral_dim_of(refl, spectral_dim)
    band_params = per_band_params(params, refl.sizes[spec])
    maps = _checked_param_maps(param_maps, refl)
    inputs = chunked_inputs(
        refl, geometry, spec, extra=list(maps.values()), what="geometry or param_maps"
    )
    refl = inputs.refl
    options = dataclasses.replace(
        options, chunk_size=min(inputs.largest, default_chunk_pixels(refl.sizes[spec]))
    )
    dtype = np.result_type(refl.dtype, np.float32)
    variables = apply_to_chunks(
        _normalize_block,
        inputs,
        band_maps(NORMALIZE, spec, dtype, units),
        units=units,
        refl_sigma=refl_sigma,
        kwargs={
            "names": list(maps),
            "per_band": [spec in m.dims for m in inputs.extra],
            "units": units,
            "params": band_params,
            "options": options,
            "settings": settings,
        },
    )
    variables["status"] = with_bad_band_status(variables["status"], refl, spec)
    call: dict[str, Any] = dict(units=units, standard=standard, param_maps=param_maps)
    call.update(spectral_dim=spectral_dim, refl_sigma=refl_sigma, **solving)
    provenance = provenance_of(
        refl,
        geometry,
        params=band_params,
        units=units,
        **solver_record(options, refl_sigma),
        dtype=dtype,
        standard=standard,
        param_maps={name: None for name in maps} or None,
        product=product_record_of(refl, used_standard),
        command=python_call(
            "normalize_dataarray", refl, geometry, params, solver, **call, num_threads=num_threads
        ),
    )
    return result_dataset(variables, refl, provenance)
