"""The spectral parameters, declared once (`SPECTRAL_PARAMETERS`): their block task
(`parameters_block`, wrapping `lumaxlike._spectral.products.spectral_parameters_block` on
the cube's values as given, no geometry), the maps they write (`parameters_layout`: one
per-pixel map per product) and the record of a run (`parameters_record`).

The same products in the same pass as another operation (`with_parameters`: ``invert``'s
w, ``normalize``'s reflectance): that operation's declaration with the block task
`then_parameters` (its own task, then `parameters_block` on one of its maps, as a
`SamePass` says) and its layout extended by the products' maps (`extended_layout`)."""

from __future__ import annotations

import dataclasses
import importlib

import numpy as np

from .._io.write.layout import FieldLayout
from .._spectral.options import SpectralSettings
from .._spectral.products import SPECTRAL_PRODUCTS, PreparedProducts
from .._spectral.products import spectral_parameters_block as products_block
from .declaration import Operation

__all__ = [
    "SPECTRAL_PARAMETERS",
    "SamePass",
    "extended_layout",
    "parameters_block",
    "parameters_layout",
    "parameters_record",
    "then_parameters",
    "with_parameters",
]


def _product_maps(products) -> dict:
    """The `FieldLayout` entries of one per-pixel map per product (names of
    `SPECTRAL_PRODUCTS`): ``attrs``, ``band_names`` and ``dimensions``."""
    names = tuple(products)
    return {
        "attrs": {
            name: {
                "long_name": SPECTRAL_PRODUCTS[name].long_name,
                "units": SPECTRAL_PRODUCTS[name].units,
                "references": SPECTRAL_PRODUCTS[name].citation,
            }
            for name in names
        },
        "band_names": {name: (name,) for name in names},
        "dimensions": dict.fromkeys(names),
    }


def parameters_layout(products) -> FieldLayout:
    """The maps of a run making ``products`` (names of `SPECTRAL_PRODUCTS`): one per-pixel
    map per product, named as it, the first at the output path itself, the others at
    ``OUT_<name>`` (netCDF/zarr: one ``(y, x)`` variable each)."""
    names = tuple(products)
    return FieldLayout(main=names[0], integer={}, **_product_maps(names))


def extended_layout(layout: FieldLayout, products) -> FieldLayout:
    """``layout`` (an operation's maps) and one per-pixel map per product after them, at
    ``OUT_<name>`` (netCDF/zarr: one ``(y, x)`` variable each), as `parameters_layout`'s."""
    maps = _product_maps(products)
    clash = sorted(set(maps["attrs"]) & set(layout.attrs))
    if clash:
        raise ValueError(f"products {clash} share a name with the operation's maps")
    return dataclasses.replace(
        layout,
        attrs={**layout.attrs, **maps["attrs"]},
        band_names={**layout.band_names, **maps["band_names"]},
        dimensions={**layout.dimensions, **maps["dimensions"]},
    )


def parameters_block(values, params, options: PreparedProducts) -> dict[str, np.ndarray]:
    """The products of one block (the signature `values_block_reader` gives a block's
    task): ``values`` ``(rows, cols, bands)`` as the cube holds them (bad bands NaN),
    ``options`` the products checked against the cube's bands (`prepare_products`);
    returns ``{name: (rows, cols, 1)}`` in the cube's floating type. ``params`` is unused
    (no photometric model)."""
    del params
    maps = products_block(np.asarray(values), options)
    return {name: value[..., None] for name, value in maps.items()}


def parameters_record(settings: SpectralSettings, prepared: PreparedProducts, bands: int) -> dict:
    """What a run made (`Provenance.spectral_settings`): the quantity the cube holds, the
    products, the band centres [um] each read, the constants and the tolerance [um]."""
    return {
        "quantity": settings.quantity,
        "products": list(prepared.names),
        "wavelengths": {name: list(used) for name, used in prepared.used.items()},
        "constants": {
            name: dataclasses.asdict(value)  # type: ignore[call-overload]  # (LuceyConstants)
            for name, value in prepared.constants.items()
        },
        "tolerance": prepared.tolerance,
        "bands": int(bands),
    }


SPECTRAL_PARAMETERS = Operation(
    name="spectral_parameters",
    block_task="lumaxlike._operations.spectral:parameters_block",
    fields=tuple(SPECTRAL_PRODUCTS),
    layout=parameters_layout,
    progress="computing",
    verb="computed",
    bad_bands="nan",
    geometry=False,
    command="parameters",
)
"""`lumaxlike parameters` and `spectral_parameters_file`: one map per product, of the
cube's values as given (w, I/F, ...; no geometry)."""


@dataclasses.dataclass(frozen=True)
class SamePass:
    """What `then_parameters` adds to an operation's block task (picklable, for dask).

    Attributes:
        task: the operation's own block task, ``"module:function"`` (`Operation.block_task`).
        source: the map of its result the products are computed from (``"w"``,
            ``"reflectance"``): ``pixels + (bands,)``.
        products: the products checked against the cube's bands (`prepare_products`).
        dtype: the floating type that map is written in (the products are computed from
            it as written, and returned in it).
    """

    task: str
    source: str
    products: PreparedProducts
    dtype: np.dtype


def then_parameters(*args, same_pass: SamePass, **kwargs) -> dict[str, np.ndarray]:
    """An operation's block task (``same_pass.task`` on ``*args, **kwargs``), then the
    spectral products of its ``same_pass.source`` map, as written: its maps plus
    ``{name: (rows, cols, 1)}`` per product (`parameters_block`)."""
    module, function = same_pass.task.split(":")
    maps = getattr(importlib.import_module(module), function)(*args, **kwargs)
    spectra = np.asarray(maps[same_pass.source]).astype(same_pass.dtype, copy=False)
    return {**maps, **parameters_block(spectra, None, same_pass.products)}


def with_parameters(operation: Operation, products) -> Operation:
    """``operation`` (a declaration whose block task takes ``**extra`` keywords) with the
    spectral ``products`` (names) computed in the same pass: its block task
    `then_parameters` (the run's plan gives it ``same_pass=SamePass(...)``), its maps
    followed by one per product, its layout `extended_layout`."""
    names = tuple(products)
    layout = operation.layout
    return dataclasses.replace(
        operation,
        block_task="lumaxlike._operations.spectral:then_parameters",
        fields=(*operation.fields, *names),
        layout=lambda *args, **kwargs: extended_layout(layout(*args, **kwargs), names),
    )
