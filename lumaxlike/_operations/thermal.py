"""The thermal-emission removal, declared once (`THERMAL`): its block task
(`thermal_block`, with its options `ThermalSettings`, declared in
`lumaxlike._thermal.options`, on NumPy arrays in lumaxlike's layout, reflectance
``(..., bands)`` in r [1/sr], geometry ``(..., 3)``) and the maps it returns
(`THERMAL_FIELDS`, `thermal_layout`): per pixel the temperature, its 1-sigma and the
status; per band the corrected reflectance (in the cube's units) and w."""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from .._io.write.layout import FieldLayout
from .._options import SolverOptions
from .._status import Status
from .._thermal.api import remove_thermal
from .._thermal.options import ThermalSettings
from .blocks import numba_threads
from .declaration import Operation

__all__ = ["THERMAL", "THERMAL_FIELDS", "ThermalSettings", "thermal_block", "thermal_layout"]

THERMAL_FIELDS = ("reflectance", "w", "temperature", "temperature_sigma", "status")
"""Maps a thermal removal writes: the corrected cube (at ``OUT`` itself), w per band,
and per pixel T [K], its 1-sigma [K] and the status."""
PER_PIXEL = ("temperature", "temperature_sigma", "status")
_UNITS = {"r": ("bidirectional reflectance r", "sr-1"), "radf": ("radiance factor I/F", "1")}


def thermal_block(
    refl,
    to_sun,
    to_sensor,
    normal,
    params,
    options: SolverOptions,
    refl_sigma=None,
    *,
    wavelengths,
    solar_irradiance,
    solar_distance,
    units: str,
    settings: ThermalSettings,
) -> dict[str, np.ndarray]:
    """`lumaxlike.remove_thermal` on a block (the signature `cube_block_reader` gives a
    block's task).

    Args:
        refl: r [1/sr], shape ``pixels + (bands,)``.
        to_sun, to_sensor, normal: direction vectors, shape ``pixels + (3,)``.
        params: the `HapkeParams` of the surface (one for all bands).
        options: solver and its settings (max_iter, tol, num_threads).
        refl_sigma: 1-sigma of r [1/sr], a scalar or per band; None: estimated per pixel.
        wavelengths: band centres [um], ``(bands,)``.
        solar_irradiance: F_sun at 1 au per band [W m^-2 um^-1], ``(bands,)``.
        solar_distance: the Sun's distance [au].
        units: ``"r"`` or ``"radf"``: the corrected reflectance's units.
        settings: `ThermalSettings`.
    Returns:
        ``{field: array}`` for :data:`THERMAL_FIELDS`: per band ``pixels + (bands,)``,
        per pixel ``pixels + (1,)``.
    """
    kwargs: dict[str, Any] = {
        k: v for k, v in (("max_iter", options.max_iter), ("tol", options.tol)) if v
    }
    if refl_sigma is not None and np.ndim(refl_sigma) > 1:
        refl_sigma = np.asarray(refl_sigma).reshape(-1, np.shape(refl)[-1])[0]
    with numba_threads(options.num_threads if options.solver == "numba" else None):
        result = remove_thermal(
            refl,
            to_sun,
            to_sensor,
            normal,
            np.asarray(wavelengths),
            params,
            solar_spectrum=np.asarray(solar_irradiance, dtype=np.float64),
            solar_distance=solar_distance,
            refl_sigma=refl_sigma,
            solver=options.solver,
            settings=settings,
            **kwargs,
        )
    factor = math.pi if units == "radf" else 1.0
    dtype = np.asarray(refl).dtype
    return {
        "reflectance": (result.reflectance * factor).astype(dtype, copy=False),
        "w": result.w.astype(dtype, copy=False),
        "temperature": result.temperature[..., None].astype(dtype, copy=False),
        "temperature_sigma": result.temperature_sigma[..., None].astype(dtype, copy=False),
        "status": result.status[..., None],
    }


def thermal_layout(units: str) -> FieldLayout:
    """The maps a thermal removal writes for a cube in ``units`` (``"r"`` or ``"radf"``)."""
    quantity, unit = _UNITS[units]
    return FieldLayout(
        main="reflectance",
        attrs={
            "reflectance": {"long_name": f"thermally corrected {quantity}", "units": unit},
            "w": {"long_name": "thermally corrected single-scattering albedo", "units": "1"},
            "temperature": {
                "long_name": "surface temperature (NOT_CONSTRAINED: 95 % upper limit)",
                "units": "K",
            },
            "temperature_sigma": {"long_name": "1-sigma of the temperature", "units": "K"},
            "status": {
                "long_name": "temperature fit status (lumaxlike.Status)",
                **Status.flag_attrs(),
            },
        },
        band_names={name: (name,) for name in PER_PIXEL},
        integer={"status": np.int8},
        dimensions=dict.fromkeys(PER_PIXEL),
    )


THERMAL = Operation(
    name="thermal",
    block_task="lumaxlike._operations.thermal:thermal_block",
    fields=THERMAL_FIELDS,
    layout=thermal_layout,
    progress="removing thermal emission",
    verb="corrected",
    bad_bands="exclude",
    file_name="remove_thermal_file",
)
