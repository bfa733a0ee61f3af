"""The unconstrained coordinates the sampler moves in: each bounded parameter x mapped
to a real z, with the log-Jacobian that keeps the density right (as Stan does).

- both bounds finite, lower < x < upper: x = lower + (upper - lower) Phi(z), Phi the
  standard normal distribution function (a probit transform);
- lower bound only: x = lower + exp(z);
- no finite bound: x = z.

The probit rather than the logit (Stan's) transform: a posterior flat up to a bound
(c near +-1 on the b-c ridge, theta-bar near 0 where the model stops depending on it) is
mapped to a Gaussian tail in z, where the logit makes an exponential one, heavier, which
HMC with a Gaussian kinetic energy crosses slowly (benchmarks/bench_sample.py: more
effective draws per gradient and fewer divergences with w, b, c and theta-bar free).

`fit`'s bounds are closed intervals; the sampler's support is their interior (a flat
prior on the closed and on the open interval is the same density).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import jax.scipy.special as jax_special
import numpy as np

__all__ = ["dz_dx", "kinds_of", "log_jacobian", "to_constrained", "to_unconstrained"]

INTERVAL, LOWER, FREE = 0, 1, 2
_LOG_SQRT_2PI = 0.5 * float(np.log(2.0 * np.pi))


def kinds_of(lower, upper) -> tuple[int, ...]:
    """The transform of each parameter (INTERVAL, LOWER or FREE) from its bounds."""
    kinds = []
    for lo, hi in zip(np.asarray(lower, float), np.asarray(upper, float)):
        if np.isfinite(lo) and np.isfinite(hi):
            kinds.append(INTERVAL)
        elif np.isfinite(lo) and hi == np.inf:
            kinds.append(LOWER)
        elif lo == -np.inf and hi == np.inf:
            kinds.append(FREE)
        else:
            raise ValueError(f"bounds ({lo}, {hi}): an upper bound alone is not supported")
    return tuple(kinds)


def _each(kinds, z, interval, lower_only, free, xp=jnp):
    return xp.stack(
        [(interval, lower_only, free)[k](z[..., j], j) for j, k in enumerate(kinds)],
        axis=-1,
    )


def to_constrained(z, kinds, lower, upper):
    """x from z, (..., p) -> (..., p)."""
    return _each(
        kinds,
        z,
        lambda v, j: lower[j] + (upper[j] - lower[j]) * jax_special.ndtr(v),
        lambda v, j: lower[j] + jnp.exp(v),
        lambda v, j: v,
    )


def to_unconstrained(x, kinds, lower, upper, xp=jnp):
    """z from x (x strictly inside its bounds), (..., p) -> (..., p); `xp` the array
    module (`numpy`: computed on the host in x's precision, whatever JAX's 64-bit mode)."""

    def interval(v, j):
        u = (v - lower[j]) / (upper[j] - lower[j])
        return _host_ndtri(u) if xp is np else jax_special.ndtri(u)

    return _each(kinds, x, interval, lambda v, j: xp.log(v - lower[j]), lambda v, j: v, xp)


def _host_ndtri(u):
    """The inverse of Phi on a numpy array, in its precision: JAX's, the one the chains'
    transform uses on the device, run in a local 64-bit scope on the CPU backend
    whatever the default device (a TPU has no float64)."""
    with jax.enable_x64(True), jax.default_device(jax.devices("cpu")[0]):
        return np.asarray(jax_special.ndtri(jnp.asarray(u)))


def log_jacobian(z, kinds, lower, upper):
    """log |dx/dz| summed over the parameters, (..., p) -> (...)."""
    terms = _each(
        kinds,
        z,
        lambda v, j: jnp.log(upper[j] - lower[j]) - 0.5 * v * v - _LOG_SQRT_2PI,
        lambda v, j: v,
        lambda v, j: jnp.zeros_like(v),
    )
    return jnp.sum(terms, axis=-1)


def dz_dx(x, kinds, lower, upper, xp=jnp):
    """The derivative of z along each x at x, (..., p) -> (..., p) (the diagonal of the
    transform's Jacobian, which maps a covariance of x to one of z); `xp` as in
    `to_unconstrained`."""
    z = to_unconstrained(x, kinds, lower, upper, xp)
    return _each(
        kinds,
        x,
        lambda v, j: xp.exp(0.5 * z[..., j] ** 2 + _LOG_SQRT_2PI) / (upper[j] - lower[j]),
        lambda v, j: 1.0 / (v - lower[j]),
        lambda v, j: xp.ones_like(v),
        xp,
    )
