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

import dataclasses
import math
import os
import re
from pathlib import Path

import numpy as np

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


@dataclasses.dataclass(frozen=True)
class SpectralLibrary:
    """Reflectance spectra of pure materials on one wavelength grid.

    Attributes:
        names: one name per spectrum (tuple of str).
        wavelengths: sample wavelengths [um], shape ``(samples,)``, strictly increasing.
        reflectance: bidirectional reflectance r [1/sr] at the measurement geometry,
            shape ``(spectra, samples)``; NaN marks a gap (no measurement there).
        incidence: the incidence angle of each spectrum's measurement [rad], shape
            ``(spectra,)``.
        emission: the emission angle of each spectrum's measurement [rad], shape
            ``(spectra,)``.
        azimuth: the relative azimuth of each spectrum's measurement [rad], shape
            ``(spectra,)``, as in `lumaxlike.geometry_from_angles` (0: the observer on
            the source's side).
        fwhm: full width at half maximum of each sample [um], shape ``(samples,)``, or
            None (then taken as the sample spacing when resampling).
        sources: the file each spectrum was read from (tuple of str; "" when built in
            memory).
    """

    names: tuple
    wavelengths: np.ndarray
    reflectance: np.ndarray
    incidence: np.ndarray
    emission: np.ndarray
    azimuth: np.ndarray
    fwhm: np.ndarray | None = None
    sources: tuple = ()

    def __post_init__(self):
        wavelengths = np.asarray(self.wavelengths, np.float64)
        reflectance = np.asarray(self.reflectance, np.float64)
        n_spectra = len(self.names)
        if wavelengths.ndim != 1 or wavelengths.size == 0:
            raise ValueError(f"SpectralLibrary.wavelengths must be 1-D and not empty, got shape {wavelengths.shape}")
        if not np.all(np.isfinite(wavelengths)) or not np.all(np.diff(wavelengths) > 0):
            raise ValueError("SpectralLibrary.wavelengths must be finite and strictly increasing")
        if reflectance.shape != (n_spectra, wavelengths.size):
            raise ValueError(
                f"SpectralLibrary.reflectance must have shape (spectra, samples) = "
                f"{(n_spectra, wavelengths.size)}, got {reflectance.shape}"
            )
        if np.any(np.isinf(reflectance)):
            raise ValueError("SpectralLibrary.reflectance holds infinite values")
        geometry = {}
        for name in ("incidence", "emission", "azimuth"):
            angle = np.broadcast_to(np.asarray(getattr(self, name), np.float64), (n_spectra,))
            if not np.all(np.isfinite(angle)):
                raise ValueError(f"SpectralLibrary.{name} must be finite, got {getattr(self, name)!r}")
            geometry[name] = angle.copy()
        for name in ("incidence", "emission"):
            if not np.all((geometry[name] >= 0.0) & (geometry[name] < math.pi / 2)):
                raise ValueError(f"SpectralLibrary.{name} must lie in [0, pi/2) rad, got {geometry[name]!r}")
        fwhm = self.fwhm
        if fwhm is not None:
            fwhm = np.broadcast_to(np.asarray(fwhm, np.float64), wavelengths.shape).copy()
            if not np.all(np.isfinite(fwhm) & (fwhm > 0)):
                raise ValueError("SpectralLibrary.fwhm must be positive and finite")
        sources = tuple(self.sources) or ("",) * n_spectra
        if len(sources) != n_spectra:
            raise ValueError(f"SpectralLibrary.sources must name one file per spectrum ({n_spectra}), got {len(sources)}")
        for name, value in (("wavelengths", wavelengths), ("reflectance", reflectance), ("fwhm", fwhm),
                            ("names", tuple(map(str, self.names))), ("sources", sources), *geometry.items()):
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
            object.__setattr__(self, name, value)

    def __len__(self) -> int:
        return len(self.names)

    def select(self, names) -> SpectralLibrary:
        """The library restricted to `names` (in that order); ValueError naming a missing one."""
        names = [names] if isinstance(names, str) else list(names)
        missing = [name for name in names if name not in self.names]
        if missing:
            raise ValueError(f"names {missing} are not in the library, which holds {list(self.names)}")
        rows = [self.names.index(name) for name in names]
        return dataclasses.replace(
            self,
            names=tuple(names),
            reflectance=self.reflectance[rows],
            incidence=self.incidence[rows],
            emission=self.emission[rows],
            azimuth=self.azimuth[rows],
            sources=tuple(self.sources[row] for row in rows),
        )

    def resample(self, wavelengths, fwhm=None) -> SpectralLibrary:
        """The spectra resampled to a cube's bands.

        Each band's value is the spectrum weighted by a Gaussian spectral response of the
        band's centre and full width at half maximum (Spectral Python's
        ``BandResampler``: each library sample is taken constant over its own width).

        Args:
            wavelengths: band centres [um], shape ``(bands,)``, strictly increasing.
            fwhm: band full widths at half maximum [um], a scalar or shape ``(bands,)``;
                default: the band spacing (half the distance between each band's
                neighbours).

        A spectrum sampled exactly at the band centres (no ``fwhm`` given, none
        recorded) is taken as it is: it is already on the bands.

        Returns:
            A `SpectralLibrary` on the band centres (its ``fwhm`` the bands').

        Raises:
            ValueError: naming the spectrum and its file where a band's response
                (centre +- fwhm/2) reaches outside the spectrum's measured range or into
                a gap.
        """
        from spectral import BandResampler

        centres = np.asarray(wavelengths, np.float64)
        if centres.ndim != 1 or centres.size == 0 or not np.all(np.isfinite(centres)):
            raise ValueError(f"wavelengths must be a 1-D array of finite band centres [um], got {wavelengths!r}")
        if centres.size > 1 and not np.all(np.diff(centres) > 0):
            raise ValueError("wavelengths must be strictly increasing")
        if fwhm is None:
            widths = _band_spacing(centres)
        else:
            widths = np.broadcast_to(np.asarray(fwhm, np.float64), centres.shape).copy()
            if not np.all(np.isfinite(widths) & (widths > 0)):
                raise ValueError(f"fwhm must be positive and finite [um], got {fwhm!r}")
        sample_widths = _band_spacing(self.wavelengths) if self.fwhm is None else self.fwhm
        resampled = np.empty((len(self), centres.size))
        for row, spectrum in enumerate(self.reflectance):
            measured = np.isfinite(spectrum)
            at_centres = _same_grid(self.wavelengths[measured], centres)
            if fwhm is None and self.fwhm is None and at_centres:
                resampled[row] = spectrum[measured]  # sampled at the band centres: as it is
                continue
            self._check_coverage(row, measured, centres, widths, sample_widths)
            resampler = BandResampler(
                self.wavelengths[measured], centres, sample_widths[measured], widths
            )
            resampled[row] = resampler(spectrum[measured])
        return dataclasses.replace(self, wavelengths=centres, reflectance=resampled, fwhm=widths)

    def _check_coverage(self, row, measured, centres, widths, sample_widths):
        """ValueError unless every band's response window lies on measured samples (each
        sample covering its own width, as `BandResampler` takes it)."""
        lower, upper = centres - widths / 2, centres + widths / 2
        where = f"spectrum {self.names[row]!r}" + (f" of {self.sources[row]}" if self.sources[row] else "")
        valid = self.wavelengths[measured]
        if valid.size < 2:
            raise ValueError(f"{where} has fewer than two measured values")
        half = np.asarray(sample_widths)[measured] / 2
        first, last = valid[0] - half[0], valid[-1] + half[-1]
        outside = (lower < first * (1 - 1e-12)) | (upper > last * (1 + 1e-12))
        if np.any(outside):
            band = int(np.argmax(outside))
            raise ValueError(
                f"{where} covers {first:g}-{last:g} um (samples at {valid[0]:g}-{valid[-1]:g} um, "
                f"each over its width), which does not cover band {band} ({centres[band]:g} um, "
                f"fwhm {widths[band]:g} um: its response spans {lower[band]:g}-{upper[band]:g} um) "
                "of the cube"
            )
        gaps = self.wavelengths[~measured]
        for band in range(centres.size):
            if np.any((gaps >= lower[band]) & (gaps <= upper[band])):
                raise ValueError(
                    f"{where} has no measurement near band {band} ({centres[band]:g} um, fwhm "
                    f"{widths[band]:g} um) of the cube (a gap or deleted channel)"
                )


