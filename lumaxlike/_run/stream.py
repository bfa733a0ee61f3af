"""Streaming a file run by blocks of rows: read, solve (here or on a cluster), write.

:func:`run_blocks` is the loop every file command runs (``invert_file``,
``normalize_file``, ``fit_file``, ``unmix_file``): it reads a block of rows, hands it to a
:class:`~lumaxlike._run.pool.BlockPool`, writes the results that come back, in order,
into a :class:`~lumaxlike._io.write.writers.ResultWriter`, journals each finished block (see
:mod:`lumaxlike._run.journal`) and counts the status codes. The front ends only open
their readers and writer and say how a block is read
(:func:`lumaxlike._files.blocks.cube_block_reader` for the commands on one cube).
"""

from __future__ import annotations

import dataclasses

import numpy as np

from .._signals import deferred, interruptible, raise_if_interrupted
from .._status import Status

__all__ = ["mark_bad_bands", "run_blocks", "stream_blocks", "valued_pixels"]


def mark_bad_bands(block: dict, bad_bands) -> None:
    """Set the maps of bad bands (boolean per band) to NaN (0 iterations) and status BAD_BAND."""
    if bad_bands is None or not np.any(bad_bands):
        return
    for name, values in list(block.items()):
        if values is None or np.ndim(values) == 0 or np.shape(values)[-1] != len(bad_bands):
            continue
        values = block[name] = np.array(values)  # solver outputs may be read-only
        if name == "status":
            values[..., bad_bands] = Status.BAD_BAND
        elif np.issubdtype(values.dtype, np.floating):
            values[..., bad_bands] = np.nan
        else:
            values[..., bad_bands] = 0


def stream_blocks(
    row_slices, read, pool, writer, bar, journal=None, bad_bands=None
) -> tuple[np.ndarray, int]:
    """Read, solve and write every block of rows; return the counts per status code and,
    for an operation without a status map (the spectral parameters), the pixels with a
    finite value in some map (0 for one with a status map).

    Args:
        row_slices: the blocks, in order (``slice(start, stop)`` of rows).
        read: ``read(rows) -> (args, kwargs)`` of the pool's task for a block.
        pool: a :class:`~lumaxlike._run.pool.BlockPool`.
        writer: an entered :class:`~lumaxlike._io.write.writers.ResultWriter`.
        bar: a progress bar (``update(pixels)``).
        journal: a :class:`~lumaxlike._run.journal.Journal`, or None: a block it records
            is taken from it instead of being solved; every block written is recorded.
        bad_bands: boolean per band, or None: those bands' maps are written NaN with
            status ``BAD_BAND`` (:func:`mark_bad_bands`).
    """
    counts = np.zeros(len(Status), dtype=np.int64)
    valued = 0
    width = writer.like.grid.width

    def write_oldest():
        nonlocal valued
        raise_if_interrupted()
        rows, block = pool.pop()
        mark_bad_bands(block, bad_bands)
        writer.write(rows, block)
        if journal is not None:
            journal.record(rows, block)
        if "status" in block:
            counts[:] += np.bincount(
                np.asarray(block["status"]).ravel().astype(np.int64), minlength=len(Status)
            )
        else:  # an operation without status, as the spectral parameters
            valued += valued_pixels(block)
        bar.update((rows.stop - rows.start) * width)

    for rows in row_slices:
        raise_if_interrupted()  # a stop signal whose exception was lost in a callback
        if journal is not None and rows in journal:
            pool.put_done(rows, journal.load(rows))  # in order, like any other block
        else:
            args, kwargs = read(rows)
            pool.submit(rows, *args, **kwargs)
            del args, kwargs  # the pool holds what it needs
        while pool.full():
            write_oldest()
    while len(pool):
        write_oldest()
    return counts, valued


def valued_pixels(block) -> int:
    """Pixels of a block (``{field: (rows, cols, bands)}``) with a finite value in some
    band of some map."""
    valued = None
    for values in block.values():
        finite = np.isfinite(np.asarray(values)).any(axis=-1)
        valued = finite if valued is None else valued | finite
    return 0 if valued is None else int(np.count_nonzero(valued))


def run_blocks(
    writer,
    pool_factory,
    read,
    *,
    rows_per_block: int,
    journal,
    bar_factory,
    on_start=None,
    bad_bands=None,
    resumed_work=None,
):
    """Run a whole file command's blocks into ``writer`` and publish its outputs.

    ``writer`` (a :class:`~lumaxlike._io.write.writers.ResultWriter`, constructed, so its output
    set is locked, not yet entered) is entered once the journal is open (a resumed run's
    provenance says so), the pool is made by ``pool_factory()`` and closed before the
    writer publishes; the journal is removed when the run ends, published or failed, and
    kept only when the process dies.

    Args:
        writer: the run's writer.
        pool_factory: ``() -> BlockPool``.
        read: ``read(rows) -> (args, kwargs)`` (see :func:`stream_blocks`).
        rows_per_block: rows per block.
        journal: the run's :class:`~lumaxlike._run.journal.Journal`.
        bar_factory: ``() -> progress bar`` (closed at the end).
        on_start: called once the writer and the pool are open (every check passed).
        bad_bands: as for :func:`stream_blocks`.
        resumed_work: ``() -> str`` or None: what else a resumed run took from the
            journal, counted once it is open (a regional fit's ``"2 of 3 region
            groups"``), said before its blocks.

    Returns:
        ``(counts per status code, pixels with a value, what was resumed)``: the second
        as `stream_blocks` counts it, the third a line for the run's summary when
        resuming (``"3 of 5 blocks from an interrupted run"``), else None.

    Raises:
        ResumeRefusedError: resuming with other inputs or settings (nothing written).
    """
    height = writer.like.grid.height
    row_slices = [
        slice(start, min(start + rows_per_block, height))
        for start in range(0, height, rows_per_block)
    ]
    try:
        journal.open()
    except BaseException:
        with deferred():
            writer.discard()
        raise
    try:
        resumed = sum(rows in journal for rows in row_slices)
        note = None
        if journal.found:
            note = f"{resumed} of {len(row_slices)} blocks from an interrupted run"
            if resumed_work is not None:
                note = f"{resumed_work()} and {note}"
            if writer.provenance is not None:
                writer.provenance = dataclasses.replace(writer.provenance, resumed=note)
        elif journal.resume:
            note = "nothing: no interrupted run of these outputs was found"
        with writer, pool_factory() as pool:
            if on_start is not None:
                on_start()
            bar = bar_factory()
            try:
                with interruptible():  # the CLI's stop signals raise here at once
                    counts, valued = stream_blocks(
                        row_slices, read, pool, writer, bar, journal, bad_bands
                    )
            finally:
                bar.close()
    finally:
        journal.remove()
    return counts, valued, note
