"""Laboratory goniometer tables (CSV of geometry x wavelength) -> arrays for `lumaxlike.fit`.

The layout is that of bidirectional reflectance tables as goniometers export them (RELAB,
PHIRE, BUG and similar: one measured spectrum per illumination and viewing geometry):

Wide (one row per geometry)::

    # comment lines start with '#'; blank lines are skipped
    incidence,emission,azimuth,450,550,650
    30,0,0,0.0412,0.0553,0.0641
    30,30,0,0.0505,0.0672,0.0779
    ...

- the header row names the angle columns, in degrees: ``incidence`` (``i``, ``inc``),
  ``emission`` (``e``, ``emi``), and ``azimuth`` (``az``, ``psi``, ``phi``) or ``phase``
  (``g``) or both (case-insensitive; a unit suffix such as ``incidence [deg]``,
  ``incidence (deg)`` or ``incidence_deg`` is allowed);
- every other column is one band, its header the wavelength (a number, e.g. nm);
- an empty cell or ``nan`` is a missing value (a gap of the run): `fit` leaves that
  observation out of that band's problem.

Long (one row per geometry and wavelength): the same angle columns plus ``wavelength``
and ``reflectance`` (``refl``); a geometry lacking a wavelength is a gap (NaN).

Angles: incidence and emission in [0, 90] from the sample normal; azimuth psi between
the planes of incidence and emission, 0 with the detector on the source's side
(backscatter; g = |i - e|), 180 on the opposite side (forward scatter), as in Hapke's
cos g = cos i cos e + sin i sin e cos psi. Signed emission angles (negative for the
forward side in the principal plane) are refused: give e >= 0 with azimuth 0 or 180.
With phase but no azimuth, psi follows from that relation (0 where i or e is 0); with
both, they must agree to `PHASE_TOLERANCE_DEG`.
"""

from __future__ import annotations

import csv
import io
import math
import re
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..._geometry import geometry_from_angles, relative_azimuth
from .units import check_units, to_bidirectional_reflectance

__all__ = ["GoniometerTable", "read_goniometer_table", "PHASE_TOLERANCE_DEG"]

#: Largest difference [deg] allowed between a tabulated phase angle and the one its
#: incidence, emission and azimuth give (tables round their angles).
PHASE_TOLERANCE_DEG = 1.0

_ALIASES = {
    "incidence": ("incidence", "i", "inc"),
    "emission": ("emission", "e", "emi"),
    "azimuth": ("azimuth", "az", "psi", "phi"),
    "phase": ("phase", "g"),
    "wavelength": ("wavelength", "wl", "lambda"),
    "reflectance": ("reflectance", "refl"),
}
_UNIT_SUFFIX = re.compile(r"\s*(\[[^\]]*\]|\([^)]*\)|_deg|_nm)\s*$")


class GoniometerTable(NamedTuple):
    """A goniometer table as arrays ready for `lumaxlike.fit` (one sample, its spectra).

    Attributes:
        refl: bidirectional reflectance r [1/sr], shape (1, bands, observations): one
            "pixel", the observation axis last; NaN where the table has a gap.
        to_sun: direction vectors toward the source, (observations, 3), on a flat
            sample.
        to_sensor: direction vectors toward the detector, (observations, 3).
        normal: the sample's normal, straight up, (observations, 3).
        wavelength: (bands,) the wavelength column headers, in the table's unit.
        incidence: (observations,) incidence angles [rad].
        emission: (observations,) emission angles [rad].
        azimuth: (observations,) relative azimuths [rad].
        phase: (observations,) phase angles [rad].
    """

    refl: np.ndarray
    to_sun: np.ndarray
    to_sensor: np.ndarray
    normal: np.ndarray
    wavelength: np.ndarray
    incidence: np.ndarray
    emission: np.ndarray
    azimuth: np.ndarray
    phase: np.ndarray


def _role(header: str) -> str | None:
    name = _UNIT_SUFFIX.sub("", header.strip()).strip().lower()
    for role, aliases in _ALIASES.items():
        if name in aliases:
            return role
    return None


def _number(text: str, where: str) -> float:
    text = text.strip()
    if text == "" or text.lower() in ("nan", "na", "n/a"):
        return math.nan
    try:
        return float(text)
    except ValueError:
        raise ValueError(f"{where}: {text!r} is not a number") from None


