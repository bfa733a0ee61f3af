"""Default scalar primitives for `equations`: Python's `math`, so the equations also run as
plain Python on floats. `_backends` swaps these names for `jax.numpy` or numba-compiled
equivalents; the equations themselves are written once."""

import math
import sys

sqrt = math.sqrt
exp = math.exp
expm1 = math.expm1
log = math.log
log1p = math.log1p
tan = math.tan
cos = math.cos
atan2 = math.atan2
NAN = math.nan
isfinite = math.isfinite


def epsilon(x):
    """The machine epsilon of x's floating-point type (Python floats: float64's)."""
    return sys.float_info.epsilon


def where(condition, if_true, if_false):
    """Branch-free select: both arguments are already evaluated, as in `jnp.where`."""
    return if_true if condition else if_false


def maximum(a, b):
    return a if a > b else b


def minimum(a, b):
    return a if a < b else b
