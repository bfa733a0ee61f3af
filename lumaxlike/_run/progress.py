"""Progress and the run summary of a file run: the progress bar on stderr, and what the
run did (:class:`InversionSummary`)."""

from __future__ import annotations

import sys
from dataclasses import dataclass, field

__all__ = ["InversionSummary", "occurred_statuses", "progress_bar", "rate_text"]


def progress_bar(progress, total: int, desc: str):
    """A tqdm bar on stderr: shown when `progress` is True, or None and stderr is a terminal."""
    from tqdm import tqdm

    disable = None if progress is None else not progress
    return tqdm(
        total=total,
        unit="px",
        unit_scale=True,
        desc=desc,
        disable=disable,
        file=sys.stderr,
        dynamic_ncols=True,
    )


@dataclass(frozen=True)
class InversionSummary:
    """What `lumaxlike.invert_file` (or `lumaxlike.normalize_file`, `lumaxlike.fit_file`) did.

    Attributes:
        outputs: ``{field: path}`` of the maps written.
        pixels: pixels inverted (rows x cols).
        bands: spectral bands per pixel.
        seconds: wall time of the run [s], reading and writing included.
        status_counts: ``{status name: number of (pixel, band) problems}``, every
            `lumaxlike.Status` member present (0 when it did not occur).
        verb: what was done, for `describe` ("normalised" by normalize_file).
        resumed: with ``resume=True``, what was taken from an interrupted run's journal
            (e.g. ``"3 of 5 blocks from an interrupted run"``, or ``"none: no
            interrupted run"``); None otherwise.
        status_of: what one status is of: ``"pixel-bands"`` (a status per pixel and
            band, as `invert_file`'s), ``"pixels"`` (one per pixel, as `remove_thermal_file`'s)
            or None (no status map, as `spectral_parameters_file`'s: the counts are 0).
        valued_pixels: with no status map, the pixels with a finite value in some map
            (0: nothing was computed); None otherwise.
    """

    outputs: dict
    pixels: int
    bands: int
    seconds: float
    status_counts: dict = field(default_factory=dict)
    verb: str = "inverted"
    resumed: str | None = None
    status_of: str | None = "pixel-bands"
    valued_pixels: int | None = None

    @property
    def pixels_per_second(self) -> float:
        """Throughput [pixels/s] (all bands of a pixel count once)."""
        return self.pixels / self.seconds if self.seconds > 0 else float("inf")

    def describe(self) -> str:
        """One line: pixels, bands, time, pixels/s and the count of each status that
        occurred (of pixel-bands or of pixels, `status_of`), or without a status map the
        pixels with a value."""
        if self.status_of is not None:
            outcome = f"; status of {self.status_of}: {occurred_statuses(self.status_counts)}"
        elif self.valued_pixels is not None:
            outcome = f"; pixels with a finite value: {self.valued_pixels} of {self.pixels}"
        else:
            outcome = ""
        return (
            f"{self.verb} {self.pixels} pixels x {self.bands} bands in {self.seconds:.2f} s "
            f"({rate_text(self.pixels_per_second)} pixels/s){outcome}" + resumed_text(self.resumed)
        )


def resumed_text(resumed: str | None) -> str:
    """The summary line's ending for a resumed run ("" for another)."""
    return "" if resumed is None else f"; resumed: {resumed}"


def occurred_statuses(status_counts) -> str:
    """``"CONVERGED 95, MAX_ITER 5"``: the statuses of ``{status name: count}`` that
    occurred (count above 0), in its order; ``"none"`` when none did (nothing solved)."""
    counts = [f"{name} {count}" for name, count in dict(status_counts).items() if count]
    return ", ".join(counts) or "none"


def rate_text(per_second: float) -> str:
    """A throughput for the summary line: whole numbers from 100 up (``"12,345"``), three
    significant digits below (``"0.256"``: a slow run, e.g. ``sample``, is not "0")."""
    return f"{per_second:,.0f}" if per_second >= 100 else f"{per_second:.3g}"
