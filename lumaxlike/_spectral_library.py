"""`SpectralLibrary`: reflectance spectra of pure materials on one wavelength grid, and their
resampling to a cube's bands.

The in-memory library that `lumaxlike.Endmembers.from_library` takes and
`lumaxlike.read_spectral_library` (`lumaxlike._io.read.spectral_library`, which re-exports
it) reads from files; it lives below both (`_unmix`, `_io`), as neither imports the
other's side.

`SpectralLibrary.resample` brings the spectra to a cube's band centres (and full widths
at half maximum) with the Gaussian spectral response resampling of Spectral Python
(``spectral.BandResampler``), after checking that every band lies inside the measured
range of every spectrum and away from its gaps.
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

__all__ = ["SpectralLibrary"]


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
            raise ValueError(
                f"SpectralLibrary.wavelengths must be 1-D and not empty, got shape {wavelengths.shape}"
            )
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
                raise ValueError(
                    f"SpectralLibrary.{name} must be finite, got {getattr(self, name)!r}"
                )
            geometry[name] = angle.copy()
        for name in ("incidence", "emission"):
            if not np.all((geometry[name] >= 0.0) & (geometry[name] < math.pi / 2)):
                raise ValueError(
                    f"SpectralLibrary.{name} must lie in [0, pi/2) rad, got {geometry[name]!r}"
                )
        fwhm = self.fwhm
        if fwhm is not None:
            fwhm = np.broadcast_to(np.asarray(fwhm, np.float64), wavelengths.shape).copy()
            if not np.all(np.isfinite(fwhm) & (fwhm > 0)):
                raise ValueError("SpectralLibrary.fwhm must be positive and finite")
        sources = tuple(self.sources) or ("",) * n_spectra
        if len(sources) != n_spectra:
            raise ValueError(
                f"SpectralLibrary.sources must name one file per spectrum ({n_spectra}), got {len(sources)}"
            )
        for name, value in (
            ("wavelengths", wavelengths),
            ("reflectance", reflectance),
            ("fwhm", fwhm),
            ("names", tuple(map(str, self.names))),
            ("sources", sources),
            *geometry.items(),
        ):
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
            raise ValueError(
                f"names {missing} are not in the library, which holds {list(self.names)}"
            )
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
            raise ValueError(
                f"wavelengths must be a 1-D array of finite band centres [um], got {wavelengths!r}"
            )
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
        where = f"spectrum {self.names[row]!r}" + (
            f" of {self.sources[row]}" if self.sources[row] else ""
        )
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
        np.allclose(samples, centres, rtol=1e-9, atol=0.0)
    )


def _band_spacing(centres: np.ndarray) -> np.ndarray:
    """Half the distance between each sample's neighbours (the outer ones: their spacing)."""
    if centres.size == 1:
        raise ValueError("fwhm must be given for a single band")
    spacing = np.empty_like(centres)
    spacing[1:-1] = (centres[2:] - centres[:-2]) / 2
    spacing[0], spacing[-1] = centres[1] - centres[0], centres[-1] - centres[-2]
    return spacing
