"""xarray interface: invert a reflectance DataArray, in memory or chunk by chunk with dask.

:func:`invert_dataarray` wraps :func:`lumaxlike.invert` with ``xarray.apply_ufunc(...,
dask="parallelized")``: a NumPy-backed cube is inverted at once, a dask-backed one chunk by
chunk (on whatever scheduler computes it: threads, processes, a dask.distributed cluster).
The same function is available as the accessor ``refl.hapke.invert(...)`` once
:mod:`lumaxlike` is imported.

Geometry is a Dataset (or a dict of DataArrays) aligned with the cube on its pixel dims,
holding either

* the angles ``to_sun_zenith``, ``to_sun_azimuth``, ``to_sensor_zenith``,
  ``to_sensor_azimuth`` in degrees (radians when a variable's ``units`` attribute says
  ``rad``), azimuths clockwise from north; or
* the vectors ``to_sun`` and ``to_sensor`` (east, north, up) with one extra dim of
  size 3;

plus, optionally, ``normal`` vectors with a dim of size 3 (default: a flat surface); or

* the angles ``incidence``, ``emission``, ``phase`` (same units rule), relative to the
  surface, without ``normal`` (see :func:`lumaxlike.geometry_from_angles`; an
  inconsistent triplet gives that pixel the status ``NONFINITE_INPUT``).

Numba threads: the numba solver uses ``num_threads`` threads per chunk. By default (None)
a chunk computed in a dask worker (a dask.distributed worker, or a worker thread of
dask's threaded scheduler) uses one thread, as dask's own workers set
``OMP_NUM_THREADS=1``: the dask workers supply the parallelism. A NumPy-backed cube
inverted in the main thread uses numba's full thread count. JAX is not fork-safe: use
dask's default ``spawn`` start method for worker processes.
"""

from __future__ import annotations

import contextlib
import dataclasses
import math
import threading
from collections.abc import Mapping

import numpy as np
import xarray as xr

from ._geometry import direction_from_zenith_azimuth, geometry_from_angles
from ._inverse.invert import default_chunk_pixels
from ._inverse.status import Status
from ._io.geometry_rasters import ANGLE_ROLES
from ._io.layout import FIELD_ATTRS, RESULT_FIELDS
from ._io.product_dataarray import (
    bad_bands_of,
    product_geometry_of,
    product_record_of,
    refuse_normalised_dataarray,
)
from ._io.units import check_units, to_bidirectional_reflectance, uncertainty_to_r
from ._provenance import make_provenance, python_call
from ._run.tasks import SolverOptions, invert_block, per_band_params

__all__ = [
    "SPECTRAL_DIMS",
    "VECTOR_NAMES",
    "invert_dataarray",
    "normalize_dataarray",
    "unmix_dataarray",
]

SPECTRAL_DIMS = ("band", "wavelength")
"""Names recognised as the spectral dim of a reflectance DataArray."""

VECTOR_NAMES = ("to_sun", "to_sensor", "normal")
"""Geometry variables given as direction vectors (trailing dim of size 3)."""

TRIPLET_NAMES = ("incidence", "emission", "phase")
"""Geometry variables given as an angle triplet relative to the surface."""

_VECTOR_DIM = "lumaxlike_vector"
_OUTPUT_DTYPES = {"status": np.int8, "iterations": np.int32}


def _spectral_dim(refl: xr.DataArray, spectral_dim) -> str:
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


def _angle_radians(geometry: Mapping, role: str) -> xr.DataArray:
    angle = geometry[role]
    if not isinstance(angle, xr.DataArray):
        raise ValueError(
            f"geometry[{role!r}] must be an xarray.DataArray, got {type(angle).__name__}"
        )
    units = str(angle.attrs.get("units", "degrees")).lower()
    if units in ("deg", "degree", "degrees", "degrees_east", "degrees_north"):
        return np.deg2rad(angle)
    if units in ("rad", "radian", "radians"):
        return angle
    raise ValueError(f"geometry[{role!r}] has units {units!r}; expected degrees or radians")


def _directions(zenith: xr.DataArray, azimuth: xr.DataArray) -> xr.DataArray:
    return xr.apply_ufunc(
        direction_from_zenith_azimuth,
        zenith,
        azimuth,
        output_core_dims=[[_VECTOR_DIM]],
        dask="parallelized",
        output_dtypes=[np.result_type(zenith.dtype, azimuth.dtype, np.float32)],
        dask_gufunc_kwargs={"output_sizes": {_VECTOR_DIM: 3}},
    )


def _triplet_vectors(incidence, emission, phase):
    """apply_ufunc kernel: (i, e, g) [rad] -> to_sun, to_sensor, normal, each (..., 3)."""
    return geometry_from_angles(incidence, emission, phase=phase)