def _same_grid(samples: np.ndarray, centres: np.ndarray) -> bool:
    """Whether a spectrum's samples are the band centres (to 1e-9 relative)."""
    return samples.shape == centres.shape and bool(
        np.allclose(samples, centres, rtol=1e-9, atol=0.0))


def _band_spacing(centres: np.ndarray) -> np.ndarray:
    """Half the distance between each sample's neighbours (the outer ones: their spacing)."""
    if centres.size == 1:
        raise ValueError("fwhm must be given for a single band")
    spacing = np.empty_like(centres)
    spacing[1:-1] = (centres[2:] - centres[:-2]) / 2
    spacing[0], spacing[-1] = centres[1] - centres[0], centres[-1] - centres[-2]
    return spacing


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
    spectra = []  # (name, wavelengths [um], values, source, kind)
    for path in map(Path, paths):
        kind = format or _detect_format(path)
        reader = {"csv": _read_csv, "splib07": _read_splib07, "relab": _read_relab}[kind]
        found = reader(path, wavelengths_file) if kind == "splib07" else reader(path)
        spectra.extend((name, wl, values, str(path), kind) for name, wl, values in found)
    if names is not None:
        names = [names] if isinstance(names, str) else list(names)
        if len(names) != len(spectra):
            raise ValueError(f"names gives {len(names)} names for {len(spectra)} spectra")
        spectra = [(name, *rest) for name, (_, *rest) in zip(names, spectra)]

    kinds = [kind for *_, kind in spectra]
    angles = {}
    for name, given, relab_default in (("incidence", incidence, RELAB_GEOMETRY_DEG[0]),
                                       ("emission", emission, RELAB_GEOMETRY_DEG[1])):
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
            f"{name} must be a finite angle [rad] or one per spectrum ({n}), got {value!r}")
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
        raise ValueError(f"{path}: cannot read the spectral library file ({error.strerror})") from None


