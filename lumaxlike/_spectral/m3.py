"""The M3 products: integrated band depths BDI1000 and BDI2000 (the M3 team's pipeline
products, as PyHAT's `libpyhat/derived/m3` lists them), the 1 um and 2 um band centres,
depths and areas with the Band Area Ratio (Cloutis et al. 1986), and the thermally
sensitive 2.5/2.3 um ratio."""

from __future__ import annotations

import numpy as np

from .._model.numba_cache import cached_njit
from .._model.numba_threads import run_in_blocks
from .continuum import BLOCK
from .declarations import ProductInputs, SpectralProduct
from .wavelengths import Kernel

__all__ = ["M3_PRODUCTS"]

_M3 = (
    "Moon Mineralogy Mapper Level 2 derived products (Mustard et al. 2011, JGR 116, "
    "E00G12; PyHAT libpyhat/derived/m3)"
)
_CLOUTIS = "Cloutis et al. 1986, JGR 91, 11641"

# BDI1000: n = 0..26 at 789 + 20 n nm; BDI2000: n = 0..21 at 1658 + 40 n nm (PyHAT pipe.py)
BDI1000_BANDS = tuple(round(0.789 + 0.020 * n, 6) for n in range(27))
BDI2000_BANDS = tuple(round(1.658 + 0.040 * n, 6) for n in range(22))
# The continuum lines: the M3 pipeline's 1 um and 2 um continuum-slope anchors
# (1um_Slope: R699, R1579; 2um_Slope: R1578, R2538), single bands (`_bdi` reads them so)
BDI1000_CONTINUUM = (Kernel(0.699), Kernel(1.579))
BDI2000_CONTINUUM = (Kernel(1.578), Kernel(2.538))

# Shoulder windows [um] of Band I and Band II: the highest good band in each
BAND1 = ((0.65, 0.90), (1.15, 1.75))
BAND2 = ((1.15, 1.75), (2.40, 2.60))


def _bdi(inputs: ProductInputs, bands, continuum) -> np.ndarray:
    """sum over `bands` of 1 - R / Rc, Rc the line through the `continuum` bands (single
    bands, as declared) at each band's own wavelength (`line_at`'s line): one numba pass
    over the pixels (`_bdi_kernel`), float64 inside."""
    low, high = (inputs.located[kernel] for kernel in continuum)
    index = np.array([low.index, high.index] + [inputs.located[Kernel(w)].index for w in bands])
    weight = (np.array([inputs.W(w) for w in bands]) - low.wavelength) / (
        high.wavelength - low.wavelength
    )
    pixels, n_bands = inputs.spectra.shape[:-1], inputs.spectra.shape[-1]
    flat = np.ascontiguousarray(inputs.spectra.reshape(-1, n_bands))
    out = np.empty(flat.shape[0], np.float64)
    if flat.shape[0]:
        blocks = (flat.shape[0] + BLOCK - 1) // BLOCK
        run_in_blocks(_bdi_kernel, blocks, flat, index.astype(np.int64), weight, out)
    return out.reshape(pixels)


@cached_njit(nogil=True, error_model="numpy")
def _bdi_kernel(first, last, spectra, index, weight, out):  # pragma: no cover - numba
    """Blocks first to last - 1 of `BLOCK` pixels: ``out[p]`` = sum_k 1 - spectra[p,
    index[k + 2]] / ((1 - weight[k]) spectra[p, index[0]] + weight[k] spectra[p,
    index[1]])."""
    n_pixels = spectra.shape[0]
    for block in range(first, last):
        for p in range(block * BLOCK, min(n_pixels, (block + 1) * BLOCK)):
            low, high = np.float64(spectra[p, index[0]]), np.float64(spectra[p, index[1]])
            total = 0.0
            for k in range(weight.size):
                line = (1.0 - weight[k]) * low + weight[k] * high
                total += 1.0 - spectra[p, index[k + 2]] / line
            out[p] = total


