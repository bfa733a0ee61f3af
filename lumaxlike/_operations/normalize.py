"""The photometric normalisation, declared once (`NORMALIZE`): its block task
(`normalize_block`, on NumPy arrays in lumaxlike's layout, reflectance ``(..., bands)`` in
r [1/sr], geometry ``(..., 3)``), the maps it returns (`NORMALIZATION_FIELDS`) and their
layout."""

from __future__ import annotations

import contextlib
import dataclasses
import math

import numpy as np

from .._io.write.layout import FIELD_ATTRS, FieldLayout
from .._normalize.normalize import normalize
from .._normalize.options import NormalizeSettings
from .._options import SolverOptions
from .blocks import band_groups, block_solver_keywords, numba_threads
from .declaration import Operation

__all__ = [
    "NORMALIZATION_FIELDS",
    "NORMALIZE",
    "normalization_layout",
    "from_r_at_standard",
    "normalization_attrs",
    "normalize_block",
]

NORMALIZATION_FIELDS = ("reflectance", "status", "sigma")
"""Maps a normalisation writes: the normalised cube (at ``OUT`` itself), status, sigma."""

_UNIT_TEXT = {
    "r": ("bidirectional reflectance r", "sr-1"),
    "radf": ("radiance factor I/F = pi r", "1"),
    "reff": ("reflectance factor pi r / cos i", "1"),
}


def normalization_attrs(units: str) -> dict:
    """CF-style attributes of the normalisation's maps for a cube in ``units``."""
    quantity, unit = _UNIT_TEXT[units]
    return {
        "reflectance": {"long_name": f"{quantity} at the standard geometry", "units": unit},
        "status": FIELD_ATTRS["status"],
        "sigma": {
            "long_name": f"standard uncertainty of the {quantity} at the standard geometry",
            "units": unit,
        },
    }


def from_r_at_standard(values, units: str, standard) -> np.ndarray:
    """r [1/sr] at the standard geometry in ``units`` (REFF with the standard incidence)."""
    if units == "r":
        return values
    factor = math.pi if units == "radf" else math.pi / math.cos(standard[0])
    return (values * factor).astype(values.dtype, copy=False)


def normalize_block(
    refl,
    to_sun,
    to_sensor,
    normal,
    params,
    options: SolverOptions,
    refl_sigma=None,
    *,
    settings: NormalizeSettings,
    units: str,
    param_maps=None,
) -> dict[str, np.ndarray]:
    """Normalise a block of pixels, band groups with their own parameters.

    Args:
        refl: r [1/sr], shape ``pixels + (bands,)``.
        to_sun, to_sensor, normal: direction vectors, shape ``pixels + (3,)``.
        params: one `HapkeParams` per band (see `per_band_params`).
        options: solver and its settings.
        refl_sigma: standard uncertainty of r [1/sr], a scalar or an array broadcastable
            to ``refl``; None for none.
        settings: the `NormalizeSettings` of the run, handed to `normalize` whole but
            for ``refl_sigma`` (this block's, in r) and ``max_iter``, ``tol`` (``options``').
        units: the units the outputs are returned in (``"r"``, ``"radf"``, ``"reff"``).
        param_maps: ``{field: array of shape pixels (+ (bands,))}`` or None.
    Returns:
        ``{field: array}`` for :data:`NORMALIZATION_FIELDS`, each shaped like ``refl``.
    """
    refl = np.asarray(refl)
    kwargs = block_solver_keywords(options)
    settings = dataclasses.replace(settings, refl_sigma=None)  # this block's, below
    sigma_scale = None  # sigma is linear in refl_sigma: a per-pixel one scales the result
    if refl_sigma is not None and np.ndim(refl_sigma) > 0:
        sigma_scale = np.broadcast_to(refl_sigma, refl.shape)
        refl_sigma = 1.0
    fields: dict[str, np.ndarray] = {}
    solver_context = (
        numba_threads(options.num_threads)
        if options.solver == "numba"
        else contextlib.nullcontext()
    )
    with solver_context:
        for group_params, bands in band_groups(params):
            maps = None
            if param_maps:
                maps = {
                    name: (values[..., bands] if values.ndim == refl.ndim else values)
                    for name, values in param_maps.items()
                }
            result = normalize(
                refl[..., bands],
                to_sun,
                to_sensor,
                normal,
                group_params,
                options.solver,
                settings=settings,
                refl_sigma=refl_sigma,
                param_maps=maps,
                **kwargs,
            )
            for field in NORMALIZATION_FIELDS:
                values = getattr(result, field)
                fields.setdefault(field, np.empty(refl.shape, values.dtype))[..., bands] = values
    if sigma_scale is not None:
        fields["sigma"] = (fields["sigma"] * sigma_scale).astype(fields["sigma"].dtype, copy=False)
    for field in ("reflectance", "sigma"):
        fields[field] = from_r_at_standard(fields[field], units, settings.standard)
    return fields


def normalization_layout(units: str) -> FieldLayout:
    """The maps a normalisation writes: the normalised cube at the output path, its status
    and sigma beside it."""
    return FieldLayout(
        main="reflectance",
        attrs=normalization_attrs(units),
        band_names={},
        integer={"status": np.int8},
    )


NORMALIZE: Operation = Operation(
    name="normalize",
    block_task="lumaxlike._operations.normalize:normalize_block",
    fields=NORMALIZATION_FIELDS,
    optional={"sigma": "sigma"},
    layout=normalization_layout,
    progress="normalising",
    verb="normalised",
)
"""`lumaxlike normalize`, `normalize_file` and `normalize_dataarray`: reflectance at a
standard geometry, per band and pixel."""
