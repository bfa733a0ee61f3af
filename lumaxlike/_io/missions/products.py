"""Mission products as archived: which product a file is, and what that means for a run.

`locate` pairs a path with its label and header (``.IMG`` / ``.HDR`` / ``.LBL`` in
any case; an M3 image with the ``*_L2.LBL`` / ``*_L1B.LBL`` naming it) and says how GDAL
is to read its pixels. `recognise` names the product from its label or file name
(`PRODUCT_KINDS`): what it holds (I/F, Lambert-corrected I/F, radiance), whether it
is normalised to a standard geometry, and the body observed. `ProductCube` reads
such a cube for an inversion: special constants to NaN, radiance to I/F, the unit
declared checked against the label and the values, bad and thermal bands found, and a
record of all of it for the provenance (``lumaxlike_product``).
"""

from __future__ import annotations

import re
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .pds3 import Pds3Image, check_extent, find_label, find_sibling, raw_vrt, read_label

__all__ = [
    "PRODUCT_KINDS",
    "Located",
    "ProductKind",
    "ProductWarning",
    "locate",
    "recognise",
    "resolve_geometry",
    "standard_geometry_arrays",
]


class ProductWarning(UserWarning):
    """Something about a mission product the user should know (thermal bands, unknown
    wavelengths); the CLI prints it once on stderr."""


@dataclass(frozen=True)
class ProductKind:
    """A kind of archived product.

    Attributes:
        name: e.g. ``"M3 L2 reflectance (RFL)"``.
        holds: ``"I/F"``, ``"Lambert-corrected I/F"``, ``"radiance"`` or ``"geometry"``.
        units: lumaxlike's name of what it holds: ``"radf"`` (I/F), ``"reff"`` (I/F / cos
            i), ``"radiance"``; None for geometry.
        target: ``"MOON"``, ``"MARS"``.
        standard_geometry: (incidence, emission, phase) [deg] the product is normalised
            to; None for a product at its observed geometry.
        why: where the standard geometry comes from (one line, for messages and records).
        invalid: special values the archive uses without declaring them in every label.
    """

    name: str
    holds: str
    units: str | None
    target: str
    standard_geometry: tuple | None = None
    why: str | None = None
    invalid: tuple = ()


M3_L2 = ProductKind(
    "M3 L2 reflectance (RFL)",
    "I/F",
    "radf",
    "MOON",
    (30.0, 0.0, 30.0),
    "M3 Level 2 (CH1-ORB-L-M3-4-L2-REFLECTANCE-V1.0) is I/F photometrically corrected to "
    "i = 30, e = 0, g = 30 deg with topography removed (Besse et al. 2013, Icarus 222, 229)",
    (-999.0,),
)
M3_L1B = ProductKind("M3 L1B radiance (RDN)", "radiance", "radiance", "MOON", invalid=(-999.0,))
M3_OBS = ProductKind(
    "M3 L1B observation geometry (OBS)", "geometry", None, "MOON", invalid=(-999.0,)
)
CRISM_TRDR = ProductKind("CRISM TRDR I/F (TRR3)", "I/F", "radf", "MARS", invalid=(65535.0,))
# What the CRISM archive documents (sources cited where the geometry is chosen):
# - the data set descriptions: MTRDR (MRO-M-CRISM-5-RDR-MPTARGETED-V1.0) holds "spectral
#   reflectance (I/F) data corrected for photometric, atmospheric, and instrumental
#   effects"; TER (MRO-M-CRISM-4-RDR-TARGETED-V1.0, Seelos 2016) "attempts to represent the
#   spectrum the instrument would have measured looking at the surface of Mars at a
#   standard illumination geometry, in the absence of atmospheric gases, with aerosol
#   scattering normalized to that at the geometry within the observation that is closest
#   to nadir";
# - the CRISM team's description of these corrections (crism.jhuapl.edu, "corrected"
#   TRR3 browse products): "a simple photometric correction (division by the cosine of
#   the incidence angle)".
# So the correction normalises the illumination only (to i = 0: a Lambert surface's I/F at
# normal incidence); the emission stays as observed (near nadir: the products come from a
# targeted observation's central scan). lumaxlike takes e = 0, hence g = 0 (with i = 0,
# g = e): an assumption of its own, said in the record; the exact alternative undoes the
# correction with the DDR's incidence and inverts at the observed geometry.
_CRISM_LAMBERT = (
    "holds I/F divided by cos i (the CRISM team's Lambert photometric correction, "
    "areoid incidence; Seelos et al. 2024, Icarus 419, 115612) after atmospheric "
    "removal: normalised to normal illumination, i = 0; its emission is not normalised "
    "(a near-nadir central scan), and lumaxlike takes e = 0, so g = 0: for the observed "
    "emission use the DDR with --units reff --reff-incidence areoid"
)
CRISM_MTRDR = ProductKind(
    "CRISM MTRDR corrected I/F (MTR3)",
    "Lambert-corrected I/F",
    "radf",
    "MARS",
    (0.0, 0.0, 0.0),
    "CRISM MTRDR (I/F corrected for photometric, atmospheric and instrumental effects) "
    + _CRISM_LAMBERT,
    (65535.0,),
)
CRISM_TER = ProductKind(
    "CRISM TER corrected I/F (TER3)",
    "Lambert-corrected I/F",
    "radf",
    "MARS",
    (0.0, 0.0, 0.0),
    "CRISM TER (the spectrum at a standard illumination geometry, without atmospheric "
    "gases) " + _CRISM_LAMBERT,
    (65535.0,),
)
CRISM_DDR = ProductKind("CRISM DDR (geometry)", "geometry", None, "MARS", invalid=(65535.0,))

