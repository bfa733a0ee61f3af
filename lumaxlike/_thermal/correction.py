"""Each band's w, corrected reflectance and emission at a pixel's known T (`correct`)."""

from __future__ import annotations

import numpy as np

from .._inverse.albedo.invert import albedo_bounds
from .solvers import solve_bands

__all__ = ["correct"]


def correct(arrays, observed, temperature, wavelengths, solar, settings, into=None):
    """(w, corrected r, emission) of every band at the pixels' T (pixels, bands each),
    written into `into` (three C-contiguous float64 arrays) or new arrays; T NaN: nothing
    removed (`invert`'s w)."""
    problems = dict(arrays, observed=observed, temperature=temperature)
    problems.update(wavelength=wavelengths, solar=solar)
    bounds = albedo_bounds(np.float64)
    w, reflectance, emission = into or tuple(np.empty(observed.shape) for _ in range(3))
    solve_bands(
        settings["params"],
        problems,
        (*bounds, settings["tol"], settings["max_iter"]),
        settings["solver"],
        out=(w, emission, reflectance),
    )
    # a band no w in (0, 1) fits ends on a bound of w: NaN, as `invert`'s UNREACHABLE
    failed = (w <= bounds[0]) | (w >= bounds[1])
    for values in (w, reflectance, emission):
        values[failed] = np.nan
    return w, reflectance, emission
