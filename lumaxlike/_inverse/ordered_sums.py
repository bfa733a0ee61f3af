"""Sums over the last axis written as additions in index order: element-wise operations,
so a problem's sum has the same bits in a batch of any shape. (XLA's reductions and dots
round differently with the shape of the batch, which would make a problem's steps depend
on its chunk and on compaction.) Used by the JAX solvers of `fit` and `unmix`, the shared
Levenberg-Marquardt and `sample`.

The slices, products and additions bind `lax`'s primitives directly: the program is the
one `a[..., k]`, `*` and `jnp.add` give, but each of those goes through NumPy-style
indexing or a jitted function when traced, and a solver's step traces hundreds of them
(the normal equations of 4 parameters over 16 observations: 14 sums of 16 products),
which made them about half of `fit`'s round trace."""

from __future__ import annotations

import functools

import jax.numpy as jnp
from jax import lax

__all__ = ["dot_last", "dot_slices", "last_slices", "sum_in_order", "sum_last"]


def _alike(a, b) -> bool:
    """Whether `lax` takes a and b as they are: one dtype, one shape."""
    return jnp.result_type(a) == jnp.result_type(b) and jnp.shape(a) == jnp.shape(b)


def _add(a, b):
    """a + b: `lax.add` where a and b are `_alike`, else `jnp.add` (which broadcasts and
    promotes)."""
    return lax.add(a, b) if _alike(a, b) else jnp.add(a, b)


def _multiply(a, b):
    """a * b, as `_add`."""
    return lax.mul(a, b) if _alike(a, b) else jnp.multiply(a, b)


def sum_in_order(terms):
    """The sum of `terms` (arrays of one shape: a sequence, or an array's slices along its
    leading axis), as additions in their order."""
    return functools.reduce(_add, terms)


def last_slices(a) -> list:
    """The slices of `a` along its last axis, ``[a[..., k] for k in ...]``."""
    a = jnp.asarray(a)
    axis, shape = a.ndim - 1, a.shape
    return [
        lax.squeeze(lax.slice(a, (0,) * axis + (k,), shape[:-1] + (k + 1,)), (axis,))
        for k in range(shape[-1])
    ]


def sum_last(a):
    """The sum over the last axis, as additions in index order."""
    return sum_in_order(last_slices(a))


def dot_slices(a_slices, b_slices):
    """`dot_last` of two arrays given as their `last_slices` (sliced once for several
    products)."""
    return sum_in_order([_multiply(a, b) for a, b in zip(a_slices, b_slices, strict=True)])


def dot_last(a, b):
    """`sum_last(a * b)`, with the products taken per slice: the same bits, but XLA
    fuses the whole sum into one loop instead of storing the product first."""
    return dot_slices(last_slices(a), last_slices(b))
