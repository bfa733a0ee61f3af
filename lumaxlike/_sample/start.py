"""The chains' start of `sample`: `fit`'s solution and Laplace covariance mapped to the
sampler's unconstrained coordinates."""

from __future__ import annotations

import numpy as np

from . import transform

__all__ = ["laplace_start"]

# Margin inside a finite interval where a start on its bound is moved to (relative).
_START_MARGIN = 1e-4
# Largest standard deviation of the start in unconstrained coordinates (a flat prior's
# image in the probit coordinates of `transform` has 1).
_MAX_START_SIGMA = 2.0


def laplace_start(values, covariance, kinds, lower, upper):
    """The chains' Gaussian start in unconstrained coordinates from the fit.

    Args:
        values: (..., p) the fit's solution (its maximum a posteriori where it had
            priors); covariance: (..., p, p) its Laplace covariance (priors included);
            kinds, lower, upper: the transform of each of the p parameters.
    Returns:
        (centre (..., p), covariance (..., p, p)) in unconstrained coordinates. The
        centre is moved inside the bounds by its standard deviation (between
        `_START_MARGIN` and 5 % of the interval: a fit on a bound, where the Laplace
        Gaussian says little), and both are mapped through the transform (the
        covariance by its Jacobian at the centre), each unconstrained standard deviation
        at most `_MAX_START_SIGMA`. Where the fit gave no usable covariance
        (UNDETERMINED, or not positive definite) the start is the unit Gaussian around
        the centre.
    """
    p = values.shape[-1]
    eye = np.eye(p)
    low, high = np.asarray(lower), np.asarray(upper)  # the transform's bounds on the host
    with np.errstate(invalid="ignore", divide="ignore", over="ignore"):
        finite = np.all(np.isfinite(values), axis=-1)
        usable = np.all(np.isfinite(covariance), axis=(-2, -1)) & finite
        safe = np.where(usable[..., None, None], covariance, eye)
        usable &= np.all(np.linalg.eigvalsh(safe) > 0.0, axis=-1)
        safe = np.where(usable[..., None, None], covariance, eye)
        # the precision round trip of the start's covariance (C up to rounding), as the
        # start was computed when priors were added to the fit's precision here: the
        # chains' realisations depend on those last bits (tests/test_sample.py's R-hat
        # count at the defaults is marginal: one in 50 flips without the round trip)
        posterior = np.linalg.inv(np.linalg.inv(safe))
        centre = np.where(
            np.isfinite(values), values, 0.5 * (lower + np.minimum(upper, lower + 1.0))
        )
        span = np.where(np.isfinite(upper - lower), upper - lower, 1.0)
        sigma = np.sqrt(np.diagonal(posterior, axis1=-2, axis2=-1))
        margin = np.clip(
            np.where(usable[..., None], sigma, 0.05 * span),
            _START_MARGIN * span,
            0.05 * span,
        )
        centre = np.clip(
            centre, lower + margin, np.where(np.isfinite(upper), upper - margin, np.inf)
        )
        # numpy (the host, in the fit's precision): JAX here would compute in float32
        # in a process without 64-bit mode, whatever the input's precision
        slope = transform.dz_dx(centre, kinds, low, high, xp=np)
        metric = slope[..., :, None] * posterior * slope[..., None, :]
        z = transform.to_unconstrained(centre, kinds, low, high, xp=np)
        z_sigma = np.sqrt(np.diagonal(metric, axis1=-2, axis2=-1))
        capped = np.minimum(z_sigma, _MAX_START_SIGMA) / z_sigma
        metric = capped[..., :, None] * metric * capped[..., None, :]
    good = usable & np.all(np.isfinite(metric), axis=(-2, -1))
    metric = np.where(good[..., None, None], metric, eye)
    return z, metric
