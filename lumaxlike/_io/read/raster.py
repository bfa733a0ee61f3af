"""Reading reflectance cubes and single-band rasters with rasterio, whole or by row windows.

Arrays returned here follow lumaxlike's layout: ``(rows, cols, bands)`` for cubes and
``(rows, cols)`` for single-band rasters, floating point, with NaN wherever the file marks
a pixel as nodata (nodata value, per-band mask or alpha band). Band scale factors and
offsets stored in the file (``rasterio`` ``scales`` / ``offsets``) are applied.

Wavelengths, band widths and the bad-band list are read by
:mod:`lumaxlike._io.read.spectral_metadata` (ENVI header, per-band metadata in any case, GDAL's
``IMAGERY`` domain, ISIS3 ``BandBin``, numeric band descriptions). A cube without any of
these has ``wavelengths = None``. PDS3 labels are paired with their images by
:mod:`lumaxlike._io.missions.products`.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import rasterio
import rasterio.errors
from affine import Affine
from rasterio.crs import CRS
from rasterio.windows import Window

__all__ = [
    "CubeInfo",
    "CubeReader",
    "RasterGrid",
    "RasterReadError",
    "check_aligned",
    "iter_cube_blocks",
    "iter_row_slices",
    "open_raster",
    "pixel_size_m",
    "read_cube",
]

GDAL_CACHE_BYTES = 128 * 2**20
"""GDAL block cache used while streaming files [bytes]; bounds the memory GDAL keeps."""


@dataclass(frozen=True)
class RasterGrid:
    """Pixel grid of a raster file: size, georeferencing and where it came from.

    Attributes:
        path: the file.
        height, width: rows and columns [pixels].
        crs: ``rasterio.crs.CRS`` or None when the file has none.
        transform: affine pixel -> map transform (``Affine``).
    """

    path: Path
    height: int
    width: int
    crs: CRS | None
    transform: Affine

    def differences(self, other: RasterGrid) -> list[str]:
        """Human-readable list of what differs between two grids (empty when aligned)."""
        found = []
        if (self.height, self.width) != (other.height, other.width):
            found.append(
                f"shape {self.height} x {self.width} vs {other.height} x {other.width} "
                "(rows x cols)"
            )
        tolerance = 1e-9 * max(abs(self.transform.a), abs(self.transform.e), 1e-300)
        if not self.transform.almost_equals(other.transform, precision=tolerance):
            found.append(f"transform {tuple(self.transform)[:6]} vs {tuple(other.transform)[:6]}")
        if self.crs != other.crs:
            found.append(f"CRS {_crs_name(self.crs)} vs {_crs_name(other.crs)}")
        return found


def _crs_name(crs) -> str:
    if crs is None:
        return "none"
    return crs.to_string() or crs.to_wkt()


def check_aligned(reference: RasterGrid, other: RasterGrid, role: str) -> None:
    """Raise ValueError if ``other`` is not on the same pixel grid as ``reference``.

    Args:
        reference: grid of the reflectance cube.
        other: grid of a geometry or DTM raster.
        role: what ``other`` is for, used in the message (e.g. ``"geometry"``).

    Raises:
        ValueError: naming both files and every difference (shape, transform, CRS).
    """
    found = reference.differences(other)
    if found:
        raise ValueError(
            f"{role} raster {other.path} is not aligned with cube {reference.path}: "
            + "; ".join(found)
        )


def open_raster(path) -> rasterio.io.DatasetReader:
    """Open a raster file for reading with clear errors.

    An ENVI header (``name.hdr``) may be given instead of its data file, a PDS3 label
    (``.LBL``) instead of its image, and a PDS3 image is opened through the label beside
    it (see :func:`lumaxlike._io.missions.products.locate`; names paired in any case).

    Args:
        path: file path (``str`` or ``os.PathLike``).

    Returns:
        an open ``rasterio`` dataset (use it as a context manager).

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: the file exists but GDAL cannot read it as a raster.
    """
    return open_located(path)[0]


def open_located(path):
    """:func:`open_raster` and the :class:`lumaxlike._io.missions.products.Located` it opened."""
    from ..missions.products import locate

    located = locate(Path(path))
    try:
        dataset = rasterio.open(located.source)
    except rasterio.errors.RasterioIOError as error:
        hint = ""
        if located.via == "file" and Path(path).suffix.lower() == ".img":
            hint = " (no ENVI header .hdr or PDS3 label .lbl found beside it, in any case)"
        raise ValueError(f"cannot read {path} as a raster{hint} (GDAL: {error})") from None
    try:
        check_envi_size(dataset)
    except BaseException:
        dataset.close()
        raise
    return dataset, located


#: bytes per value of each ENVI ``data type``
ENVI_DATA_TYPE_BYTES = {1: 1, 2: 2, 3: 4, 4: 4, 5: 8, 6: 8, 9: 16, 12: 2, 13: 4, 14: 8, 15: 8}


def envi_header(dataset) -> Path | None:
    """The ENVI header (``.hdr`` in any case) GDAL read ``dataset`` through, or None."""
    if dataset.driver != "ENVI":
        return None
    for name in dataset.files:
        if str(name).lower().endswith(".hdr"):
            return Path(name)
    return None


def check_envi_size(dataset) -> None:
    """Refuse an ENVI raster whose header disagrees with the size of its data file.

    GDAL reads the pixels at the offsets the header's ``samples``, ``lines``, ``bands``,
    ``data type`` and ``header offset`` give, whatever the file's size: a header with a
    wrong band count scrambles the pixels, and a truncated file reads as zeros. So the
    data file must hold exactly ``header offset`` + samples x lines x bands x bytes.
    Other formats, and compressed ENVI files, are left alone.

    Raises:
        ValueError: naming the header, the data file and both sizes [bytes].
    """
    header = envi_header(dataset)
    if header is None:
        return
    tags = {key.lower(): value for key, value in dataset.tags(ns="ENVI").items()}
    try:
        if int(tags.get("file_compression", 0) or 0):
            return
        dims = [int(tags[key]) for key in ("samples", "lines", "bands")]
        item = ENVI_DATA_TYPE_BYTES[int(tags["data_type"])]
        offset = int(tags.get("header_offset", 0) or 0)
    except (KeyError, ValueError):
        return  # GDAL opened it from defaults it chose: nothing to compare
    data = Path(dataset.name)
    try:
        size = data.stat().st_size
    except OSError:
        return  # not a plain file (a /vsi path)
    expected = offset + math.prod(dims) * item
    if size != expected:
        samples, lines, bands = dims
        raise ValueError(
            f"the ENVI header {header} describes {samples} samples x {lines} lines x "
            f"{bands} bands x {item} bytes + {offset} header bytes = {expected} bytes, "
            f"but its data file {data} holds {size} bytes: the file is truncated or the "
            "header is wrong (check bands, samples, lines, data type, header offset)"
        )


class RasterReadError(ValueError):
    """A raster opened fine but some of its pixels cannot be read (truncated or damaged file)."""


def float_dtype(dtype) -> np.dtype:
    """Floating-point type used in memory for data stored as ``dtype`` (at least float32)."""
    return np.result_type(np.dtype(dtype), np.float32)


def _read_window(dataset, rows: slice | None, indexes=None) -> np.ndarray:
    """Read bands ``indexes`` of ``rows`` as float with NaN for nodata: (bands, rows, cols)."""
    window = None if rows is None else Window(0, rows.start, dataset.width, rows.stop - rows.start)
    indexes = list(indexes) if indexes is not None else list(dataset.indexes)
    try:
        data = dataset.read(indexes, window=window, masked=True)
    except rasterio.errors.RasterioError as error:
        where = "" if rows is None else f" rows {rows.start} to {rows.stop - 1} (0-based) of"
        cause = error.__cause__ or error.__context__ or error
        raise RasterReadError(
            f"cannot read{where} {dataset.name}, the file may be truncated or "
            f"damaged (GDAL: {cause})"
        ) from None
    dtype = float_dtype(dataset.dtypes[indexes[0] - 1])
    values = np.ma.filled(data.astype(dtype), np.nan)
    scales = np.asarray([dataset.scales[i - 1] for i in indexes], dtype=dtype)
    offsets = np.asarray([dataset.offsets[i - 1] for i in indexes], dtype=dtype)
    if np.any(scales != 1) or np.any(offsets != 0):
        values = values * scales[:, None, None] + offsets[:, None, None]
    return values


def iter_row_slices(height: int, chunk_rows: int) -> Iterator[slice]:
    """Consecutive row slices ``[0, chunk_rows), [chunk_rows, 2 chunk_rows), ...`` up to ``height``."""
    if chunk_rows < 1:
        raise ValueError(f"chunk_rows must be a positive number of rows, got {chunk_rows}")
    for start in range(0, height, chunk_rows):
        yield slice(start, min(start + chunk_rows, height))


@dataclass(frozen=True, eq=False)  # holds an array: compare fields, not objects
class CubeInfo:
    """What lumaxlike needs to know about a reflectance cube, without its pixels.

    Attributes:
        grid: pixel grid (path, size, CRS, transform).
        bands: number of spectral bands.
        dtype: NumPy floating type the pixels are read as (at least float32).
        nodata: the file's nodata value (None when it has none); read as NaN.
        wavelengths: centre wavelength of each band, shape ``(bands,)``, in
            ``wavelength_units``; None when the file does not give them.
        wavelength_units: e.g. ``"Nanometers"``, ``"Micrometers"``; None when unknown.
        band_names: one description per band (None where the file has none).
        block_height: rows per internal block of the file, a good multiple for windows.
        fwhm: band widths (FWHM) in ``wavelength_units``, shape ``(bands,)``; None when
            unknown.
        bad_bands: boolean ``(bands,)``, True for bands the file marks bad (ENVI ``bbl``
            = 0); None when the file has no bad-band list.
        spectral_source: where the wavelengths came from (``"ENVI header"``, ``"ISIS3
            BandBin"``, ...); None when unknown.
        spectral_header: the ENVI header the wavelengths came from; None when they
            came from elsewhere (the cube file itself) or are unknown.
    """

    grid: RasterGrid
    bands: int
    dtype: np.dtype
    nodata: float | None
    wavelengths: np.ndarray | None
    wavelength_units: str | None
    band_names: tuple
    block_height: int
    fwhm: np.ndarray | None = None
    bad_bands: np.ndarray | None = None
    spectral_source: str | None = None
    spectral_header: Path | None = None

    @property
    def path(self) -> Path:
        """The cube file."""
        return self.grid.path

    @property
    def spectral_file(self) -> Path:
        """The file stating the wavelengths (ENVI header or the cube), for messages."""
        return self.spectral_header if self.spectral_header is not None else self.grid.path

    @property
    def shape(self) -> tuple[int, int, int]:
        """``(rows, cols, bands)``."""
        return (self.grid.height, self.grid.width, self.bands)


_NUMBER = r"[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?"
_GDAL_ENVI_SUFFIX = re.compile(rf"\s*\(\s*{_NUMBER}\s+[^()]*\)\s*$")


def _band_names(dataset, wavelengths, label=None) -> tuple:
    """Band descriptions, without the `` (500.5 Nanometers)`` GDAL appends for ENVI cubes;
    a PDS3 label's ``BAND_NAME`` where GDAL gives none."""
    names = dataset.descriptions
    if (
        not any(names)
        and label is not None
        and label.band_names is not None
        and len(label.band_names) == dataset.count
    ):
        return tuple(label.band_names)
    if dataset.driver == "ENVI" and wavelengths is not None:
        names = tuple(None if n is None else _GDAL_ENVI_SUFFIX.sub("", n) for n in names)
    return tuple(names)


def _grid(dataset, path: Path) -> RasterGrid:
    return RasterGrid(
        path=path,
        height=dataset.height,
        width=dataset.width,
        crs=dataset.crs,
        transform=dataset.transform,
    )


class CubeReader:
    """An open reflectance cube, read whole or window by window.

    Use as a context manager:

        with CubeReader("cube.tif") as cube:
            for rows in iter_row_slices(cube.info.grid.height, 64):
                block = cube.read(rows)          # (len(rows), cols, bands), NaN = nodata

    Args:
        path: any raster GDAL opens (GeoTIFF, ENVI data file or header, ...).

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: the file is not a readable raster, or its metadata is inconsistent.
    """

    def __init__(self, path):
        from .spectral_metadata import read_spectral_metadata

        self._dataset, self.located = open_located(path)
        path = self.located.data
        try:
            dtypes = set(self._dataset.dtypes)
            if len(dtypes) != 1:
                raise ValueError(f"bands of {path} have different data types {sorted(dtypes)}")
            if np.dtype(self._dataset.dtypes[0]).kind == "c":
                raise ValueError(f"{path} holds complex numbers, not reflectance")
            spectral = read_spectral_metadata(self._dataset, path)
            nodata = self._dataset.nodata
            label = self.located.label
            dtype = float_dtype(self._dataset.dtypes[0])
            if self.located.applies_label_scaling and (label.scale != 1 or label.offset_value != 0):
                wide = np.float64 if label.dtype.itemsize > 2 else np.float32
                dtype = np.result_type(dtype, wide)
            self.info = CubeInfo(
                grid=_grid(self._dataset, path),
                bands=self._dataset.count,
                dtype=dtype,
                nodata=None if nodata is None else float(nodata),
                wavelengths=spectral.wavelengths,
                wavelength_units=spectral.units,
                band_names=_band_names(self._dataset, spectral.wavelengths, label),
                block_height=int(self._dataset.block_shapes[0][0]),
                fwhm=spectral.fwhm,
                bad_bands=spectral.bad_bands,
                spectral_source=spectral.source,
                spectral_header=(
                    envi_header(self._dataset) if spectral.source == "ENVI header" else None
                ),
            )
        except BaseException:
            self._dataset.close()
            raise

    def unit_tag(self) -> str | None:
        """The unit the file's own metadata gives its values, or None: a GeoTIFF's or an
        ENVI header's ``units`` item, or the netCDF variable's ``units`` attribute (as
        lumaxlike's writers and `lumaxlike demo` tag them, e.g. ``1/sr``, ``sr-1``)."""
        band = self._dataset.tags(1) if self._dataset.count else {}
        variable = band.get("NETCDF_VARNAME")
        for ns in (None, "ENVI"):
            tags = {key.lower(): value for key, value in self._dataset.tags(ns=ns).items()}
            for key in ("units", "data_units", f"{variable}#units".lower() if variable else ""):
                if tags.get(key, "").strip():
                    return tags[key].strip()
        return None

    def read(self, rows: slice | None = None) -> np.ndarray:
        """Pixels of ``rows`` (all rows when None) [file units], shape ``(rows, cols, bands)``.

        C-contiguous, floating point (``info.dtype``), NaN where the file marks nodata (and
        where a PDS3 label's invalid/missing/null constants are stored; the label's
        ``SCALING_FACTOR`` / ``OFFSET`` applied).
        """
        values = _read_window(self._dataset, rows)
        label = self.located.label
        if label is not None and label.special:
            scaled_by_gdal = any(s != 1 for s in self._dataset.scales) or any(
                o != 0 for o in self._dataset.offsets
            )
            if not scaled_by_gdal:
                values[np.isin(values, np.asarray(label.special, dtype=values.dtype))] = np.nan
        if self.located.applies_label_scaling and (label.scale != 1 or label.offset_value != 0):
            values = values.astype(self.info.dtype) * label.scale + label.offset_value
        return np.ascontiguousarray(np.moveaxis(values, 0, -1))

    def close(self) -> None:
        """Close the file."""
        self._dataset.close()

    def __enter__(self) -> CubeReader:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def read_cube(path) -> tuple[np.ndarray, CubeInfo]:
    """Read a whole reflectance cube into memory.

    Args:
        path: any raster GDAL opens.

    Returns:
        ``(values, info)``: values of shape ``(rows, cols, bands)`` [file units], NaN
        where the file marks nodata; ``info`` a `CubeInfo`.
    """
    with CubeReader(path) as cube:
        return cube.read(), cube.info


def iter_cube_blocks(path, chunk_rows: int) -> Iterator[tuple[slice, np.ndarray]]:
    """Stream a cube by blocks of rows, so that memory grows with the block, not the image.

    Args:
        path: any raster GDAL opens.
        chunk_rows: rows per block (the last block may be shorter).

    Yields:
        ``(rows, values)``: the row slice and its pixels, shape ``(rows, cols, bands)``.
    """
    with rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_BYTES), CubeReader(path) as cube:
        for rows in iter_row_slices(cube.info.grid.height, chunk_rows):
            yield rows, cube.read(rows)


