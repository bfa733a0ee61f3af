"""Atomic publication of output files and folders, safe against concurrent runs and crashes.

Everything lumaxlike writes goes first to hidden temporary siblings of the targets, in the
target's own folder (so the final move never crosses a file system), and is moved onto the
targets with :func:`os.replace` only once every part has been written. A run that fails
leaves no partial output and no temporary file behind.

Three more guarantees:

* **One writer per output name.** A group of outputs locks every name it publishes or
  removes (its targets and companions, the main output first): an exclusive ``flock`` on
  the hidden file ``.NAME.lumaxlike-lock`` beside each, taken before the existence check
  and held until the group is published or discarded. A second writer whose set shares
  any name (``out.tif`` writes ``out_sigma.tif``, another run's main output) fails at once
  with :class:`OutputBusyError`, so two runs never leave a mixture of their files. The
  kernel drops the lock when its holder dies, however it dies.
* **Stale temporaries are removed.** Temporary names carry their writer's process id and
  start time; a new group removes the temporaries in its folders whose writer is gone
  (e.g. killed with SIGKILL), and the lock files no process holds any more. A reused
  process id does not fool the check: its start time differs.
* **Signals cannot cut publication in half** (see :mod:`lumaxlike._signals`): a pending
  stop signal is checked just before publishing, and publication and clean-up run with
  signals deferred.
* **Nor can a kill.** Publication follows a journal, the hidden file
  ``.NAME.<owner>.lumaxlike-publish`` beside the main output, written (and flushed)
  before any file is moved: it lists every target, its temporary, and where its old file
  (and each companion) is moved aside. The old files are moved aside, the new ones
  renamed in, then the old ones deleted and the journal last. A process killed on the
  way (SIGKILL, power) leaves the journal; the next group that looks in the folder (any
  run writing there, see :func:`remove_stale_temporaries`) finishes that publication if
  every new file is in place, and otherwise puts the old set back and removes the new
  files; so the folder holds the whole old set or the whole new set, never a mixture,
  and a moved-aside old file is never deleted as a stale temporary.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import secrets
import shutil
import sys
from pathlib import Path

import psutil

from ..._signals import Interrupted, deferred, pending_signal, raise_if_interrupted

__all__ = [
    "AtomicOutputs",
    "LOCK_MARK",
    "PUBLISH_MARK",
    "OutputBusyError",
    "OutputExistsError",
    "OutputWriteError",
    "TEMP_MARK",
    "check_output_folder",
    "remove_stale_temporaries",
]

TEMP_MARK = ".lumaxlike-tmp"
"""Marker in the name of every temporary file lumaxlike writes."""

LOCK_MARK = ".lumaxlike-lock"
"""Suffix of the hidden lock file of an output set (``.NAME.lumaxlike-lock``)."""

PUBLISH_MARK = ".lumaxlike-publish"
"""Suffix of the hidden journal of a publication under way
(``.NAME.p<pid>t<start>-<token>.lumaxlike-publish``)."""

_OWNER = re.compile(r"\.p(\d+)t(\d+)-[0-9a-f]+" + re.escape(TEMP_MARK))
_JOURNAL_OWNER = re.compile(r"\.(p(\d+)t(\d+)-[0-9a-f]+)" + re.escape(PUBLISH_MARK) + "$")


class OutputWriteError(OSError):
    """Writing an output failed (e.g. its disk is full): nothing of the run was published
    and the previous outputs, if any, are kept.

    Attributes:
        path: the output whose file could not be written (its final name).
    """

    def __init__(self, path, cause: BaseException | str):
        self.path = str(path)
        folder = Path(path).parent
        try:
            free = f"; {shutil.disk_usage(folder).free:,} bytes free in {folder}"
        except OSError:
            free = ""
        reason = " ".join(str(cause).split()) or type(cause).__name__
        super().__init__(
            f"writing {self.path} failed ({reason}{free}): nothing was published, "
            "the previous outputs (if any) are kept"
        )


class OutputExistsError(FileExistsError):
    """An output (or a companion file of its set) exists and overwriting was not asked for.

    Attributes:
        paths: the existing files, as given.
    """

    def __init__(self, paths):
        self.paths = [str(path) for path in paths]
        super().__init__(
            f"output already exists: {', '.join(self.paths)}; pass overwrite=True to replace it"
        )


class OutputBusyError(FileExistsError):
    """Another process is writing an output of the same name right now.

    Attributes:
        path: the contested output (the main output when that is the one).
    """

    def __init__(self, path, owner: str):
        self.path = str(path)
        super().__init__(
            f"output {path} is being written by another lumaxlike run{owner}; "
            "wait for it to end or choose another output"
        )


def check_output_folder(target: Path) -> None:
    """Raise an ``OSError`` subclass naming the folder if ``target`` cannot be created there.

    Raises:
        FileNotFoundError: the parent folder does not exist.
        NotADirectoryError: the parent (or one of its ancestors) is not a folder.
        PermissionError: the parent folder is not writable by this process.
    """
    parent = target.parent
    ancestor = parent
    while not ancestor.exists() and ancestor != ancestor.parent:
        ancestor = ancestor.parent
    if ancestor.exists() and not ancestor.is_dir():
        raise NotADirectoryError(f"cannot write {target}: {ancestor} is a file, not a folder")
    if not parent.exists():
        raise FileNotFoundError(f"cannot write {target}: output folder {parent} does not exist")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise PermissionError(f"cannot write {target}: output folder {parent} is not writable")


def _start_ticks(process: psutil.Process) -> int:
    """A process's start time in hundredths of a second (the kernel's resolution)."""
    return round(process.create_time() * 100)


def _owner_tag() -> str:
    """``p<pid>t<start>``: this process, unambiguous even after its id is reused."""
    return f"p{os.getpid()}t{_start_ticks(psutil.Process())}"


def _writer_is_gone(pid: int, start: int) -> bool:
    try:
        process = psutil.Process(pid)
        return _start_ticks(process) != start or process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True
    except psutil.AccessDenied:  # someone else's live process
        return False


def _remove(path: Path) -> None:
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path, ignore_errors=True)
    else:
        path.unlink(missing_ok=True)


def remove_stale_temporaries(folder) -> list[Path]:
    """Finish or undo the publications in ``folder`` whose process was killed on the way
    (their journals), then remove the temporary files whose writing process is gone.

    Returns:
        the paths removed (the journals of the publications finished or undone included).
    """
    removed, unfinished = _recover_publications(Path(folder))
    for path in Path(folder).glob(f".*{TEMP_MARK}*"):
        if any(token in path.name for token in unfinished):  # its journal needs it
            continue
        match = _OWNER.search(path.name)
        if match and _writer_is_gone(int(match[1]), int(match[2])):
            _remove(path)
            removed.append(path)
    if os.name != "nt":  # lock files a killed run left: nobody holds them
        for path in Path(folder).glob(f".*{LOCK_MARK}"):
            if _remove_unheld_lock(path):
                removed.append(path)
    return removed


def _sync_folder(folder: Path) -> None:
    """Flush a folder's entries (renames) to its device, where the system allows it."""
    if os.name == "nt":  # pragma: no cover - a folder cannot be opened there
        return
    fd = os.open(folder, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class _Move:
    """One name of a publication: ``path``, the temporary ``new`` renamed onto it (None
    for a companion, only removed), and ``old``, where the file found at ``path`` is
    moved aside (None when there was none)."""

    def __init__(self, path: Path, new: Path | None, old: Path | None):
        self.path, self.new, self.old = path, new, old

    def record(self, folder: Path) -> dict:
        name = lambda p: None if p is None else os.path.relpath(p, folder)  # noqa: E731
        return {"path": name(self.path), "new": name(self.new), "old": name(self.old)}

    @classmethod
    def from_record(cls, folder: Path, record: dict) -> _Move:
        path = lambda key: None if record[key] is None else folder / record[key]  # noqa: E731
        return cls(folder / record["path"], path("new"), path("old"))


def _write_journal(path: Path, moves: list[_Move], temporary: Path) -> None:
    """Write the journal of a publication at ``path`` (through ``temporary``), flushed."""
    data = json.dumps({"moves": [move.record(path.parent) for move in moves]}, indent=1)
    with open(temporary, "w", encoding="utf-8") as stream:
        stream.write(data)
        stream.flush()
        os.fsync(stream.fileno())
    os.replace(temporary, path)
    _sync_folder(path.parent)


def _new_set_complete(moves: list[_Move]) -> bool:
    """Every new file was renamed into place (what is left is deleting the old ones)."""
    return all(
        move.new is None or (not os.path.lexists(move.new) and os.path.lexists(move.path))
        for move in moves
    )


def _finish(moves: list[_Move]) -> None:
    """The new set is in place: delete the old files moved aside."""
    for move in moves:
        if move.old is not None:
            _remove(move.old)


def _undo(moves: list[_Move]) -> None:
    """Put the old files back and remove the new ones and their temporaries.

    Safe to repeat after being cut short: a name with an old file gets it back while its
    moved-aside copy exists (then holds it); a name without one holds a new file exactly
    when its temporary is gone, and the temporaries are removed last.
    """
    for move in moves:
        if move.old is not None:
            if os.path.lexists(move.old):
                if move.path.is_dir() and not move.path.is_symlink():
                    _remove(move.path)  # a new zarr store: os.replace cannot replace a folder
                os.replace(move.old, move.path)
        elif move.new is not None and not os.path.lexists(move.new):
            _remove(move.path)  # moved in by the publication
    for move in moves:
        if move.new is not None:
            _remove(move.new)


def _lock_blocking(fd: int) -> None:
    if sys.platform == "win32":  # pragma: no cover - not run on the CI machine
        import msvcrt

        msvcrt.locking(fd, msvcrt.LK_LOCK, 1)
    else:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX)


