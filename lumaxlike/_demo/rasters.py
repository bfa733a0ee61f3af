"""Write the demo's input rasters (reflectance cube, OBS geometry, DTM) and read results.

Rasters are georeferenced in UTM zone 12N (EPSG:32612) on a north-up grid; all are
float64 so that a noise-free demo is recovered to solver precision.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import rasterio
from rasterio import Affine

from .scene import Scene

__all__ = [
    "DEMO_CRS",
    "OBS_BANDS",
    "demo_transform",
    "write_spectral_cube",
    "write_obs",
    "write_dtm",
    "read_raster",
    "DemoInputs",
    "write_demo_inputs",
]

#: Coordinate reference system of the demo rasters.
DEMO_CRS = "EPSG:32612"

#: Band descriptions of the OBS raster, in band order; values in degrees.
OBS_BANDS = ("to_sun_zenith", "to_sun_azimuth", "to_sensor_zenith", "to_sensor_azimuth")

_ORIGIN_EAST_NORTH_M = (500_000.0, 4_100_000.0)


def demo_transform(pixel_size_m: float) -> Affine:
    """North-up affine transform of the demo grid (upper-left corner at a fixed point)."""
    east, north = _ORIGIN_EAST_NORTH_M
    return Affine(pixel_size_m, 0.0, east, 0.0, -pixel_size_m, north)


def _write(path, bands, transform, driver, descriptions, tags=None, band_tags=None, envi_tags=None):
    """Write ``bands`` of shape ``(count, rows, cols)`` as float64 with their metadata.

    Args:
        descriptions: one band description per band.
        tags: dataset tags; band_tags: one dict of tags per band; envi_tags: tags of the
            ``ENVI`` metadata domain.
    """
    count, rows, cols = bands.shape
    with rasterio.open(
        path,
        "w",
        driver=driver,
        width=cols,
        height=rows,
        count=count,
        dtype="float64",
        crs=DEMO_CRS,
        transform=transform,
    ) as dst:
        dst.write(bands.astype(np.float64, copy=False))
        dst.update_tags(**(tags or {}))
        if envi_tags:
            dst.update_tags(ns="ENVI", **envi_tags)
        for index, description in enumerate(descriptions, start=1):
            dst.set_band_description(index, description)
            if band_tags:
                dst.update_tags(index, **band_tags[index - 1])
    return Path(path)


def write_spectral_cube(
    path, values, wavelength_nm, transform, quantity, units, driver="GTiff"
) -> Path:
    """Write a spectral cube (reflectance, albedo ...) with its band wavelengths.

    Wavelengths go into the ENVI metadata domain (``wavelength = {...}``,
    ``wavelength units = Nanometers``), per-band tags (``wavelength``,
    ``wavelength_units``) and band descriptions, so GDAL, rasterio and ENVI readers all
    find them.

    Args:
        path: output file (``.tif`` for GeoTIFF; ``.img`` with a ``.hdr`` for ENVI).
        values: the cube, shape ``(rows, cols, bands)``.
        wavelength_nm: band centres [nm], shape ``(bands,)``.
        transform: affine transform of the grid.
        quantity, units: what ``values`` hold, stored as dataset tags.
        driver: ``"GTiff"`` or ``"ENVI"``.

    Returns:
        The path written.
    """
    if driver not in ("GTiff", "ENVI"):
        raise ValueError(f"driver must be 'GTiff' or 'ENVI', got {driver!r}")
    labels = [f"{wavelength:.1f}" for wavelength in wavelength_nm]
    return _write(
        path,
        np.moveaxis(values, -1, 0),
        transform,
        driver,
        descriptions=[f"{label} nm" for label in labels],
        tags={"quantity": quantity, "units": units},
        band_tags=[{"wavelength": label, "wavelength_units": "nm"} for label in labels],
        envi_tags={"wavelength": "{" + ", ".join(labels) + "}", "wavelength_units": "Nanometers"},
    )


def write_obs(path, scene: Scene, transform) -> Path:
    """Write the OBS raster: to-sun and to-sensor zenith and azimuth [deg] per pixel.

    Azimuths are clockwise from north. Band descriptions are `OBS_BANDS`.
    """
    bands = np.stack(
        [
            scene.to_sun_zenith_deg,
            scene.to_sun_azimuth_deg,
            scene.to_sensor_zenith_deg,
            scene.to_sensor_azimuth_deg,
        ]
    )
    tags = {"units": "degrees", "azimuth_convention": "clockwise from north"}
    return _write(path, bands, transform, "GTiff", OBS_BANDS, tags=tags)


def write_dtm(path, dtm, transform) -> Path:
    """Write the DTM: heights [m], shape ``(rows, cols)``, one band."""
    return _write(path, dtm[None], transform, "GTiff", ["height"], tags={"units": "m"})


def read_raster(path) -> np.ndarray:
    """Read every band of a raster as an array of shape ``(rows, cols, bands)``."""
    with rasterio.open(path) as src:
        return np.moveaxis(src.read(), 0, -1)


@dataclass(frozen=True)
class DemoInputs:
    """Paths of the demo's input rasters.

    Attributes:
        cube: reflectance r [1/sr], GeoTIFF.
        cube_envi: the same cube in ENVI format (``.img`` with its ``.hdr``).
        obs: OBS geometry raster (see `OBS_BANDS`), GeoTIFF.
        dtm: heights [m], GeoTIFF.
        w_true: the true single-scattering albedo, GeoTIFF, for comparison.
    """

    cube: Path
    cube_envi: Path
    obs: Path
    dtm: Path
    w_true: Path


def write_demo_inputs(workdir, scene: Scene, reflectance) -> DemoInputs:
    """Write the reflectance cube (GeoTIFF and ENVI), OBS, DTM and true-w rasters.

    Args:
        workdir: existing output directory.
        scene: the demo scene.
        reflectance: r [1/sr], shape ``(rows, cols, bands)``.

    Returns:
        DemoInputs with the paths written.
    """
    workdir = Path(workdir)
    transform = demo_transform(scene.config.pixel_size_m)
    wavelength_nm = scene.wavelength_nm
    reflectance_tags = {"quantity": "bidirectional reflectance r", "units": "1/sr"}
    return DemoInputs(
        cube=write_spectral_cube(
            workdir / "reflectance.tif", reflectance, wavelength_nm, transform, **reflectance_tags
        ),
        cube_envi=write_spectral_cube(
            workdir / "reflectance.img",
            reflectance,
            wavelength_nm,
            transform,
            **reflectance_tags,
            driver="ENVI",
        ),
        obs=write_obs(workdir / "obs.tif", scene, transform),
        dtm=write_dtm(workdir / "dtm.tif", scene.dtm, transform),
        w_true=write_spectral_cube(
            workdir / "w_true.tif",
            scene.w,
            wavelength_nm,
            transform,
            quantity="single-scattering albedo w",
            units="1",
        ),
    )
