"""Opening a raster file for reading, with clear errors (an ENVI header stands for its data
file).

The one piece of raster reading that `lumaxlike._provenance` (which reads the record of
an output) shares with the IO layer (`lumaxlike._io.raster`, which re-exports it), so
it lives below both.
"""

from __future__ import annotations

from pathlib import Path

import rasterio
import rasterio.errors

__all__ = ["ENVI_DATA_SUFFIXES", "open_raster"]

#: the data files an ENVI header ``name.hdr`` may stand for, in the order they are tried
ENVI_DATA_SUFFIXES = ("", ".img", ".dat", ".raw", ".bsq", ".bil", ".bip", ".envi")


def open_raster(path) -> rasterio.io.DatasetReader:
    """Open a raster file for reading with clear errors.

    An ENVI header (``name.hdr``) may be given instead of its data file.

    Args:
        path: file path (``str`` or ``os.PathLike``).

    Returns:
        an open ``rasterio`` dataset (use it as a context manager).

    Raises:
        FileNotFoundError: the file does not exist.
        ValueError: the file exists but GDAL cannot read it as a raster.
    """
    path = _data_file(Path(path))
    try:
        return rasterio.open(path)
    except rasterio.errors.RasterioIOError as error:
        raise ValueError(f"cannot read {path} as a raster (GDAL: {error})") from None


def _data_file(path: Path) -> Path:
    if path.suffix.lower() == ".hdr":
        tried = [path.with_suffix(suffix) for suffix in ENVI_DATA_SUFFIXES]
        for candidate in tried:
            if candidate.is_file():
                return candidate
        if not path.exists():
            raise FileNotFoundError(f"input file {path} does not exist")
        raise FileNotFoundError(
            f"no data file found next to ENVI header {path} (tried "
            + ", ".join(p.name for p in tried)
            + ")"
        )
    if not path.exists():
        raise FileNotFoundError(f"input file {path} does not exist")
    return path
