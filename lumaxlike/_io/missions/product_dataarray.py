"""Mission products as xarray DataArrays: `open_product` and what the xarray front
ends make of its attributes.

`open_product` reads a cube file through `ProductCube` (the same checks,
conversions and records as `lumaxlike.invert_file`) into a DataArray whose attrs
carry what the product is: ``lumaxlike_input_units`` (what the values are now: ``"radf"``
for converted radiance), ``lumaxlike_product`` (the record, JSON) and, for a product
normalised to a standard geometry, ``lumaxlike_standard_geometry_deg``.
`lumaxlike.invert_dataarray` then inverts it flat at that geometry when given no
geometry, refuses an observed one (unless ``correction_undone``), and gives bad bands the
status ``BAD_BAND``.
"""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ..._provenance import PREFIX
from .product_cube import ProductCube, product_options
from .products import describe_geometry

__all__ = ["bad_bands_of", "open_product", "product_geometry_of"]

STANDARD_KEY = PREFIX + "standard_geometry_deg"
PRODUCT_KEY = PREFIX + "product"
UNITS_KEY = PREFIX + "input_units"
BAD_BANDS_KEY = PREFIX + "bad_bands"


def open_product(
    path,
    units,
    *,
    solar_spectrum=None,
    solar_distance=None,
    wavelengths_from=None,
    thermal_bands="keep",
):
    """Read a cube file (any product `lumaxlike.invert_file` reads) into memory.

    Args:
        path: the cube: GeoTIFF, ENVI, PDS3 label or image, ISIS3 cube.
        units: what the file holds: ``"r"``, ``"radf"``, ``"reff"`` or ``"radiance"``.
        solar_spectrum: as for `lumaxlike.invert_file` (so are ``solar_distance``,
            ``wavelengths_from`` and ``thermal_bands``).

    Returns:
        ``xarray.DataArray`` of dims ``(y, x, band)`` (``band`` numbered from 1; a
        ``wavelength`` coordinate on it when known), float, NaN for invalid values and
        bad bands, in ``attrs["lumaxlike_input_units"]`` (``"radf"`` for converted
        radiance); attrs as in the module docstring; ``encoding["source"]`` the file.

    Raises:
        FileNotFoundError, ValueError: as `lumaxlike.invert_file`'s checks.
    """
    import xarray as xr

    with ProductCube(
        path,
        units,
        **product_options(solar_spectrum, solar_distance, wavelengths_from, thermal_bands),
    ) as cube:
        values = cube.read()
        cube.tell()
        info, kind, record = cube.info, cube.kind, cube.record()
        bad = np.flatnonzero(cube.bad_bands) + 1
        effective = cube.units
    coords: dict[str, Any] = {"band": np.arange(1, info.bands + 1)}
    if info.wavelengths is not None:
        coords["wavelength"] = (
            "band",
            np.asarray(info.wavelengths),
            {"units": info.wavelength_units or "unknown"},
        )
    attrs = {
        UNITS_KEY: effective,
        PRODUCT_KEY: json.dumps(record),
        BAD_BANDS_KEY: json.dumps([int(b) for b in bad]),
    }
    if kind is not None and kind.standard_geometry is not None:
        attrs[STANDARD_KEY] = json.dumps(list(kind.standard_geometry))
        attrs[PREFIX + "standard_geometry_why"] = kind.why
    array = xr.DataArray(values, dims=("y", "x", "band"), coords=coords, attrs=attrs)
    array.encoding["source"] = str(path)
    return array


def product_geometry_of(refl, geometry, correction_undone=False):
    """The geometry to invert ``refl`` with: ``geometry``, or a flat standard geometry.

    Raises:
        ValueError: ``refl`` is a normalised product and ``geometry`` is given (unless
            ``correction_undone``), or ``geometry`` is None for anything else.
    """
    import xarray as xr

    text = refl.attrs.get(STANDARD_KEY)
    standard = None if text is None or correction_undone else json.loads(text)
    if standard is None:
        if geometry is None:
            raise ValueError(
                "geometry is required: refl is not a product normalised to a "
                "standard geometry (see lumaxlike.open_product)"
            )
        return geometry
    if geometry is not None:
        raise ValueError(
            f"refl ({refl.encoding.get('source', 'a DataArray')}) is normalised to "
            f"{describe_geometry(standard)}: {refl.attrs.get(PREFIX + 'standard_geometry_why')}."
            " Leave out geometry to invert it flat there; if you have undone the "
            "normalisation, pass correction_undone=True"
        )
    return {
        role: xr.DataArray(float(angle))
        for role, angle in zip(("incidence", "emission", "phase"), standard)
    }


def bad_bands_of(refl) -> np.ndarray | None:
    """0-based indices of the bands ``refl``'s attrs mark bad, or None."""
    text = refl.attrs.get(BAD_BANDS_KEY)
    if not text:
        return None
    bands = np.asarray(json.loads(text), dtype=np.int64) - 1
    return bands if bands.size else None


def with_bad_band_status(status, refl, spec: str):
    """``status`` (a per-band `lumaxlike.Status` map along ``spec``) with the bands
    ``refl``'s attrs mark bad (`bad_bands_of`) set to ``BAD_BAND``; unchanged when none
    is marked or the map has no ``spec`` dim (a joint fit's per-pixel status)."""
    import xarray as xr

    from ..._status import Status

    bad = bad_bands_of(refl)
    if bad is None or spec not in status.dims:
        return status
    marked = xr.DataArray(np.isin(np.arange(refl.sizes[spec]), bad), dims=(spec,))
    return (
        xr.where(marked, np.int8(Status.BAD_BAND), status)
        .astype(np.int8)
        .transpose(*status.dims)
        .assign_attrs(status.attrs)
    )


def product_record_of(refl, geometry_used_standard: bool) -> dict | None:
    """The ``lumaxlike_product`` record of a DataArray from `open_product`, with the
    geometry choice; None for any other DataArray."""
    text = refl.attrs.get(PRODUCT_KEY)
    if text is None:
        return None
    record = json.loads(text)
    if geometry_used_standard:
        record["geometry"] = {
            "geometry": "standard",
            "surface": "flat",
            "standard_geometry_deg": json.loads(refl.attrs[STANDARD_KEY]),
            "why": refl.attrs.get(PREFIX + "standard_geometry_why"),
        }
    return record


def refuse_normalised_dataarray(refl, command: str) -> None:
    """Refuse a normalised product where observed geometries are needed (a multi-angle fit).

    Raises:
        ValueError: naming the product's standard geometry.
    """
    text = refl.attrs.get(STANDARD_KEY)
    if text is not None:
        raise ValueError(
            f"refl is normalised to {describe_geometry(json.loads(text))}: {command} needs "
            "observations at their observed geometries (for M3, the L1B radiance with its OBS)"
        )
