"""`UnmixResult`: what `lumaxlike.unmix` returns."""

from __future__ import annotations

import dataclasses

import numpy as np

from .._status import Status

__all__ = ["UnmixResult"]


@dataclasses.dataclass(frozen=True)
class UnmixResult:
    """Per-pixel results of `lumaxlike.unmix`; ``pixels`` is refl's shape without its band axis.

    Attributes:
        names: the endmembers' names, in the order of the last axis of the arrays.
        route: ``"one_step"`` or ``"two_step"``.
        fractions: mass fractions M_j [-], ``pixels + (n_endmembers,)``, >= 0, summing to
            one (with ``sum_to_one=False``: mass fractions of the modelled endmembers
            relative to their total; see `remainder`). NaN where unsolved (status other
            than CONVERGED, MAX_ITER or UNDETERMINED).
        covariance: covariance of the mass fractions, ``pixels + (n, n)``, with the
            active constraints held (fractions at their bound and the sum constraint do
            not vary: their rows and columns are 0 there); scaled by refl_sigma when given,
            else by the residual variance. NaN where unsolved or UNDETERMINED (and
            without refl_sigma where there are no more bands than free fractions).
        at_bound: ``pixels + (n,)`` bool: the fraction is at its bound, exactly 0 (the
            endmember is absent, or the data cannot tell it from absent).
        cross_section: the geometric cross-section fractions f_j = M_j c_j / sum M_k c_k,
            c_j = Q_j/(rho_j D_j), in which the mixture's albedo is linear:
            w_mix = sum_j f_j w_j, ``pixels + (n,)``.
        remainder: ``pixels``: cross-section fraction 1 - sum_j f_j of the unmodelled,
            perfectly absorbing remainder (w = 0); exactly 0 with ``sum_to_one=True``.
        status: `Status` codes (int8), ``pixels``: CONVERGED, MAX_ITER, UNDETERMINED
            (the library does not determine the split: collinear endmembers; the values
            are one of many solutions), NONFINITE_INPUT, INVALID_GEOMETRY, and for the
            two-step route UNREACHABLE (a band whose w `invert` cannot find).
        iterations: Levenberg-Marquardt steps (one-step), or the largest number of
            `invert` steps over the pixel's bands (two-step); int32.
        residual_norm: sqrt of the sum over bands of the squared residuals of the
            route's objective: reflectance [1/sr] (one-step) or albedo [-] (two-step),
            each divided by its sigma when refl_sigma is given (then a chi [-]).
        grain_size: with ``unmix(..., free=...)`` only (else None): each endmember's
            grain size D_j [um], ``pixels + (n,)`` (fitted where "grain_size" is free;
            NaN for a free grain size of an absent endmember, which the data cannot see).
        npfe_fraction: with ``free`` only: the pixel's nanophase iron mass fraction
            [-] (0.005 is 0.5 wt %), ``pixels``.
        parameter_covariance: with ``free`` only: covariance of (M_1..M_n, D_1..D_n,
            npFe0), ``pixels + (2n + 1, 2n + 1)`` [-, um, -]; rows of fixed parameters
            and of parameters at a bound are 0; its first n x n block is `covariance`.
            NaN where unsolved or UNDETERMINED (grain sizes and abundances, or npFe0,
            that the bands cannot tell apart).
        grain_size_at_bound: with ``free`` only: ``pixels + (n,)`` bool, a free grain
            size at one of its bounds (``grain_size_bounds``).
        npfe_at_bound: with ``free`` only: ``pixels`` bool, a free npFe0 fraction at one
            of its bounds.
    """

    names: tuple
    route: str
    fractions: np.ndarray
    covariance: np.ndarray
    at_bound: np.ndarray
    cross_section: np.ndarray
    remainder: np.ndarray
    status: np.ndarray
    iterations: np.ndarray
    residual_norm: np.ndarray
    grain_size: np.ndarray | None = None
    npfe_fraction: np.ndarray | None = None
    parameter_covariance: np.ndarray | None = None
    grain_size_at_bound: np.ndarray | None = None
    npfe_at_bound: np.ndarray | None = None

    def __getitem__(self, name: str) -> np.ndarray:
        """The mass fraction map (``pixels``) of the endmember `name`."""
        return self.fractions[..., self.names.index(name)]

    def sigma(self, name: str) -> np.ndarray:
        """1-sigma uncertainty of the mass fraction of `name` (sqrt of its variance)."""
        index = self.names.index(name)
        return np.sqrt(self.covariance[..., index, index])

    def counts(self) -> dict[str, int]:
        """Number of pixels per status name."""
        values = np.bincount(self.status.ravel().astype(np.int64), minlength=len(Status))
        return {code.name: int(values[code]) for code in Status}