class BandRaster:
    """Chosen bands of an open raster, read by row windows as ``(rows, cols)`` arrays.

    Args:
        path: the raster file.
    """

    def __init__(self, path):
        self._dataset, located = open_located(path)
        self.path = located.data
        self.grid = _grid(self._dataset, self.path)
        self.descriptions = _band_names(self._dataset, None, located.label)
        self.label = located.label  #: the PDS3 image object describing it, or None

    @property
    def count(self) -> int:
        """Number of bands."""
        return self._dataset.count

    def read(self, index: int, rows: slice | None = None) -> np.ndarray:
        """Band ``index`` (1-based) over ``rows``, NaN for nodata (and a PDS3 label's
        invalid/missing constants), shape ``(rows, cols)``."""
        values = _read_window(self._dataset, rows, [index])[0]
        if self.label is not None and self.label.special and self._dataset.scales[index - 1] == 1:
            values[np.isin(values, np.asarray(self.label.special, values.dtype))] = np.nan
        return values

    def tag_namespaces(self) -> list:
        """The metadata domains of the file (e.g. ``json:PDS`` for a PDS3 label)."""
        return list(self._dataset.tag_namespaces() or [])

    def tags(self, ns=None) -> dict:
        """The file's metadata items in domain ``ns`` (None: the default domain)."""
        return dict(self._dataset.tags(ns=ns))

    def close(self) -> None:
        """Close the file."""
        self._dataset.close()


