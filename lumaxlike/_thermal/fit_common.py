"""What the continuum and prior temperature fits share: the window problems' per-pixel
entries, the starting T, and T ended on a bound of the search."""

from __future__ import annotations

import numpy as np

from .._model.thermal import C1, C2
from .._status import Status

__all__ = ["PER_PIXEL", "brightness_start", "unbounded_limits"]

# the window problems' per-pixel entries (the others are per band, or one value)
PER_PIXEL = (
    "to_sun",
    "to_sensor",
    "normal",
    "coefficients",
    "distance",
    "theta",
    "observed",
    "weight",
)


def brightness_start(observed, wavelengths, solar, arrays, bounds):
    """The fit's starting T [K]: the brightness temperature of the window's longest band's
    excess over its shortest (emission grows ~exponentially across the window, the
    continuum barely; eps taken as 1), clipped to [200, 600] K (300 K without an excess),
    then to `bounds` (lowest, highest) [K]."""
    excess = (observed[:, -1] - observed[:, 0]) * solar[-1] / arrays["distance"] ** 2
    with np.errstate(divide="ignore", invalid="ignore"):
        temperature = C2 / wavelengths[-1] / np.log1p(C1 / wavelengths[-1] ** 5 / excess)
    start = np.where(excess > 0, np.clip(np.nan_to_num(temperature, nan=300.0), 200, 600), 300.0)
    return np.clip(start, bounds[0], bounds[1])


def unbounded_limits(temperature, status, bounds):
    """`status` with UNREACHABLE where a NOT_CONSTRAINED pixel's upper limit reached the
    upper bound of T (the data do not bound T within `temperature_bounds`)."""
    # the search returns the bound as t_high * T_SCALE: equal to it but for rounding
    reached = (status == Status.NOT_CONSTRAINED) & (temperature >= bounds[1] * (1 - 1e-12))
    return np.where(reached, Status.UNREACHABLE, status).astype(np.int8)
