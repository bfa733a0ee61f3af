"""PDS3 detached labels: finding them, reading them with ``pdr``, and opening their images.

Why ``pdr`` for labels and GDAL for pixels: GDAL's PDS driver reads a CRISM TRDR or DDR
label but not M3's ``RDN_FILE`` / ``OBS_FILE`` / ``RFL_FILE`` wrapper objects (it stops at
"CORE_ITEM_BYTES of 0"), and it reports neither ``UNIT``, ``SOLAR_DISTANCE`` nor mission
keywords. ``pdr`` (the Planetary Data Reader, Million Concepts) parses every PDS3 label of
these missions (and PDS4, ISIS3, FITS), but it loads whole arrays into memory, with no
windowed reads. So lumaxlike reads labels with ``pdr`` and streams pixels with GDAL: through
the product's ENVI header where the archive ships one (M3), otherwise through a GDAL raw
VRT built from the label's layout (`raw_vrt`), which GDAL reads window by window.

Files are paired case-insensitively (``.IMG`` / ``.img``, ``.LBL`` / ``.lbl``, ``.HDR`` /
``.hdr``); an M3 image (``*_RFL.IMG``, ``*_RDN.IMG``, ``*_OBS.IMG``) is described by the
product label ``*_L2.LBL`` / ``*_L1B.LBL`` beside it, found through its pointers.
"""

from __future__ import annotations

import math
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from xml.sax.saxutils import escape

import numpy as np

__all__ = [
    "Pds3Image",
    "check_extent",
    "find_label",
    "find_sibling",
    "raw_vrt",
    "read_label",
]

#: PDS3 SAMPLE_TYPE -> (NumPy kind, byte order) for the types the missions use
SAMPLE_TYPES = {
    "PC_REAL": ("f", "<"),
    "IEEE_REAL": ("f", ">"),
    "REAL": ("f", ">"),
    "FLOAT": ("f", ">"),
    "MSB_INTEGER": ("i", ">"),
    "INTEGER": ("i", ">"),
    "SUN_INTEGER": ("i", ">"),
    "LSB_INTEGER": ("i", "<"),
    "PC_INTEGER": ("i", "<"),
    "VAX_INTEGER": ("i", "<"),
    "MSB_UNSIGNED_INTEGER": ("u", ">"),
    "UNSIGNED_INTEGER": ("u", ">"),
    "SUN_UNSIGNED_INTEGER": ("u", ">"),
    "LSB_UNSIGNED_INTEGER": ("u", "<"),
    "PC_UNSIGNED_INTEGER": ("u", "<"),
    "VAX_UNSIGNED_INTEGER": ("u", "<"),
}
#: label keywords whose values mark pixels that hold no measurement
SPECIAL_CONSTANTS = (
    "INVALID_CONSTANT",
    "MISSING_CONSTANT",
    "NULL",
    "CORE_NULL",
    "CORE_LOW_REPR_SATURATION",
    "CORE_HIGH_REPR_SATURATION",
)
_GDAL_TYPES = {
    "f4": "Float32",
    "f8": "Float64",
    "i2": "Int16",
    "i4": "Int32",
    "u1": "Byte",
    "u2": "UInt16",
    "u4": "UInt32",
    "i1": "Int8",
}
_INTERLEAVE = {
    "BAND_SEQUENTIAL": "bsq",
    "LINE_INTERLEAVED": "bil",
    "SAMPLE_INTERLEAVED": "bip",
}


def find_sibling(path: Path, suffix: str) -> Path | None:
    """The file beside ``path`` with its stem and ``suffix`` in any case, or None."""
    path = Path(path)
    wanted = (path.stem + suffix).lower()
    exact = path.with_suffix(suffix)
    if exact.is_file():
        return exact
    try:
        for candidate in path.parent.iterdir():
            if candidate.name.lower() == wanted and candidate.is_file():
                return candidate
    except OSError:
        return None
    return None


