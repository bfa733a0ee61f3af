"""What every xarray front end shares: the spectral dim, the argument checks made first,
the inputs aligned and chunked for ``xarray.apply_ufunc``, a chunk's reflectance and
geometry inside a kernel, the numba threads of a chunk in a dask worker, the maps'
attributes and the Dataset's provenance attrs."""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Mapping

import numpy as np
import xarray as xr

from .._io.units import check_units, to_bidirectional_reflectance, uncertainty_to_r
from .geometry import VECTOR_DIM, VECTOR_NAMES

__all__ = [
    "OUTPUT_DTYPES",
    "SPECTRAL_DIMS",
    "ChunkedInputs",
    "check_front_end",
    "chunk_geometry",
    "chunk_options",
    "chunked_inputs",
    "in_worker_thread",
    "result_attrs",
    "spectral_dim_of",
    "with_map_attrs",
]

SPECTRAL_DIMS = ("band", "wavelength")
"""Names recognised as the spectral dim of a reflectance DataArray."""


OUTPUT_DTYPES = {"status": np.int8, "iterations": np.int32}


def spectral_dim_of(refl: xr.DataArray, spectral_dim) -> str:
    if spectral_dim is not None:
        if spectral_dim not in refl.dims:
            raise ValueError(f"spectral_dim={spectral_dim!r} is not a dim of refl {refl.dims}")
        return spectral_dim
    found = [dim for dim in SPECTRAL_DIMS if dim in refl.dims]
    if len(found) != 1:
        raise ValueError(
            f"refl must have exactly one spectral dim named 'band' or 'wavelength' "
            f"(or pass spectral_dim=...), its dims are {refl.dims}"
        )
    return found[0]


def _largest_chunk_pixels(refl: xr.DataArray, pixel_dims) -> int:
    """Pixels in the largest chunk of ``refl`` (all pixels when it is not chunked)."""
    if refl.chunks is None:
        return max(1, math.prod(refl.sizes[d] for d in pixel_dims))
    return max(1, math.prod(max(refl.chunksizes[d]) for d in pixel_dims))


def in_worker_thread() -> bool:
    """True inside a dask.distributed worker or a thread other than the main thread."""
    try:
        from distributed import get_worker

        get_worker()
        return True
    except (ImportError, ValueError):
        return threading.current_thread() is not threading.main_thread()


def with_map_attrs(output: xr.DataArray, attrs: Mapping, refl: xr.DataArray) -> xr.DataArray:
    """`output` with the CF attributes `attrs`, plus refl's grid mapping and CRS if it has them."""
    attrs = dict(attrs)
    if "spatial_ref" in refl.coords:
        attrs["grid_mapping"] = "spatial_ref"
    if "crs" in refl.attrs:
        attrs["crs"] = refl.attrs["crs"]
    output.attrs = attrs
    return output


def check_front_end(refl, units, refl_sigma) -> None:
    """The checks every front end makes first (each message names its argument)."""
    if not isinstance(refl, xr.DataArray):
        raise ValueError(f"refl must be an xarray.DataArray, got {type(refl).__name__}")
    check_units(units)
    if refl_sigma is not None and not (isinstance(refl_sigma, (int, float)) and refl_sigma > 0):
        raise ValueError(f"refl_sigma must be a positive number, got {refl_sigma!r}")


@dataclasses.dataclass(frozen=True)
class ChunkedInputs:
    """A front end's inputs aligned with ``refl`` and chunked for ``apply_ufunc``: the
    core dims (spectral, observation, vector) in one chunk each, the pixel dims chunked
    alike; ``largest``: pixels in the largest chunk."""

    refl: xr.DataArray
    vectors: list
    extra: list
    largest: int


def chunked_inputs(
    refl, vectors, spec, pixel_dims, *, observation_dim=None, extra=(), what="geometry"
) -> ChunkedInputs:
    """Align ``refl``, the geometry ``vectors`` and ``extra`` arrays (exactly), check the
    vectors' dims, put every core dim in one chunk and unify the pixel dims' chunks."""
    try:
        xr.align(refl, *vectors, *extra, join="exact")
    except ValueError as error:
        raise ValueError(f"{what} is not aligned with refl: {error}") from None
    core = [spec] if observation_dim is None else [spec, observation_dim]
    vector_core = (
        {VECTOR_DIM: -1} if observation_dim is None else {VECTOR_DIM: -1, observation_dim: -1}
    )
    chunked = []
    for name, vector in zip(VECTOR_NAMES, vectors):
        unknown = [d for d in vector.dims if d not in (VECTOR_DIM, *core[1:], *pixel_dims)]
        if unknown:
            raise ValueError(f"geometry {name} has dims {unknown} that refl does not have")
        if observation_dim is not None and observation_dim not in vector.dims:
            vector = vector.expand_dims({observation_dim: refl.sizes[observation_dim]})
        chunked.append(vector.chunk(vector_core) if vector.chunks is not None else vector)
    if refl.chunks is not None and any(len(refl.chunksizes[d]) > 1 for d in core):
        refl = refl.chunk(dict.fromkeys(core, -1))
    extra = [a.chunk({spec: -1}) if a.chunks is not None and spec in a.dims else a for a in extra]
    refl, *rest = xr.unify_chunks(refl, *chunked, *extra)
    return ChunkedInputs(refl, rest[:3], rest[3:], _largest_chunk_pixels(refl, pixel_dims))


def chunk_geometry(refl, to_sun, to_sensor, normal, units, sigma, pixels=None):
    """In a kernel: the chunk's vectors broadcast to its pixels, its reflectance as r
    [1/sr] (at least float32, as declared to dask) and sigma in r."""
    pixels = refl.shape[:-1] if pixels is None else pixels
    to_sun, to_sensor, normal = (
        np.broadcast_to(v, pixels + (3,)) for v in (to_sun, to_sensor, normal)
    )
    refl = refl.astype(np.result_type(refl.dtype, np.float32), copy=False)
    r = to_bidirectional_reflectance(refl, units, to_sun, normal)
    return r, to_sun, to_sensor, normal, uncertainty_to_r(sigma, units, to_sun, normal, r.dtype)


def chunk_options(options):
    """The block options in a kernel: one numba thread inside a dask worker unless given."""
    if options.num_threads is None and options.solver == "numba" and in_worker_thread():
        return dataclasses.replace(options, num_threads=1)
    return options


def result_attrs(attrs: Mapping, provenance) -> dict:
    """``refl``'s attrs plus the provenance keys, with a line appended to ``history``."""
    line = f"{provenance.created} {provenance.command}"
    history = attrs.get("history")
    return {**attrs, **provenance.attrs(), "history": f"{history}\n{line}" if history else line}
