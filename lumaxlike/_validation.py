"""Checks shared across the package: scalar model parameters (`HapkeParams`,
`PhotometricFunction`) and wavelengths in micrometres (every function that takes band
centres or wavelengths: `spectral_parameters`, `slab_albedo`,
`Endmembers.from_optical_constants`, `remove_thermal`)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["MAX_WAVELENGTH", "WAVELENGTH_RTOL", "finite_scalar", "wavelengths_um"]

MAX_WAVELENGTH = 100.0
"""The largest wavelength [um] a function takes: anything above is read as nanometres
given by mistake (the shortest band of a VNIR instrument, ~300 nm, is 3x above it; the
thermal infrared ends near 50 um). The readers of cube metadata use the same bound
(`_io/read/spectral_metadata.py`)."""

WAVELENGTH_RTOL = 1e-6
"""Relative slack of every comparison of a band's wavelength with a declared one (a
tolerance's edge, a window's ends): band centres carry the rounding of their source
(0.76 - 0.75 = 0.010000000000000009 in float64; float32 centres are off by up to 6e-8 of
their value), so a band exactly at an edge is inside. 1e-6 of 2.5 um is 2.5 pm."""


def finite_scalar(name: str, value) -> float:
    """`value` as a float; ValueError naming `name` unless it is one finite real number."""
    kind = np.asarray(value).dtype.kind if not isinstance(value, (str, bytes)) else "U"
    if kind not in "fiu" or np.ndim(value) != 0:
        raise ValueError(f"{name} must be one real number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return number


def wavelengths_um(name: str, value) -> np.ndarray:
    """`value` as a float64 array of wavelengths [um] (any shape), each finite, > 0 and
    at most `MAX_WAVELENGTH`; ValueError naming `name` otherwise (nanometres suggested
    where a value exceeds the bound). Shapes and order are the caller's to check."""
    raw = np.asarray(value)
    if raw.dtype.kind not in "fiu":
        raise ValueError(f"{name} must be wavelengths [um] (real numbers), got {value!r}")
    array = raw.astype(np.float64, copy=False)
    finite = np.isfinite(array)
    if not np.all(finite):
        raise ValueError(f"{name} must be finite wavelengths [um], got {array[~finite][:3]}")
    if np.any(array <= 0.0):
        raise ValueError(f"{name} must be wavelengths > 0 [um], got {array[array <= 0.0][:3]}")
    largest = float(array.max(initial=0.0))
    if largest > MAX_WAVELENGTH:
        raise ValueError(
            f"{name} must be in micrometres (at most {MAX_WAVELENGTH:g}), the largest is "
            f"{largest:g} (nanometres? divide by 1000)"
        )
    return array
