"""The CRISM summary parameters of Viviano-Beck et al. (2014, JGR Planets 119, 1403,
table 2): OLINDEX3, LCPINDEX2, HCPINDEX2, BD1300, BD1900_2, BD2290, D2300 and SINDEX2,
with the paper's anchor wavelengths and kernel widths (each band the median over that
many neighbouring channels, as the CRISM Analysis Toolkit's ``crism_sumutil_single``
takes it). Continua are straight lines through the anchors at the channels' own
wavelengths; a channel missing, bad or with a bad neighbour in its kernel refuses the
product by name."""

from __future__ import annotations

import numpy as np

from .declarations import ProductInputs, SpectralProduct, line_at
from .wavelengths import Kernel

__all__ = ["CRISM_PRODUCTS"]

CRISM_CHANNEL = 0.00655  # um: CRISM's mean channel spacing, the unit of the kernel widths
_PAPER = "Viviano-Beck et al. 2014, JGR Planets 119, 1403, table 2"


def _relative_depths(inputs, terms, low, high, absolute=False) -> np.ndarray:
    """sum of weight * (1 - R/Rc) (or (Rc - R)/|Rc|) over `terms` = ((kernel, weight), ...)."""
    total = 0.0
    for kernel, weight in terms:
        line = line_at(inputs, low, high, kernel.wavelength)
        value = inputs.R(kernel.wavelength, kernel.width)
        depth = (line - value) / np.abs(line) if absolute else 1.0 - value / line
        total = total + weight * depth
    return np.asarray(total)


def _depth(inputs, low: Kernel, mid: Kernel, high: Kernel) -> np.ndarray:
    """1 - R(mid) / (b R(low) + a R(high)), a = (W_mid - W_low) / (W_high - W_low)."""
    return 1.0 - inputs.R(mid.wavelength, mid.width) / line_at(inputs, low, high, mid.wavelength)


OLINDEX3_TERMS = tuple(
    (Kernel(w, 7), weight)
    for w, weight in ((1.210, 0.1), (1.250, 0.1), (1.263, 0.2), (1.276, 0.2), (1.330, 0.4))
)
OLINDEX3_CONTINUUM = (Kernel(1.750, 7), Kernel(1.862, 7))
LCPINDEX2_TERMS = tuple(
    (Kernel(w, 7), weight) for w, weight in ((1.690, 0.2), (1.750, 0.2), (1.810, 0.3), (1.870, 0.3))
)
LCPINDEX2_CONTINUUM = (Kernel(1.560, 7), Kernel(2.450, 7))
HCPINDEX2_TERMS = (
    (Kernel(2.120, 5), 0.1),
    (Kernel(2.140, 7), 0.1),
    (Kernel(2.230, 7), 0.15),
    (Kernel(2.250, 7), 0.3),
    (Kernel(2.430, 7), 0.2),
    (Kernel(2.460, 7), 0.15),
)
HCPINDEX2_CONTINUUM = (Kernel(1.690, 7), Kernel(2.530, 7))
BD1300_KERNELS = (Kernel(1.080, 5), Kernel(1.320, 15), Kernel(1.750, 5))
BD1900_2_KERNELS = (Kernel(1.850, 5), Kernel(1.930, 5), Kernel(1.985, 5), Kernel(2.067, 5))
BD2290_KERNELS = (Kernel(2.250, 5), Kernel(2.290, 5), Kernel(2.350, 5))
D2300_CONTINUUM = (Kernel(1.815, 5), Kernel(2.530, 5))
D2300_NUMERATOR = (Kernel(2.290, 3), Kernel(2.320, 3), Kernel(2.330, 3))
D2300_DENOMINATOR = (Kernel(2.120, 5), Kernel(2.170, 5), Kernel(2.210, 5))
SINDEX2_KERNELS = (Kernel(2.120, 5), Kernel(2.290, 7), Kernel(2.400, 3))


def olindex3(inputs: ProductInputs) -> np.ndarray:
    """OLINDEX3 = RB1210 0.1 + RB1250 0.1 + RB1263 0.2 + RB1276 0.2 + RB1330 0.4,
    RB = (RC - R) / |RC|, RC through R1750 and R1862 (all kernels 7)."""
    return _relative_depths(inputs, OLINDEX3_TERMS, *OLINDEX3_CONTINUUM, absolute=True)


def lcpindex2(inputs: ProductInputs) -> np.ndarray:
    """LCPINDEX2 = RB1690 0.2 + RB1750 0.2 + RB1810 0.3 + RB1870 0.3, RB = 1 - R/RC, RC
    through R1560 and R2450 (all kernels 7)."""
    return _relative_depths(inputs, LCPINDEX2_TERMS, *LCPINDEX2_CONTINUUM)


