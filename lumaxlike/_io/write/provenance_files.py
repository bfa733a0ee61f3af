"""`read_provenance`: the record of how a lumaxlike output was made, read back from the
output (its tags or attributes).

The record itself (`lumaxlike.Provenance`, what the writers write) is
`lumaxlike._provenance`'s; reading it back from a file opens rasters like every other
reader of this package (`raster.open_raster`: ENVI headers, PDS3 labels), so it lives
here, above the record.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from ..._provenance import Provenance
from ..read.raster import open_raster

__all__ = ["read_provenance"]


def read_provenance(path) -> Provenance:
    """Read how a lumaxlike output was made from its tags or attributes.

    Args:
        path: any output of ``lumaxlike invert`` / `lumaxlike.invert_file` (the w
            map or a sibling map such as ``w_status.tif``; an ENVI data file or header; a
            ``.nc`` file; a ``.zarr`` store), or the ``xarray.Dataset`` returned by
            `lumaxlike.invert_dataarray`.

    Returns:
        `Provenance` with the model, Hapke parameters per band, units, solver,
        tolerance, iteration limit, uncertainty, input files, command and time.

    Raises:
        FileNotFoundError: ``path`` does not exist.
        ValueError: ``path`` holds no lumaxlike provenance, or it is malformed (names
            the file and the key).
    """
    if not isinstance(path, (str, Path)) and isinstance(getattr(path, "attrs", None), Mapping):
        return Provenance.from_attrs(path.attrs, source=f"the {type(path).__name__}")
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"{path} does not exist")
    suffix = path.suffix.lower()
    if suffix in (".nc", ".zarr"):
        import xarray as xr

        opener = xr.open_zarr if suffix == ".zarr" else xr.open_dataset
        with opener(path) as dataset:
            attrs = dict(dataset.attrs)
    else:
        with open_raster(path) as dataset:
            attrs = dict(dataset.tags())
            if "ENVI" in (dataset.tag_namespaces() or []):
                attrs.update(dataset.tags(ns="ENVI"))
    return Provenance.from_attrs(attrs, source=str(path))
