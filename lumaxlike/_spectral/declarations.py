"""A spectral product declared as data (`SpectralProduct`: its name, the bands and
windows it reads, its function, units, citation and whether thermal emission biases it),
the checks that a cube has what a product needs, and `ProductInputs`, the band values a
product's function reads. The declarations themselves are in `m3`, `lucey` and `crism`;
the registry is `products.SPECTRAL_PRODUCTS`."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from .bands import DEFAULT_DEGREE, DEFAULT_FIT_BANDS, BandParameters, analyse_band
from .wavelengths import Kernel, Located, good_in_window, in_window, kernel_value, locate

__all__ = [
    "ProductInputs",
    "SpectralProduct",
    "bands_read",
    "check_product",
    "line_at",
]


@dataclasses.dataclass(frozen=True)
class SpectralProduct:
    """One named spectral product, as data: what the front ends (Python, xarray, and the
    files and command line to come) read to compute it, check a cube against it and
    describe it.

    Attributes:
        name: the product's name as its source writes it (``"BDI1000"``, ``"OLINDEX3"``).
        family: ``"M3"``, ``"Lucey"`` or ``"CRISM"``.
        long_name: what it measures, in a few words.
        units: of its values (``"1"``, ``"um"``, ``"wt%"``).
        kernels: the bands it reads, each the band nearest a wavelength [um] and the
            median over a kernel of neighbouring bands (`Kernel`); a cube without one of
            them (not within the tolerance, a band of the kernel bad or off the cube)
            cannot compute the product.
        windows: wavelength windows ``(low, high)`` [um] in which it searches shoulders
            (each must hold a good band).
        function: ``function(inputs: ProductInputs) -> (...) array``.
        citation: the published definition it follows.
        thermal_sensitive: True when it reads bands beyond ~2.4 um, where lunar thermal
            emission adds to M3's reflectance (Clark et al. 2011; Li & Milliken 2016).
        constants: the name of the constants set it takes (``"lucey"``), or None.
        channel: the channel spacing [um] its kernel widths count (CRISM's 6.55 nm), or
            None: a kernel wider than ``channel * (width + 2)`` in a cube is refused.
    """

    name: str
    family: str
    long_name: str
    units: str
    kernels: tuple[Kernel, ...]
    function: Callable[[ProductInputs], np.ndarray]
    citation: str
    windows: tuple[tuple[float, float], ...] = ()
    thermal_sensitive: bool = False
    constants: str | None = None
    channel: float | None = None


def check_product(product: SpectralProduct, wavelengths, good, tolerance) -> dict:
    """{kernel: `Located`} of every kernel of `product` in this cube, after checking its
    windows; refused by the product's name (ValueError) when a band is missing or bad."""
    what = f"{product.name} ({product.citation.split(';')[0]})"
    for window in product.windows:
        good_in_window(window, wavelengths, good, what)
    return {
        k: locate(k, wavelengths, good, tolerance, what, product.channel) for k in product.kernels
    }


def bands_read(product, located: Mapping[Kernel, Located], wavelengths, good) -> np.ndarray:
    """Indices (sorted, int64) of the bands a product reads in this cube: its kernels'
    bands, and for a product with windows every good band from its first window's start
    to its last's end."""
    used = {j for loc in located.values() for j in range(loc.start, loc.stop)}
    if product.windows:
        low, high = product.windows[0][0], product.windows[-1][1]
        used |= set(np.flatnonzero(in_window(wavelengths, low, high) & good).tolist())
    return np.array(sorted(used), dtype=np.int64)


@dataclasses.dataclass
class ProductInputs:
    """What a product's function reads: ``R(wavelength, width)``, the (...) kernel median
    at a declared band; ``W(wavelength)``, that band's own wavelength [um]; ``band(...)``,
    a `BandParameters` analysis; ``constants``. ``analyses`` keeps the analyses and the
    kernel values of one block for the products that share them."""

    spectra: np.ndarray
    wavelengths: np.ndarray
    good: np.ndarray
    located: dict
    tolerance: float
    constants: Mapping[str, Any]
    analyses: dict = dataclasses.field(default_factory=dict)

    def R(self, wavelength: float, width: int = 1) -> np.ndarray:  # noqa: N802 - the papers' name
        """(...) median of the `width` bands around the band nearest `wavelength` [um]
        (read once per block: kept, contiguous, with the analyses)."""
        located = self.located[Kernel(wavelength, width)]
        key = ("R", located.start, located.stop)
        if key not in self.analyses:
            self.analyses[key] = np.array(kernel_value(self.spectra, located), order="C")
        return self.analyses[key]

    def W(self, wavelength: float) -> float:  # noqa: N802 - the papers' name
        """Wavelength [um] of the cube's band nearest `wavelength` (as declared)."""
        for kernel, located in self.located.items():
            if kernel.wavelength == wavelength:
                return located.wavelength
        raise KeyError(f"{wavelength} um is not a declared band of this product")

    def band(self, shoulders) -> BandParameters:
        """The band between `shoulders` (windows [um]), analysed once per call of
        `spectral_parameters` with the default degree and fitted bands."""
        key = tuple(tuple(s) for s in shoulders)
        if key not in self.analyses:
            self.analyses[key] = analyse_band(
                self.spectra,
                self.wavelengths,
                self.good,
                shoulders,
                DEFAULT_DEGREE,
                DEFAULT_FIT_BANDS,
                self.tolerance,
                "band",
            )
        return self.analyses[key]


def line_at(inputs: ProductInputs, low: Kernel, high: Kernel, at: float) -> np.ndarray:
    """The straight line through the kernel values at `low` and `high`, at the band
    nearest `at` [um] (the CRISM and M3 continua: by the bands' own wavelengths)."""
    r_low, r_high = inputs.R(low.wavelength, low.width), inputs.R(high.wavelength, high.width)
    w_low, w_high = inputs.W(low.wavelength), inputs.W(high.wavelength)
    weight = (inputs.W(at) - w_low) / (w_high - w_low)
    return (1.0 - weight) * r_low + weight * r_high