def hcpindex2(inputs: ProductInputs) -> np.ndarray:
    """HCPINDEX2 = RB2120 0.1 + RB2140 0.1 + RB2230 0.15 + RB2250 0.3 + RB2430 0.2 +
    RB2460 0.15, RB = 1 - R/RC, RC through R1690 and R2530 (kernels 7, R2120 5)."""
    return _relative_depths(inputs, HCPINDEX2_TERMS, *HCPINDEX2_CONTINUUM)


def bd1300(inputs: ProductInputs) -> np.ndarray:
    """BD1300 = 1 - R1320 / (b R1080 + a R1750) (kernels 5, 15, 5)."""
    return _depth(inputs, *BD1300_KERNELS)


def bd1900_2(inputs: ProductInputs) -> np.ndarray:
    """BD1900_2 = 0.5 (1 - R1930/RC1930) + 0.5 (1 - R1985/RC1985), RC through R1850 and
    R2067 (kernels 5)."""
    low, first, second, high = BD1900_2_KERNELS
    return 0.5 * _depth(inputs, low, first, high) + 0.5 * _depth(inputs, low, second, high)


def bd2290(inputs: ProductInputs) -> np.ndarray:
    """BD2290 = 1 - R2290 / (b R2250 + a R2350) (kernels 5)."""
    return _depth(inputs, *BD2290_KERNELS)


def d2300(inputs: ProductInputs) -> np.ndarray:
    """D2300 = 1 - (CR2290 + CR2320 + CR2330) / (CR2120 + CR2170 + CR2210), CR = R/RC, RC
    through R1815 and R2530 (kernels 5; 2290, 2320, 2330: 3)."""

    def relative(kernel: Kernel) -> np.ndarray:
        line = line_at(inputs, *D2300_CONTINUUM, kernel.wavelength)
        return inputs.R(kernel.wavelength, kernel.width) / line

    numerator = sum(relative(k) for k in D2300_NUMERATOR)
    denominator = sum(relative(k) for k in D2300_DENOMINATOR)
    return np.asarray(1.0 - numerator / denominator)


def sindex2(inputs: ProductInputs) -> np.ndarray:
    """SINDEX2 = 1 - (b R2120 + a R2400) / R2290 (kernels 5, 7, 3): a convexity at 2.29
    um between the 2.1 and 2.4 um sulfate bands."""
    low, mid, high = SINDEX2_KERNELS
    return 1.0 - line_at(inputs, low, high, mid.wavelength) / inputs.R(mid.wavelength, mid.width)


def _kernels(*groups) -> tuple[Kernel, ...]:
    seen: dict[Kernel, None] = {}
    for group in groups:
        for item in group:
            seen[item[0] if isinstance(item, tuple) else item] = None
    return tuple(seen)


CRISM_PRODUCTS: tuple[SpectralProduct, ...] = tuple(
    SpectralProduct(
        name,
        "CRISM",
        long_name,
        "1",
        kernels,
        function,
        f"{_PAPER}: {name}",
        channel=CRISM_CHANNEL,
    )
    for name, long_name, kernels, function in (
        (
            "OLINDEX3",
            "olivine index: weighted depths at 1210-1330 nm",
            _kernels(OLINDEX3_TERMS, OLINDEX3_CONTINUUM),
            olindex3,
        ),
        (
            "LCPINDEX2",
            "low-calcium pyroxene index: weighted depths at 1690-1870 nm",
            _kernels(LCPINDEX2_TERMS, LCPINDEX2_CONTINUUM),
            lcpindex2,
        ),
        (
            "HCPINDEX2",
            "high-calcium pyroxene index: weighted depths at 2120-2460 nm",
            _kernels(HCPINDEX2_TERMS, HCPINDEX2_CONTINUUM),
            hcpindex2,
        ),
        ("BD1300", "1.3 um band depth (Fe2+ in plagioclase)", BD1300_KERNELS, bd1300),
        ("BD1900_2", "1.9 um H2O band depth", BD1900_2_KERNELS, bd1900_2),
        ("BD2290", "2.29 um Fe/Mg-OH band depth (and CO2 ice)", BD2290_KERNELS, bd2290),
        (
            "D2300",
            "2.3 um drop (Fe/Mg-OH phyllosilicates)",
            _kernels(D2300_CONTINUUM, D2300_NUMERATOR, D2300_DENOMINATOR),
            d2300,
        ),
        ("SINDEX2", "sulfate index: 2.29 um convexity", SINDEX2_KERNELS, sindex2),
    )
)
