"""A mission product read for an inversion: checked, converted to reflectance, recorded.

`ProductCube` wraps `lumaxlike.CubeReader` (same ``info`` / ``read``), and
before any work:

- recognises the product (`lumaxlike._io.missions.products.recognise`) and maps its
  archive's special values to NaN;
- refuses a cube declared as reflectance (``r``, ``radf``, ``reff``) whose label says it
  holds radiance, or whose values no reflectance of that unit takes (median above 1.5 I/F
  or 99th percentile above 20 I/F, or a negative median), naming the file and the likely
  unit; and refuses ``radiance`` for a product whose label says it holds I/F, and any
  ``units`` that contradict the file's own ``units`` tag (`value_checks`: 1/sr is r);
- with ``units="radiance"`` converts to I/F = pi L d^2 / F (`lumaxlike._io.read.radiance`);
- finds bad bands (ENVI ``bbl`` = 0: not solved, status ``BAD_BAND``, or left out of the
  bands read with ``bad_bands="exclude"``, as unmixing does: its maps are per endmember)
  and, for lunar products, thermal bands (centre beyond 2.5 um): a warning on stderr
  naming them, kept by default, left out of the run and its outputs with
  ``thermal_bands="exclude"``;
- says once on stderr when the cube gives no wavelengths.

Everything it found and did is in `ProductCube.record` (``lumaxlike_product``).
"""

from __future__ import annotations

import dataclasses
import math

import numpy as np

from ..read.radiance import band_irradiance, load_solar_spectrum, sun_distance_au
from ..read.raster import CubeReader
from ..read.spectral_metadata import check_wavelength_unit, read_wavelength_file, to_micrometers
from .products import recognise
from .value_checks import (
    IF_HIGH_LIMIT,
    IF_MEDIAN_LIMIT,
    check_reflectance_values,
    check_unit_tag,
    notice,
    radiance_unit,
)

__all__ = ["THERMAL_CHOICES", "THERMAL_LIMIT_UM", "ProductCube", "product_options"]

THERMAL_LIMIT_UM = 2.5
"""Band centres beyond this [um] carry thermal emission on the sunlit Moon (Clark et al.
2011, JGR 116, E00G16; Li & Milliken 2016, JGR Planets 121, 2081)."""
THERMAL_CHOICES = ("keep", "exclude")
BAD_BAND_CHOICES = ("mark", "exclude")
INPUT_UNITS = ("r", "radf", "reff", "radiance")
SAMPLE_ROWS = 16


