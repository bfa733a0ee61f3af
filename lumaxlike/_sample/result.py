"""`SampleResult`: the posterior summaries (and optionally the draws) of `sample`."""

from __future__ import annotations

import dataclasses

import numpy as np

from .._inverse.joint.result import JointFitResult
from .._inverse.result import FitResult, _status_counts
from .program import QUANTILE_LEVELS

__all__ = ["SampleResult"]


@dataclasses.dataclass(frozen=True)
class SampleResult:
    """Per-problem posterior of `lumaxlike.sample`; a problem is one pixel and band, or
    one pixel with all its bands where some parameters are `shared` (then the arrays
    described as ``pixels + (bands,)`` below are ``pixels`` for a shared parameter and
    for the per-problem fields: status, acceptance, divergences).

    Every per-parameter array is NaN where the problem was not sampled (status
    INVALID_GEOMETRY, NONFINITE_INPUT or TOO_FEW_OBSERVATIONS, from the warm-start `fit`).

    Attributes:
        free: names of the sampled parameters, per-band ones first, then the shared
            ones; the order of the covariance axes and of the draws' last axis.
        quantiles: {name: array of shape ``pixels + (bands, 5)``}: the posterior
            quantiles at `levels` (2.5, 16, 50, 84, 97.5 %), in the parameter's units
            (w, b, c [-], roughness [rad], ...); [1] to [3] is the central 68 % interval,
            [0] to [4] the 95 % one.
        mean: {name: posterior mean, shape ``pixels + (bands,)``}.
        covariance: posterior covariance of the free parameters,
            ``pixels + (bands, p, p)``; with `shared`, of all a pixel's parameters,
            ``pixels + (D, D)``, D = bands p + s: band 0's per-band parameters, band
            1's, ..., then the shared ones (the layout of
            `JointFitResult.full_covariance`).
        rhat: {name: rank-normalised split R-hat (Vehtari et al. 2021), the larger of
            its bulk and tail values, ``pixels + (bands,)``}.
        ess: {name: bulk effective sample size over all chains (rank-normalised,
            Vehtari et al. 2021: how well the centre of the posterior is sampled; the
            Monte Carlo error of the mean and median), ``pixels + (bands,)``}.
        ess_tail: {name: tail effective sample size, the smaller of the ESS of the
            indicators of the 5 % and 95 % quantiles (Vehtari et al. 2021; ArviZ's
            ``ess(method="tail")``): how well the tails, and so the 95 % interval, are
            sampled, ``pixels + (bands,)``}.
        acceptance: mean acceptance probability of the HMC transitions while sampling,
            ``pixels + (bands,)``.
        divergences: divergent transitions while sampling (int32), ``pixels + (bands,)``.
        status: `Status` codes (int8), ``pixels + (bands,)``: CONVERGED where every free
            parameter's R-hat is at most `max_rhat` and its bulk and tail ESS at least
            `min_ess`, NOT_MIXED where one is not (its numbers are then not to be
            trusted), MULTIMODAL where a fit started near a bound found a mode the
            chains did not visit (the numbers describe the other mode only), else the
            warm-start fit's status of a problem that was not sampled.
        observations: valid observations of each problem (int32).
        fit: the warm-start `FitResult` (its values and Laplace covariance), a
            `JointFitResult` with `shared` or `prior`.
        draws: with ``return_samples=True``, the draws, ``pixels + (bands, chains,
            draws, p)`` (constrained, in the parameters' units; with `shared`,
            ``pixels + (chains, draws, D)`` in `covariance`'s order); else None.
        shared: the names among `free` shared by a pixel's bands (empty: none).
        levels: the quantile levels, (0.025, 0.16, 0.5, 0.84, 0.975).
    """

    free: tuple
    quantiles: dict
    mean: dict
    covariance: np.ndarray
    rhat: dict
    ess: dict
    ess_tail: dict
    acceptance: np.ndarray
    divergences: np.ndarray
    status: np.ndarray
    observations: np.ndarray
    fit: FitResult | JointFitResult
    draws: np.ndarray | None = None
    shared: tuple = ()
    levels: tuple = QUANTILE_LEVELS

    def __getitem__(self, name: str) -> np.ndarray:
        """The posterior median of the free parameter `name`."""
        return self.quantiles[name][..., 2]

    def counts(self) -> dict[str, int]:
        """Number of problems per status name."""
        return _status_counts(self.status)

    def draws_dataset(self, pixel_dims=None):
        """The draws as an `xarray.Dataset` in ArviZ's posterior layout: one variable per
        free parameter with dims ``("chain", "draw") + pixel_dims + ("band",)`` (a shared
        one's without "band"), and ``status`` (dims ``pixel_dims + ("band",)``, or
        `pixel_dims` with `shared`).

        Args:
            pixel_dims: names of the pixel axes; default ``("y", "x")`` for two,
                ``("pixel",)`` for one, ``pixel_0, pixel_1, ...`` otherwise.
        Raises:
            ValueError: if the result holds no draws (``return_samples=False``), or
                pixel_dims does not name every pixel axis.
        """
        import xarray as xr

        from .._status import Status

        if self.draws is None:
            raise ValueError(
                "this SampleResult holds no draws: call sample(..., return_samples=True)"
            )
        n_pixel_axes = self.status.ndim - (0 if self.shared else 1)
        if pixel_dims is None:
            pixel_dims = {2: ("y", "x"), 1: ("pixel",)}.get(
                n_pixel_axes, tuple(f"pixel_{k}" for k in range(n_pixel_axes))
            )
        pixel_dims = tuple(pixel_dims)
        if len(pixel_dims) != n_pixel_axes:
            raise ValueError(f"pixel_dims must name {n_pixel_axes} pixel axes, got {pixel_dims!r}")
        variables = {
            name: (
                ("chain", "draw") + pixel_dims + (() if name in self.shared else ("band",)),
                self._draws_of(name, n_pixel_axes),
                {"long_name": f"posterior draws of {name}"},
            )
            for name in self.free
        }
        variables["status"] = (
            pixel_dims + (() if self.shared else ("band",)),
            self.status,
            {"long_name": "sample status", **Status.flag_attrs()},
        )
        return xr.Dataset(variables)

    def _draws_of(self, name, n_pixel_axes):
        """The draws of `name`, (chain, draw) + pixels (+ (band,) if per band)."""
        assert self.draws is not None
        pixels = tuple(range(n_pixel_axes))
        if not self.shared:  # (pixels..., band, chain, draw, p)
            j = self.free.index(name)
            return np.transpose(
                self.draws[..., j], (n_pixel_axes + 1, n_pixel_axes + 2, *pixels, n_pixel_axes)
            )
        # (pixels..., chain, draw, D): band k's per-band parameter j at k p + j
        band_free = tuple(n for n in self.free if n not in self.shared)
        p, n_per_band = len(band_free), self.draws.shape[-1] - len(self.shared)
        if name in self.shared:
            values = self.draws[..., n_per_band + self.shared.index(name)]
            return np.transpose(values, (n_pixel_axes, n_pixel_axes + 1, *pixels))
        values = self.draws[..., band_free.index(name) : n_per_band : p]
        return np.transpose(values, (n_pixel_axes, n_pixel_axes + 1, *pixels, n_pixel_axes + 2))

    def to_zarr(self, store, pixel_dims=None, **kwargs):
        """Write `draws_dataset` as a zarr store, zarr format 2 with consolidated metadata
        (as lumaxlike's other zarr outputs; ``kwargs`` go to `xarray.Dataset.to_zarr` and
        override those)."""
        options = {"mode": "w", "zarr_format": 2, "consolidated": True, **kwargs}
        return self.draws_dataset(pixel_dims).to_zarr(store, **options)
