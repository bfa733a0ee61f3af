"""The registry of named spectral products (`SPECTRAL_PRODUCTS`), `spectral_parameters`
and its result `SpectralParameters`, and `spectral_parameters_block`: the pure function
of one block of spectra that every front end calls (NumPy arrays in, a dict of maps out;
each pixel on its own, so blocks give the same maps as the whole)."""

from __future__ import annotations

import dataclasses
import types
from collections.abc import Iterator, Mapping, Sequence

import numpy as np
from jaxtyping import Float

from .._declared_options import refuse_unknown, takes_options
from .crism import CRISM_PRODUCTS
from .declarations import ProductInputs, SpectralProduct, bands_read, check_product
from .defaults import DEFAULT_TOLERANCE
from .lucey import LUCEY_PRODUCTS, LuceyConstants
from .m3 import M3_PRODUCTS
from .options import QUANTITIES, SpectralSettings
from .wavelengths import check_spectra

__all__ = [
    "QUANTITIES",
    "SPECTRAL_PRODUCTS",
    "SpectralParameters",
    "available_spectral_products",
    "check_names",
    "prepare_products",
    "spectral_parameters",
    "spectral_parameters_block",
]

SPECTRAL_PRODUCTS: Mapping[str, SpectralProduct] = types.MappingProxyType(
    {p.name: p for p in (*M3_PRODUCTS, *LUCEY_PRODUCTS, *CRISM_PRODUCTS)}
)
"""Every named product, ``{name: SpectralProduct}``, in the order M3, Lucey, CRISM."""


@dataclasses.dataclass(frozen=True)
class SpectralParameters(Mapping):
    """The products of `spectral_parameters`: a read-only mapping ``{name: (...) array}``
    (the spectra's pixels), in the order asked, plus how they were made.

    Attributes:
        maps: the mapping itself.
        quantity: what the spectra held (a key of ``QUANTITIES``).
        wavelengths: ``{name: (band centres [um] the product read, ...)}``.
        products: ``{name: SpectralProduct}``, the declarations used.
        constants: ``{set name: constants}`` used (``{"lucey": LuceyConstants(...)}``).
    """

    maps: Mapping[str, np.ndarray]
    quantity: str
    wavelengths: Mapping[str, tuple[float, ...]]
    products: Mapping[str, SpectralProduct]
    constants: Mapping[str, object]

    def __getitem__(self, name: str) -> np.ndarray:
        return self.maps[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.maps)

    def __len__(self) -> int:
        return len(self.maps)


@dataclasses.dataclass(frozen=True)
class PreparedProducts:
    """Products checked against one spectral axis: what a block needs besides its spectra
    (picklable, for dask)."""

    names: tuple[str, ...]
    wavelengths: np.ndarray
    good: np.ndarray
    located: Mapping[str, Mapping]
    used: Mapping[str, tuple[float, ...]]
    constants: Mapping[str, object]
    tolerance: float
    read: Mapping[str, np.ndarray]  # {name: indices of the bands it reads}


def check_names(products) -> tuple[str, ...]:
    """`products` (one name or a sequence) as a tuple of known names, each once; refused
    (ValueError) naming the unknown ones and listing the products."""
    if isinstance(products, str):
        products = (products,)
    names = tuple(products)
    if not names:
        raise ValueError("products must name at least one product")
    unknown = [n for n in names if n not in SPECTRAL_PRODUCTS]
    if unknown:
        raise ValueError(f"products: unknown {unknown}; available: {', '.join(SPECTRAL_PRODUCTS)}")
    if len(set(names)) != len(names):
        raise ValueError(f"products names a product twice: {list(names)}")
    return names


def prepare_products(products, wavelengths, good, settings: SpectralSettings) -> PreparedProducts:
    """`products` (names) checked against the (checked) spectral axis with ``settings``'
    tolerance and constants, every refusal by product name (ValueError)."""
    names = check_names(products)
    tolerance = settings.tolerance
    lucey = LuceyConstants() if settings.lucey is None else settings.lucey
    located, used, read = {}, {}, {}
    for name in names:
        product = SPECTRAL_PRODUCTS[name]
        located[name] = check_product(product, wavelengths, good, tolerance)
        read[name] = bands_read(product, located[name], wavelengths, good)
        used[name] = tuple(float(w) for w in wavelengths[read[name]])
    constants = {"lucey": lucey} if any(SPECTRAL_PRODUCTS[n].constants for n in names) else {}
    return PreparedProducts(
        names, wavelengths, good, located, used, constants, float(tolerance), read
    )


def non_positive(spectra, bands: np.ndarray, cache: dict) -> np.ndarray:
    """(...) bool: pixels where one of `bands` (indices) is <= 0 (NaN is not), kept in
    `cache` for the products that read the same bands."""
    key = bands.tobytes()
    if key not in cache:
        found = np.zeros(spectra.shape[:-1], dtype=bool)
        for band in bands:  # band by band: no copy of the block's bands
            found |= spectra[..., band] <= 0
        cache[key] = found
    return cache[key]


