"""Band centres, widths and the bad-band list of a cube, from whichever format holds them.

Read, in this order (the first that gives one value per band wins):

1. the ENVI header (``wavelength``, ``fwhm``, ``wavelength units``, ``bbl``), as GDAL's
   ENVI driver reports it (M3 ``*_RFL.HDR`` / ``*_RDN.HDR``);
2. per-band GDAL metadata items ``wavelength`` / ``wavelength_units`` / ``fwhm`` in any case
   (``WAVELENGTH`` as other tools write it; lumaxlike's GeoTIFFs; GDAL-written PDS4 and
   ISIS3 files keep them in their ``.aux.xml``);
3. GDAL's ``IMAGERY`` domain (``CENTRAL_WAVELENGTH_UM``, ``FWHM_UM``);
4. an ISIS3 cube's ``BandBin`` group (``Center``, ``Width``, with or without a unit; M3
   cubes imported by ISIS write nanometres without one: a unit-less ``Center`` above 100 is
   read as nm, at most 100 as um);
5. band descriptions that are plain numbers (``"1530.5"``, ``"1.53 um"``).

A wavelength file given by the user (CRISM's CDR ``WA`` image, or a text file with one
wavelength per band: `read_wavelength_file`) replaces all of these.
``bbl`` = 0 marks a bad band: lumaxlike does not solve it (see `lumaxlike.Status`
``BAD_BAND``).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = [
    "WAVELENGTH_UNITS_UM",
    "SpectralMetadata",
    "check_wavelength_unit",
    "micrometres_per_unit",
    "read_spectral_metadata",
    "read_wavelength_file",
    "to_micrometers",
    "unit_name",
]

_UNIT_NAMES = {
    "nm": "Nanometers",
    "nanometers": "Nanometers",
    "nanometer": "Nanometers",
    "um": "Micrometers",
    "µm": "Micrometers",
    "micrometers": "Micrometers",
    "micrometer": "Micrometers",
    "microns": "Micrometers",
    "micron": "Micrometers",
    "mm": "Millimeters",
    "millimeters": "Millimeters",
}
_TO_UM = {"Nanometers": 1e-3, "Micrometers": 1.0, "Millimeters": 1e3}

#: micrometres per wavelength unit, by a part of the unit's name (first match wins): how
#: the commands that match bands by wavelength read a cube's or a DataArray's unit
WAVELENGTH_UNITS_UM = (("nano", 1e-3), ("nm", 1e-3), ("micro", 1.0), ("um", 1.0), ("µm", 1.0))
_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_DESCRIPTION = re.compile(
    rf"^\s*({_NUMBER})\s*(nm|nanometers|um|µm|micrometers|microns)?\s*$", re.IGNORECASE
)


def unit_name(text) -> str | None:
    """``"Nanometers"`` / ``"Micrometers"`` / ``"Millimeters"`` for a unit in any spelling,
    None when unknown or absent."""
    if text is None:
        return None
    return _UNIT_NAMES.get(str(text).strip().lower())


def to_micrometers(values, units) -> np.ndarray | None:
    """Wavelengths in ``units`` converted to micrometres, or None when ``units`` is unknown."""
    name = unit_name(units) or (units if units in _TO_UM else None)
    if values is None or name is None:
        return None
    return np.asarray(values, dtype=np.float64) * _TO_UM[name]


#: band centres no reflectance spectrometer has, by unit: (lowest largest centre, highest
#: smallest centre) it may have, and the unit such values are in. All centres below 50 nm
#: are extreme ultraviolet (the far-UV spectrographs start near 57 nm), so micrometres
#: labelled nm (0.3-5 um: 0.3-5 "nm"); all above 100 um are beyond the thermal infrared,
#: so nanometres labelled um (300-5000 "um").
_IMPLAUSIBLE = {
    "Nanometers": (50.0, None, "micrometres (Micrometers)"),
    "Micrometers": (None, 100.0, "nanometres (Nanometers)"),
}


def micrometres_per_unit(units) -> float | None:
    """Micrometres per unit of a wavelength unit as `WAVELENGTH_UNITS_UM` reads it (by a
    part of its name, any case), or None when absent or unknown."""
    text = str(units or "").strip().lower()
    return next((factor for key, factor in WAVELENGTH_UNITS_UM if key in text), None)


FILE_UNIT_REMEDY = (
    "correct the wavelength unit (ENVI: wavelength units) or give the wavelengths with "
    "--wavelengths-from"
)


def check_wavelength_unit(wavelengths, units, where, remedy: str = FILE_UNIT_REMEDY) -> None:
    """Refuse band centres whose stated unit cannot be theirs (micrometres labelled nm,
    nanometres labelled um): read in the wrong unit, bands would be matched, resampled
    or left out at wavelengths a thousand times off, without a word.

    Args:
        wavelengths: band centres in ``units``, or None (nothing to check).
        units: their unit as the file states it (any spelling `unit_name` knows).
        where: what states them (ENVI header, wavelength file, a DataArray's
            coordinate), for the message.
        remedy: what the message tells the user to do (default: a file's).

    Raises:
        ValueError: naming ``where``, the values' range, the stated and the likely unit.
    """
    name = unit_name(units) or units
    if wavelengths is None or name not in _IMPLAUSIBLE:
        return
    values = np.asarray(wavelengths, dtype=np.float64)
    values = values[np.isfinite(values)]
    if values.size == 0:
        return
    lo, hi = float(values.min()), float(values.max())
    below, above, likely = _IMPLAUSIBLE[name]
    if (below is not None and hi < below) or (above is not None and lo > above):
        raise ValueError(
            f"{where} gives band centres {lo:g} to {hi:g} in {units}, which no reflectance "
            f"spectrometer measures: they look like {likely}; {remedy}"
        )


@dataclass(frozen=True, eq=False)  # holds arrays
class SpectralMetadata:
    """What a cube says about its bands.

    Attributes:
        wavelengths: band centres, shape ``(bands,)``, in ``units``; None when unknown.
        units: ``"Nanometers"``, ``"Micrometers"``, ...; None when unknown.
        fwhm: band widths (full width at half maximum) in ``units``; None when unknown.
        bad_bands: boolean ``(bands,)``, True where the file marks the band bad (ENVI
            ``bbl`` = 0); None when the file has no bad-band list.
        source: where the values came from, for the provenance (e.g. ``"ENVI header"``).
    """

    wavelengths: np.ndarray | None = None
    units: str | None = None
    fwhm: np.ndarray | None = None
    bad_bands: np.ndarray | None = None
    source: str | None = None

    @property
    def wavelengths_um(self) -> np.ndarray | None:
        """Band centres [um], or None when the centres or their unit are unknown."""
        return to_micrometers(self.wavelengths, self.units)

    @property
    def fwhm_um(self) -> np.ndarray | None:
        """Band widths [um], or None when unknown."""
        return to_micrometers(self.fwhm, self.units)

    def select(self, bands) -> SpectralMetadata:
        """The metadata of the chosen bands (an index array or boolean mask)."""

        def pick(values):
            return None if values is None else np.asarray(values)[bands]

        return SpectralMetadata(
            pick(self.wavelengths),
            self.units,
            pick(self.fwhm),
            pick(self.bad_bands),
            self.source,
        )


def _numbers(text: str, count: int, what: str, path) -> np.ndarray:
    try:
        values = [float(item) for item in str(text).strip().strip("{}").split(",") if item.strip()]
    except ValueError:
        raise ValueError(f"cannot parse the {what} list of {path}") from None
    if len(values) != count:
        raise ValueError(f"{path} lists {len(values)} values of {what} for {count} bands")
    return np.asarray(values, dtype=np.float64)


def _item(tags: dict, name: str):
    """A metadata item by name in any case (GDAL keeps the case each tool wrote)."""
    for key, value in tags.items():
        if key.lower() == name:
            return value
    return None


def _envi(dataset, path) -> SpectralMetadata | None:
    if "ENVI" not in (dataset.tag_namespaces() or []):
        return None
    envi = {key.lower(): value for key, value in dataset.tags(ns="ENVI").items()}
    count = dataset.count
    bad = None
    if "bbl" in envi:
        bad = _numbers(envi["bbl"], count, "bbl (bad-band list)", path) == 0
    if "wavelength" not in envi:
        return SpectralMetadata(bad_bands=bad, source="ENVI header") if bad is not None else None
    fwhm = _numbers(envi["fwhm"], count, "fwhm", path) if "fwhm" in envi else None
    return SpectralMetadata(
        _numbers(envi["wavelength"], count, "wavelength", path),
        unit_name(envi.get("wavelength_units")) or envi.get("wavelength_units"),
        fwhm,
        bad,
        "ENVI header",
    )


def _band_items(dataset, path) -> SpectralMetadata | None:
    tags = [dataset.tags(index) for index in dataset.indexes]
    centres = [_item(t, "wavelength") for t in tags]
    if not all(value is not None for value in centres):
        return None
    try:
        values = np.asarray([float(value) for value in centres])
        widths = [_item(t, "fwhm") for t in tags]
        fwhm = (
            np.asarray([float(v) for v in widths]) if all(v is not None for v in widths) else None
        )
    except ValueError:
        raise ValueError(f"cannot parse the per-band wavelength metadata of {path}") from None
    units = _item(tags[0], "wavelength_units")
    return SpectralMetadata(values, unit_name(units) or units, fwhm, None, "band metadata")


def _imagery(dataset) -> SpectralMetadata | None:
    imagery = [dataset.tags(index, ns="IMAGERY") for index in dataset.indexes]
    if not all("CENTRAL_WAVELENGTH_UM" in tags for tags in imagery):
        return None
    fwhm = None
    if all("FWHM_UM" in tags for tags in imagery):
        fwhm = np.asarray([float(tags["FWHM_UM"]) for tags in imagery])
    values = np.asarray([float(tags["CENTRAL_WAVELENGTH_UM"]) for tags in imagery])
    return SpectralMetadata(values, "Micrometers", fwhm, None, "GDAL IMAGERY metadata")


def json_domain(dataset, domain: str):
    """A GDAL ``json:*`` metadata domain as a dict, or None (rasterio splits its one JSON
    string at the first ``:`` into key and value)."""
    if domain not in (dataset.tag_namespaces() or []):
        return None
    text = "".join(f"{key}:{value}" for key, value in dataset.tags(ns=domain).items())
    try:
        return json.loads(text)
    except ValueError:
        return None


def _isis_values(entry, count):
    """``(values, unit)`` of a BandBin keyword: a list, or ``{value: [...], unit: ...}``."""
    unit = None
    if isinstance(entry, dict):
        unit, entry = entry.get("unit"), entry.get("value")
    if not isinstance(entry, list):
        entry = [entry]
    try:
        values = np.asarray([float(v) for v in entry])
    except (TypeError, ValueError):
        return None, None
    return (values, unit) if len(values) == count else (None, None)


def _isis3(dataset) -> SpectralMetadata | None:
    label = json_domain(dataset, "json:ISIS3")
    bandbin = (label or {}).get("IsisCube", {}).get("BandBin")
    if not isinstance(bandbin, dict):
        return None
    keys = {key.lower(): value for key, value in bandbin.items()}
    centre, unit = _isis_values(keys.get("center"), dataset.count)
    if centre is None:
        return None
    width, width_unit = _isis_values(keys.get("width"), dataset.count)
    units = unit_name(unit) or unit_name(width_unit)
    source = "ISIS3 BandBin"
    if units is None:  # ISIS imports of M3 (and most spectrometers) write nm without a unit
        units = "Nanometers" if np.nanmin(centre) > 100 else "Micrometers"
        source += f" (no unit given; read as {units.lower()} from the values' magnitude)"
    return SpectralMetadata(centre, units, width, None, source)


def _descriptions(dataset) -> SpectralMetadata | None:
    matches = [
        match for match in (_DESCRIPTION.match(d or "") for d in dataset.descriptions) if match
    ]
    if len(matches) != len(dataset.descriptions):
        return None
    units = {unit_name(m.group(2)) for m in matches}
    return SpectralMetadata(
        np.asarray([float(m.group(1)) for m in matches]),
        units.pop() if len(units) == 1 else None,
        None,
        None,
        "band descriptions",
    )


def read_spectral_metadata(dataset, path) -> SpectralMetadata:
    """The spectral metadata of an open rasterio dataset (see the module docstring).

    Returns:
        `SpectralMetadata`; every field None when the file gives nothing.

    Raises:
        ValueError: naming ``path``, when a list is malformed or its length differs from
            the number of bands.
    """
    envi = _envi(dataset, path)
    if envi is not None and envi.wavelengths is not None:
        return envi
    for reader in (
        lambda: _band_items(dataset, path),
        lambda: _imagery(dataset),
        lambda: _isis3(dataset),
        lambda: _descriptions(dataset),
    ):
        found = reader()
        if found is not None:
            bad = None if envi is None else envi.bad_bands
            return SpectralMetadata(found.wavelengths, found.units, found.fwhm, bad, found.source)
    return envi if envi is not None else SpectralMetadata()


def read_wavelength_file(path, bands: int) -> SpectralMetadata:
    """Band centres from a wavelength file given by the user.

    Args:
        path: a CRISM CDR ``WA`` file (its ``.IMG`` or ``.LBL``: one line, wavelengths in
            nm per detector column and band, 65535 where a column has none; the median
            over the columns is taken), or a text/CSV file with one wavelength per band
            in its first column (a header line is skipped; values above 100 are read as
            nm, others as um).
        bands: number of bands of the cube.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: naming ``path``, when it does not give one wavelength per band.
    """
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"wavelength file {path} does not exist")
    if path.suffix.lower() in (".img", ".lbl"):
        return _crism_wavelength_file(path, bands)
    values: list[float] = []
    for line in path.read_text().splitlines():
        first = line.replace(";", ",").split(",")[0].strip()
        if not first:
            continue
        try:
            values.append(float(first))
        except ValueError:
            if values:
                raise ValueError(f"wavelength file {path}: cannot read {line!r}") from None
    if len(values) != bands:
        raise ValueError(
            f"wavelength file {path} gives {len(values)} wavelengths for {bands} bands"
        )
    centres = np.asarray(values)
    units = "Nanometers" if np.nanmin(centres) > 100 else "Micrometers"
    return SpectralMetadata(centres, units, None, None, f"wavelength file {path}")


def _crism_wavelength_file(path: Path, bands: int) -> SpectralMetadata:
    import rasterio

    from ..missions.pds3 import check_extent, find_label, find_sibling, raw_vrt, read_label

    label = (
        path if path.suffix.lower() == ".lbl" else (find_label(path) or find_sibling(path, ".lbl"))
    )
    if label is None:
        raise ValueError(f"wavelength file {path} has no PDS3 label beside it")
    image = read_label(label)
    check_extent(image)
    with rasterio.open(raw_vrt(image)) as dataset:
        values = dataset.read().astype(np.float64)  # (bands, 1, columns): small
    for constant in (*image.special, 65535.0):
        values[values == constant] = np.nan
    if values.shape[0] != bands:
        raise ValueError(
            f"wavelength file {path} has {values.shape[0]} bands for a cube of {bands}"
        )
    centres = np.nanmedian(values.reshape(bands, -1), axis=1)
    return SpectralMetadata(
        centres,
        "Nanometers",
        None,
        None,
        f"CRISM wavelength file {path.name} (median over detector columns)",
    )
