"""`spectral_parameters_dataarray`: named spectral products of a DataArray of spectra
(`lumaxlike.spectral_parameters`), chunk by chunk; also
``DataArray.hapke.spectral_parameters``. No geometry: ``xarray.apply_ufunc(...,
dask="parallelized")`` over the pixel dims, the spectral dim in one chunk, the pure block
function `spectral_parameters_block` on each chunk."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Sequence

import numpy as np
import xarray as xr

from .._declared_options import refuse_unknown, takes_options
from .._io.missions.product_dataarray import bad_bands_of
from .._provenance import python_call
from .._spectral.options import QUANTITIES, SpectralSettings
from .._spectral.products import SPECTRAL_PRODUCTS, prepare_products, spectral_parameters_block
from .._spectral.wavelengths import check_spectra, good_mask
from .chunks import spectral_dim_of
from .wavelengths import band_centres_um

__all__ = ["spectral_parameters_dataarray"]


def _block(spectra, *, prepared):
    """apply_ufunc kernel: one chunk's (..., bands) spectra -> its maps, in order (the
    map itself for one product: apply_ufunc takes one output as an array, not a tuple)."""
    maps = spectral_parameters_block(spectra, prepared)
    outputs = tuple(maps[name] for name in prepared.names)
    return outputs[0] if len(outputs) == 1 else outputs


def _bad_mask(spectra: xr.DataArray, bad_bands, n_bands: int) -> np.ndarray:
    """`bad_bands` (mask or indices, checked) and the bands spectra's attrs mark bad."""
    good = good_mask(bad_bands, n_bands)
    marked = bad_bands_of(spectra)
    if marked is not None:
        good[marked] = False
    return ~good


def _product_maps(spectra: xr.DataArray, spec: str, prepared) -> dict[str, xr.DataArray]:
    """Each prepared product's map of `spectra` (lazy where it is dask-backed, the
    spectral dim in one chunk), with the product's attrs and spectra's CRS, by name."""
    if spectra.chunks is not None and len(spectra.chunksizes[spec]) > 1:
        spectra = spectra.chunk({spec: -1})
    dtype = np.result_type(spectra.dtype, np.float32)
    names = prepared.names
    outputs = xr.apply_ufunc(
        _block,
        spectra,
        input_core_dims=[[spec]],
        output_core_dims=[[] for _ in names],
        dask="parallelized",
        output_dtypes=[dtype] * len(names),
        kwargs={"prepared": prepared},
    )
    if len(names) == 1:
        outputs = (outputs,)
    variables = {}
    for name, output in zip(names, outputs):
        product = SPECTRAL_PRODUCTS[name]
        output.attrs = {
            "units": product.units,
            "long_name": product.long_name,
            "citation": product.citation,
            "thermal_sensitive": int(product.thermal_sensitive),
            "wavelengths_um": json.dumps(prepared.used[name]),
        }
        if "crs" in spectra.attrs:
            output.attrs["crs"] = spectra.attrs["crs"]
        variables[name] = output
    return variables


@takes_options(SpectralSettings)
def spectral_parameters_dataarray(
    spectra: xr.DataArray,
    products: str | Sequence[str],
    *,
    wavelengths=None,
    spectral_dim: str | None = None,
    bad_bands=None,
    settings: SpectralSettings | None = None,
    **options,
) -> xr.Dataset:
    """Named spectral products of a DataArray of spectra, one variable each, by chunks:
    `lumaxlike.spectral_parameters` through ``xarray.apply_ufunc``: lazy, one dask task
    per chunk, when `spectra` is dask-backed (the spectral dim in one chunk); the maps do
    not depend on the chunks.

    Args:
        spectra: the quantity named by ``quantity`` (w, normalised reflectance,
            reflectance) with one spectral dim (``band``, ``wavelength`` or `spectral_dim`).
        products: names of `lumaxlike.SPECTRAL_PRODUCTS`.
        wavelengths: (bands,) band centres [um]; None: the spectral dim's ``wavelength``
            coordinate (nm or um by its ``units`` attr; without one, values above
            100 are read as nm).
        spectral_dim: the spectral dim's name, when not ``band`` or ``wavelength``.
        bad_bands: None, a (bands,) bool mask or band indices; the bands `spectra`'s
            attrs mark bad (`lumaxlike.open_product`) are bad too.
        settings: the options as one `lumaxlike.SpectralSettings` (None: the keywords').
        **options: the options of `lumaxlike.SpectralSettings` by name: ``quantity``
            (required: what ``spectra`` holds), ``tolerance`` [um], ``lucey``.

    Returns:
        Dataset with one variable per product on `spectra`'s other dims (chunked as
        `spectra`; attrs ``units``, ``long_name``, ``citation``, ``thermal_sensitive``,
        ``wavelengths_um``); its attrs record the quantity, constants, version and call.

    Raises:
        ValueError: as `lumaxlike.spectral_parameters`, naming the argument or product.
        TypeError: a keyword that is none of these.
    """
    from .. import __version__

    settings = SpectralSettings.merged(settings, options)
    refuse_unknown("spectral_parameters_dataarray", options)
    if not isinstance(spectra, xr.DataArray):
        raise ValueError(f"spectra must be an xarray.DataArray, got {type(spectra).__name__}")
    spec = spectral_dim_of(spectra, spectral_dim)
    bands = spectra.sizes[spec]
    _, axis, good = check_spectra(
        np.zeros((1, bands)),
        band_centres_um(spectra, spec, wavelengths, "spectra"),
        _bad_mask(spectra, bad_bands, bands),
    )
    prepared = prepare_products(products, axis, good, settings)
    variables = _product_maps(spectra, spec, prepared)
    names = prepared.names
    call = python_call(
        "spectral_parameters_dataarray",
        spectra,
        list(names),
        wavelengths=wavelengths,
        spectral_dim=spectral_dim,
        bad_bands=bad_bands,
        **settings.record(),
    )
    history = spectra.attrs.get("history")
    attrs = {
        "spectral_quantity": settings.quantity,
        "spectral_quantity_description": QUANTITIES[settings.quantity],
        "spectral_constants": json.dumps(
            {k: dataclasses.asdict(v) for k, v in prepared.constants.items()},  # type: ignore[call-overload]  # (LuceyConstants)
            sort_keys=True,
        ),
        "lumaxlike_version": __version__,
        "history": f"{history}\n{call}" if history else call,
    }
    return xr.Dataset(variables, attrs=attrs)
