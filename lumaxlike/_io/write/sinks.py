"""Sinks: where a :class:`~lumaxlike._io.write.writers.ResultWriter` puts its maps, one kind per
output format, behind one small protocol (:class:`Sink`), chosen from the registry
:data:`FORMATS` by the output's format (:data:`~lumaxlike._io.write.writers.OUTPUT_FORMATS`).

A sink is made from a :class:`SinkSpec` (the maps, their types and grid, the temporary
paths it writes) and takes blocks of rows, ``{field: (rows, cols, bands)}`` already in
the file types; closing it finishes its files. Publication (moving the temporaries into
place) is the writer's, not the sink's (see :mod:`lumaxlike._io.write.atomic`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Protocol

import numpy as np
import rasterio
import rasterio.errors
from rasterio.windows import Window

from ..._status import Status
from ..read.raster import GDAL_CACHE_BYTES, CubeInfo
from .atomic import OutputWriteError
from .layout import (
    FIELD_ATTRS,
    FieldLayout,
    band_descriptions,
    fill_value,
    result_template,
    wavelength_text,
)

__all__ = ["FORMATS", "OutputFormat", "Sink", "SinkSpec"]


class Sink(Protocol):
    """What a writer needs of a sink: write a block of rows, then close."""

    def write(self, rows: slice, block: Mapping[str, np.ndarray]) -> None:
        """Write ``{field: array of shape (len(rows), cols, bands of the field)}``."""

    def close(self) -> None:
        """Finish the files (safe to call twice)."""


@dataclasses.dataclass(frozen=True)
class SinkSpec:
    """What a sink is made from.

    Attributes:
        format: the output format (a key of :data:`FORMATS`).
        paths: ``{field: final path}`` of each map written.
        temporary: ``{final path: temporary path}`` the sink writes instead.
        like: the cube's description; ``likes``: ``{field: description with the field's
            bands}``.
        dtypes: ``{field: file type}``.
        chunk_rows: rows per block the writer is given (netCDF / zarr chunking).
        nodata: value of the floating maps where they are NaN.
        provenance: the run's :class:`lumaxlike.Provenance`, or None.
        layout: the maps' :class:`~lumaxlike._io.write.layout.FieldLayout`.
    """

    format: str
    paths: Mapping
    temporary: Mapping
    like: CubeInfo
    likes: Mapping
    dtypes: Mapping
    chunk_rows: int
    nodata: float
    provenance: object
    layout: FieldLayout

    @property
    def fields(self) -> tuple[str, ...]:
        return tuple(self.paths)

    @property
    def main_temporary(self):
        """The temporary path of the one file that holds every map (netCDF, zarr)."""
        return self.temporary[self.paths[self.layout.main]]


class _RasterSink:
    """One result map written as a GeoTIFF or ENVI file through a temporary path."""

    def __init__(
        self,
        path: Path,
        final_name: str,
        driver: str,
        field: str,
        like: CubeInfo,
        dtype,
        nodata: float,
        provenance=None,
        attrs=None,
    ):
        self.path, self.final_name = path, final_name
        grid = like.grid
        profile = {
            "driver": driver,
            "width": grid.width,
            "height": grid.height,
            "count": like.bands,
            "dtype": np.dtype(dtype).name,
            "crs": grid.crs,
            "transform": grid.transform,
            "nodata": nodata if np.dtype(dtype).kind == "f" else None,
        }
        if driver == "GTiff":
            profile.update(BIGTIFF="IF_SAFER")
        self.dataset = rasterio.open(path, "w", **profile)
        try:
            self._describe(
                field,
                like,
                driver,
                provenance,
                FIELD_ATTRS[field] if attrs is None else attrs,
            )
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
        for index, description in enumerate(band_descriptions(like), start=1):
            if description:
                ds.set_band_description(index, description)
        if like.wavelengths is not None:
            labels = [wavelength_text(value) for value in like.wavelengths]
            if driver == "ENVI":
                envi_tags = {"wavelength": "{" + ", ".join(labels) + "}"}
                if like.wavelength_units:
                    envi_tags["wavelength_units"] = like.wavelength_units
                ds.update_tags(ns="ENVI", **envi_tags)
            else:
                for index, label in enumerate(labels, start=1):
                    tags = {"wavelength": label}
                    if like.wavelength_units:
                        tags["wavelength_units"] = like.wavelength_units
                    ds.update_tags(index, **tags)

    def write(self, rows: slice, values: np.ndarray) -> None:
        window = Window(0, rows.start, self.dataset.width, rows.stop - rows.start)
        self.dataset.write(
            np.moveaxis(values, -1, 0).astype(self.dataset.dtypes[0], copy=False),
            window=window,
        )

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


#: what a sink raises when its file cannot be written (GDAL through rasterio, netCDF4, zarr)
_WRITE_ERRORS = (OSError, RuntimeError, rasterio.errors.RasterioError)


@contextlib.contextmanager
def _writing(path):
    """Turn a sink's write failure (a full disk, an I/O error) into `OutputWriteError`,
    naming the final path."""
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


class RasterFilesSink:
    """GeoTIFF or ENVI: one raster file per map (``OUT``, ``OUT_status``, ...)."""

    def __init__(self, spec: SinkSpec):
        self._env = rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_BYTES, GDAL_PAM_ENABLED="NO")
        self._env.__enter__()
        self._fields = tuple(spec.paths)
        self._files: list[tuple[Path, _RasterSink]] = []
        try:
            for field, path in spec.paths.items():
                raster = _RasterSink(
                    spec.temporary[path],
                    path.name,
                    spec.format,
                    field,
                    spec.likes[field],
                    spec.dtypes[field],
                    spec.nodata,
                    spec.provenance,
                    spec.layout.attrs[field],
                )
                self._files.append((path, raster))
        except BaseException:
            self.close()
            raise

    def write(self, rows: slice, block: Mapping) -> None:
        for (path, raster), field in zip(self._files, self._fields):
            with _writing(path):
                raster.write(rows, block[field])

    def close(self) -> None:
        files, self._files = self._files, []
        env, self._env = self._env, None
        with contextlib.ExitStack() as stack:  # every file closed even if one fails
            if env is not None:
                stack.callback(env.__exit__, None, None, None)
            for path, raster in files:  # closed last opened first
                stack.callback(_closing, raster.close, path)


class NetCDFSink:
    """All result maps in one netCDF-4 file: xarray writes coords, netCDF4 writes blocks."""

    def __init__(self, spec: SinkSpec):
        path, like, layout, dtypes = spec.main_temporary, spec.like, spec.layout, spec.dtypes
        try:
            import netCDF4
        except ImportError:  # pragma: no cover - depends on the environment
            raise ValueError(
                f"writing {path.name}: netCDF output needs the netCDF4 package"
            ) from None
        result_template(like, provenance=spec.provenance, layout=layout).to_netcdf(
            path, engine="netcdf4", format="NETCDF4"
        )
        self.dataset = netCDF4.Dataset(path, "a")
        self.layout = layout
        self.out = spec.paths[layout.main]  # the final path, named in errors
        rows = min(spec.chunk_rows, like.grid.height)
        for field in spec.fields:
            dtype = dtypes[field]
            dims = layout.dims(field)
            chunks = (1,) * (len(dims) - 2) + (rows, like.grid.width)
            variable = self.dataset.createVariable(
                field,
                dtype,
                dims,
                fill_value=fill_value(dtype, spec.nodata),
                chunksizes=chunks,
            )
            variable.set_auto_mask(False)  # blocks arrive with nodata already in place
            attrs = dict(layout.attrs[field], grid_mapping="spatial_ref")
            variable.setncatts(attrs)

    def write(self, rows: slice, block: Mapping) -> None:
        with _writing(self.out):
            for field, values in block.items():
                if len(self.layout.dims(field)) == 2:  # a per-pixel map: its one band
                    self.dataset[field][rows, :] = values[..., 0]
                else:
                    self.dataset[field][:, rows, :] = np.moveaxis(values, -1, 0)

    def close(self) -> None:
        _closing(self.dataset.close, self.out)


class ZarrSink:
    """All result maps in one zarr store: metadata first, then region writes per block."""

    def __init__(self, spec: SinkSpec):
        path, like, layout, dtypes = spec.main_temporary, spec.like, spec.layout, spec.dtypes
        try:
            import dask.array as da
            import zarr  # noqa: F401
        except ImportError:  # pragma: no cover - depends on the environment
            raise ValueError(f"writing {path.name}: zarr output needs the zarr package") from None
        self.path = path
        self.out = spec.paths[layout.main]  # the final path, named in errors
        self.layout = layout
        grid = (like.grid.height, like.grid.width)
        rows = min(spec.chunk_rows, like.grid.height)
        data = {}
        for field in spec.fields:
            bands = layout.like(field, like).bands
            leading = (bands,) if len(layout.dims(field)) == 3 else ()
            data[field] = da.zeros(
                leading + grid,
                dtype=dtypes[field],
                chunks=leading + (rows, like.grid.width),
            )
        encoding = {f: {"_FillValue": fill_value(dtypes[f], spec.nodata)} for f in spec.fields}
        template = result_template(like, spec.fields, data, spec.provenance, layout.attrs, layout)
        template.to_zarr(
            path,
            mode="w",
            compute=False,
            encoding=encoding,
            zarr_format=2,
            consolidated=True,
        )

    def write(self, rows: slice, block: Mapping) -> None:
        import xarray as xr

        variables = {}
        for field, values in block.items():
            dims = self.layout.dims(field)
            variables[field] = (
                dims,
                values[..., 0] if len(dims) == 2 else np.moveaxis(values, -1, 0),
            )
        with _writing(self.out):
            xr.Dataset(variables).to_zarr(
                self.path, region={"y": rows}, mode="r+", zarr_format=2, consolidated=False
            )

    def close(self) -> None:
        """Nothing to finish: every block was written through to the store."""


@dataclasses.dataclass(frozen=True)
class OutputFormat:
    """An output format of the registry :data:`FORMATS`.

    Attributes:
        name: the format (``"GTiff"``, ``"ENVI"``, ``"netCDF"``, ``"zarr"``).
        sink: the sink class, made as ``sink(SinkSpec)``.
        one_dataset: every map in one file or folder at the output path (netCDF, zarr),
            rather than one file per map beside it.
        sidecars: suffixes of the files each map's file brings (ENVI: ``.hdr``).
    """

    name: str
    sink: type
    one_dataset: bool = False
    sidecars: tuple[str, ...] = ()


FORMATS = {
    "GTiff": OutputFormat("GTiff", RasterFilesSink),
    "ENVI": OutputFormat("ENVI", RasterFilesSink, sidecars=(".hdr",)),
    "netCDF": OutputFormat("netCDF", NetCDFSink, one_dataset=True),
    "zarr": OutputFormat("zarr", ZarrSink, one_dataset=True),
}
"""The output formats: name -> :class:`OutputFormat` (the writers' one place to look)."""