def _triplet_directions(rad: dict) -> tuple:
    dtype = np.result_type(*(rad[r].dtype for r in TRIPLET_NAMES), np.float32)
    return xr.apply_ufunc(
        _triplet_vectors,
        *(rad[r] for r in TRIPLET_NAMES),
        output_core_dims=[[_VECTOR_DIM]] * 3,
        dask="parallelized",
        output_dtypes=[dtype] * 3,
        dask_gufunc_kwargs={"output_sizes": {_VECTOR_DIM: 3}},
    )


def _vector(geometry: Mapping, name: str, pixel_dims) -> xr.DataArray:
    vector = geometry[name]
    if not isinstance(vector, xr.DataArray):
        raise ValueError(
            f"geometry[{name!r}] must be an xarray.DataArray, got {type(vector).__name__}"
        )
    extra = [dim for dim in vector.dims if dim not in pixel_dims]
    if len(extra) != 1 or vector.sizes[extra[0]] != 3:
        raise ValueError(
            f"geometry[{name!r}] must have the cube's pixel dims plus one dim of size 3, "
            f"its dims are {dict(vector.sizes)}"
        )
    return vector.rename({extra[0]: _VECTOR_DIM})


def _geometry_vectors(geometry, pixel_dims) -> tuple[xr.DataArray, xr.DataArray, xr.DataArray]:
    """(to_sun, to_sensor, normal) DataArrays with a trailing vector dim of size 3."""
    if not isinstance(geometry, (xr.Dataset, Mapping)):
        raise ValueError(
            f"geometry must be an xarray.Dataset or a dict of DataArrays, got {type(geometry).__name__}"
        )
    names = set(geometry.data_vars if isinstance(geometry, xr.Dataset) else geometry)
    has_angles = set(ANGLE_ROLES) <= names
    has_vectors = {"to_sun", "to_sensor"} <= names
    has_triplet = set(TRIPLET_NAMES) <= names
    if has_angles + has_vectors + has_triplet != 1:
        raise ValueError(
            "geometry must hold either the angles "
            f"{', '.join(ANGLE_ROLES)} [deg], or the vectors to_sun, to_sensor, or the angles "
            f"{', '.join(TRIPLET_NAMES)} [deg] (exactly one of these); it holds {sorted(names)}"
        )
    if has_triplet:
        if "normal" in names:
            raise ValueError(
                "geometry's incidence, emission and phase are relative to the surface: "
                "a normal cannot be given with them"
            )
        return _triplet_directions({role: _angle_radians(geometry, role) for role in TRIPLET_NAMES})
    if has_angles:
        rad = {role: _angle_radians(geometry, role) for role in ANGLE_ROLES}
        to_sun = _directions(rad["to_sun_zenith"], rad["to_sun_azimuth"])
        to_sensor = _directions(rad["to_sensor_zenith"], rad["to_sensor_azimuth"])
    else:
        to_sun = _vector(geometry, "to_sun", pixel_dims)
        to_sensor = _vector(geometry, "to_sensor", pixel_dims)
    if "normal" in names:
        normal = _vector(geometry, "normal", pixel_dims)
    else:
        normal = xr.DataArray(np.array([0.0, 0.0, 1.0], to_sun.dtype), dims=[_VECTOR_DIM])
    return to_sun, to_sensor, normal


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


def _check_front_end(refl, units, refl_sigma) -> None:
    """The checks every front end makes first (each message names its argument)."""
    if not isinstance(refl, xr.DataArray):
        raise ValueError(f"refl must be an xarray.DataArray, got {type(refl).__name__}")
    check_units(units)
    if refl_sigma is not None and not (isinstance(refl_sigma, (int, float)) and refl_sigma > 0):
        raise ValueError(f"refl_sigma must be a positive number, got {refl_sigma!r}")


@dataclasses.dataclass(frozen=True)
class _ChunkedInputs:
    """A front end's inputs aligned with ``refl`` and chunked for ``apply_ufunc``: the
    core dims (spectral, observation, vector) in one chunk each, the pixel dims chunked
    alike; ``largest``: pixels in the largest chunk."""

    refl: xr.DataArray
    vectors: list
    extra: list
    largest: int