def read_goniometer_table(path, units: str) -> GoniometerTable:
    """Read a goniometer CSV table (layout: the module docstring) into arrays for `fit`.

    Args:
        path: the CSV file (comma, semicolon or tab separated).
        units: what the table's values are: ``"r"`` (bidirectional reflectance, 1/sr),
            ``"radf"`` (radiance factor I/F = pi r) or ``"reff"`` (reflectance factor
            pi r / cos i, the usual laboratory quantity against a white standard).

    Returns:
        `GoniometerTable`; e.g. ``lumaxlike.fit(t.refl, t.to_sun, t.to_sensor, t.normal,
        params, free=...)``.

    Raises:
        ValueError: naming the file (and the row or column) for a missing angle column,
            an unknown column, a value that is not a number, an angle out of range, a
            phase angle inconsistent with the other angles, duplicate rows in the long
            layout, or an unknown `units`.
    """
    units = check_units(units)
    path = Path(path)
    text = path.read_text()
    lines = [
        (number, line)
        for number, line in enumerate(text.splitlines(), 1)
        if line.strip() and not line.lstrip().startswith("#")
    ]
    if len(lines) < 2:
        raise ValueError(f"{path}: a goniometer table needs a header row and at least one data row")
    try:
        dialect = csv.Sniffer().sniff(lines[0][1], delimiters=",;\t")
    except csv.Error:
        dialect = csv.excel
    rows = [
        (number, row)
        for (number, _), row in zip(
            lines, csv.reader(io.StringIO("\n".join(line for _, line in lines)), dialect)
        )
    ]
    (_, header), data = rows[0], rows[1:]
    header = [h.strip() for h in header]
    roles = [_role(h) for h in header]
    for role in ("incidence", "emission"):
        if role not in roles:
            raise ValueError(
                f"{path}: no {role} column (expected one of {_ALIASES[role]}); found {header}"
            )
    if "azimuth" not in roles and "phase" not in roles:
        raise ValueError(
            f"{path}: needs an azimuth column ({_ALIASES['azimuth']}) or a phase column ({_ALIASES['phase']}); found {header}"
        )
    for number, row in data:
        if len(row) != len(header):
            raise ValueError(f"{path}, line {number}: {len(row)} values for {len(header)} columns")
    long = "wavelength" in roles or "reflectance" in roles
    if long:
        angles, wavelength, values = _long_layout(path, header, roles, data)
    else:
        angles, wavelength, values = _wide_layout(path, header, roles, data)
    incidence, emission, azimuth, phase = _checked_angles(path, angles)
    to_sun, to_sensor, normal = geometry_from_angles(incidence, emission, azimuth)
    refl = to_bidirectional_reflectance(values, units, to_sun, normal)  # (observations, bands)
    return GoniometerTable(
        np.ascontiguousarray(refl.T[None]),
        to_sun,
        to_sensor,
        normal,
        wavelength,
        incidence,
        emission,
        azimuth,
        phase,
    )


def _angle_columns(roles) -> dict[str, int]:
    columns = {}
    for index, role in enumerate(roles):
        if role in ("incidence", "emission", "azimuth", "phase"):
            columns[role] = index
    return columns


def _wide_layout(path, header, roles, data):
    columns = _angle_columns(roles)
    bands = [j for j, role in enumerate(roles) if role is None]
    if len(columns) != sum(role is not None for role in roles):
        raise ValueError(f"{path}: a column appears twice: {header}")
    if not bands:
        raise ValueError(
            f"{path}: no wavelength columns (headers that are numbers) besides {header}"
        )
    wavelength = np.array(
        [_number(header[j], f"{path}, column header {header[j]!r} (a wavelength)") for j in bands]
    )
    if not np.all(np.isfinite(wavelength)):
        raise ValueError(
            f"{path}: every column besides the angles must be headed by its wavelength, got {header}"
        )
    angles = {
        role: np.array([_number(row[j], f"{path}, line {n}, {role}") for n, row in data])
        for role, j in columns.items()
    }
    values = np.array(
        [
            [_number(row[j], f"{path}, line {n}, column {header[j]!r}") for j in bands]
            for n, row in data
        ]
    )
    return angles, wavelength, values


