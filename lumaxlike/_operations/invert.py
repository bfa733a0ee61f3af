"""The inversion for w, declared once (`INVERT`): its block task (`invert_block`) and maps."""

from __future__ import annotations

import contextlib
import dataclasses

import numpy as np

from .._inverse.albedo.invert import invert
from .._inverse.options import InvertSettings
from .._io.write.layout import INVERSION_LAYOUT
from .._options import SolverOptions
from .._status import RESULT_FIELDS
from .blocks import band_groups, block_solver_keywords, numba_threads
from .declaration import Operation

__all__ = ["INVERT", "invert_block"]


def invert_block(
    refl,
    to_sun,
    to_sensor,
    normal,
    params,
    options: SolverOptions,
    refl_sigma=None,
    w0=None,
    settings: InvertSettings | None = None,
) -> dict[str, np.ndarray]:
    """Invert a block of pixels for w, band groups with their own parameters.

    Args:
        refl: bidirectional reflectance r [1/sr], shape ``pixels + (bands,)``.
        to_sun, to_sensor, normal: direction vectors, shape ``pixels + (3,)``.
        params: list of one :class:`lumaxlike.HapkeParams` per band
            (see :func:`per_band_params`).
        options: solver and its settings.
        refl_sigma: standard uncertainty of r [1/sr], a scalar or an array broadcastable
            to ``refl`` (e.g. per pixel); None for no uncertainty propagation.
        w0: optional starting albedo, broadcastable to ``refl``.
        settings: the run's `InvertSettings` (None: the defaults), handed to `invert`
            whole but for ``refl_sigma`` (this block's, in r) and ``max_iter``, ``tol``
            (``options``').

    Returns:
        ``{field: array}`` for :data:`~lumaxlike._io.write.layout.RESULT_FIELDS`, each of the
        shape of ``refl`` (see :class:`lumaxlike.InversionResult`).
    """
    refl = np.asarray(refl)
    groups = band_groups(params)
    kwargs = block_solver_keywords(options)
    settings = dataclasses.replace(settings or InvertSettings(), refl_sigma=None)  # below
    # invert takes one refl_sigma per band; a per-pixel one (e.g. REFF converted to r)
    # scales sigma_w = refl_sigma / |dr/dw| linearly, so solve with 1 and scale after.
    sigma_scale = None
    if refl_sigma is not None and np.ndim(refl_sigma) > 0:
        sigma_scale = np.broadcast_to(refl_sigma, refl.shape)
        refl_sigma = 1.0
    if w0 is not None:
        w0 = np.broadcast_to(w0, refl.shape)
    fields: dict[str, np.ndarray] = {}
    solver_context = (
        numba_threads(options.num_threads)
        if options.solver == "numba"
        else contextlib.nullcontext()
    )
    with solver_context:
        for group_params, bands in groups:
            whole = len(groups) == 1
            pick = (lambda a: a) if whole else (lambda a: np.ascontiguousarray(a[..., bands]))  # noqa: B023 (called in this iteration)
            result = invert(
                pick(refl),
                to_sun,
                to_sensor,
                normal,
                group_params,
                options.solver,
                w0=None if w0 is None else pick(w0),
                settings=settings,
                refl_sigma=refl_sigma,
                **kwargs,
            )
            for field in RESULT_FIELDS:
                values = np.asarray(getattr(result, field))
                if whole:
                    fields[field] = values
                else:
                    if field not in fields:
                        fields[field] = np.empty(refl.shape, values.dtype)
                    fields[field][..., bands] = values
    if sigma_scale is not None:
        fields["sigma"] = (fields["sigma"] * sigma_scale).astype(fields["sigma"].dtype, copy=False)
    return fields


INVERT: Operation = Operation(
    name="invert",
    block_task="lumaxlike._operations.invert:invert_block",
    fields=RESULT_FIELDS,
    optional={"sigma": "sigma"},
    layout=lambda units: INVERSION_LAYOUT,
    progress="inverting",
    verb="inverted",
)
"""`lumaxlike invert`, `invert_file` and `invert_dataarray`: w per band and pixel."""