@dataclass(frozen=True)
class Pds3Image:
    """One image object of a PDS3 label, as lumaxlike needs it.

    Attributes:
        label: the label file.
        data: the image file its pointer names.
        name: the image object's name (``IMAGE``, ``RFL_IMAGE``, ``RDN_IMAGE``, ...).
        offset: byte offset of the image in ``data``.
        lines, samples, bands: image size.
        dtype: stored sample type (NumPy dtype with byte order).
        interleave: ``"bsq"``, ``"bil"`` or ``"bip"``.
        unit: the object's ``UNIT`` (None when absent or ``"N/A"``).
        special: values that mark pixels without a measurement (invalid/missing/null
            constants), in stored units.
        scale, offset_value: ``SCALING_FACTOR`` and ``OFFSET`` (value = stored * scale +
            offset_value).
        band_names: the object's ``BAND_NAME`` list, or None.
        prefix_bytes: ``LINE_PREFIX_BYTES`` + ``LINE_SUFFIX_BYTES`` (0 for a plain
            image; `raw_vrt` does not read lines with prefixes).
        keywords: the label's top-level keywords (strings, numbers, ``{value, units}``).
        record_bytes, file_records: ``RECORD_BYTES`` and ``FILE_RECORDS`` of the file
            holding the image (None when the label has none).
        record_type: ``RECORD_TYPE`` (``"FIXED_LENGTH"``, ...; None when absent).
    """

    label: Path
    data: Path
    name: str
    offset: int
    lines: int
    samples: int
    bands: int
    dtype: np.dtype
    interleave: str
    unit: str | None
    special: tuple
    scale: float = 1.0
    offset_value: float = 0.0
    band_names: tuple | None = None
    prefix_bytes: int = 0
    keywords: dict = field(default_factory=dict)
    record_bytes: int | None = None
    file_records: int | None = None
    record_type: str | None = None

    @property
    def extent(self) -> int:
        """Bytes the image occupies in ``data`` from ``offset``: LINES x LINE_SAMPLES x
        BANDS x SAMPLE_BITS / 8, plus the prefix and suffix bytes of each line (of each
        band, but in a sample-interleaved image)."""
        records = self.lines * (1 if self.interleave == "bip" else self.bands)
        pixels = self.lines * self.samples * self.bands * self.dtype.itemsize
        return pixels + self.prefix_bytes * records

    def keyword(self, name: str):
        """A top-level label keyword (case-insensitive; a ``{value, units}`` quantity as is)."""
        for key, value in self.keywords.items():
            if key.upper() == name.upper():
                return value
        return None


def _metadata(label: Path):
    import pdr

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # pdr warns about objects it will not load
            return pdr.read(str(label), skip_existence_check=True).metadata
    except Exception as error:  # noqa: BLE001 - pdr raises many kinds on a bad label
        raise ValueError(f"cannot read the PDS3 label {label} (pdr: {error})") from None


def _pointers(block, prefix=()):
    """``(object path, pointer name, pointer value, the block holding it)`` of image pointers."""
    for key, value in block.items():
        if (
            isinstance(key, str)
            and key.startswith("^")
            and "IMAGE" in key.upper()
            and "HEADER" not in key.upper()
        ):
            yield prefix, key[1:], value, block
        elif hasattr(value, "items"):
            yield from _pointers(value, (*prefix, key))


def _find_object(block, name: str):
    for key, value in block.items():
        if key == name and hasattr(value, "items"):
            return value
        if hasattr(value, "items"):
            found = _find_object(value, name)
            if found is not None:
                return found
    return None


def _number(value):
    if isinstance(value, dict) and "value" in value:
        value = value["value"]
    return value


def _byte_offset(pointer, record_bytes, label: Path) -> tuple[Path, int]:
    """The file and byte offset a PDS3 pointer names (``"F.IMG"``, ``("F.IMG", record)``,
    ``("F.IMG", n <BYTES>)``, or a record number in an attached label)."""
    if isinstance(pointer, str):
        return _target(label, pointer), 0
    if isinstance(pointer, (tuple, list)) and len(pointer) == 2:
        name, where = pointer
        path = _target(label, str(name))
    else:
        path, where = label, pointer
    if isinstance(where, dict) and str(where.get("units", "")).upper() == "BYTES":
        return path, int(where["value"]) - 1
    if record_bytes is None:
        raise ValueError(f"{label}: a pointer counts records but the label has no RECORD_BYTES")
    return path, (int(_number(where)) - 1) * int(record_bytes)


