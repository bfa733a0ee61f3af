"""The unmixing, declared once (`UNMIX`): its block task (`unmix_block`, with its
`UnmixOptions`, on NumPy arrays in lumaxlike's layout, reflectance ``(..., bands)`` in r
[1/sr], geometry ``(..., 3)``), the maps it returns (`unmix_fields`, `unmix_layout`) and the
record of an unmixing (`unmix_record`)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from .._io.layout import FieldLayout
from .._params import HapkeParams
from .._status import Status
from .._unmix.endmembers import Endmembers
from .._unmix.unmix import unmix
from .blocks import numba_threads
from .declaration import Operation

__all__ = [
    "UNMIX",
    "UNMIX_FIELDS",
    "UnmixOptions",
    "unmix_block",
    "unmix_fields",
    "unmix_layout",
    "unmix_record",
]

UNMIX_FIELDS = ("fractions", "sigma", "status", "iterations", "residual")
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
}


def unmix_fields(sum_to_one: bool = True) -> tuple[str, ...]:
    """The maps `unmix_file` writes: :data:`UNMIX_FIELDS`, and ``remainder`` (the
    unmodelled dark remainder, `UnmixResult.remainder`) when the fractions need not sum
    to one."""
    return UNMIX_FIELDS if sum_to_one else (*UNMIX_FIELDS, "remainder")


def unmix_layout(names) -> FieldLayout:
    """The maps `unmix_file` writes for endmembers ``names``."""
    per_pixel = {name: (name,) for name in ("status", "iterations", "residual", "remainder")}
    return FieldLayout(
        main="fractions",
        attrs=_ATTRS,
        band_names={"fractions": tuple(names), "sigma": tuple(names), **per_pixel},
        integer={"status": np.int8, "iterations": np.int32},
        dimensions={"fractions": "endmember", "sigma": "endmember", **dict.fromkeys(per_pixel)},
    )


@dataclass(frozen=True)
class UnmixOptions:
    """How `unmix_block` runs `lumaxlike.unmix` (see its arguments)."""

    solver: str
    route: str = "one_step"
    sum_to_one: bool = True
    max_iter: int | None = None
    tol: float | None = None
    chunk_size: int | None = None
    num_threads: int | None = None
    wavelengths: tuple | None = None  # the data's band centres [um]: matched to the endmembers'


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
    returns the maps of :data:`UNMIX_FIELDS`, each ``pixels + (bands,)`` with one band per
    endmember (fractions, sigma) or one band."""
    kwargs: dict[str, Any] = {
        k: v for k, v in (("max_iter", options.max_iter), ("tol", options.tol)) if v is not None
    }
    with numba_threads(options.num_threads):
        result = unmix(
            refl,
            to_sun,
            to_sensor,
            normal,
            endmembers,
            params,
            options.solver,
            route=options.route,
            sum_to_one=options.sum_to_one,
            refl_sigma=refl_sigma,
            chunk_size=options.chunk_size,
            wavelengths=options.wavelengths,
            **kwargs,
        )
    with np.errstate(invalid="ignore"):  # NaN covariance where unsolved
        sigma = np.sqrt(np.diagonal(result.covariance, axis1=-2, axis2=-1))
    return {
        "fractions": result.fractions,
        "sigma": sigma,
        "status": result.status[..., None],
        "iterations": result.iterations[..., None],
        "residual": result.residual_norm[..., None],
        "remainder": result.remainder[..., None],
    }


def unmix_record(endmembers: Endmembers, route: str, sum_to_one: bool, library=None) -> dict:
    """What an unmixing was (`Provenance.unmix_settings`): route, sum-to-one, the
    endmembers' names, densities [g/cm^3], grain sizes [um], extinction efficiencies, and
    ``library`` (how they were made, where known)."""
    return {
        "route": route,
        "sum_to_one": bool(sum_to_one),
        "endmembers": list(endmembers.names),
        "density": [float(v) for v in endmembers.density],
        "grain_size": [float(v) for v in endmembers.grain_size],
        "extinction_efficiency": [float(v) for v in endmembers.extinction_efficiency],
        "library": None if library is None else dict(library),
    }


UNMIX = Operation(
    name="unmix",
    summary="unmix a reflectance cube into maps of endmember mass fractions",
    block_task="lumaxlike._operations.unmix:unmix_block",
    fields=(*UNMIX_FIELDS, "remainder"),
    optional={"remainder": "remainder"},
    layout=lambda names: unmix_layout(names),
    progress="unmixing",
    verb="unmixed",
    bad_bands="exclude",
)
"""`lumaxlike unmix`, `unmix_file` and `unmix_dataarray`: mass fractions per pixel (the
layout is made from the endmembers' names, not the units)."""
