"""Laboratory reflectance spectra from files, resampled to a cube's bands.

Three layouts are read (`read_spectral_library`):

``"csv"``
    one table: a wavelength column whose header names its unit (``wavelength_um``,
    ``wavelength (nm)``, ``Wavelength [microns]``, ...), then one column per spectrum,
    headed by its name. Lines starting with ``#`` are comments. Missing values (empty
    cells) are gaps.
``"splib07"``
    a USGS Spectral Library Version 7 ASCII spectrum (Kokaly et al. 2017, USGS Data Series
    1035): a title line (``splib07a Record=...: <name> <spectrometer><purity> AREF``), then
    one reflectance value per line; its wavelengths are in the matching
    ``splib07*_Wavelengths_<spectrometer>_*.txt`` file of the release (a title line, then
    one wavelength [um] per line), found next to the spectrum or given. The library marks
    deleted channels by -1.23e34; they are gaps.
``"relab"``
    a RELAB (Brown University) spectrum file: the number of data lines, then that many
    lines ``wavelength[nm] reflectance [standard deviation]``; anything after them
    (file name, sample ID, comments) is ignored.

Every reflectance is converted to bidirectional reflectance r [1/sr] (`units`: the
laboratory reflectance factor ``"reff"`` by default, as splib07's AREF and RELAB's
spectra are) at the measurement geometry, which files of these layouts do not carry
reliably: it is an argument (RELAB's standard bidirectional geometry, incidence 30 deg,
emission 0 deg, is the default for ``"relab"`` only).

`SpectralLibrary.resample` brings the spectra to a cube's band centres (and full widths
at half maximum) with the Gaussian spectral response resampling of Spectral Python
(``spectral.BandResampler``), after checking that every band lies inside the measured
range of every spectrum and away from its gaps.
"""

from __future__ import annotations

import math
import os
import re
from pathlib import Path

import numpy as np

from ..._spectral_library import SpectralLibrary as SpectralLibrary
from .units import check_units

__all__ = ["SpectralLibrary", "read_spectral_library", "LIBRARY_FORMATS"]

LIBRARY_FORMATS = ("csv", "splib07", "relab")
#: splib07's marker of a deleted channel
SPLIB07_DELETED = -1.23e34
#: RELAB's standard bidirectional geometry (incidence, emission) [deg]
RELAB_GEOMETRY_DEG = (30.0, 0.0)
_UNIT_SCALE_TO_UM = {"nm": 1e-3, "um": 1.0}
_UNIT_PATTERNS = (
    ("nm", re.compile(r"(?<![a-z])nm(?![a-z])|nanomet", re.IGNORECASE)),
    ("um", re.compile(r"(?<![a-z])um(?![a-z])|µm|μm|micron|micromet", re.IGNORECASE)),
)


def read_spectral_library(
    paths,
    format: str | None = None,
    *,
    incidence=None,
    emission=None,
    azimuth=0.0,
    units: str = "reff",
    wavelengths_file=None,
    names=None,
) -> SpectralLibrary:
    """Read laboratory reflectance spectra from files.

    Args:
        paths: one file or a list of files; a CSV file holds any number of spectra,
            a splib07 or RELAB file one.
        format: ``"csv"``, ``"splib07"`` or ``"relab"`` (see the module docstring);
            default: from each file (``.csv`` -> csv; a first line ``splib07...`` ->
            splib07; a first line holding one integer -> relab).
        incidence: the measurement's incidence angle [rad] (as every angle of
            lumaxlike's Python API), in [0, pi/2), a scalar or one per spectrum;
            required except for RELAB files (default 30 deg). A value above pi/2 can
            only be degrees and is refused (use numpy.radians).
        emission: the measurement's emission angle [rad], the same way (RELAB default 0).
        azimuth: azimuth of the observer relative to the source [rad], within
            [-2 pi, 2 pi] (0: the observer on the source's side); irrelevant when the
            emission angle is 0.
        units: ``"reff"`` (reflectance factor, default), ``"radf"`` (radiance factor) or
            ``"r"`` (bidirectional reflectance [1/sr]): what the files hold.
        wavelengths_file: for splib07, the release's wavelength file for the spectra's
            spectrometer; default: the one next to the spectrum named
            ``*Wavelengths*<spectrometer>*``.
        names: names of the spectra, replacing the files' (one per spectrum).

    Returns:
        A `SpectralLibrary` (r [1/sr], wavelengths [um]); files with different
        wavelength grids are put on the union of their grids, with gaps where a
        spectrum has no sample.

    Raises:
        ValueError: naming the file for an unreadable or unrecognised file, a literal NaN
            or a missing wavelength unit in it, and naming the argument for bad angles.
    """
    check_units(units)
    paths = [paths] if isinstance(paths, (str, os.PathLike)) else list(paths)
    if not paths:
        raise ValueError("paths names no file")
    if format is not None and format not in LIBRARY_FORMATS:
        raise ValueError(f"format={format!r} is not one of {', '.join(map(repr, LIBRARY_FORMATS))}")
    spectra: list[tuple] = []  # (name, wavelengths [um], values, source, kind)
    for path in map(Path, paths):
        kind = format or _detect_format(path)
        if kind == "splib07":
            found = _read_splib07(path, wavelengths_file)
        else:
            found = {"csv": _read_csv, "relab": _read_relab}[kind](path)
        spectra.extend((name, wl, values, str(path), kind) for name, wl, values in found)
    if names is not None:
        names = [names] if isinstance(names, str) else list(names)
        if len(names) != len(spectra):
            raise ValueError(f"names gives {len(names)} names for {len(spectra)} spectra")
        spectra = [(name, *rest) for name, (_, *rest) in zip(names, spectra)]

    kinds = [kind for *_, kind in spectra]
    angles = {}
    for name, given, relab_default in (
        ("incidence", incidence, RELAB_GEOMETRY_DEG[0]),
        ("emission", emission, RELAB_GEOMETRY_DEG[1]),
    ):
        if given is None:
            if any(kind != "relab" for kind in kinds):
                raise ValueError(
                    f"{name} (the measurement's {name} angle [rad]) is required for "
                    f"{'CSV' if 'csv' in kinds else 'splib07'} spectra, whose files do not record it"
                )
            given = np.radians(relab_default)
        angles[name] = _angles_rad(name, given, len(spectra))
    angles["azimuth"] = _angles_rad("azimuth", azimuth, len(spectra), limit=2.0 * np.pi)

    grid = np.unique(np.concatenate([wl for _, wl, *_ in spectra]))
    reflectance = np.full((len(spectra), grid.size), np.nan)
    for row, (_, wl, values, _, _) in enumerate(spectra):
        reflectance[row, np.searchsorted(grid, wl)] = values
    if units != "r":
        cos_i = np.cos(angles["incidence"])
        reflectance = reflectance / np.pi * (cos_i[:, None] if units == "reff" else 1.0)
    return SpectralLibrary(
        names=tuple(name for name, *_ in spectra),
        wavelengths=grid,
        reflectance=reflectance,
        incidence=angles["incidence"],
        emission=angles["emission"],
        azimuth=angles["azimuth"],
        sources=tuple(source for *_, source, _ in spectra),
    )


