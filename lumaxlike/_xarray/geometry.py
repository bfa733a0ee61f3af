"""A DataArray front end's geometry: a Dataset (or dict of DataArrays) of angles or
vectors turned into the (to_sun, to_sensor, normal) DataArrays, each with a trailing
vector dim of size 3 (see :mod:`lumaxlike._xarray`)."""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import xarray as xr

from .._geometry import direction_from_zenith_azimuth, geometry_from_angles
from .._io.read.geometry_rasters import ANGLE_ROLES

__all__ = ["TRIPLET_NAMES", "VECTOR_DIM", "VECTOR_NAMES", "geometry_vectors"]


VECTOR_NAMES = ("to_sun", "to_sensor", "normal")
"""Geometry variables given as direction vectors (trailing dim of size 3)."""

TRIPLET_NAMES = ("incidence", "emission", "phase")
"""Geometry variables given as an angle triplet relative to the surface."""

VECTOR_DIM = "lumaxlike_vector"


def _angle_radians(geometry: Mapping, role: str) -> xr.DataArray:
    angle = geometry[role]
    if not isinstance(angle, xr.DataArray):
        raise ValueError(
            f"geometry[{role!r}] must be an xarray.DataArray, got {type(angle).__name__}"
        )
    units = str(angle.attrs.get("units", "degrees")).lower()
    if units in ("deg", "degree", "degrees", "degrees_east", "degrees_north"):
        # as np.deg2rad(angle) (a ufunc on a DataArray): attrs kept, dask arrays lazy
        return xr.apply_ufunc(np.deg2rad, angle, dask="allowed", keep_attrs=True)
    if units in ("rad", "radian", "radians"):
        return angle
    raise ValueError(f"geometry[{role!r}] has units {units!r}; expected degrees or radians")


def _directions(zenith: xr.DataArray, azimuth: xr.DataArray) -> xr.DataArray:
    return xr.apply_ufunc(
        direction_from_zenith_azimuth,
        zenith,
        azimuth,
        output_core_dims=[[VECTOR_DIM]],
        dask="parallelized",
        output_dtypes=[np.result_type(zenith.dtype, azimuth.dtype, np.float32)],
        dask_gufunc_kwargs={"output_sizes": {VECTOR_DIM: 3}},
    )


def _triplet_vectors(incidence, emission, phase):
    """apply_ufunc kernel: (i, e, g) [rad] -> to_sun, to_sensor, normal, each (..., 3)."""
    return geometry_from_angles(incidence, emission, phase=phase)


def _triplet_directions(rad: dict) -> tuple:
    dtype = np.result_type(*(rad[r].dtype for r in TRIPLET_NAMES), np.float32)
    return xr.apply_ufunc(
        _triplet_vectors,
        *(rad[r] for r in TRIPLET_NAMES),
        output_core_dims=[[VECTOR_DIM]] * 3,
        dask="parallelized",
        output_dtypes=[dtype] * 3,
        dask_gufunc_kwargs={"output_sizes": {VECTOR_DIM: 3}},
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
    return vector.rename({extra[0]: VECTOR_DIM})


def geometry_vectors(geometry, pixel_dims) -> tuple[xr.DataArray, xr.DataArray, xr.DataArray]:
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
        normal = xr.DataArray(np.array([0.0, 0.0, 1.0], to_sun.dtype), dims=[VECTOR_DIM])
    return to_sun, to_sensor, normal
