"""A cube's band centres in micrometres, as the commands that match bands by wavelength
(`unmix_file`, the stacks of `fit_file`) take them: the file's own, or given."""

from __future__ import annotations

import numpy as np

from .._io.read.raster import CubeInfo
from .._io.read.spectral_metadata import micrometres_per_unit

__all__ = ["cube_wavelengths_um", "known_wavelengths_um"]


def cube_wavelengths_um(info: CubeInfo, wavelengths=None) -> np.ndarray:
    """The cube's band centres [um]: ``wavelengths`` [um] when given, else the file's.

    Raises:
        ValueError naming the cube when it gives no wavelengths or no unit for them, or
        ``wavelengths`` when it does not hold one value per band.
    """
    if wavelengths is not None:
        values = np.asarray(wavelengths, np.float64)
        if values.shape != (info.bands,):
            raise ValueError(
                f"wavelengths gives {values.size} values but the cube {info.path} has {info.bands} bands"
            )
        return values
    if info.wavelengths is None:
        raise ValueError(
            f"the cube {info.path} gives no band wavelengths; give them (--wavelengths, in um)"
        )
    scale = micrometres_per_unit(info.wavelength_units)
    if scale is None:
        raise ValueError(
            f"the cube {info.path} gives its wavelengths without a known unit "
            f"({info.wavelength_units!r}); give them (--wavelengths, in um)"
        )
    return np.asarray(info.wavelengths, np.float64) * scale


def known_wavelengths_um(info: CubeInfo) -> np.ndarray | None:
    """The cube's band centres [um] where the file gives them with a known unit, else None."""
    try:
        return cube_wavelengths_um(info)
    except ValueError:
        return None
