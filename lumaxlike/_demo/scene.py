"""A synthetic but realistic scene: terrain, mineral abundances, w cube and geometry.

The minerals are mixed intimately (Hapke 2012, ch. 10): per pixel, known mass fractions
M_j become cross-section fractions f_j = M_j c_j / sum_k M_k c_k, c_j = 1 / (rho_j D_j)
(solid density rho_j, grain size D_j), and the pixel's single-scattering albedo is
w = sum_j f_j w_j.

Every random choice comes from one seeded ``numpy.random.Generator``, so a scene is a
pure function of its `SceneConfig`.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .._geometry import direction_from_zenith_azimuth, normals_from_dtm
from .._unmix.mixing import cross_section_fractions, cross_section_per_mass
from .defaults import DEFAULT_SEED
from .spectra import (
    MINERAL_DENSITY,
    MINERAL_GRAIN_SIZE_UM,
    albedo_from_diffusive_reflectance,
    load_mineral_spectra,
)

__all__ = ["SceneConfig", "Scene", "make_scene", "synthetic_dtm", "smooth_abundances"]


@dataclass(frozen=True)
class SceneConfig:
    """Parameters of the synthetic scene.

    Attributes:
        size: pixels per side of the square scene.
        seed: seed of the random generator (terrain and abundances).
        pixel_size_m: ground size of a pixel [m].
        max_slope_deg: steepest terrain slope [deg]; the DTM is scaled to reach it.
        hills: number of Gaussian hills in the DTM.
        abundance_scale: correlation length of the abundance fields, as a fraction of
            ``size``.
        abundance_sharpness: softmax gain; higher gives purer mineral patches.
        sun_zenith_deg: to-sun zenith angle [deg], the same for every pixel.
        sun_azimuth_deg: to-sun azimuth [deg], clockwise from north.
        half_field_of_view_deg: view zenith at the swath edges over flat ground [deg].
        squint_deg: forward tilt of the sensor's look along its northward track [deg].
    """

    size: int = 96
    seed: int = DEFAULT_SEED
    pixel_size_m: float = 10.0
    max_slope_deg: float = 25.0
    hills: int = 7
    abundance_scale: float = 0.12
    abundance_sharpness: float = 2.5
    sun_zenith_deg: float = 40.0
    sun_azimuth_deg: float = 135.0
    half_field_of_view_deg: float = 8.0
    squint_deg: float = 2.0

    def __post_init__(self):
        if self.size < 4:
            raise ValueError(f"size must be at least 4 pixels, got {self.size}")
        if not 0.0 <= self.max_slope_deg < 90.0 - self.sun_zenith_deg - 5.0:
            raise ValueError(
                "max_slope_deg must leave every facet lit (slope + sun zenith < 85 deg)"
            )


@dataclass(frozen=True)
class Scene:
    """A scene ready to be forward-modelled.

    Attributes:
        config: the configuration it was made from.
        wavelength_nm: band centres [nm], shape ``(bands,)``.
        mineral_names: names of the endmembers, length ``minerals``.
        endmember_w: single-scattering albedo of each mineral, shape ``(minerals, bands)``.
        density: solid density of each mineral [g/cm^3], shape ``(minerals,)``.
        grain_size_um: grain size of each mineral [um], shape ``(minerals,)``.
        abundance: mass fraction of each mineral, shape ``(rows, cols, minerals)``,
            non-negative and summing to 1 per pixel.
        cross_section: geometric cross-section fraction of each mineral (Hapke's
            mixing weights), shape ``(rows, cols, minerals)``, summing to 1 per pixel.
        w: true single-scattering albedo of the intimate mixture,
            ``cross_section @ endmember_w``, shape ``(rows, cols, bands)``, strictly
            inside (0, 1).
        dtm: terrain heights [m], shape ``(rows, cols)``; row 0 is the northern edge.
        to_sun_zenith_deg: zenith angle of the direction to the sun [deg], shape
            ``(rows, cols)``.
        to_sun_azimuth_deg: azimuth of the direction to the sun [deg], clockwise from
            north, shape ``(rows, cols)``.
        to_sensor_zenith_deg: zenith angle of the direction to the sensor [deg], shape
            ``(rows, cols)``.
        to_sensor_azimuth_deg: azimuth of the direction to the sensor [deg], clockwise
            from north, shape ``(rows, cols)``.
    """

    config: SceneConfig
    wavelength_nm: np.ndarray
    mineral_names: tuple[str, ...]
    endmember_w: np.ndarray
    density: np.ndarray
    grain_size_um: np.ndarray
    abundance: np.ndarray
    cross_section: np.ndarray
    w: np.ndarray
    dtm: np.ndarray
    to_sun_zenith_deg: np.ndarray
    to_sun_azimuth_deg: np.ndarray
    to_sensor_zenith_deg: np.ndarray
    to_sensor_azimuth_deg: np.ndarray

    @property
    def to_sun(self) -> np.ndarray:
        """Unit vectors toward the sun (east, north, up), shape ``(rows, cols, 3)``."""
        return direction_from_zenith_azimuth(
            np.deg2rad(self.to_sun_zenith_deg), np.deg2rad(self.to_sun_azimuth_deg)
        )

    @property
    def to_sensor(self) -> np.ndarray:
        """Unit vectors toward the sensor (east, north, up), shape ``(rows, cols, 3)``."""
        return direction_from_zenith_azimuth(
            np.deg2rad(self.to_sensor_zenith_deg), np.deg2rad(self.to_sensor_azimuth_deg)
        )

    @property
    def endmembers(self):
        """The minerals as a `lumaxlike.Endmembers` (true w spectra, densities, grain
        sizes, band centres [um]), for `lumaxlike.unmix`."""
        from .._unmix.endmembers import Endmembers

        return Endmembers(
            names=self.mineral_names,
            albedo=self.endmember_w,
            density=self.density,
            grain_size=self.grain_size_um,
            wavelengths=self.wavelength_nm * 1e-3,
        )

    @property
    def normal(self) -> np.ndarray:
        """Outward surface normals from the DTM, shape ``(rows, cols, 3)``."""
        return normals_from_dtm(self.dtm, self.config.pixel_size_m)


def make_scene(config: SceneConfig = SceneConfig()) -> Scene:
    """Build the demo scene: hills, smooth mineral patches, w cube and per-pixel geometry.

    Args:
        config: scene parameters; the result depends on nothing else.

    Returns:
        Scene with ``w`` an intimate mixture of the vendored USGS spectra's albedos.
    """
    rng = np.random.default_rng(config.seed)
    spectra = load_mineral_spectra()
    endmember_w = albedo_from_diffusive_reflectance(spectra.reflectance)
    dtm = synthetic_dtm(config.size, config.hills, config.max_slope_deg, config.pixel_size_m, rng)
    abundance = smooth_abundances(
        config.size,
        len(spectra.names),
        config.abundance_scale * config.size,
        config.abundance_sharpness,
        rng,
    )
    shape = (config.size, config.size)
    sensor_zenith, sensor_azimuth = _pushbroom_view_angles(dtm, config)
    density = np.array([MINERAL_DENSITY[name] for name in spectra.names])
    grain_size = np.array([MINERAL_GRAIN_SIZE_UM[name] for name in spectra.names])
    cross_section = cross_section_fractions(
        abundance, cross_section_per_mass(density, grain_size, 1.0)
    )
    return Scene(
        config=config,
        wavelength_nm=spectra.wavelength_nm,
        mineral_names=spectra.names,
        endmember_w=endmember_w,
        density=density,
        grain_size_um=grain_size,
        abundance=abundance,
        cross_section=cross_section,
        w=cross_section @ endmember_w,
        dtm=dtm,
        to_sun_zenith_deg=np.full(shape, config.sun_zenith_deg),
        to_sun_azimuth_deg=np.full(shape, config.sun_azimuth_deg),
        to_sensor_zenith_deg=sensor_zenith,
        to_sensor_azimuth_deg=sensor_azimuth,
    )


def synthetic_dtm(size, hills, max_slope_deg, pixel_size_m, rng) -> np.ndarray:
    """Heights of a few random Gaussian hills, scaled so the steepest slope is given.

    Args:
        size: pixels per side.
        hills: number of hills.
        max_slope_deg: steepest slope of the result [deg], measured like
            `lumaxlike._geometry.normals_from_dtm` does (central differences).
        pixel_size_m: ground size of a pixel [m].
        rng: ``numpy.random.Generator``.

    Returns:
        ndarray of shape ``(size, size)``: heights [m], minimum 0.
    """
    row, col = np.mgrid[0:size, 0:size].astype(np.float64)
    centre = rng.uniform(0.0, size, (hills, 2))
    width = rng.uniform(0.08, 0.22, hills) * size
    height = rng.uniform(0.3, 1.0, hills)
    dtm = np.zeros((size, size))
    for (r0, c0), s, h in zip(centre, width, height):
        dtm += h * np.exp(-((row - r0) ** 2 + (col - c0) ** 2) / (2.0 * s**2))
    dz_drow, dz_dcol = np.gradient(dtm, pixel_size_m)
    steepest = np.max(np.hypot(dz_drow, dz_dcol))
    dtm *= np.tan(np.deg2rad(max_slope_deg)) / steepest
    return dtm - dtm.min()


def smooth_abundances(size, minerals, scale_px, sharpness, rng) -> np.ndarray:
    """Smooth random areal fractions: softmax of Gaussian-filtered white noise.

    Args:
        size: pixels per side.
        minerals: number of endmembers.
        scale_px: standard deviation of the Gaussian smoothing kernel [pixels].
        sharpness: gain applied to the unit-variance fields before the softmax.
        rng: ``numpy.random.Generator``.

    Returns:
        ndarray of shape ``(size, size, minerals)``: fractions in (0, 1) summing to 1.
    """
    noise = rng.standard_normal((minerals, size, size))
    frequency = np.fft.fftfreq(size)
    kernel = np.exp(
        -2.0 * (np.pi * scale_px) ** 2 * (frequency[:, None] ** 2 + frequency[None, :] ** 2)
    )
    field = np.fft.ifft2(np.fft.fft2(noise) * kernel).real
    field -= field.mean(axis=(1, 2), keepdims=True)
    field /= field.std(axis=(1, 2), keepdims=True)
    logits = sharpness * np.moveaxis(field, 0, -1)
    weights = np.exp(logits - logits.max(axis=-1, keepdims=True))
    return weights / weights.sum(axis=-1, keepdims=True)


def _pushbroom_view_angles(dtm, config):
    """To-sensor zenith and azimuth [deg] of an airborne pushbroom flying north.

    The sensor flies along the swath's central column at an altitude where the swath
    edges are seen at ``half_field_of_view_deg`` over flat ground, looking
    ``squint_deg`` forward; each pixel sees it from its own height.

    Returns:
        ``(zenith_deg, azimuth_deg)``, each of shape ``dtm.shape``.
    """
    rows, cols = dtm.shape
    half_swath_m = 0.5 * cols * config.pixel_size_m
    altitude_m = half_swath_m / np.tan(np.deg2rad(config.half_field_of_view_deg))
    east_m = -(np.arange(cols) - 0.5 * (cols - 1)) * config.pixel_size_m
    east_m = np.broadcast_to(east_m, (rows, cols))
    north_m = np.full((rows, cols), altitude_m * np.tan(np.deg2rad(config.squint_deg)))
    up_m = altitude_m + dtm.mean() - dtm
    zenith = np.arctan2(np.hypot(east_m, north_m), up_m)
    azimuth = np.mod(np.arctan2(east_m, north_m), 2.0 * np.pi)
    return np.rad2deg(zenith), np.rad2deg(azimuth)
