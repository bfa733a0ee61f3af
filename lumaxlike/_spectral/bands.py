"""`band_parameters`: one absorption band between two shoulders, per pixel: its centre
(the minimum of a low-order polynomial fitted around the lowest band of the
continuum-removed spectrum), its depth there, its integrated area and its asymmetry.
NumPy, vectorised over pixels (a batched least-squares fit, no per-pixel loop)."""

from __future__ import annotations

import dataclasses

import numpy as np
from jaxtyping import Float

from .continuum import linear_continuum, shoulder_indices
from .wavelengths import DEFAULT_TOLERANCE, check_spectra

__all__ = [
    "DEFAULT_DEGREE",
    "DEFAULT_FIT_BANDS",
    "BandParameters",
    "analyse_band",
    "band_parameters",
]

DEFAULT_DEGREE = 2
"""Degree of the polynomial whose minimum is the band centre (a parabola)."""
DEFAULT_FIT_BANDS = 5
"""Bands the polynomial is fitted to: the lowest band and two either side (on M3's 20 nm
spacing near 1 um: +-40 nm; at 40 nm near 2 um: +-80 nm)."""
_GRID = 64  # points at which the polynomial is first evaluated, before Newton's steps


@dataclasses.dataclass(frozen=True)
class BandParameters:
    """An absorption band per pixel (`band_parameters`); each field has shape ``(...)``
    (the spectra's pixels), NaN where it is undefined (a NaN shoulder, fewer good bands
    than the fit needs).

    Attributes:
        centre: wavelength [um] of the fitted polynomial's minimum.
        depth: 1 - the fitted continuum-removed value at the centre [1].
        area: integral of 1 - continuum-removed value between the shoulders [um].
        asymmetry: (area long-ward of the centre - area short-ward) / area [1], in
            [-1, 1]; 0 for a symmetric band.
        short_shoulder, long_shoulder: wavelengths [um] of the continuum's anchors.
    """

    centre: np.ndarray
    depth: np.ndarray
    area: np.ndarray
    asymmetry: np.ndarray
    short_shoulder: np.ndarray
    long_shoulder: np.ndarray


