"""The multi-start policy of `unmix` with free grain sizes or npFe0 (`starts`): the
count checked, the starting points, the best result per pixel kept, and the restart of
pixels whose grain sizes got stuck. The method is described in `optical`
(`_unmix/optical.py`)."""

from __future__ import annotations

import numpy as np

from .._status import Status

__all__ = ["START_FACTOR", "check_starts", "start_points", "best_of", "reentry_points"]

#: the grain-size factors of the starts after the first (`start_points`): 3x, 1/3x, 9x, ...
START_FACTOR = 3.0


def check_starts(starts) -> int:
    """`unmix`'s ``starts`` as a count >= 1 (None: 1); ValueError naming it."""
    if starts is None:
        return 1
    if isinstance(starts, bool) or not isinstance(starts, (int, np.integer)) or starts < 1:
        raise ValueError(f"starts must be a positive int (or None for one start), got {starts!r}")
    return int(starts)


def start_points(start, lower, upper, fixed, p: int, count: int) -> list[np.ndarray]:
    """The starts of x = (f, ln D, phi), each (2p + 1,): `start`, then (free grain sizes)
    every grain size scaled together by 3, 1/3, 9, 1/9, ... (clipped to its bounds), or
    (npFe0 free alone) phi at the midpoints of ``count - 1`` cells of its bounds."""
    points = [start]
    grain = slice(p, 2 * p)
    for i in range(1, count):
        point = start.copy()
        if not np.all(fixed[grain]):
            power = (i + 1) // 2 * (1 if i % 2 else -1)
            point[grain] = np.clip(
                start[grain] + power * np.log(START_FACTOR), lower[grain], upper[grain]
            )
        else:
            point[2 * p] = lower[2 * p] + (i - 0.5) * (upper[2 * p] - lower[2 * p]) / (count - 1)
        points.append(point)
    return points


def best_of(kept: dict, other: dict) -> dict:
    """Per pixel, a solver's result ``other`` in place of ``kept`` where it CONVERGED and
    ``kept`` did not, or where both did (or neither) and its cost is lower."""
    converged_kept = kept["status"] == Status.CONVERGED
    converged_other = other["status"] == Status.CONVERGED
    with np.errstate(invalid="ignore"):
        lower_cost = other["cost"] < kept["cost"]
    take = (converged_other & ~converged_kept) | ((converged_other == converged_kept) & lower_cost)
    return {
        key: np.where(take.reshape((-1,) + (1,) * (value.ndim - 1)), other[key], value)
        for key, value in kept.items()
    }


def reentry_points(solved: dict, start, lower, upper, fixed, p: int):
    """(x (pixels, 2p + 1), need (pixels,)): the restart of each pixel whose solution
    has a free grain size stuck (its endmember absent, or at a bound), from the solution
    with each such endmember put back (its fraction raised to 1/p, the fractions
    renormalised) at its starting grain size. An absent endmember's grain size is held
    (it has no effect), so a grain size that ran to a bound before its fraction reached
    0 cannot come back by itself: the local minima seen with 3-4 endmembers."""
    x = np.array(solved["x"], np.float64)
    grain = slice(p, 2 * p)
    f, u = x[:, :p], x[:, grain]
    with np.errstate(invalid="ignore"):
        stuck = ((f <= 0.0) | (u <= lower[grain]) | (u >= upper[grain])) & ~fixed[grain]
    need = np.any(stuck, axis=-1) & np.all(np.isfinite(x), axis=-1)
    f = np.where(stuck, np.maximum(f, 1.0 / p), f)
    x[:, :p] = f / np.sum(f, axis=-1, keepdims=True)
    x[:, grain] = np.where(stuck, start[grain], u)
    return np.where(np.isfinite(x), x, start), need
