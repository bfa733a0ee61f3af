"""The layout of lumaxlike's result maps: which maps an output has, their attributes, and
the grid they share (coordinates, CRS), for every output format.

:class:`FieldLayout` says which maps a kind of output holds (:data:`INVERSION_LAYOUT` for
an inversion); :func:`result_template` is their xarray Dataset on a cube's grid (netCDF,
zarr and the xarray front ends).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from ..._status import (
    RESULT_FIELDS,  # re-exported: the maps of an inversion
    Status,
)
from ..read.raster import CubeInfo

__all__ = [
    "FIELD_ATTRS",
    "INVERSION_LAYOUT",
    "RESULT_FIELDS",
    "FieldLayout",
    "band_descriptions",
    "coordinate_attrs",
    "fill_value",
    "result_template",
    "spatial_ref_attrs",
    "wavelength_text",
]


FIELD_ATTRS = {
    "w": {"long_name": "single-scattering albedo w", "units": "1"},
    "status": {
        "long_name": "inversion status (lumaxlike.Status)",
        **Status.flag_attrs(),
    },
    "iterations": {"long_name": "solver iterations", "units": "1"},
    "residual": {
        "long_name": "model minus observed bidirectional reflectance r at the solution",
        "units": "sr-1",
    },
    "sigma": {"long_name": "standard uncertainty of w", "units": "1"},
}
"""CF-style attributes of each result variable (also used as raster tags)."""


def wavelength_text(value) -> str:
    """A wavelength as the shortest text that reads back as the same float (``"500.5"``, ``"1530"``)."""
    return np.format_float_positional(float(value), trim="-")


def band_descriptions(like: CubeInfo) -> list[str | None]:
    """The cube's band names; when it has none, its wavelengths (e.g. ``"500.5 Nanometers"``)."""
    names = list(like.band_names)
    if like.wavelengths is not None and not any(names):
        units = f" {like.wavelength_units}" if like.wavelength_units else ""
        return [f"{wavelength_text(wavelength)}{units}" for wavelength in like.wavelengths]
    return names


#: CF (UDUNITS) spelling of common CRS linear units, as PROJ names them.
_CF_LINEAR_UNITS = {
    "metre": "m",
    "meter": "m",
    "kilometre": "km",
    "foot": "ft",
    "US survey foot": "US_survey_foot",
}


def coordinate_attrs(crs) -> tuple[dict, dict]:
    """CF attributes of the ``x`` and ``y`` coordinates for a CRS (rasterio ``CRS`` or None).

    Projected: ``standard_name`` ``projection_x_coordinate`` / ``projection_y_coordinate``
    and ``units`` from the CRS's linear unit (``"m"`` for metres); geographic:
    ``longitude`` / ``latitude`` in ``degrees_east`` / ``degrees_north``; no CRS: only a
    ``long_name`` (the unit is unknown).
    """
    if crs is not None and crs.is_geographic:
        return (
            {
                "standard_name": "longitude",
                "long_name": "longitude",
                "units": "degrees_east",
            },
            {
                "standard_name": "latitude",
                "long_name": "latitude",
                "units": "degrees_north",
            },
        )
    x = {"long_name": "x coordinate of pixel centre"}
    y = {"long_name": "y coordinate of pixel centre"}
    if crs is not None and crs.is_projected:
        unit = crs.linear_units
        unit = _CF_LINEAR_UNITS.get(unit, unit)
        x.update(standard_name="projection_x_coordinate", units=unit)
        y.update(standard_name="projection_y_coordinate", units=unit)
    return x, y


def map_coordinates(like: CubeInfo) -> dict:
    """``x`` and ``y`` pixel-centre coordinates of a north-up grid (none for rotated grids)."""
    t = like.grid.transform
    if t.b != 0 or t.d != 0:
        return {}
    cols = np.arange(like.grid.width) + 0.5
    rows = np.arange(like.grid.height) + 0.5
    x_attrs, y_attrs = coordinate_attrs(like.grid.crs)
    return {
        "x": ("x", t.c + t.a * cols, x_attrs),
        "y": ("y", t.f + t.e * rows, y_attrs),
    }


def spatial_ref_attrs(crs, transform) -> dict:
    """Attributes of a CF ``spatial_ref`` grid-mapping variable (CRS WKT, GDAL GeoTransform)."""
    attrs = {"GeoTransform": " ".join(repr(float(v)) for v in transform.to_gdal())}
    if crs is not None:
        wkt = crs.to_wkt()
        attrs.update(crs_wkt=wkt, spatial_ref=wkt)
    return attrs


