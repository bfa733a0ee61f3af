"""The task of a block: solver options, per-band parameters, numba threads, inverting a block.

Shared by the file runs (:mod:`lumaxlike._run.stream`, through a
:class:`~lumaxlike._run.pool.BlockPool`) and the xarray front ends
(:mod:`lumaxlike._xarray`, one task per dask chunk). Everything here works on NumPy
arrays in lumaxlike's layout: reflectance ``(..., bands)`` in r [1/sr], geometry
``(..., 3)``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .._inverse.albedo.invert import SOLVERS, invert
from .._params import HapkeParams
from .._photometric import PhotometricFunction
from .._shapes import check_choice
from .._status import RESULT_FIELDS

__all__ = [
    "SOLVERS",
    "SolverOptions",
    "band_groups",
    "check_solver",
    "invert_block",
    "numba_threads",
    "per_band_params",
]


def check_solver(solver) -> str:
    """Return ``solver`` if it is ``"jax"`` or ``"numba"``, else raise ValueError naming it."""
    check_choice("solver", solver, SOLVERS)
    return solver


@dataclass(frozen=True)
class SolverOptions:
    """How to run :func:`lumaxlike.invert` on a block.

    Attributes:
        solver: ``"jax"`` or ``"numba"``.
        max_iter, tol, chunk_size: passed to :func:`lumaxlike.invert` (None = its default).
        num_threads: threads of the numba solver for this block (None = numba's current
            setting); ignored by the JAX solver.
    """

    solver: str
    max_iter: int | None = None
    tol: float | None = None
    chunk_size: int | None = None
    num_threads: int | None = None

    def __post_init__(self):
        check_solver(self.solver)
        if self.num_threads is not None and int(self.num_threads) < 1:
            raise ValueError(f"num_threads must be a positive integer, got {self.num_threads!r}")


def per_band_params(params, bands: int, name: str = "params") -> list:
    """One model per band: :class:`lumaxlike.HapkeParams` or
    :class:`lumaxlike.PhotometricFunction`.

    Args:
        params: one model for every band, or a sequence of one per band (all of one type).
        bands: number of spectral bands of the cube.
        name: argument name for messages.

    Returns:
        list of ``bands`` model objects (the same object repeated for shared values).

    Raises:
        ValueError: naming ``name``, when the sequence length differs from ``bands``, an
            element is not a model object, or Hapke models and photometric functions mix.
    """
    models = (HapkeParams, PhotometricFunction)
    if isinstance(params, models):
        return [params] * bands
    if not isinstance(params, Sequence) or isinstance(params, (str, bytes)):
        raise ValueError(
            f"{name} must be a lumaxlike.HapkeParams or PhotometricFunction, or a sequence "
            f"of one per band, got {type(params).__name__}"
        )
    if len(params) != bands:
        raise ValueError(f"{name} gives {len(params)} per-band parameter sets for {bands} bands")
    for item in params:
        if not isinstance(item, models):
            raise ValueError(
                f"{name} must hold lumaxlike.HapkeParams or PhotometricFunction, "
                f"got {type(item).__name__}"
            )
    if len({type(item) for item in params}) > 1:
        raise ValueError(f"{name} mixes lumaxlike.HapkeParams and PhotometricFunction across bands")
    return list(params)


def band_groups(params: list[HapkeParams]) -> list[tuple[HapkeParams, np.ndarray]]:
    """Bands sharing one parameter object: ``[(params, band indices), ...]``."""
    groups: dict[int, tuple[HapkeParams, list[int]]] = {}
    for band, item in enumerate(params):
        groups.setdefault(id(item), (item, []))[1].append(band)
    return [(item, np.asarray(bands)) for item, bands in groups.values()]


@contextlib.contextmanager
def numba_threads(count: int | None):
    """Run the enclosed numba calls with ``count`` threads (None: numba's setting).

    ``numba.set_num_threads`` is thread-local; the previous value is restored after.
    lumaxlike's kernels read it in the calling thread (`numba_threads.run_in_blocks`)
    and use none of numba's threading layers, so tasks on several threads may call
    them at once.
    """
    import numba

    if count is None:
        yield
        return
    previous = numba.get_num_threads()
    # NUMBA_NUM_THREADS, the most threads numba starts (numba.config sets it at run time)
    numba.set_num_threads(min(int(count), vars(numba.config)["NUMBA_NUM_THREADS"]))
    try:
        yield
    finally:
        numba.set_num_threads(previous)


def invert_block(
    refl, to_sun, to_sensor, normal, params, options: SolverOptions, refl_sigma=None, w0=None
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

    Returns:
        ``{field: array}`` for :data:`~lumaxlike._io.layout.RESULT_FIELDS`, each of the
        shape of ``refl`` (see :class:`lumaxlike.InversionResult`).
    """
    refl = np.asarray(refl)
    groups = band_groups(params)
    kwargs: dict[str, Any] = {
        "max_iter": options.max_iter,
        "tol": options.tol,
        "chunk_size": options.chunk_size,
    }
    kwargs = {key: value for key, value in kwargs.items() if value is not None}
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
