"""Temporary files that a writer into lumaxlike's cache directory leaves behind when it is
killed between writing a file and renaming it into place (stored JAX programs,
generated derivative modules): removed at the folder's next write."""

from __future__ import annotations

import contextlib
import functools
import time
from pathlib import Path

__all__ = ["STALE_TEMPORARY_SECONDS", "remove_stale_temporaries"]

# A temporary file older than this is one a killed process left behind (a write and its
# rename take seconds at most).
STALE_TEMPORARY_SECONDS = 3600.0


@functools.cache  # once per folder, pattern and process
def remove_stale_temporaries(folder: Path, pattern: str) -> None:
    """Remove the files of `folder` matching the glob `pattern` (a writer's temporary
    files) that are older than `STALE_TEMPORARY_SECONDS`; never an error."""
    limit = time.time() - STALE_TEMPORARY_SECONDS
    for stale in folder.glob(pattern):
        with contextlib.suppress(OSError):  # removed by another process meanwhile
            if stale.stat().st_mtime < limit:
                stale.unlink()
