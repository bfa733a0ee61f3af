"""Writing inversion results: GeoTIFF, ENVI, netCDF or zarr, block by block and atomically.

The format follows the extension of the output path ``OUT``:

==========================  ==========  ================================================
extension                   format      files written
==========================  ==========  ================================================
``.tif``, ``.tiff``         GeoTIFF     ``OUT`` (w), ``OUT_status.tif``,
                                        ``OUT_iterations.tif``, ``OUT_residual.tif``
                                        and, when requested, ``OUT_sigma.tif``
``.img``, ``.envi``         ENVI        the same maps, each a data file plus its ``.hdr``
``.hdr``                    ENVI        data file ``OUT`` with ``.img``, header ``OUT``
``.nc``                     netCDF-4    one file with the variables w, status, ...
``.zarr``                   zarr        one store (folder) with the same variables
==========================  ==========  ================================================

(``OUT_status.tif`` means the stem of ``OUT`` plus ``_status``, e.g. ``w.tif`` ->
``w_status.tif``.) Every map has one band per spectral band of the cube and keeps the
cube's CRS, transform, band names and wavelengths as read (ENVI ``wavelength`` header
field, per-band ``wavelength`` / ``wavelength_units`` tags in GeoTIFF, a ``wavelength``
coordinate in netCDF/zarr), and records how it was made (``lumaxlike_*`` tags, in the
``ENVI`` domain for ENVI; see :mod:`lumaxlike._provenance`). The status map carries its
legend, generated from :class:`lumaxlike.Status` (``status_codes`` tag,
``flag_values`` / ``flag_meanings`` attributes). Floating maps (w, residual, sigma) have the cube's floating type (at least float32) and nodata NaN by default (``nodata=...`` writes another value where
they are NaN, declared as the GDAL nodata / ENVI ``data ignore value`` / ``_FillValue``); status is int8 (uint8 in ENVI, which has no
signed byte) and iterations int32, both without nodata since every pixel gets a value.

netCDF and zarr variables have dims ``(band, y, x)``, with ``x``/``y`` pixel-centre map
coordinates (north-up grids, CF ``units`` and ``standard_name`` from the CRS) and a ``spatial_ref`` variable carrying the CRS as
``crs_wkt`` and the GDAL ``GeoTransform`` (the CF / rioxarray convention GDAL reads).

Nothing appears at the output paths until every block has been written (see
:mod:`lumaxlike._io.write.atomic`); an existing output is replaced only with ``overwrite=True``.
"""

from __future__ import annotations

import contextlib
import glob
import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import rasterio
import rasterio.errors

from ..read.raster import CubeInfo
from .atomic import AtomicOutputs, OutputWriteError  # noqa: F401 (OutputWriteError: documented here)
from .layout import (  # re-exported: the writers' layout, named here as before
    FIELD_ATTRS,
    INVERSION_LAYOUT,
    RESULT_FIELDS,
    FieldLayout,
    coordinate_attrs,
    result_template,
    spatial_ref_attrs,
    wavelength_text,
)
from .sinks import FORMATS, Sink, SinkSpec, _RasterSink  # noqa: F401 (_RasterSink: the GeoTIFF/ENVI file)

__all__ = [
    "FIELD_ATTRS",
    "INVERSION_LAYOUT",
    "OUTPUT_FORMATS",
    "RESULT_FIELDS",
    "FieldLayout",
    "ResultWriter",
    "coordinate_attrs",
    "output_files",
    "output_format",
    "result_paths",
    "result_template",
    "spatial_ref_attrs",
    "wavelength_text",
    "write_result",
]

OUTPUT_FORMATS = {
    ".tif": "GTiff",
    ".tiff": "GTiff",
    ".img": "ENVI",
    ".envi": "ENVI",
    ".hdr": "ENVI",
    ".nc": "netCDF",
    ".zarr": "zarr",
}
"""Output extension -> format (a key of :data:`SINKS`)."""


def output_format(path) -> str:
    """Format of an output path from its extension: ``GTiff``, ``ENVI``, ``netCDF`` or ``zarr``.

    Raises:
        ValueError: naming the path, for any other extension.
    """
    suffix = Path(path).suffix.lower()
    if suffix not in OUTPUT_FORMATS:
        raise ValueError(
            f"output {path}: unknown extension {suffix!r}; use one of " + ", ".join(OUTPUT_FORMATS)
        )
    return OUTPUT_FORMATS[suffix]


def _raster_file(out: Path, field: str, main: str = "w") -> Path:
    """Main file (GeoTIFF, or ENVI data file) of ``field``'s map for output ``out``
    (``out`` itself for the ``main`` field)."""
    if out.suffix.lower() == ".hdr":
        out = out.with_suffix(".img")
    if field == main:
        return out
    return out.with_name(f"{out.stem}_{field}{out.suffix}")