def _target(label: Path, name: str) -> Path:
    target = find_sibling(label.parent / name, Path(name).suffix)
    return target if target is not None else label.parent / name


def read_label(label, data=None) -> Pds3Image:
    """The image object of a PDS3 label (the one pointing at ``data`` when given).

    Args:
        label: a PDS3 label file (``.LBL``), detached or attached.
        data: the image file wanted, when the label describes several (M3 L1B labels
            point at the RDN, LOC and OBS images); None for the first image object.

    Returns:
        `Pds3Image`.

    Raises:
        ValueError: naming the label, when it cannot be parsed, names no image object
            (or none for ``data``), or describes a layout lumaxlike cannot read.
    """
    label = Path(label)
    meta = _metadata(label)
    found = list(_pointers(meta))
    if data is not None:
        wanted = Path(data).name.lower()
        found = [
            item
            for item in found
            if isinstance(item[2], str)
            and item[2].lower() == wanted
            or isinstance(item[2], (tuple, list))
            and str(item[2][0]).lower() == wanted
        ]
    if not found:
        what = f"no image object for {Path(data).name}" if data is not None else "no image object"
        raise ValueError(f"the PDS3 label {label} has {what}")
    _, name, pointer, holder = found[0]
    image = _find_object(holder, name) or _find_object(meta, name)
    if image is None:
        raise ValueError(f"the PDS3 label {label} points at {name} but has no OBJECT = {name}")
    record_bytes = holder.get("RECORD_BYTES", meta.get("RECORD_BYTES"))
    file_records = holder.get("FILE_RECORDS", meta.get("FILE_RECORDS"))
    record_type = holder.get("RECORD_TYPE", meta.get("RECORD_TYPE"))
    path, offset = _byte_offset(pointer, record_bytes, label)

    def get(key, default=None):
        return _number(image.get(key, default))

    sample_type = str(get("SAMPLE_TYPE", "")).upper().replace(" ", "_")
    bits = int(get("SAMPLE_BITS", 0) or 0)
    if sample_type not in SAMPLE_TYPES or bits % 8:
        raise ValueError(
            f"{label}: {name} has SAMPLE_TYPE {sample_type or 'none'} with "
            f"SAMPLE_BITS {bits}, which lumaxlike cannot read"
        )
    kind, order = SAMPLE_TYPES[sample_type]
    dtype = np.dtype(f"{order}{kind}{bits // 8}")
    storage = str(get("BAND_STORAGE_TYPE", "BAND_SEQUENTIAL")).upper()
    if storage not in _INTERLEAVE:
        raise ValueError(
            f"{label}: {name} has BAND_STORAGE_TYPE {storage}, which lumaxlike cannot read"
        )
    unit = get("UNIT")
    unit = None if unit is None or str(unit).strip().upper() in ("N/A", "NONE", "") else str(unit)
    special = tuple(
        float(_number(image[key]))
        for key in SPECIAL_CONSTANTS
        if key in image and _is_number(_number(image[key]))
    )
    names = image.get("BAND_NAME")
    keywords = {
        key: value
        for key, value in meta.items()
        if (isinstance(value, dict) and "value" in value or not hasattr(value, "items"))
        and not str(key).startswith("^")
    }
    return Pds3Image(
        label=label,
        data=path,
        name=name,
        offset=offset,
        lines=int(get("LINES")),
        samples=int(get("LINE_SAMPLES")),
        bands=int(get("BANDS", 1)),
        dtype=dtype,
        interleave=_INTERLEAVE[storage],
        unit=unit,
        special=special,
        scale=float(get("SCALING_FACTOR", 1.0)),
        offset_value=float(get("OFFSET", 0.0)),
        prefix_bytes=int(get("LINE_PREFIX_BYTES", 0) or 0) + int(get("LINE_SUFFIX_BYTES", 0) or 0),
        band_names=tuple(str(n) for n in names) if isinstance(names, (tuple, list)) else None,
        keywords=keywords,
        record_bytes=_count(record_bytes),
        file_records=_count(file_records),
        record_type=None if record_type is None else str(record_type).strip().upper(),
    )


def _count(value) -> int | None:
    value = _number(value)
    return int(value) if _is_number(value) and value == int(value) and value > 0 else None