def _number(path, line_number, text) -> float:
    try:
        value = float(text)
    except ValueError:
        raise ValueError(f"{path}, line {line_number}: {text!r} is not a number") from None
    if math.isnan(value):
        raise ValueError(f"{path}, line {line_number}: NaN in a spectrum (leave the value empty for a gap)")
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
    lines = [(n, line) for n, line in enumerate(_lines(path), 1) if line.strip() and not line.lstrip().startswith("#")]
    if len(lines) < 3:
        raise ValueError(f"{path}: a CSV library needs a header line and at least two rows")
    header = [cell.strip() for cell in lines[0][1].split(",")]
    if len(header) < 2 or not header[0].lower().startswith("wavelength"):
        raise ValueError(f"{path}: the first column must be the wavelength (e.g. 'wavelength_um'), got {header[0]!r}")
    scale = _unit_scale(path, header[0])
    table = np.full((len(lines) - 1, len(header)), np.nan)
    for row, (line_number, line) in enumerate(lines[1:]):
        cells = line.split(",")
        if len(cells) != len(header):
            raise ValueError(f"{path}, line {line_number}: {len(cells)} cells, the header has {len(header)}")
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
    values = np.array([_number(path, n, line) for n, line in enumerate(lines[1:], 2) if line.strip()])
    words = match.group(1).split()
    name = " ".join(words[:-2]) if len(words) > 2 else match.group(1)
    if wavelengths_file is None:
        wavelengths_file = _find_splib07_wavelengths(path, words[-2] if len(words) >= 2 else "")
    wl_lines = _lines(Path(wavelengths_file))
    scale = _unit_scale(wavelengths_file, wl_lines[0]) if wl_lines and re.search(r"[a-zA-Z]", wl_lines[0]) else None
    if scale is None:
        raise ValueError(f"{wavelengths_file}: not a splib07 wavelength file (no title line naming the unit)")
    wavelengths = np.array([_number(wavelengths_file, n, line) for n, line in enumerate(wl_lines[1:], 2) if line.strip()])
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
    candidates = sorted(path.parent.glob(f"*Wavelengths*{instrument.group(1)}*")) if instrument else []
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
        raise ValueError(f"{path}: not a RELAB spectrum (its first line must be the number of data lines)") from None
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
