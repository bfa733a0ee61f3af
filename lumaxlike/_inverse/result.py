"""The one result type of every inversion."""

from __future__ import annotations

import dataclasses

import numpy as np

from .status import Status

__all__ = ["InversionResult"]


@dataclasses.dataclass(frozen=True)
class InversionResult:
    """Per-problem results of `lumaxlike.invert`, all NumPy arrays shaped like `refl`.

    Attributes:
        w: single-scattering albedo; NaN wherever the problem was not solved (status
            other than CONVERGED or MAX_ITER). Float dtype of `refl` (float32 or float64).
        status: `Status` codes (int8).
        iterations: Levenberg-Marquardt steps taken (int32).
        residual: model minus observed reflectance at w [1/sr]; NaN where unsolved.
        sigma: 1-sigma uncertainty of w propagated from `refl_sigma` through dr/dw,
            sigma_w = refl_sigma / |dr/dw|; NaN where unsolved or `refl_sigma` not given.
    """

    w: np.ndarray
    status: np.ndarray
    iterations: np.ndarray
    residual: np.ndarray
    sigma: np.ndarray

    def counts(self) -> dict[str, int]:
        """Number of problems per status name."""
        values = np.bincount(self.status.ravel().astype(np.int64), minlength=len(Status))
        return {status.name: int(values[status]) for status in Status}