def result_template(
    like: CubeInfo,
    fields=RESULT_FIELDS,
    data: Mapping | None = None,
    provenance=None,
    field_attrs: Mapping | None = None,
    layout: FieldLayout | None = None,
):
    """An ``xarray.Dataset`` with lumaxlike's result layout on the grid of a cube.

    Args:
        like: the cube's :class:`~lumaxlike._io.read.raster.CubeInfo`.
        fields: result variables to include.
        data: ``{field: array}`` of shape ``(band, y, x)`` (NumPy or dask); variables
            missing from it are left out.
        provenance: :class:`lumaxlike.Provenance` of the run, written as CF global
            attributes plus the ``lumaxlike_*`` keys; None writes only ``source`` (the cube).
        field_attrs: ``{field: attributes}`` of fields beyond :data:`FIELD_ATTRS` (or
            replacing them).
        layout: the maps' :class:`FieldLayout` when some have their own bands (its
            ``dimensions``: a coordinate of band names per such dimension, and the
            variables' dimensions); None: every field has the cube's bands.

    Returns:
        Dataset with coords ``band`` (1-based), ``wavelength`` (when known), ``x``/``y``
        (with CF units) and ``spatial_ref``, and one variable per field present in ``data``.
    """
    import xarray as xr

    coords: dict[str, Any] = {"band": ("band", np.arange(1, like.bands + 1))}
    dimensions = {} if layout is None else layout.dimensions
    band_names = {} if layout is None else layout.band_names
    for field, dimension in dimensions.items():
        if dimension is not None:
            coords[dimension] = (dimension, np.asarray(band_names[field], dtype=str))
    if like.wavelengths is not None:
        attrs = {"units": like.wavelength_units} if like.wavelength_units else {}
        coords["wavelength"] = xr.Variable("band", np.asarray(like.wavelengths), attrs)
    coords.update(map_coordinates(like))
    coords["spatial_ref"] = xr.Variable(
        (), np.int32(0), spatial_ref_attrs(like.grid.crs, like.grid.transform)
    )
    variables = {}
    all_attrs = {**FIELD_ATTRS, **(field_attrs or {})}
    for field in fields:
        if data is not None and field in data:
            attrs = dict(all_attrs[field], grid_mapping="spatial_ref")
            dims = layout.dims(field) if layout is not None else ("band", "y", "x")
            variables[field] = xr.Variable(dims, data[field], attrs)
    attrs = {"source": str(like.path)} if provenance is None else provenance.cf_attrs()
    return xr.Dataset(variables, coords=coords, attrs=attrs)


def fill_value(dtype, nodata: float):
    """netCDF/zarr ``_FillValue`` of a result variable: ``nodata`` for floats, none for integers."""
    return np.array(nodata, dtype) if np.dtype(dtype).kind == "f" else None


@dataclasses.dataclass(frozen=True)
class FieldLayout:
    """Which maps a kind of output has, for :class:`ResultWriter`: `INVERSION_LAYOUT`
    (w, status, iterations, residual, sigma) unless given (normalised reflectance,
    `lumaxlike fit`'s parameter maps, `lumaxlike unmix`'s fractions).

    Attributes:
        main: the field written at the output path itself (the others at ``OUT_<field>``).
        attrs: ``{field: CF-style attributes}`` (``long_name``, ``units``, ...), every
            field that may be written, in order (the stale files of those not written are
            removed on overwrite).
        band_names: ``{field: band names}`` for fields whose bands are not the cube's
            (e.g. one per endmember, or ``("status",)`` for a per-pixel map); their maps
            carry no wavelengths.
        integer: ``{field: NumPy integer type}`` (status: int8, uint8 in ENVI); the
            others have the cube's floating type.
        dimensions: for netCDF and zarr, ``{field: dimension}`` of each field in
            ``band_names``: the name of the dimension of its bands (a coordinate of the
            band names; fields with the same bands share it), or None for a per-pixel map
            (a ``(y, x)`` variable). Without it such maps are written as GeoTIFF or ENVI
            only.
    """

    main: str
    attrs: Mapping
    band_names: Mapping
    integer: Mapping
    dimensions: Mapping = dataclasses.field(default_factory=dict)

    def dims(self, field: str) -> tuple[str, ...]:
        """The dimensions of ``field``'s variable in netCDF / zarr."""
        if field not in self.band_names:
            return ("band", "y", "x")
        dimension = self.dimensions[field]
        return ("y", "x") if dimension is None else (dimension, "y", "x")

    def like(self, field: str, cube: CubeInfo) -> CubeInfo:
        """The cube's description with the bands of ``field``'s map."""
        if field not in self.band_names:
            return cube
        names = tuple(self.band_names[field])
        return dataclasses.replace(
            cube,
            bands=len(names),
            band_names=names,
            wavelengths=None,
            wavelength_units=None,
        )

    def dtypes(self, float_dtype, kind: str) -> dict[str, np.dtype]:
        types = {field: np.dtype(self.integer.get(field, float_dtype)) for field in self.attrs}
        if kind == "ENVI" and "status" in types:
            types["status"] = np.dtype(np.uint8)  # ENVI has no signed byte
        return types


#: The maps of an inversion (`lumaxlike invert`): w at the output path, the others beside it.
INVERSION_LAYOUT = FieldLayout(
    main="w",
    attrs={field: FIELD_ATTRS[field] for field in RESULT_FIELDS},
    band_names={},
    integer={"status": np.int8, "iterations": np.int32},
)
