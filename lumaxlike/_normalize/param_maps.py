"""Per-pixel parameter maps: which pixels (and bands) share one set of Hapke parameters.

A map is one `HapkeParams` field given per pixel (shape ``pixels``) or per pixel and band
(``pixels + (bands,)``), as LROC WAC Hapke parameter maps are distributed: piecewise
constant over map bins. Pixels with the same values in every map form one group, solved
together with one `HapkeParams`; within a group, bands with equal parameters stay
together. The cost is one solver call per (group, band set): small for binned maps,
one call per pixel for maps whose every pixel differs.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

import numpy as np

from .._params import FIELD_NAMES, HapkeParams

__all__ = ["ParameterMaps", "check_param_maps"]


@dataclasses.dataclass(frozen=True)
class ParameterMaps:
    """Checked maps on flat pixels.

    Attributes:
        values: {field: float64 array (pixels, 1) or (pixels, bands)}, non-finite values
            replaced by the base parameter's value.
        invalid: (pixels, bands) bool, True where some map is NaN or infinite there.
    """

    values: dict
    invalid: np.ndarray

    @property
    def per_band(self) -> bool:
        """True when some map has a band axis."""
        return any(values.shape[1] > 1 for values in self.values.values())

    def groups(self, params: HapkeParams, split_bands: bool = False):
        """Yield ``(pixel indices, band indices, HapkeParams)`` covering every problem once;
        with `split_bands`, one band at a time."""
        names = list(self.values)
        columns = np.concatenate([self.values[name] for name in names], axis=1)
        keys, inverse = np.unique(columns, axis=0, return_inverse=True)
        inverse = inverse.reshape(-1)
        order = np.argsort(inverse, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(np.bincount(inverse, minlength=len(keys)))])
        widths = [self.values[name].shape[1] for name in names]
        n_bands = self.invalid.shape[1]
        for group, key in enumerate(keys):
            pixels = order[bounds[group] : bounds[group + 1]]
            per_name = np.split(key, np.cumsum(widths)[:-1])
            by_values: dict[tuple, list[int]] = {}
            for band in range(n_bands):
                values = tuple(float(v[0] if v.shape[0] == 1 else v[band]) for v in per_name)
                by_values.setdefault(values, []).append(band)
            for values, bands in by_values.items():
                band_sets = [[band] for band in bands] if split_bands else [bands]
                group_params = dataclasses.replace(params, **dict(zip(names, values)))
                for band_set in band_sets:
                    yield pixels, np.asarray(band_set), group_params


def check_param_maps(
    param_maps, params: HapkeParams, pixel_shape: tuple, n_bands: int
) -> ParameterMaps | None:
    """``param_maps`` checked against the call's shapes and the fields' ranges.

    Args:
        param_maps: None, or {HapkeParams field name: array of shape ``pixel_shape`` or
            ``pixel_shape + (n_bands,)``}, in the field's units (roughness [rad]).
        params: the base `HapkeParams` (its other fields and configuration).
    Returns:
        `ParameterMaps` on flat pixels, or None for no maps.
    Raises:
        ValueError: naming ``param_maps[name]``: an unknown or non-numeric field, a
            misshapen array, a finite value outside the field's valid range.
    """
    if param_maps is None:
        return None
    if not isinstance(param_maps, Mapping):
        raise ValueError(
            f"param_maps must be a mapping of HapkeParams field names to arrays, "
            f"got {type(param_maps).__name__}"
        )
    if not param_maps:
        return None
    n_pixels = int(np.prod(pixel_shape, dtype=np.int64))
    values, invalid = {}, np.zeros((n_pixels, n_bands), bool)
    for name, array in param_maps.items():
        label = f"param_maps[{name!r}]"
        if name not in FIELD_NAMES:
            raise ValueError(f"{label}: not a numeric HapkeParams field ({', '.join(FIELD_NAMES)})")
        array = np.asarray(array)
        if array.dtype.kind not in "fiu":
            raise ValueError(f"{label} must be a numeric array, got dtype {array.dtype}")
        if array.shape == tuple(pixel_shape):
            flat = array.reshape(n_pixels, 1).astype(np.float64)
        elif array.shape == tuple(pixel_shape) + (n_bands,):
            flat = array.reshape(n_pixels, n_bands).astype(np.float64)
        else:
            raise ValueError(
                f"{label} has shape {array.shape}; expected the pixel shape "
                f"{tuple(pixel_shape)} or pixels + (bands,) {tuple(pixel_shape) + (n_bands,)}"
            )
        finite = np.isfinite(flat)
        if np.any(finite):
            for extreme in (flat[finite].min(), flat[finite].max()):  # every range is an interval
                try:
                    changes: dict[str, Any] = {name: float(extreme)}
                    dataclasses.replace(params, **changes)
                except ValueError as error:
                    raise ValueError(f"{label} holds {float(extreme)!r}: {error}") from None
        invalid |= ~finite
        values[name] = np.where(finite, flat, float(getattr(params, name)))
    return ParameterMaps(values, invalid)
