"""Write the demo's inputs as netCDF files for the xarray front end.

``reflectance.nc`` and ``w_true.nc`` hold one DataArray each with dims ``(band, y, x)``
and a ``wavelength`` coordinate [nm] along ``band``; ``obs.nc`` holds the four OBS angles
[deg] and the DTM's surface normals. The ``x``/``y`` coordinates are the pixel centres
[m] of the demo rasters' grid (`lumaxlike._demo.rasters.DEMO_CRS`), so every file
aligns with the others exactly and with the GeoTIFFs.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .rasters import DEMO_CRS, OBS_BANDS, demo_transform
from .scene import Scene

__all__ = ["NetcdfInputs", "scene_coords", "write_netcdf_inputs"]


@dataclass(frozen=True)
class NetcdfInputs:
    """Paths of the demo's netCDF inputs.

    Attributes:
        cube: reflectance r [1/sr], dims ``(band, y, x)``.
        obs: angles ``to_sun_zenith`` ... [deg] and ``normal`` vectors, dims ``(y, x)``
            (``normal``: ``(y, x, component)``).
        w_true: the true single-scattering albedo, dims ``(band, y, x)``.
    """

    cube: Path
    obs: Path
    w_true: Path


def scene_coords(scene: Scene) -> dict:
    """``x``, ``y`` (pixel centres [m], EPSG:32612) coordinates of the scene's grid."""
    transform = demo_transform(scene.config.pixel_size_m)
    index = np.arange(scene.config.size) + 0.5
    return {
        "y": (
            "y",
            transform.f + transform.e * index,
            {"standard_name": "projection_y_coordinate", "units": "m"},
        ),
        "x": (
            "x",
            transform.c + transform.a * index,
            {"standard_name": "projection_x_coordinate", "units": "m"},
        ),
    }


def _spectral(scene: Scene, values, name: str, attrs: dict):
    import xarray as xr

    bands = len(scene.wavelength_nm)
    return xr.DataArray(
        np.moveaxis(values, -1, 0),
        dims=("band", "y", "x"),
        name=name,
        coords={
            **scene_coords(scene),
            "band": ("band", np.arange(1, bands + 1)),
            "wavelength": ("band", scene.wavelength_nm, {"units": "nm"}),
        },
        attrs={**attrs, "crs": DEMO_CRS},
    )


def write_netcdf_inputs(workdir, scene: Scene, reflectance) -> NetcdfInputs:
    """Write ``reflectance.nc``, ``obs.nc`` and ``w_true.nc`` into ``workdir``.

    Args:
        workdir: existing output directory.
        scene: the demo scene.
        reflectance: r [1/sr], shape ``(rows, cols, bands)``.

    Returns:
        NetcdfInputs with the paths written.
    """
    import xarray as xr

    workdir = Path(workdir)
    cube = workdir / "reflectance.nc"
    _spectral(
        scene, reflectance, "r", {"long_name": "bidirectional reflectance", "units": "sr-1"}
    ).to_netcdf(cube)
    angles = (
        scene.to_sun_zenith_deg,
        scene.to_sun_azimuth_deg,
        scene.to_sensor_zenith_deg,
        scene.to_sensor_azimuth_deg,
    )
    azimuth_note = {"comment": "azimuth clockwise from north"}
    obs_vars: dict[str, tuple[tuple[str, ...], np.ndarray, dict[str, str]]] = {
        name: (
            ("y", "x"),
            values,
            {"units": "degrees", **(azimuth_note if "azimuth" in name else {})},
        )
        for name, values in zip(OBS_BANDS, angles)
    }
    obs_vars["normal"] = (
        ("y", "x", "component"),
        scene.normal,
        {"long_name": "outward surface normal from the DTM (east, north, up)", "units": "1"},
    )
    obs = workdir / "obs.nc"
    xr.Dataset(
        obs_vars,
        coords={**scene_coords(scene), "component": ["east", "north", "up"]},
        attrs={"crs": DEMO_CRS},
    ).to_netcdf(obs)
    w_true = workdir / "w_true.nc"
    _spectral(
        scene, scene.w, "w", {"long_name": "single-scattering albedo", "units": "1"}
    ).to_netcdf(w_true)
    return NetcdfInputs(cube=cube, obs=obs, w_true=w_true)
