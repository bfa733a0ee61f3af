"""Small fixed-size vectors and matrices held as tuples of scalars, so that code written
over arrays (the exact H's tables, `h_functions.exact_terms`) traces to scalar operations.

The numba `fit` prints the model's derivative program as straight-line scalar Python
(`_jaxpr_to_python`, which handles scalar jaxprs only). Traced with its tables as
`ScalarVector`s, `exact_terms` becomes scalar multiplications and additions (the tables'
entries are Python floats, folded into literals) instead of the dot products, slices and
broadcasts of its JAX twin, with the same arithmetic up to the order of the sums.
"""

from __future__ import annotations

import operator

import numpy as np

__all__ = [
    "ScalarVector",
    "scalar_coefficients_from",
    "scalar_expm1",
    "scalar_matrix_vector",
    "scalar_table_like",
    "scalar_vector_matrix",
]


class ScalarVector:
    """A vector as a tuple of scalars (numbers or JAX tracers), or a matrix as a vector of
    row vectors: element-wise +, -, *, / with scalars and vectors of the same length."""

    __slots__ = ("items",)

    def __init__(self, items):
        self.items = tuple(items)

    def __len__(self):
        return len(self.items)

    def __getitem__(self, index):
        return self.items[index]

    def _map(self, other, op):
        if isinstance(other, ScalarVector):
            return ScalarVector(op(a, b) for a, b in zip(self.items, other.items, strict=True))
        return ScalarVector(op(a, other) for a in self.items)

    def __add__(self, other):
        return self._map(other, operator.add)

    def __radd__(self, other):
        return self._map(other, lambda a, b: b + a)

    def __sub__(self, other):
        return self._map(other, operator.sub)

    def __rsub__(self, other):
        return self._map(other, lambda a, b: b - a)

    def __mul__(self, other):
        return self._map(other, operator.mul)

    def __rmul__(self, other):
        return self._map(other, lambda a, b: b * a)

    def __truediv__(self, other):
        return self._map(other, operator.truediv)

    def __rtruediv__(self, other):
        return self._map(other, lambda a, b: b / a)


def scalar_table_like(table, like):
    """A constant NumPy table (1-D or 2-D) as a `ScalarVector` of Python floats."""
    table = np.asarray(table, np.float64)
    if table.ndim == 1:
        return ScalarVector(table.tolist())
    return ScalarVector(ScalarVector(row) for row in table.tolist())


def scalar_expm1(vector, expm1):
    """expm1 of each entry (`expm1`: the scalar primitive)."""
    return ScalarVector(expm1(a) for a in vector.items)


def _dot(pairs):
    total = None
    for a, b in pairs:
        total = a * b if total is None else total + a * b
    return total


def scalar_matrix_vector(matrix, vector):
    """matrix @ vector, each entry summed in column order."""
    return ScalarVector(_dot(zip(row.items, vector.items, strict=True)) for row in matrix.items)


def scalar_vector_matrix(vector, matrix):
    """vector @ matrix, each entry summed in row order."""
    columns = len(matrix.items[0])
    return ScalarVector(
        _dot((v, row.items[j]) for v, row in zip(vector.items, matrix.items, strict=True))
        for j in range(columns)
    )


def scalar_coefficients_from(vector, offset, count):
    """vector[offset : offset + count] as a tuple of scalars."""
    return vector.items[offset : offset + count]
