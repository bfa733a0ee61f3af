"""`NormalizeSettings`: every option of the photometric normalisation, declared once: the
inversion's (`InvertSettings`, composed) and the standard geometry.

`lumaxlike.normalize`, `normalize_file`, `normalize_dataarray` (and
``DataArray.hapke.normalize``) take these by name or as ``settings=``; ``lumaxlike
normalize`` takes each as a flag (``--standard 30,0,30``, in degrees). The per-pixel
parameter maps are inputs, not options: each front end takes them in its own form (arrays,
rasters, DataArrays).

Imports nothing heavy: the command line's parser is built from it.
"""

from __future__ import annotations

import argparse
import math
from dataclasses import dataclass

from .._declared_options import option
from .._inverse.options import InvertSettings

__all__ = ["DEFAULT_STANDARD", "NormalizeSettings", "standard_angles"]

DEFAULT_STANDARD: tuple[float, float, float] = (math.radians(30.0), 0.0, math.radians(30.0))
"""(incidence, emission, phase) [rad] of the usual standard geometry (ISIS photomet, M3,
LROC WAC): i = 30 deg, e = 0 deg, g = 30 deg."""

# slack for a phase angle computed from the other two in floating point [rad]
_ANGLE_SLACK = 1e-9


def standard_angles(standard) -> tuple[float, float, float]:
    """``standard`` checked: (incidence, emission, phase) [rad] as three floats.

    Raises:
        ValueError: naming ``standard``, unless it is three finite numbers with
            0 <= incidence < pi/2, 0 <= emission < pi/2 and
            |incidence - emission| <= phase <= incidence + emission (the phase angle of
            a source and an observer at those zenith angles), or if it looks like degrees.
    """
    import numpy as np

    try:
        values = np.asarray(standard, dtype=np.float64)
    except (TypeError, ValueError):
        values = None
    if values is None or values.shape != (3,) or not np.all(np.isfinite(values)):
        raise ValueError(
            f"standard must be three finite numbers (incidence, emission, phase) "
            f"in radians, got {standard!r}"
        )
    incidence, emission, phase = (float(v) for v in values)
    hint = (
        "; angles are in radians (numpy.radians((30, 0, 30)) for degrees)"
        if max(values) > 1.6
        else ""
    )
    for name, value in (("incidence", incidence), ("emission", emission)):
        if not 0.0 <= value < math.pi / 2:
            raise ValueError(f"standard {name} must lie in [0, pi/2) rad, got {value!r}{hint}")
    if not abs(incidence - emission) - _ANGLE_SLACK <= phase <= incidence + emission + _ANGLE_SLACK:
        raise ValueError(
            f"standard phase {phase!r} rad is impossible with incidence {incidence!r} and "
            f"emission {emission!r}: it must lie in [|i - e|, i + e]{hint}"
        )
    return incidence, emission, phase


def _degrees_text(text: str) -> tuple[float, float, float]:
    """The command line's ``I,E,G`` [deg] as (incidence, emission, phase) [rad]."""
    try:
        values = [float(value) for value in text.split(",")]
    except ValueError:
        values = []
    if len(values) != 3:
        raise argparse.ArgumentTypeError(f"expected three angles I,E,G in degrees, got {text!r}")
    incidence, emission, phase = (math.radians(value) for value in values)
    return incidence, emission, phase


@dataclass(frozen=True)
class NormalizeSettings(InvertSettings):
    """How a reflectance is normalised to a standard geometry: the options of
    `lumaxlike.normalize`, `lumaxlike.normalize_file`, `lumaxlike.normalize_dataarray`
    (each takes them by name, or as one ``settings=``) and ``lumaxlike normalize`` (a
    flag each): those of the inversion each pixel's w comes from
    (`lumaxlike.InvertSettings`: ``max_iter``, ``tol``, ``refl_sigma``, described there)
    and the standard geometry. Each is declared once: its default, unit, check and record
    in the field, its meaning here (the command line's help reads it from here).

    Attributes:
        refl_sigma: standard uncertainty of the reflectance in its units (the cube's for
            files and the command line; r [1/sr] for `normalize`, which also takes one
            per band): the sigma map of the normalised reflectance is then computed
            (None: none).
        standard: (incidence, emission, phase) of the standard geometry [rad; deg on the
            command line], 0 <= incidence, emission < 90 deg and |incidence - emission|
            <= phase <= incidence + emission.

    Raises:
        ValueError: naming the option, for a value its check refuses.
    """

    standard: tuple[float, float, float] = option(
        DEFAULT_STANDARD,
        unit="rad",
        convert=standard_angles,
        parse=_degrees_text,
        metavar="I,E,G",
        shown="30,0,30",
        record=list,
    )
