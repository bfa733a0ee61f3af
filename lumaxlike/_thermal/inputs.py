"""`remove_thermal`'s arguments checked and laid out flat: the window's bands, the Sun's
spectrum and distance, the noise per band, the prior's inputs, the unit vectors and each
pixel's starting status."""

from __future__ import annotations

import os

import numpy as np

from .._io.read.radiance import SolarSpectrum, band_irradiance, load_solar_spectrum
from .._options import SOLVERS
from .._shapes import check_choice
from .._status import Status
from .options import ThermalSettings

__all__ = [
    "band_sigma",
    "distance",
    "geometry_and_status",
    "prior_inputs",
    "solar_per_band",
    "unit",
    "window_of",
]


def solar_per_band(solar_spectrum, wavelengths: np.ndarray) -> np.ndarray:
    """F_sun at 1 au per band [W m^-2 um^-1], ``(bands,)``, from a solar-spectrum file, a
    `SolarSpectrum` (averaged over each band) or the irradiances themselves (checked)."""
    if isinstance(solar_spectrum, (str, os.PathLike)):
        solar_spectrum = load_solar_spectrum(solar_spectrum)
    if isinstance(solar_spectrum, SolarSpectrum):
        return band_irradiance(solar_spectrum, wavelengths)
    solar = np.asarray(solar_spectrum, dtype=np.float64)
    if solar.shape != wavelengths.shape or not np.all(np.isfinite(solar) & (solar > 0)):
        raise ValueError(
            "solar_spectrum must be a path, a SolarSpectrum or positive irradiances "
            f"[W m^-2 um^-1] at 1 au, one per band {wavelengths.shape}, got {solar.shape}"
        )
    return solar


def unit(name: str, vectors, pixels: tuple) -> np.ndarray:
    """Unit vectors (n, 3) from shape ``pixels + (3,)`` or ``(3,)``."""
    vectors = np.asarray(vectors, dtype=np.float64)
    try:
        array = np.broadcast_to(vectors, pixels + (3,)).reshape(-1, 3)
    except ValueError:
        raise ValueError(
            f"{name} must have shape pixels + (3,) = {pixels + (3,)} or (3,), got {vectors.shape}"
        ) from None
    return array / np.linalg.norm(array, axis=-1, keepdims=True)


def window_of(refl, wavelengths, settings: ThermalSettings, solver: str):
    """The window's bands (a boolean mask over `wavelengths` [um]) of "continuum" and
    "prior", None for "given"; checked with the arguments they depend on (the solver, one
    increasing band centre per band of `refl`; `ThermalSettings.window_bands` checks the
    window's count of bands)."""
    check_choice("solver", solver, SOLVERS)
    if wavelengths.ndim != 1 or wavelengths.shape[0] != refl.shape[-1]:
        raise ValueError(f"wavelengths must have one value per band ({refl.shape[-1]})")
    if not np.all(np.diff(wavelengths) > 0):
        raise ValueError("wavelengths must increase")
    if settings.method == "given":
        return None
    return settings.window_bands(wavelengths)


def distance(solar_distance, pixels) -> np.ndarray:
    """The Sun's distance [au] per pixel (flat), checked: positive and finite."""
    distance = np.broadcast_to(np.asarray(solar_distance, dtype=np.float64), pixels).ravel()
    if not np.all(np.isfinite(distance) & (distance > 0)):
        raise ValueError(f"solar_distance must be positive and finite [au], got {solar_distance!r}")
    return distance


def prior_inputs(refl, wavelengths, refl_sigma, settings: ThermalSettings, albedo, inside):
    """method="prior"'s arguments, checked: (prior_sigma, the reference bands (a boolean
    mask) or None, the prior spectrum (pixels, bands) or None); `albedo`: `prior_albedo`,
    `inside`: the window's bands."""
    if refl_sigma is None:
        raise ValueError('method="prior" needs refl_sigma: it weighs the data against the prior')
    if albedo is not None:
        try:
            albedo = np.broadcast_to(np.asarray(albedo, np.float64), refl.shape)
        except ValueError:
            raise ValueError(
                f"prior_albedo must have shape pixels + (bands,) or (bands,), got {np.shape(albedo)}"
            ) from None
        return settings.prior_sigma, None, albedo.reshape(-1, refl.shape[-1])
    mask = settings.reference_bands(wavelengths)
    if mask.sum() < 2 or wavelengths[mask].max() >= wavelengths[inside].min():
        raise ValueError(
            f"prior_reference={settings.prior_reference!r} must hold 2 bands or more, all "
            "short of the window"
        )
    return settings.prior_sigma, mask, None


def band_sigma(refl_sigma, n_bands: int) -> np.ndarray:
    """refl_sigma per band [1/sr] (1 for None), checked."""
    sigma = np.broadcast_to(
        np.asarray(1.0 if refl_sigma is None else refl_sigma, dtype=np.float64), (n_bands,)
    )
    if not np.all(np.isfinite(sigma) & (sigma > 0)):
        raise ValueError(f"refl_sigma must be positive and finite [1/sr], got {refl_sigma!r}")
    return sigma


def geometry_and_status(flat, vectors, pixels, inside):
    """The unit vectors (n, 3) by name, cos e (n,), and the status (n,) int8: CONVERGED
    (to be solved), INVALID_GEOMETRY, NONFINITE_INPUT (over the window's bands) or
    UNREACHABLE (a window band r <= 0; for "given", every band)."""
    names = ("to_sun", "to_sensor", "normal")
    geometry = {k: unit(k, v, pixels) for k, v in zip(names, vectors)}
    cos_i = np.sum(geometry["to_sun"] * geometry["normal"], axis=-1)
    cos_e = np.sum(geometry["to_sensor"] * geometry["normal"], axis=-1)
    valid_geometry = (cos_i > 0) & (cos_e > 0)
    finite = np.all(np.isfinite(flat[:, inside] if inside is not None else flat), axis=-1)
    # no r <= 0 in the fit's window (every band for "given"): UNREACHABLE, as `invert`'s
    # bands (the model's r and emission are positive)
    used = flat[:, inside] if inside is not None else flat
    reachable = np.any(used > 0, axis=-1) if inside is None else np.all(used > 0, axis=-1)
    status = np.where(valid_geometry, Status.CONVERGED, Status.INVALID_GEOMETRY)
    status = np.where(valid_geometry & ~reachable, Status.UNREACHABLE, status)
    status = np.where(valid_geometry & ~finite, Status.NONFINITE_INPUT, status).astype(np.int8)
    return geometry, cos_e, status