def _chunked_inputs(
    refl, vectors, spec, pixel_dims, *, observation_dim=None, extra=(), what="geometry"
) -> _ChunkedInputs:
    """Align ``refl``, the geometry ``vectors`` and ``extra`` arrays (exactly), check the
    vectors' dims, put every core dim in one chunk and unify the pixel dims' chunks."""
    try:
        xr.align(refl, *vectors, *extra, join="exact")
    except ValueError as error:
        raise ValueError(f"{what} is not aligned with refl: {error}") from None
    core = [spec] if observation_dim is None else [spec, observation_dim]
    vector_core = (
        {_VECTOR_DIM: -1} if observation_dim is None else {_VECTOR_DIM: -1, observation_dim: -1}
    )
    chunked = []
    for name, vector in zip(VECTOR_NAMES, vectors):
        unknown = [d for d in vector.dims if d not in (_VECTOR_DIM, *core[1:], *pixel_dims)]
        if unknown:
            raise ValueError(f"geometry {name} has dims {unknown} that refl does not have")
        if observation_dim is not None and observation_dim not in vector.dims:
            vector = vector.expand_dims({observation_dim: refl.sizes[observation_dim]})
        chunked.append(vector.chunk(vector_core) if vector.chunks is not None else vector)
    if refl.chunks is not None and any(len(refl.chunksizes[d]) > 1 for d in core):
        refl = refl.chunk(dict.fromkeys(core, -1))
    extra = [a.chunk({spec: -1}) if a.chunks is not None and spec in a.dims else a for a in extra]
    refl, *rest = xr.unify_chunks(refl, *chunked, *extra)
    return _ChunkedInputs(refl, rest[:3], rest[3:], _largest_chunk_pixels(refl, pixel_dims))


def _chunk_geometry(refl, to_sun, to_sensor, normal, units, sigma, pixels=None):
    """In a kernel: the chunk's vectors broadcast to its pixels, its reflectance as r
    [1/sr] (at least float32, as declared to dask) and sigma in r."""
    pixels = refl.shape[:-1] if pixels is None else pixels
    to_sun, to_sensor, normal = (
        np.broadcast_to(v, pixels + (3,)) for v in (to_sun, to_sensor, normal)
    )
    refl = refl.astype(np.result_type(refl.dtype, np.float32), copy=False)
    r = to_bidirectional_reflectance(refl, units, to_sun, normal)
    return r, to_sun, to_sensor, normal, uncertainty_to_r(sigma, units, to_sun, normal, r.dtype)


def _chunk_options(options):
    """The block options in a kernel: one numba thread inside a dask worker unless given."""
    if options.num_threads is None and options.solver == "numba" and _in_worker_thread():
        return dataclasses.replace(options, num_threads=1)
    return options


def _invert_chunk(refl, to_sun, to_sensor, normal, *, units, params, options, sigma):
    """apply_ufunc kernel: NumPy blocks (..., bands) and (..., 3) -> 5 result arrays."""
    r, to_sun, to_sensor, normal, refl_sigma = _chunk_geometry(
        refl, to_sun, to_sensor, normal, units, sigma
    )
    fields = invert_block(
        r, to_sun, to_sensor, normal, params, _chunk_options(options), refl_sigma=refl_sigma
    )
    return tuple(fields[field] for field in RESULT_FIELDS)


