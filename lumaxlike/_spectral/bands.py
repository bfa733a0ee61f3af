"""`band_parameters`: one absorption band between two shoulders, per pixel: its centre
(the minimum of a low-order polynomial fitted around the lowest band of the
continuum-removed spectrum), its depth there, its integrated area and its asymmetry.
A numba kernel, pixel by pixel (`numba_threads.run_in_blocks`, as the hull's), float64
inside whatever the spectra's dtype."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from jaxtyping import Float

from .._model.numba_cache import cached_njit
from .._model.numba_threads import run_in_blocks
from .continuum import BLOCK, shoulder_bands
from .wavelengths import DEFAULT_TOLERANCE, check_spectra

__all__ = [
    "DEFAULT_DEGREE",
    "DEFAULT_FIT_BANDS",
    "NO_BAND_ULPS",
    "BandParameters",
    "analyse_band",
    "band_parameters",
]

DEFAULT_DEGREE = 2
"""Degree of the polynomial whose minimum is the band centre (a parabola)."""
DEFAULT_FIT_BANDS = 5
"""Bands the polynomial is fitted to: the lowest band and two either side (on M3's 20 nm
spacing near 1 um: +-40 nm; at 40 nm near 2 um: +-80 nm)."""
NO_BAND_ULPS = 16
"""A band exists where the continuum-removed spectrum falls below 1 by more than this many
units of rounding of the spectra's dtype (16 eps: 1.9e-6 in float32, 3.6e-15 in float64)
somewhere between the shoulders: a straight spectrum divided by its own line is 1 only to
its rounding."""
_GRID = 64  # points at which the polynomial is first evaluated, before Newton's steps


@dataclasses.dataclass(frozen=True)
class BandParameters:
    """An absorption band per pixel (`band_parameters`); each field has shape ``(...)``
    (the spectra's pixels), NaN where it is undefined (a NaN shoulder, fewer good bands
    than the fit needs). Where there is no band (the continuum-removed spectrum nowhere
    below 1 between the shoulders, beyond rounding: a flat, straight or convex
    spectrum) the centre and the asymmetry are NaN and the depth is 0; the area is
    still the integral (0 or negative there).

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
    from shoulder to shoulder; the asymmetry splits it at the centre. Without a band
    (the continuum-removed spectrum nowhere below 1 - `NO_BAND_ULPS` eps between the
    shoulders) the centre and the asymmetry are NaN and the depth 0. For Band I and
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
    (short, short_fixed), (long, long_fixed) = (
        shoulder_bands(wavelengths, good, s, tolerance, f"{what} shoulder {s!r}") for s in band
    )
    pixels, n_bands = spectra.shape[:-1], spectra.shape[-1]
    flat = np.ascontiguousarray(spectra.reshape(-1, n_bands))
    out = np.empty((6, flat.shape[0]), np.float64)  # (each field contiguous)
    if flat.shape[0]:
        run_in_blocks(
            _band_kernel,
            (flat.shape[0] + BLOCK - 1) // BLOCK,
            flat,
            np.ascontiguousarray(wavelengths, dtype=np.float64),
            np.ascontiguousarray(good, dtype=np.bool_),
            (short, short_fixed, long, long_fixed),
            (degree, fit_bands),
            NO_BAND_ULPS * float(np.finfo(spectra.dtype).eps),
            out,
        )
    fields = out.reshape(6, *pixels)
    return BandParameters(*fields)


@cached_njit(nogil=True, error_model="numpy")
def _band_kernel(
    first, last, spectra, wavelengths, good, shoulders, fit, floor, out
):  # pragma: no cover - numba
    """Blocks first to last - 1 of `BLOCK` pixels: each pixel's shoulders (`_shoulder`),
    its spectrum divided by the line through them, the area of 1 - that (`_removed`), its
    lowest finite band strictly between them, the polynomial's minimum around it
    (`_fit_minimum`) and the area short-ward of it (`_short_area`); ``out[:, p]`` =
    (centre, depth, area, asymmetry, short shoulder, long shoulder [um]), the first four
    NaN where a shoulder is missing or they are not in order; no band (the lowest value
    not below 1 - `floor`): centre and asymmetry NaN, depth 0."""
    short_bands, short_fixed, long_bands, long_fixed = shoulders
    degree, fit_bands = fit
    n_pixels, n_bands = spectra.shape
    removed = np.empty(n_bands, np.float64)
    bad = np.where(good, 0.0, np.nan)  # added to a band's value: NaN where bad
    scratch = np.empty((4, max(fit_bands, 2 * degree + 1)), np.float64)
    normal = np.empty((degree + 1, degree + 2), np.float64)
    for block in range(first, last):
        for p in range(block * BLOCK, min(n_pixels, (block + 1) * BLOCK)):
            short = _shoulder(spectra, p, short_bands, short_fixed)
            long = _shoulder(spectra, p, long_bands, long_fixed)
            out[4, p] = wavelengths[short] if short >= 0 else np.nan
            out[5, p] = wavelengths[long] if long >= 0 else np.nan
            if short < 0 or long <= short:
                out[:4, p] = np.nan
                continue
            lowest, area = _removed(spectra, p, wavelengths, bad, short, long, removed)
            centre, depth = np.nan, np.nan
            if lowest >= 0 and removed[lowest] >= 1.0 - floor:
                depth = 0.0  # nothing below the continuum: no band, no centre
            elif lowest >= 0:
                centre, depth = _fit_minimum(
                    removed, wavelengths, lowest, (short, long), fit, scratch, normal
                )
            out[0, p], out[1, p], out[2, p] = centre, depth, area
            out[3, p] = (area - 2.0 * _short_area(removed, wavelengths, short, centre)) / area