def _recover_publications(folder: Path) -> tuple[list[Path], set[str]]:
    """Finish (every new file in place) or undo (otherwise) the publications in
    ``folder`` whose process is gone, then delete their journals.

    Returns:
        the journals dealt with, and the owner tokens of the publications still under way
        (their process alive) or that could not be dealt with: their files must stay.
    """
    done, unfinished = [], set()
    for path in folder.glob(f".*{PUBLISH_MARK}"):
        match = _JOURNAL_OWNER.search(path.name)
        if not match:
            continue
        if not _writer_is_gone(int(match[2]), int(match[3])):
            unfinished.add(match[1])
            continue
        try:
            if _recover_publication(path):
                done.append(path)
        except (OSError, ValueError, KeyError, TypeError):
            unfinished.add(match[1])  # unreadable or stuck: leave its files as they are
    return done, unfinished


def _recover_publication(path: Path) -> bool:
    """Finish or undo the publication of the journal ``path``; False if another process
    did it meanwhile. Two runs that find the journal at once take turns on its lock."""
    try:
        fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        return False
    try:
        _lock_blocking(fd)
        try:
            if not os.path.samestat(os.fstat(fd), os.stat(path)):
                return False
        except FileNotFoundError:
            return False
        with open(path, encoding="utf-8") as stream:
            moves = [_Move.from_record(path.parent, r) for r in json.load(stream)["moves"]]
        with deferred():
            if _new_set_complete(moves):
                _finish(moves)
            else:
                _undo(moves)
            path.unlink()
        return True
    finally:
        os.close(fd)


