"""The settings of ``lumaxlike unmix`` from its options, else ``--params-from``'s record.

An unmix output records how it was made (`Provenance.unmix_settings`, the
``lumaxlike_unmix_*`` keys): the route, sum-to-one, the endmembers' names, densities,
grain sizes and extinction efficiencies, and the library they were read from (its files,
format, units, measurement angles, the cube's wavelengths and band widths it was
resampled to). :func:`unmix_settings` takes the library's and the endmembers' from their
options, else from that record, else their defaults, as :func:`.model.resolve_settings`
does for the settings every command shares, and refuses, saying why, a record the run
cannot reproduce; the unmixing's own options (`lumaxlike.UnmixSettings`: route,
sum-to-one, ...) come from their flags, else :func:`recorded_options`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from .options import dest

__all__ = [
    "LIBRARY_OPTIONS",
    "LibrarySettings",
    "library_record",
    "recorded_options",
    "unmix_settings",
]

#: options of the library: flag -> key of the recorded library (``lumaxlike_unmix_library``)
LIBRARY_OPTIONS = {
    "--endmembers": "files",
    "--library-format": "format",
    "--library-units": "units",
    "--library-incidence": "incidence_deg",
    "--library-emission": "emission_deg",
    "--library-azimuth": "azimuth_deg",
    "--wavelengths": "wavelengths_given_um",
    "--fwhm": "fwhm_um",
}
#: options of the endmembers, one value or one per endmember: flag -> recorded key
ENDMEMBER_OPTIONS = {
    "--density": "density",
    "--grain-size": "grain_size",
    "--extinction-efficiency": "extinction_efficiency",
}
#: defaults of the options that have one (the others: None, or required)
DEFAULTS = {"--library-units": "reff", "--library-azimuth": [0.0]}
REQUIRED = ("--endmembers", "--density", "--grain-size")


@dataclass(frozen=True)
class LibrarySettings:
    """Where ``lumaxlike unmix``'s endmembers come from: ``library`` (``{flag: value}``
    for :data:`LIBRARY_OPTIONS`, angles in degrees, as the options take them) and
    ``per_endmember`` (``{flag: list or None}`` for :data:`ENDMEMBER_OPTIONS`); ``recorded``
    names the flags whose values came from the record ``source``, made for the endmembers
    ``recorded_names``."""

    library: dict
    per_endmember: dict
    recorded: frozenset
    recorded_names: tuple
    source: str

    def endmember_values(self, names) -> dict:
        """``{flag: values}`` of the per-endmember options for the library's spectra
        ``names``: a recorded list is taken by endmember name (the record's order need not
        be the library's).

        Raises:
            ValueError: a recorded value for a spectrum the record does not name.
        """
        names = list(names)
        values = {}
        for flag, given in self.per_endmember.items():
            if flag not in self.recorded or names == list(self.recorded_names):
                values[flag] = given
                continue
            index = {name: i for i, name in enumerate(self.recorded_names)}
            missing = [name for name in names if name not in index]
            if missing or len(index) != len(self.recorded_names):
                raise ValueError(
                    f"{self.source} records {flag} for the endmembers "
                    f"{', '.join(self.recorded_names)}; the library "
                    f"({', '.join(map(str, self.library['--endmembers']))}) holds "
                    f"{', '.join(names)}: give {flag}"
                )
            values[flag] = [given[index[name]] for name in names]
        return values


def library_record(settings: LibrarySettings, wavelengths_um) -> dict:
    """The ``library`` `unmix_file` records: :data:`LIBRARY_OPTIONS`' values under their
    keys (files absolute), and ``wavelengths_um``, the band centres the library was
    resampled to [um]."""
    from pathlib import Path

    record = {key: settings.library[flag] for flag, key in LIBRARY_OPTIONS.items()}
    record["files"] = [str(Path(path).absolute()) for path in record["files"]]
    record["wavelengths_um"] = [float(v) for v in wavelengths_um]
    return record


def recorded_options(args, record) -> dict:
    """``{name: value}`` of the options of `lumaxlike.UnmixSettings` that ``record``
    (--params-from's, or None) gives, for its ``from_arguments`` where a flag is not
    given: the noise from any record; the route, sum-to-one, tolerance and iterations
    from an unmix output's only (another operation's tolerances are on another quantity).

    Raises:
        ValueError: an unmix record whose unmixing settings are malformed.
    """
    if record is None:
        return {}
    values = {"refl_sigma": record.refl_sigma}
    recorded = _recorded_unmixing(record, f"--params-from {args.params_from}")
    if recorded is not None:
        values.update(route=recorded["route"], sum_to_one=recorded["sum_to_one"])
        values.update(tol=record.tol, max_iter=record.max_iter)
    return values


def unmix_settings(args, record) -> LibrarySettings:
    """The endmembers' settings: each option given, else ``record``'s (an unmix
    output's), else its default.

    Args:
        args: parsed ``lumaxlike unmix`` options (None where not given).
        record: the --params-from `Provenance`, or None. A record of another operation
            (invert, normalize) gives none of these settings.

    Raises:
        ValueError: a required option neither given nor recorded; a record whose unmixing
            settings are malformed, or whose endmembers were not read from files (given
            as `lumaxlike.Endmembers` in Python) when --endmembers is not given.
    """
    source = f"--params-from {args.params_from}"
    recorded = _recorded_unmixing(record, source)
    taken = set()

    def value(flag, recorded_value, has_record):
        given = getattr(args, dest(flag))
        if given is not None:
            return given
        if has_record:
            taken.add(flag)
            return recorded_value
        return DEFAULTS.get(flag)

    library_recorded = None if recorded is None else recorded["library"]
    optical = getattr(args, "optical_constants", None) is not None  # `unmix_optical`
    if library_recorded and "optical_constants" in library_recorded and not optical:
        raise ValueError(
            f"{source} was unmixed with endmembers from optical constants: give "
            "--optical-constants (and --free, the bounds) again"
        )
    if optical:
        library_recorded = None
    if (
        library_recorded is None
        and recorded is not None
        and args.endmembers is None
        and not optical
    ):
        raise ValueError(
            f"{source} records no library: its endmembers were given to unmix_file as "
            "lumaxlike.Endmembers, not read from files; give --endmembers and the "
            "library's options"
        )
    library = {}
    for flag, key in LIBRARY_OPTIONS.items():
        if getattr(args, dest(flag)) is not None or library_recorded is None:
            library[flag] = value(flag, None, False)
            continue
        if key not in library_recorded:
            raise ValueError(
                f"{source} records its library without {key!r} (it was not made by "
                f"lumaxlike unmix); give {flag}"
            )
        library[flag] = value(flag, _checked(key, library_recorded[key], source), True)
    per_endmember = {
        flag: value(flag, recorded and recorded[key], recorded is not None)
        for flag, key in ENDMEMBER_OPTIONS.items()
    }
    settings = {**library, **per_endmember}
    for flag in REQUIRED if not optical else ():
        if settings[flag] is None:
            raise ValueError(f"{flag} is required (or --params-from an unmix output)")
    return LibrarySettings(
        library=library,
        per_endmember=per_endmember,
        recorded=frozenset(taken),
        recorded_names=() if recorded is None else tuple(recorded["endmembers"]),
        source=source,
    )


def is_unmix_record(record) -> bool:
    """True for the record of an unmix output."""
    return record is not None and getattr(record, "unmix_settings", None) is not None


def _recorded_unmixing(record, source) -> dict | None:
    """The record's unmixing settings, checked, or None (no record, another operation)."""
    from .._unmix.options import ROUTES

    if not is_unmix_record(record):
        return None
    settings = dict(record.unmix_settings)

    def bad(key):
        return ValueError(
            f"{source}: lumaxlike_unmix_{key} has the unexpected value {settings.get(key)!r}"
        )

    for key in ("route", "sum_to_one", "endmembers", *ENDMEMBER_OPTIONS.values(), "library"):
        if key not in settings:
            raise ValueError(f"{source} lacks the provenance key lumaxlike_unmix_{key}")
    if settings["route"] not in ROUTES:
        raise bad("route")
    if not isinstance(settings["sum_to_one"], bool):
        raise bad("sum_to_one")
    names = settings["endmembers"]
    if not (isinstance(names, list) and names and all(isinstance(n, str) for n in names)):
        raise bad("endmembers")
    for key in ENDMEMBER_OPTIONS.values():
        if not (_is_numbers(settings[key]) and len(settings[key]) == len(names)):
            raise bad(key)
    if settings["library"] is not None and not isinstance(settings["library"], dict):
        raise bad("library")
    return settings


def _checked(key, value, source):
    """A recorded library value, checked to be what its option would give."""
    from .._io.read.spectral_library import LIBRARY_FORMATS

    if key == "files":
        fine = isinstance(value, list) and bool(value) and all(isinstance(v, str) for v in value)
    elif key == "format":
        fine = value is None or value in LIBRARY_FORMATS
    elif key == "units":
        fine = value in ("r", "radf", "reff")
    else:  # angles [deg], wavelengths and widths [um]: None (the default) or numbers
        fine = value is None or _is_numbers(value)
    if not fine:
        raise ValueError(
            f"{source}: lumaxlike_unmix_library has the unexpected {key} value {value!r}"
        )
    return value


def _is_numbers(value) -> bool:
    return (
        isinstance(value, list)
        and bool(value)
        and all(
            isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v)
            for v in value
        )
    )
