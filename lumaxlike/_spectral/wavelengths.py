"""The spectral axis of `continuum_removed`, `band_parameters` and `spectral_parameters`:
its checks (wavelengths in micrometres, increasing; bad bands), the band nearest a
wavelength and its kernel (the median over neighbouring bands, as the CRISM summary
parameters take it), refused by name when a wavelength is not covered or a band it needs
is bad: nothing is ever extrapolated."""

from __future__ import annotations

import dataclasses

import numpy as np

from .._validation import WAVELENGTH_RTOL, wavelengths_um
from .defaults import DEFAULT_TOLERANCE

__all__ = [
    "DEFAULT_TOLERANCE",
    "Kernel",
    "Located",
    "check_spectra",
    "good_mask",
    "good_in_window",
    "in_window",
    "kernel_value",
    "locate",
]


@dataclasses.dataclass(frozen=True)
class Kernel:
    """A band a product reads: the band nearest ``wavelength`` [um] and the median over
    the ``width`` bands centred on it (odd; 1: the band alone)."""

    wavelength: float
    width: int = 1


@dataclasses.dataclass(frozen=True)
class Located:
    """A `Kernel` found in a cube: ``index`` of the band nearest its wavelength,
    ``wavelength`` [um] of that band, the kernel's bands ``start:stop``."""

    index: int
    wavelength: float
    start: int
    stop: int


def check_spectra(spectra, wavelengths, bad_bands=None):
    """The arguments every spectral function checks alike.

    Args:
        spectra: (..., bands) array; integers are read as float64.
        wavelengths: (bands,) band centres [um], strictly increasing and finite.
        bad_bands: None, a (bands,) bool mask (True: bad) or a sequence of band indices.

    Returns:
        (spectra as a floating array, wavelengths as float64, good as a (bands,) bool mask).

    Raises:
        ValueError: naming the argument at fault.
    """
    spectra = np.asarray(spectra)
    if spectra.ndim < 1 or spectra.shape[-1] < 2:
        raise ValueError(f"spectra must have a bands axis (last) of 2 or more, got {spectra.shape}")
    if not np.issubdtype(spectra.dtype, np.floating):
        if not np.issubdtype(spectra.dtype, np.number) or np.iscomplexobj(spectra):
            raise ValueError(f"spectra must be real numbers, got dtype {spectra.dtype}")
        spectra = spectra.astype(np.float64)
    wavelengths = wavelengths_um("wavelengths", wavelengths)
    if wavelengths.shape != spectra.shape[-1:]:
        raise ValueError(
            f"wavelengths must have shape ({spectra.shape[-1]},) (one per band of spectra), "
            f"got {wavelengths.shape}"
        )
    if np.any(np.diff(wavelengths) <= 0):
        raise ValueError("wavelengths must be strictly increasing")
    return spectra, wavelengths, good_mask(bad_bands, wavelengths.size)


def good_mask(bad_bands, n_bands: int) -> np.ndarray:
    """(n_bands,) bool, True for a good band: `bad_bands` (None, a bool mask with True for
    bad, or distinct band indices) checked and inverted.

    An integer array of 0s and 1s with one value per band is refused: it is what an ENVI
    header's ``bbl`` holds (1 = good, 0 = bad), the opposite of a mask and not indices;
    ``bbl == 0`` is the mask it means. Repeated indices are refused as well."""
    good = np.ones(n_bands, dtype=bool)
    if bad_bands is None:
        return good
    bad = np.asarray(bad_bands)
    if bad.dtype == bool:
        if bad.shape != (n_bands,):
            raise ValueError(f"bad_bands as a mask must have shape ({n_bands},), got {bad.shape}")
        return ~bad
    if bad.ndim != 1 or not np.issubdtype(bad.dtype, np.integer) and bad.size:
        raise ValueError("bad_bands must be a bool mask or a sequence of band indices")
    if bad.size == n_bands and np.all((bad == 0) | (bad == 1)):
        raise ValueError(
            "bad_bands holds only 0s and 1s, one per band: an ENVI bbl list (1 = good, "
            "0 = bad) is not band indices; pass bad_bands=(bbl == 0), a bool mask"
        )
    if bad.size and (bad.min() < -n_bands or bad.max() >= n_bands):
        raise ValueError(f"bad_bands has indices outside the {n_bands} bands: {bad.tolist()}")
    indices = np.where(bad < 0, bad + n_bands, bad).astype(int)
    if np.unique(indices).size != indices.size:
        raise ValueError(f"bad_bands must list each band index once, got {bad.tolist()}")
    good[indices] = False
    return good