def _remove_unheld_lock(path: Path) -> bool:
    """Remove a lock file no process holds (its holder was killed); False if held.

    A holder keeps its lock until it has removed the file (`_Lock.release`), so a lock
    taken here means the file is stale; a run that opened it meanwhile finds it gone
    after locking and retries on a new file (`_Lock`).
    """
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return False
    try:
        _try_lock(fd)
    except OSError:
        os.close(fd)
        return False
    try:
        if os.path.samestat(os.fstat(fd), os.stat(path)):
            path.unlink()
            return True
        return False
    except OSError:
        return False
    finally:
        os.close(fd)


class _Lock:
    """An exclusive, non-blocking lock on ``path``, removed when released.

    The lock is a ``flock`` on the file (``msvcrt.locking`` on Windows). After locking,
    the file must still be the one at ``path``: a run that opened it just before its
    previous holder removed it retries on the new file, so two runs never hold two files
    of the same name.
    """

    def __init__(self, path: Path, busy):
        self.path, self.fd = path, None
        for _ in range(100):
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
            try:
                _try_lock(fd)
            except OSError:
                holder = os.read(fd, 32).decode(errors="replace").strip()
                os.close(fd)
                raise busy(f" (process {holder})" if holder.isdigit() else "") from None
            try:
                current = os.path.samestat(os.fstat(fd), os.stat(path))
            except FileNotFoundError:
                current = False
            if current:
                os.ftruncate(fd, 0)
                os.write(fd, str(os.getpid()).encode())
                self.fd = fd
                return
            os.close(fd)
        raise RuntimeError(f"internal error: could not lock {path}")  # pragma: no cover

    def release(self) -> None:
        """Remove the lock file, then unlock it (safe to call twice)."""
        if self.fd is None:
            return
        if os.name != "nt":
            self.path.unlink(missing_ok=True)  # while still locked: see the class docstring
        os.close(self.fd)
        self.fd = None
        if os.name == "nt":
            with contextlib.suppress(OSError):
                self.path.unlink(missing_ok=True)


