"""`continuum_removed`: spectra divided by their continuum, per pixel over arrays
``(..., bands)``: the upper convex hull (SPy's `spectral.algorithms.continuum`, ENVI's
"Continuum Removal") in a numba kernel, or the straight line between two shoulders
(fixed wavelengths, or the highest band of a window) in NumPy. A bad or NaN band is
never a point of the hull nor a shoulder."""

from __future__ import annotations

import math

import numpy as np
from jaxtyping import Float

from .._model.numba_cache import cached_njit
from .._model.numba_threads import run_in_blocks
from .wavelengths import DEFAULT_TOLERANCE, Kernel, check_spectra, good_in_window, locate

__all__ = [
    "BLOCK",
    "continuum_removed",
    "hull_continuum",
    "linear_continuum",
    "shoulder_bands",
    "shoulder_indices",
]

BLOCK = 256  # pixels per block of the hull kernel (`numba_threads.run_in_blocks`)


@cached_njit(nogil=True, error_model="numpy")
def _hull_kernel(first, last, spectra, wavelengths, good, continuum):  # pragma: no cover - numba
    """Blocks first to last - 1 of `BLOCK` pixels: each pixel's upper convex hull over its
    good, finite bands (Andrew's monotone chain, left to right), then the hull's vertices
    joined by straight lines at every band between the first and last of them (NaN
    outside, and for a pixel with fewer than two such bands)."""
    n_pixels, n_bands = spectra.shape
    hull = np.empty(n_bands, np.int64)
    for block in range(first, last):
        for p in range(block * BLOCK, min(n_pixels, (block + 1) * BLOCK)):
            y = spectra[p]
            top = 0
            for j in range(n_bands):
                if not (good[j] and math.isfinite(y[j])):
                    continue
                # pop the last vertex while it lies on or below the chord to band j
                while top >= 2:
                    a, b = hull[top - 2], hull[top - 1]
                    cross = (wavelengths[b] - wavelengths[a]) * (y[j] - y[a]) - (y[b] - y[a]) * (
                        wavelengths[j] - wavelengths[a]
                    )
                    if cross >= 0.0:
                        top -= 1
                    else:
                        break
                hull[top] = j
                top += 1
            out = continuum[p]
            out[:] = np.nan
            if top < 2:
                continue
            for k in range(top - 1):
                a, b = hull[k], hull[k + 1]
                slope = (y[b] - y[a]) / (wavelengths[b] - wavelengths[a])
                for j in range(a, b + 1):
                    out[j] = y[a] + slope * (wavelengths[j] - wavelengths[a])


def hull_continuum(spectra, wavelengths, good) -> np.ndarray:
    """The (..., bands) upper-convex-hull continuum of checked `spectra` (same dtype; NaN
    outside each pixel's first and last good, finite band)."""
    flat = np.ascontiguousarray(spectra.reshape(-1, spectra.shape[-1]))
    if not flat.flags.writeable:
        flat = flat.copy()
    continuum = np.empty_like(flat)
    n_pixels = flat.shape[0]
    if n_pixels:
        run_in_blocks(
            _hull_kernel,
            (n_pixels + BLOCK - 1) // BLOCK,
            flat,
            np.ascontiguousarray(wavelengths, dtype=flat.dtype),
            np.ascontiguousarray(good, dtype=np.bool_),
            continuum,
        )
    return continuum.reshape(spectra.shape)


def shoulder_bands(wavelengths, good, shoulder, tolerance, what) -> tuple[np.ndarray, bool]:
    """(band indices, fixed) of a shoulder: ``([the band nearest a wavelength], True)``
    (`shoulder` a number [um]; refused by name when missing or bad), or ``(the good bands
    of a window, False)`` (`shoulder` = (low, high) [um]; the highest of them per pixel)."""
    if np.ndim(shoulder) == 0:
        located = locate(Kernel(float(shoulder)), wavelengths, good, tolerance, what)
        return np.array([located.index], dtype=np.int64), True
    if np.shape(shoulder) != (2,):
        raise ValueError(f"{what}: a shoulder is a wavelength [um] or a (low, high) window")
    return good_in_window(shoulder, wavelengths, good, what).astype(np.int64), False


