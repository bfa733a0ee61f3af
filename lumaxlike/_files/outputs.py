"""Where a file command's blocks go, written once for every command: the run's journal
(`--resume`), the `ResultWriter` that locks and then publishes the output set, and the
run layer's block loop (`lumaxlike._run.stream.run_blocks`)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from .._io.write.layout import INVERSION_LAYOUT, FieldLayout
from .._io.write.writers import ResultWriter
from .._options import RunOptions
from .._run.journal import Journal, run_settings
from .._run.progress import InversionSummary, progress_bar
from .._run.stream import run_blocks
from .inputs import read_files
from .summaries import status_counts

__all__ = ["BlockSource", "RunOutputs", "status_unit", "stream_to_outputs"]


@dataclass(frozen=True)
class RunOutputs:
    """What a run published: ``outputs`` ``{field: path}``, ``status_counts`` ``{status
    name: count}`` (every `lumaxlike.Status` member), ``resumed`` (None unless resuming),
    ``status_of`` (what a status is of, as `InversionSummary` says) and ``valued_pixels``
    (without a status map: the pixels with a finite value in some map; else None)."""

    outputs: dict
    status_counts: dict
    resumed: str | None
    status_of: str | None = "pixel-bands"
    valued_pixels: int | None = None

    def summary(self, info, start: float, verb: str) -> InversionSummary:
        """The run's `InversionSummary` on the grid and bands of ``info`` (a `CubeInfo`),
        timed from ``start`` (`time.perf_counter`), its ``verb`` the operation's."""
        return InversionSummary(
            outputs=self.outputs,
            pixels=info.grid.height * info.grid.width,
            bands=info.bands,
            seconds=time.perf_counter() - start,
            status_counts=self.status_counts,
            verb=verb,
            resumed=self.resumed,
            status_of=self.status_of,
            valued_pixels=self.valued_pixels,
        )


@dataclass(frozen=True)
class BlockSource:
    """Where a file command's blocks come from and go (as `run_blocks` takes them).

    Attributes:
        read: ``read(rows) -> (args, kwargs)`` of a block's task.
        pool_factory: makes the `BlockPool` that runs the task.
        on_start: called once every check has passed, before the first block.
        bad_bands: per band, whether the product marks it bad (status BAD_BAND), or None.
        resumed_work: says what a resumed run found done beyond its blocks, or None.
        journal: what else the maps depend on, for a resume's check.
    """

    read: Callable
    pool_factory: Callable
    on_start: Callable | None = None
    bad_bands: Any = None
    resumed_work: Callable | None = None
    journal: Mapping | None = None


def stream_to_outputs(
    out_path,
    *,
    like,
    fields,
    provenance,
    rows_per_block: int,
    inputs,
    run: RunOptions,
    blocks: BlockSource,
    description: str,
    layout: FieldLayout = INVERSION_LAYOUT,
) -> RunOutputs:
    """Run every block of a file command into its outputs and publish them.

    Args:
        out_path: the output path.
        like: the `CubeInfo` whose grid the maps take.
        fields: the maps written; ``layout`` says their names, types and attributes.
        provenance: the record written with the maps (and fingerprinted for a resume,
            with ``blocks.journal``: what else the maps depend on).
        rows_per_block: rows per block.
        inputs: the input files (None where not given; `run_inputs`), fingerprinted for
            a resume with the files each stands for (`read_files`).
        run: the run's options (``overwrite``, ``resume``, ``progress`` are read here).
        blocks: how the blocks are read and solved (`BlockSource`).
        description: the bar's label, e.g. ``"inverting cube.tif"``.

    Raises:
        FileExistsError: an output exists and ``overwrite`` is false (before any work).
        ResumeRefusedError: resuming with other inputs or settings.
    """
    settings = dict(blocks.journal or {})
    journal = Journal(
        out_path,
        inputs=read_files(inputs),
        resume=run.resume,
        fields=fields,
        settings=run_settings(provenance, out_path, fields, rows_per_block, **settings),
    )
    writer = ResultWriter(
        out_path,
        like=like,
        fields=fields,
        overwrite=run.overwrite,
        chunk_rows=rows_per_block,
        provenance=provenance,
        layout=layout,
    )
    counts, valued, resumed = run_blocks(
        writer,
        blocks.pool_factory,
        blocks.read,
        rows_per_block=rows_per_block,
        journal=journal,
        bar_factory=lambda: progress_bar(
            run.progress, like.grid.height * like.grid.width, description
        ),
        on_start=blocks.on_start,
        bad_bands=blocks.bad_bands,
        resumed_work=blocks.resumed_work,
    )
    status_of = status_unit(fields, layout)
    return RunOutputs(
        dict(writer.paths),
        status_counts(counts),
        resumed,
        status_of=status_of,
        valued_pixels=valued if status_of is None else None,
    )


def status_unit(fields, layout: FieldLayout) -> str | None:
    """What one status of a run's status map is of: ``"pixels"`` (a one-band map, as
    thermal's or unmix's), ``"pixel-bands"`` (one per band, as invert's), or None (no
    status map, as the spectral parameters')."""
    if "status" not in fields:
        return None
    names = layout.band_names.get("status")
    return "pixels" if names is not None and len(names) == 1 else "pixel-bands"