def check_extent(image: Pds3Image) -> None:
    """Refuse an image whose label disagrees with the size of its data file.

    Checked: that the image (``offset`` + `Pds3Image.extent`) lies inside the file, and,
    for fixed-length records, that ``FILE_RECORDS`` x ``RECORD_BYTES`` is the file's
    size. Either fails for a truncated file or a wrong ``RECORD_BYTES`` (the image then
    read from a wrong offset), which GDAL would read without complaint (missing bytes
    as 0).

    Raises:
        ValueError: naming the label, the data file, its size and what the label says
            [bytes].
    """
    try:
        size = image.data.stat().st_size
    except OSError as error:
        raise ValueError(f"cannot read the size of {image.data} ({error})") from None
    found = []
    fixed = image.record_type in (None, "FIXED_LENGTH")
    if fixed and image.record_bytes is not None and image.file_records is not None:
        expected = image.record_bytes * image.file_records
        if expected != size:
            found.append(
                f"FILE_RECORDS = {image.file_records} of RECORD_BYTES = "
                f"{image.record_bytes} ({expected} bytes)"
            )
    end = image.offset + image.extent
    if end > size:
        found.append(
            f"{image.name} at bytes {image.offset} to {end} ({image.lines} lines x "
            f"{image.samples} samples x {image.bands} bands x {image.dtype.itemsize} bytes)"
        )
    if found:
        raise ValueError(
            f"the PDS3 label {image.label} gives {'; '.join(found)}, but its data file "
            f"{image.data} holds {size} bytes: the file is truncated or the label is wrong"
        )


def _is_number(value) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def find_label(data) -> Path | None:
    """The PDS3 label describing the image file ``data``, or None.

    Tried in order: ``<stem>.LBL`` in any case, then (M3) the labels beside it whose
    name shares the product prefix (``M3G..._RFL.IMG`` -> ``M3G..._L2.LBL``) and whose
    pointers name ``data``.
    """
    data = Path(data)
    same = find_sibling(data, ".lbl")
    if same is not None:
        return same
    prefix = data.stem.rsplit("_", 1)[0].lower()
    try:
        candidates = sorted(
            p
            for p in data.parent.iterdir()
            if p.suffix.lower() == ".lbl" and p.name.lower().startswith(prefix)
        )
    except OSError:
        return None
    for candidate in candidates:
        try:
            read_label(candidate, data)
        except ValueError:
            continue
        return candidate
    return None


def raw_vrt(image: Pds3Image) -> str:
    """A GDAL VRT (XML text) reading ``image``'s pixels straight from its file, by windows.

    The label's special constants are not set as nodata here (a VRT holds one per band);
    the caller maps them to NaN.
    """
    size = image.dtype.itemsize
    line = image.samples * size
    layouts = {  # (start of band b, pixel offset, line offset) [bytes]
        "bsq": (lambda b: b * image.lines * line, size, line),
        "bil": (lambda b: b * line, size, image.bands * line),
        "bip": (lambda b: b * size, image.bands * size, image.bands * line),
    }
    start, pixel, line_offset = layouts[image.interleave]
    gdal_type = _GDAL_TYPES.get(image.dtype.str[1:])
    if gdal_type is None:
        raise ValueError(f"{image.label}: sample type {image.dtype} is not supported")
    order = (
        "LSB"
        if image.dtype.byteorder in ("<", "|")
        or (image.dtype.byteorder == "=" and np.little_endian)
        else "MSB"
    )
    source = escape(str(image.data.resolve()))
    bands = "".join(
        f'<VRTRasterBand dataType="{gdal_type}" band="{b + 1}" subClass="VRTRawRasterBand">'
        f'<SourceFilename relativeToVRT="0">{source}</SourceFilename>'
        f"<ImageOffset>{image.offset + start(b)}</ImageOffset>"
        f"<PixelOffset>{pixel}</PixelOffset><LineOffset>{line_offset}</LineOffset>"
        f"<ByteOrder>{order}</ByteOrder></VRTRasterBand>"
        for b in range(image.bands)
    )
    size_xml = f'rasterXSize="{image.samples}" rasterYSize="{image.lines}"'
    return f"<VRTDataset {size_xml}>{bands}</VRTDataset>"
