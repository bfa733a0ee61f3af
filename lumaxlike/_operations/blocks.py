"""What the block tasks of the operations share: per-band parameters, the band groups
that share them, numba threads, the solver check.

Everything here works on NumPy arrays in lumaxlike's layout: reflectance ``(..., bands)``
in r [1/sr], geometry ``(..., 3)``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

import numpy as np

from .._options import SOLVERS
from .._params import HapkeParams
from .._photometric import PhotometricFunction
from .._shapes import check_choice

__all__ = [
    "SOLVERS",
    "band_groups",
    "block_solver_keywords",
    "check_solver",
    "numba_threads",
    "per_band_params",
]


def check_solver(solver) -> str:
    """Return ``solver`` if it is ``"jax"`` or ``"numba"``, else raise ValueError naming it."""
    check_choice("solver", solver, SOLVERS)
    return solver


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


def block_solver_keywords(options) -> dict:
    """A block task's ``max_iter``, ``tol`` and ``chunk_size`` for `invert` or
    `normalize`, from its `SolverOptions`: those it sets (None: the operation's own)."""
    given = {"max_iter": options.max_iter, "tol": options.tol, "chunk_size": options.chunk_size}
    return {key: value for key, value in given.items() if value is not None}


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
