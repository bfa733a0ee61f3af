"""The result types of `invert` (w alone) and `fit` (several free parameters)."""

from __future__ import annotations

import dataclasses

import numpy as np
from jaxtyping import Float, Int8, Int32

from .._status import Status

__all__ = ["InversionResult", "FitResult", "at_bound_flags"]


def _status_counts(status: np.ndarray) -> dict[str, int]:
    values = np.bincount(status.ravel().astype(np.int64), minlength=len(Status))
    return {code.name: int(values[code]) for code in Status}


@dataclasses.dataclass(frozen=True)
class InversionResult:
    """Per-problem results of `lumaxlike.invert`, all NumPy arrays shaped like `refl`.

    Attributes:
        w: single-scattering albedo (with a `PhotometricFunction`: its albedo A); NaN
            wherever the problem was not solved (status other than CONVERGED or
            MAX_ITER). Float dtype of `refl` (float32 or float64).
        status: `Status` codes (int8).
        iterations: Levenberg-Marquardt steps taken (int32; 0 for the closed form of a
            `PhotometricFunction`).
        residual: model minus observed reflectance at w [1/sr]; NaN where unsolved.
        sigma: 1-sigma uncertainty of w propagated from `refl_sigma` through dr/dw,
            sigma_w = refl_sigma / |dr/dw|; NaN where unsolved. Without `refl_sigma`,
            NaN everywhere: a read-only broadcast view, which takes no memory.
    """

    w: Float[np.ndarray, "*pixels bands"]
    status: Int8[np.ndarray, "*pixels bands"]
    iterations: Int32[np.ndarray, "*pixels bands"]
    residual: Float[np.ndarray, "*pixels bands"]
    sigma: Float[np.ndarray, "*pixels bands"]

    def counts(self) -> dict[str, int]:
        """Number of problems per status name."""
        return _status_counts(self.status)


@dataclasses.dataclass(frozen=True)
class FitResult:
    """Per-problem results of `lumaxlike.fit`; a problem is one pixel and band.

    Attributes:
        free: names of the fitted parameters, in the order of the covariance axes.
        values: {name: fitted value} for each free parameter, arrays of shape
            ``pixels + (bands,)`` (w [-], b [-], c [-], roughness [rad], hs, bs0, hc, bc0
            [-]); NaN where the problem was not solved (status other than CONVERGED,
            MAX_ITER or UNDETERMINED).
        status: `Status` codes (int8), shape ``pixels + (bands,)``.
        iterations: Levenberg-Marquardt steps taken (int32).
        residual_norm: sqrt of the sum over observations of (model - observed)^2 [1/sr].
        covariance: covariance of the free parameters, ``pixels + (bands, p, p)``:
            (J^T J)^-1 times refl_sigma^2 when given, else times the residual variance
            residual_norm^2 / (observations - p), observations being the problem's valid
            ones; NaN where unsolved or UNDETERMINED (and, without refl_sigma, where there
            are no more valid observations than parameters).
        observations: valid observations each problem was fitted to (int32, shape
            ``pixels + (bands,)``): those left after masking (non-finite reflectance or
            geometry, outside `observation_limits`).
        at_bound: {name: bool array shaped like `values[name]`}: the fitted value sits on
            one of the parameter's bounds (the solver projects onto the closed
            interval, e.g. c = 1). There the optimum is not a stationary point: its
            `sigma` (the Laplace approximation from J^T J) describes a Gaussian that
            reaches past the bound and is no measure of the posterior's width (an audit
            found it 8-13 times the posterior sd for c = 1); use `sample`. False where unsolved.
    """

    free: tuple[str, ...]
    values: dict[str, Float[np.ndarray, "*pixels bands"]]
    status: Int8[np.ndarray, "*pixels bands"]
    iterations: Int32[np.ndarray, "*pixels bands"]
    residual_norm: Float[np.ndarray, "*pixels bands"]
    covariance: Float[np.ndarray, "*pixels bands free free"]
    observations: Int32[np.ndarray, "*pixels bands"]
    at_bound: dict[str, np.ndarray]

    def __getitem__(self, name: str) -> np.ndarray:
        """The fitted values of the free parameter `name` (KeyError naming the free ones)."""
        if name not in self.values:
            raise KeyError(f"{name!r} was not fitted (fixed); the free parameters are {self.free}")
        return self.values[name]

    def sigma(self, name: str) -> np.ndarray:
        """1-sigma uncertainty of the free parameter `name` (sqrt of its variance).

        Raises:
            KeyError: naming `name` and the free parameters, when `name` was not fitted.
        """
        if name not in self.free:
            raise KeyError(
                f"sigma({name!r}): {name!r} was not fitted (fixed); the free "
                f"parameters are {self.free}"
            )
        index = self.free.index(name)
        return np.sqrt(self.covariance[..., index, index])

    def counts(self) -> dict[str, int]:
        """Number of problems per status name."""
        return _status_counts(self.status)


def at_bound_flags(free, values, lower, upper) -> dict:
    """{name: values[name] == lower or upper} of each free parameter (False where NaN).

    Args:
        free: the names; values: {name: array}; lower, upper: (len(free),) bounds in
            `free` order.
    """
    return {
        name: (values[name] == lower[j]) | (values[name] == upper[j]) for j, name in enumerate(free)
    }