def pixel_size_m(grid: RasterGrid) -> tuple[float, float]:
    """Ground size ``(dx, dy)`` of one pixel [m] of a north-up grid in a projected CRS.

    Raises:
        ValueError: naming the file, when the grid has no CRS, a geographic CRS (pixel
            size in degrees), or a rotated / south-up transform.
    """
    t = grid.transform
    if grid.crs is None:
        raise ValueError(
            f"DTM {grid.path} has no CRS, so its pixel size has no known unit; "
            "assign a projected CRS (metres)"
        )
    if not grid.crs.is_projected:
        raise ValueError(
            f"DTM {grid.path} is in the geographic CRS {_crs_name(grid.crs)}: its pixel size "
            "is in degrees; reproject it (and the cube) to a projected CRS"
        )
    if t.b != 0 or t.d != 0 or t.e >= 0 or t.a <= 0:
        raise ValueError(
            f"DTM {grid.path} is not north-up (transform {tuple(t)[:6]}); "
            "warp it to a north-up grid"
        )
    _, to_metres = grid.crs.linear_units_factor
    if not (math.isfinite(to_metres) and to_metres > 0):
        raise ValueError(f"DTM {grid.path}: unknown linear unit of its CRS")
    return (t.a * to_metres, -t.e * to_metres)