@cached_njit(error_model="numpy")
def _removed(spectra, p, wavelengths, bad, short, long, removed):  # pragma: no cover - numba
    """Pixel `p`'s spectrum divided by the line through its shoulders, into
    ``removed[short:long + 1]`` (NaN at bad bands); returns (its lowest finite band
    strictly between the shoulders, or -1; the trapezoid area [um] of 1 - it over its
    finite bands, bridging NaN ones)."""
    ya, yb = np.float64(spectra[p, short]), np.float64(spectra[p, long])
    xa = wavelengths[short]
    slope = (yb - ya) / (wavelengths[long] - xa)
    lowest, lowest_value = -1, np.inf
    area, previous = 0.0, -1
    for j in range(short, long + 1):
        value = spectra[p, j] / (ya + slope * (wavelengths[j] - xa)) + bad[j]
        removed[j] = value
        if not math.isfinite(value):
            continue
        if value < lowest_value and short < j < long:
            lowest, lowest_value = j, value
        if previous >= 0:
            area += (wavelengths[j] - wavelengths[previous]) * (2.0 - removed[previous] - value)
        previous = j
    return lowest, area / 2


@cached_njit(error_model="numpy")
def _short_area(removed, wavelengths, short, centre):  # pragma: no cover - numba
    """Trapezoid area [um] of 1 - `removed` over its finite bands from `short` to
    `centre` [um] (the last one cut at the centre); NaN for a NaN centre."""
    if not math.isfinite(centre):
        return np.nan
    area, previous = 0.0, -1
    j = short
    while j < removed.size:
        if math.isfinite(removed[j]):
            if previous >= 0:
                x0, x1 = wavelengths[previous], wavelengths[j]
                y0, y1 = 1.0 - removed[previous], 1.0 - removed[j]
                if centre >= x1:  # the whole segment lies short-ward of the centre
                    area += (x1 - x0) * (y0 + y1) / 2
                else:
                    fraction = max(centre - x0, 0.0) / (x1 - x0)
                    y_split = y0 + fraction * (y1 - y0)
                    return area + fraction * (x1 - x0) * (y0 + y_split) / 2
            previous = j
        j += 1
    return area


@cached_njit(error_model="numpy")
def _shoulder(spectra, p, bands, fixed):  # pragma: no cover - numba
    """A shoulder's band index in pixel `p`'s spectrum: ``bands[0]`` when `fixed`, else
    the band of `bands` with the highest finite value (the first of equals), -1 when none
    is finite."""
    if fixed:
        return bands[0]
    best, value = -1, -np.inf
    for band in bands:
        here = spectra[p, band]
        if math.isfinite(here) and (best < 0 or here > value):
            best, value = band, here
    return best


@cached_njit(error_model="numpy")
def _fit_minimum(
    removed, wavelengths, lowest, shoulders, fit, scratch, normal
):  # pragma: no cover - numba
    """(centre [um], depth) of one pixel: the least-squares polynomial of `degree` through
    the finite bands of ``lowest +- fit_bands // 2`` inside the shoulders, in t =
    (wavelength - that of `lowest`) / the largest such distance, to the values less that
    of `lowest` (a parabola in closed form, `_fit_parabola`; higher degrees by `_solve`),
    minimised over the fitted bands' span (`_minimise`); NaN with `degree` or fewer such
    bands."""
    short, long = shoulders
    degree, fit_bands = fit
    half = fit_bands // 2
    t, y = scratch[0], scratch[1]
    used = 0
    scale = 0.0
    for index in range(max(lowest - half, short), min(lowest + half, long) + 1):
        if math.isfinite(removed[index]):
            t[used] = wavelengths[index] - wavelengths[lowest]
            y[used] = removed[index] - removed[lowest]  # (a flat spectrum: exactly 0)
            scale = max(scale, abs(t[used]))
            used += 1
    if used <= degree:
        return np.nan, np.nan
    if scale <= 0.0:
        scale = 1.0
    if degree == 2:
        return _fit_parabola(t, y, used, scale, wavelengths[lowest], removed[lowest])
    low, high = np.inf, -np.inf
    sums = scratch[2]  # sum of t^p over the used bands, p = 0 .. 2 degree
    sums[:] = 0.0
    normal[:, degree + 1] = 0.0
    for k in range(used):
        t[k] = t[k] / scale
        low, high = min(low, t[k]), max(high, t[k])
        power = 1.0
        for p in range(2 * degree + 1):
            sums[p] += power
            if p <= degree:
                normal[p, degree + 1] += power * y[k]
            power *= t[k]
    for i in range(degree + 1):
        for m in range(degree + 1):
            normal[i, m] = sums[i + m]
    coef = scratch[3, : degree + 1]
    _solve(normal, coef)
    coef[0] += removed[lowest]
    best = _minimise(coef, low, high)
    return wavelengths[lowest] + best * scale, 1.0 - _polyval(coef, best)


