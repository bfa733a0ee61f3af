"""k of a material from its laboratory reflectance spectrum at a known grain size (Lucey
1998): w per band by `invert`, then the equivalent slab solved for k per band by a
bracketed bisection in log k, vectorised over the bands."""

from __future__ import annotations

import warnings

import numpy as np

from .._geometry import geometry_from_angles
from .._model._backends import SLAB_MEAN_PATHS, SLAB_REFLECTIONS, slab_twins
from .._validation import wavelengths_um
from .arguments import check_choice, slab_arguments

__all__ = ["K_GRID", "k_from_albedo", "k_from_reflectance"]

# The bracket's search grid in k: w decreases in k from k -> 0 (w -> 1 without internal
# scattering) until S_e, which grows with k, takes over (a metal-like grain); the bracket
# ends at the grid's minimum of w per band.
K_GRID = np.geomspace(1e-12, 10.0, 261)
BISECTIONS = 70  # log-k interval 30 / 2^70: below float64 resolution of k


def k_from_albedo(
    w,
    n,
    wavelength,
    grain_size,
    *,
    internal_scattering=0.0,
    reflections="hapke1993",
    mean_path="hapke2001",
):
    """k per band such that the equivalent slab gives `w` (all arguments broadcast).

    Returns:
        ``(k, clipped)``: k of the broadcast shape, and a boolean mask of the bands whose
        w lies outside what k in [1e-12, the k of w's minimum] reaches (k is then that
        bracket's nearer end).
    """
    slab = slab_twins("numpy", reflections, mean_path).slab_albedo
    w = np.asarray(w, dtype=np.float64)
    arguments, _ = slab_arguments(
        n, 0.0, wavelength, grain_size, internal_scattering, 0.0, None, None
    )
    n, _, wavelength, grain_size, scattering = arguments[:5]
    shape = np.broadcast_shapes(w.shape, n.shape)
    w, n, wavelength, grain_size, scattering = (
        np.broadcast_to(value, shape) for value in (w, n, wavelength, grain_size, scattering)
    )
    grid = slab(
        n[..., None],
        K_GRID,
        wavelength[..., None],
        grain_size[..., None],
        scattering[..., None],
        0.0,
        0.0,
        0.0,
        1.0,
        0.0,
    )
    lowest = np.argmin(grid, axis=-1)
    low = np.full(shape, np.log(K_GRID[0]))
    high = np.log(K_GRID[lowest])
    too_bright = w > grid[..., 0]
    too_dark = w < np.take_along_axis(grid, lowest[..., None], axis=-1)[..., 0]
    for _ in range(BISECTIONS):
        middle = 0.5 * (low + high)
        brighter = (
            slab(n, np.exp(middle), wavelength, grain_size, scattering, 0.0, 0.0, 0.0, 1.0, 0.0) > w
        )
        low = np.where(brighter, middle, low)
        high = np.where(brighter, high, middle)
    k = np.exp(0.5 * (low + high))
    k = np.where(too_bright, K_GRID[0], np.where(too_dark, K_GRID[lowest], k))
    return k, too_bright | too_dark


def _albedo_of_spectrum(refl, angles, params, wavelengths, solver, tol) -> np.ndarray:
    """w per band of one spectrum at one geometry (`invert`); ValueError where none."""
    from .._inverse.albedo.invert import invert

    refl = np.asarray(refl, dtype=np.float64)
    if wavelengths.ndim != 1 or refl.shape != wavelengths.shape:
        raise ValueError(
            f"refl must have wavelengths' shape (bands,), got {refl.shape} and {wavelengths.shape}"
        )
    for argument, value in zip(("incidence", "emission", "azimuth"), angles, strict=True):
        if np.ndim(value) != 0:
            raise ValueError(f"{argument} must be a scalar [rad] (one laboratory geometry)")
    to_sun, to_sensor, normal = geometry_from_angles(*angles)
    result = invert(
        refl[None, :], to_sun[None], to_sensor[None], normal[None], params, solver=solver, tol=tol
    )
    w = result.w[0]
    if np.any(np.isnan(w)):
        raise ValueError(
            f"refl: invert found no w at wavelengths {wavelengths[np.isnan(w)][:5]} um "
            "(statuses in lumaxlike.invert's result)"
        )
    return w


def k_from_reflectance(
    refl,
    angles: tuple,
    params,
    grain_size,
    n,
    wavelengths,
    *,
    internal_scattering=0.0,
    reflections: str = "hapke1993",
    mean_path: str = "hapke2001",
    solver: str = "numba",
    tol: float | None = None,
) -> np.ndarray:
    """k per band of `OpticalConstants.from_reflectance` (its docstring), the geometry as
    ``angles = (incidence, emission, azimuth)``."""
    check_choice("reflections", reflections, SLAB_REFLECTIONS)
    check_choice("mean_path", mean_path, SLAB_MEAN_PATHS)
    wavelengths = wavelengths_um("wavelengths", wavelengths)
    w = _albedo_of_spectrum(refl, angles, params, wavelengths, solver, tol)
    k, clipped = k_from_albedo(
        w,
        n,
        wavelengths,
        grain_size,
        internal_scattering=internal_scattering,
        reflections=reflections,
        mean_path=mean_path,
    )
    if np.any(clipped):
        warnings.warn(
            f"{int(clipped.sum())} band(s) have w beyond the slab model's reach (k set to the "
            f"bracket's end) at wavelengths {wavelengths[clipped][:5]} um",
            stacklevel=3,
        )
    return k
