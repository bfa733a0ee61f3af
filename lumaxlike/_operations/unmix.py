"""The unmixing, declared once (`UNMIX`): its block task (`unmix_block`, with its
`UnmixOptions`, on NumPy arrays in lumaxlike's layout, reflectance ``(..., bands)`` in r
[1/sr], geometry ``(..., 3)``), the maps it returns (`unmix_fields`, `unmix_layout`) and the
record of an unmixing (`unmix_record`).

With ``free`` grain sizes or npFe0 (`lumaxlike.unmix`'s ``free``, endmembers from optical
constants) the maps :data:`OPTICAL_FIELDS` come too: ``grain_size`` [um] per endmember
(NaN where an endmember is absent and its grain size free), ``npfe`` [wt %], their 1-sigma
``*_sigma`` and ``*_at_bound`` flags (1 where the value stopped at a bound)."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .._io.write.layout import FieldLayout
from .._params import HapkeParams
from .._status import Status
from .._unmix.endmembers import Endmembers
from .._unmix.options import UnmixSettings
from .._unmix.unmix import unmix
from .blocks import numba_threads
from .declaration import Operation

__all__ = [
    "UNMIX",
    "OPTICAL_FIELDS",
    "UNMIX_FIELDS",
    "UnmixOptions",
    "unmix_block",
    "unmix_fields",
    "unmix_layout",
    "optical_record",
    "unmix_record",
]

UNMIX_FIELDS = ("fractions", "sigma", "status", "iterations", "residual")
OPTICAL_FIELDS = (
    "grain_size",
    "grain_size_sigma",
    "grain_size_at_bound",
    "npfe",
    "npfe_sigma",
    "npfe_at_bound",
)
_PER_ENDMEMBER = ("fractions", "sigma", "grain_size", "grain_size_sigma", "grain_size_at_bound")
_ATTRS = {
    "fractions": {"long_name": "mass fraction of each endmember", "units": "1"},
    "sigma": {"long_name": "standard uncertainty of the mass fraction", "units": "1"},
    "status": {"long_name": "unmixing status (lumaxlike.Status)", **Status.flag_attrs()},
    "iterations": {"long_name": "solver iterations", "units": "1"},
    "residual": {
        "long_name": "residual norm of the route's objective (r [1/sr] one-step, w two-step; "
        "divided by sigma when given)",
        "units": "1",
    },
    "remainder": {
        "long_name": "cross-section fraction of the unmodelled, perfectly absorbing "
        "remainder (fractions not summing to one)",
        "units": "1",
    },
    "grain_size": {"long_name": "grain size of each endmember (fitted or as given)", "units": "um"},
    "grain_size_sigma": {"long_name": "standard uncertainty of the grain size", "units": "um"},
    "grain_size_at_bound": {"long_name": "1 where the grain size stopped at a bound", "units": "1"},
    "npfe": {"long_name": "nanophase iron (npFe0) mass fraction of the hosts", "units": "percent"},
    "npfe_sigma": {
        "long_name": "standard uncertainty of the npFe0 mass fraction",
        "units": "percent",
    },
    "npfe_at_bound": {"long_name": "1 where the npFe0 fraction stopped at a bound", "units": "1"},
}


def unmix_fields(sum_to_one: bool = True, free=()) -> tuple[str, ...]:
    """The maps `unmix_file` writes: :data:`UNMIX_FIELDS`, ``remainder`` (the
    unmodelled dark remainder, `UnmixResult.remainder`) when the fractions need not sum
    to one, and :data:`OPTICAL_FIELDS` when ``free`` names parameters."""
    fields = UNMIX_FIELDS if sum_to_one else (*UNMIX_FIELDS, "remainder")
    return (*fields, *OPTICAL_FIELDS) if free else fields


def unmix_layout(names, free=()) -> FieldLayout:
    """The maps `unmix_file` writes for endmembers ``names`` (and ``free`` parameters)."""
    del free  # the layout of every map is the same; which are written is `unmix_fields`'
    one_band = ("status", "iterations", "residual", "remainder", "npfe", "npfe_sigma")
    per_pixel = {name: (name,) for name in (*one_band, "npfe_at_bound")}
    return FieldLayout(
        main="fractions",
        attrs=_ATTRS,
        band_names={**dict.fromkeys(_PER_ENDMEMBER, tuple(names)), **per_pixel},
        integer={
            "status": np.int8,
            "iterations": np.int32,
            "grain_size_at_bound": np.int8,
            "npfe_at_bound": np.int8,
        },
        dimensions={**dict.fromkeys(_PER_ENDMEMBER, "endmember"), **dict.fromkeys(per_pixel)},
    )


@dataclass(frozen=True)
class UnmixOptions:
    """How `unmix_block` runs `lumaxlike.unmix` (see its arguments): its ``solver``, its
    options (``settings``: the run's max_iter and tol, no refl_sigma, which comes per
    block, in r), ``chunk_size``, ``num_threads`` and the data's band centres [um]
    (``wavelengths``, matched to the endmembers')."""

    solver: str
    settings: UnmixSettings = field(default_factory=UnmixSettings)
    chunk_size: int | None = None
    num_threads: int | None = None
    wavelengths: tuple | None = None


def unmix_block(
    refl,
    to_sun,
    to_sensor,
    normal,
    params: HapkeParams,
    options: UnmixOptions,
    refl_sigma=None,
    *,
    endmembers: Endmembers,
) -> dict[str, np.ndarray]:
    """`lumaxlike.unmix` on a block (the signature `cube_block_reader` gives a block's task);
    returns the maps of :data:`UNMIX_FIELDS` (and :data:`OPTICAL_FIELDS` with free
    parameters), each ``pixels + (bands,)`` with one band per endmember (fractions, sigma,
    grain sizes) or one band."""
    with numba_threads(options.num_threads):
        result = unmix(
            refl,
            to_sun,
            to_sensor,
            normal,
            endmembers,
            params,
            options.solver,
            refl_sigma=refl_sigma,
            chunk_size=options.chunk_size,
            wavelengths=options.wavelengths,
            settings=options.settings,
        )
    with np.errstate(invalid="ignore"):  # NaN covariance where unsolved
        sigma = np.sqrt(np.diagonal(result.covariance, axis1=-2, axis2=-1))
    fields = {
        "fractions": result.fractions,
        "sigma": sigma,
        "status": result.status[..., None],
        "iterations": result.iterations[..., None],
        "residual": result.residual_norm[..., None],
        "remainder": result.remainder[..., None],
    }
    return {**fields, **_optical_fields(result)} if options.settings.free else fields


def _optical_fields(result) -> dict[str, np.ndarray]:
    """The maps of :data:`OPTICAL_FIELDS` from an `UnmixResult` with free parameters:
    grain sizes [um] and npFe0 [wt %], their 1-sigma, their at-bound flags (int8)."""
    p = len(result.names)
    with np.errstate(invalid="ignore"):  # NaN covariance where unsolved
        deviation = np.sqrt(np.diagonal(result.parameter_covariance, axis1=-2, axis2=-1))
    percent = 100.0
    return {
        "grain_size": result.grain_size,
        "grain_size_sigma": deviation[..., p : 2 * p],
        "grain_size_at_bound": result.grain_size_at_bound.astype(np.int8),
        "npfe": percent * result.npfe_fraction[..., None],
        "npfe_sigma": percent * deviation[..., 2 * p : 2 * p + 1],
        "npfe_at_bound": result.npfe_at_bound[..., None].astype(np.int8),
    }


def unmix_record(
    endmembers: Endmembers, route: str, sum_to_one: bool, library=None, free=()
) -> dict:
    """What an unmixing was (`Provenance.unmix_settings`): route, sum-to-one, the
    endmembers' names, densities [g/cm^3], grain sizes [um], extinction efficiencies, and
    ``library`` (how they were made, where known); with endmembers from optical constants
    also ``free`` and ``optical`` (`optical_record`)."""
    optical = (
        {} if endmembers.optical is None else {"free": list(free), **optical_record(endmembers)}
    )
    return {
        **optical,
        "route": route,
        "sum_to_one": bool(sum_to_one),
        "endmembers": list(endmembers.names),
        "density": [float(v) for v in endmembers.density],
        "grain_size": [float(v) for v in endmembers.grain_size],
        "extinction_efficiency": [float(v) for v in endmembers.extinction_efficiency],
        "library": None if library is None else dict(library),
    }


def optical_record(endmembers: Endmembers) -> dict:
    """The optical endmembers' settings (``optical``): the band centres [um], internal
    scattering [1/um], grain-size bounds [um], npFe0 bounds and start (mass fractions),
    the slab model's variants, and a digest of n, k (the endmembers' and iron's) on the
    bands."""
    from .._run.journal import array_digest

    optical = endmembers.optical
    assert optical is not None and endmembers.wavelengths is not None
    return {
        "optical": {
            "wavelengths_um": endmembers.wavelengths.tolist(),
            "internal_scattering": optical.internal_scattering.tolist(),
            "grain_size_bounds": optical.grain_size_bounds.tolist(),
            "npfe_bounds": optical.npfe_bounds.tolist(),
            "npfe_fraction": float(optical.npfe_fraction),
            "reflections": optical.reflections,
            "mean_path": optical.mean_path,
            "nk_digest": array_digest(optical.n, optical.k, optical.iron_n, optical.iron_k),
        }
    }


UNMIX = Operation(
    name="unmix",
    block_task="lumaxlike._operations.unmix:unmix_block",
    fields=(*UNMIX_FIELDS, "remainder", *OPTICAL_FIELDS),
    optional={"remainder": "remainder"},
    layout=lambda names: unmix_layout(names),
    progress="unmixing",
    verb="unmixed",
    bad_bands="exclude",
)
"""`lumaxlike unmix`, `unmix_file` and `unmix_dataarray`: mass fractions per pixel (the
layout is made from the endmembers' names, not the units)."""