def invert_dataarray(
    refl: xr.DataArray,
    geometry,
    params,
    solver: str = "jax",
    *,
    units: str,
    spectral_dim: str | None = None,
    refl_sigma: float | None = None,
    max_iter: int | None = None,
    tol: float | None = None,
    num_threads: int | None = None,
    correction_undone: bool = False,
) -> xr.Dataset:
    """Invert a reflectance DataArray for single-scattering albedo, chunk by chunk.

    Args:
        refl: reflectance with one spectral dim (``band`` or ``wavelength``, any position,
            or named by ``spectral_dim``); every other dim is a pixel dim (usually
            ``y``, ``x``). NumPy- or dask-backed; a spectral dim split into several dask
            chunks is rechunked into one.
        geometry: Dataset or dict of DataArrays aligned with ``refl`` on the pixel dims
            (coordinates must match exactly): angles [deg] or vectors, plus an optional
            ``normal`` (see the module docstring). Variables may omit pixel dims over
            which the geometry is constant. None for a product normalised to a standard
            geometry (opened with `lumaxlike.open_product`, e.g. M3 L2): inverted
            flat at that geometry; such a product with a geometry is refused unless
            ``correction_undone``.
        params: `lumaxlike.HapkeParams` or `lumaxlike.PhotometricFunction`
            (then ``w`` holds its albedo A, solved in closed form), or a sequence of one
            per band.
        solver: ``"jax"`` (default, as in `lumaxlike.invert`) or ``"numba"``.
        units: what ``refl`` holds: ``"r"`` [1/sr], ``"radf"`` (pi r) or ``"reff"``
            (pi r / cos i, local incidence); required, never guessed.
        correction_undone: see ``geometry``. Bands ``refl``'s attrs mark bad
            (``lumaxlike_bad_bands``, from `lumaxlike.open_product`) get the status
            ``BAD_BAND``.
        spectral_dim: name of the spectral dim when it is neither ``band`` nor
            ``wavelength``.
        refl_sigma: standard uncertainty of ``refl`` in ``units`` (one number); None for
            no uncertainty (``sigma`` is then NaN).
        max_iter: passed to `lumaxlike.invert` (None = its default).
        tol: passed to `lumaxlike.invert` (None = its default).
        num_threads: numba threads per chunk (see the module docstring); None = automatic.

    Returns:
        Dataset with ``w`` [-], ``status`` (int8 `lumaxlike.Status` codes),
        ``iterations`` (int32), ``residual`` [1/sr] and ``sigma`` [-], each with the dims,
        coords and chunks of ``refl``; the Dataset keeps ``refl``'s attrs, and a
        ``spatial_ref`` coordinate or ``crs`` attribute of ``refl`` is kept and referenced
        by every variable. Lazy (dask) when ``refl`` is. The Dataset's attrs also
        record how it was made: the ``lumaxlike_*`` keys (model, Hapke parameters, units,
        solver, the tol and max_iter used, refl_sigma, source files when ``refl`` and
        ``geometry`` were opened from files, this call, the time; see
        `lumaxlike.read_provenance`), and ``history`` gains a line.

    Raises:
        ValueError: bad argument (names it), misaligned geometry.
    """
    _check_front_end(refl, units, refl_sigma)
    standard = geometry is None
    geometry = product_geometry_of(refl, geometry, correction_undone)
    options = SolverOptions(solver, max_iter=max_iter, tol=tol, num_threads=num_threads)
    spec = _spectral_dim(refl, spectral_dim)
    pixel_dims = [dim for dim in refl.dims if dim != spec]
    band_params = per_band_params(params, refl.sizes[spec])
    inputs = _chunked_inputs(refl, _geometry_vectors(geometry, pixel_dims), spec, pixel_dims)
    refl, vectors = inputs.refl, inputs.vectors
    # one JAX chunk shape for every dask chunk (smaller ones are padded): compiles once
    options = dataclasses.replace(
        options, chunk_size=min(inputs.largest, default_chunk_pixels(refl.sizes[spec]))
    )

    dtype = np.result_type(refl.dtype, np.float32)
    outputs = xr.apply_ufunc(
        _invert_chunk,
        refl,
        *vectors,
        input_core_dims=[[spec], [_VECTOR_DIM], [_VECTOR_DIM], [_VECTOR_DIM]],
        output_core_dims=[[spec]] * len(RESULT_FIELDS),
        dask="parallelized",
        output_dtypes=[_OUTPUT_DTYPES.get(field, dtype) for field in RESULT_FIELDS],
        kwargs={"units": units, "params": band_params, "options": options, "sigma": refl_sigma},
        keep_attrs="override",  # keeps coordinate attrs (spatial_ref); variable attrs set below
    )
    variables = {
        field: _with_map_attrs(output.transpose(*refl.dims), FIELD_ATTRS[field], refl)
        for field, output in zip(RESULT_FIELDS, outputs)
    }
    bad = bad_bands_of(refl)
    if bad is not None:
        marked = xr.DataArray(np.isin(np.arange(refl.sizes[spec]), bad), dims=(spec,))
        status = variables["status"]
        variables["status"] = (
            xr.where(marked, np.int8(Status.BAD_BAND), status)
            .astype(np.int8)
            .transpose(*status.dims)
            .assign_attrs(status.attrs)
        )
    provenance = make_provenance(
        params=band_params,
        units=units,
        solver=solver,
        tol=tol,
        max_iter=max_iter,
        refl_sigma=refl_sigma,
        dtype=dtype,
        cube=refl.encoding.get("source"),
        geometry=geometry.encoding.get("source") if isinstance(geometry, xr.Dataset) else None,
        product=product_record_of(refl, standard),
        command=python_call(
            "invert_dataarray",
            refl,
            geometry,
            params,
            solver,
            units=units,
            spectral_dim=spectral_dim,
            refl_sigma=refl_sigma,
            max_iter=max_iter,
            tol=tol,
            num_threads=num_threads,
        ),
    )
    return xr.Dataset(variables, attrs=_result_attrs(refl.attrs, provenance))


def _result_attrs(attrs: Mapping, provenance) -> dict:
    """``refl``'s attrs plus the provenance keys, with a line appended to ``history``."""
    line = f"{provenance.created} {provenance.command}"
    history = attrs.get("history")
    return {**attrs, **provenance.attrs(), "history": f"{history}\n{line}" if history else line}


