"""Helpers of the file-to-file commands (`invert_file`, `unmix_file`): output checks,
the recorded call, the progress bar."""

from __future__ import annotations

import sys
from collections.abc import Mapping
from pathlib import Path

from .writers import output_files

__all__ = ["check_not_an_input", "geometry_paths", "parallel_call", "progress_bar"]


def check_not_an_input(out_path, fields, inputs, main: str = "w") -> None:
    """Refuse an output that would replace an input file or its ENVI header."""
    protected = {}
    for path in (Path(p) for p in inputs if p is not None):
        for candidate in (path, path.with_suffix(".hdr")):
            if candidate.exists():
                protected[candidate.resolve()] = path
    for output in output_files(out_path, fields, main):
        if output.resolve() in protected:
            raise ValueError(f"output {output} would replace the input file {protected[output.resolve()]}")


def geometry_paths(geometry) -> list:
    if isinstance(geometry, (str, Path)):
        return [geometry]
    if isinstance(geometry, Mapping):
        return [v for v in geometry.values() if isinstance(v, (str, Path))]
    return []


def parallel_call(workers, scheduler) -> dict:
    """``workers``/``scheduler`` for the recorded call, when not the defaults (the maps
    do not depend on them; the record says where the run ran)."""
    return {name: value for name, value, default in
            (("workers", workers, 1), ("scheduler", scheduler, None)) if value != default}


def progress_bar(progress, total: int, desc: str):
    """A tqdm bar on stderr: shown when `progress` is True, or None and stderr is a terminal."""
    from tqdm import tqdm

    disable = None if progress is None else not progress
    return tqdm(total=total, unit="px", unit_scale=True, desc=desc,
                disable=disable, file=sys.stderr, dynamic_ncols=True)