def band_parameters(
    spectra: Float[np.ndarray, "*pixels bands"],  # noqa: F722 (jaxtyping shape)
    wavelengths: Float[np.ndarray, " bands"],  # noqa: F722 (jaxtyping shape)
    *,
    band,
    degree: int = DEFAULT_DEGREE,
    fit_bands: int = DEFAULT_FIT_BANDS,
    bad_bands=None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> BandParameters:
    """Centre, depth, area and asymmetry of one absorption band, per pixel.

    The continuum is the straight line between the two shoulders (as
    `continuum_removed(method="linear")`); the spectrum divided by it is searched for its
    lowest band strictly between them; a polynomial of `degree` is fitted by least
    squares to the `fit_bands` bands centred there (those outside the shoulders, bad or
    NaN left out), and its minimum over the fitted bands' span (Newton's steps from the
    best of a grid) is the band centre, 1 - its value there the depth. The area is the
    trapezoid integral of 1 - the continuum-removed spectrum over the good, finite bands
    from shoulder to shoulder; the asymmetry splits it at the centre. For Band I and
    Band II of pyroxenes and olivine, with the Band Area Ratio = area II / area I (Cloutis
    et al. 1986, JGR 91, 11641), see the ``BAND1_*``, ``BAND2_*`` and ``BAR`` products of
    `spectral_parameters`.

    Args:
        spectra: (..., bands) reflectance, w or any positive spectral quantity.
        wavelengths: (bands,) band centres [um], increasing.
        band: ``(short, long)`` shoulders, each a wavelength [um] (the band nearest it) or
            a window ``(low, high)`` [um] whose highest good band is the shoulder.
        degree: of the polynomial, >= 2 (default 2).
        fit_bands: odd number of bands it is fitted to, > `degree` (default 5).
        bad_bands: None, a (bands,) bool mask (True: bad) or band indices.
        tolerance: how far [um] the band nearest a fixed shoulder may lie from it.

    Returns:
        `BandParameters`, each field of shape ``spectra.shape[:-1]``, float64.

    Raises:
        ValueError: a bad argument, or a fixed shoulder not covered or on a bad band.
    """
    spectra, wavelengths, good = check_spectra(spectra, wavelengths, bad_bands)
    if band is None or len(band) != 2:
        raise ValueError(f"band must be (short, long) shoulders, got {band!r}")
    return analyse_band(spectra, wavelengths, good, band, degree, fit_bands, tolerance, "band")


def analyse_band(spectra, wavelengths, good, band, degree, fit_bands, tolerance, what):
    """`band_parameters` on checked arguments; `what` names the caller in messages."""
    if isinstance(degree, bool) or not isinstance(degree, int) or degree < 2:
        raise ValueError(f"degree must be an integer >= 2, got {degree!r}")
    if isinstance(fit_bands, bool) or not isinstance(fit_bands, int) or fit_bands % 2 != 1:
        raise ValueError(f"fit_bands must be an odd integer, got {fit_bands!r}")
    if fit_bands <= degree:
        raise ValueError(f"fit_bands={fit_bands} must exceed degree={degree}")
    short, long = (
        shoulder_indices(spectra, wavelengths, good, s, tolerance, f"{what} shoulder {s!r}")
        for s in band
    )
    continuum = linear_continuum(spectra, wavelengths, short, long).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        removed = np.where(good, spectra / continuum, np.nan)
    bands = np.arange(wavelengths.size)
    between = (bands > short[..., None]) & (bands < long[..., None]) & np.isfinite(removed)
    lowest = np.where(between, removed, np.inf).argmin(axis=-1)
    centre, depth = _polynomial_minimum(
        removed, wavelengths, lowest, between.any(axis=-1), (short, long), degree, fit_bands
    )
    area, asymmetry = _areas(removed, wavelengths, short, long, centre)
    valid = (short >= 0) & (long > short)
    return BandParameters(
        centre=centre,
        depth=depth,
        area=np.where(valid, area, np.nan),
        asymmetry=np.where(valid, asymmetry, np.nan),
        short_shoulder=np.where(short >= 0, wavelengths[short], np.nan),
        long_shoulder=np.where(long >= 0, wavelengths[long], np.nan),
    )


def _polynomial_minimum(removed, wavelengths, lowest, found, shoulders, degree, fit_bands):
    """(centre [um], depth) per pixel: the least-squares polynomial through the
    `fit_bands` bands around `lowest`, in t = (wavelength - that band's) / half-span,
    minimised over the fitted bands' span."""
    short, long = shoulders
    half = fit_bands // 2
    index = lowest[..., None] + np.arange(-half, half + 1)
    use = (index >= short[..., None]) & (index <= long[..., None]) & found[..., None]
    index = np.clip(index, 0, wavelengths.size - 1)
    y = np.take_along_axis(removed, index, axis=-1)
    use &= np.isfinite(y)
    x = wavelengths[index] - wavelengths[lowest][..., None]
    scale = np.max(np.where(use, np.abs(x), 0.0), axis=-1, keepdims=True)
    scale = np.where(scale > 0, scale, 1.0)
    t = np.where(use, x / scale, 0.0)
    y = np.where(use, y, 0.0)
    powers = t[..., None] ** np.arange(2 * degree + 1) * use[..., None]
    sums = powers.sum(axis=-2)  # (..., 2 degree + 1): sum of t^p over the used bands
    order = np.arange(degree + 1)
    normal = sums[..., order[:, None] + order[None, :]]
    rhs = (powers[..., : degree + 1] * y[..., None]).sum(axis=-2)
    ok = use.sum(axis=-1) > degree
    normal = np.where(ok[..., None, None], normal, np.eye(degree + 1))
    coef = np.linalg.solve(normal, np.where(ok[..., None], rhs, 0.0)[..., None])[..., 0]
    low = np.min(np.where(use, t, np.inf), axis=-1)
    high = np.max(np.where(use, t, -np.inf), axis=-1)
    best = _minimise(coef, np.where(ok, low, 0.0), np.where(ok, high, 0.0))
    centre = wavelengths[lowest] + best * scale[..., 0]
    depth = 1.0 - _polyval(coef, best)
    return np.where(ok, centre, np.nan), np.where(ok, depth, np.nan)


def _polyval(coef, t):
    """sum_i coef[..., i] t^i (Horner)."""
    value = np.zeros_like(t) + coef[..., -1]
    for i in range(coef.shape[-1] - 2, -1, -1):
        value = value * t + coef[..., i]
    return value


def _minimise(coef, low, high):
    """argmin of the polynomials on [low, high]: the best of a grid, then Newton's steps on
    the derivative kept inside the interval and kept only where they lower the value
    (exact in one step for a parabola)."""
    grid = low[..., None] + (high - low)[..., None] * np.linspace(0.0, 1.0, _GRID)
    values = _polyval(coef[..., None, :], grid)
    t = np.take_along_axis(grid, values.argmin(axis=-1)[..., None], axis=-1)[..., 0]
    order = np.arange(1, coef.shape[-1])
    first = coef[..., 1:] * order
    second = first[..., 1:] * order[:-1]
    for _ in range(4):
        slope, curvature = _polyval(first, t), _polyval(second, t)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(curvature > 0, t - slope / curvature, t)
        step = np.clip(step, low, high)
        t = np.where(_polyval(coef, step) <= _polyval(coef, t), step, t)
    return t


def _areas(removed, wavelengths, short, long, centre):
    """(area [um], asymmetry) per pixel: trapezoids of 1 - `removed` over the finite bands
    from shoulder to shoulder (bridging NaN ones), split at `centre`."""
    bands = np.arange(wavelengths.size)
    inside = (bands >= short[..., None]) & (bands <= long[..., None]) & np.isfinite(removed)
    depth = np.where(inside, 1.0 - removed, 0.0)
    last = np.maximum.accumulate(np.where(inside, bands, -1), axis=-1)
    previous = np.concatenate([np.full(last.shape[:-1] + (1,), -1), last[..., :-1]], axis=-1)
    segment = inside & (previous >= 0)
    previous = np.maximum(previous, 0)
    x0, x1 = wavelengths[previous], wavelengths
    y0, y1 = np.take_along_axis(depth, previous, axis=-1), depth
    width = np.where(segment, x1 - x0, 0.0)
    area = (width * (y0 + y1) / 2).sum(axis=-1)
    with np.errstate(divide="ignore", invalid="ignore"):
        fraction = np.clip((centre[..., None] - x0) / np.where(segment, width, 1.0), 0.0, 1.0)
        y_split = y0 + fraction * (y1 - y0)
        short_area = np.where(segment, fraction * width * (y0 + y_split) / 2, 0.0).sum(axis=-1)
        short_area = np.where(np.isfinite(centre), short_area, np.nan)
        asymmetry = (area - 2.0 * short_area) / area
    return area, asymmetry