def _angles_rad(name, value, n, limit=None):
    """Angles [rad], one per spectrum: incidence/emission in [0, pi/2) (`limit` None),
    azimuth within [-limit, limit]; a value only degrees can be is named as such."""
    angle = np.asarray(value, np.float64) if not isinstance(value, str) else np.array(np.nan)
    if angle.ndim > 1 or (angle.ndim == 1 and angle.size != n) or not np.all(np.isfinite(angle)):
        raise ValueError(
            f"{name} must be a finite angle [rad] or one per spectrum ({n}), got {value!r}"
        )
    upper = np.pi / 2 if limit is None else limit
    if np.any(np.abs(angle) > upper) or (limit is None and np.any((angle < 0) | (angle >= upper))):
        degrees_limit = 90.0 if limit is None else 360.0
        looks = np.any(np.abs(angle) > upper) and np.all(np.abs(angle) <= degrees_limit)
        hint = f" ({value!r} looks like degrees: pass numpy.radians({value!r}))" if looks else ""
        turns = 0.0 if limit is None else limit / np.pi
        interval = "[0, pi/2)" if limit is None else f"[-{turns:g} pi, {turns:g} pi]"
        raise ValueError(f"{name} must lie in {interval} rad, got {value!r}{hint}")
    return np.array(np.broadcast_to(angle, (n,)))


def _detect_format(path: Path) -> str:
    if path.suffix.lower() == ".csv":
        return "csv"
    lines = _lines(path)
    first = lines[0].strip() if lines else ""
    if first.lower().startswith("splib"):
        return "splib07"
    if re.fullmatch(r"\d+", first):
        return "relab"
    raise ValueError(
        f"{path}: cannot tell its format (not .csv, no splib07 title line, no RELAB line count); "
        f"give format= one of {', '.join(LIBRARY_FORMATS)}"
    )


def _lines(path: Path) -> list[str]:
    try:
        return path.read_text(encoding="latin-1").splitlines()
    except OSError as error:
        raise ValueError(
            f"{path}: cannot read the spectral library file ({error.strerror})"
        ) from None


def _number(path, line_number, text) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{path}, line {line_number}: {text!r} is not a number") from None
    if math.isnan(value):
        raise ValueError(
            f"{path}, line {line_number}: NaN in a spectrum (leave the value empty for a gap)"
        )
    return value


def _unit_scale(path, header: str) -> float:
    for unit, pattern in _UNIT_PATTERNS:
        if pattern.search(header):
            return _UNIT_SCALE_TO_UM[unit]
    raise ValueError(f"{path}: the wavelength header {header!r} names no unit (nm or um)")


def _sorted_spectrum(path, wavelengths, values):
    order = np.argsort(wavelengths)
    wavelengths, values = np.asarray(wavelengths)[order], np.asarray(values)[order]
    if wavelengths.size < 2 or not np.all(np.diff(wavelengths) > 0):
        raise ValueError(f"{path}: fewer than two samples or a repeated wavelength")
    return wavelengths, values


