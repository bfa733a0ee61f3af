"""The coordinates HMC moves in: a per-problem map from the unconstrained coordinates z
(`transform`) to coordinates u in which the posterior is closer to a standard Gaussian,
estimated from the warm-up's draws (a transport map, as in Parno & Marzouk 2018,
"Transport map accelerated Markov chain Monte Carlo", of order 2 and lower-triangular).

    y = A (z - m)            whitening: m the draws' mean, A = Lambda^-1/2 E^T from the
                             eigen-decomposition C = E Lambda E^T of their covariance,
                             principal axes widest first;
    u_j = y_j - sum_{k < min(j, K)} B_jk (y_k^2 - 1)
                             a quadratic shear: each whitened coordinate less its
                             least-squares regression on the squares of the K widest
                             ones before it.

The shear straightens a curved ridge: on Hapke posteriors the widest axis is the b-c
ridge (c poorly constrained, w and b following it along a curve), the next ones
theta-bar's plateau; a fixed dense metric sees the ridge's curvature as a narrow width
across it at every point, and so forces a small step along all of it. The shear is
triangular with a unit diagonal: |du/dz| is constant, so the density in u is the density
in z at z(u), with no Jacobian term. z(u) is explicit (`to_z`: the K driving coordinates
first, in order, then the others), so the sampler stays exact whatever the estimate.
"""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp

__all__ = ["Coordinates", "DRIVERS", "fit_coordinates", "identity", "move_states", "to_u", "to_z"]

# Whitened coordinates whose squares the others are regressed on (the shear's drivers).
DRIVERS = 3
# Largest shear coefficient (whitened units): a bound on a poorly estimated regression.
_MAX_SHEAR = 2.0
# Ridge penalty of the shear's regression, in draws' worth of a zero coefficient.
_SHEAR_PRIOR_DRAWS = 1.0


class Coordinates(NamedTuple):
    """One problem's map z -> u: mean (p,), whiten (p, p) = A, unwhiten (p, p) = A^-1,
    shear (p, K) = B (zero on and above the diagonal)."""

    mean: jax.Array
    whiten: jax.Array
    unwhiten: jax.Array
    shear: jax.Array


def identity(p: int, dtype) -> Coordinates:
    """u = z."""
    eye = jnp.eye(p, dtype=dtype)
    return Coordinates(jnp.zeros(p, dtype), eye, eye, jnp.zeros((p, min(p - 1, DRIVERS)), dtype))


def to_z(u, coordinates: Coordinates):
    """z from u, (p,) -> (p,)."""
    k = coordinates.shear.shape[1]
    squares: list[jax.Array] = []
    for j in range(k):  # the drivers, each from the ones before it
        y_j = u[j] + sum((coordinates.shear[j, i] * squares[i] for i in range(j)), 0.0)
        squares.append(y_j * y_j - 1.0)
    y = u + coordinates.shear @ jnp.stack(squares) if k else u
    return coordinates.mean + coordinates.unwhiten @ y


def to_u(z, coordinates: Coordinates):
    """u from z, (p,) -> (p,)."""
    k = coordinates.shear.shape[1]
    y = coordinates.whiten @ (z - coordinates.mean)
    return y - coordinates.shear @ (y[:k] * y[:k] - 1.0) if k else y


def fit_coordinates(draws, weight, previous_covariance, shrinkage_draws):
    """The map from a window's draws, and their covariance in u.

    Args:
        draws (n, chains, p): z; weight (n, chains): 1 for a draw to use, 0 not;
        previous_covariance (p, p): the covariance of z the estimate is shrunk toward,
        by `shrinkage_draws` draws' worth.
    Returns:
        (coordinates, covariance of z (p, p), covariance of u (p, p), shrunk toward the
        identity the same way: the metric).
    """
    dtype = draws.dtype
    p = draws.shape[-1]
    n = jnp.maximum(jnp.sum(weight), 2.0)
    mean, estimate = _weighted_moments(draws, weight, n)
    covariance = (n * estimate + shrinkage_draws * previous_covariance) / (n + shrinkage_draws)
    covariance = 0.5 * (covariance + covariance.T)
    eigenvalues, vectors = jnp.linalg.eigh(covariance)
    eigenvalues, vectors = eigenvalues[::-1], vectors[:, ::-1]  # widest first
    scale = jnp.sqrt(jnp.maximum(eigenvalues, jnp.finfo(dtype).tiny))
    whiten, unwhiten = vectors.T / scale[:, None], vectors * scale[None, :]
    y = jnp.einsum("ij,tcj->tci", whiten, draws - mean[None, None])
    k = min(p - 1, DRIVERS)
    shear = _shear(y, weight, k) if k else jnp.zeros((p, 0), dtype)
    coordinates = Coordinates(mean, whiten, unwhiten, shear)
    u = y - jnp.einsum("jk,tck->tcj", shear, y[..., :k] ** 2 - 1.0)
    _, u_estimate = _weighted_moments(u, weight, n)
    metric = (n * u_estimate + shrinkage_draws * jnp.eye(p, dtype=dtype)) / (n + shrinkage_draws)
    return coordinates, covariance, metric


def _weighted_moments(x, weight, n):
    """Mean (p,) and covariance (p, p) of draws x (n, chains, p) weighted by 0/1
    `weight` (n, chains), n = the weights' sum."""
    mean = jnp.einsum("tc,tci->i", weight, x) / n
    centred = (x - mean[None, None]) * weight[..., None]
    return mean, jnp.einsum("tci,tcj->ij", centred, centred) / (n - 1.0)


def _shear(y, weight, k):
    """B (p, k): each whitened coordinate's least-squares regression on the squares of
    the drivers before it (ridge-penalised, clipped), from draws y (n, chains, p)."""
    dtype, p = y.dtype, y.shape[-1]
    root = jnp.sqrt(weight)[..., None]
    features = (y[..., :k] ** 2 - 1.0) * root
    gram = jnp.einsum("tck,tcl->kl", features, features)
    cross = jnp.einsum("tck,tcj->jk", features, y * root)  # (p, k)
    allowed = jnp.arange(k)[None, :] < jnp.arange(p)[:, None]  # driver k before j
    eye_k = jnp.eye(k, dtype=dtype)
    grams = jnp.where(allowed[:, :, None] & allowed[:, None, :], gram[None], eye_k[None])
    shear = jnp.linalg.solve(
        grams + _SHEAR_PRIOR_DRAWS * eye_k[None], jnp.where(allowed, cross, 0.0)[..., None]
    )[..., 0]
    return jnp.where(allowed, jnp.clip(shear, -_MAX_SHEAR, _MAX_SHEAR), 0.0)


def move_states(states, old: Coordinates, new: Coordinates):
    """blackjax HMC states (chains...) in `old`'s u, the same points in `new`'s: the
    position mapped, the log density kept (the maps' Jacobians are constant), its
    gradient mapped by the maps' derivatives (no model evaluation)."""

    def one(u, gradient):
        z = to_z(u, old)
        _, from_old = jax.vjp(lambda v: to_u(v, old), z)
        gradient_z = from_old(gradient)[0]  # (du_old/dz)^T dlogp/du_old
        u_new = to_u(z, new)
        _, from_new = jax.vjp(lambda v: to_z(v, new), u_new)
        return u_new, from_new(gradient_z)[0]  # (dz/du_new)^T dlogp/dz

    position, gradient = jax.vmap(one)(states.position, states.logdensity_grad)
    return states._replace(position=position, logdensity_grad=gradient)
