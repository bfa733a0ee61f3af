"""File-to-file thermal-emission removal, streamed by blocks of rows like `invert_file`:
the file front end of the `THERMAL` operation. Outputs: ``OUT`` the thermally corrected
cube (r, or I/F for ``radf`` and ``radiance``), ``OUT_w`` the corrected w, and per pixel
``OUT_temperature``, ``OUT_temperature_sigma`` [K] and ``OUT_status``.
"""

from __future__ import annotations

import numpy as np

from .._declared_options import refuse_unknown, renamed_keyword, takes_options
from .._io.read.radiance import band_irradiance, load_solar_spectrum
from .._io.read.spectral_metadata import to_micrometers
from .._operations.thermal import THERMAL, ThermalSettings
from .._options import (
    ProductOptions,
    RunOptions,
    SolverOptions,
    front_end_options,
    run_and_product_but,
)
from .._run.progress import InversionSummary
from .cube_run import BlockPlan, CubeInputs, run_on_cube
from .wavelengths import cube_wavelengths_um

__all__ = ["remove_thermal_file"]


# the run's and the product's options still taken as keywords (deprecated)
_RUN_AND_PRODUCT = run_and_product_but("correction_undone", "reff_incidence", "thermal_bands")


@takes_options(ThermalSettings)
def remove_thermal_file(
    cube_path,
    out_path,
    *,
    geometry=None,
    dtm=None,
    surface="auto",
    params,
    units,
    solver: str | SolverOptions,
    refl_sigma=None,
    max_iter=None,
    tol=None,
    command=None,
    run: RunOptions | None = None,
    product: ProductOptions | None = None,
    settings: ThermalSettings | None = None,
    sigma=None,
    **keywords,
) -> InversionSummary:
    """Remove the thermal emission of a cube file, block by block (`lumaxlike.remove_thermal`).

    Each block is read, converted to r, corrected and written to temporary files that
    replace the outputs only when all are written, as `lumaxlike.invert_file` does (same
    inputs, options, atomic writes, resume and record). The Sun's spectrum and distance
    are the product's (``product.solar_spectrum``, ``product.solar_distance`` or the
    label's SOLAR_DISTANCE, as ``units="radiance"`` reads them). Bad bands (``bbl`` = 0)
    are left out of every output.

    Args:
        cube_path: as in `lumaxlike.invert_file` (so are ``geometry``, ``dtm``,
            ``surface``, ``solver``, ``command``, ``max_iter`` and ``tol`` (the
            solvers'), the run's options ``run`` and the product's ``product``).
        out_path: ``OUT``, the corrected cube in r (``units="r"``) or I/F, and ``OUT_w``,
            ``OUT_temperature(_sigma)``, ``OUT_status`` beside it (netCDF/zarr: variables).
        params: the `lumaxlike.HapkeParams` of the surface.
        units: ``"r"``, ``"radf"`` or ``"radiance"`` (REFF is refused: its incidence
            normalisation would hide the geometry the emissivity needs).
        refl_sigma: standard uncertainty of the cube's values in ``units``; None: estimated
            per pixel from the fit's residual (``method="prior"`` needs it).
        sigma: the deprecated name of ``refl_sigma`` (a DeprecationWarning).
        settings: the thermal options as one `lumaxlike.ThermalSettings` (None: the
            defaults).
        **keywords: the options of `lumaxlike.ThermalSettings` by name (``method``,
            ``temperature`` (a number), ``window``, ``max_temperature_sigma``, ...).
            The fields of ``run`` (``chunk_rows``, ``overwrite``, ``progress``,
            ``workers``, ``scheduler``, ``resume``) and ``product`` (``solar_spectrum``,
            ``solar_distance``, ``wavelengths_from``) are still taken as keywords, with a
            DeprecationWarning.

    Returns:
        `InversionSummary` (``verb`` "corrected").

    Raises:
        ValueError: as `invert_file`, and naming the argument: units REFF, a cube without
            wavelengths, no solar distance for reflectance units, bad thermal settings.
        TypeError: a keyword that is none of these.
    """
    settings = ThermalSettings.merged(settings, keywords)
    refuse_unknown("remove_thermal_file", keywords, _RUN_AND_PRODUCT)
    keywords.update(max_iter=max_iter, tol=tol)
    sigma = renamed_keyword("remove_thermal_file", "sigma", sigma, "refl_sigma", refl_sigma)
    run, product, options = front_end_options(run, product, solver, keywords, "remove_thermal_file")
    if units == "reff":
        raise ValueError('units="reff" is not supported by the thermal removal; give r or radf')
    if settings.method == "prior" and sigma is None:
        raise ValueError('method="prior" needs refl_sigma: it weighs the data against the prior')
    inputs = CubeInputs(cube_path, out_path, units, geometry, dtm, surface, sigma, product)
    out_units = "r" if units == "r" else "radf"
    return run_on_cube(
        THERMAL,
        inputs,
        run=run,
        solver=options,
        plan=lambda setup: _plan(setup, params, out_units, settings, product),
        fields=THERMAL.written(),
        layout=THERMAL.layout(out_units),
        call=dict(
            geometry=geometry,
            dtm=dtm,
            params=params,
            units=units,
            refl_sigma=sigma,
            **settings.record(),
        ),
        command=command,
    )


def _sun(setup, product: ProductOptions) -> tuple[np.ndarray, float]:
    """F_sun per band at 1 au [W m^-2 um^-1] and the Sun's distance [au]: those the
    radiance conversion used, else from the product's options."""
    record = setup.opened.record
    if "band_irradiance_w_m2_um" in record:
        return np.asarray(record["band_irradiance_w_m2_um"]), float(record["solar_distance_au"])
    if product.solar_distance is None:
        raise ValueError(
            "solar_distance: the thermal removal of a reflectance cube needs the Sun's "
            "distance [au] (product.solar_distance, --solar-distance)"
        )
    info = setup.info
    wavelengths = cube_wavelengths_um(info)
    fwhm = to_micrometers(info.fwhm, info.wavelength_units)
    spectrum = load_solar_spectrum(product.solar_spectrum)
    return band_irradiance(spectrum, wavelengths, fwhm), float(product.solar_distance)


def _plan(setup, params, units, settings, product) -> BlockPlan:
    """The task's spectral inputs (wavelengths, F_sun, distance) and settings."""
    params = setup.made(params)
    wavelengths = cube_wavelengths_um(setup.info)
    irradiance, distance = _sun(setup, product)
    extra = {
        "wavelengths": wavelengths,
        "solar_irradiance": irradiance,
        "solar_distance": distance,
        "units": units,
        "settings": settings,
    }
    return BlockPlan(
        params=params,
        recorded_params=[params] * setup.info.bands,
        extra=lambda rows: extra,
        journal={**settings.record(), "solar_distance": distance},
    )
