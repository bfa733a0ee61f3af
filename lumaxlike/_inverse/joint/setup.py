"""`JointSetup`: the checked arguments of a joint `fit`, shared by the joint fits of
problems (`joint`) and of regions (`regional_fit`)."""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["JointSetup"]


@dataclasses.dataclass(frozen=True)
class JointSetup:
    """The checked arguments of a joint `fit` (`fit_joint`; `regional_fit.fit_regional`)."""

    flat_refl: Any  # (pixels, bands, observations)
    flat_geometry: Any  # to_sun, to_sensor, normal (pixels, observations, 3) each
    pixel_shape: tuple
    regions: Any  # the label map as given, or None
    free: tuple  # band_free + shared + regional: the solvers' order
    band_free: tuple
    shared: tuple
    regional: tuple
    params: Any
    solver: str
    lower: Any  # (p,) bounds of `free`
    upper: Any
    priors: dict
    given: dict  # the checked given starts, by name
    band_sigma: Any  # (bands,) float64, or None
    limits: Any  # checked observation limits
    chunk: int  # pixels per chunk
    dtype: Any
    fixed: Any  # values of PARAMETER_NAMES (w's entry a placeholder)
    min_obs: int
    max_iter: int
    tol: float
