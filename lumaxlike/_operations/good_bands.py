"""Joint and regional fits of a stack whose cubes mark bad bands (ENVI ``bbl`` = 0).

A per-band fit solves every band on its own: a bad band, read as NaN, is a problem of no
observation, flagged ``BAD_BAND`` afterwards (`lumaxlike._run.stream.mark_bad_bands`). A
joint fit (shared parameters, priors, regions) solves a pixel's bands together, and a
band of no observation would make the whole pixel TOO_FEW_OBSERVATIONS; so the bad bands
are left out of its problems here, and their layers of the maps filled, to be flagged
``BAD_BAND`` as a per-band fit's are.
"""

from __future__ import annotations

import numpy as np

from .._status import Status

__all__ = ["BAD_BANDS_OPTION", "good_bands_only", "spread_to_all_bands"]

BAD_BANDS_OPTION = "bad_bands"
"""The key of the fit options (of a joint fit) holding the bad bands (boolean per band)."""


def good_bands_only(
    refl: np.ndarray, fit_options: dict
) -> tuple[np.ndarray, dict, np.ndarray | None]:
    """``refl`` (..., bands, observations) without the bad bands that ``fit_options``
    names, the options `lumaxlike.fit` takes, and the good bands' indices (None: all
    bands are fitted, no band or every band being bad)."""
    options = dict(fit_options)
    bad = options.pop(BAD_BANDS_OPTION, None)
    if bad is None or not np.any(bad) or np.all(bad):  # all bad: every layer is flagged
        return refl, options, None
    good = np.flatnonzero(~np.asarray(bad, bool))
    return np.ascontiguousarray(refl[..., good, :]), options, good


def spread_to_all_bands(block: dict, good: np.ndarray | None, n_bands: int) -> dict:
    """The maps ``{field: (..., good bands)}`` of a fit of the good bands widened to
    ``(..., n_bands)``: a bad band's layer NaN (0 for counts, status BAD_BAND)."""
    if good is None:
        return block
    spread = {}
    for name, values in block.items():
        values = np.asarray(values)
        fill: float
        if name == "status":
            fill = Status.BAD_BAND
        else:
            fill = np.nan if np.issubdtype(values.dtype, np.floating) else 0
        full = np.full((*values.shape[:-1], n_bands), fill, values.dtype)
        full[..., good] = values
        spread[name] = full
    return spread
