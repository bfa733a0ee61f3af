"""The unconstrained coordinates the sampler moves in: each bounded parameter x mapped
to a real z, with the log-Jacobian that keeps the density right (as Stan does).

- both bounds finite, lower < x < upper: x = lower + (upper - lower) sigmoid(z);
- lower bound only: x = lower + exp(z);
- no finite bound: x = z.

`fit`'s bounds are closed intervals; the sampler's support is their interior (a flat
prior on the closed and on the open interval is the same density).
"""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

__all__ = ["dz_dx", "kinds_of", "log_jacobian", "to_constrained", "to_unconstrained"]

INTERVAL, LOWER, FREE = 0, 1, 2


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


def _each(kinds, z, interval, lower_only, free):
    return jnp.stack(
        [(interval, lower_only, free)[k](z[..., j], j) for j, k in enumerate(kinds)],
        axis=-1,
    )


def to_constrained(z, kinds, lower, upper):
    """x from z, (..., p) -> (..., p)."""
    return _each(
        kinds,
        z,
        lambda v, j: lower[j] + (upper[j] - lower[j]) * jax.nn.sigmoid(v),
        lambda v, j: lower[j] + jnp.exp(v),
        lambda v, j: v,
    )


def to_unconstrained(x, kinds, lower, upper):
    """z from x (x strictly inside its bounds), (..., p) -> (..., p)."""

    def interval(v, j):
        u = (v - lower[j]) / (upper[j] - lower[j])
        return jnp.log(u) - jnp.log1p(-u)

    return _each(kinds, x, interval, lambda v, j: jnp.log(v - lower[j]), lambda v, j: v)


def log_jacobian(z, kinds, lower, upper):
    """log |dx/dz| summed over the parameters, (..., p) -> (...)."""
    terms = _each(
        kinds,
        z,
        lambda v, j: jnp.log(upper[j] - lower[j]) + jax.nn.log_sigmoid(v) + jax.nn.log_sigmoid(-v),
        lambda v, j: v,
        lambda v, j: jnp.zeros_like(v),
    )
    return jnp.sum(terms, axis=-1)


def dz_dx(x, kinds, lower, upper):
    """The derivative of z along each x at x, (..., p) -> (..., p) (the diagonal of the
    transform's Jacobian, which maps a covariance of x to one of z)."""
    return _each(
        kinds,
        x,
        lambda v, j: (upper[j] - lower[j]) / ((v - lower[j]) * (upper[j] - v)),
        lambda v, j: 1.0 / (v - lower[j]),
        lambda v, j: jnp.ones_like(v),
    )
