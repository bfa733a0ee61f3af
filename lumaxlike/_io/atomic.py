"""Atomic publication of output files and folders.

Everything lumaxlike writes goes first to hidden temporary siblings of the targets, in the
target's own folder (so the final move never crosses a file system), and is moved onto the
targets with :func:`os.replace` only once every part has been written. A run that fails
leaves no partial output and no temporary file behind.
"""

from __future__ import annotations

import os
import secrets
import shutil
from pathlib import Path

__all__ = ["AtomicOutputs", "TEMP_MARK", "check_output_folder"]

TEMP_MARK = ".lumaxlike-tmp"
"""Marker in the name of every temporary file lumaxlike writes."""


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


class AtomicOutputs:
    """A group of output paths written through temporary siblings and published together.

    Use as a context manager; it yields a dict mapping each target to its temporary path::

        with AtomicOutputs([Path("out_status.tif"), Path("out.tif")], overwrite=False) as tmp:
            write_somehow(tmp[Path("out.tif")])
            ...

    On normal exit every temporary path is moved onto its target with ``os.replace``, in
    the order the targets were given (put the main output last: its presence then marks a
    complete set). On an exception every temporary file or folder of the group, including
    sidecars a writer created next to it, is removed and no target is touched.

    The temporary name of ``folder/name.ext`` is ``folder/.name.<token>.lumaxlike-tmp.ext``,
    with one random token per group, so that a writer that derives a sidecar name by
    replacing the extension (GDAL's ENVI driver: ``x.img`` -> ``x.hdr``) derives the
    temporary name of the sidecar target.

    Args:
        targets: output file or folder paths (a zarr store is a folder).
        overwrite: replace existing targets; when false an existing target raises
            ``FileExistsError`` before anything is written.

    Raises:
        FileExistsError: a target exists and ``overwrite`` is false.
        FileNotFoundError, NotADirectoryError, PermissionError: see
            :func:`check_output_folder`.
    """

    def __init__(self, targets, *, overwrite: bool):
        self.targets = [Path(target) for target in targets]
        if len(set(self.targets)) != len(self.targets):
            raise ValueError(f"output paths repeat: {[str(t) for t in self.targets]}")
        self.overwrite = bool(overwrite)
        self.token = secrets.token_hex(6)
        for target in self.targets:
            check_output_folder(target)
        self._check_not_existing()
        self.temporary = {target: self._temporary_path(target) for target in self.targets}

    def _temporary_path(self, target: Path) -> Path:
        stem, suffix = os.path.splitext(target.name)
        return target.parent / f".{stem}.{self.token}{TEMP_MARK}{suffix}"

    def _check_not_existing(self) -> None:
        if self.overwrite:
            return
        existing = [str(target) for target in self.targets if os.path.lexists(target)]
        if existing:
            raise FileExistsError(
                f"output already exists: {', '.join(existing)}; "
                "pass overwrite=True (--overwrite) to replace it"
            )

    def __enter__(self) -> dict[Path, Path]:
        return dict(self.temporary)

    def __exit__(self, exc_type, exc, tb) -> None:
        if exc_type is not None:
            self.discard()
            return
        try:
            self._check_not_existing()  # something else may have created a target meanwhile
            missing = [str(tmp) for tmp in self.temporary.values() if not os.path.lexists(tmp)]
            if missing:
                raise RuntimeError(f"internal error: temporary output {missing} was never written")
            for target in self.targets:
                self._publish(self.temporary[target], target)
        finally:
            self.discard()

    def _publish(self, temporary: Path, target: Path) -> None:
        if target.is_dir() and not target.is_symlink():
            # os.replace cannot move a folder onto a non-empty folder: move the old one
            # aside first, then delete it once the new one is in place.
            stale = target.parent / f".{target.name}.{self.token}{TEMP_MARK}.old"
            os.replace(target, stale)
            os.replace(temporary, target)
            shutil.rmtree(stale)
        else:
            os.replace(temporary, target)

    def discard(self) -> None:
        """Remove every temporary file and folder of this group (safe to call twice)."""
        for folder in {target.parent for target in self.targets}:
            for leftover in folder.glob(f".*{self.token}{TEMP_MARK}*"):
                if leftover.is_dir() and not leftover.is_symlink():
                    shutil.rmtree(leftover, ignore_errors=True)
                else:
                    leftover.unlink(missing_ok=True)
