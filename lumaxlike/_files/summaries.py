"""What a file run did, in words: the status counts of its summary, and the one line
saying why nothing converged (the command line prints it and exits 1)."""

from __future__ import annotations

from .._status import Status

__all__ = ["STATUS_CAUSES", "nothing_computed", "nothing_converged", "status_counts"]

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
    "NOT_MIXED": "the chains did not mix (R-hat above --max-rhat or bulk or tail ESS below "
    "--min-ess): sample longer (--num-samples, --num-warmup) or check the model and --refl-sigma",
    "MULTIMODAL": "the posterior has a second mode near a bound (e.g. b -> 1) that the chains "
    "did not visit: give b and c priors (--prior), or fit from the bounds",
}


def status_counts(counts) -> dict[str, int]:
    """``{status name: count}`` with every `lumaxlike.Status` member, from the run
    layer's counts (indexed by member)."""
    return {member.name: int(counts[member]) for member in Status}


def nothing_converged(status_counts, solved: tuple[str, ...]) -> str | None:
    """One line saying why no problem of a run converged, or None when some did.

    Args:
        status_counts: ``{status name: count}`` of a file run's summary.
        solved: the statuses of a solved problem (the operation's `Operation.solved`).
    """
    counts = {name: int(count) for name, count in dict(status_counts or {}).items() if count}
    if not counts or any(counts.get(name, 0) for name in solved):
        return None
    ranked = sorted(counts.items(), key=lambda item: -item[1])
    listed = ", ".join(f"{name} {count}" for name, count in ranked)
    cause = STATUS_CAUSES.get(ranked[0][0], "")
    return f"no problem converged ({listed}){': ' + cause if cause else ''}"


def nothing_computed(summary) -> str | None:
    """One line saying why a run without a status map (the spectral parameters) computed
    nothing (no pixel has a finite value in any map), or None when it computed some
    value, or has a status map (`nothing_converged` says it there)."""
    if getattr(summary, "status_of", "pixel-bands") is not None:
        return None
    if getattr(summary, "valued_pixels", None) != 0:
        return None
    return (
        f"nothing computed: every value of the {summary.pixels} pixels' maps is NaN (a cube "
        "of nodata or NaN, bands marked bad, or spectra no product is defined for)"
    )
