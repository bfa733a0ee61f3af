"""The spectral parameters, declared once (`SPECTRAL_PARAMETERS`): their block task
(`parameters_block`, wrapping `lumaxlike._spectral.products.spectral_parameters_block` on
the cube's values as given, no geometry), the maps they write (`parameters_layout`: one
per-pixel map per product) and the record of a run (`parameters_record`)."""

from __future__ import annotations

import dataclasses

import numpy as np

from .._io.write.layout import FieldLayout
from .._spectral.products import QUANTITIES, SPECTRAL_PRODUCTS, PreparedProducts
from .._spectral.products import spectral_parameters_block as products_block
from .declaration import Operation

__all__ = [
    "SPECTRAL_PARAMETERS",
    "parameters_block",
    "parameters_layout",
    "parameters_record",
]


def parameters_layout(products) -> FieldLayout:
    """The maps of a run making ``products`` (names of `SPECTRAL_PRODUCTS`): one per-pixel
    map per product, named as it, the first at the output path itself, the others at
    ``OUT_<name>`` (netCDF/zarr: one ``(y, x)`` variable each)."""
    names = tuple(products)
    attrs = {
        name: {
            "long_name": SPECTRAL_PRODUCTS[name].long_name,
            "units": SPECTRAL_PRODUCTS[name].units,
            "references": SPECTRAL_PRODUCTS[name].citation,
        }
        for name in names
    }
    return FieldLayout(
        main=names[0],
        attrs=attrs,
        band_names={name: (name,) for name in names},
        integer={},
        dimensions=dict.fromkeys(names),
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


def parameters_record(quantity: str, prepared: PreparedProducts, bands: int) -> dict:
    """What a run made (`Provenance.spectral_settings`): the quantity the cube holds, the
    products, the band centres [um] each read, the constants and the tolerance [um]."""
    if quantity not in QUANTITIES:
        raise ValueError(f"quantity must be one of {list(QUANTITIES)}, got {quantity!r}")
    return {
        "quantity": quantity,
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
    summary="spectral parameters (band depths, band centres, FeO, OLINDEX3, ...) of a cube",
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
