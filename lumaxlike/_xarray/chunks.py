"""The one helper behind the xarray front ends: a per-chunk solver applied over a
reflectance DataArray, NumPy-backed (one call) or dask-backed (one task per chunk).

A front end checks its own arguments, then:

1. `chunked_inputs`: ``refl`` and its geometry (and any extra per-pixel arrays) aligned
   exactly, the core dims (spectral, observation, vector) in one chunk each, the pixel
   dims chunked alike;
2. `apply_to_chunks`: its block solver run on each chunk through ``xarray.apply_ufunc(...,
   dask="parallelized")``, the chunk's reflectance converted to r [1/sr] with its geometry
   first, the maps back in ``refl``'s dim order with their attributes (and ``refl``'s grid
   mapping and CRS);
3. `result_dataset`: the maps as a Dataset with ``refl``'s attrs, the provenance record
   (`provenance_of`: ``refl``'s and the geometry's source files) and a ``history`` line.

Also the checks every front end makes first and the numba threads of a chunk computed in
a dask worker."""

from __future__ import annotations

import dataclasses
import math
import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np
import xarray as xr

from .._io.read.units import check_units, to_bidirectional_reflectance, uncertainty_to_r
from .._provenance import make_provenance
from .geometry import VECTOR_DIM, VECTOR_NAMES, geometry_vectors

__all__ = [
    "solver_record",
    "SPECTRAL_DIMS",
    "ChunkMap",
    "ChunkedInputs",
    "apply_to_chunks",
    "check_front_end",
    "chunk_options",
    "chunked_inputs",
    "operation_chunk",
    "operation_maps",
    "provenance_of",
    "result_attrs",
    "result_dataset",
    "spectral_dim_of",
    "worker_num_threads",
]

SPECTRAL_DIMS = ("band", "wavelength")
"""Names recognised as the spectral dim of a reflectance DataArray."""


def spectral_dim_of(refl: xr.DataArray, spectral_dim) -> str:
    """The name of ``refl``'s spectral dim: `spectral_dim`, or the one of `SPECTRAL_DIMS`."""
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


def _in_worker_thread() -> bool:
    """True inside a dask.distributed worker or a thread other than the main thread."""
    try:
        from distributed import get_worker

        get_worker()
        return True
    except (ImportError, ValueError):
        return threading.current_thread() is not threading.main_thread()


