"""Argument checks and the shape rules shared by `amsa`, `invert` and `fit`.

Geometry arrays have shape ``pixels + (3,)`` or ``(3,)`` (one geometry for all pixels).
A per-band array (w, refl) has shape ``pixels + (bands,)``: its last axis is always the
bands axis. The one exception keeps a cube of single values simple: when the geometry has
a pixel shape and the per-band array has exactly that shape, it holds one band.
"""

from __future__ import annotations

import numbers
from typing import TYPE_CHECKING, NamedTuple

import numpy as np

if TYPE_CHECKING:
    import jax

__all__ = [
    "Layout",
    "layout",
    "check_choice",
    "as_float_array",
    "check_positive_int",
    "check_band_sigma",
    "refl_sigma_error",
]


def check_choice(name: str, value, choices) -> None:
    """Raise ValueError naming the argument unless `value` is one of `choices`."""
    if value not in choices:
        raise ValueError(f"{name}={value!r} is not one of {', '.join(map(repr, choices))}")


def check_float_dtype(name: str, dtype) -> None:
    """Raise ValueError naming the argument unless `dtype` is float32/float64 or an integer.

    float16 (and other floats) are refused rather than silently promoted: the model's
    terms underflow and overflow in half precision.
    """
    dtype = np.dtype(dtype)
    if np.issubdtype(dtype, np.integer) and dtype != np.bool_:
        return
    if dtype not in (np.float32, np.float64):
        raise ValueError(
            f"{name} has dtype {dtype}; lumaxlike computes in float32 or float64 "
            f"(convert with .astype(numpy.float32) or .astype(numpy.float64))"
        )


def as_float_array(name: str, value) -> np.ndarray:
    """`value` as a NumPy array; ValueError naming `name` unless it is float32, float64
    or integer (integers are later computed in float64)."""
    array = np.asarray(value)
    if array.dtype == np.bool_ or not (
        np.issubdtype(array.dtype, np.floating) or np.issubdtype(array.dtype, np.integer)
    ):
        raise ValueError(f"{name} must be a numeric array, got dtype {array.dtype}")
    check_float_dtype(name, array.dtype)
    return array


def check_positive_int(name: str, value) -> int:
    """`value` as an int; ValueError naming `name` unless it is a positive integer."""
    if not isinstance(value, numbers.Integral) or isinstance(value, bool) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def check_band_sigma(refl_sigma, n_bands: int):
    """`refl_sigma` as a scalar or (bands,) float array, or None; ValueError naming it.

    Every bad value (zero, negative, NaN, infinite, a shape that is neither a scalar nor
    one per band) gets the one message of `refl_sigma_error`."""
    if refl_sigma is None:
        return None
    try:
        band_sigma = as_float_array("refl_sigma", refl_sigma)
    except ValueError:
        raise refl_sigma_error(refl_sigma, n_bands) from None
    if (
        band_sigma.ndim > 1
        or (band_sigma.ndim == 1 and band_sigma.shape[0] != n_bands)
        or not np.all(np.isfinite(band_sigma) & (band_sigma > 0.0))
    ):
        raise refl_sigma_error(refl_sigma, n_bands)
    return band_sigma


def refl_sigma_error(refl_sigma, n_bands: int) -> ValueError:
    """The error of a bad `refl_sigma` (the noise of the observations), for every value."""
    shown = np.asarray(refl_sigma).tolist() if np.ndim(refl_sigma) else refl_sigma
    return ValueError(
        f"refl_sigma must be positive and finite, one number or one per band ({n_bands}); "
        f"got {shown!r}"
    )


class Layout(NamedTuple):
    """How a call's arrays map onto flat (pixels, bands) and (pixels, 3) arrays."""

    pixel_shape: tuple  # shape of the pixel axes
    n_bands: int  # 1 when the per-band array has no band axis

    @property
    def n_pixels(self) -> int:
        return int(np.prod(self.pixel_shape, dtype=np.int64))


def layout(per_band_name: str, per_band: np.ndarray | jax.Array, geometry: dict) -> Layout:
    """Check the shapes of a per-band array against the geometry arrays.

    Args:
        per_band_name: argument name of the per-band array (for messages).
        per_band: array of shape ``pixels + (bands,)`` (or ``pixels`` for one band when
            the geometry has that pixel shape).
        geometry: {argument name: array of shape ``pixels + (3,)`` or ``(3,)``}.
    """
    pixel_shapes = set()
    for name, array in geometry.items():
        if array.ndim == 0 or array.shape[-1] != 3:
            raise ValueError(f"{name} must have shape pixels + (3,) or (3,), got {array.shape}")
        if array.ndim > 1:
            pixel_shapes.add(array.shape[:-1])
    if len(pixel_shapes) > 1:
        shapes = {name: array.shape for name, array in geometry.items()}
        raise ValueError(f"geometry arrays disagree on the pixel shape: {shapes}")
    if not pixel_shapes:  # one geometry for every pixel: the last axis holds the bands
        if per_band.ndim == 0:
            return Layout((), 1)
        return Layout(per_band.shape[:-1], per_band.shape[-1])
    (pixel_shape,) = pixel_shapes
    if per_band.shape == pixel_shape:
        return Layout(pixel_shape, 1)
    if per_band.shape[:-1] == pixel_shape and per_band.ndim == len(pixel_shape) + 1:
        return Layout(pixel_shape, per_band.shape[-1])
    raise ValueError(
        f"{per_band_name} has shape {per_band.shape}, which is neither the geometry's pixel "
        f"shape {pixel_shape} nor pixels + (bands,)"
    )
