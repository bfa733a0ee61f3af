"""Sums over the last axis written as additions in index order: element-wise operations,
so a problem's sum has the same bits in a batch of any shape. (XLA's reductions and dots
round differently with the shape of the batch, which would make a problem's steps depend
on its chunk and on compaction.) Used by the JAX solvers of `fit` and `unmix`, the shared Levenberg-Marquardt and `sample`."""

from __future__ import annotations

import functools

import jax.numpy as jnp

__all__ = ["dot_last", "sum_in_order", "sum_last"]


def sum_in_order(terms):
    """The sum of `terms` (arrays of one shape: a sequence, or an array's slices along its
    leading axis), as additions in their order."""
    return functools.reduce(jnp.add, terms)


def sum_last(a):
    """The sum over the last axis, as additions in index order."""
    return sum_in_order([a[..., k] for k in range(a.shape[-1])])


def dot_last(a, b):
    """`sum_last(a * b)`, with the products taken per slice: the same bits, but XLA
    fuses the whole sum into one loop instead of storing the product first."""
    return sum_in_order([a[..., k] * b[..., k] for k in range(a.shape[-1])])