@cached_njit(error_model="numpy")
def _fit_parabola(t, y, used, scale, origin, offset):  # pragma: no cover - numba
    """`_fit_minimum` for a parabola: the least-squares ``y = c0 + c1 u + c2 u^2`` through
    the first `used` points, ``u = t / scale``, by Cramer's rule on its normal equations
    (their matrix, of the power sums of u in [-1, 1], is well conditioned for 3 or more
    distinct points), its minimum on the points' span (the vertex where it opens upward,
    else the lower end of the span; `_minimise`'s closed form); returns (centre
    [um] = origin + u scale, depth = 1 - offset - the parabola there)."""
    s0, s1, s2, s3, s4 = 0.0, 0.0, 0.0, 0.0, 0.0
    b0, b1, b2 = 0.0, 0.0, 0.0
    low, high = np.inf, -np.inf
    for k in range(used):
        u = t[k] / scale
        u2 = u * u
        low, high = min(low, u), max(high, u)
        s0, s1, s2, s3, s4 = s0 + 1.0, s1 + u, s2 + u2, s3 + u2 * u, s4 + u2 * u2
        b0, b1, b2 = b0 + y[k], b1 + u * y[k], b2 + u2 * y[k]
    # cofactors of the symmetric matrix [[s0, s1, s2], [s1, s2, s3], [s2, s3, s4]]
    c00, c01, c02 = s2 * s4 - s3 * s3, s2 * s3 - s1 * s4, s1 * s3 - s2 * s2
    c11, c12, c22 = s0 * s4 - s2 * s2, s1 * s2 - s0 * s3, s0 * s2 - s1 * s1
    det = s0 * c00 + s1 * c01 + s2 * c02
    a0 = (c00 * b0 + c01 * b1 + c02 * b2) / det + offset
    a1 = (c01 * b0 + c11 * b1 + c12 * b2) / det
    a2 = (c02 * b0 + c12 * b1 + c22 * b2) / det
    if a2 > 0:
        u = min(max(-a1 / (2.0 * a2), low), high)
    else:
        u = low if a0 + (a1 + a2 * low) * low <= a0 + (a1 + a2 * high) * high else high
    return origin + u * scale, 1.0 - (a0 + (a1 + a2 * u) * u)


@cached_njit(error_model="numpy")
def _solve(augmented, x):  # pragma: no cover - numba
    """x of the square system whose (n, n + 1) augmented matrix is given (overwritten):
    Gaussian elimination with partial pivoting."""
    n = x.size
    for col in range(n):
        pivot = col
        for r in range(col + 1, n):
            if abs(augmented[r, col]) > abs(augmented[pivot, col]):
                pivot = r
        for c in range(n + 1):
            augmented[col, c], augmented[pivot, c] = augmented[pivot, c], augmented[col, c]
        for r in range(col + 1, n):
            factor = augmented[r, col] / augmented[col, col]
            for c in range(col, n + 1):
                augmented[r, c] -= factor * augmented[col, c]
    for r in range(n - 1, -1, -1):
        total = augmented[r, n]
        for c in range(r + 1, n):
            total -= augmented[r, c] * x[c]
        x[r] = total / augmented[r, r]


@cached_njit(error_model="numpy")
def _polyval(coef, t):  # pragma: no cover - numba
    """sum_i coef[i] t^i (Horner)."""
    value = coef[-1]
    for i in range(coef.size - 2, -1, -1):
        value = value * t + coef[i]
    return value


@cached_njit(error_model="numpy")
def _slope_curvature(coef, t):  # pragma: no cover - numba
    """(first, second) derivative of the polynomial at t."""
    slope, curvature = 0.0, 0.0
    for i in range(coef.size - 1, 0, -1):
        slope = slope * t + i * coef[i]
        if i >= 2:
            curvature = curvature * t + i * (i - 1) * coef[i]
    return slope, curvature


@cached_njit(error_model="numpy")
def _minimise(coef, low, high):  # pragma: no cover - numba
    """argmin of the polynomial on [low, high]: the best of `_GRID` points, then Newton's
    steps on the derivative kept inside the interval and kept only where they lower the
    value (a parabola's minimum is `_fit_parabola`'s, in closed form)."""
    t, value = low, np.inf
    for k in range(_GRID):
        point = low + (high - low) * (k / (_GRID - 1))
        here = _polyval(coef, point)
        if here < value:
            t, value = point, here
    for _ in range(4):
        slope, curvature = _slope_curvature(coef, t)
        step = t - slope / curvature if curvature > 0 else t
        step = min(max(step, low), high)
        if _polyval(coef, step) <= _polyval(coef, t):
            t = step
    return t
