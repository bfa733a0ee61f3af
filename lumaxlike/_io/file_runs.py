"""Helpers of the file-to-file commands (`invert_file`, `unmix_file`, ...): output checks
and the recorded call (the progress bar is the run layer's: :mod:`lumaxlike._run.progress`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

from .writers import output_files

__all__ = ["STATUS_CAUSES", "check_not_an_input", "geometry_paths", "nothing_converged", "parallel_call"]


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


#: What each status most often means in a file run, for the one-line summary of a run in
#: which nothing converged
STATUS_CAUSES = {
    "UNREACHABLE": "the reflectance lies outside what the model reaches with w in (0, 1): "
                   "check --units (radiance given as I/F?) and the model parameters",
    "INVALID_GEOMETRY": "the sun or the sensor is below the local horizon everywhere: check "
                        "the geometry's angles and conventions",
    "NONFINITE_INPUT": "every pixel is nodata or NaN (in the cube or the geometry)",
    "MAX_ITER": "the solver ran out of iterations: raise --max-iter or check the inputs",
    "BAD_BAND": "every band is marked bad (bbl = 0)",
    "TOO_FEW_OBSERVATIONS": "too few valid observations per pixel",
}
SOLVED = ("CONVERGED", "UNDETERMINED")
"""Statuses of problems that were solved (UNDETERMINED: converged, not all determined)."""


def nothing_converged(status_counts) -> str | None:
    """One line saying why no problem of a run converged, or None when some did.

    Args:
        status_counts: ``{status name: count}`` of a file run's summary.
    """
    counts = {name: int(count) for name, count in dict(status_counts or {}).items() if count}
    if not counts or any(counts.get(name, 0) for name in SOLVED):
        return None
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    listed = ", ".join(f"{name} {count}" for name, count in ranked)
    cause = STATUS_CAUSES.get(ranked[0][0], "")
    return f"no problem converged ({listed}){': ' + cause if cause else ''}"