def bdi1000(inputs: ProductInputs) -> np.ndarray:
    """BDI1000 = sum_{n=0}^{26} [1 - R(789 + 20n) / Rc(789 + 20n)] (wavelengths in nm),
    Rc the straight line through R(699) and R(1579) at each band's wavelength."""
    return _bdi(inputs, BDI1000_BANDS, BDI1000_CONTINUUM)


def bdi2000(inputs: ProductInputs) -> np.ndarray:
    """BDI2000 = sum_{n=0}^{21} [1 - R(1658 + 40n) / Rc(1658 + 40n)] (wavelengths in nm),
    Rc the straight line through R(1578) and R(2538)."""
    return _bdi(inputs, BDI2000_BANDS, BDI2000_CONTINUUM)


def r2540_2300(inputs: ProductInputs) -> np.ndarray:
    """R(2538) / R(2298): reflectance beyond 2.5 um rises with surface temperature."""
    return inputs.R(2.538) / inputs.R(2.298)


def _band_field(shoulders, field):
    def value(inputs: ProductInputs) -> np.ndarray:
        return getattr(inputs.band(shoulders), field)

    value.__name__ = f"band_{field}"
    return value


def band_area_ratio(inputs: ProductInputs) -> np.ndarray:
    """Band Area Ratio: area of Band II / area of Band I."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return inputs.band(BAND2).area / inputs.band(BAND1).area


def _band_products(number: int, shoulders, thermal: bool) -> list[SpectralProduct]:
    (s0, s1), (l0, l1) = shoulders
    where = f"shoulders: highest bands in {s0:g}-{s1:g} and {l0:g}-{l1:g} um"
    fields = [
        ("CENTER", "centre", "um", "centre (minimum of a parabola fitted to 5 bands)"),
        ("DEPTH", "depth", "1", "depth at the centre"),
        ("AREA", "area", "um", "integrated area"),
    ]
    return [
        SpectralProduct(
            name=f"BAND{number}_{suffix}",
            family="M3",
            long_name=f"Band {'I' * number} {text} of the continuum-removed spectrum ({where})",
            units=units,
            kernels=(),
            windows=shoulders,
            function=_band_field(shoulders, field),
            citation=f"{_CLOUTIS}; band centre by a polynomial around the minimum",
            thermal_sensitive=thermal,
        )
        for suffix, field, units, text in fields
    ]


M3_PRODUCTS: tuple[SpectralProduct, ...] = (
    SpectralProduct(
        name="BDI1000",
        family="M3",
        long_name="1 um integrated band depth: sum of 1 - R/Rc at 789-1309 nm in 20 nm steps",
        units="1",
        kernels=(*(Kernel(w) for w in BDI1000_BANDS), *BDI1000_CONTINUUM),
        function=bdi1000,
        citation=f"{_M3}; continuum through 699 and 1579 nm",
    ),
    SpectralProduct(
        name="BDI2000",
        family="M3",
        long_name="2 um integrated band depth: sum of 1 - R/Rc at 1658-2498 nm in 40 nm steps",
        units="1",
        kernels=(*(Kernel(w) for w in BDI2000_BANDS), *BDI2000_CONTINUUM),
        function=bdi2000,
        citation=f"{_M3}; continuum through 1578 and 2538 nm",
        thermal_sensitive=True,
    ),
    *_band_products(1, BAND1, thermal=False),
    *_band_products(2, BAND2, thermal=True),
    SpectralProduct(
        name="BAR",
        family="M3",
        long_name="Band Area Ratio, area of Band II / area of Band I",
        units="1",
        kernels=(),
        windows=(*BAND1, BAND2[1]),
        function=band_area_ratio,
        citation=_CLOUTIS,
        thermal_sensitive=True,
    ),
    SpectralProduct(
        name="R2540_2300",
        family="M3",
        long_name="ratio R(2538 nm) / R(2298 nm), sensitive to thermal emission",
        units="1",
        kernels=(Kernel(2.298), Kernel(2.538)),
        function=r2540_2300,
        citation=f"{_M3} (its 2.5 um reflectance and thermal ratios)",
        thermal_sensitive=True,
    ),
)
