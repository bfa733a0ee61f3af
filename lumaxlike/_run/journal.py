"""The journal of a file run: what a run killed mid-way (SIGKILL, power, a lost node) has
finished, so that ``--resume`` continues from there.

The journal is a hidden folder beside the run's temporary outputs,
``.NAME.lumaxlike-journal`` for the main output ``NAME``, holding

* ``journal.json``: a fingerprint of the inputs and of the settings, written once when
  the run starts;
* one ``rows-START-STOP.npz`` per finished block of rows: the block's result maps as the
  solver returned them, written to a temporary name, flushed to disk and renamed, so a
  block file is complete or absent.

The result maps themselves are journaled, not only the block numbers: GDAL keeps written
blocks in its cache and writes a GeoTIFF's directory when the file is closed, so the
temporary output of a killed run is not a record one can trust (nor is it kept: the next
run removes it as stale, see :mod:`lumaxlike._io.write.atomic`). A resumed run writes every
block again from the same arrays, in the same order, into fresh temporaries: its maps are
bit-identical to those of a run that was never interrupted, and are published atomically
as any run's.

The inputs' fingerprint is each input file's resolved path, size and modification time
in nanoseconds (and its ENVI header's, when it has one), the test ``make`` and ``rsync``
use. The file commands list their input files in one place
(:mod:`lumaxlike._files.inputs`: cubes, DTM, geometry rasters, parameter maps, region
raster, solar spectrum and wavelength files), each with the files it stands for (a
product's data file, ENVI header and PDS3 label, in any case). The test costs nothing,
where hashing a multi-gigabyte cube would cost a full extra read of it. An edit that keeps a file's size and modification time is not seen. The
settings' fingerprint is every ``lumaxlike_*`` key of the run's provenance record but the
time and the command line (model, parameters per band, units, solver, tolerances,
sigma, geometry layout, standard geometry, ...), plus the output, its maps, the rows per
block and anything a command adds (the endmembers' digest, the fitted parameters). Where
the blocks run (``workers``, ``scheduler``) is not part of it: the maps do not depend on
it, so a run started with ``--workers 4`` may be resumed serially.

Lifecycle: a run that is not resuming replaces any journal its output has; a run that
ends, published or failed with an exception (a stop signal included, as its temporaries
are removed then too), removes its journal; only a process that dies without running its
clean-up leaves one. A resume whose fingerprint differs is refused, naming what changed,
and keeps the journal. The journal is only touched while the output set's lock is held.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np

from .._signals import deferred

__all__ = [
    "JOURNAL_MARK",
    "Journal",
    "ResumeRefusedError",
    "array_digest",
    "input_fingerprint",
    "journal_folder",
    "run_settings",
]

JOURNAL_MARK = ".lumaxlike-journal"
"""Suffix of the hidden journal folder of an output (``.NAME.lumaxlike-journal``)."""

_FORMAT = 1  # version of the journal's layout


class ResumeRefusedError(ValueError):
    """``--resume`` refused: the inputs or settings differ from the interrupted run's."""


def input_fingerprint(paths) -> dict[str, dict]:
    """``{resolved path: {"size": bytes, "mtime_ns": ns}}`` of each input file that exists
    (and of its ENVI header ``.hdr`` beside it, when there is one); None entries skipped."""
    fingerprint = {}
    for path in (Path(p) for p in paths if p is not None):
        for candidate in (path, path.with_suffix(".hdr")):
            if candidate.is_file() and str(candidate.resolve()) not in fingerprint:
                stat = candidate.stat()
                fingerprint[str(candidate.resolve())] = {
                    "size": stat.st_size,
                    "mtime_ns": stat.st_mtime_ns,
                }
    return fingerprint


def array_digest(*values) -> str:
    """SHA-256 of arrays and other values (their dtype, shape and bytes, or their repr)."""
    digest = hashlib.sha256()
    for value in values:
        if isinstance(value, np.ndarray):
            digest.update(f"{value.dtype.str}{value.shape}".encode())
            digest.update(np.ascontiguousarray(value).tobytes())
        else:
            digest.update(repr(value).encode())
    return digest.hexdigest()


def run_settings(provenance, out, fields, rows_per_block: int, **extra) -> dict:
    """The settings a run's maps depend on, for its journal: the provenance record's keys
    but the command line, the time and the resume note (``lumaxlike_`` dropped from
    their names), plus the output, its maps, the rows per block and ``extra``."""
    from .._provenance import PREFIX

    attrs = {} if provenance is None else provenance.attrs()
    skipped = {PREFIX + key for key in ("command", "created", "resumed")}
    settings = {
        key[len(PREFIX) :]: json.loads(text) for key, text in attrs.items() if key not in skipped
    }
    settings.update(
        output=str(Path(out).absolute()),
        maps=list(fields),
        rows_per_block=int(rows_per_block),
        **extra,
    )
    return settings