def locate(kernel: Kernel, wavelengths, good, tolerance: float, what: str, channel=None) -> Located:
    """`kernel` found among `wavelengths` [um]: its nearest band within `tolerance` [um],
    with the kernel's neighbours inside the cube and none of them bad; with `channel`
    [um] (the spacing the kernel's width counts), a kernel of width > 1 must span at most
    ``channel * (width + 2)`` (the CRISM Analysis Toolkit's gap tolerance: two channels
    missing at most).

    Raises:
        ValueError: naming `what` (the product) and the wavelength.
    """
    index = int(np.argmin(np.abs(wavelengths - kernel.wavelength)))
    nearest = float(wavelengths[index])
    if abs(nearest - kernel.wavelength) > tolerance + WAVELENGTH_RTOL * kernel.wavelength:
        raise ValueError(
            f"{what} needs a band at {kernel.wavelength:g} um: the nearest is {nearest:g} um, "
            f"farther than tolerance={tolerance:g} um"
        )
    half = kernel.width // 2
    start, stop = index - half, index + half + 1
    if start < 0 or stop > wavelengths.size:
        raise ValueError(
            f"{what} needs {kernel.width} bands around {kernel.wavelength:g} um (a kernel): "
            "the cube ends before that"
        )
    if not np.all(good[start:stop]):
        bad = [f"{w:g}" for w, g in zip(wavelengths[start:stop], good[start:stop]) if not g]
        raise ValueError(
            f"{what} needs the {kernel.width} band(s) around {kernel.wavelength:g} um, "
            f"and bands at {', '.join(bad)} um are bad"
        )
    span = wavelengths[stop - 1] - wavelengths[start]
    if channel is not None and kernel.width > 1 and span > channel * (kernel.width + 2):
        raise ValueError(
            f"{what} takes the median of {kernel.width} channels of ~{channel * 1000:g} nm "
            f"around {kernel.wavelength:g} um; these bands span {span * 1000:.0f} nm, more "
            f"than {kernel.width + 2} channels"
        )
    return Located(index, nearest, start, stop)


def kernel_value(spectra, located: Located) -> np.ndarray:
    """The (...,) median of `spectra` over the kernel's bands (NaN where one is NaN)."""
    if located.stop - located.start == 1:
        return spectra[..., located.index]
    return np.median(spectra[..., located.start : located.stop], axis=-1)


def good_in_window(window, wavelengths, good, what: str) -> np.ndarray:
    """Indices of the good bands with wavelengths in ``window = (low, high)`` [um]; refused
    by name when there is none."""
    low, high = (float(v) for v in window)
    if not low < high:
        raise ValueError(f"{what}: a window must be (low, high) with low < high, got {window}")
    inside = np.flatnonzero(in_window(wavelengths, low, high) & good)
    if inside.size == 0:
        raise ValueError(f"{what} needs a good band between {low:g} and {high:g} um: none")
    return inside


def in_window(wavelengths, low: float, high: float) -> np.ndarray:
    """(bands,) bool: `wavelengths` [um] within ``[low, high]``, ends included with the
    relative slack `WAVELENGTH_RTOL` (a band at an end, rounded, is inside)."""
    return (wavelengths >= low * (1.0 - WAVELENGTH_RTOL)) & (
        wavelengths <= high * (1.0 + WAVELENGTH_RTOL)
    )