PRODUCT_KINDS = {
    kind.name: kind
    for kind in (M3_L2, M3_L1B, M3_OBS, CRISM_TRDR, CRISM_MTRDR, CRISM_TER, CRISM_DDR)
}
"""Every product lumaxlike recognises, by name."""

_M3_NAME = re.compile(r"^M3[GT]\d{8}T\d{6}_V\d{2}_(RFL|RDN|OBS|L2|L1B)$", re.IGNORECASE)
_CRISM_NAME = re.compile(
    r"^[A-Z]{3}[0-9A-F]{8}_[0-9A-F]{2}_([A-Z]{2})\d{3}[LSJ]_([A-Z]{3})\d$",
    re.IGNORECASE,
)


def recognise(data: Path, label: Pds3Image | None = None) -> ProductKind | None:
    """The archived product ``data`` is, from its label (data set, image object) or else
    its file name; None for anything else."""
    name = Path(data).stem.upper()
    text = ""
    if label is not None:
        text = " ".join(
            str(label.keyword(key) or "")
            for key in ("DATA_SET_ID", "PRODUCT_TYPE", "INSTRUMENT_ID", "PRODUCT_ID")
        ).upper()
        image = label.name.upper()
        if image == "RFL_IMAGE":
            return M3_L2
        if image == "SUP_IMAGE":
            return None
        if image == "RDN_IMAGE":
            return M3_L1B
        if image == "OBS_IMAGE":
            return M3_OBS
    m3 = _M3_NAME.match(name)
    if m3:
        return {"RFL": M3_L2, "RDN": M3_L1B, "OBS": M3_OBS}.get(m3.group(1).upper())
    crism = _CRISM_NAME.match(name)
    if crism or "CRISM" in text:
        kind, level = (crism.group(1).upper(), crism.group(2).upper()) if crism else ("", "")
        if kind == "DE" or "DDR" in level:
            return CRISM_DDR
        if level == "MTR" or "MAP_PROJECTED" in text:
            return CRISM_MTRDR
        if level == "TER" or "EMPIRICAL" in text:
            return CRISM_TER
        if kind == "IF" or level == "TRR":
            return CRISM_TRDR
    return None


