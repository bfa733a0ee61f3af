"""Helpers of the file-to-file commands (`invert_file`, `unmix_file`, ...): output checks
and the recorded call (the progress bar is the run layer's: :mod:`lumaxlike._run.progress`)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .._io.units import to_bidirectional_reflectance, uncertainty_to_r
from .._io.writers import output_files

__all__ = [
    "FLAT_NORMAL",
    "STATUS_CAUSES",
    "cube_block_reader",
    "check_not_an_input",
    "geometry_paths",
    "nothing_converged",
    "parallel_call",
]


def check_not_an_input(out_path, fields, inputs, main: str = "w") -> None:
    """Refuse an output that would replace an input file or its ENVI header."""
    protected = {}
    for path in (Path(p) for p in inputs if p is not None):
        for candidate in (path, path.with_suffix(".hdr")):
            if candidate.exists():
                protected[candidate.resolve()] = path
    for output in output_files(out_path, fields, main):
        if output.resolve() in protected:
            raise ValueError(
                f"output {output} would replace the input file {protected[output.resolve()]}"
            )


def geometry_paths(geometry) -> list:
    if isinstance(geometry, (str, Path)):
        return [geometry]
    if isinstance(geometry, Mapping):
        return [v for v in geometry.values() if isinstance(v, (str, Path))]
    return []


def parallel_call(workers, scheduler) -> dict:
    """``workers``/``scheduler`` for the recorded call, when not the defaults (the maps
    do not depend on them; the record says where the run ran)."""
    return {
        name: value
        for name, value, default in (("workers", workers, 1), ("scheduler", scheduler, None))
        if value != default
    }


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


FLAT_NORMAL = np.array([0.0, 0.0, 1.0])
"""The ellipsoid's normal in the local frame (the areoid's, for CRISM)."""


def cube_block_reader(
    cube, geometry_reader, *, units, sigma, params, options, extra=None, reff_incidence=None
):
    """How a block of one cube is read for a block task: ``read(rows) -> (args, kwargs)``.

    The task is called as ``function(refl, to_sun, to_sensor, normal, params, options,
    refl_sigma=..., **extra(rows))`` with r [1/sr] and the geometry's direction vectors.
    ``reff_incidence="areoid"`` divides REFF by the ellipsoid's cos i, not the facet's.
    """

    def read(rows: slice):
        to_sun, to_sensor, normal = geometry_reader.read(rows)
        divided_by = FLAT_NORMAL if reff_incidence == "areoid" else normal
        refl = to_bidirectional_reflectance(cube.read(rows), units, to_sun, divided_by)
        refl_sigma = uncertainty_to_r(sigma, units, to_sun, divided_by, refl.dtype)
        kwargs = {"refl_sigma": refl_sigma, **({} if extra is None else extra(rows))}
        return (refl, to_sun, to_sensor, normal, params, options), kwargs

    return read
