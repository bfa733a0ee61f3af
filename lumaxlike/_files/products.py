"""A mission product opened for a file command on one cube (`invert_file`,
`normalize_file`, `unmix_file`): the product arguments they share, the cube read as its
archive ships it (`ProductCube`), and the geometry and record its kind implies."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import rasterio

from .._io.missions.product_cube import ProductCube, product_options
from .._io.missions.product_geometry import product_geometry, recorded_geometry
from .._io.read.raster import GDAL_CACHE_BYTES
from .._options import ProductOptions

__all__ = ["OpenedProduct", "open_product"]


@dataclass(frozen=True)
class OpenedProduct:
    """A cube opened for a run.

    Attributes:
        cube: the `ProductCube`.
        geometry: the geometry to read: the one given, or a normalised product's standard
            geometry as a mapping of arrays.
        reff_incidence: what REFF is divided by (None unless ``units="reff"``).
        record: the product's provenance record (``lumaxlike_product``), with the
            product arguments that are not the defaults (``arguments``,
            `lumaxlike.ProductOptions.record`).
    """

    cube: ProductCube
    geometry: object
    reff_incidence: str | None
    record: dict

    @property
    def recorded_geometry(self):
        """The geometry input to record: None for a product's standard geometry."""
        return recorded_geometry(self.geometry, self.record)


@contextlib.contextmanager
def open_product(
    cube_path,
    units,
    geometry,
    dtm,
    product: ProductOptions,
    *,
    bad_bands: str = "mark",
    with_geometry: bool = True,
    check_values: bool = True,
) -> Iterator[OpenedProduct]:
    """Open ``cube_path`` as a product, under GDAL's block cache for the run, and resolve
    its geometry and REFF incidence (`lumaxlike._io.missions.product_geometry.product_geometry`).
    ``bad_bands``, ``check_values``: as `ProductCube` takes them (``"exclude"`` for a run
    whose maps are not per band). ``with_geometry`` False: no geometry resolved (none
    required; an operation on the values alone), the geometry and REFF incidence None.

    Raises:
        ValueError: as `ProductCube` and `product_geometry` do (a unit the label or the
            values contradict, a normalised product with a geometry, ...).
    """
    with (
        rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_BYTES),
        ProductCube(
            cube_path,
            units,
            **product_options(
                product.solar_spectrum,
                product.solar_distance,
                product.wavelengths_from,
                product.thermal_bands,
            ),
            bad_bands=bad_bands,
            check_values=check_values,
        ) as cube,
    ):
        if not with_geometry:
            yield OpenedProduct(cube, None, None, {**cube.record(), "arguments": product.record()})
            return
        geometry, incidence, record = product_geometry(
            cube,
            cube_path,
            geometry,
            dtm,
            units=units,
            reff_incidence=product.reff_incidence,
            correction_undone=product.correction_undone,
        )
        yield OpenedProduct(cube, geometry, incidence, {**record, "arguments": product.record()})
