"""How a file command cuts a cube into blocks of rows (`block_setup`: the product opened,
rows per block, pixels per solver chunk, solver options), and how a block of one cube is
read for its task (r [1/sr] and the geometry's direction vectors)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import numpy as np

from .._inverse.albedo.invert import solver_chunk_pixels
from .._io.missions.product_cube import ProductCube
from .._io.read.raster import CubeInfo
from .._io.read.units import to_bidirectional_reflectance, uncertainty_to_r
from .._options import ProductOptions, SolverOptions
from .._provenance import Provenance, make_provenance
from .arguments import made
from .products import OpenedProduct, open_product

__all__ = [
    "BLOCK_TARGET_BYTES",
    "FLAT_NORMAL",
    "BlockSetup",
    "block_rows",
    "block_setup",
    "cube_block_reader",
    "values_block_reader",
    "default_chunk_rows",
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


@dataclass(frozen=True)
class BlockSetup:
    """A cube opened for a run on one cube, and how the run cuts it (`block_setup`).

    Attributes:
        cube_path, dtm: the cube file and the DTM (or None) as given.
        opened: the product opened (`OpenedProduct`: cube, geometry, REFF incidence, record).
        rows_per_block: rows of the cube read, solved and written at a time.
        chunk_size: pixels per solver chunk, the same for every block (the last block's
            chunk is padded), so the JAX solver compiles once.
        options: the block task's `SolverOptions` (solver, max_iter, tol, chunk_size).
    """

    cube_path: object
    dtm: object
    opened: OpenedProduct
    rows_per_block: int
    chunk_size: int
    options: SolverOptions

    @property
    def cube(self) -> ProductCube:
        """The cube (`ProductCube`)."""
        return self.opened.cube

    @property
    def info(self) -> CubeInfo:
        """The cube's grid, bands and data type (the bands run, bad ones left out where
        the product was opened with ``bad_bands="exclude"``)."""
        return self.opened.cube.info

    def made(self, value):
        """``value``, or what a `FromBands` makes of this cube's bands (bad bands
        counted, as a run that marks them reads them: `ProductCube.marked_info`)."""
        return made(value, self.cube.marked_info)

    def provenance(self, geometry_reader, **settings) -> Provenance:
        """The run's record (`make_provenance`): this cube, its geometry (as recorded), the
        DTM, how ``geometry_reader`` reads the geometry and the product record, with
        ``settings`` (params, units, solver, tol, max_iter, refl_sigma, command, ...)."""
        return make_provenance(
            dtype=self.info.dtype,
            cube=self.cube_path,
            geometry=self.opened.recorded_geometry,
            dtm=self.dtm,
            geometry_layout=None if geometry_reader is None else geometry_reader.record(),
            product=self.opened.record,
            **settings,
        )

    def block_reader(self, geometry_reader, *, sigma, params, options=None, extra=None):
        """`cube_block_reader` of this cube (its units and REFF incidence), with this run's
        `SolverOptions` unless ``options`` replaces them; `values_block_reader` without a
        ``geometry_reader`` (None)."""
        if geometry_reader is None:
            return values_block_reader(self.cube, params, options, extra)
        return cube_block_reader(
            self.cube,
            geometry_reader,
            units=self.cube.units,
            sigma=sigma,
            params=params,
            options=self.options if options is None else options,
            extra=extra,
            reff_incidence=self.opened.reff_incidence,
        )


@contextlib.contextmanager
def block_setup(
    cube_path,
    units,
    geometry,
    dtm,
    product: ProductOptions,
    *,
    chunk_rows,
    solver: str,
    max_iter=None,
    tol=None,
    chunk_pixels: Callable[[int], int] | None = None,
    bad_bands: str = "mark",
    with_geometry: bool = True,
    check_values: bool = True,
) -> Iterator[BlockSetup]:
    """Open ``cube_path`` as a product (`open_product`) and cut it into blocks.

    Args:
        cube_path, units, geometry, dtm, product, bad_bands, with_geometry, check_values:
            as `open_product` takes them.
        chunk_rows: rows per block, None for `default_chunk_rows`.
        solver, max_iter, tol: the block task's solver settings (`SolverOptions`).
        chunk_pixels: the solver's pixels per chunk for a number of bands, None for
            `invert`'s default for ``solver`` (`solver_chunk_pixels`); a chunk is never
            larger than a block.

    Yields:
        `BlockSetup`, valid while the context is open (the cube is closed after).

    Raises:
        ValueError: as `open_product` does.
    """
    with open_product(
        cube_path,
        units,
        geometry,
        dtm,
        product,
        bad_bands=bad_bands,
        with_geometry=with_geometry,
        check_values=check_values,
    ) as opened:
        info = opened.cube.info
        rows_per_block = block_rows(chunk_rows, info)
        per_chunk = (
            solver_chunk_pixels(solver, info.bands, np.result_type(info.dtype, np.float32))
            if chunk_pixels is None
            else chunk_pixels(info.bands)
        )
        chunk_size = min(rows_per_block * info.grid.width, per_chunk)
        options = SolverOptions(solver, max_iter=max_iter, tol=tol, chunk_size=chunk_size)
        yield BlockSetup(cube_path, dtm, opened, rows_per_block, chunk_size, options)


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


def values_block_reader(cube, params, options, extra=None):
    """How a block of one cube is read for the task of an operation on the values alone
    (`Operation.geometry` False): ``read(rows) -> ((values, params, options), extra(rows))``,
    ``values`` the cube's as `ProductCube.read` gives them (its units; bad bands NaN)."""

    def read(rows: slice):
        return (cube.read(rows), params, options), ({} if extra is None else extra(rows))

    return read
