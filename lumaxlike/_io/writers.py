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
:mod:`lumaxlike._io.atomic`); an existing output is replaced only with ``overwrite=True``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import glob
import warnings
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import rasterio
import rasterio.errors
from rasterio.windows import Window

from .._inverse.status import Status
from .atomic import AtomicOutputs, OutputWriteError
from .raster import GDAL_CACHE_BYTES, CubeInfo

__all__ = [
    "OUTPUT_FORMATS",
    "RESULT_FIELDS",
    "FIELD_ATTRS",
    "FieldLayout",
    "INVERSION_LAYOUT",
    "ResultWriter",
    "output_files",
    "output_format",
    "result_paths",
    "result_template",
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
"""Output extension -> format."""

RESULT_FIELDS = ("w", "status", "iterations", "residual", "sigma")
"""Maps an inversion produces, in :class:`lumaxlike.InversionResult` order."""

FIELD_ATTRS = {
    "w": {"long_name": "single-scattering albedo w", "units": "1"},
    "status": {
        "long_name": "inversion status (lumaxlike.Status)",
        **Status.flag_attrs(),
    },
    "iterations": {"long_name": "solver iterations", "units": "1"},
    "residual": {
        "long_name": "model minus observed bidirectional reflectance r at the solution",
        "units": "sr-1",
    },
    "sigma": {"long_name": "standard uncertainty of w", "units": "1"},
}
"""CF-style attributes of each result variable (also used as raster tags)."""


def output_format(path) -> str:
    """Format of an output path from its extension: ``GTiff``, ``ENVI``, ``netCDF`` or ``zarr``.

    Raises:
        ValueError: naming the path, for any other extension.
    """
    suffix = Path(path).suffix.lower()
    if suffix not in OUTPUT_FORMATS:
        raise ValueError(
            f"output {path}: unknown extension {suffix!r}; use one of "
            + ", ".join(OUTPUT_FORMATS)
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
    if output_format(out) in ("netCDF", "zarr"):
        return {field: out for field in fields}
    return {field: _raster_file(out, field, main) for field in fields}


def output_files(out, fields=RESULT_FIELDS, main: str = "w") -> list[Path]:
    """Every file or folder written for output ``out`` (ENVI headers included), ``main`` last."""
    out = Path(out)
    kind = output_format(out)
    if kind in ("netCDF", "zarr"):
        return [out]
    files = []
    for field in [f for f in fields if f != main] + [main]:
        path = _raster_file(out, field, main)
        files.append(path)
        if kind == "ENVI":
            files.append(path.with_suffix(".hdr"))
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


def wavelength_text(value) -> str:
    """A wavelength as the shortest text that reads back as the same float (``"500.5"``, ``"1530"``)."""
    return np.format_float_positional(float(value), trim="-")


def _band_descriptions(like: CubeInfo) -> list[str | None]:
    """The cube's band names; when it has none, its wavelengths (e.g. ``"500.5 Nanometers"``)."""
    names = list(like.band_names)
    if like.wavelengths is not None and not any(names):
        units = f" {like.wavelength_units}" if like.wavelength_units else ""
        return [f"{wavelength_text(wavelength)}{units}" for wavelength in like.wavelengths]
    return names


class _RasterSink:
    """One result map written as a GeoTIFF or ENVI file through a temporary path."""

    def __init__(self, path: Path, final_name: str, driver: str, field: str, like: CubeInfo,
                 dtype, nodata: float, provenance=None, attrs=None):
        self.path, self.final_name = path, final_name
        grid = like.grid
        profile = dict(
            driver=driver,
            width=grid.width,
            height=grid.height,
            count=like.bands,
            dtype=np.dtype(dtype).name,
            crs=grid.crs,
            transform=grid.transform,
            nodata=nodata if np.dtype(dtype).kind == "f" else None,
        )
        if driver == "GTiff":
            profile.update(BIGTIFF="IF_SAFER")
        self.dataset = rasterio.open(path, "w", **profile)
        try:
            self._describe(field, like, driver, provenance, FIELD_ATTRS[field] if attrs is None else attrs)
        except BaseException:
            self.dataset.close()
            raise

    def _describe(self, field: str, like: CubeInfo, driver: str, provenance, attrs) -> None:
        ds = self.dataset
        envi = driver == "ENVI"  # GDAL keeps only the ENVI domain in headers, and no "=" there
        tags = {"quantity": attrs["long_name"]}
        if "units" in attrs:
            tags["units"] = attrs["units"]
        if field == "status":
            tags["status_codes"] = Status.codes_text(": " if envi else "=")
        if provenance is not None:
            tags.update(provenance.attrs(envi=envi))
        if envi:
            ds.update_tags(ns="ENVI", **tags)
        else:
            ds.update_tags(**tags)
        for index, description in enumerate(_band_descriptions(like), start=1):
            if description:
                ds.set_band_description(index, description)
        if like.wavelengths is not None:
            labels = [wavelength_text(value) for value in like.wavelengths]
            if driver == "ENVI":
                envi = {"wavelength": "{" + ", ".join(labels) + "}"}
                if like.wavelength_units:
                    envi["wavelength_units"] = like.wavelength_units
                ds.update_tags(ns="ENVI", **envi)
            else:
                for index, label in enumerate(labels, start=1):
                    tags = {"wavelength": label}
                    if like.wavelength_units:
                        tags["wavelength_units"] = like.wavelength_units
                    ds.update_tags(index, **tags)

    def write(self, rows: slice, values: np.ndarray) -> None:
        window = Window(0, rows.start, self.dataset.width, rows.stop - rows.start)
        self.dataset.write(np.moveaxis(values, -1, 0).astype(self.dataset.dtypes[0], copy=False), window=window)

    def close(self) -> None:
        closed = self.dataset.closed
        self._close_dataset()
        if closed:
            return
        if self.dataset.driver == "ENVI":
            # GDAL writes the data file's name as the ENVI "description"; name the final file
            header = self.path.with_suffix(".hdr")
            header.write_text(header.read_text().replace(self.path.name, self.final_name, 1))
        _check_readable(self.path)

    def _close_dataset(self) -> None:
        self.dataset.close()


def _check_readable(path: Path) -> None:
    """Read back the last row of every band of a closed raster.

    GDAL reports a full disk while closing a GeoTIFF (its last strips and directory are
    written then) only on stderr ("No space left on device"): ``close()`` returns and the
    file is short. Rows are written in order, so a short file lacks its last row.
    """
    with warnings.catch_warnings():  # e.g. NotGeoreferencedWarning: only the pixels matter
        warnings.simplefilter("ignore")
        written = rasterio.open(path)
    try:
        with written:
            written.read(window=Window(0, written.height - 1, written.width, 1))
    except rasterio.errors.RasterioError as error:
        cause = error.__cause__ or error
        raise OSError(f"the file is incomplete once closed (a full disk?): {cause}") from error


#: CF (UDUNITS) spelling of common CRS linear units, as PROJ names them.
_CF_LINEAR_UNITS = {"metre": "m", "meter": "m", "kilometre": "km", "foot": "ft",
                    "US survey foot": "US_survey_foot"}


def coordinate_attrs(crs) -> tuple[dict, dict]:
    """CF attributes of the ``x`` and ``y`` coordinates for a CRS (rasterio ``CRS`` or None).

    Projected: ``standard_name`` ``projection_x_coordinate`` / ``projection_y_coordinate``
    and ``units`` from the CRS's linear unit (``"m"`` for metres); geographic:
    ``longitude`` / ``latitude`` in ``degrees_east`` / ``degrees_north``; no CRS: only a
    ``long_name`` (the unit is unknown).
    """
    if crs is not None and crs.is_geographic:
        return ({"standard_name": "longitude", "long_name": "longitude", "units": "degrees_east"},
                {"standard_name": "latitude", "long_name": "latitude", "units": "degrees_north"})
    x = {"long_name": "x coordinate of pixel centre"}
    y = {"long_name": "y coordinate of pixel centre"}
    if crs is not None and crs.is_projected:
        unit = crs.linear_units
        unit = _CF_LINEAR_UNITS.get(unit, unit)
        x.update(standard_name="projection_x_coordinate", units=unit)
        y.update(standard_name="projection_y_coordinate", units=unit)
    return x, y


def _map_coordinates(like: CubeInfo) -> dict:
    """``x`` and ``y`` pixel-centre coordinates of a north-up grid (none for rotated grids)."""
    t = like.grid.transform
    if t.b != 0 or t.d != 0:
        return {}
    cols = np.arange(like.grid.width) + 0.5
    rows = np.arange(like.grid.height) + 0.5
    x_attrs, y_attrs = coordinate_attrs(like.grid.crs)
    return {"x": ("x", t.c + t.a * cols, x_attrs), "y": ("y", t.f + t.e * rows, y_attrs)}


def spatial_ref_attrs(crs, transform) -> dict:
    """Attributes of a CF ``spatial_ref`` grid-mapping variable (CRS WKT, GDAL GeoTransform)."""
    attrs = {"GeoTransform": " ".join(repr(float(v)) for v in transform.to_gdal())}
    if crs is not None:
        wkt = crs.to_wkt()
        attrs.update(crs_wkt=wkt, spatial_ref=wkt)
    return attrs


def result_template(like: CubeInfo, fields=RESULT_FIELDS, data: Mapping | None = None, provenance=None,
                    field_attrs: Mapping | None = None, layout: "FieldLayout | None" = None):
    """An ``xarray.Dataset`` with lumaxlike's result layout on the grid of a cube.

    Args:
        like: the cube's :class:`~lumaxlike._io.raster.CubeInfo`.
        fields: result variables to include.
        data: ``{field: array}`` of shape ``(band, y, x)`` (NumPy or dask); variables
            missing from it are left out.
        provenance: :class:`lumaxlike.Provenance` of the run, written as CF global
            attributes plus the ``lumaxlike_*`` keys; None writes only ``source`` (the cube).
        field_attrs: ``{field: attributes}`` of fields beyond :data:`FIELD_ATTRS` (or
            replacing them).
        layout: the maps' :class:`FieldLayout` when some have their own bands (its
            ``dimensions``: a coordinate of band names per such dimension, and the
            variables' dimensions); None: every field has the cube's bands.

    Returns:
        Dataset with coords ``band`` (1-based), ``wavelength`` (when known), ``x``/``y``
        (with CF units) and ``spatial_ref``, and one variable per field present in ``data``.
    """
    import xarray as xr

    coords = {"band": ("band", np.arange(1, like.bands + 1))}
    for field, dimension in (layout.dimensions.items() if layout is not None else ()):
        if dimension is not None:
            coords[dimension] = (dimension, np.asarray(layout.band_names[field], dtype=str))
    if like.wavelengths is not None:
        attrs = {"units": like.wavelength_units} if like.wavelength_units else {}
        coords["wavelength"] = xr.Variable("band", np.asarray(like.wavelengths), attrs)
    coords.update(_map_coordinates(like))
    coords["spatial_ref"] = xr.Variable((), np.int32(0), spatial_ref_attrs(like.grid.crs, like.grid.transform))
    variables = {}
    all_attrs = {**FIELD_ATTRS, **(field_attrs or {})}
    for field in fields:
        if data is not None and field in data:
            attrs = dict(all_attrs[field], grid_mapping="spatial_ref")
            dims = layout.dims(field) if layout is not None else ("band", "y", "x")
            variables[field] = xr.Variable(dims, data[field], attrs)
    attrs = {"source": str(like.path)} if provenance is None else provenance.cf_attrs()
    return xr.Dataset(variables, coords=coords, attrs=attrs)


def _fill_value(dtype, nodata: float):
    """netCDF/zarr ``_FillValue`` of a result variable: ``nodata`` for floats, none for integers."""
    return np.array(nodata, dtype) if np.dtype(dtype).kind == "f" else None


class _NetCDFSink:
    """All result maps in one netCDF-4 file: xarray writes coords, netCDF4 writes blocks."""

    def __init__(self, path: Path, fields, like: CubeInfo, dtypes, chunk_rows: int, nodata: float,
                 provenance=None, layout: "FieldLayout" = None):
        try:
            import netCDF4
        except ImportError:  # pragma: no cover - depends on the environment
            raise ValueError(f"writing {path.name}: netCDF output needs the netCDF4 package") from None
        layout = layout or INVERSION_LAYOUT
        result_template(like, provenance=provenance, layout=layout).to_netcdf(path, engine="netcdf4", format="NETCDF4")
        self.dataset = netCDF4.Dataset(path, "a")
        self.layout = layout
        rows = min(chunk_rows, like.grid.height)
        for field in fields:
            dtype = dtypes[field]
            dims = layout.dims(field)
            chunks = (1,) * (len(dims) - 2) + (rows, like.grid.width)
            variable = self.dataset.createVariable(
                field, dtype, dims, fill_value=_fill_value(dtype, nodata), chunksizes=chunks
            )
            variable.set_auto_mask(False)  # blocks arrive with nodata already in place
            attrs = dict(layout.attrs[field], grid_mapping="spatial_ref")
            variable.setncatts(attrs)

    def write(self, field: str, rows: slice, values: np.ndarray) -> None:
        if len(self.layout.dims(field)) == 2:  # a per-pixel map: its one band
            self.dataset[field][rows, :] = values[..., 0]
        else:
            self.dataset[field][:, rows, :] = np.moveaxis(values, -1, 0)

    def close(self) -> None:
        self.dataset.close()


class _ZarrSink:
    """All result maps in one zarr store: metadata first, then region writes per block."""

    def __init__(self, path: Path, fields, like: CubeInfo, dtypes, chunk_rows: int, nodata: float,
                 provenance=None, layout: "FieldLayout" = None):
        try:
            import dask.array as da
            import zarr  # noqa: F401
        except ImportError:  # pragma: no cover - depends on the environment
            raise ValueError(f"writing {path.name}: zarr output needs the zarr package") from None
        self.path = path
        self.layout = layout = layout or INVERSION_LAYOUT
        grid = (like.grid.height, like.grid.width)
        rows = min(chunk_rows, like.grid.height)
        data = {}
        for field in fields:
            bands = layout.like(field, like).bands
            leading = (bands,) if len(layout.dims(field)) == 3 else ()
            data[field] = da.zeros(leading + grid, dtype=dtypes[field], chunks=leading + (rows, like.grid.width))
        encoding = {field: {"_FillValue": _fill_value(dtypes[field], nodata)} for field in fields}
        template = result_template(like, fields, data, provenance, layout.attrs, layout)
        template.to_zarr(path, mode="w", compute=False, encoding=encoding, zarr_format=2, consolidated=True)

    def write_block(self, rows: slice, block: Mapping) -> None:
        import xarray as xr

        variables = {}
        for field, values in block.items():
            dims = self.layout.dims(field)
            variables[field] = (dims, values[..., 0] if len(dims) == 2 else np.moveaxis(values, -1, 0))
        xr.Dataset(variables).to_zarr(self.path, region={"y": rows}, mode="r+", zarr_format=2, consolidated=False)


@dataclasses.dataclass(frozen=True)
class FieldLayout:
    """Which maps a kind of output has, for :class:`ResultWriter`: `INVERSION_LAYOUT`
    (w, status, iterations, residual, sigma) unless given (normalised reflectance,
    `lumaxlike fit`'s parameter maps, `lumaxlike unmix`'s fractions).

    Attributes:
        main: the field written at the output path itself (the others at ``OUT_<field>``).
        attrs: ``{field: CF-style attributes}`` (``long_name``, ``units``, ...), every
            field that may be written, in order (the stale files of those not written are
            removed on overwrite).
        band_names: ``{field: band names}`` for fields whose bands are not the cube's
            (e.g. one per endmember, or ``("status",)`` for a per-pixel map); their maps
            carry no wavelengths.
        integer: ``{field: NumPy integer type}`` (status: int8, uint8 in ENVI); the
            others have the cube's floating type.
        dimensions: for netCDF and zarr, ``{field: dimension}`` of each field in
            ``band_names``: the name of the dimension of its bands (a coordinate of the
            band names; fields with the same bands share it), or None for a per-pixel map
            (a ``(y, x)`` variable). Without it such maps are written as GeoTIFF or ENVI
            only.
    """

    main: str
    attrs: Mapping
    band_names: Mapping
    integer: Mapping
    dimensions: Mapping = dataclasses.field(default_factory=dict)

    def dims(self, field: str) -> tuple[str, ...]:
        """The dimensions of ``field``'s variable in netCDF / zarr."""
        if field not in self.band_names:
            return ("band", "y", "x")
        dimension = self.dimensions[field]
        return ("y", "x") if dimension is None else (dimension, "y", "x")

    def like(self, field: str, cube: CubeInfo) -> CubeInfo:
        """The cube's description with the bands of ``field``'s map."""
        if field not in self.band_names:
            return cube
        names = tuple(self.band_names[field])
        return dataclasses.replace(cube, bands=len(names), band_names=names, wavelengths=None, wavelength_units=None)

    def dtypes(self, float_dtype, kind: str) -> dict[str, np.dtype]:
        types = {field: np.dtype(self.integer.get(field, float_dtype)) for field in self.attrs}
        if kind == "ENVI" and "status" in types:
            types["status"] = np.dtype(np.uint8)  # ENVI has no signed byte
        return types


#: The maps of an inversion (`lumaxlike invert`): w at the output path, the others beside it.
INVERSION_LAYOUT = FieldLayout(
    main="w",
    attrs={field: FIELD_ATTRS[field] for field in RESULT_FIELDS},
    band_names={},
    integer={"status": np.int8, "iterations": np.int32},
)


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

    def __init__(self, out, *, like: CubeInfo, fields=RESULT_FIELDS, overwrite: bool = False,
                 chunk_rows: int | None = None, nodata: float = np.nan, provenance=None,
                 layout: FieldLayout = INVERSION_LAYOUT):
        self.out = Path(out)
        self.provenance = provenance
        self.format = output_format(self.out)
        self.fields = tuple(fields)
        main, known = layout.main, tuple(layout.attrs)
        unknown = [f for f in self.fields if f not in known]
        if unknown or main not in self.fields:
            raise ValueError(f"fields must include {main!r} and be among {known}, got {self.fields}")
        if self.format not in ("GTiff", "ENVI") and any(f not in layout.dimensions for f in layout.band_names):
            raise ValueError(f"output {self.out}: these maps are written as GeoTIFF (.tif) or ENVI (.img), "
                             f"not {self.format}")
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
        self._atomic = AtomicOutputs(output_files(self.out, self.fields, main), overwrite=overwrite,
                                     companions=companions)
        self._stack = contextlib.ExitStack()
        self._rasters: dict[str, _RasterSink] = {}
        self._dataset = None

    def __enter__(self) -> "ResultWriter":
        temporary = self._stack.enter_context(self._atomic)
        try:
            if self.format in ("GTiff", "ENVI"):
                self._stack.enter_context(rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_BYTES, GDAL_PAM_ENABLED="NO"))
                for field in self.fields:
                    sink = _RasterSink(temporary[self.paths[field]], self.paths[field].name, self.format,
                                       field, self._likes[field], self.dtypes[field], self.nodata,
                                       self.provenance, self.field_attrs[field])
                    self._rasters[field] = sink
                    self._stack.callback(_closing, sink.close, self.paths[field])
            elif self.format == "netCDF":
                self._dataset = _NetCDFSink(temporary[self.out], self.fields, self.like, self.dtypes,
                                            self.chunk_rows, self.nodata, self.provenance, self.layout)
                self._stack.callback(_closing, self._dataset.close, self.out)
            else:
                self._dataset = _ZarrSink(temporary[self.out], self.fields, self.like, self.dtypes,
                                          self.chunk_rows, self.nodata, self.provenance, self.layout)
        except BaseException as error:
            self._stack.__exit__(type(error), error, error.__traceback__)
            raise
        return self

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
                raise ValueError(f"block {field} has shape {np.shape(block[field])}, expected {expected}")
        values = {field: self._encode(field, block[field]) for field in self.fields}
        if self.format in ("GTiff", "ENVI"):
            for field in self.fields:
                with _writing(self.paths[field]):
                    self._rasters[field].write(rows, values[field])
        elif self.format == "netCDF":
            with _writing(self.out):
                for field in self.fields:
                    self._dataset.write(field, rows, values[field])
        else:
            with _writing(self.out):
                self._dataset.write_block(rows, values)

    def _encode(self, field: str, values) -> np.ndarray:
        """``values`` in the field's file type, NaN replaced by ``nodata`` for floats."""
        values = np.asarray(values).astype(self.dtypes[field], copy=False)
        if self.dtypes[field].kind == "f" and not np.isnan(self.nodata):
            values = np.where(np.isnan(values), self.dtypes[field].type(self.nodata), values)
        return values

    def __exit__(self, exc_type, exc, tb):
        return self._stack.__exit__(exc_type, exc, tb)


#: what a sink raises when its file cannot be written (GDAL through rasterio, netCDF4, zarr)
_WRITE_ERRORS = (OSError, RuntimeError, rasterio.errors.RasterioError)


@contextlib.contextmanager
def _writing(path):
    """Turn a sink's write failure (a full disk, an I/O error) into `OutputWriteError`."""
    try:
        yield
    except OutputWriteError:
        raise
    except _WRITE_ERRORS as error:
        cause = error.__cause__ if isinstance(error, rasterio.errors.RasterioError) else None
        raise OutputWriteError(path, f"{error}: {cause}" if cause else error) from error


def _closing(close, path) -> None:
    with _writing(path):
        close()


def write_result(out, result, *, like: CubeInfo, fields=None, overwrite: bool = False,
                 nodata: float = np.nan, provenance=None) -> dict[str, Path]:
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
        result = {field: getattr(result, field) for field in RESULT_FIELDS if hasattr(result, field)}
    if fields is None:
        fields = [f for f in RESULT_FIELDS if f in result and f != "sigma"]
        if "sigma" in result and np.any(np.isfinite(result["sigma"])):
            fields.append("sigma")
    with ResultWriter(out, like=like, fields=fields, overwrite=overwrite, nodata=nodata,
                      provenance=provenance) as writer:
        writer.write(slice(0, like.grid.height), result)
    return writer.paths
