"""`Operation`: an operation as every front end reads it.

An operation (invert, normalize, unmix, ...) is declared once, in its own module of this
package: its block task, the maps it writes and their layout, the words its runs are
reported in. The file front ends (`lumaxlike._files.cube_run`), the xarray front ends
and the command line read the declaration; the run layer (`lumaxlike._run`) takes its
block task and knows nothing else of it, as xarray's ``open_dataset`` dispatches to one
backend entry point per engine.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

from .._io.write.layout import FieldLayout

__all__ = ["SOLVED", "Operation"]

SOLVED = ("CONVERGED", "UNDETERMINED", "BAND_FAILED")
"""Statuses of problems that were solved (UNDETERMINED: converged, not all determined;
BAND_FAILED: `remove_thermal`'s T converged, some band not corrected): a file run with
none exits 1 (`Operation.solved`)."""


@dataclass(frozen=True)
class Operation:
    """One operation's declaration.

    Attributes:
        name: the command and Python name (``"invert"``: ``lumaxlike invert``,
            ``lumaxlike.invert_file``, ``DataArray.hapke.invert``).
        block_task: the block task, ``"module:function"``, named by its import path as
            an entry point is, so that a dask worker imports it: ``function(refl, to_sun,
            to_sensor, normal, params, options, refl_sigma=None, **extra) -> {field:
            array}`` on NumPy arrays, r [1/sr] ``pixels + (bands,)``, direction vectors
            ``pixels + (3,)``.
        fields: every map it may write, in order.
        optional: ``{field: option}``: maps written only when that option is given
            (``{"sigma": "sigma"}``).
        layout: ``layout(...) -> FieldLayout``: the maps' names, types, bands and
            attributes (for a cube in ``units``, or per endmember).
        progress, verb: the progress bar's verb (``"inverting"``) and the run summary's
            (``"inverted"``).
        bad_bands: ``"mark"`` (per-band maps: the product's bad bands get the status
            ``BAD_BAND``), ``"exclude"`` (maps not per band: bad bands left out) or
            ``"nan"`` (maps not per band: bad bands read as NaN, every band kept, the
            plan told which are bad by the cube's ``bad_bands``).
        geometry: whether the block task takes the geometry (True: ``function(refl,
            to_sun, to_sensor, normal, params, options, ...)`` on r [1/sr]); False for an
            operation on the values alone (spectral parameters): ``function(values,
            params, options, **extra)``, ``values`` the cube's as given in its units
            (radiance as I/F), no geometry read or required.
        file_name: the file front end's Python name where it is not ``<name>_file``.
        command: the command line's subcommand where it is not `name`
            (``"parameters"`` for ``spectral_parameters``).
        solved: the statuses (names) of a solved problem: a command line run with none
            exits 1 (default `SOLVED`; `fit` adds MULTIMODAL, its lowest of several
            minima).
    """

    name: str
    block_task: str
    fields: tuple[str, ...]
    layout: Callable[..., FieldLayout]
    progress: str
    verb: str
    optional: Mapping[str, str] = field(default_factory=dict)
    bad_bands: str = "mark"
    geometry: bool = True
    file_name: str | None = None
    command: str | None = None
    solved: tuple[str, ...] = SOLVED

    @property
    def file_function(self) -> str:
        """The file front end's Python name (``"invert_file"``), for the recorded call."""
        return self.file_name or f"{self.name}_file"

    @property
    def command_name(self) -> str:
        """The subcommand of the ``lumaxlike`` command line (``"invert"``)."""
        return self.command or self.name

    def block(self) -> Callable[..., dict]:
        """The block task, imported by its path (`block_task`)."""
        module, function = self.block_task.split(":")
        return getattr(importlib.import_module(module), function)

    def written(self, fields: tuple[str, ...] | None = None, **given) -> list[str]:
        """The maps a run writes: ``fields`` (default `fields`) less the optional ones
        whose option is None or not in ``given``."""
        return [
            name
            for name in (self.fields if fields is None else fields)
            if name not in self.optional or given.get(self.optional[name]) is not None
        ]
