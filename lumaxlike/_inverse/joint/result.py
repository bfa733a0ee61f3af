"""The result type of a joint `fit` (shared parameters, priors)."""

from __future__ import annotations

import dataclasses

import numpy as np
from jaxtyping import Float, Int, Int8, Int32

from ..result import _status_counts
from .covariance import full_covariance

__all__ = ["JointFitResult"]


@dataclasses.dataclass(frozen=True)
class JointFitResult:
    """Per-problem results of `lumaxlike.fit` with `shared` parameters or a `prior`.

    A problem is one pixel with all its bands when some parameters are shared (its
    "problem shape" is ``pixels``), else one pixel and band (``pixels + (bands,)``).

    Attributes:
        free: names of the fitted parameters, per-band ones first, then the shared ones.
        shared: the names among `free` that take one value per pixel for all its bands.
        values: {name: fitted value}: shape ``pixels + (bands,)`` for a per-band
            parameter, ``pixels`` for a shared one (w [-], b [-], c [-], roughness
            [rad], hs, bs0, hc, bc0 [-]); NaN where the problem was not solved (status
            other than CONVERGED, MAX_ITER, UNDETERMINED or MULTIMODAL).
        status: `Status` codes (int8) of every problem (problem shape). A pixel whose
            joint problem has a band with fewer than `min_observations` valid ones is
            TOO_FEW_OBSERVATIONS, one that uses an observation below the horizon
            INVALID_GEOMETRY, one with no finite observation in any band
            NONFINITE_INPUT, one whose H (priors included) is singular UNDETERMINED.
            With `fit`'s ``starts=`` (and its default probe with `shared`), MULTIMODAL
            where the kept (lowest) minimum converged and another start converged to a
            distinct one within chi^2 4 of it: the values are the lowest minimum's. In
            a regional fit EXCLUDED: a pixel left out of its region (`Status`).
        iterations: Levenberg-Marquardt steps taken (int32, problem shape).
        cost: the objective at the solution (problem shape): the sum over the problem's
            bands and observations of ((model - observed) / refl_sigma)^2 plus the prior
            rows' ((x - mean) / sigma)^2 [-]; without refl_sigma, the plain sum of
            squared residuals [1/sr^2].
        covariance_bands: ``pixels + (bands, p, p)``: the posterior covariance of each
            band's per-band parameters (in `free` order), p the number of per-band ones.
        covariance_shared: ``problems + (s, s)``: that of the shared parameters.
        covariance_cross: ``pixels + (bands, p, s)``: between a band's per-band
            parameters and the shared ones. `full_covariance` assembles all of them,
            with the blocks between bands, into one matrix per pixel. With refl_sigma the
            inverse of the weighted H (prior rows included); without, (J^T J)^-1 times
            the residual variance cost / (observations - parameters). NaN where unsolved
            or UNDETERMINED.
        dfs: {name: degrees of freedom for signal}, the diagonal of the averaging kernel
            A = I - S_post S_prior^-1 (Rodgers 2000), shaped like `values[name]`: 1 where
            the data alone determine the parameter (no prior, or a prior far wider than
            the posterior), towards 0 where the prior does.
        observations: valid observations of every pixel and band (int32,
            ``pixels + (bands,)``) after masking.
        regional: with ``regions=``: the names that take one value per region; their
            `values` are maps (``pixels``, the region's value, NaN outside every
            region), their covariance rows follow the shared ones in
            `covariance_shared` and `covariance_cross` (so each pixel's blocks cover its
            whole marginal problem: its own parameters and its region's).
        region_labels: the labels of the regions (sorted, the non-negative ones of
            `regions`); region_values, region_sigma: {name: (regions,)} the regional
            parameters and their 1-sigma; region_status, region_iterations,
            region_cost: per region (a region with no pixel it could fit is
            TOO_FEW_OBSERVATIONS). In a regional fit `status`, `iterations` and `cost`
            are per pixel: its region's status (UNDETERMINED where the pixel's own
            parameters are not determined) and steps, and its part of the objective.
        at_bound: {name: bool array shaped like `values[name]`}: the fitted value sits
            on its lower or upper bound, where the Laplace `sigma` is not the width of
            the posterior (docs/fit.md); as `FitResult.at_bound`.
        profile: with `fit`'s ``profile=``: {name: ``problems + (2,)``} the
            profile-likelihood 2-sigma interval (lower, upper end) of each named shared
            parameter: where chi^2, minimised over every other parameter, rises by 4
            (docs/joint-fits.md#honest-intervals); NaN where the search did not settle.
    """

    free: tuple[str, ...]
    shared: tuple[str, ...]
    values: dict[str, np.ndarray]
    status: Int8[np.ndarray, "*problems"]
    iterations: Int32[np.ndarray, "*problems"]
    cost: Float[np.ndarray, "*problems"]
    covariance_bands: Float[np.ndarray, "*pixels bands p p"]
    covariance_shared: Float[np.ndarray, "*problems s s"]
    covariance_cross: Float[np.ndarray, "*pixels bands p s"]
    dfs: dict[str, np.ndarray]
    observations: Int32[np.ndarray, "*pixels bands"]
    regional: tuple[str, ...] = ()
    region_labels: Int[np.ndarray, " regions"] | None = None
    region_values: dict = dataclasses.field(default_factory=dict)
    region_sigma: dict = dataclasses.field(default_factory=dict)
    region_status: np.ndarray | None = None
    region_iterations: np.ndarray | None = None
    region_cost: np.ndarray | None = None
    at_bound: dict = dataclasses.field(default_factory=dict)
    profile: dict = dataclasses.field(default_factory=dict)

    def __getitem__(self, name: str) -> np.ndarray:
        """The fitted values of the free parameter `name`."""
        return self.values[name]

    def sigma(self, name: str) -> np.ndarray:
        """1-sigma marginal uncertainty of the free parameter `name`, shaped like its values."""
        if name in self.shared + self.regional:
            index = (self.shared + self.regional).index(name)
            return np.sqrt(self.covariance_shared[..., index, index])
        index = self.free.index(name)
        return np.sqrt(self.covariance_bands[..., index, index])

    def full_covariance(self) -> np.ndarray:
        """The covariance of all the parameters of every pixel's problem.

        Returns:
            ``pixels + (bands p + s, bands p + s)`` (``pixels + (bands, p, p)``, the
            independent problems' own, where nothing is shared): band 0's per-band
            parameters, band 1's, ..., then the shared ones. It takes bands^2 p^2 values
            per pixel: ask for it on a region of interest.
        """
        if not self.shared:
            return self.covariance_bands
        return full_covariance(self.covariance_bands, self.covariance_shared, self.covariance_cross)

    def counts(self) -> dict[str, int]:
        """Number of problems per status name."""
        return _status_counts(self.status)