def result_paths(out, fields=RESULT_FIELDS, main: str = "w") -> dict[str, Path]:
    """Where each result map of ``fields`` is written for the output path ``out`` (the
    ``main`` field at ``out`` itself, the others beside it).

    Returns:
        ``{field: path}``; for GeoTIFF/ENVI one file per field (the ENVI data file; its
        header is the same path with ``.hdr``), for netCDF/zarr ``out`` for every field.
    """
    out = Path(out)
    if FORMATS[output_format(out)].one_dataset:
        return {field: out for field in fields}
    return {field: _raster_file(out, field, main) for field in fields}


def output_files(out, fields=RESULT_FIELDS, main: str = "w") -> list[Path]:
    """Every file or folder written for output ``out`` (ENVI headers included), ``main`` last."""
    out = Path(out)
    sink = FORMATS[output_format(out)]
    if sink.one_dataset:
        return [out]
    files = []
    for field in [f for f in fields if f != main] + [main]:
        path = _raster_file(out, field, main)
        files.append(path)
        files.extend(path.with_suffix(suffix) for suffix in sink.sidecars)
    return files


def previous_set(out, main: str = "w") -> list[Path]:
    """The files of the output set now at ``out`` (GeoTIFF/ENVI): its main map and every
    sibling ``<stem>_*`` map the same run wrote (the same lumaxlike record: command and
    creation time), ENVI headers included; [] where ``out`` holds no lumaxlike output.

    `ResultWriter` counts them as companions: ``--overwrite`` replaces the whole old set,
    so none of its maps (a fit's ``out_c.tif`` when the new run fits no c, a fit's maps
    under a normalisation) stays beside the new one.
    """
    out = Path(out)
    if output_format(out) in ("netCDF", "zarr"):
        return []
    main_file = _raster_file(out, main, main)
    run = _run_of(main_file)
    if run is None:
        return []
    envi = output_format(out) == "ENVI"
    members = []
    pattern = f"{glob.escape(main_file.stem)}_*{main_file.suffix}"
    for sibling in sorted(main_file.parent.glob(pattern)):
        if _run_of(sibling) == run:
            members.extend([sibling, sibling.with_suffix(".hdr")] if envi else [sibling])
    return members


def _run_of(path: Path):
    """(command, created) of the lumaxlike output at ``path``, or None."""
    if not path.is_file():
        return None
    try:
        with warnings.catch_warnings():  # e.g. NotGeoreferencedWarning: only the tags matter
            warnings.simplefilter("ignore")
            dataset = rasterio.open(path)
        with dataset:
            tags = dict(dataset.tags())
            if "ENVI" in (dataset.tag_namespaces() or []):
                tags.update(dataset.tags(ns="ENVI"))
    except rasterio.errors.RasterioError:
        return None
    run = (tags.get("lumaxlike_command"), tags.get("lumaxlike_created"))
    return run if None not in run else None