def shoulder_indices(spectra, wavelengths, good, shoulder, tolerance, what) -> np.ndarray:
    """(...,) int64 band index of a shoulder per pixel (`shoulder_bands`): the fixed band,
    or the window's band of highest finite value; -1 where every band of the window is
    NaN."""
    inside, fixed = shoulder_bands(wavelengths, good, shoulder, tolerance, what)
    if fixed:
        return np.full(spectra.shape[:-1], inside[0], dtype=np.int64)
    values = spectra[..., inside]
    finite = np.isfinite(values)
    best = np.where(finite, values, -np.inf).argmax(axis=-1)
    return np.where(finite.any(axis=-1), inside[best], -1).astype(np.int64)


def linear_continuum(spectra, wavelengths, short, long) -> np.ndarray:
    """The (..., bands) straight line through each pixel's shoulders (band indices `short`
    and `long`, (...,)), NaN outside them and where a shoulder is -1 or NaN."""
    valid = (short >= 0) & (long > short)
    a, b = np.where(valid, short, 0), np.where(valid, long, 0)
    ya = np.take_along_axis(spectra, a[..., None], axis=-1)
    yb = np.take_along_axis(spectra, b[..., None], axis=-1)
    xa, xb = wavelengths[a][..., None], wavelengths[b][..., None]
    with np.errstate(divide="ignore", invalid="ignore"):
        line = ya + (yb - ya) * ((wavelengths - xa) / (xb - xa)).astype(spectra.dtype)
    bands = np.arange(wavelengths.size)
    inside = valid[..., None] & (bands >= a[..., None]) & (bands <= b[..., None])
    return np.where(inside, line, np.nan).astype(spectra.dtype, copy=False)


def continuum_removed(
    spectra: Float[np.ndarray, "*pixels bands"],  # noqa: F722 (jaxtyping shape)
    wavelengths: Float[np.ndarray, " bands"],  # noqa: F722 (jaxtyping shape)
    *,
    method: str = "hull",
    shoulders=None,
    bad_bands=None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> Float[np.ndarray, "*pixels bands"]:  # noqa: F722 (jaxtyping shape)
    """Spectra divided by their continuum, per pixel.

    Two continua:

    * ``"hull"``: the upper convex hull of each spectrum (the points (wavelength, value)
      of its good, finite bands), its vertices joined by straight lines: the continuum of
      SPy (`spectral.algorithms.continuum`) and ENVI. Its first and last vertices are
      the spectrum's first and last good bands, so the result is 1 there and <= 1
      between them.
    * ``"linear"``: the straight line between two shoulders, ``shoulders=(short,
      long)``, each either a wavelength [um] (the band nearest it, within `tolerance`)
      or a window ``(low, high)`` [um] whose highest good band is the shoulder, pixel by
      pixel. The result is NaN outside the shoulders (the line is never extrapolated).

    Neither continuum anchors on a bad band (`bad_bands`) or on a NaN value: the hull
    passes over them, a window's maximum ignores them, and a fixed shoulder on a bad
    band is refused. Bad and NaN bands are NaN in the result.

    Args:
        spectra: (..., bands) reflectance, w or any positive spectral quantity.
        wavelengths: (bands,) band centres [um], increasing.
        method: ``"hull"`` or ``"linear"``.
        shoulders: ``(short, long)`` for ``"linear"`` (None for ``"hull"``).
        bad_bands: None, a (bands,) bool mask (True: bad) or band indices.
        tolerance: how far [um] the band nearest a fixed shoulder may lie from it.

    Returns:
        (..., bands) ``spectra / continuum``, dtype of `spectra` (float64 for integers).

    Raises:
        ValueError: a bad argument, or a fixed shoulder not covered or on a bad band.
    """
    spectra, wavelengths, good = check_spectra(spectra, wavelengths, bad_bands)
    if method == "hull":
        if shoulders is not None:
            raise ValueError("shoulders is for method='linear'; the hull finds its own")
        continuum = hull_continuum(spectra, wavelengths, good)
    elif method == "linear":
        if shoulders is None or len(shoulders) != 2:
            raise ValueError("method='linear' needs shoulders=(short, long)")
        short, long = (
            shoulder_indices(spectra, wavelengths, good, s, tolerance, f"shoulder {s!r}")
            for s in shoulders
        )
        continuum = linear_continuum(spectra, wavelengths, short, long)
    else:
        raise ValueError(f"method must be 'hull' or 'linear', got {method!r}")
    with np.errstate(divide="ignore", invalid="ignore"):
        removed = spectra / continuum
    return np.where(good, removed, np.nan).astype(spectra.dtype, copy=False)
