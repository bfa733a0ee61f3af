"""A DataArray's band centres [um], read one way by every xarray front end that needs
them (`remove_thermal_dataarray`, `spectral_parameters_dataarray`, `unmix_dataarray`).

The centres are the ``wavelength`` coordinate along the spectral dim, else the spectral
dim's own coordinate where it holds non-integer numbers (rioxarray's ``band`` coordinate
holds the band numbers 1..N, never wavelengths). Its ``units`` attr says nm or um
(`micrometres_per_unit`; any other unit is refused, and a stated unit its values cannot
be in, as `check_wavelength_unit` finds it); without one, values all above
`MAX_WAVELENGTH` (100 um, beyond any reflectance or thermal spectrometer) are read as
nanometres and others as micrometres, the bound at which the Python functions refuse
nanometres given by mistake.
"""

from __future__ import annotations

import numpy as np
import xarray as xr

from .._io.read.spectral_metadata import check_wavelength_unit, micrometres_per_unit
from .._validation import MAX_WAVELENGTH, wavelengths_um

__all__ = ["band_centres_um", "coordinate_centres_um"]


def _centres_coordinate(data: xr.DataArray, spec: str) -> xr.DataArray | None:
    """`data`'s coordinate of band centres along `spec` (the module docstring), or None."""
    coordinate = data.coords.get("wavelength")
    if coordinate is not None and coordinate.dims == (spec,):
        return coordinate
    coordinate = data.coords.get(spec)
    if coordinate is None or not np.issubdtype(coordinate.dtype, np.floating):
        return None
    return coordinate


def coordinate_centres_um(data: xr.DataArray, spec: str, what: str) -> np.ndarray | None:
    """The band centres [um] of `data`'s coordinate along `spec` (the module docstring),
    checked as micrometres (`_validation.wavelengths_um`); None where it has none.

    Raises:
        ValueError: naming `what`'s coordinate: a ``units`` attr other than nm or um,
            centres that are not finite, not positive or not micrometres.
    """
    coordinate = _centres_coordinate(data, spec)
    if coordinate is None:
        return None
    values = np.asarray(coordinate.values, dtype=np.float64)
    unit = str(coordinate.attrs.get("units", "")).strip().lower()
    name = f"{what}'s {coordinate.name!r} coordinate"
    if unit:
        scale = micrometres_per_unit(unit)
        if scale is None:
            raise ValueError(f"{name} has units {unit!r}: give nm or um (attrs['units'])")
        check_wavelength_unit(values, unit, name, remedy="correct its attrs['units']")
    else:
        scale = 1e-3 if values.size and np.all(values > MAX_WAVELENGTH) else 1.0
    return wavelengths_um(name, values * scale)


def band_centres_um(data: xr.DataArray, spec: str, wavelengths, what: str) -> np.ndarray:
    """The band centres [um]: ``wavelengths`` [um] (one per band along `spec`) when
    given, else `coordinate_centres_um`'s.

    Raises:
        ValueError: naming ``wavelengths`` (not one value per band, not micrometres), or
            `what` where it has no coordinate of band centres.
    """
    if wavelengths is not None:
        values = wavelengths_um("wavelengths", wavelengths)
        if values.shape != (data.sizes[spec],):
            raise ValueError(
                f"wavelengths must hold one centre [um] per band ({data.sizes[spec]}), "
                f"got shape {values.shape}"
            )
        return values
    centres = coordinate_centres_um(data, spec, what)
    if centres is None:
        raise ValueError(
            f"wavelengths are needed: {what} has no 'wavelength' coordinate along {spec!r} "
            "(give wavelengths=[um])"
        )
    return centres