# ---------------------------------------------------------------------------------------
# Photometric normalisation: DataArray.hapke.normalize


def _normalize_chunk(
    refl, to_sun, to_sensor, normal, *maps, names, per_band, units, params, options, sigma, standard
):
    """apply_ufunc kernel: NumPy blocks -> normalised reflectance, status, sigma."""
    from ._files.normalize import NORMALIZATION_FIELDS, normalize_block

    pixels = refl.shape[:-1]
    r, to_sun, to_sensor, normal, refl_sigma = _chunk_geometry(
        refl, to_sun, to_sensor, normal, units, sigma
    )
    param_maps = {
        name: np.broadcast_to(values, refl.shape if band else pixels)
        for name, values, band in zip(names, maps, per_band)
    }
    fields = normalize_block(
        r,
        to_sun,
        to_sensor,
        normal,
        params,
        _chunk_options(options),
        refl_sigma=refl_sigma,
        standard=standard,
        units=units,
        param_maps=param_maps or None,
    )
    return tuple(fields[field] for field in NORMALIZATION_FIELDS)


def normalize_dataarray(
    refl: xr.DataArray,
    geometry,
    params,
    solver: str = "jax",
    *,
    units: str,
    standard=None,
    param_maps: Mapping | None = None,
    spectral_dim: str | None = None,
    refl_sigma: float | None = None,
    max_iter: int | None = None,
    tol: float | None = None,
    num_threads: int | None = None,
) -> xr.Dataset:
    """Photometric normalisation of a reflectance DataArray to a standard geometry, chunk by chunk.

    As `invert_dataarray` (same ``refl``, ``geometry``, ``params``, ``solver``,
    ``units``, ``spectral_dim``, ``refl_sigma``, ``max_iter``, ``tol``, ``num_threads``),
    with `lumaxlike.normalize` per chunk.

    Args:
        standard: (incidence, emission, phase) of the standard geometry [rad]; None for
            (30, 0, 30) deg.
        param_maps: optional ``{HapkeParams field: DataArray}`` of per-pixel parameters
            on ``refl``'s pixel dims (and optionally its spectral dim), in the field's
            units (roughness [rad]); see `lumaxlike.normalize`.

    Returns:
        Dataset with ``reflectance`` (in ``units``, at the standard geometry; REFF with
        the standard incidence), ``status`` (int8, the inversion's) and ``sigma`` (in
        ``units``; NaN without ``refl_sigma``), with ``refl``'s dims, coords and chunks
        (lazy when ``refl`` is dask-backed) and the provenance attributes of
        `invert_dataarray` plus the standard geometry.
    """
    from ._files.normalize import NORMALIZATION_FIELDS, normalization_attrs
    from ._normalize.standard import DEFAULT_STANDARD, standard_angles

    _check_front_end(refl, units, refl_sigma)
    geometry = product_geometry_of(refl, geometry)  # a normalised product: flat at its geometry
    standard = standard_angles(DEFAULT_STANDARD if standard is None else standard)
    options = SolverOptions(solver, max_iter=max_iter, tol=tol, num_threads=num_threads)
    spec = _spectral_dim(refl, spectral_dim)
    pixel_dims = [dim for dim in refl.dims if dim != spec]
    band_params = per_band_params(params, refl.sizes[spec])
    to_sun, to_sensor, normal = _geometry_vectors(geometry, pixel_dims)
    if param_maps is not None and not isinstance(param_maps, Mapping):
        raise ValueError(
            f"param_maps must be a mapping of HapkeParams fields to DataArrays, got "
            f"{type(param_maps).__name__}"
        )
    maps = dict(param_maps or {})
    for name, values in maps.items():
        if not isinstance(values, xr.DataArray) or not set(values.dims) <= set(refl.dims):
            raise ValueError(f"param_maps[{name!r}] must be a DataArray on refl's dims {refl.dims}")
    inputs = _chunked_inputs(
        refl,
        (to_sun, to_sensor, normal),
        spec,
        pixel_dims,
        extra=list(maps.values()),
        what="geometry or param_maps",
    )
    refl, vectors, map_arrays = inputs.refl, inputs.vectors, inputs.extra
    options = dataclasses.replace(
        options, chunk_size=min(inputs.largest, default_chunk_pixels(refl.sizes[spec]))
    )
    per_band = [spec in m.dims for m in map_arrays]

    dtype = np.result_type(refl.dtype, np.float32)
    outputs = xr.apply_ufunc(
        _normalize_chunk,
        refl,
        *vectors,
        *map_arrays,
        input_core_dims=[[spec], [_VECTOR_DIM], [_VECTOR_DIM], [_VECTOR_DIM]]
        + [[spec] if b else [] for b in per_band],
        output_core_dims=[[spec]] * len(NORMALIZATION_FIELDS),
        dask="parallelized",
        output_dtypes=[_OUTPUT_DTYPES.get(field, dtype) for field in NORMALIZATION_FIELDS],
        kwargs={
            "names": list(maps),
            "per_band": per_band,
            "units": units,
            "params": band_params,
            "options": options,
            "sigma": refl_sigma,
            "standard": standard,
        },
        keep_attrs="override",
    )
    attrs_of = normalization_attrs(units)
    variables = {
        field: _with_map_attrs(output.transpose(*refl.dims), attrs_of[field], refl)
        for field, output in zip(NORMALIZATION_FIELDS, outputs)
    }
    provenance = make_provenance(
        params=band_params,
        units=units,
        solver=solver,
        tol=tol,
        max_iter=max_iter,
        refl_sigma=refl_sigma,
        dtype=dtype,
        cube=refl.encoding.get("source"),
        geometry=geometry.encoding.get("source") if isinstance(geometry, xr.Dataset) else None,
        standard=standard,
        param_maps={name: None for name in maps} or None,
        command=python_call(
            "normalize_dataarray",
            refl,
            geometry,
            params,
            solver,
            units=units,
            standard=standard,
            param_maps=param_maps,
            spectral_dim=spectral_dim,
            refl_sigma=refl_sigma,
            max_iter=max_iter,
            tol=tol,
            num_threads=num_threads,
        ),
    )
    return xr.Dataset(variables, attrs=_result_attrs(refl.attrs, provenance))


