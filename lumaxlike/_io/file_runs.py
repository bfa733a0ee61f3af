"""Helpers of the file-to-file commands (`invert_file`, `unmix_file`, ...): output checks
and the recorded call (the progress bar is the run layer's: :mod:`lumaxlike._run.progress`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .writers import output_files

__all__ = ["check_not_an_input", "geometry_paths", "parallel_call"]


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
