"""Radiance to I/F: I/F = pi L d^2 / F(lambda), with a solar spectrum resampled to the bands.

``L`` is the spectral radiance [W m^-2 um^-1 sr^-1] (M3 L1B ``RDN``), ``F`` the solar
spectral irradiance at 1 au [W m^-2 um^-1] averaged over each band, ``d`` the sun's
distance [au] at the time of the observation.

Solar spectra (`load_solar_spectrum`):

- a CSV/text file of two columns, wavelength and irradiance at 1 au (comma, semicolon or
  blank separated). Header lines before the numbers give the units where they name them
  (``wavelength_nm, irradiance``, ``Wavelength (um)``; irradiance ``W/m2/nm`` or
  ``W m-2 nm-1`` per nm, otherwise W m^-2 um^-1), as does the ``wavelength_unit``
  argument; without either, wavelengths all above 100 are nm, all below 100 um, and a
  file whose wavelengths span both (0.5 nm to 1 mm, as Gueymard 2004) is refused;
- the solar-spectrum tables delivered with the M3 Level 2 archive
  (``M3G20110224_RFL_SOLAR_SPEC.TAB`` for global mode, ``M3T20110224_RFL_SOLAR_SPEC.TAB``
  for target mode, in the volume's ``CALIB`` directory; the L2 label names the one used
  in ``CH1:SOLAR_SPECTRUM_FILE_NAME``), read as their labels describe them
  (`read_m3_solar_table`): one row per band of that mode, two ASCII reals, wavelength
  [nm] and irradiance at 1 au [W m^-2 um^-1] ("an exo-atmospheric solar spectrum at 1 AU
  as determined with MODTRAN"), each band's row taken at its centre;
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
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .spectral_metadata import unit_name

__all__ = [
    "AU_KM",
    "SolarSpectrum",
    "band_irradiance",
    "load_solar_spectrum",
    "read_m3_solar_table",
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
        per_band: True for a table of one row per band of an instrument (the M3
            tables): each band takes the row at its centre, and a band with no row
            there is refused (`band_irradiance`).
    """

    wavelength_um: np.ndarray
    irradiance: np.ndarray
    source: str
    per_band: bool = False


M3_SOLAR_TABLE = re.compile(r"^M3[GT]\d{8}_RFL_SOLAR_SPEC$", re.IGNORECASE)
"""The names of the M3 Level 2 archive's solar-spectrum tables (without suffix)."""


#: how a header names a unit of wavelength (after ``_`` -> blank, lower case)
_NM = r"(?:nm|nanomet(?:er|re)s?)"
_UM = r"(?:um|µm|μm|microns?|micromet(?:er|re)s?)"
#: "per nm" / "per um" in an irradiance unit: ``/nm``, ``/(m2 nm)``, ``nm-1``, ``nm^-1``,
#: ``per nm``
_PER = r"(?:/\s*{unit}\b|/\s*\(\s*m\s*(?:\^|\*\*)?\s*2\s*{unit}\s*\)|\b{unit}\s*(?:\^|\*\*)?\s*-\s*1\b|\b{unit}⁻¹|\bper\s+{unit}\b)"


def _header_units(header: list[str]) -> tuple[str | None, str | None]:
    """``(wavelength unit, irradiance per)``, each ``"nm"``, ``"um"`` or None, from the
    header lines of a spectrum file: the irradiance's "per nm" / "per um" first, then the
    first unit left as the wavelength's."""
    wavelength = per = None
    for line in header:
        text = line.replace("_", " ").lower()
        for name, unit in (("nm", _NM), ("um", _UM)):
            pattern = _PER.format(unit=unit)
            if re.search(pattern, text):
                per = per or name
                text = re.sub(pattern, " ", text)
        found = re.search(rf"(?<![\w/]){_NM}(?!\w)|(?<![\w/]){_UM}(?!\w)", text)
        if found is not None and wavelength is None:
            wavelength = "nm" if re.fullmatch(_NM, found.group(0)) else "um"
    return wavelength, per


def load_solar_spectrum(path=None, wavelength_unit=None) -> SolarSpectrum:
    """Read a solar spectrum file, or the default ASTM G173-03 extraterrestrial spectrum.

    Args:
        path: a two-column text/CSV file (see the module docstring), or None for the
            default (needs ``pvlib``).
        wavelength_unit: ``"nm"`` or ``"um"``, the unit of the file's wavelengths; None
            to read it from the file's header (see the module docstring).

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: naming ``path``, when it does not hold two increasing numeric columns
            of positive irradiance, when its wavelength unit is neither stated nor clear
            from its values, or when ``wavelength_unit`` contradicts its header; or when
            ``path`` is None and pvlib is not installed.
    """
    if path is None:
        return _astm_g173()
    path = Path(path)
    given = None
    if wavelength_unit is not None:
        given = {"Nanometers": "nm", "Micrometers": "um"}.get(
            unit_name(wavelength_unit) or "", None
        )
        if given is None:
            raise ValueError(f"wavelength_unit={wavelength_unit!r} is not 'nm' or 'um'")
    if M3_SOLAR_TABLE.match(path.stem):
        return read_m3_solar_table(path)
    if not path.is_file():
        raise FileNotFoundError(f"solar spectrum file {path} does not exist")
    rows = []
    header = []
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
            header.append(line)
    if len(rows) < 2:
        raise ValueError(
            f"solar spectrum file {path} holds fewer than two (wavelength, irradiance) rows"
        )
    wavelength, irradiance = np.asarray(rows).T
    if np.any(np.diff(wavelength) <= 0):
        raise ValueError(f"solar spectrum file {path}: wavelengths must increase")
    if not np.all(np.isfinite(irradiance)) or np.any(irradiance <= 0):
        raise ValueError(f"solar spectrum file {path}: irradiance must be positive and finite")
    stated, per = _header_units(header)
    if given is not None and stated is not None and given != stated:
        raise ValueError(
            f"solar spectrum file {path}: its header gives wavelengths in {stated}, "
            f"but wavelength_unit={wavelength_unit!r}"
        )
    unit = given or stated
    how = "given" if given else "from its header"
    lo, hi = float(wavelength.min()), float(wavelength.max())
    if unit is None:  # from the values only where they leave no doubt
        if lo > 100:  # no solar spectrum in um starts beyond 100 um
            unit, how = "nm", "all above 100, no unit stated"
        elif hi < 100:  # nor one in nm ends below 100 nm (extreme ultraviolet)
            unit, how = "um", "all below 100, no unit stated"
        else:
            raise ValueError(
                f"solar spectrum file {path}: its wavelengths run from {lo:g} to {hi:g}, "
                "which could be nm or um, and no header line names the unit: add one "
                "(e.g. 'wavelength_nm, irradiance_W_m2_um')"
            )
    if unit == "nm":
        wavelength = wavelength * 1e-3
    if per == "nm":  # W m^-2 nm^-1 -> W m^-2 um^-1
        irradiance = irradiance * 1e3
    source = (
        f"{path.resolve()} (wavelengths in {unit}, {how}; irradiance per "
        f"{per or 'um'}{' from its header' if per else ''})"
    )
    return SolarSpectrum(wavelength, irradiance, source)


