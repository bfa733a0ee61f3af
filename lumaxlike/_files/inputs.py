"""The input files of a file run, listed once for every command: what no output may
replace (`check_not_an_input`) and what the run's journal fingerprints for ``--resume``
(`lumaxlike._run.journal.input_fingerprint`), with the files each of them stands for."""

from __future__ import annotations

import warnings
from pathlib import Path

from .._io.missions.pds3 import find_sibling
from .._io.missions.products import locate
from .arguments import geometry_paths

__all__ = ["read_files", "run_inputs"]


def run_inputs(cubes, *, dtm=None, geometries=(), product=None, extra=()) -> list:
    """The input files a run is given (None where one is not).

    Args:
        cubes: the cube paths (one for invert, normalize and unmix; the stack for fit
            and sample).
        dtm: the DTM path or None.
        geometries: the ``geometry`` arguments, one per cube (paths, mappings of roles to
            paths or arrays, or None; see `geometry_paths`).
        product: the `ProductOptions` (its solar spectrum and wavelength files), or None.
        extra: any other input files of the command (parameter maps, a region raster).
    """
    return [
        *cubes,
        dtm,
        *(path for geometry in geometries for path in geometry_paths(geometry)),
        *extra,
        *(() if product is None else product.files()),
    ]


def read_files(paths) -> list[Path]:
    """``paths`` (None skipped) with the files reading each opens too: the data file and
    PDS3 label `lumaxlike._io.missions.products.locate` pairs a raster with, the table or image a
    label describes, and each one's ENVI header, their names in any case, and GDAL's
    ``NAME.aux.xml`` sidecar of any of them that has one."""
    files = []
    for path in (Path(p) for p in paths if p is not None):
        files.append(path)
        files.extend(_companions(path))
    return files


def _companions(path: Path) -> list[Path]:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        try:
            located = locate(path)
        except (OSError, ValueError):  # not a raster (a table's label), or not there
            located = None
    candidates: list[Path | None] = []
    if located is not None:
        candidates.append(located.data)
        if located.label is not None:
            candidates.append(located.label.label)
    if path.suffix.lower() == ".lbl":  # a table's or an image's label: the data beside it
        candidates.extend(find_sibling(path, suffix) for suffix in (".tab", ".img"))
    found = [f for f in candidates if f is not None]
    headers = [find_sibling(f, ".hdr") for f in [path, *found]]
    found.extend(f for f in headers if f is not None)
    # GDAL's own sidecar (PAM) of each: it can hold nodata, scale, offset, band metadata
    sidecars = (f.with_name(f.name + ".aux.xml") for f in [path, *found])
    return found + [f for f in sidecars if f.is_file()]
