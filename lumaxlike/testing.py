"""Synthetic scenes for tests, benchmarks and notebooks: Hapke parameters, geometry,
reflectance cubes and GeoTIFF inputs with known truth.

The convention of `numpy.testing` and `xarray.testing`: a public module of the helpers
that lumaxlike's own tests use, for anyone testing code built on lumaxlike. Everything
is noise-free and reproducible from a `numpy.random.Generator` or a seed.

Units and shapes: directions are unit vectors in the frame of the scene (z up, to the
sun, to the sensor, the surface normal), float64 arrays (..., 3); angles in degrees in
arguments and files; reflectance r is the bidirectional reflectance [1/sr] computed by
`lumaxlike.amsa` with the numba backend.

Only NumPy is imported with this module; JAX, numba and rasterio load when a function
needs them (so a profiling child can set its thread limits first).

Examples:
    >>> import numpy as np
    >>> from lumaxlike.testing import random_geometry
    >>> to_sun, to_sensor, normal = random_geometry(4, np.random.default_rng(0))
    >>> to_sun.shape
    (4, 3)
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

__all__ = [
    "default_params",
    "multi_angle_geometry",
    "multi_angle_reflectance",
    "random_geometry",
    "synthetic_cube",
    "thermal_reflectance",
    "write_geotiff_inputs",
]


def default_params():
    """Hapke parameters with roughness and both opposition effects (the tests' default).

    Returns:
        `lumaxlike.HapkeParams`: b = 0.21, c = 0.45, roughness 20 deg (in radians),
        shadow-hiding h_S = 0.06, B_S0 = 1, coherent backscatter h_C = 0.05, B_C0 = 0.5.
    """
    from ._params import HapkeParams

    return HapkeParams(
        b=0.21, c=0.45, roughness=math.radians(20.0), hs=0.06, bs0=1.0, hc=0.05, bc0=0.5
    )


def random_geometry(
    n_pixels, rng, max_incidence_deg=80.0, max_emission_deg=70.0, max_tilt_deg=30.0
):
    """Random single-observation geometry: one (to_sun, to_sensor, normal) per pixel.

    Incidence 0-80 deg, emission 0-70 deg at any azimuth on a flat frame, the normal
    tilted by up to 30 deg (so a few percent of pixels see the source or observer below
    the local horizon).

    Args:
        n_pixels: number of pixels.
        rng: `numpy.random.Generator` the angles are drawn from.
        max_incidence_deg: largest zenith angle of the directions to the sun [deg] (in
            the frame, before the tilt).
        max_emission_deg: largest zenith angle of the directions to the sensor [deg].
        max_tilt_deg: largest tilt of the normal from the frame's z axis [deg].

    Returns:
        (to_sun, to_sensor, normal): unit vectors, each (n_pixels, 3) float64.
    """
    from ._geometry import direction_from_zenith_azimuth

    inc = np.radians(rng.uniform(0, max_incidence_deg, n_pixels))
    emi = np.radians(rng.uniform(0, max_emission_deg, n_pixels))
    az = rng.uniform(0, 2 * np.pi, n_pixels)
    to_sun = direction_from_zenith_azimuth(inc, np.zeros(n_pixels))
    to_sensor = direction_from_zenith_azimuth(emi, az)
    tilt = np.radians(rng.uniform(0, max_tilt_deg, n_pixels))
    normal = direction_from_zenith_azimuth(tilt, rng.uniform(0, 2 * np.pi, n_pixels))
    return to_sun, to_sensor, normal


def multi_angle_geometry(n_pixels, n_obs, rng, *, min_phase_deg=0.0, opposition=True):
    """Random multi-angle geometry for `lumaxlike.fit`: n_obs observations per pixel.

    Incidence 0-60 deg, emission 0-65 deg at any relative azimuth, on a flat surface.
    With `opposition`, the first two observations of every pixel lie near the opposition
    (phase angles of about 2 and 8 deg), as in a goniometer run or a hot-spot pass;
    `min_phase_deg` redraws any observation at a smaller phase angle (for setups that
    cannot see the opposition effects).

    Args:
        n_pixels: number of pixels; n_obs: observations per pixel.
        rng: `numpy.random.Generator` the angles are drawn from.
        min_phase_deg: smallest phase angle of a (redrawn) observation [deg].
        opposition: put the first two observations near the opposition.

    Returns:
        (to_sun, to_sensor, normal): unit vectors, each (n_pixels, n_obs, 3) float64
        (the normal is (0, 0, 1) everywhere).
    """
    from ._geometry import direction_from_zenith_azimuth

    def draw(shape):
        inc = np.radians(rng.uniform(0.0, 60.0, shape))
        emi = np.radians(rng.uniform(0.0, 65.0, shape))
        return (
            direction_from_zenith_azimuth(inc, np.zeros(shape)),
            direction_from_zenith_azimuth(emi, rng.uniform(0.0, 2.0 * np.pi, shape)),
        )

    to_sun, to_sensor = draw((n_pixels, n_obs))
    while True:  # redraw observations below the minimum phase angle
        too_small = np.sum(to_sun * to_sensor, axis=-1) > np.cos(np.radians(min_phase_deg))
        if min_phase_deg <= 0.0 or not too_small.any():
            break
        new_source, new_observer = draw((int(too_small.sum()),))
        to_sun[too_small], to_sensor[too_small] = new_source, new_observer
    if opposition:
        for k, phase_deg in enumerate((2.0, 8.0)[: min(2, n_obs)]):
            inc = np.radians(rng.uniform(5.0, 50.0, n_pixels))
            to_sun[:, k] = direction_from_zenith_azimuth(inc, np.zeros(n_pixels))
            to_sensor[:, k] = direction_from_zenith_azimuth(
                inc + np.radians(phase_deg), np.zeros(n_pixels)
            )
    normal = np.broadcast_to(np.array([0.0, 0.0, 1.0]), to_sun.shape).copy()
    return to_sun, to_sensor, normal


def multi_angle_reflectance(w, to_sun, to_sensor, normal, params):
    """Noise-free reflectance of every pixel, band and observation of a multi-angle scene.

    Args:
        w: single-scattering albedos [-], (pixels, bands).
        to_sun: unit vectors toward the sun, (pixels, observations, 3), e.g. from
            `multi_angle_geometry`.
        to_sensor: unit vectors toward the sensor, the same shape.
        normal: surface normals, the same shape.
        params: `lumaxlike.HapkeParams` shared by every pixel.

    Returns:
        r [1/sr], (pixels, bands, observations) float64: the `refl` `lumaxlike.fit` takes.
    """
    from ._model.forward import amsa

    per_observation = [
        np.asarray(amsa(w, to_sun[:, k], to_sensor[:, k], normal[:, k], params, backend="numba"))
        for k in range(to_sun.shape[1])
    ]
    return np.stack(per_observation, axis=-1)


def thermal_reflectance(
    w, to_sun, to_sensor, normal, params, wavelengths, temperature, solar_irradiance, distance=1.0
):
    """Noise-free observed r of a warm surface: reflected light plus thermal emission.

    r_obs = r(w) + eps(e; w) B_lambda(T) d^2 / F_sun, with eps = 1 - r_hd the directional
    emissivity of the same Hapke model (Kirchhoff), as `lumaxlike.remove_thermal` models it.

    Args:
        w: single-scattering albedos [-], ``pixels + (bands,)``.
        to_sun: unit vector toward the sun, ``pixels + (3,)`` (or ``(3,)``).
        to_sensor: unit vector toward the sensor, the same shapes.
        normal: the surface normal, the same shapes.
        params: `lumaxlike.HapkeParams`.
        wavelengths: band centres [um], ``(bands,)``.
        temperature: T [K], a scalar or ``pixels``.
        solar_irradiance: F_sun at 1 au per band [W m^-2 um^-1], ``(bands,)``.
        distance: the Sun's distance [au].

    Returns:
        r [1/sr] with the emission, ``pixels + (bands,)`` float64.
    """
    from ._model import thermal
    from ._model._backends import retarget_to_numpy
    from ._model.forward import amsa
    from ._thermal.emissivity import directional_emissivity

    w = np.asarray(w, dtype=np.float64)
    reflected = np.asarray(amsa(w, to_sun, to_sensor, normal, params, backend="numba"))
    normal = np.broadcast_to(np.asarray(normal, dtype=np.float64), np.shape(to_sensor))
    cos_e = np.sum(np.asarray(to_sensor) * normal, axis=-1)[..., None]
    eps = directional_emissivity(w, np.broadcast_to(cos_e, w.shape), params, "numba")
    temperature = np.asarray(temperature, dtype=np.float64)[..., None]
    factor, _ = retarget_to_numpy(thermal).thermal_factor_and_slope(
        np.asarray(wavelengths, dtype=np.float64), temperature, solar_irradiance, distance
    )
    return reflected + eps * factor


def synthetic_cube(
    side,
    bands,
    dtype=np.float64,
    *,
    params=None,
    seed=0,
    geometry=None,
    truth=False,
    block_pixels=1 << 16,
    w_range=(0.05, 0.95),
):
    """A noise-free side x side x bands reflectance cube with per-pixel geometry.

    Generated block by block, so temporaries stay small whatever the cube size. The
    reflectance is ``lumaxlike.amsa(w_true, ..., backend="numba")`` with w_true uniform in
    `w_range`, computed from the geometry as stored (rounded to `dtype` first).

    Args:
        side: pixels per side (the image is square).
        bands: spectral bands.
        dtype: float32 or float64: of the reflectance and of the geometry vectors.
        params: `HapkeParams`; default `default_params()`.
        seed: random seed.
        geometry: function ``(n_pixels, rng) -> (to_sun, to_sensor, normal)``;
            default `random_geometry`.
        truth: also return ``w_true`` (float64, shaped like refl).
        block_pixels: pixels generated at a time.
        w_range: (low, high) of the uniform w_true [-].

    Returns:
        dict with ``refl`` (side, side, bands) [1/sr], ``to_sun``, ``to_sensor``,
        ``normal`` (side, side, 3), ``params`` and, with `truth`, ``w_true``.
    """
    from ._model.forward import amsa

    params = default_params() if params is None else params
    geometry = random_geometry if geometry is None else geometry
    dtype = np.dtype(dtype)
    rng = np.random.default_rng(seed)
    n_pixels = side * side
    refl = np.empty((n_pixels, bands), dtype)
    vectors = [np.empty((n_pixels, 3), dtype) for _ in range(3)]
    w_true = np.empty((n_pixels, bands), np.float64) if truth else None
    for start in range(0, n_pixels, block_pixels):
        stop = min(start + block_pixels, n_pixels)
        block = [np.asarray(v, dtype) for v in geometry(stop - start, rng)]
        low, high = w_range
        w = rng.uniform(low, high, (stop - start, bands))
        to_sun, to_sensor, normal = (b.astype(np.float64) for b in block)
        refl[start:stop] = amsa(w, to_sun, to_sensor, normal, params, backend="numba")
        for target, values in zip(vectors, block):
            target[start:stop] = values
        if w_true is not None:  # truth
            w_true[start:stop] = w
    cube = {
        "refl": refl.reshape(side, side, bands),
        "to_sun": vectors[0].reshape(side, side, 3),
        "to_sensor": vectors[1].reshape(side, side, 3),
        "normal": vectors[2].reshape(side, side, 3),
        "params": params,
    }
    if w_true is not None:  # truth
        cube["w_true"] = w_true.reshape(side, side, bands)
    return cube


def write_geotiff_inputs(folder, side, bands, dtype="float32", seed=0, block_rows=64) -> dict:
    """Write a synthetic cube and its OBS geometry raster as GeoTIFFs, for the file commands.

    Flat surface (no DTM), per-pixel angles: to-sun zenith 0-80 deg, to-sensor zenith
    0-70 deg, azimuths 0-360 deg; the cube is ``amsa`` of a random w in (0.05, 0.95) with
    `default_params()`. Written block by block of rows (memory stays small whatever
    `side`), tiled 256 x 256, on a 1 m UTM grid.

    Args:
        folder: existing folder the two files are written to.
        side: pixels per side (the image is square); bands: spectral bands.
        dtype: of both rasters (``"float32"`` or ``"float64"``).
        seed: random seed; block_rows: rows generated and written at a time.

    Returns:
        {"cube": ``folder/cube.tif`` (r [1/sr], `bands` bands), "obs": ``folder/obs.tif``
        (4 bands [deg]: to-sun zenith, azimuth, to-sensor zenith, azimuth, as
        `lumaxlike.invert_file` reads them)}.
    """
    import rasterio
    from rasterio.transform import from_origin

    from ._geometry import direction_from_zenith_azimuth
    from ._model.forward import amsa

    folder = Path(folder)
    params = default_params()
    rng = np.random.default_rng(seed)
    profile = {
        "driver": "GTiff",
        "width": side,
        "height": side,
        "dtype": dtype,
        "transform": from_origin(0.0, float(side), 1.0, 1.0),
        "crs": "EPSG:32633",
        "tiled": True,
        "blockxsize": 256,
        "blockysize": 256,
    }
    names = ("To-sun zenith", "To-sun azimuth", "To-sensor zenith", "To-sensor azimuth")
    with (
        rasterio.open(folder / "cube.tif", "w", count=bands, nodata=None, **profile) as cube,
        rasterio.open(folder / "obs.tif", "w", count=4, **profile) as obs,
    ):
        for index, name in enumerate(names, start=1):
            obs.set_band_description(index, name)
        for row in range(0, side, block_rows):
            rows = min(block_rows, side - row)
            shape = (rows, side)
            angles = [
                rng.uniform(0, 80, shape),
                rng.uniform(0, 360, shape),
                rng.uniform(0, 70, shape),
                rng.uniform(0, 360, shape),
            ]
            angles = [a.astype(dtype) for a in angles]
            to_sun = direction_from_zenith_azimuth(
                np.deg2rad(angles[0].astype(np.float64)), np.deg2rad(angles[1].astype(np.float64))
            )
            to_sensor = direction_from_zenith_azimuth(
                np.deg2rad(angles[2].astype(np.float64)), np.deg2rad(angles[3].astype(np.float64))
            )
            w = rng.uniform(0.05, 0.95, shape + (bands,))
            refl = amsa(w, to_sun, to_sensor, np.array([0.0, 0.0, 1.0]), params, backend="numba")
            window = rasterio.windows.Window(0, row, side, rows)
            cube.write(np.moveaxis(np.asarray(refl, dtype), -1, 0), window=window)
            obs.write(np.stack(angles), window=window)
    return {"cube": folder / "cube.tif", "obs": folder / "obs.tif"}