def _with_map_attrs(output: xr.DataArray, attrs: Mapping, refl: xr.DataArray) -> xr.DataArray:
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
    core dims (``spec``, ``observation_dim``, the vector dim) in one chunk each, the
    pixel dims chunked alike; ``vectors``: to_sun, to_sensor, normal; ``extra``: the
    front end's other per-pixel arrays (on ``refl``'s dims); ``largest``: pixels in the
    largest chunk."""

    refl: xr.DataArray
    vectors: list
    extra: list
    largest: int
    spec: str
    pixel_dims: list
    observation_dim: str | None = None


def chunked_inputs(
    refl, geometry, spec, *, observation_dim=None, extra=(), what="geometry"
) -> ChunkedInputs:
    """``refl``, its `geometry` (a Dataset or dict: `geometry_vectors`) and the `extra`
    arrays aligned exactly, the vectors' dims checked, every core dim in one chunk and the
    pixel dims' chunks unified. `spec`: the spectral dim; `observation_dim`: the
    observation dim of a multi-angle cube (None for one observation per pixel)."""
    pixel_dims = [dim for dim in refl.dims if dim not in (spec, observation_dim)]
    vectors = geometry_vectors(
        geometry,
        pixel_dims if observation_dim is None else [*pixel_dims, observation_dim],
    )
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
    largest = _largest_chunk_pixels(refl, pixel_dims)
    return ChunkedInputs(refl, rest[:3], rest[3:], largest, spec, pixel_dims, observation_dim)


@dataclasses.dataclass(frozen=True)
class ChunkMap:
    """One map a front end's block solver returns: its ``name``, ``dtype``, the ``dims`` it
    has after the pixel dims (the spectral dim, ``endmember``, ``quantile``; none for a
    per-pixel map) and its CF ``attrs``."""

    name: str
    dtype: Any
    dims: tuple[str, ...] = ()
    attrs: Mapping = dataclasses.field(default_factory=dict)


def apply_to_chunks(
    block: Callable,
    inputs: ChunkedInputs,
    maps: Sequence[ChunkMap],
    *,
    units: str,
    refl_sigma=None,
    refl_dtype=None,
    sizes: Mapping[str, int] | None = None,
    kwargs: Mapping | None = None,
) -> dict[str, xr.DataArray]:
    """{name: map} of `block` applied to every chunk of ``inputs.refl`` (lazily, one dask
    task per chunk, when it is dask-backed; at once when not).

    Args:
        block: the front end's solver of one chunk, a module-level function (dask pickles
            it): ``block(r, to_sun, to_sensor, normal, refl_sigma, *extra, **kwargs)`` ->
            one NumPy array per map, in `maps`' order. ``r`` [1/sr] has shape ``pixels +
            (bands,)`` (``pixels + (bands, observations)`` with an observation dim), the
            vectors ``pixels + (3,)`` (``pixels + (observations, 3)``), ``refl_sigma``
            is `refl_sigma` in r (None without one), ``extra`` the chunk's extra arrays.
        inputs: from `chunked_inputs`.
        maps: what `block` returns.
        units: what ``refl`` holds (``"r"``, ``"radf"``, ``"reff"``: each observation with
            its own cos i).
        refl_sigma: the standard uncertainty of ``refl`` in `units`, or None.
        refl_dtype: the chunk's reflectance is cast to this dtype first (None: kept, at
            least float32).
        sizes: the lengths of the maps' dims that ``refl`` does not have (``endmember``).
        kwargs: passed to `block`.

    Returns:
        The maps with ``refl``'s pixel dims in ``refl``'s order, then each map's `dims`,
        with ``refl``'s coords, chunked as its pixels; attrs: the map's plus ``refl``'s
        grid mapping and CRS.
    """
    spec, observation_dim = inputs.spec, inputs.observation_dim
    if observation_dim is None:
        refl_core, vector_core = [spec], [VECTOR_DIM]
    else:
        refl_core, vector_core = [spec, observation_dim], [observation_dim, VECTOR_DIM]
    outputs = xr.apply_ufunc(
        _chunk_kernel,
        inputs.refl,
        *inputs.vectors,
        *inputs.extra,
        input_core_dims=[refl_core]
        + [vector_core] * 3
        + [[spec] if spec in a.dims else [] for a in inputs.extra],
        output_core_dims=[list(m.dims) for m in maps],
        dask="parallelized",
        output_dtypes=[m.dtype for m in maps],
        dask_gufunc_kwargs={"output_sizes": dict(sizes)} if sizes else None,
        kwargs={
            "block": block,
            "units": units,
            "sigma": refl_sigma,
            "observations": observation_dim is not None,
            "refl_dtype": refl_dtype,
            "kwargs": dict(kwargs or {}),
        },
        keep_attrs="override",  # keeps coordinate attrs (spatial_ref); the maps' attrs set below
    )
    if len(maps) == 1:
        outputs = (outputs,)
    order = [d for d in inputs.refl.dims if d != observation_dim]
    variables = {}
    for m, output in zip(maps, outputs):
        dims = [d for d in order if d in output.dims] + [d for d in m.dims if d not in order]
        variables[m.name] = _with_map_attrs(output.transpose(*dims), m.attrs, inputs.refl)
    return variables


def _chunk_kernel(
    refl,
    to_sun,
    to_sensor,
    normal,
    *extra,
    block,
    units,
    sigma,
    observations,
    refl_dtype,
    kwargs,
):
    """apply_ufunc kernel: one chunk's NumPy blocks -> `block`'s maps (a tuple)."""
    if refl_dtype is not None:
        refl = np.asarray(refl, refl_dtype)
    if observations:
        # units are per observation (reff: its own cos i): convert with observations before bands
        pixels, n_obs = refl.shape[:-2], refl.shape[-1]
        r, to_sun, to_sensor, normal, refl_sigma = _chunk_geometry(
            np.moveaxis(refl, -1, -2),
            to_sun,
            to_sensor,
            normal,
            units,
            sigma,
            pixels + (n_obs,),
        )
        r = np.moveaxis(r, -1, -2)
    else:
        r, to_sun, to_sensor, normal, refl_sigma = _chunk_geometry(
            refl, to_sun, to_sensor, normal, units, sigma
        )
    return tuple(block(r, to_sun, to_sensor, normal, refl_sigma, *extra, **kwargs))


def _chunk_geometry(refl, to_sun, to_sensor, normal, units, sigma, pixels=None):
    """In a kernel: the chunk's vectors broadcast to its pixels, its reflectance as r
    [1/sr] (at least float32, as declared to dask) and sigma in r."""
    pixels = refl.shape[:-1] if pixels is None else pixels
    to_sun, to_sensor, normal = (
        np.broadcast_to(v, pixels + (3,)) for v in (to_sun, to_sensor, normal)
    )
    refl = refl.astype(np.result_type(refl.dtype, np.float32), copy=False)
    r = to_bidirectional_reflectance(refl, units, to_sun, normal)
    return (
        r,
        to_sun,
        to_sensor,
        normal,
        uncertainty_to_r(sigma, units, to_sun, normal, r.dtype),
    )


def worker_num_threads(solver: str, num_threads: int | None) -> int | None:
    """A chunk's numba threads: `num_threads`, or one inside a dask worker when None (the
    workers supply the parallelism); None (all) otherwise."""
    if num_threads is None and solver == "numba" and _in_worker_thread():
        return 1
    return num_threads


def chunk_options(options):
    """The block options in a kernel: one numba thread inside a dask worker unless given."""
    threads = worker_num_threads(options.solver, options.num_threads)
    if threads != options.num_threads:
        return dataclasses.replace(options, num_threads=threads)
    return options


def provenance_of(refl: xr.DataArray, geometry, **fields):
    """The `lumaxlike.Provenance` of a front end's result: `fields` (`make_provenance`'s),
    plus the source files ``refl`` and a `geometry` Dataset were opened from."""
    source = geometry.encoding.get("source") if isinstance(geometry, xr.Dataset) else None
    return make_provenance(cube=refl.encoding.get("source"), geometry=source, **fields)


def operation_maps(layout, fields, spec: str, dtype) -> list[ChunkMap]:
    """`ChunkMap` of each of ``fields`` as an operation's `FieldLayout` declares it: per
    band (along ``spec``) unless ``layout.band_names`` gives it other bands, then along
    its ``layout.dimensions`` one (``endmember``), or per pixel where that is None; in its
    ``layout.integer`` type, else ``dtype``; with its ``layout.attrs``."""

    def dims(field: str) -> tuple[str, ...]:
        if field not in layout.band_names:
            return (spec,)
        dimension = layout.dimensions.get(field)
        return () if dimension is None else (dimension,)

    return [
        ChunkMap(field, layout.integer.get(field, dtype), dims(field), layout.attrs[field])
        for field in fields
    ]


def operation_chunk(
    r, to_sun, to_sensor, normal, refl_sigma, *arrays, task, maps, params, options, extra
):
    """One chunk (`apply_to_chunks`) of an operation's block task (`Operation.block`):
    ``task(r, to_sun, to_sensor, normal, params, options, refl_sigma=, **extra)`` ->
    the arrays of `maps` (`ChunkMap`s, in order), a per-pixel one without the task's
    trailing axis of one; ``options`` with one numba thread in a dask worker
    (`chunk_options`). ``arrays``: the chunk's ``param_maps`` (their names and whether
    each has bands in ``extra["param_maps"]``), broadcast to its pixels (and bands)."""
    extra = dict(extra)
    if "param_maps" in extra:
        shapes = {True: r.shape, False: r.shape[:-1]}
        names = extra["param_maps"]
        extra["param_maps"] = {
            name: np.broadcast_to(values, shapes[band])
            for (name, band), values in zip(names, arrays)
        } or None
    fields = task(
        r, to_sun, to_sensor, normal, params, chunk_options(options), refl_sigma=refl_sigma, **extra
    )
    return tuple(fields[m.name] if m.dims else fields[m.name][..., 0] for m in maps)


def solver_record(options, refl_sigma) -> dict:
    """The record's solver, tol, max_iter (a `SolverOptions`'s) and refl_sigma."""
    return dict(
        solver=options.solver, tol=options.tol, max_iter=options.max_iter, refl_sigma=refl_sigma
    )


def result_dataset(variables: Mapping, refl: xr.DataArray, provenance, attrs=None) -> xr.Dataset:
    """The front end's Dataset: its maps, ``refl``'s attrs, the `provenance` record, the
    front end's own `attrs` and a line appended to ``history``."""
    return xr.Dataset(variables, attrs={**result_attrs(refl.attrs, provenance), **(attrs or {})})


def result_attrs(attrs: Mapping, provenance) -> dict:
    """``refl``'s attrs plus the provenance keys, with a line appended to ``history``."""
    line = f"{provenance.created} {provenance.command}"
    history = attrs.get("history")
    return {
        **attrs,
        **provenance.attrs(),
        "history": f"{history}\n{line}" if history else line,
    }
