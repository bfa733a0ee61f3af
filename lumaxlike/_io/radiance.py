"""Radiance to I/F: I/F = pi L d^2 / F(lambda), with a solar spectrum resampled to the bands.

``L`` is the spectral radiance [W m^-2 um^-1 sr^-1] (M3 L1B ``RDN``), ``F`` the solar
spectral irradiance at 1 au [W m^-2 um^-1] averaged over each band, ``d`` the sun's
distance [au] at the time of the observation.

Solar spectra (`load_solar_spectrum`):

- a CSV/text file of two columns, wavelength and irradiance at 1 au [W m^-2 um^-1]
  (comma, semicolon or blank separated; header lines skipped; wavelengths above 100 read
  as nm, others as um);
- the solar-spectrum table delivered with the M3 archive (``*_SOLAR_SPEC.TAB``: wavelength
  [nm] and irradiance [W m^-2 um^-1] columns), which is such a file;
- by default, the extraterrestrial column of ASTM G173-03 as shipped by ``pvlib``
  (``pip install "lumaxlike[solar]"``), 280-4000 nm, W m^-2 nm^-1 converted to
  W m^-2 um^-1.

Resampling: with band widths (FWHM) known, F of a band is the spectrum averaged over a
Gaussian response of that FWHM (trapezoidal rule on the spectrum's own samples, refined
to at least 20 points per FWHM by linear interpolation); without them, or where the
spectrum is sampled more coarsely than a quarter of the FWHM (a table already averaged
over the bands, one row per band), the spectrum interpolated linearly at the band
centre.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "AU_KM",
    "SolarSpectrum",
    "band_irradiance",
    "load_solar_spectrum",
    "sun_distance_au",
]

AU_KM = 149_597_870.7
"""The astronomical unit [km] (IAU 2012 B2)."""

ASTM_G173 = "ASTM G173-03 extraterrestrial spectrum (pvlib.spectrum.get_reference_spectra)"


@dataclass(frozen=True, eq=False)  # holds arrays
class SolarSpectrum:
    """Solar spectral irradiance at 1 au.

    Attributes:
        wavelength_um: increasing wavelengths [um], shape ``(n,)``.
        irradiance: irradiance at those wavelengths [W m^-2 um^-1], shape ``(n,)``.
        source: what it is, for the provenance (a file path or the standard's name).
    """

    wavelength_um: np.ndarray
    irradiance: np.ndarray
    source: str


def load_solar_spectrum(path=None) -> SolarSpectrum:
    """Read a solar spectrum file, or the default ASTM G173-03 extraterrestrial spectrum.

    Args:
        path: a two-column text/CSV file (see the module docstring), or None for the
            default (needs ``pvlib``).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: naming ``path``, when it does not hold two increasing numeric columns
            of positive irradiance; or when ``path`` is None and pvlib is not installed.
    """
    if path is None:
        return _astm_g173()
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"solar spectrum file {path} does not exist")
    rows = []
    for number, line in enumerate(path.read_text(errors="replace").splitlines(), start=1):
        fields = line.replace(",", " ").replace(";", " ").split()
        if not fields:
            continue
        try:
            rows.append((float(fields[0]), float(fields[1])))
        except (ValueError, IndexError):
            if rows:  # a header is allowed, not text among the numbers
                raise ValueError(
                    f"solar spectrum file {path}, line {number}: cannot read "
                    f"two numbers from {line.strip()!r}"
                ) from None
    if len(rows) < 2:
        raise ValueError(
            f"solar spectrum file {path} holds fewer than two (wavelength, irradiance) rows"
        )
    wavelength, irradiance = np.asarray(rows).T
    if np.any(np.diff(wavelength) <= 0):
        raise ValueError(f"solar spectrum file {path}: wavelengths must increase")
    if not np.all(np.isfinite(irradiance)) or np.any(irradiance <= 0):
        raise ValueError(f"solar spectrum file {path}: irradiance must be positive and finite")
    if wavelength.min() > 100:  # nanometres
        wavelength = wavelength * 1e-3
    return SolarSpectrum(wavelength, irradiance, str(path.resolve()))


def _astm_g173() -> SolarSpectrum:
    try:
        from pvlib.spectrum import get_reference_spectra
    except ImportError:
        raise ValueError(
            "no solar spectrum given and pvlib (for the default ASTM G173-03 "
            'spectrum) is not installed: pip install "lumaxlike[solar]", or give '
            "a solar spectrum file (--solar-spectrum)"
        ) from None
    table = get_reference_spectra(standard="ASTM G173-03")
    wavelength_nm = np.asarray(table.index, dtype=np.float64)
    per_nm = np.asarray(table["extraterrestrial"], dtype=np.float64)
    return SolarSpectrum(wavelength_nm * 1e-3, per_nm * 1e3, ASTM_G173)


def band_irradiance(spectrum: SolarSpectrum, wavelength_um, fwhm_um=None) -> np.ndarray:
    """Solar irradiance at 1 au seen by each band [W m^-2 um^-1], shape ``(bands,)``.

    Args:
        spectrum: the solar spectrum.
        wavelength_um: band centres [um], shape ``(bands,)``.
        fwhm_um: band widths [um], shape ``(bands,)``, or None (centre values).

    Raises:
        ValueError: a band centre lies outside the spectrum's wavelengths.
    """
    centre = np.asarray(wavelength_um, dtype=np.float64)
    lo, hi = spectrum.wavelength_um[0], spectrum.wavelength_um[-1]
    outside = (centre < lo) | (centre > hi)
    if np.any(outside):
        raise ValueError(
            f"the solar spectrum ({spectrum.source}) covers {lo:g}-{hi:g} um; "
            f"bands at {', '.join(f'{c:g}' for c in centre[outside])} um lie outside"
        )
    if fwhm_um is None:
        return np.interp(centre, spectrum.wavelength_um, spectrum.irradiance)
    values = np.empty_like(centre)
    spacing = np.diff(spectrum.wavelength_um)
    for band, (mid, width) in enumerate(zip(centre, np.asarray(fwhm_um, dtype=np.float64))):
        near = min(np.searchsorted(spectrum.wavelength_um, mid), len(spacing)) - 1
        if spacing[max(near, 0)] > width / 4:  # already band-averaged: one row per band
            values[band] = np.interp(mid, spectrum.wavelength_um, spectrum.irradiance)
            continue
        sigma = width / (2.0 * math.sqrt(2.0 * math.log(2.0)))
        inside = spectrum.wavelength_um[np.abs(spectrum.wavelength_um - mid) < 3 * sigma]
        grid = np.union1d(
            np.linspace(max(mid - 3 * sigma, lo), min(mid + 3 * sigma, hi), 121), inside
        )
        weight = np.exp(-0.5 * ((grid - mid) / sigma) ** 2)
        flux = np.interp(grid, spectrum.wavelength_um, spectrum.irradiance)
        values[band] = np.trapezoid(weight * flux, grid) / np.trapezoid(weight, grid)
    return values


def sun_distance_au(value) -> float | None:
    """A label's ``SOLAR_DISTANCE`` in au (``{value, units}`` in AU or KM; a bare number is
    taken as au when below 100, else as km), or None."""
    if value is None:
        return None
    units = ""
    if isinstance(value, dict):
        units, value = str(value.get("units", "")).upper(), value.get("value")
    try:
        value = float(value)
    except (TypeError, ValueError):
        return None
    if not math.isfinite(value) or value <= 0:
        return None
    if units == "KM" or (units == "" and value > 100):
        return value / AU_KM
    return value
