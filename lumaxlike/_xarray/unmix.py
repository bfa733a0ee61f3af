"""`unmix_dataarray`: the mass fractions of an intimate mixture per pixel
(`lumaxlike.unmix`) on a reflectance DataArray, chunk by chunk; also
``DataArray.hapke.unmix``."""

from __future__ import annotations

import dataclasses
from typing import Any, NamedTuple

import numpy as np
import xarray as xr

from .._declared_options import refuse_unknown, takes_options
from .._io.missions.product_dataarray import bad_bands_of, product_geometry_of, product_record_of
from .._options import SolverOptions, solver_options
from .._provenance import python_call
from .._unmix.options import UnmixSettings
from .chunks import (
    ChunkedInputs,
    apply_to_chunks,
    check_front_end,
    chunked_inputs,
    operation_chunk,
    operation_maps,
    provenance_of,
    result_dataset,
    spectral_dim_of,
)
from .wavelengths import coordinate_centres_um

__all__ = ["unmix_dataarray"]


def _matched_wavelengths_um(refl: xr.DataArray, spec: str, endmembers) -> tuple | None:
    """refl's band centres [um] (`wavelengths.coordinate_centres_um`; None without a
    coordinate of them), checked against the endmembers' (`band_order`: matched in any
    order, or refused)."""
    from .._unmix.band_matching import band_order

    centres = coordinate_centres_um(refl, spec, "refl")
    if centres is None:
        return None
    band_order(centres, endmembers, "refl's wavelength coordinate")
    return tuple(centres)


def _without_bad_bands(refl: xr.DataArray, spec: str, endmembers):
    """refl without the bands its attrs mark bad (`lumaxlike.open_product`'s
    ``lumaxlike_bad_bands``), and the endmembers cut to the rest where they are on all of
    refl's bands (matched by wavelength where both give them): unmixing's maps are per
    endmember, so bad bands are left out of the bands unmixed, as `unmix_file` does."""
    from .._unmix.band_matching import endmembers_on_bands

    bad = bad_bands_of(refl)
    if bad is None:
        return refl, endmembers
    bands = refl.sizes[spec]
    good = np.setdiff1d(np.arange(bands), bad)
    if good.size == 0:
        raise ValueError("every band of refl is marked bad (lumaxlike_bad_bands)")
    if endmembers.n_bands == bands:
        wavelengths = _matched_wavelengths_um(refl, spec, endmembers)
        endmembers = endmembers_on_bands(endmembers, good, bands, wavelengths, "refl")
    return refl.isel({spec: good}), endmembers


class _Setup(NamedTuple):
    """`unmix_dataarray`'s checked call: the chunked inputs (bad bands left out), the
    geometry, the endmembers on the bands unmixed, `unmix_block`'s options, the product
    record."""

    inputs: ChunkedInputs
    geometry: Any
    spec: str
    endmembers: Any
    options: Any
    product: dict | None


def _setup(call: dict) -> _Setup:
    """`unmix_dataarray`'s arguments (``call``) checked, in this order (ValueError naming
    one)."""
    from .._operations.unmix import UnmixOptions
    from .._unmix.unmix import default_chunk_pixels as unmix_chunk_pixels

    solving = call["settings"].solver_keywords()
    solver = solver_options(call["solver"], **solving, num_threads=call["num_threads"])
    refl, route, sum_to_one = call["refl"], call["route"], call["sum_to_one"]
    check_front_end(refl, call["units"], call["refl_sigma"])
    geometry = product_geometry_of(refl, call["geometry"])  # normalised product: flat geometry
    endmembers = call["endmembers"]
    _check_arguments(endmembers, call)
    free, starts = _optical(call["free"], call["starts"], endmembers, route, sum_to_one)
    spec = spectral_dim_of(refl, call["spectral_dim"])
    product = product_record_of(refl, call["geometry"] is None)
    left_out = bad_bands_of(refl) is not None
    refl, endmembers = _without_bad_bands(refl, spec, endmembers)
    if product is not None and left_out:
        product["bad_bands_choice"] = "left out of the bands solved"
    if refl.sizes[spec] != endmembers.n_bands:
        raise ValueError(
            f"refl has {refl.sizes[spec]} bands along {spec!r}, the endmembers {endmembers.n_bands}"
        )
    wavelengths = _matched_wavelengths_um(refl, spec, endmembers)
    inputs = chunked_inputs(refl, geometry, spec)
    pixels = unmix_chunk_pixels(inputs.refl.sizes[spec], endmembers.n_endmembers, solver.solver)
    task = call["settings"].for_blocks(solver, free, starts)
    chunk = min(inputs.largest, pixels)
    options = UnmixOptions(solver.solver, task, chunk, solver.num_threads, wavelengths)
    return _Setup(inputs, geometry, spec, endmembers, options, product)


def _check_arguments(endmembers, call: dict) -> None:
    """The endmembers, params and noise checked (ValueError naming one)."""
    from .._params import HapkeParams
    from .._unmix.endmembers import Endmembers

    params = call["params"]
    if not isinstance(endmembers, Endmembers):
        raise ValueError(
            f"endmembers must be a lumaxlike.Endmembers, got {type(endmembers).__name__}"
        )
    if not isinstance(params, HapkeParams):
        raise ValueError(f"params must be one lumaxlike.HapkeParams, got {type(params).__name__}")
    if call["refl_sigma"] is not None and call["units"] == "reff":
        raise ValueError(
            "refl_sigma with units 'reff' is not supported by unmix (its uncertainty in r varies "
            "with cos i per pixel); give refl as r or radf"
        )