def journal_folder(out) -> Path:
    """The journal folder of the output set whose main output is ``out``."""
    out = Path(out)
    return out.parent / f".{out.name}{JOURNAL_MARK}"


def _block_name(rows: slice) -> str:
    return f"rows-{rows.start:09d}-{rows.stop:09d}.npz"


class Journal:
    """The journal of one run's output set (see the module docstring).

    Args:
        out: the main output path.
        inputs: the run's input files (paths; None entries are skipped).
        settings: ``{name: JSON-able value}`` the maps depend on.
        fields: the maps a block records (the others a block carries are dropped).
        resume: continue from the journal found (``--resume``), else start a new one.
    """

    def __init__(self, out, *, inputs, settings, fields, resume: bool):
        self.folder = journal_folder(out)
        self.fields = tuple(fields)
        self.resume = bool(resume)
        self.fingerprint = {
            "format": _FORMAT,
            "inputs": input_fingerprint(inputs),
            "settings": json.loads(json.dumps(dict(settings), default=str)),
        }
        self.finished: set[tuple[int, int]] = set()
        self.found = False  # a journal of an interrupted run was found (and matched)
        self._open = False

    def open(self) -> None:
        """Start the journal: check the one found (``resume``) or replace it.

        Call while holding the output set's lock.

        Raises:
            ResumeRefusedError: resuming, and the inputs or settings differ (the journal
                is kept).
        """
        header = self.folder / "journal.json"
        if self.resume and header.is_file():
            recorded = json.loads(header.read_text())
            changes = _changes(recorded, self.fingerprint)
            if changes:
                raise ResumeRefusedError(
                    f"cannot resume {self.folder.name[1 : -len(JOURNAL_MARK)]}: "
                    f"{'; '.join(changes)} since the interrupted run (its journal is kept; "
                    "run without --resume to start again)"
                )
            self.found = True
            self.finished = {
                (int(a), int(b))
                for a, b in (p.stem.split("-")[1:] for p in self.folder.glob("rows-*.npz"))
            }
            self._open = True
            return
        with deferred():
            _remove_tree(self.folder)
            self.folder.mkdir()
            self._open = True
            _write_atomically(header, json.dumps(self.fingerprint, indent=1).encode())

    def __contains__(self, rows: slice) -> bool:
        return (rows.start, rows.stop) in self.finished

    def load(self, rows: slice) -> dict[str, np.ndarray]:
        """The recorded result maps of a finished block."""
        with np.load(self.folder / _block_name(rows), allow_pickle=False) as data:
            block = {field: data[field] for field in self.fields}
        return block

    def record(self, rows: slice, block) -> None:
        """Record a block as finished, with its result maps (flushed to disk)."""
        if (rows.start, rows.stop) in self.finished:
            return
        path = self.folder / _block_name(rows)
        partial = path.with_name(path.name + ".partial")
        with open(partial, "wb") as file:
            arrays: dict[str, Any] = {field: np.asarray(block[field]) for field in self.fields}
            np.savez(file, **arrays)
            file.flush()
            os.fsync(file.fileno())
        os.replace(partial, path)
        self.finished.add((rows.start, rows.stop))

    def remove(self) -> None:
        """Remove the journal (the run ended); safe to call twice, or before :meth:`open`."""
        if self._open:
            with deferred():
                _remove_tree(self.folder)
            self._open = False


def _changes(recorded: dict, current: dict) -> list[str]:
    """What differs between two fingerprints, in words."""
    if recorded.get("format") != current["format"]:
        return ["the journal was written by another lumaxlike version"]
    changes = []
    old_inputs, new_inputs = recorded.get("inputs", {}), current["inputs"]
    for path in sorted(set(old_inputs) | set(new_inputs)):
        old, new = old_inputs.get(path), new_inputs.get(path)
        if old is None:
            changes.append(f"the input {path} is new")
        elif new is None:
            changes.append(f"the input {path} is gone")
        elif old != new:
            what = "size" if old["size"] != new["size"] else "modification time"
            changes.append(f"the input {path} changed ({what})")
    old_settings, new_settings = recorded.get("settings", {}), current["settings"]
    changed = [
        key
        for key in sorted(set(old_settings) | set(new_settings))
        if old_settings.get(key) != new_settings.get(key)
    ]
    if changed:
        changes.append("the settings changed: " + ", ".join(changed))
    return changes


def _write_atomically(path: Path, data: bytes) -> None:
    partial = path.with_name(path.name + ".partial")
    with open(partial, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(partial, path)


def _remove_tree(folder: Path) -> None:
    if folder.is_dir() and not folder.is_symlink():
        shutil.rmtree(folder, ignore_errors=True)
    elif os.path.lexists(folder):
        folder.unlink()