class ResultWriter:
    """Writes result maps for a cube block by block; publishes them atomically on success.

    Use as a context manager; the outputs appear at their paths only when the ``with``
    block ends without an exception, and a failure removes every temporary file:

        with ResultWriter("w.tif", like=cube_info, fields=("w", "status")) as writer:
            for rows, block in ...:
                writer.write(rows, {"w": w_block, "status": status_block})

    Args:
        out: output path; its extension selects the format (see the module docstring).
        like: `lumaxlike.CubeInfo` of the cube (grid, bands,
            wavelengths, band names, floating type).
        fields: maps to write, among ``layout.attrs`` (default `RESULT_FIELDS`).
        overwrite: replace existing outputs.
        chunk_rows: rows per block the caller will write (zarr / netCDF chunking).
        nodata: value of the floating maps where they are NaN, and their declared nodata;
            NaN (default) or a finite number.
        provenance: `lumaxlike.Provenance` recorded in every file (tags or global
            attributes; see `lumaxlike.read_provenance`); None records none.
        layout: the maps this kind of output has (`FieldLayout`); default
            `INVERSION_LAYOUT`.

    Raises:
        ValueError: unknown extension or field.
        FileExistsError: an output exists and ``overwrite`` is false (before any work).
        FileNotFoundError, NotADirectoryError, PermissionError: unusable output folder.
        OutputWriteError: (an OSError) a map could not be written, while writing, closing
            or flushing it (a full disk: GDAL's "No space left on device"); nothing is
            published and the previous outputs are kept.
    """

    def __init__(
        self,
        out,
        *,
        like: CubeInfo,
        fields=RESULT_FIELDS,
        overwrite: bool = False,
        chunk_rows: int | None = None,
        nodata: float = np.nan,
        provenance=None,
        layout: FieldLayout = INVERSION_LAYOUT,
    ):
        self.out = Path(out)
        self.provenance = provenance
        self.format = output_format(self.out)
        self.fields = tuple(fields)
        main, known = layout.main, tuple(layout.attrs)
        unknown = [f for f in self.fields if f not in known]
        if unknown or main not in self.fields:
            raise ValueError(
                f"fields must include {main!r} and be among {known}, got {self.fields}"
            )
        if FORMATS[self.format].one_dataset and any(
            f not in layout.dimensions for f in layout.band_names
        ):
            raise ValueError(
                f"output {self.out}: these maps are written as GeoTIFF (.tif) or ENVI (.img), "
                f"not {self.format}"
            )
        self.main = main
        self.layout = layout
        self.field_attrs = layout.attrs
        self.like = like
        self._likes = {field: layout.like(field, like) for field in self.fields}
        self.dtypes = layout.dtypes(like.dtype, self.format)
        self.chunk_rows = int(chunk_rows or like.grid.height)
        self.nodata = float(nodata)
        if np.isinf(self.nodata):
            raise ValueError(f"nodata must be NaN or a finite number, got {nodata!r}")
        self.paths = result_paths(self.out, self.fields, main)
        companions = [*output_files(self.out, known, main), *previous_set(self.out, main)]
        self._atomic = AtomicOutputs(
            output_files(self.out, self.fields, main), overwrite=overwrite, companions=companions
        )
        self._stack = contextlib.ExitStack()
        self._sink: Sink | None = None

    def __enter__(self) -> ResultWriter:
        temporary = self._stack.enter_context(self._atomic)
        try:
            spec = SinkSpec(
                format=self.format,
                paths=self.paths,
                temporary=temporary,
                like=self.like,
                likes=self._likes,
                dtypes=self.dtypes,
                chunk_rows=self.chunk_rows,
                nodata=self.nodata,
                provenance=self.provenance,
                layout=self.layout,
            )
            sink = FORMATS[self.format].sink(spec)
            self._sink = sink
            self._stack.callback(sink.close)
        except BaseException as error:
            self._stack.__exit__(type(error), error, error.__traceback__)
            raise
        return self

    def discard(self) -> None:
        """Give up before entering: release the output set's lock, write nothing."""
        self._atomic.discard()

    def write(self, rows: slice, block: Mapping) -> None:
        """Write one block of rows.

        Args:
            rows: the block's rows in the cube (``slice(start, stop)``).
            block: ``{field: array of shape (len(rows), cols, bands)}`` for every field.
        """
        missing = [f for f in self.fields if f not in block]
        if missing:
            raise ValueError(f"block lacks the result maps {missing}")
        for field in self.fields:
            expected = (rows.stop - rows.start, self.like.grid.width, self._likes[field].bands)
            if np.shape(block[field]) != expected:
                raise ValueError(
                    f"block {field} has shape {np.shape(block[field])}, expected {expected}"
                )
        if self._sink is None:
            raise RuntimeError("ResultWriter.write outside its with block")
        self._sink.write(rows, {field: self._encode(field, block[field]) for field in self.fields})

    def _encode(self, field: str, values) -> np.ndarray:
        """``values`` in the field's file type, NaN replaced by ``nodata`` for floats."""
        values = np.asarray(values).astype(self.dtypes[field], copy=False)
        if self.dtypes[field].kind == "f" and not np.isnan(self.nodata):
            values = np.where(np.isnan(values), self.dtypes[field].type(self.nodata), values)
        return values

    def __exit__(self, exc_type, exc, tb):
        return self._stack.__exit__(exc_type, exc, tb)


def write_result(
    out,
    result,
    *,
    like: CubeInfo,
    fields=None,
    overwrite: bool = False,
    nodata: float = np.nan,
    provenance=None,
) -> dict[str, Path]:
    """Write whole in-memory result maps (e.g. from `lumaxlike.invert`) atomically.

    Args:
        out: output path; the extension selects the format (see the module docstring).
        result: a `lumaxlike.InversionResult` or a mapping ``{field: array}``, each
            of shape ``(rows, cols, bands)`` matching ``like``.
        like: `lumaxlike.CubeInfo` giving grid, CRS, wavelengths.
        fields: maps to write; default w, status, iterations, residual, plus sigma when
            it has any finite value.
        overwrite: replace existing outputs.
        nodata: value written where the floating maps are NaN (default NaN).
        provenance: `lumaxlike.Provenance` to record in the files (None: none).

    Returns:
        ``{field: path written}``.
    """
    if not isinstance(result, Mapping):
        result = {
            field: getattr(result, field) for field in RESULT_FIELDS if hasattr(result, field)
        }
    if fields is None:
        fields = [f for f in RESULT_FIELDS if f in result and f != "sigma"]
        if "sigma" in result and np.any(np.isfinite(result["sigma"])):
            fields.append("sigma")
    with ResultWriter(
        out, like=like, fields=fields, overwrite=overwrite, nodata=nodata, provenance=provenance
    ) as writer:
        writer.write(slice(0, like.grid.height), result)
    return writer.paths