def _long_layout(path, header, roles, data) -> tuple[dict, np.ndarray, np.ndarray]:
    columns = _angle_columns(roles)
    for role in ("wavelength", "reflectance"):
        if role not in roles:
            raise ValueError(
                f"{path}: the long layout needs a {role} column ({_ALIASES[role]}); found {header}"
            )
    unknown = [h for h, role in zip(header, roles) if role is None]
    if unknown:
        raise ValueError(
            f"{path}: unknown columns {unknown} in the long layout (expected angles, wavelength, reflectance)"
        )
    wl_column, value_column = roles.index("wavelength"), roles.index("reflectance")
    geometries: dict[tuple, int] = {}
    entries: dict[tuple, float] = {}
    for n, row in data:
        key = tuple(_number(row[j], f"{path}, line {n}, {role}") for role, j in columns.items())
        wl = _number(row[wl_column], f"{path}, line {n}, wavelength")
        if (key, wl) in entries:
            raise ValueError(
                f"{path}, line {n}: a second value for wavelength {wl} at the same geometry"
            )
        geometries.setdefault(key, len(geometries))
        entries[key, wl] = _number(row[value_column], f"{path}, line {n}, reflectance")
    wavelength = np.array(sorted({wl for _, wl in entries}))
    band = {wl: b for b, wl in enumerate(wavelength)}
    values = np.full((len(geometries), len(wavelength)), np.nan)  # missing rows: gaps
    for (key, wl), value in entries.items():
        values[geometries[key], band[wl]] = value
    keys = np.array(list(geometries), dtype=float).reshape(len(geometries), len(columns))
    angles = {role: keys[:, k] for k, role in enumerate(columns)}
    return angles, wavelength, values


def _checked_angles(path, angles):
    """(incidence, emission, azimuth, phase) [rad] from the table's angles [deg], checked."""
    for role, values in angles.items():
        if not np.all(np.isfinite(values)):
            raise ValueError(f"{path}: the {role} column has missing or non-numeric values")
    incidence, emission = angles["incidence"], angles["emission"]
    if np.any(emission < 0.0):
        raise ValueError(
            f"{path}: negative emission angles (signed, principal-plane convention?): give "
            "emission >= 0 with azimuth 0 (source side) or 180 (opposite side)"
        )
    for role, values in (("incidence", incidence), ("emission", emission)):
        if np.any((values < 0.0) | (values > 90.0)):
            raise ValueError(f"{path}: {role} angles must lie in [0, 90] deg")
    inc, emi = np.radians(incidence), np.radians(emission)
    if "azimuth" in angles:
        azimuth = np.radians(angles["azimuth"])
        phase = np.arccos(
            np.clip(
                np.cos(inc) * np.cos(emi) + np.sin(inc) * np.sin(emi) * np.cos(azimuth), -1.0, 1.0
            )
        )
        if "phase" in angles:
            mismatch = np.abs(np.degrees(phase) - angles["phase"])
            if np.any(mismatch > PHASE_TOLERANCE_DEG):
                raise ValueError(
                    f"{path}: the phase column disagrees with incidence, emission and azimuth by up to "
                    f"{mismatch.max():.2f} deg (tolerance {PHASE_TOLERANCE_DEG} deg)"
                )
        return inc, emi, azimuth, phase
    phase = np.radians(angles["phase"])
    if np.any((angles["phase"] < 0.0) | (angles["phase"] > 180.0)):
        raise ValueError(f"{path}: phase angles must lie in [0, 180] deg")
    # |i - e| <= g <= i + e; cos psi = (cos g - cos i cos e) / (sin i sin e)
    out_of_range = (np.degrees(phase) < np.abs(incidence - emission) - PHASE_TOLERANCE_DEG) | (
        np.degrees(phase) > incidence + emission + PHASE_TOLERANCE_DEG
    )
    if np.any(out_of_range):
        raise ValueError(
            f"{path}: phase angles outside |i - e| <= g <= i + e: no azimuth gives them"
        )
    azimuth = relative_azimuth(inc, emi, phase, tolerance=np.radians(PHASE_TOLERANCE_DEG))
    # the phase angle of the geometry built (the tabulated one, up to rounding)
    phase = np.arccos(
        np.clip(np.cos(inc) * np.cos(emi) + np.sin(inc) * np.sin(emi) * np.cos(azimuth), -1.0, 1.0)
    )
    return inc, emi, azimuth, phase
