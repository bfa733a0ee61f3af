"""The one body of the xarray front ends whose maps all have the bands of ``refl``
(`invert_dataarray`, `normalize_dataarray`): each merges its settings, then hands its
`BandFrontEnd` and arguments to `solve_bands`, which checks them, chunks the inputs,
runs the operation's block task (`lumaxlike._operations.declaration.Operation`) on each
chunk through `apply_to_chunks`, marks the product's bad bands and records the call."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np
import xarray as xr

from .._io.missions.product_dataarray import (
    product_geometry_of,
    product_record_of,
    with_bad_band_status,
)
from .._operations.blocks import per_band_params
from .._operations.declaration import Operation
from .._options import solver_options
from .._provenance import python_call
from .chunks import (
    apply_to_chunks,
    check_front_end,
    chunked_inputs,
    operation_chunk,
    operation_maps,
    provenance_of,
    result_dataset,
    solver_record,
    spectral_dim_of,
)

__all__ = ["BandFrontEnd", "solve_bands"]


@dataclasses.dataclass(frozen=True)
class BandFrontEnd:
    """What a per-band xarray front end declares beyond its operation.

    Attributes:
        function: its Python name (``"invert_dataarray"``), for the record.
        operation: the `Operation` whose block task runs on each chunk.
        chunk_pixels: ``chunk_pixels(solver, bands, dtype) -> pixels`` of one JAX chunk
            (every dask chunk is padded to it, so the solver compiles once).
        param_maps: whether it takes per-pixel ``param_maps`` (normalize): checked,
            chunked with ``refl`` and handed to the block task.
    """

    function: str
    operation: Operation
    chunk_pixels: Callable[[str, int, Any], int]
    param_maps: bool = False


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


def _band_variables(front, inputs, maps, params, options, settings, units: str, dtype) -> dict:
    """The maps of ``front``'s operation on every chunk of ``inputs`` (`apply_to_chunks` of
    its block task with ``params``, ``options``, ``settings``; with ``param_maps`` the
    output ``units`` and ``maps``, each with ``refl``'s bands or not), floating maps in
    ``dtype``."""
    spec = inputs.spec
    extra: dict[str, Any] = {"settings": settings}
    if front.param_maps:  # normalize
        extra.update(units=units, param_maps=[(n, spec in m.dims) for n, m in maps.items()])
    operation = front.operation
    chunk_maps = operation_maps(operation.layout(units), operation.fields, spec, dtype)
    return apply_to_chunks(
        operation_chunk,
        inputs,
        chunk_maps,
        units=units,
        refl_sigma=settings.refl_sigma,
        kwargs={
            "task": operation.block(),
            "maps": chunk_maps,
            "params": params,
            "options": options,
            "extra": extra,
        },
    )


def solve_bands(
    front: BandFrontEnd,
    refl,
    geometry,
    params,
    solver,
    *,
    units: str,
    spectral_dim,
    num_threads,
    settings,
    correction_undone: bool = False,
    param_maps=None,
    own: Mapping | None = None,
    record: Mapping | None = None,
) -> xr.Dataset:
    """The result Dataset of a per-band front end (see `invert_dataarray`, whose
    arguments these are; ``settings`` merged already).

    ``own``: the front end's own arguments, recorded in the call after ``units`` (and
    handed to nothing else); ``record``: its own fields of the provenance record. The
    block task gets ``settings`` (and with ``param_maps`` the output ``units`` and maps).
    """
    refl_sigma = settings.refl_sigma
    check_front_end(refl, units, refl_sigma)
    standard = geometry is None
    geometry = product_geometry_of(refl, geometry, correction_undone)
    solving = settings.solver_keywords()
    options = solver_options(solver, **solving, num_threads=num_threads)
    spec = spectral_dim_of(refl, spectral_dim)
    band_params = per_band_params(params, refl.sizes[spec])
    maps = _checked_param_maps(param_maps, refl) if front.param_maps else {}
    what = "geometry or param_maps" if front.param_maps else "geometry"
    inputs = chunked_inputs(refl, geometry, spec, extra=list(maps.values()), what=what)
    refl = inputs.refl
    dtype = np.result_type(refl.dtype, np.float32)
    per_chunk = front.chunk_pixels(options.solver, refl.sizes[spec], dtype)
    options = dataclasses.replace(options, chunk_size=min(inputs.largest, per_chunk))
    variables = _band_variables(front, inputs, maps, band_params, options, settings, units, dtype)
    variables["status"] = with_bad_band_status(variables["status"], refl, spec)
    call = dict(units=units, **(own or {}), spectral_dim=spectral_dim, refl_sigma=refl_sigma)
    call.update(solving, num_threads=num_threads)
    provenance = provenance_of(
        refl,
        geometry,
        params=band_params,
        units=units,
        **solver_record(options, refl_sigma),
        dtype=dtype,
        **(record or {}),
        **({"param_maps": dict.fromkeys(maps) or None} if front.param_maps else {}),
        product=product_record_of(refl, standard),
        command=python_call(front.function, refl, geometry, params, solver, **call),
    )
    return result_dataset(variables, refl, provenance)