@dataclass(frozen=True)
class Located:
    """A raster path resolved to what GDAL opens.

    Attributes:
        source: what to pass to ``rasterio.open`` (a path, or a VRT's XML text).
        data: the pixel file.
        label: the PDS3 image object describing it, or None.
        via: how it is read: ``"file"``, ``"ENVI header"``, ``"raw VRT from the PDS3
            label"`` (offset, interleave and sample type from the label, read by GDAL
            window by window), or ``"GDAL PDS driver"`` (lines with prefix bytes).
    """

    source: str
    data: Path
    label: Pds3Image | None
    via: str

    @property
    def applies_label_scaling(self) -> bool:
        """True when lumaxlike (not GDAL) applies the label's constants and scaling."""
        return self.via == "raw VRT from the PDS3 label"


ENVI_DATA_SUFFIXES = ("", ".img", ".dat", ".raw", ".bsq", ".bil", ".bip", ".envi")
"""Data-file names tried for an ENVI header ``name.hdr`` given as input (here, not in
`raster`, which imports this module: `_envi_data` is their one user)."""


def _envi_data(header: Path) -> Path:
    tried = []
    for suffix in ENVI_DATA_SUFFIXES:
        if suffix:
            found = find_sibling(header, suffix)
        else:
            found = header.with_suffix("") if header.with_suffix("").is_file() else None
        tried.append(header.with_suffix(suffix).name)
        if found is not None:
            return found
    if not header.exists():
        raise FileNotFoundError(f"input file {header} does not exist")
    raise FileNotFoundError(
        f"no data file found next to ENVI header {header} (tried "
        + ", ".join(tried)
        + ", in any case)"
    )


def _gdal_opens(path: Path, bands: int) -> bool:
    import rasterio
    import rasterio.errors

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            with rasterio.open(path) as dataset:
                return dataset.count == bands
    except rasterio.errors.RasterioIOError:
        return False


def _through_label(label_path: Path, data: Path | None) -> Located:
    image = read_label(label_path, data)
    if not image.data.is_file():
        raise FileNotFoundError(
            f"the PDS3 label {label_path} points at {image.data.name}, which is not beside it"
        )
    header = find_sibling(image.data, ".hdr")
    if header is not None:  # the header's size check is `raster.open_located`'s
        return Located(str(image.data), image.data, image, "ENVI header")
    check_extent(image)
    if image.prefix_bytes == 0:  # lumaxlike reads the layout itself, as the label says
        return Located(raw_vrt(image), image.data, image, "raw VRT from the PDS3 label")
    if _gdal_opens(label_path, image.bands):  # lines with prefixes: GDAL's PDS driver
        return Located(str(label_path), image.data, image, "GDAL PDS driver")
    raise ValueError(
        f"{label_path}: {image.name} has line prefix or suffix bytes, which "
        "neither lumaxlike nor GDAL's PDS driver reads here"
    )


def locate(path) -> Located:
    """Resolve a raster path given by the user: an ENVI header to its data file, a PDS3
    label to its image, an image to the label beside it (see the module docstring).

    Raises:
        FileNotFoundError: the path (or the file a label or header names) does not exist.
        ValueError: a label that cannot be read.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".hdr":
        data = _envi_data(path)
        label = find_label(data) if data.suffix.lower() == ".img" else None
        return Located(str(data), data, _quiet_label(label, data), "ENVI header")
    if not path.exists():
        raise FileNotFoundError(f"input file {path} does not exist")
    if suffix == ".lbl":
        return _through_label(path, None)
    if suffix == ".img":
        label = find_label(path)
        if find_sibling(path, ".hdr") is not None:
            return Located(str(path), path, _quiet_label(label, path), "ENVI header")
        if label is not None:
            return _through_label(label, path)
    return Located(str(path), path, None, "file")


def _quiet_label(label: Path | None, data: Path) -> Pds3Image | None:
    """The label's image object for ``data``, or None when there is no usable label."""
    if label is None:
        return None
    try:
        return read_label(label, data)
    except ValueError:
        return None