# ---------------------------------------------------------------- DataArray.hapke.fit


def _fit_chunk(refl, to_sun, to_sensor, normal, *, units, params, free, fit_options, num_threads):
    """apply_ufunc kernel: refl (..., bands, observations), vectors (..., observations, 3)
    -> the fit's maps (..., bands), in `_fit_fields(free)` order (`_joint_fields` for a
    joint fit: shared parameters and per-pixel problems' fields without the band axis)."""
    from ._inverse.fit import fit
    from ._run.tasks import numba_threads

    pixels, n_obs = refl.shape[:-2], refl.shape[-1]
    # units are per observation (reff: its own cos i): convert with observations before bands
    r, to_sun, to_sensor, normal, _ = _chunk_geometry(
        np.moveaxis(refl, -1, -2), to_sun, to_sensor, normal, units, None, pixels + (n_obs,)
    )
    r = np.moveaxis(r, -1, -2)
    if num_threads is None and fit_options["solver"] == "numba" and _in_worker_thread():
        num_threads = 1
    context = (
        numba_threads(num_threads) if fit_options["solver"] == "numba" else contextlib.nullcontext()
    )
    with context:
        result = fit(r, to_sun, to_sensor, normal, params, free=free, **fit_options)
    maps = {name: result[name] for name in free}
    maps.update({f"sigma_{name}": result.sigma(name) for name in free})
    maps.update(
        status=result.status, iterations=result.iterations, observations=result.observations
    )
    if hasattr(result, "dfs"):  # a JointFitResult
        maps.update({f"dfs_{name}": result.dfs[name] for name in free}, cost=result.cost)
        fields = _joint_fields(free, fit_options.get("shared", ()))
        return tuple(maps[field] for field, _ in fields)
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
    import json

    from ._inverse.fit import check_free
    from ._inverse.observation_masks import check_observation_limits
    from ._params import HapkeParams

    if not isinstance(refl, xr.DataArray):
        raise ValueError(f"refl must be an xarray.DataArray, got {type(refl).__name__}")
    if not isinstance(params, HapkeParams):
        raise ValueError(f"params must be a lumaxlike.HapkeParams, got {type(params).__name__}")
    _check_front_end(refl, units, None)
    refuse_normalised_dataarray(refl, "fit_dataarray")
    SolverOptions(solver)  # checks the name
    free = check_free(free, params)
    spec = _spectral_dim(refl, spectral_dim)
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
    inputs = _chunked_inputs(
        refl,
        _geometry_vectors(geometry, [*pixel_dims, observation_dim]),
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
    joint = bool(shared) or bool(prior)
    if joint:
        from ._inverse.joint import check_shared

        shared = check_shared(shared, free)
        for name, pair in (prior or {}).items():
            if np.ndim(pair[0]) or np.ndim(pair[1]):
                raise ValueError(
                    f"prior[{name!r}]: fit_dataarray takes scalar priors (mean, sigma)"
                )
        if prior and refl_sigma is None:
            raise ValueError("prior needs refl_sigma (the observations' noise weighs the prior)")
        fit_options.update(shared=shared, prior=prior)
        if min_observations is None:  # joint fits' default: per-band parameters + 1
            fit_options["min_observations"] = len([n for n in free if n not in shared]) + 1
        with_band = _joint_fields(free, shared)
        fields = tuple(field for field, _ in with_band)
        core_dims = [[spec] if band else [] for _, band in with_band]
    else:
        fields = _fit_fields(free)
        core_dims = [[spec]] * len(fields)
    integer = {"status": np.int8, "iterations": np.int32, "observations": np.int32}
    outputs = xr.apply_ufunc(
        _fit_chunk,
        refl,
        *vectors,
        input_core_dims=[[spec, observation_dim]] + [[observation_dim, _VECTOR_DIM]] * 3,
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
    attrs = _result_attrs(refl.attrs, provenance)
    attrs["lumaxlike_fit_free"] = json.dumps(list(free))
    if joint:
        attrs["lumaxlike_fit_shared"] = json.dumps(list(shared))
        attrs["lumaxlike_fit_prior"] = json.dumps(
            {name: [float(v) for v in pair] for name, pair in (prior or {}).items()}
        )
    return xr.Dataset(variables, attrs=attrs)


# ------------------------------------------------------------------------ unmixing


def _matched_wavelengths_um(refl: xr.DataArray, spec: str, endmembers) -> tuple | None:
    """refl's band centres [um] from its ``wavelength`` coordinate along `spec` (None
    without one), checked against the endmembers' (`band_order`: matched in any order, or
    refused). Its ``units`` attr (nm or um) is read; without one, um and nm are tried."""
    from ._files.wavelengths import WAVELENGTH_UNITS_UM
    from ._unmix.band_matching import band_order

    coord = refl.coords.get("wavelength")
    if coord is None or coord.dims != (spec,):
        return None
    values = np.asarray(coord.values, np.float64)
    unit = str(coord.attrs.get("units", "")).lower()
    scale = next((factor for key, factor in WAVELENGTH_UNITS_UM if key in unit), None)
    what = "refl's wavelength coordinate" + (f" (units {unit!r})" if unit else "")
    refused = None
    for candidate in (scale,) if scale is not None else (1.0, 1e-3):  # no units attr: um, or nm
        try:
            band_order(values * candidate, endmembers, what)
            return tuple(values * candidate)
        except ValueError as error:
            refused = refused or error
    raise refused


def _unmix_chunk(refl, to_sun, to_sensor, normal, *, units, endmembers, params, options, sigma):
    """apply_ufunc kernel: NumPy blocks (..., bands) and (..., 3) -> fractions, sigma
    (..., endmembers), status, iterations, residual (...)."""
    from ._files.unmix import unmix_block

    r, to_sun, to_sensor, normal, refl_sigma = _chunk_geometry(
        np.asarray(refl, np.float64), to_sun, to_sensor, normal, units, sigma
    )
    fields = unmix_block(
        r,
        to_sun,
        to_sensor,
        normal,
        params,
        _chunk_options(options),
        refl_sigma=refl_sigma,
        endmembers=endmembers,
    )
    return (
        fields["fractions"],
        fields["sigma"],
        fields["status"][..., 0],
        fields["iterations"][..., 0],
        fields["residual"][..., 0],
        fields["remainder"][..., 0],
    )


def unmix_dataarray(
    refl: xr.DataArray,
    geometry,
    endmembers,
    params,
    solver: str = "jax",
    *,
    units: str,
    route: str = "one_step",
    sum_to_one: bool = True,
    spectral_dim: str | None = None,
    refl_sigma: float | None = None,
    max_iter: int | None = None,
    tol: float | None = None,
    num_threads: int | None = None,
) -> xr.Dataset:
    """Mass fractions of an intimate mixture per pixel (`lumaxlike.unmix`), chunk by chunk.

    Args:
        refl: as for `invert_dataarray` (so are ``geometry``, ``units``,
            ``spectral_dim`` and ``num_threads``).
        endmembers: `lumaxlike.Endmembers` on ``refl``'s bands; where both give band
            centres (``Endmembers.wavelengths``, refl's ``wavelength`` coordinate along
            its spectral dim, ``units`` "nm" or "um"), bands are matched by wavelength in
            any order, and other centres are refused.
        params: one `lumaxlike.HapkeParams` (the mixture's).
        solver: as for `lumaxlike.unmix` (so are ``route``, ``sum_to_one``, ``max_iter``
            and ``tol``).
        refl_sigma: standard uncertainty of ``refl`` in ``units`` ("r" or "radf"), one
            number: weights the bands and scales the covariance (see `lumaxlike.unmix`).

    Returns:
        Dataset with ``fractions`` (mass fractions [-]) and ``sigma`` (their 1-sigma
        uncertainty [-]), each with ``refl``'s pixel dims and a last dim ``endmember``
        (coordinate: the endmembers' names), and ``status`` (int8 `lumaxlike.Status`),
        ``iterations`` (int32) and ``residual`` (the route's residual norm), each with
        ``refl``'s pixel dims; lazy (dask) when ``refl`` is, chunked as its pixels;
        with ``sum_to_one`` false also ``remainder`` (the cross-section fraction of the
        unmodelled dark remainder, `lumaxlike.UnmixResult.remainder`).
        The attrs record how it was made, as for `invert_dataarray`.

    Raises:
        ValueError: bad argument (names it), misaligned geometry.
    """
    from ._files.unmix import UnmixOptions, unmix_layout, unmix_record
    from ._params import HapkeParams
    from ._unmix.endmembers import Endmembers
    from ._unmix.unmix import DEFAULT_TOLERANCE, ROUTES
    from ._unmix.unmix import default_chunk_pixels as unmix_chunk_pixels

    _check_front_end(refl, units, refl_sigma)
    geometry = product_geometry_of(refl, geometry)  # a normalised product: flat at its geometry
    if not isinstance(endmembers, Endmembers):
        raise ValueError(
            f"endmembers must be a lumaxlike.Endmembers, got {type(endmembers).__name__}"
        )
    if not isinstance(params, HapkeParams):
        raise ValueError(f"params must be one lumaxlike.HapkeParams, got {type(params).__name__}")
    if route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}, got {route!r}")
    if refl_sigma is not None and units == "reff":
        raise ValueError(
            "refl_sigma with units 'reff' is not supported by unmix (its uncertainty in r varies "
            "with cos i per pixel); give refl as r or radf"
        )
    spec = _spectral_dim(refl, spectral_dim)
    if refl.sizes[spec] != endmembers.n_bands:
        raise ValueError(
            f"refl has {refl.sizes[spec]} bands along {spec!r}, the endmembers {endmembers.n_bands}"
        )
    wavelengths = _matched_wavelengths_um(refl, spec, endmembers)
    pixel_dims = [dim for dim in refl.dims if dim != spec]
    inputs = _chunked_inputs(refl, _geometry_vectors(geometry, pixel_dims), spec, pixel_dims)
    refl, vectors = inputs.refl, inputs.vectors
    chunk = min(inputs.largest, unmix_chunk_pixels(refl.sizes[spec], endmembers.n_endmembers))
    options = UnmixOptions(
        solver, route, bool(sum_to_one), max_iter, tol, chunk, num_threads, wavelengths=wavelengths
    )

    n_end = endmembers.n_endmembers
    outputs = xr.apply_ufunc(
        _unmix_chunk,
        refl,
        *vectors,
        input_core_dims=[[spec], [_VECTOR_DIM], [_VECTOR_DIM], [_VECTOR_DIM]],
        output_core_dims=[["endmember"], ["endmember"], [], [], [], []],
        dask="parallelized",
        output_dtypes=[np.float64, np.float64, np.int8, np.int32, np.float64, np.float64],
        dask_gufunc_kwargs={"output_sizes": {"endmember": n_end}},
        kwargs={
            "units": units,
            "endmembers": endmembers,
            "params": params,
            "options": options,
            "sigma": refl_sigma,
        },
        keep_attrs="override",
    )
    layout = unmix_layout(endmembers.names)
    names = ("fractions", "sigma", "status", "iterations", "residual", "remainder")
    variables = {
        field: _with_map_attrs(output, layout.attrs[field], refl)
        for field, output in zip(names, outputs)
        if field != "remainder" or not sum_to_one
    }
    provenance = make_provenance(
        params=[params] * refl.sizes[spec], units=units, solver=solver, tol=DEFAULT_TOLERANCE if tol is None else tol,
        max_iter=max_iter, refl_sigma=refl_sigma, dtype=np.float64, cube=refl.encoding.get("source"),
        geometry=geometry.encoding.get("source") if isinstance(geometry, xr.Dataset) else None,
        command=python_call("unmix_dataarray", refl, geometry, endmembers.names, params, solver, units=units,
                            route=route, sum_to_one=sum_to_one, spectral_dim=spectral_dim, refl_sigma=refl_sigma,
                            max_iter=max_iter, tol=tol, num_threads=num_threads),
    )  # fmt: skip
    record = unmix_record(endmembers, route, sum_to_one)
    provenance = dataclasses.replace(provenance, unmix_settings=record)
    dataset = xr.Dataset(variables, attrs=_result_attrs(refl.attrs, provenance))
    return dataset.assign_coords(endmember=("endmember", list(endmembers.names)))
