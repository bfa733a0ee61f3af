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

from ..._shapes import as_float_array

__all__ = ["check_file_priors", "check_priors", "prior_arrays", "degrees_of_freedom"]


def check_priors(
    prior: Mapping | None,
    free,
    shared,
    pixel_shape,
    n_bands,
    has_sigma: bool,
    bounds: Mapping | None = None,
) -> dict:
    """{name: (mean, sigma)} of `prior`, checked and broadcast to flat arrays.

    A per-band parameter's mean and sigma broadcast to ``pixels + (bands,)`` (returned
    as (pixels, bands)), a shared one's to ``pixels`` (returned as (pixels,)).
    ``bounds``: {name: (lower, upper)} of the free parameters (the fit's); a mean outside
    them (where its sigma is finite) is refused: the fit would pin the parameter at the
    bound and call it converged.

    Raises:
        ValueError: naming `prior`, for a name that is not free, a value that is not a
            (mean, sigma) pair, a shape that does not broadcast, a non-finite mean, a
            mean outside the parameter's `bounds`, a sigma that is not positive (inf is
            allowed: no prior there), or priors without `refl_sigma` (their weight
            against the data needs the data's noise).
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
        if bounds is not None and name in bounds:
            lower, upper = (float(v) for v in bounds[name])
            outside = np.isfinite(sigma) & ((mean < lower) | (mean > upper))
            if np.any(outside):
                raise ValueError(
                    f"prior[{name!r}] mean {float(mean[outside][0])!r} lies outside {name}'s "
                    f"bounds [{lower:.6g}, {upper:.6g}]"
                    + (" (rad)" if name == "roughness" else "")
                    + ": the fit would pin it at the bound"
                )
        checked[name] = (mean, sigma)
    return checked


def check_file_priors(prior: Mapping | None, free, shared, bounds: Mapping) -> None:
    """Check the scalar priors of a file front end (`fit_file`, `sample_file`) before
    anything is read or written: as `check_priors`, and each a pair of numbers with a
    finite mean and a finite, positive sigma (they are recorded in the outputs).

    Raises:
        ValueError: naming `prior`, as `check_priors`, for a value that is not a pair of
            scalars or a sigma that is not finite and positive.
    """
    if not prior:
        return
    if not isinstance(prior, Mapping):
        raise ValueError(
            f"prior must be a mapping {{name: (mean, sigma)}}, got {type(prior).__name__}"
        )
    for name, pair in prior.items():
        if (
            not isinstance(pair, (tuple, list))
            or len(pair) != 2
            or np.ndim(pair[0]) + np.ndim(pair[1])
        ):
            raise ValueError(f"prior[{name!r}]: the file commands take scalar priors (mean, sigma)")
        sigma = float(pair[1])
        if not (np.isfinite(sigma) and sigma > 0.0):
            raise ValueError(f"prior[{name!r}] sigma must be positive and finite, got {sigma!r}")
    check_priors(prior, free, shared, (), 1, True, bounds)


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
