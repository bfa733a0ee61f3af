"""Regional fits in groups of regions under a memory cap, shared by `fit_file(regions=)`
(``lumaxlike fit --regions``) and `fit_dataarray(regions=)`: a region's problem couples
all its pixels, so whole regions are fitted at once, as many as fit the cap together.

`region_pixel_bytes` is the memory a regional fit needs per pixel; `pack_regions` refuses
a region above the cap (naming it) and packs the others, in a given order, into groups.
"""

from __future__ import annotations

import numpy as np

__all__ = ["REGION_MEMORY_BYTES", "pack_regions", "region_pixel_bytes"]

REGION_MEMORY_BYTES = 4 * 2**30
"""Default cap on the memory of one group of regions fitted at once [bytes] (4 GiB)."""


def region_pixel_bytes(n_bands: int, n_obs: int, n_band_free: int, n_shared: int) -> int:
    """Memory a regional fit needs per pixel of its region [bytes], an upper estimate.

    The gathered and masked observations (reflectance: bands x observations; three
    direction vectors per observation), the Levenberg-Marquardt state's arrow blocks
    (bands x p x (p + s + r) and their right-hand sides, at the point, the trial and
    the step's temporaries) and the result's covariance blocks, in float64.

    Args:
        n_bands, n_obs: bands and observations of a pixel.
        n_band_free: per-band free parameters p; n_shared: shared plus regional ones.
    """
    p, s = n_band_free, n_shared
    observations = 3 * n_bands * n_obs + 3 * 9 * n_obs
    blocks = n_bands * p * (p + s + 1) + (s + 1) * s
    return int(8 * (observations + 10 * blocks + 4 * n_bands * (p + s)))


def pack_regions(
    labels: np.ndarray,
    pixels: np.ndarray,
    order: np.ndarray,
    pixel_bytes: int,
    memory: float,
    *,
    source: str = "",
    cap_name: str = "region_memory",
) -> list[np.ndarray]:
    """The groups of regions fitted at once: regions taken in ``order`` and packed
    greedily, a new group started where the next region would pass ``memory``.

    Args:
        labels: (R,) the region labels; pixels: (R,) each region's pixel count.
        order: (R,) indices into ``labels``, the order regions are packed in.
        pixel_bytes: `region_pixel_bytes` of the fit; memory: the cap [bytes].
        source: where the labels come from, for the error (e.g. ``" of tiles.tif"``).
        cap_name: how the caller names the cap, for the error.
    Returns:
        Per group, its regions' labels (ascending).
    Raises:
        ValueError: naming the region and ``cap_name``, for a region whose fit needs
            more than ``memory``.
    """
    largest = int(np.argmax(pixels))
    if pixels[largest] * pixel_bytes > memory:
        raise ValueError(
            f"region {labels[largest]}{source} has {pixels[largest]} pixels: its fit needs "
            f"about {pixels[largest] * pixel_bytes / 2**20:.4g} MiB, above the cap of "
            f"{memory / 2**20:.4g} MiB ({cap_name}); raise the cap or split the region"
        )
    groups: list[list[int]] = []
    members: list[int] = []
    total = 0
    for k in order:
        size = int(pixels[k]) * pixel_bytes
        if members and total + size > memory:
            groups.append(members)
            members, total = [], 0
        members.append(int(labels[k]))
        total += size
    groups.append(members)
    return [np.array(sorted(group), np.int64) for group in groups]