def _sync(path: Path, target: Path) -> None:
    """Flush a written file (every file of a folder) to its device: OutputWriteError naming
    `target` where the system reports a write error (ENOSPC, EIO) only now."""
    files = [path] if not path.is_dir() else [p for p in path.rglob("*") if p.is_file()]
    for name in files:
        try:
            fd = os.open(name, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        except OSError as error:
            raise OutputWriteError(target, error) from error


def _try_lock(fd: int) -> None:
    if sys.platform == "win32":  # pragma: no cover - not run on the CI machine
        import msvcrt

        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    else:
        import fcntl

        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)


class AtomicOutputs:
    """A group of output paths written through temporary siblings and published together.

    Use as a context manager; it yields a dict mapping each target to its temporary path::

        with AtomicOutputs([Path("out_status.tif"), Path("out.tif")], overwrite=False) as tmp:
            write_somehow(tmp[Path("out.tif")])
            ...

    Creating the group locks it (see the module docstring), removes stale temporaries in
    its folders and checks that no target exists. On normal exit every temporary path is
    moved onto its target with ``os.replace``, in the order the targets were given (put
    the main output last: its presence then marks a complete set). On an exception every
    temporary file or folder of the group, including sidecars a writer created next to
    it, is removed and no target is touched. Either way the lock is released.

    The temporary name of ``folder/name.ext`` is
    ``folder/.name.p<pid>t<start>-<token>.lumaxlike-tmp.ext``, with one random token per
    group, so that a writer that derives a sidecar name by replacing the extension (GDAL's
    ENVI driver: ``x.img`` -> ``x.hdr``) derives the temporary name of the sidecar target.

    Args:
        targets: output file or folder paths (a zarr store is a folder), main output last.
        overwrite: replace existing targets; when false an existing target or companion
            raises :class:`OutputExistsError` before anything is written.
        companions: other files that belong to the same output set but that this group
            does not write (e.g. the sigma map of an earlier run); they count as existing
            outputs, and with ``overwrite`` they are removed when the group is published.

    Raises:
        OutputExistsError: a target or companion exists and ``overwrite`` is false.
        IsADirectoryError: a target or companion that is a file (not a ``.zarr`` store)
            is a folder on disk, with or without ``overwrite``.
        OutputBusyError: another process holds the group's lock.
        FileNotFoundError, NotADirectoryError, PermissionError: see
            :func:`check_output_folder`.
    """

    def __init__(self, targets, *, overwrite: bool, companions=()):
        self.targets = [Path(target) for target in targets]
        if not self.targets or len(set(self.targets)) != len(self.targets):
            raise ValueError(f"output paths are empty or repeat: {[str(t) for t in self.targets]}")
        self.companions = [  # each once, and none that is a target
            p for p in dict.fromkeys(map(Path, companions)) if p not in self.targets
        ]
        self.overwrite = bool(overwrite)
        self.token = f"{_owner_tag()}-{secrets.token_hex(3)}"
        main = self.targets[-1]
        for target in [main, *self.targets[:-1]]:  # messages name the main output
            check_output_folder(target)
        self._locks = []
        try:
            # every name the group publishes or removes, the main output first: two runs
            # whose sets share any name (out.tif's out_sigma.tif is another run's main
            # output) never write at once
            for path in [main, *sorted(set(self.targets[:-1]) | set(self.companions))]:
                self._locks.append(
                    _Lock(
                        path.parent / f".{path.name}{LOCK_MARK}",
                        lambda owner, path=path: OutputBusyError(path, owner),
                    )
                )
            for folder in {target.parent for target in self.targets}:
                remove_stale_temporaries(folder)
            self._check_not_existing()
        except BaseException:
            self._release()
            raise
        self.temporary = {target: self._temporary_path(target) for target in self.targets}

    def _temporary_path(self, target: Path) -> Path:
        stem, suffix = os.path.splitext(target.name)
        return target.parent / f".{stem}.{self.token}{TEMP_MARK}{suffix}"

    def _check_not_existing(self) -> None:
        for path in (*self.targets, *self.companions):  # never deleted, --overwrite or not
            if path.suffix.lower() != ".zarr" and path.is_dir() and not path.is_symlink():
                raise IsADirectoryError(
                    f"output {path} is a folder, where a file would be written; lumaxlike never "
                    "removes a folder: remove or rename it, or choose another output"
                )
        if self.overwrite:
            return
        in_order = [self.targets[-1], *self.targets[:-1], *self.companions]  # main output first
        existing = [path for path in in_order if os.path.lexists(path)]
        if existing:
            raise OutputExistsError(existing)

    def __enter__(self) -> dict[Path, Path]:
        return dict(self.temporary)

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            with deferred():
                self.discard()
            return
        try:
            raise_if_interrupted()
            self._check_not_existing()  # only this process can have made one: we hold the lock
            missing = [str(tmp) for tmp in self.temporary.values() if not os.path.lexists(tmp)]
            if missing:
                raise RuntimeError(f"internal error: temporary output {missing} was never written")
            for target, tmp in self.temporary.items():  # a full disk may only show here
                _sync(tmp, target)
            with deferred():
                self._publish_all()
        finally:
            with deferred():
                self.discard()

    @property
    def journal(self) -> Path:
        """The journal of this group's publication (present only while it is under way,
        or where it was cut short and could not be undone)."""
        main = self.targets[-1]
        return main.parent / f".{main.name}.{self.token}{PUBLISH_MARK}"

    def _publish_all(self) -> None:
        """Write the journal, move the old outputs (targets and companions) aside, the new
        ones into place, delete the old ones and the journal. A failure on the way (or a
        stop signal that arrived meanwhile, then raising `Interrupted`) puts the old ones
        back, so a failed or stopped run never leaves new outputs behind; a kill leaves
        the journal, by which the next run finishes or undoes the publication."""
        moves = []
        for path in (*self.targets, *self.companions):
            aside = None
            if os.path.lexists(path):
                aside = path.parent / f".{path.name}.{self.token}{TEMP_MARK}.old"
            moves.append(_Move(path, self.temporary.get(path), aside))
        journal, main = self.journal, self.targets[-1]
        try:
            _write_journal(
                journal, moves, main.parent / f".{main.name}.{self.token}{TEMP_MARK}.publish"
            )
            for move in moves:
                if move.old is not None:  # a folder (zarr) cannot be replaced by os.replace
                    os.replace(move.path, move.old)
            for move in moves:
                if move.new is not None:
                    os.replace(move.new, move.path)
            for folder in {move.path.parent for move in moves}:
                _sync_folder(folder)
        except BaseException:
            self._undo_publication(moves)
            raise
        signum = pending_signal()
        if signum is not None:
            self._undo_publication(moves)
            raise Interrupted(signum)
        _finish(moves)
        journal.unlink()

    def _undo_publication(self, moves: list[_Move]) -> None:
        """Put the old set back and delete the journal; where that fails too, the journal
        stays for the next run to finish the undoing."""
        with contextlib.suppress(OSError):
            _undo(moves)
            self.journal.unlink(missing_ok=True)  # missing: writing it failed

    def discard(self) -> None:
        """Remove every temporary file and folder of this group and release its lock
        (safe to call twice). A publication cut short whose undoing failed keeps its
        files (the old set among them) for its journal."""
        if not os.path.lexists(self.journal):
            for folder in {target.parent for target in self.targets}:
                for leftover in folder.glob(f".*{self.token}{TEMP_MARK}*"):
                    _remove(leftover)
        self._release()

    def _release(self) -> None:
        for lock in reversed(self._locks):
            lock.release()