def standard_geometry_arrays(angles_deg, shape) -> dict:
    """A flat-surface geometry mapping for `lumaxlike.GeometryReader`: every pixel at
    ``(incidence, emission, phase)`` [deg] (read-only broadcast arrays, no memory)."""
    incidence, emission, phase = (float(a) for a in angles_deg)
    return {
        role: np.broadcast_to(np.float64(value), shape)
        for role, value in zip(("incidence", "emission", "phase"), (incidence, emission, phase))
    }


def describe_geometry(angles_deg) -> str:
    i, e, g = angles_deg
    return f"i = {i:g}, e = {e:g}, g = {g:g} deg"


def resolve_geometry(
    kind: ProductKind | None,
    path,
    geometry,
    dtm,
    shape,
    *,
    correction_undone: bool = False,
) -> tuple[object, dict | None]:
    """The geometry to invert a product with, and the record of why.

    A normalised product (`ProductKind.standard_geometry`) is inverted flat at its
    standard geometry when no geometry is given; an observed geometry or a DTM with it is
    refused unless ``correction_undone``.

    Returns:
        ``(geometry, record)``: ``geometry`` as given or the standard-geometry mapping;
        ``record`` None or ``{"standard_geometry_deg": [...], "why": ...}``.

    Raises:
        ValueError: naming ``path``, the standard geometry and the option, when an
            observed geometry comes with a normalised product; or when no geometry is
            given for a product at its observed geometry.
    """
    standard = None if kind is None or correction_undone else kind.standard_geometry
    if kind is None or standard is None:  # (standard is None whenever kind is)
        if geometry is None:
            what = f" ({kind.name})" if kind is not None else ""
            raise ValueError(
                f"geometry is required for {path}{what}: it is at its observed "
                "geometry (give the OBS/DDR backplane or angle rasters)"
            )
        record = None
        if correction_undone and kind is not None and kind.standard_geometry is not None:
            record = {
                "geometry": "observed",
                "why": "the user undid the product's photometric "
                f"normalisation to {describe_geometry(kind.standard_geometry)} "
                "(correction_undone)",
            }
        return geometry, record
    if geometry is not None or dtm is not None:
        given = "geometry" if geometry is not None else "dtm"
        raise ValueError(
            f"{path} is {kind.name}, normalised to {describe_geometry(standard)}: "
            f"{kind.why}. Inverting it with an observed {given} gives a wrong w. Leave out "
            "--geometry/--dtm (geometry=, dtm=) to invert it flat at its standard geometry; "
            "if you have undone the normalisation yourself, add --correction-undone "
            "(correction_undone=True)"
            + (
                "; or let lumaxlike undo the Lambert correction: --units reff "
                "--reff-incidence areoid with the DDR as --geometry"
                if kind.holds == "Lambert-corrected I/F"
                else ""
            )
        )
    return standard_geometry_arrays(standard, shape), {
        "geometry": "standard",
        "standard_geometry_deg": list(standard),
        "surface": "flat",
        "why": kind.why,
    }


def undoes_lambert(kind: ProductKind | None, units, reff_incidence) -> bool:
    """True when a Lambert-corrected product (CRISM MTRDR/TER: I/F / cos i, areoid) is read
    as REFF divided by the areoid incidence, which undoes that correction exactly."""
    return (
        kind is not None
        and kind.holds == "Lambert-corrected I/F"
        and units == "reff"
        and reff_incidence == "areoid"
    )


def refuse_normalised(located: Located, command: str) -> None:
    """Refuse a normalised product where observed geometries are needed (a multi-angle fit).

    Raises:
        ValueError: naming the file, the product and its standard geometry.
    """
    kind = recognise(located.data, located.label)
    if kind is not None and kind.standard_geometry is not None:
        raise ValueError(
            f"{located.data} is {kind.name}, normalised to "
            f"{describe_geometry(kind.standard_geometry)}: {command} needs cubes at "
            "their observed geometries (for M3, the L1B radiance with its OBS)"
        )
