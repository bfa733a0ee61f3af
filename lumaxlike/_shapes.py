"""Argument checks and the shape rules shared by `amsa`, `invert` and `fit`.

Geometry arrays have shape ``pixels + (3,)`` or ``(3,)`` (one geometry for all pixels);
per-band arrays have shape ``pixels`` or ``pixels + (bands,)``.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

__all__ = ["Layout", "layout", "check_choice"]


def check_choice(name: str, value, choices) -> None:
    """Raise ValueError naming the argument unless `value` is one of `choices`."""
    if value not in choices:
        raise ValueError(f"{name}={value!r} is not one of {', '.join(map(repr, choices))}")


class Layout(NamedTuple):
    """How a call's arrays map onto flat (pixels, bands) and (pixels, 3) arrays."""

    pixel_shape: tuple  # shape of the pixel axes
    n_bands: int  # 1 when the per-band array has no band axis

    @property
    def n_pixels(self) -> int:
        return int(np.prod(self.pixel_shape, dtype=np.int64))


def layout(per_band_name: str, per_band: np.ndarray, geometry: dict) -> Layout:
    """Check the shapes of a per-band array against the geometry arrays.

    Args:
        per_band_name: argument name of the per-band array (for messages).
        per_band: array of shape ``pixels`` or ``pixels + (bands,)``.
        geometry: {argument name: array of shape ``pixels + (3,)`` or ``(3,)``}.
    """
    pixel_shapes = set()
    for name, array in geometry.items():
        if array.ndim == 0 or array.shape[-1] != 3:
            raise ValueError(f"{name} must have shape pixels + (3,), got {array.shape}")
        if array.ndim > 1:
            pixel_shapes.add(array.shape[:-1])
    if len(pixel_shapes) > 1:
        shapes = {name: array.shape for name, array in geometry.items()}
        raise ValueError(f"geometry arrays disagree on the pixel shape: {shapes}")
    if not pixel_shapes:  # one geometry for every element: all axes of per_band are pixels
        return Layout(per_band.shape, 1)
    (pixel_shape,) = pixel_shapes
    if per_band.shape == pixel_shape:
        return Layout(pixel_shape, 1)
    if per_band.shape[:-1] == pixel_shape and per_band.ndim == len(pixel_shape) + 1:
        return Layout(pixel_shape, per_band.shape[-1])
    raise ValueError(
        f"{per_band_name} has shape {per_band.shape}, which is neither the geometry's pixel "
        f"shape {pixel_shape} nor pixels + (bands,)"
    )
