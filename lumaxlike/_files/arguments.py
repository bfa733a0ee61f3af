"""The argument checks every file command makes the same way, before any work: the solver,
the units and sigma, the rows per block, and that no output would replace an input; and
`FromBands`, an argument made once the cube is open (the command line's models and
endmembers)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._io.read.raster import CubeInfo
from .._io.read.units import check_units
from .._io.write.writers import output_files
from .._operations.blocks import check_solver

__all__ = ["FromBands", "check_not_an_input", "check_run_arguments", "geometry_paths", "made"]

RADIANCE_SIGMA = (
    "sigma with units='radiance' is not supported: give the cube's uncertainty as I/F "
    "(convert first)"
)


@dataclass(frozen=True)
class FromBands:
    """A file front end's argument made once its cube is open, from the bands it reads:
    the command line's models, one value per band of a cube it has not opened, and
    ``unmix``'s endmembers, resampled to its band centres, so that a command opens its
    cube once (`made`).

    Attributes:
        make: ``make(bands) -> value``, e.g. the ``params`` of `lumaxlike.invert_file`;
            with ``info``, ``make(info) -> value``, e.g. the ``endmembers`` of
            `lumaxlike.unmix_file`.
        info: whether ``make`` takes the bands' `lumaxlike.CubeInfo` (their wavelengths
            and the cube's path too), not their number.
    """

    make: Callable[[Any], Any]
    info: bool = False


def made(value, info: CubeInfo):
    """``value``, or what a `FromBands` makes of ``info``, the opened cube's bands (or of
    their number)."""
    if not isinstance(value, FromBands):
        return value
    return value.make(info if value.info else info.bands)


def check_run_arguments(solver, units, sigma, chunk_rows, *, radiance: bool = False) -> None:
    """Refuse a bad solver, units, sigma or rows per block, naming the argument.

    Args:
        solver: ``"jax"`` or ``"numba"``.
        units: ``"r"``, ``"radf"``, ``"reff"``, or with ``radiance`` also ``"radiance"``.
        sigma: None or a positive finite number (not with ``units="radiance"``).
        chunk_rows: None or a positive integer.
        radiance: whether the command reads radiance (converted to I/F).

    Raises:
        ValueError: naming the argument that is wrong.
    """
    check_solver(solver)
    if not (radiance and units == "radiance"):
        check_units(units)
    elif sigma is not None:
        raise ValueError(RADIANCE_SIGMA)
    if sigma is not None and not (
        isinstance(sigma, (int, float)) and np.isfinite(sigma) and sigma > 0
    ):
        raise ValueError(f"sigma must be a positive number, got {sigma!r}")
    if chunk_rows is not None and (int(chunk_rows) != chunk_rows or chunk_rows < 1):
        raise ValueError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")


def check_not_an_input(out_path, fields, inputs, main: str = "w") -> None:
    """Refuse an output that would replace an input file or its ENVI header."""
    protected = {}
    for path in (Path(p) for p in inputs if p is not None):
        for candidate in (path, path.with_suffix(".hdr")):
            if candidate.exists():
                protected[candidate.resolve()] = path
    for output in output_files(out_path, fields, main):
        if output.resolve() in protected:
            raise ValueError(
                f"output {output} would replace the input file {protected[output.resolve()]}"
            )


def geometry_paths(geometry) -> list:
    """The files of a ``geometry`` argument: the raster's path, or the paths of a mapping
    of roles (arrays are not files)."""
    if isinstance(geometry, (str, Path)):
        return [geometry]
    if isinstance(geometry, Mapping):
        return [v for v in geometry.values() if isinstance(v, (str, Path))]
    return []