class ProductCube:
    """A cube file read for an inversion (see the module docstring).

    Args:
        path: the cube (GeoTIFF, ENVI data file or header, PDS3 label or image, ISIS3 cube).
        units: what it holds: ``"r"``, ``"radf"``, ``"reff"`` or ``"radiance"``
            [W m^-2 um^-1 sr^-1].
        solar_spectrum: for ``"radiance"``: a solar spectrum file (wavelength, irradiance
            at 1 au [W m^-2 um^-1]) or None for ASTM G173-03 (needs pvlib).
        solar_distance: for ``"radiance"``: the sun's distance [au]; None reads the
            label's ``SOLAR_DISTANCE``.
        wavelengths_from: a wavelength file replacing the cube's own (CRISM CDR ``WA``, or
            text with one wavelength per band), or None.
        thermal_bands: ``"keep"`` (default) or ``"exclude"`` lunar bands beyond 2.5 um.
        check_values: refuse values no reflectance of ``units`` takes (default True).
        convert: set up the radiance conversion (default True; False only to look at
            the bands, as the command line does before a run).
        bad_bands: ``"mark"`` (default: bad bands are read as NaN and flagged in
            `bad_bands`, for per-band maps with status ``BAD_BAND``) or ``"exclude"``
            (left out of the bands read, as thermal bands are; for a run whose maps are
            not per band, as unmixing).

    Attributes:
        info: `lumaxlike.CubeInfo` of the bands read (thermal or bad bands left out when
            excluded).
        file_info: `lumaxlike.CubeInfo` of all the file's bands.
        band_indices: 0-based indices, among the file's bands, of the bands read.
        marked_info: `lumaxlike.CubeInfo` of the bands read with ``bad_bands="mark"``
            (thermal bands left out when excluded): `info`, unless bad bands are excluded.
        units: what `read` returns: ``"r"``, ``"radf"`` or ``"reff"`` (``"radf"``
            for radiance, converted).
        kind: the `lumaxlike._io.missions.products.ProductKind`, or None.
        bad_bands: boolean ``(info.bands,)``: bands not to solve.

    Raises:
        FileNotFoundError, ValueError: as `lumaxlike.CubeReader`; and the refusals
            above, naming the file.
    """

    def __init__(
        self,
        path,
        units,
        *,
        solar_spectrum=None,
        solar_distance=None,
        wavelengths_from=None,
        thermal_bands="keep",
        check_values=True,
        convert=True,
        bad_bands="mark",
    ):
        if units not in INPUT_UNITS:
            raise ValueError(f"units={units!r} is not one of {', '.join(map(repr, INPUT_UNITS))}")
        if thermal_bands not in THERMAL_CHOICES:
            raise ValueError(f"thermal_bands={thermal_bands!r} is not 'keep' or 'exclude'")
        if bad_bands not in BAD_BAND_CHOICES:
            raise ValueError(f"bad_bands={bad_bands!r} is not 'mark' or 'exclude'")
        self._cube = CubeReader(path)
        self._convert = convert
        self._bad_choice = bad_bands
        try:
            self._setup(
                path,
                units,
                solar_spectrum,
                solar_distance,
                wavelengths_from,
                thermal_bands,
                check_values,
            )
        except BaseException:
            self._cube.close()
            raise

    def _setup(
        self,
        path,
        units,
        solar_spectrum,
        solar_distance,
        wavelengths_from,
        thermal_bands,
        check_values,
    ):
        cube = self._cube
        located, info = cube.located, cube.info
        label = located.label
        self.kind = kind = recognise(located.data, label)
        self.declared_units = units
        self.notices = []  # said by tell(), once the run is sure to start
        self.units = "radf" if units == "radiance" else units
        record = {
            "file": str(located.data.resolve()),
            "read_via": located.via,
            "kind": None if kind is None else kind.name,
        }
        if label is not None:
            record.update(_label_record(label))
        self._special = np.asarray(kind.invalid if kind is not None else (), dtype=info.dtype)
        self._check_declared(path, units, label, kind)
        check_unit_tag(cube, units, path)
        if wavelengths_from is not None:
            spectral = read_wavelength_file(wavelengths_from, info.bands)
            info = dataclasses.replace(
                info,
                wavelengths=spectral.wavelengths,
                wavelength_units=spectral.units,
                fwhm=None,
                spectral_source=spectral.source,
                spectral_header=None,
            )
        stated_in = wavelengths_from if wavelengths_from is not None else info.spectral_file
        check_wavelength_unit(info.wavelengths, info.wavelength_units, stated_in)
        wavelength_um = to_micrometers(info.wavelengths, info.wavelength_units)
        if info.wavelengths is None:
            self.notices.append(
                f"{located.data} gives no band wavelengths (no ENVI wavelength, band "
                "metadata, ISIS3 BandBin or --wavelengths-from): bands are numbered only"
            )
        elif wavelength_um is None:
            self.notices.append(
                f"{located.data} gives wavelengths without a known unit "
                f"({info.wavelength_units!r}): thermal bands cannot be found"
            )
        record["wavelengths"] = info.spectral_source if info.wavelengths is not None else "unknown"
        record["wavelength_units"] = info.wavelength_units
        bad = np.zeros(info.bands, bool) if info.bad_bands is None else np.asarray(info.bad_bands)
        record["bad_bands"] = [int(b) + 1 for b in np.flatnonzero(bad)]
        keep = np.ones(info.bands, bool)
        target = str(
            (label.keyword("TARGET_NAME") if label is not None else None)
            or (kind.target if kind is not None else "")
        ).upper()
        if target == "MOON" and wavelength_um is not None:
            self._thermal(located.data, wavelength_um, thermal_bands, keep, record)
        marked = np.flatnonzero(keep)  # before any bad band is left out
        if self._bad_choice == "exclude" and bad.any():
            keep &= ~bad
            record["bad_bands_choice"] = "left out of the bands solved"
            self.notices.append(
                f"{located.data}: bands {', '.join(str(int(b) + 1) for b in np.flatnonzero(bad))} "
                "are marked bad (bbl = 0): left out of the bands solved"
            )
        elif bad.any():
            record["bad_bands_choice"] = "not solved (status BAD_BAND)"
        if not keep.any():
            raise ValueError(
                f"{path}: no band is left to solve (every band is marked bad or left out "
                "as thermal)"
            )
        self.file_info = info
        self.marked_info = info if marked.size == info.bands else _select_bands(info, marked)
        self.band_indices = np.flatnonzero(keep)
        self._keep = None if keep.all() else self.band_indices
        if self._keep is not None:
            info = _select_bands(info, self._keep)
            bad = bad[self._keep]
            wavelength_um = None if wavelength_um is None else wavelength_um[self._keep]
        self.info = info
        self.bad_bands = bad
        self._factor = None
        if units == "radiance" and self._convert:
            self._factor = self._radiance_factor(
                path, label, wavelength_um, solar_spectrum, solar_distance, record
            )
            if check_values:
                self._check_converted(located.data, record)
        elif check_values:
            check_reflectance_values(self._sample(), units, located.data)
        self._record = record

    def _thermal(self, data, wavelength_um, thermal_bands, keep, record) -> None:
        """`_setup`'s lunar thermal bands (beyond `THERMAL_LIMIT_UM`): recorded, told, and
        cleared from `keep` with thermal_bands="exclude"."""
        thermal = np.flatnonzero(wavelength_um > THERMAL_LIMIT_UM)
        record["thermal_bands"] = [int(b) + 1 for b in thermal]
        record["thermal_choice"] = thermal_bands
        if thermal.size:
            listed = ", ".join(f"{b + 1} ({wavelength_um[b]:.3g} um)" for b in thermal)
            action = (
                "left out (thermal_bands='exclude')"
                if thermal_bands == "exclude"
                else "inverted as reflectance; add --thermal-bands exclude "
                "(thermal_bands='exclude') to leave them out"
            )
            self.notices.append(
                f"{data}: bands {listed} lie beyond {THERMAL_LIMIT_UM} um, where "
                "lunar spectra carry thermal emission (Clark et al. 2011; Li & Milliken "
                f"2016): {action}"
            )
            if thermal_bands == "exclude":
                keep[thermal] = False

    def _check_declared(self, path, units, label, kind) -> None:
        unit = label.unit if label is not None else None
        holds_radiance = radiance_unit(unit) or (kind is not None and kind.holds == "radiance")
        if units != "radiance" and holds_radiance:
            what = f"UNIT = {unit!r}" if radiance_unit(unit) else kind.name
            raise ValueError(
                f"{path} holds radiance ({what}), not {units}: give --units "
                "radiance (units='radiance') with a solar spectrum, or the I/F product"
            )
        if units == "radiance" and kind is not None and kind.holds not in ("radiance",):
            raise ValueError(
                f"{path} is {kind.name}, which holds {kind.holds}, not radiance: "
                f"give --units {kind.units}"
            )

    def _radiance_factor(
        self, path, label, wavelength_um, solar_spectrum, solar_distance, record
    ) -> np.ndarray:
        if wavelength_um is None:
            raise ValueError(
                f"{path}: converting radiance to I/F needs the band wavelengths "
                "with their unit; give --wavelengths-from"
            )
        distance: float | None
        if solar_distance is not None:
            distance, source = float(solar_distance), "given (solar_distance)"
            if not (math.isfinite(distance) and distance > 0):
                raise ValueError(
                    f"solar_distance must be a positive number of au, got {solar_distance!r}"
                )
        else:
            raw = label.keyword("SOLAR_DISTANCE") if label is not None else None
            distance, source = sun_distance_au(raw), f"label SOLAR_DISTANCE = {raw}"
            if distance is None:
                raise ValueError(
                    f"{path}: converting radiance to I/F needs the sun's distance; "
                    "its label has no SOLAR_DISTANCE: give --solar-distance AU"
                )
        spectrum = load_solar_spectrum(solar_spectrum)
        if solar_spectrum is None and self.kind is not None and self.kind.target == "MOON":
            self.notices.append(
                f"{path}: converting with the default {spectrum.source}; the M3 team's "
                "Level 2 used the archive's own table (M3G20110224_RFL_SOLAR_SPEC.TAB for "
                "global mode, M3T20110224_RFL_SOLAR_SPEC.TAB for target mode, in the L2 "
                "volume's CALIB directory): give it with --solar-spectrum to match L2"
            )
        fwhm_um = to_micrometers(self.info.fwhm, self.info.wavelength_units)
        irradiance = band_irradiance(spectrum, wavelength_um, fwhm_um)
        record.update(
            {
                "radiance_to_if": "I/F = pi L d^2 / F",
                "solar_spectrum": spectrum.source,
                "solar_spectrum_resampling": (
                    "Gaussian band response (FWHM); the centre value where the "
                    "spectrum is sampled more coarsely than FWHM / 4"
                )
                if fwhm_um is not None
                else "linear interpolation at band centres",
                "solar_distance_au": distance,
                "solar_distance_from": source,
                "band_irradiance_w_m2_um": [float(v) for v in irradiance],
            }
        )
        return (math.pi * distance**2 / irradiance).astype(self.info.dtype)

    def _check_converted(self, path, record) -> None:
        """Refuse radiance whose I/F, converted with the solar spectrum, no reflectance
        takes, naming the spectrum (a spectrum read in the wrong unit gives such I/F)."""
        values = self._sample()
        finite = values[np.isfinite(values)]
        if finite.size == 0:
            return
        median, high = float(np.median(finite)), float(np.percentile(finite, 99))
        if median < 0 or median > IF_MEDIAN_LIMIT or high > IF_HIGH_LIMIT:
            raise ValueError(
                f"{path} converted from radiance to I/F with the solar spectrum "
                f"{record['solar_spectrum']} and d = {record['solar_distance_au']:g} au "
                f"gives values no reflectance takes (I/F median {median:g}, 99th "
                f"percentile {high:g}): check the spectrum's units (wavelength; "
                "irradiance in W m^-2 um^-1 at 1 au), the sun's distance and the cube's "
                "radiance unit (W m^-2 um^-1 sr^-1)"
            )

    def _sample(self) -> np.ndarray:
        height = self.info.grid.height
        rows = np.unique(np.linspace(0, height - 1, min(SAMPLE_ROWS, height)).astype(int))
        return np.concatenate([self.read(slice(int(r), int(r) + 1)).ravel() for r in rows])

    @property
    def located(self):
        """How the file was opened (`lumaxlike._io.missions.products.Located`)."""
        return self._cube.located

    def read(self, rows: slice | None = None) -> np.ndarray:
        """Pixels of ``rows`` in `units`, shape ``(rows, cols, info.bands)``; NaN for
        nodata, the archive's special values and bad bands."""
        values = self._cube.read(rows)
        if self._special.size:
            values[np.isin(values, self._special)] = np.nan
        if self._keep is not None:
            values = np.ascontiguousarray(values[..., self._keep])
        if self.bad_bands.any():
            values[..., self.bad_bands] = np.nan
        if self._factor is not None:
            values = values * self._factor
        return values

    def tell(self) -> None:
        """Say the notices about this cube (thermal bands, unknown wavelengths) on stderr,
        once: file commands call it when every check has passed and the run starts."""
        for message in self.notices:
            notice(message)
        self.notices = []

    def record(self) -> dict:
        """What the cube is and what was done with it (JSON-able; ``lumaxlike_product``)."""
        return dict(self._record)

    def close(self) -> None:
        """Close the file."""
        self._cube.close()

    def __enter__(self) -> ProductCube:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _select_bands(info, keep):
    def pick(values):
        return None if values is None else np.asarray(values)[keep]

    return dataclasses.replace(
        info,
        bands=len(keep),
        wavelengths=pick(info.wavelengths),
        fwhm=pick(info.fwhm),
        bad_bands=pick(info.bad_bands),
        band_names=tuple(np.asarray(info.band_names, object)[keep]),
    )


def product_options(
    solar_spectrum=None,
    solar_distance=None,
    wavelengths_from=None,
    thermal_bands="keep",
) -> dict:
    """The `ProductCube` keyword arguments a file command passes through."""
    return {
        "solar_spectrum": solar_spectrum,
        "solar_distance": solar_distance,
        "wavelengths_from": wavelengths_from,
        "thermal_bands": thermal_bands,
    }


def _label_record(label) -> dict:
    """A product label's part of `ProductCube.record`: its path, unit, a few keywords and
    its photometry file."""
    record = {"label": str(label.label.resolve()), "label_unit": label.unit}
    for key in ("CH1:THERMAL_CORRECTION_FLAG", "TARGET_NAME", "DATA_SET_ID"):
        if label.keyword(key) is not None:
            record[key.lower().replace("ch1:", "")] = str(label.keyword(key))
    photometry = [
        str(v)
        for k, v in label.keywords.items()
        if "PHOTOMETR" in k.upper() and "FILE" in k.upper()
    ]
    if photometry:
        record["photometry_file"] = photometry[0]
    return record
