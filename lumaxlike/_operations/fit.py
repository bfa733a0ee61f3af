"""The fit of Hapke parameters to a stack of observations, declared once (`FIT`): its block
task (`fit_block`: `lumaxlike.fit` on a block of stacked observations) and its maps
(`fit_fields`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from .._inverse.fit.fit import fit
from .._inverse.joint.result import JointFitResult
from .._io.write.layout import FIELD_ATTRS, INVERSION_LAYOUT, FieldLayout
from .declaration import Operation
from .good_bands import good_bands_only, spread_to_all_bands

__all__ = ["FIT", "fit_block", "fit_fields"]

_PARAMETER_UNITS = {"roughness": "rad"}


def fit_fields(free: Sequence[str], joint: bool = False) -> tuple[tuple[str, ...], FieldLayout]:
    """The maps `fit_file` writes for the free parameters `free` (w first): (field
    names, their `FieldLayout`: invert's maps, their attributes adapted, plus one map and
    one sigma map per free parameter and the count of valid observations). A `joint`
    fit (shared parameters or priors) writes ``dfs_<name>`` (degrees of freedom for
    signal) per free parameter and ``cost`` (the objective) in place of ``residual``."""
    attrs = dict(INVERSION_LAYOUT.attrs)
    for name in free:
        unit = _PARAMETER_UNITS.get(name, "1")
        if name != "w":
            attrs[name] = {"long_name": f"fitted Hapke parameter {name}", "units": unit}
        attrs[f"sigma_{name}"] = {"long_name": f"standard uncertainty of {name}", "units": unit}
    attrs["residual"] = {
        "long_name": "residual norm: sqrt of the sum over valid observations of "
        "(model - observed r)^2",
        "units": "sr-1",
    }
    attrs["status"] = {**FIELD_ATTRS["status"], "long_name": "fit status (lumaxlike.Status)"}
    attrs["observations"] = {"long_name": "valid observations fitted", "units": "1"}
    layout = dataclasses.replace(
        INVERSION_LAYOUT,
        attrs=attrs,
        integer={**INVERSION_LAYOUT.integer, "observations": np.int32},
    )
    fields = (
        "w",
        *(n for n in free if n != "w"),
        *(f"sigma_{n}" for n in free),
        "status",
        "iterations",
        "residual",
        "observations",
    )
    if joint:
        for name in free:
            attrs[f"dfs_{name}"] = {
                "long_name": f"degrees of freedom for signal of {name} (averaging kernel diagonal)",
                "units": "1",
            }
        attrs["cost"] = {
            "long_name": "objective at the solution: sum of ((model - observed r) / sigma)^2 "
            "plus the prior rows' squares (without sigma: of the residuals, sr-2)",
            "units": "1",
        }
        fields = (*fields[:-2], *(f"dfs_{n}" for n in free), "cost", "observations")
    return fields, layout


def fit_block(refl, to_sun, to_sensor, normal, params, fit_options) -> dict:
    """The task of a block: `lumaxlike.fit` on stacked observations; returns
    ``{field: (rows, cols, bands)}`` of the maps `fit_file` writes."""
    n_bands = refl.shape[-2]
    refl, fit_options, good = good_bands_only(refl, fit_options)
    result = fit(refl, to_sun, to_sensor, normal, params, **fit_options)
    block = {name: result[name] for name in result.free}
    for name in result.free:
        block[f"sigma_{name}"] = result.sigma(name)
    block.update(
        status=result.status, iterations=result.iterations, observations=result.observations
    )
    if isinstance(result, JointFitResult):  # per-pixel maps repeated in every band layer
        block.update({f"dfs_{name}": result.dfs[name] for name in result.free}, cost=result.cost)
        shape = refl.shape[:3]
        block = {
            name: np.ascontiguousarray(
                np.broadcast_to(value[..., None] if value.ndim == 2 else value, shape)
            )
            for name, value in block.items()
        }
    else:
        block["residual"] = result.residual_norm
    return spread_to_all_bands(block, good, n_bands)


FIT = Operation(
    name="fit",
    summary="fit Hapke parameters per pixel and band to a stack of co-registered cubes",
    block_task="lumaxlike._operations.fit:fit_block",
    fields=("w", "status", "iterations", "residual", "observations"),
    layout=lambda free, joint=False: fit_fields(free, joint)[1],
    progress="fitting",
    verb="fitted",
)
"""`lumaxlike fit`, `fit_file` and `fit_dataarray`: the free parameters per pixel and band
(and shared per pixel, or per region); the maps depend on them (`fit_fields`)."""
