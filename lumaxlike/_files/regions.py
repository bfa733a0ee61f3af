"""Regional fits of a stack of cube files (`fit_file(regions=..., regional=...)`), streamed.

A region's problem couples all its pixels (the regional parameters are one value for
all of them), so unlike the other file commands its pixels cannot be solved block by
block. The run has two passes, each bounded in memory:

1. The regions, in groups: the label raster is read once by blocks of rows to count
   every region's pixels and the rows it spans (:func:`plan_regions`). A region whose
   fit would need more memory than the cap (`region_pixel_bytes` per pixel,
   ``region_memory`` in all) is refused before anything is fitted, naming it. Regions
   are taken in the order of their first row and packed into groups that fit the cap;
   for each group the rows it spans are read block by block, the group's pixels are
   gathered (in raster order) and `lumaxlike.fit` solves them with ``regions=`` in
   memory (:func:`fit_region_groups`: here, or one group per task on the run's
   workers), exactly as the in-memory call on the whole image would (a region's
   Levenberg-Marquardt is its own: its steps, damping and statuses do not depend on the
   other regions solved with it, and its pixels are summed in the same order). A
   group's result maps are kept on disk in the run's journal (:class:`RegionStore`),
   so ``--resume`` skips the groups already fitted.
2. The maps, by blocks of rows as every file command writes them: each block is
   assembled from the stored groups' pixels (memory-mapped; pixels in no region get
   TOO_FEW_OBSERVATIONS, NaN maps and 0 observations, as in `lumaxlike.fit`), written
   and journaled.

Memory is bounded by the cap (the largest group) plus a block; with workers, each
worker fits one group at a time under the cap, and this process holds the gathered
observations of at most the pool's ``max_in_flight`` groups. The cubes are read once
per group over the rows the group spans (once in all for tiles in raster order; a
scattered unit spanning the whole image costs a pass of its own).
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np

from .._inverse.fit.fit import fit
from .._io.read.raster import BandRaster, check_aligned, iter_row_slices
from .._operations.good_bands import good_bands_only, spread_to_all_bands
from .._run.region_groups import pack_regions
from .._signals import raise_if_interrupted
from .._status import Status

__all__ = [
    "RegionPlan",
    "RegionStore",
    "assembled_block",
    "fit_gathered_group",
    "fit_region_groups",
    "gather_region_group",
    "plan_regions",
    "read_labels",
]


def read_labels(raster: BandRaster, rows: slice) -> np.ndarray:
    """The region labels of ``rows``: int64 ``(rows, cols)``, -1 where the raster has
    nodata (left out, as a negative label).

    Raises:
        ValueError: naming the file, for a label that is not an integer.
    """
    values = raster.read(1, rows)
    finite = np.isfinite(values)
    if not np.all(values[finite] == np.round(values[finite])):
        raise ValueError(
            f"regions raster {raster.path} must hold integer labels (rows {rows.start} to "
            f"{rows.stop - 1} hold others)"
        )
    return np.where(finite, values, -1).astype(np.int64)


@dataclasses.dataclass(frozen=True)
class RegionPlan:
    """The regions of a label raster and the groups they are fitted in.

    Attributes:
        labels: (R,) the region labels (>= 0), ascending.
        pixels: (R,) pixels per region.
        groups: per group, ``(labels of its regions, rows slice it spans)``.
    """

    labels: np.ndarray
    pixels: np.ndarray
    groups: tuple


def plan_regions(
    raster: BandRaster, grid, rows_per_block: int, pixel_bytes: int, memory: float
) -> RegionPlan:
    """Count the regions of a label raster by blocks of rows and pack them in groups.

    Args:
        raster: the open label raster (one band), checked against ``grid``.
        grid: the cubes' `RasterGrid`.
        rows_per_block: rows read at a time.
        pixel_bytes: `region_pixel_bytes` of the fit; memory: the cap [bytes].

    Raises:
        ValueError: naming the file: not one band, not on the cubes' grid, not integer,
            no region at all, or a region above the cap.
    """
    if raster.count != 1:
        raise ValueError(f"regions raster {raster.path} must have one band, it has {raster.count}")
    check_aligned(grid, raster.grid, "regions")
    counts: dict[int, int] = {}
    first: dict[int, int] = {}
    last: dict[int, int] = {}
    for rows in iter_row_slices(grid.height, rows_per_block):
        labels = read_labels(raster, rows)
        for row, line in enumerate(labels, start=rows.start):
            found, number = np.unique(line[line >= 0], return_counts=True)
            for label, count in zip(found.tolist(), number.tolist()):
                counts[label] = counts.get(label, 0) + count
                first.setdefault(label, row)
                last[label] = row
    if not counts:
        raise ValueError(f"regions raster {raster.path} holds no region (no label >= 0)")
    labels = np.array(sorted(counts), np.int64)
    pixels = np.array([counts[k] for k in labels.tolist()], np.int64)
    order = np.array(sorted(range(len(labels)), key=lambda i: (first[int(labels[i])], i)))
    groups = pack_regions(
        labels,
        pixels,
        order,
        pixel_bytes,
        memory,
        source=f" of {raster.path}",
        cap_name="region_memory, --region-memory",
    )
    return RegionPlan(
        labels=labels,
        pixels=pixels,
        groups=tuple(
            (
                group,
                slice(
                    min(first[k] for k in group.tolist()), 1 + max(last[k] for k in group.tolist())
                ),
            )
            for group in groups
        ),
    )


def gather_region_group(
    read_block: Callable, raster: BandRaster, group: tuple, rows_per_block: int, width: int
) -> tuple:
    """One group's pixels, gathered over the rows it spans, block by block.

    Args:
        read_block: ``rows -> (refl (rows, cols, bands, obs), to_sun, to_sensor,
            normal (rows, cols, obs, 3))``.
        raster: the label raster; group: ``(labels, rows)`` of `RegionPlan.groups`.
        rows_per_block: rows read at a time; width: the grid's columns.

    Returns:
        ``(flat pixel indices (M,) ascending, labels (M,), refl (M, bands, obs),
        to_sun, to_sensor, normal (M, obs, 3))``: the arguments of `fit_gathered_group`.
    """
    labels_of_group, span = group
    index, labels, refl = [], [], []
    geometry: tuple[list[np.ndarray], list[np.ndarray], list[np.ndarray]] = ([], [], [])
    for rows in iter_row_slices(span.stop - span.start, rows_per_block):
        rows = slice(rows.start + span.start, rows.stop + span.start)
        block_labels = read_labels(raster, rows)
        inside = np.isin(block_labels, labels_of_group)
        if not np.any(inside):
            continue
        cube, *vectors = read_block(rows)
        line, column = np.nonzero(inside)
        index.append((line + rows.start) * width + column)
        labels.append(block_labels[inside])
        refl.append(cube[inside])
        for k in range(3):
            geometry[k].append(vectors[k][inside])
        del cube, vectors
    return (
        np.concatenate(index),
        np.concatenate(labels),
        np.concatenate(refl),
        *(np.concatenate(g) for g in geometry),
    )


def fit_gathered_group(
    index, labels, refl, to_sun, to_sensor, normal, params, fit_options: dict
) -> tuple[np.ndarray, dict]:
    """The task of a group of regions (here or on a worker): `lumaxlike.fit` with
    ``regions=labels`` on its gathered pixels (`gather_region_group`).

    Returns:
        ``(index, {field: (M, bands)})``: the maps of `regional_block_fields`.
    """
    n_bands = refl.shape[-2]
    refl, fit_options, good = good_bands_only(refl, fit_options)  # bad bands left out
    result = fit(refl, to_sun, to_sensor, normal, params, regions=labels, **fit_options)
    return index, spread_to_all_bands(regional_block_fields(result), good, n_bands)


def fit_region_groups(
    plan: RegionPlan, store, gather: Callable, pool, params, fit_options, on_done
):
    """Fit every group of `plan` not in `store` yet, as tasks of `pool`, and save each.

    Groups are gathered here (`gather`: ``group -> gather_region_group``'s tuple) and
    submitted to `pool` (a `lumaxlike._run.pool.BlockPool` running `fit_gathered_group`:
    here, or on its workers, each fitting one group at a time under the memory cap); at
    most ``pool.max_in_flight`` gathered groups wait at once, so memory here is bounded
    by that many groups' observations. Results are saved in submission order;
    ``on_done(number)`` follows each group, a stored one included.
    """

    def collect():
        number, (index, block) = pool.pop()
        store.save(number, index, block)
        on_done(number)

    for number, group in enumerate(plan.groups):
        raise_if_interrupted()
        if number in store:
            on_done(number)
            continue
        while pool.full():
            collect()
        pool.submit(number, *gather(group), params, fit_options)
    while len(pool):
        raise_if_interrupted()
        collect()


def regional_block_fields(result) -> dict:
    """``{field: (M, bands)}`` of a flat `JointFitResult` (pixels (M,)): the maps
    `fit_file` writes, a pixel's shared and regional values, status, iterations and
    cost repeated in every band."""
    n_bands = result.observations.shape[-1]
    block = {name: result[name] for name in result.free}
    block.update({f"sigma_{name}": result.sigma(name) for name in result.free})
    block.update({f"dfs_{name}": result.dfs[name] for name in result.free})
    block.update(
        status=result.status,
        iterations=result.iterations,
        observations=result.observations,
        cost=result.cost,
    )
    return {
        name: np.ascontiguousarray(
            np.broadcast_to(value[:, None] if value.ndim == 1 else value, (len(value), n_bands))
        )
        for name, value in block.items()
    }


def assembled_block(block: dict) -> dict:
    """The task of a block of a regional run: its maps, assembled already."""
    return block


def _fill(name: str, dtype) -> object:
    """A pixel in no region: as `lumaxlike.fit` leaves it (NaN, 0, TOO_FEW_OBSERVATIONS)."""
    if name == "status":
        return Status.TOO_FEW_OBSERVATIONS
    return np.nan if np.issubdtype(dtype, np.floating) else 0


class RegionStore:
    """The fitted groups of a regional run, kept in its journal folder.

    A group is a folder ``regions/group-NNNNN`` of one ``.npy`` per map (and ``index.npy``,
    the flat pixel indices), written under a temporary name, flushed and renamed, so a
    group is complete or absent; blocks of the maps are assembled from them
    memory-mapped.

    Args:
        folder: the journal's folder (`lumaxlike._run.journal.Journal.folder`).
        groups: `RegionPlan.groups`; fields: the maps of a block.
    """

    def __init__(self, folder, groups: Sequence, fields: Sequence[str]):
        self.folder = Path(folder) / "regions"
        self.groups = tuple(groups)
        self.fields = tuple(fields)

    def _path(self, number: int) -> Path:
        return self.folder / f"group-{number:05d}"

    def __contains__(self, number: int) -> bool:
        return (self._path(number) / "index.npy").is_file()

    def save(self, number: int, index: np.ndarray, block: dict) -> None:
        """Store group ``number``'s pixel indices and maps (complete or not at all)."""
        path = self._path(number)
        partial = path.with_name(path.name + ".partial")
        shutil.rmtree(partial, ignore_errors=True)
        partial.mkdir(parents=True)
        for name, values in (*((f, block[f]) for f in self.fields), ("index", index)):
            with open(partial / f"{name}.npy", "wb") as file:
                np.save(file, np.asarray(values), allow_pickle=False)
                file.flush()
                os.fsync(file.fileno())
        os.replace(partial, path)

    def assemble(self, rows: slice, width: int, n_bands: int) -> dict:
        """The maps ``{field: (rows, cols, bands)}`` of a block of rows (every group
        saved: their types are the first group's)."""
        n = (rows.stop - rows.start) * width
        dtypes = {
            name: np.load(self._path(0) / f"{name}.npy", mmap_mode="r").dtype
            for name in self.fields
        }
        block = {
            name: np.full((n, n_bands), _fill(name, dtypes[name]), dtypes[name])
            for name in self.fields
        }
        for number, (_, span) in enumerate(self.groups):
            if span.stop <= rows.start or span.start >= rows.stop:
                continue
            path = self._path(number)
            index = np.load(path / "index.npy", mmap_mode="r")
            low, high = np.searchsorted(index, [rows.start * width, rows.stop * width])
            if low == high:
                continue
            where = np.asarray(index[low:high]) - rows.start * width
            for name in self.fields:
                block[name][where] = np.load(path / f"{name}.npy", mmap_mode="r")[low:high]
        return {
            name: values.reshape(rows.stop - rows.start, width, n_bands)
            for name, values in block.items()
        }
