"""`remove_thermal_dataarray`: `lumaxlike.remove_thermal` on a reflectance DataArray,
chunk by chunk; also ``DataArray.hapke.remove_thermal``. The block task and maps are the
`THERMAL` operation's (`lumaxlike._operations.thermal`)."""

from __future__ import annotations

import numpy as np
import xarray as xr

from .._declared_options import refuse_unknown, takes_options
from .._options import SolverOptions, solver_options
from .._provenance import python_call
from .._thermal.options import ThermalSettings
from .chunks import (
    apply_to_chunks,
    check_front_end,
    chunked_inputs,
    operation_chunk,
    operation_maps,
    provenance_of,
    result_dataset,
    solver_record,
    spectral_dim_of,
)
from .wavelengths import band_centres_um

__all__ = ["remove_thermal_dataarray"]


@takes_options(ThermalSettings)
def remove_thermal_dataarray(
    refl: xr.DataArray,
    geometry,
    params,
    solver: str | SolverOptions = "jax",
    *,
    units: str,
    solar_spectrum,
    solar_distance: float = 1.0,
    wavelengths=None,
    refl_sigma: float | None = None,
    spectral_dim: str | None = None,
    max_iter: int | None = None,
    tol: float | None = None,
    num_threads: int | None = None,
    settings: ThermalSettings | None = None,
    **options,
) -> xr.Dataset:
    """Remove thermal emission from a reflectance DataArray, chunk by chunk.

    Args:
        refl: I/F or r with one spectral dim, as for `lumaxlike.invert_dataarray` (so are
            ``geometry``, ``solver``, ``spectral_dim`` and ``num_threads``).
        params: the surface's `lumaxlike.HapkeParams` (one for all bands).
        units: ``"r"`` [1/sr] or ``"radf"`` (I/F); the corrected reflectance is returned
            in them.
        solar_spectrum: F_sun at 1 au per band [W m^-2 um^-1], shape ``(bands,)``, or a
            solar-spectrum file or `SolarSpectrum` (as `lumaxlike.remove_thermal`).
        solar_distance: the Sun's distance [au], one number.
        wavelengths: band centres [um], ``(bands,)``; None reads refl's ``wavelength``
            coordinate along its spectral dim (nm or um by its ``units`` attr;
            without one, values above 100 are read as nm).
        refl_sigma: 1-sigma of ``refl`` in ``units`` (one number); None estimates it
            (``method="prior"`` needs it).
        max_iter: Levenberg-Marquardt steps at most (None: the default; so for ``tol``).
        tol: step tolerance.
        settings: the thermal options as one `lumaxlike.ThermalSettings` (None: the
            defaults).
        **options: the options of `lumaxlike.ThermalSettings` by name (``method``,
            ``temperature`` (a number), ``window``, ``max_temperature_sigma``, ...);
            None: the default.

    Returns:
        Dataset with ``reflectance`` (corrected, in ``units``) and ``w`` on ``refl``'s dims,
        and ``temperature`` [K], ``temperature_sigma`` [K] and ``status`` (int8) on its
        pixel dims, with the provenance attributes of `invert_dataarray`.

    Raises:
        ValueError: naming the argument: units other than r or radf, no wavelengths, a
            bad option or solar spectrum.
        TypeError: a keyword that is no option.
    """
    from .._thermal.inputs import solar_per_band

    settings = ThermalSettings.merged(settings, options)
    refuse_unknown("remove_thermal_dataarray", options)
    solving = solver_options(solver, max_iter=max_iter, tol=tol, num_threads=num_threads)
    check_front_end(refl, units, refl_sigma)
    if units not in ("r", "radf"):
        raise ValueError(f"units must be 'r' or 'radf' for remove_thermal, got {units!r}")
    spec = spectral_dim_of(refl, spectral_dim)
    bands_um = band_centres_um(refl, spec, wavelengths, "refl")
    inputs = chunked_inputs(refl, geometry, spec)
    extra = {
        "wavelengths": bands_um,
        "solar_irradiance": solar_per_band(solar_spectrum, bands_um),
        "solar_distance": float(solar_distance),
        "units": "r",  # the chunk's reflectance is r; the maps converted below
        "settings": settings,
    }
    kwargs = {"params": params, "options": solving, "extra": extra}
    variables = _thermal_variables(inputs, spec, units, refl_sigma, kwargs)
    provenance = _provenance(inputs.refl, spec, geometry, kwargs, units, refl_sigma)
    return result_dataset(variables, inputs.refl, provenance)


def _provenance(refl, spec: str, geometry, kwargs, units: str, refl_sigma):
    """The provenance attributes of the result (the call recorded with its settings);
    kwargs: `_thermal_variables`'."""
    params, options = kwargs["params"], kwargs["options"]
    call = python_call(
        "remove_thermal_dataarray",
        refl,
        geometry,
        params,
        options.solver,
        units=units,
        **kwargs["extra"]["settings"].record(),
        refl_sigma=refl_sigma,
    )
    return provenance_of(
        refl,
        geometry,
        params=[params] * refl.sizes[spec],
        units=units,
        **solver_record(options, refl_sigma),
        dtype=np.float64,
        command=call,
    )


def _thermal_variables(inputs, spec: str, units: str, refl_sigma, kwargs) -> dict:
    """The `THERMAL` maps of every chunk (`apply_to_chunks` of its block task), the
    corrected reflectance in `units`; kwargs: the task's ``params``, ``options``, ``extra``."""
    from .._operations.thermal import THERMAL

    maps = operation_maps(THERMAL.layout(units), THERMAL.fields, spec, np.float64)
    variables = apply_to_chunks(
        operation_chunk,
        inputs,
        maps,
        units=units,
        refl_sigma=refl_sigma,
        refl_dtype=np.float64,
        kwargs={"task": THERMAL.block(), "maps": maps, **kwargs},
    )
    if units == "radf":
        corrected = variables["reflectance"]
        variables["reflectance"] = (corrected * np.pi).assign_attrs(corrected.attrs)
    return variables