def _read_csv(path: Path):
    lines = [
        (n, line)
        for n, line in enumerate(_lines(path), 1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if len(lines) < 3:
        raise ValueError(f"{path}: a CSV library needs a header line and at least two rows")
    header = [cell.strip() for cell in lines[0][1].split(",")]
    if len(header) < 2 or not header[0].lower().startswith("wavelength"):
        raise ValueError(
            f"{path}: the first column must be the wavelength (e.g. 'wavelength_um'), got {header[0]!r}"
        )
    scale = _unit_scale(path, header[0])
    table = np.full((len(lines) - 1, len(header)), np.nan)
    for row, (line_number, line) in enumerate(lines[1:]):
        cells = line.split(",")
        if len(cells) != len(header):
            raise ValueError(
                f"{path}, line {line_number}: {len(cells)} cells, the header has {len(header)}"
            )
        for column, cell in enumerate(cells):
            if cell.strip():
                table[row, column] = _number(path, line_number, cell.strip())
            elif column == 0:
                raise ValueError(f"{path}, line {line_number}: no wavelength")
    found = []
    for column, name in enumerate(header[1:], 1):
        wavelengths, values = _sorted_spectrum(path, table[:, 0] * scale, table[:, column])
        found.append((name, wavelengths, values))
    return found


def _read_splib07(path: Path, wavelengths_file):
    lines = _lines(path)
    title = lines[0].strip() if lines else ""
    match = re.match(r"splib\S*\s+Record=\d+:\s*(.+)$", title)
    if not match:
        raise ValueError(f"{path}: not a splib07 spectrum (its first line is {title!r})")
    values = np.array(
        [_number(path, n, line) for n, line in enumerate(lines[1:], 2) if line.strip()]
    )
    words = match.group(1).split()
    name = " ".join(words[:-2]) if len(words) > 2 else match.group(1)
    if wavelengths_file is None:
        wavelengths_file = _find_splib07_wavelengths(path, words[-2] if len(words) >= 2 else "")
    wl_lines = _lines(Path(wavelengths_file))
    scale = (
        _unit_scale(wavelengths_file, wl_lines[0])
        if wl_lines and re.search(r"[a-zA-Z]", wl_lines[0])
        else None
    )
    if scale is None:
        raise ValueError(
            f"{wavelengths_file}: not a splib07 wavelength file (no title line naming the unit)"
        )
    wavelengths = np.array(
        [
            _number(wavelengths_file, n, line)
            for n, line in enumerate(wl_lines[1:], 2)
            if line.strip()
        ]
    )
    if wavelengths.size != values.size:
        raise ValueError(
            f"{path} has {values.size} channels but its wavelength file {wavelengths_file} has {wavelengths.size}"
        )
    deleted = (values <= SPLIB07_DELETED / 10) | (wavelengths <= SPLIB07_DELETED / 10)
    keep = wavelengths > SPLIB07_DELETED / 10
    values = np.where(deleted, np.nan, values)
    wavelengths, values = _sorted_spectrum(path, wavelengths[keep] * scale, values[keep])
    return [(name, wavelengths, values)]


def _find_splib07_wavelengths(path: Path, spectrometer_tag: str) -> Path:
    """The release's wavelength file for the spectrometer named in the title's tag
    (``BECKb`` -> BECK, ``ASDFRa`` -> ASD, ``NIC4bb`` -> NIC4, ``AVIRIS13aa`` -> AVIRIS)."""
    instrument = re.match(r"(BECK|ASD|NIC4|AVIRIS)", spectrometer_tag)
    candidates = (
        sorted(path.parent.glob(f"*Wavelengths*{instrument.group(1)}*")) if instrument else []
    )
    if len(candidates) != 1:
        raise ValueError(
            f"{path}: give wavelengths_file= (the splib07 wavelength file of its spectrometer "
            f"{spectrometer_tag!r}); found {[c.name for c in candidates]} next to it"
        )
    return candidates[0]


def _read_relab(path: Path):
    lines = _lines(path)
    try:
        count = int(lines[0])
    except (IndexError, ValueError):
        raise ValueError(
            f"{path}: not a RELAB spectrum (its first line must be the number of data lines)"
        ) from None
    if len(lines) < count + 1:
        raise ValueError(f"{path}: announces {count} data lines but has {len(lines) - 1}")
    rows = []
    for n, line in enumerate(lines[1 : count + 1], 2):
        cells = line.split()
        if len(cells) < 2:
            raise ValueError(f"{path}, line {n}: expected 'wavelength reflectance', got {line!r}")
        rows.append((_number(path, n, cells[0]), _number(path, n, cells[1])))
    table = np.array(rows)
    wavelengths, values = _sorted_spectrum(path, table[:, 0] * _UNIT_SCALE_TO_UM["nm"], table[:, 1])
    return [(path.stem, wavelengths, values)]