def spectral_parameters_block(spectra, prepared: PreparedProducts) -> dict[str, np.ndarray]:
    """The pure function of one block: (..., bands) spectra -> ``{name: (...) map}``,
    float64 (float32 for float32 spectra), bad bands NaN first. What the xarray front end
    runs on each chunk, and what a file front end would run on each block of rows.

    A product is NaN in a pixel where a band it reads is <= 0: its ratios and band depths
    assume a positive quantity (w, reflectance), and a zero or negative value gives a
    number that means nothing (the line through a zero crosses 0; an all-negative
    spectrum's ratios equal those of its positive twin)."""
    if not prepared.good.all():  # (no copy of the block where no band is bad)
        spectra = np.where(prepared.good, spectra, np.nan).astype(spectra.dtype, copy=False)
    dtype = np.result_type(spectra.dtype, np.float32)
    analyses: dict = {}
    maps = {}
    masks: dict = {}
    with np.errstate(divide="ignore", invalid="ignore"):
        for name in prepared.names:
            inputs = ProductInputs(
                spectra,
                prepared.wavelengths,
                prepared.good,
                dict(prepared.located[name]),
                prepared.tolerance,
                prepared.constants,
                analyses,
            )
            value = np.asarray(SPECTRAL_PRODUCTS[name].function(inputs))
            value = np.broadcast_to(value, spectra.shape[:-1]).astype(dtype)
            masked = non_positive(spectra, prepared.read[name], masks)
            maps[name] = (
                np.where(masked, np.asarray(np.nan, dtype), value) if masked.any() else value
            )
    return maps


@takes_options(SpectralSettings)
def spectral_parameters(
    spectra: Float[np.ndarray, "*pixels bands"],  # noqa: F722 (jaxtyping shape)
    wavelengths: Float[np.ndarray, " bands"],  # noqa: F722 (jaxtyping shape)
    products: str | Sequence[str],
    *,
    bad_bands=None,
    settings: SpectralSettings | None = None,
    **options,
) -> SpectralParameters:
    """Named spectral products (M3, Lucey, CRISM) per pixel.

    Each product follows its published definition (`SPECTRAL_PRODUCTS[name]`: bands,
    kernels, continuum anchors, citation; the docs page "Spectral parameters" lists
    them). A product reads the band nearest each of its wavelengths, within
    ``tolerance``, as the median over its kernel of neighbouring bands; a product whose
    band is not covered, or whose band or kernel neighbour is bad, is refused by name:
    nothing is extrapolated. Where a pixel's band is NaN its product is NaN; so it is
    where a band the product reads is <= 0 (ratios and band depths of a non-positive
    quantity mean nothing), and TiO2 is NaN below the origin of Lucey's relation. A band
    centre (``BAND1_CENTER``, ``BAND2_CENTER``) is NaN where there is no band
    (`BandParameters`).

    Args:
        spectra: (..., bands) the quantity named by ``quantity``.
        wavelengths: (bands,) band centres [um], increasing.
        products: names of `SPECTRAL_PRODUCTS` (one name or a sequence).
        bad_bands: None, a (bands,) bool mask (True: bad) or band indices.
        settings: the options as one `lumaxlike.SpectralSettings` (None: the keywords').
        **options: the options of `lumaxlike.SpectralSettings` by name: ``quantity``
            (required: what ``spectra`` holds, ``"w"`` from `invert`, ``"normalized"``
            from `normalize`, ``"r"``, ``"radf"``, ``"reff"`` or ``"reflectance"``;
            recorded with the result), ``tolerance`` [um] and ``lucey`` (FeO, TiO2 and
            OMAT's constants: Clementine's, at 30 deg incidence and 0 deg emission, by
            default).

    Returns:
        `SpectralParameters`: ``{name: (...) map}`` (float32 for float32 spectra, else
        float64) with the quantity, the wavelengths each product read and the constants.

    Raises:
        ValueError: a bad argument or option (named), an unknown product, or a product the
            bands cannot give (named, with the wavelength at fault).
        TypeError: a keyword that is none of these.
    """
    settings = SpectralSettings.merged(settings, options)
    refuse_unknown("spectral_parameters", options)
    spectra, wavelengths, good = check_spectra(spectra, wavelengths, bad_bands)
    prepared = prepare_products(products, wavelengths, good, settings)
    maps = spectral_parameters_block(spectra, prepared)
    return SpectralParameters(
        maps=types.MappingProxyType(maps),
        quantity=settings.quantity,
        wavelengths=types.MappingProxyType(dict(prepared.used)),
        products=types.MappingProxyType({n: SPECTRAL_PRODUCTS[n] for n in prepared.names}),
        constants=types.MappingProxyType(dict(prepared.constants)),
    )


def available_spectral_products(
    wavelengths: Float[np.ndarray, " bands"],  # noqa: F722 (jaxtyping shape)
    *,
    bad_bands=None,
    tolerance: float = DEFAULT_TOLERANCE,
) -> tuple[str, ...]:
    """Names of the `SPECTRAL_PRODUCTS` these bands can give (all their bands covered
    within `tolerance` [um], none bad), in the registry's order."""
    wavelengths = np.asarray(wavelengths, dtype=np.float64)
    _, wavelengths, good = check_spectra(np.zeros((1, wavelengths.size)), wavelengths, bad_bands)
    names = []
    for name, product in SPECTRAL_PRODUCTS.items():
        try:
            check_product(product, wavelengths, good, tolerance)
        except ValueError:
            continue
        names.append(name)
    return tuple(names)
