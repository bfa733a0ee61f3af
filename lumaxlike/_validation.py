"""Checks of scalar model parameters shared by the model objects (`HapkeParams`,
`PhotometricFunction`)."""

from __future__ import annotations

import math

import numpy as np

__all__ = ["finite_scalar"]


def finite_scalar(name: str, value) -> float:
    """`value` as a float; ValueError naming `name` unless it is one finite real number."""
    kind = np.asarray(value).dtype.kind if not isinstance(value, (str, bytes)) else "U"
    if kind not in "fiu" or np.ndim(value) != 0:
        raise ValueError(f"{name} must be one real number, got {value!r}")
    number = float(value)
    if not math.isfinite(number):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return number
