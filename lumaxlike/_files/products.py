"""A mission product opened for a file command on one cube (`invert_file`,
`normalize_file`, `unmix_file`): the product arguments they share, the cube read as its
archive ships it (`ProductCube`), and the geometry and record its kind implies."""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import rasterio

from .._io.product_cube import ProductCube, product_geometry, product_options, recorded_geometry
from .._io.raster import GDAL_CACHE_BYTES

__all__ = ["OpenedProduct", "ProductArguments", "open_product"]


_FILE_ARGUMENTS = ("solar_spectrum", "wavelengths_from")


@dataclass(frozen=True)
class ProductArguments:
    """The mission-product arguments of the file commands on one cube (see
    `lumaxlike.invert_file`): how the product's normalisation, REFF incidence, radiance,
    wavelengths and thermal bands are taken."""

    correction_undone: bool = False
    reff_incidence: str | None = None
    solar_spectrum: object = None
    solar_distance: float | None = None
    wavelengths_from: object = None
    thermal_bands: str = "keep"

    def call(self) -> dict:
        """The arguments that are not the defaults, for the recorded call."""
        return {
            field.name: getattr(self, field.name)
            for field in dataclasses.fields(self)
            if getattr(self, field.name) != field.default
        }

    def record(self) -> dict:
        """The arguments that are not the defaults, JSON-able (files as absolute paths):
        the product record's ``arguments``, which ``--params-from`` takes back."""
        return {
            name: str(Path(value).absolute()) if name in _FILE_ARGUMENTS else value
            for name, value in self.call().items()
        }

    def files(self) -> list:
        """The input files among them (None where not given), for the run's journal."""
        return [self.solar_spectrum, self.wavelengths_from]


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
            `ProductArguments.record`).
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
    cube_path, units, geometry, dtm, product: ProductArguments, *, bad_bands: str = "mark"
) -> Iterator[OpenedProduct]:
    """Open ``cube_path`` as a product, under GDAL's block cache for the run, and resolve
    its geometry and REFF incidence (`lumaxlike._io.product_cube.product_geometry`).
    ``bad_bands``: as `ProductCube` takes it (``"exclude"`` for a run whose maps are not
    per band).

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
        ) as cube,
    ):
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
