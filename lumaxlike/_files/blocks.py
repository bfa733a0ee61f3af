"""How a file command cuts a cube into blocks of rows, and how a block of one cube is read
for its task (r [1/sr] and the geometry's direction vectors)."""

from __future__ import annotations

import numpy as np

from .._io.raster import CubeInfo
from .._io.units import to_bidirectional_reflectance, uncertainty_to_r

__all__ = [
    "BLOCK_TARGET_BYTES",
    "FLAT_NORMAL",
    "cube_block_reader",
    "default_chunk_rows",
    "block_rows",
]

BLOCK_TARGET_BYTES = 32 * 2**20
"""Default block size: rows such that the block's reflectance in float64 is about this [bytes]."""


def default_chunk_rows(info: CubeInfo) -> int:
    """Rows per block for a cube: about :data:`BLOCK_TARGET_BYTES` of float64 reflectance.

    Rounded down to a multiple of the file's internal block height when larger than it,
    so windows do not re-read the file's blocks.
    """
    row_bytes = info.grid.width * info.bands * 8
    rows = max(1, BLOCK_TARGET_BYTES // row_bytes)
    if rows > info.block_height:
        rows -= rows % info.block_height
    return int(min(rows, info.grid.height))


def block_rows(chunk_rows, info: CubeInfo) -> int:
    """The rows of a block: ``chunk_rows`` when given, else `default_chunk_rows`."""
    return int(chunk_rows) if chunk_rows is not None else default_chunk_rows(info)


FLAT_NORMAL = np.array([0.0, 0.0, 1.0])
"""The ellipsoid's normal in the local frame (the areoid's, for CRISM)."""


def cube_block_reader(
    cube, geometry_reader, *, units, sigma, params, options, extra=None, reff_incidence=None
):
    """How a block of one cube is read for a block task: ``read(rows) -> (args, kwargs)``.

    The task is called as ``function(refl, to_sun, to_sensor, normal, params, options,
    refl_sigma=..., **extra(rows))`` with r [1/sr] and the geometry's direction vectors.
    ``reff_incidence="areoid"`` divides REFF by the ellipsoid's cos i, not the facet's.
    """

    def read(rows: slice):
        to_sun, to_sensor, normal = geometry_reader.read(rows)
        divided_by = FLAT_NORMAL if reff_incidence == "areoid" else normal
        refl = to_bidirectional_reflectance(cube.read(rows), units, to_sun, divided_by)
        refl_sigma = uncertainty_to_r(sigma, units, to_sun, divided_by, refl.dtype)
        kwargs = {"refl_sigma": refl_sigma, **({} if extra is None else extra(rows))}
        return (refl, to_sun, to_sensor, normal, params, options), kwargs

    return read
