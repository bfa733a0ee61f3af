"""The fit of Hapke parameters to a stack of observations, declared once (`FIT`): its block
task (`fit_block`: `lumaxlike.fit` on a block of stacked observations) and its maps
(`fit_maps` of a result; the fields of `fit_file`, `fit_fields`, and of `fit_dataarray`,
`dataarray_fields`)."""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from .._inverse.fit.fit import fit
from .._inverse.joint.result import JointFitResult
from .._io.write.layout import FIELD_ATTRS, INVERSION_LAYOUT, FieldLayout
from .declaration import SOLVED, Operation
from .good_bands import good_bands_only, spread_to_all_bands

__all__ = ["FIT", "dataarray_fields", "fit_block", "fit_fields", "fit_maps"]

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


def fit_maps(result, at_bound: bool = False) -> dict[str, np.ndarray]:
    """The maps of a `FitResult` or `JointFitResult`, ``{field: array}`` (the result's
    shapes: per problem, a joint fit's per-pixel maps without the band axis): each free
    parameter, ``sigma_<name>``, ``status``, ``iterations``, ``observations``, and
    ``residual`` (per-band fit; with `at_bound` also ``at_bound_<name>``) or ``dfs_<name>``
    and ``cost`` (joint fit)."""
    maps = {name: result[name] for name in result.free}
    maps.update({f"sigma_{name}": result.sigma(name) for name in result.free})
    maps.update(
        status=result.status, iterations=result.iterations, observations=result.observations
    )
    if isinstance(result, JointFitResult):
        maps.update({f"dfs_{name}": result.dfs[name] for name in result.free}, cost=result.cost)
        return maps
    maps["residual"] = result.residual_norm
    if at_bound:
        maps.update({f"at_bound_{name}": result.at_bound[name] for name in result.free})
    return maps


def dataarray_fields(free: Sequence[str], shared: Sequence[str] | None = None):
    """(field, has a band axis) of `fit_dataarray`'s maps, in its order (`free`'s): a
    per-band fit's (`shared` None: all per band, with ``at_bound_<name>``) or a joint
    fit's, whose parameters in `shared` (shared or regional) and, with any, the status,
    iterations and cost, are one per pixel. The names are `fit_maps`'."""
    if shared is None:
        return tuple(
            (field, True)
            for field in (
                *free,
                *(f"sigma_{name}" for name in free),
                "status",
                "iterations",
                "residual",
                "observations",
                *(f"at_bound_{name}" for name in free),
            )
        )
    per_band = {name: name not in shared for name in free}
    problem = not shared  # with shared parameters a problem is a pixel (no band axis)
    return (
        *((name, per_band[name]) for name in free),
        *((f"sigma_{name}", per_band[name]) for name in free),
        *((f"dfs_{name}", per_band[name]) for name in free),
        ("status", problem),
        ("iterations", problem),
        ("cost", problem),
        ("observations", True),
    )


def fit_block(refl, to_sun, to_sensor, normal, params, fit_options) -> dict:
    """The task of a block: `lumaxlike.fit` on stacked observations; returns
    ``{field: (rows, cols, bands)}`` of the maps `fit_file` writes."""
    n_bands = refl.shape[-2]
    refl, fit_options, good = good_bands_only(refl, fit_options)
    result = fit(refl, to_sun, to_sensor, normal, params, **fit_options)
    block = fit_maps(result)
    if isinstance(result, JointFitResult):  # per-pixel maps repeated in every band layer
        shape = refl.shape[:3]
        block = {
            name: np.ascontiguousarray(
                np.broadcast_to(value[..., None] if value.ndim == 2 else value, shape)
            )
            for name, value in block.items()
        }
    return spread_to_all_bands(block, good, n_bands)


FIT = Operation(
    name="fit",
    block_task="lumaxlike._operations.fit:fit_block",
    fields=("w", "status", "iterations", "residual", "observations"),
    layout=lambda free, joint=False: fit_fields(free, joint)[1],
    progress="fitting",
    verb="fitted",
    solved=(*SOLVED, "MULTIMODAL"),  # MULTIMODAL: the lowest minimum, converged
)
"""`lumaxlike fit`, `fit_file` and `fit_dataarray`: the free parameters per pixel and band
(and shared per pixel, or per region); the maps depend on them (`fit_fields`)."""
