"""Where a file command's blocks go, written once for every command: the run's journal
(`--resume`), the `ResultWriter` that locks and then publishes the output set, and the
run layer's block loop (`lumaxlike._run.stream.run_blocks`)."""

from __future__ import annotations

import time
from dataclasses import dataclass

from .._io.layout import INVERSION_LAYOUT, FieldLayout
from .._io.writers import ResultWriter
from .._run.journal import Journal, run_settings
from .._run.progress import InversionSummary, progress_bar
from .._run.stream import run_blocks
from .inputs import read_files
from .summaries import status_counts

__all__ = ["RunOutputs", "stream_to_outputs"]


@dataclass(frozen=True)
class RunOutputs:
    """What a run published: ``outputs`` ``{field: path}``, ``status_counts`` ``{status
    name: count}`` (every `lumaxlike.Status` member), ``resumed`` (None unless resuming)."""

    outputs: dict
    status_counts: dict
    resumed: str | None

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
        )


def stream_to_outputs(
    out_path,
    *,
    like,
    fields,
    provenance,
    rows_per_block: int,
    inputs,
    overwrite: bool,
    resume: bool,
    pool_factory,
    read,
    progress,
    description: str,
    layout: FieldLayout = INVERSION_LAYOUT,
    settings: dict | None = None,
    on_start=None,
    bad_bands=None,
    resumed_work=None,
) -> RunOutputs:
    """Run every block of a file command into its outputs and publish them.

    Args:
        out_path: the output path.
        like: the `CubeInfo` whose grid the maps take.
        fields: the maps written; ``layout`` says their names, types and attributes.
        provenance: the record written with the maps (and fingerprinted for a resume,
            with ``settings``: what else the maps depend on).
        rows_per_block: rows per block.
        inputs: the input files (None where not given; `run_inputs`), fingerprinted for
            a resume with the files each stands for (`read_files`).
        overwrite, resume: as the file commands take them.
        pool_factory, read, on_start, bad_bands, resumed_work: as for `run_blocks`.
        progress: the progress bar's switch (True, False, None: when stderr is a terminal).
        description: the bar's label, e.g. ``"inverting cube.tif"``.

    Raises:
        FileExistsError: an output exists and ``overwrite`` is false (before any work).
        ResumeRefusedError: resuming with other inputs or settings.
    """
    journal = Journal(
        out_path,
        inputs=read_files(inputs),
        resume=resume,
        fields=fields,
        settings=run_settings(provenance, out_path, fields, rows_per_block, **(settings or {})),
    )
    writer = ResultWriter(
        out_path,
        like=like,
        fields=fields,
        overwrite=overwrite,
        chunk_rows=rows_per_block,
        provenance=provenance,
        layout=layout,
    )
    counts, resumed = run_blocks(
        writer,
        pool_factory,
        read,
        rows_per_block=rows_per_block,
        journal=journal,
        bar_factory=lambda: progress_bar(progress, like.grid.height * like.grid.width, description),
        on_start=on_start,
        bad_bands=bad_bands,
        resumed_work=resumed_work,
    )
    return RunOutputs(dict(writer.paths), status_counts(counts), resumed)