def _optical(free, starts, endmembers, route, sum_to_one) -> tuple:
    """The free optical parameters and starts checked: (free as a tuple, starts)."""
    from .._unmix.optical import check_free
    from .._unmix.optical_starts import check_starts

    if not free:
        return (), None
    check_free(free, endmembers, route, sum_to_one)
    free = (free,) if isinstance(free, str) else tuple(free)
    return free, check_starts(starts)


def _provenance(setup: _Setup, call: dict):
    """The provenance record of `unmix_dataarray`'s result (with unmixing's settings)."""
    from .._operations.unmix import unmix_record
    from .._unmix.unmix import DEFAULT_TOLERANCE

    refl, options, endmembers = setup.inputs.refl, setup.options, setup.endmembers
    task = options.settings
    free, starts = task.free, task.starts
    provenance = provenance_of(
        refl,
        setup.geometry,
        params=[call["params"]] * refl.sizes[setup.spec],
        units=call["units"],
        solver=options.solver,
        tol=DEFAULT_TOLERANCE if task.tol is None else task.tol,
        max_iter=task.max_iter,
        refl_sigma=call["refl_sigma"],
        dtype=np.float64,
        product=setup.product,
        command=python_call(
            "unmix_dataarray",
            refl,
            setup.geometry,
            endmembers.names,
            call["params"],
            options.solver,
            units=call["units"],
            route=task.route,
            sum_to_one=call["sum_to_one"],
            spectral_dim=call["spectral_dim"],
            refl_sigma=call["refl_sigma"],
            max_iter=task.max_iter,
            tol=task.tol,
            num_threads=options.num_threads,
            **({"free": free, "starts": starts} if free else {}),
        ),
    )
    record = unmix_record(endmembers, task.route, call["sum_to_one"], free=free)
    return dataclasses.replace(provenance, unmix_settings=record)


@takes_options(UnmixSettings)
def unmix_dataarray(
    refl: xr.DataArray,
    geometry,
    endmembers,
    params,
    solver: str | SolverOptions = "jax",
    *,
    units: str,
    spectral_dim: str | None = None,
    num_threads: int | None = None,
    settings: UnmixSettings | None = None,
    **keywords,
) -> xr.Dataset:
    """Mass fractions of an intimate mixture per pixel (`lumaxlike.unmix`), chunk by chunk.

    Args:
        refl: as for `invert_dataarray` (so are ``geometry``, ``units``,
            ``spectral_dim`` and ``num_threads``); bands its attrs mark bad (from
            `lumaxlike.open_product`) are left out of the bands unmixed, and recorded.
        endmembers: `lumaxlike.Endmembers` on ``refl``'s bands (all, or those not
            marked bad); where both give band centres (``Endmembers.wavelengths``,
            refl's ``wavelength`` coordinate along its spectral dim: nm or um by its
            ``units`` attr; without one, values above 100 are read as nm), bands are
            matched by wavelength in any order, and other centres are refused.
        params: one `lumaxlike.HapkeParams` (the mixture's).
        solver: a `lumaxlike.SolverOptions` (``max_iter``, ``tol``, ``num_threads``: its
            fields) or, as for `lumaxlike.unmix`, its name.
        settings: the unmixing's options as one `lumaxlike.UnmixSettings` (None: the
            defaults).
        **keywords: the options of `lumaxlike.UnmixSettings` by name, as
            `lumaxlike.unmix` takes them (``refl_sigma``: the standard uncertainty of
            ``refl`` in ``units``, "r" or "radf", one number; ``free``: with endmembers
            from `Endmembers.from_optical_constants`).

    Returns:
        Dataset with ``fractions`` (mass fractions [-]) and ``sigma`` (their 1-sigma
        uncertainty [-]), each with ``refl``'s pixel dims and a last dim ``endmember``
        (coordinate: the endmembers' names), and ``status`` (int8 `lumaxlike.Status`),
        ``iterations`` (int32) and ``residual`` (the route's residual norm), each with
        ``refl``'s pixel dims; lazy (dask) when ``refl`` is, chunked as its pixels;
        with ``sum_to_one`` false also ``remainder`` (the cross-section fraction of the
        unmodelled dark remainder, `lumaxlike.UnmixResult.remainder`); with ``free``
        also ``grain_size`` [um], ``grain_size_sigma`` and ``grain_size_at_bound``
        (int8, 1 at a bound) per endmember, and ``npfe`` [wt %], ``npfe_sigma`` and
        ``npfe_at_bound``.
        The attrs record how it was made, as for `invert_dataarray` (with ``free``,
        the optical endmembers' settings too).

    Raises:
        ValueError: bad argument (names it), misaligned geometry.
        TypeError: a keyword that is no option.
    """
    settings = UnmixSettings.merged(settings, keywords)
    refuse_unknown("unmix_dataarray", keywords)
    call = {**locals(), **vars(settings)}
    setup = _setup(call)
    from .._operations.unmix import UNMIX, unmix_fields, unmix_layout

    endmembers = setup.endmembers
    fields = unmix_fields(settings.sum_to_one, setup.options.settings.free)
    maps = operation_maps(unmix_layout(endmembers.names), fields, setup.spec, np.float64)
    variables = apply_to_chunks(
        operation_chunk,
        setup.inputs,
        maps,
        units=units,
        refl_sigma=settings.refl_sigma,
        refl_dtype=np.float64,
        sizes={"endmember": endmembers.n_endmembers},
        kwargs={
            "task": UNMIX.block(),
            "maps": maps,
            "params": params,
            "options": setup.options,
            "extra": {"endmembers": endmembers},
        },
    )
    dataset = result_dataset(variables, setup.inputs.refl, _provenance(setup, call))
    return dataset.assign_coords(endmember=("endmember", list(endmembers.names)))
