"""Gaussian priors of a joint fit: checked, broadcast, and their weight in the result.

Optimal estimation (Rodgers 2000, "Inverse methods for atmospheric sounding", ch. 2 and
5): with observations y of noise covariance S_e and a prior x ~ N(x_a, S_a), the MAP
estimate minimises (y - F(x))^T S_e^-1 (y - F(x)) + (x - x_a)^T S_a^-1 (x - x_a): each
prior is one more residual row (x - x_a) / sigma_a next to the observations' rows
(F(x) - y) / refl_sigma. The posterior covariance is S = (K^T S_e^-1 K + S_a^-1)^-1 at the
solution, and the averaging kernel A = I - S S_a^-1 says how much of each parameter the
data determined: its diagonal, the degrees of freedom for signal of each parameter, is 1
for a parameter without a prior (or one the data pin far tighter than its prior) and 0
for one the prior alone sets.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from .._shapes import as_float_array

__all__ = ["check_priors", "prior_arrays", "degrees_of_freedom"]


def check_priors(
    prior: Mapping | None, free, shared, pixel_shape, n_bands, has_sigma: bool
) -> dict:
    """{name: (mean, sigma)} of `prior`, checked and broadcast to flat arrays.

    A per-band parameter's mean and sigma broadcast to ``pixels + (bands,)`` (returned
    as (pixels, bands)), a shared one's to ``pixels`` (returned as (pixels,)).

    Raises:
        ValueError: naming `prior`, for a name that is not free, a value that is not a
            (mean, sigma) pair, a shape that does not broadcast, a non-finite mean, a
            sigma that is not positive (inf is allowed: no prior there), or priors
            without `refl_sigma` (their weight against the data needs the data's noise).
    """
    if not prior:
        return {}
    if not isinstance(prior, Mapping):
        raise ValueError(
            f"prior must be a mapping {{name: (mean, sigma)}}, got {type(prior).__name__}"
        )
    if not has_sigma:
        raise ValueError(
            "prior needs refl_sigma: a prior's weight against the observations is "
            "sigma_prior against the observations' noise (optimal estimation), so give "
            "refl_sigma (a scalar or one value per band)"
        )
    n_pixels = int(np.prod(pixel_shape, dtype=np.int64))
    checked = {}
    for name, pair in prior.items():
        if name not in free:
            raise ValueError(f"prior names {name!r}, which is not in free={tuple(free)!r}")
        try:
            mean, sigma = pair
        except (TypeError, ValueError):
            raise ValueError(
                f"prior[{name!r}] must be a pair (mean, sigma), got {pair!r}"
            ) from None
        shape = pixel_shape if name in shared else pixel_shape + (n_bands,)
        flat = (n_pixels,) if name in shared else (n_pixels, n_bands)
        arrays = []
        for label, value in (("mean", mean), ("sigma", sigma)):
            value = as_float_array(f"prior[{name!r}] {label}", value)
            try:
                value = np.broadcast_to(value, shape).reshape(flat)
            except ValueError:
                where = "pixels" if name in shared else "pixels + (bands,)"
                raise ValueError(
                    f"prior[{name!r}] {label} has shape {value.shape}, which does not broadcast to "
                    f"{where} = {shape}"
                    + (" (a shared parameter has no band axis)" if name in shared else "")
                ) from None
            arrays.append(value)
        mean, sigma = arrays
        if not np.all(sigma > 0.0):
            raise ValueError(
                f"prior[{name!r}] sigma must be positive (inf: no prior), got min {sigma.min()!r}"
            )
        if not np.all(np.isfinite(mean) | np.isinf(sigma)):
            raise ValueError(f"prior[{name!r}] mean must be finite where its sigma is finite")
        checked[name] = (mean, sigma)
    return checked


def prior_arrays(priors: dict, band_free, shared, first: int, last: int, n_bands: int):
    """(mean_b, weight_b, mean_s, weight_s) of the pixels first:last, for the solvers.

    mean_b, weight_b (pixels, bands, p); mean_s, weight_s (pixels, s); weight is
    1 / sigma_prior, 0 where there is no prior (the mean then 0).
    """
    index = slice(first, last)
    mean_b = np.zeros((last - first, n_bands, len(band_free)))
    weight_b = np.zeros_like(mean_b)
    mean_s = np.zeros((last - first, len(shared)))
    weight_s = np.zeros_like(mean_s)
    for j, name in enumerate(band_free):
        if name in priors:
            mean, sigma = (a[index] for a in priors[name])
            weight_b[..., j] = 1.0 / sigma
            mean_b[..., j] = np.where(np.isinf(sigma), 0.0, mean)
    for q, name in enumerate(shared):
        if name in priors:
            mean, sigma = (a[index] for a in priors[name])
            weight_s[:, q] = 1.0 / sigma
            mean_s[:, q] = np.where(np.isinf(sigma), 0.0, mean)
    return mean_b, weight_b, mean_s, weight_s


def degrees_of_freedom(variance, prior_sigma):
    """The diagonal of the averaging kernel, 1 - var_posterior / sigma_prior^2.

    Args:
        variance: posterior variances of a parameter (any shape).
        prior_sigma: its prior's sigma broadcast to that shape, or None (no prior: 1).
    Returns:
        Degrees of freedom for signal in [0, 1]; NaN where the variance is NaN.
    """
    variance = np.asarray(variance)
    if prior_sigma is None:
        return np.where(np.isnan(variance), np.nan, 1.0)
    with np.errstate(invalid="ignore"):
        return 1.0 - variance / np.asarray(prior_sigma) ** 2
