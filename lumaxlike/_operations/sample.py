"""The posterior sampling over a stack of observations, declared once (`SAMPLE`): its
block task (`sample_file_block`: `lumaxlike.sample` on a block of stacked observations)
and its maps (`lumaxlike._sample.maps.sample_fields`, `sample_layout`)."""

from __future__ import annotations

import numpy as np

from .._sample.maps import chunk_seed, result_maps, sample_fields, sample_layout
from .declaration import Operation

__all__ = ["SAMPLE", "sample_file_block"]


def sample_file_block(
    refl, to_sun, to_sensor, normal, params, options, *, first_pixel: int, pixels: int
) -> dict[str, np.ndarray]:
    """The task of a block of `sample_file`: `lumaxlike.sample` on stacked observations.

    Args:
        refl: r [1/sr], ``(rows, cols, bands, observations)``.
        to_sun, to_sensor, normal: ``(rows, cols, observations, 3)``.
        params: `lumaxlike.HapkeParams`.
        options: keyword arguments of `lumaxlike.sample` (free, shared, refl_sigma, ...;
            ``seed`` is the run's, made the block's by `chunk_seed`).
        first_pixel: linear index of the block's first pixel in the image.
        pixels: pixels of a full block: a shorter (last) block is padded with pixels
            without observations (not sampled, then dropped), so that every block runs
            the same compiled program.

    Returns:
        ``{field: (rows, cols, bands)}`` of the maps of `sample_fields`; the per-pixel
        maps of a joint problem (shared parameters, status, acceptance, divergences)
        repeated in every band layer.
    """
    from .._sample.sample import sample

    options = dict(options)
    seed = chunk_seed(options.pop("seed", 0), first_pixel)
    rows, cols, bands, n_obs = refl.shape
    n = rows * cols
    flat = [refl.reshape(n, bands, n_obs)] + [
        v.reshape(n, n_obs, 3) for v in (to_sun, to_sensor, normal)
    ]
    if n < pixels:  # padding: no finite observation (NONFINITE_INPUT, not sampled)
        flat[0] = np.concatenate([flat[0], np.full((pixels - n, bands, n_obs), np.nan)])
        for i in (1, 2, 3):
            flat[i] = np.concatenate(
                [flat[i], np.broadcast_to(flat[i][:1], (pixels - n, n_obs, 3))]
            )
    flat_refl, flat_to_sun, flat_to_sensor, flat_normal = flat
    result = sample(
        flat_refl, flat_to_sun, flat_to_sensor, flat_normal, params, seed=seed, **options
    )
    maps = {}
    for field, values in result_maps(result, result.free).items():
        values = values[:n].reshape((rows, cols) + values.shape[1:])
        per_pixel = values.ndim == 2  # a joint problem's: one value for all bands
        maps[field] = np.ascontiguousarray(
            np.broadcast_to(values[..., None] if per_pixel else values, (rows, cols, bands))
        )
    return maps


SAMPLE = Operation(
    name="sample",
    block_task="lumaxlike._operations.sample:sample_file_block",
    fields=sample_fields(("w",)),
    layout=sample_layout,
    progress="sampling",
    verb="sampled",
)
"""`lumaxlike sample`, `sample_file` and `sample_dataarray`: posterior quantile maps per
pixel and band; the maps depend on the free parameters (``layout(free)``)."""