def read_m3_solar_table(path) -> SolarSpectrum:
    """Read an M3 Level 2 solar-spectrum table (``M3[GT]20110224_RFL_SOLAR_SPEC.TAB``, or
    its ``.LBL``: the ``.TAB`` beside it is read).

    The layout is the archive's (its label, as carried into the PDS4 migration of the M3
    archive: MillionConcepts/m3-conversion, ``src/labels/m3/calibration_labels/
    m3g20110224_rfl_solar_spec.xml`` and ``m3t20110224_rfl_solar_spec.xml``): a table of
    85 (global mode) or 256 (target mode) CRLF-delimited records of 26 bytes, two
    ASCII_Real fields, "Wavelength" [nm] (bytes 1-11) and "Solar Irradiance"
    [W/(m^2 um)] (bytes 14-24), "the wavelength-dependent solar spectrum for converting
    ... radiance data to reflectance ... an exo-atmospheric solar spectrum at 1 AU as
    determined with MODTRAN", "interpolated to [that mode's] bandpasses" (the same
    repository's ``readmes/document_readme.md``): one row per band, so each band takes
    its own row.

    Raises:
        FileNotFoundError: neither ``path`` nor its ``.TAB`` exists.
        ValueError: naming the file and line, a record that is not two numbers, or
            wavelengths that do not increase, or irradiance not positive.
    """
    from ..missions.pds3 import find_sibling

    path = Path(path)
    table = find_sibling(path, ".tab") if path.suffix.lower() == ".lbl" else path
    if table is None or not table.is_file():
        raise FileNotFoundError(f"M3 solar spectrum table {table or path} does not exist")
    rows = []
    for number, line in enumerate(table.read_text(errors="replace").splitlines(), start=1):
        fields = line.split()
        if not fields:
            continue
        try:
            if len(fields) != 2:
                raise ValueError
            rows.append((float(fields[0]), float(fields[1])))
        except ValueError:
            raise ValueError(
                f"M3 solar spectrum table {table}, line {number}: not the archive's two "
                f"fields (wavelength [nm], irradiance [W m^-2 um^-1]): {line.strip()!r}"
            ) from None
    wavelength_nm, irradiance = np.asarray(rows, dtype=np.float64).reshape(-1, 2).T
    if wavelength_nm.size < 2 or np.any(np.diff(wavelength_nm) <= 0):
        raise ValueError(f"M3 solar spectrum table {table}: wavelengths must increase")
    if not np.all(np.isfinite(irradiance)) or np.any(irradiance <= 0):
        raise ValueError(f"M3 solar spectrum table {table}: irradiance must be positive")
    source = f"{table.resolve()} (M3 L2 solar spectrum table: nm, W m^-2 um^-1, per band)"
    return SolarSpectrum(wavelength_nm * 1e-3, irradiance, source, per_band=True)


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
    if spectrum.per_band:
        return _rows_at(spectrum, centre)
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


def _rows_at(spectrum: SolarSpectrum, centre: np.ndarray) -> np.ndarray:
    """Each band's row of a per-band table: the row nearest its centre, within a quarter
    of the table's spacing there; a band without one is refused."""
    table = spectrum.wavelength_um
    nearest = np.clip(np.searchsorted(table, centre), 1, table.size - 1)
    nearest = np.where(
        np.abs(table[nearest - 1] - centre) <= np.abs(table[nearest] - centre),
        nearest - 1,
        nearest,
    )
    spacing = np.diff(table)
    local = np.minimum(
        spacing[np.clip(nearest - 1, 0, spacing.size - 1)],
        spacing[np.clip(nearest, 0, spacing.size - 1)],
    )
    missing = np.abs(table[nearest] - centre) > local / 4
    if np.any(missing):
        raise ValueError(
            f"the solar spectrum ({spectrum.source}) has one row per band of one M3 mode "
            f"and none at the bands at {', '.join(f'{c:g}' for c in centre[missing])} um: "
            "give the table of the cube's mode (M3G... for global, M3T... for target)"
        )
    return spectrum.irradiance[nearest]


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
