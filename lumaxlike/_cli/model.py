"""The model and the settings of a run, from the command line's flags or ``--params-from``.

One builder, :func:`model_from_options`, makes the per-band models of every command:
Hapke parameters (:class:`lumaxlike.HapkeParams`) or an empirical photometric function
(:class:`lumaxlike.PhotometricFunction`), each field from its flag, else from the record
of an earlier run, else its default. :func:`resolve_settings` does the same for the other
recorded settings (geometry, DTM, units, solver, tolerances).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from .options import (
    DEFAULT_SOLVER,
    HAPKE_OPTIONS,
    MODEL_OPTIONS,
    PHOTOMETRIC_OPTIONS,
    dest,
)

__all__ = [
    "RECORDED_OPTIONS",
    "model_from_options",
    "fitted_maps",
    "read_record",
    "normalisation_maps",
    "recorded_values",
    "refuse_recorded_maps",
    "resolve_settings",
    "same_params",
    "stack_model",
]

#: ``lumaxlike invert`` options that --params-from can fill in: flag -> Provenance attribute.
RECORDED_OPTIONS = {
    "--geometry": "geometry",
    "--dtm": "dtm",
    "--units": "units",
    "--solver": "solver",
    "--tol": "tol",
    "--max-iter": "max_iter",
    "--refl-sigma": "refl_sigma",
    "--surface": "surface",
}


def read_record(args):
    """The provenance record of ``--params-from`` (checked reproducible), or None."""
    if getattr(args, "params_from", None) is None:
        return None
    from .._io.write.provenance_files import read_provenance

    record = read_provenance(args.params_from)
    record.check_reproducible(f"--params-from {args.params_from}")
    return record


def fitted_maps(args, record) -> dict:
    """``{field: path}`` of the fitted maps of a `fit` output (or the posterior median maps
    of a `sample` output) read by ``--params-from`` that no option of this run replaces;
    {} for any other record.

    A fit's record holds the *starting* values of the parameters it fitted (its
    ``lumaxlike_param_*``); the fitted values are per-pixel maps. A run that cannot take
    maps (``invert``) refuses such a record unless every fitted parameter is given.
    """
    # a sample output's record is the same: the warm start's values, and median maps
    settings = getattr(record, "fit_settings", None) or {}
    maps = settings.get("fitted_maps") or {}
    if not maps:
        maps = (getattr(record, "sample_settings", None) or {}).get("median_maps") or {}
    flags = {field: flag for flag, field, _, _ in HAPKE_OPTIONS}
    by_name = {flag[2:]: field for flag, field, _, _ in HAPKE_OPTIONS}
    given = {by_name[name] for name, _ in (getattr(args, "param_map", None) or [])}
    return {
        field: path
        for field, path in maps.items()
        if field != "w" and field not in given and getattr(args, dest(flags[field]), None) is None
    }


def normalisation_maps(args, record) -> dict:
    """``{field: path}`` of the ``--param-map``s a normalisation's record (read by
    ``--params-from``) holds that no option of this run replaces; {} for any other record.
    A path is None for a map given as an array."""
    flags = {field: flag for flag, field, _, _ in HAPKE_OPTIONS}
    return {
        field: path
        for field, path in getattr(record, "param_maps", None) or ()
        if getattr(args, dest(flags[field]), None) is None
    }


def refuse_recorded_maps(args, record, command: str) -> None:
    """ValueError when ``--params-from`` names an output made with per-pixel parameter
    maps that ``command`` cannot use (it takes one value per band): a fit's fitted maps
    (its record's values are the fit's start) or a normalisation's ``--param-map``s (its
    record's values are the scalars the maps replaced)."""
    maps = fitted_maps(args, record)
    if maps:
        names = ", ".join(maps)
        raise ValueError(
            f"--params-from {args.params_from} is a fit's output: its record holds the starting "
            f"values of the fitted {names}, whose fitted values are per-pixel maps "
            f"({', '.join(str(p) for p in maps.values())}) that {command} does not take; give "
            f"{', '.join(next(f for f, d, _, _ in HAPKE_OPTIONS if d == n) for n in maps)} "
            "or use normalize --params-from, which uses the maps"
        )
    maps = normalisation_maps(args, record)
    if maps:
        flags = {field: flag for flag, field, _, _ in HAPKE_OPTIONS}
        raise ValueError(
            f"--params-from {args.params_from} was made with the parameter maps "
            f"{', '.join(f'{field} ({path})' for field, path in maps.items())}, which "
            f"{command} does not take (one value per band); give "
            f"{', '.join(flags[field] for field in maps)} or use normalize --params-from, "
            "which uses the maps"
        )


def is_normalised(path) -> bool:
    """True for a product normalised to a standard geometry (see :mod:`.products`)."""
    from .products import is_normalised as normalised

    return path is not None and normalised(path)


def recorded_values(record, declared) -> dict:
    """``{name: value}`` of ``record`` (--params-from's, or None) for the options of
    ``declared`` (a `DeclaredOptions` class) that it keeps: what
    ``declared.from_arguments`` takes where a flag is not given."""
    if record is None:
        return {}
    return {name: getattr(record, name, None) for name in declared.declared()}


def resolve_settings(args, record, declared=None) -> dict:
    """Settings of the run: the options given, else --params-from's record, else
    defaults; those of ``declared`` (a `DeclaredOptions` class: its ``from_arguments``
    and `recorded_values` give them) left out."""
    settings = {}
    for flag, attribute in RECORDED_OPTIONS.items():
        if declared is not None and attribute in declared.declared():
            continue
        key = dest(flag)  # the file functions' name
        value = getattr(args, attribute) if hasattr(args, attribute) else getattr(args, key)
        if value is None and record is not None:
            value = getattr(record, attribute)
        settings[key] = value
    geometry = settings["geometry"]
    if isinstance(geometry, tuple):  # recorded as (role, path) pairs: usable when all are files
        if not all(path is not None for _, path in geometry):
            raise ValueError(
                f"--params-from {args.params_from} records a geometry given as "
                "arrays; give --geometry"
            )
        settings["geometry"] = dict(geometry)
    for flag in ("--geometry", "--units"):
        if settings[dest(flag)] is None and not (
            flag == "--geometry" and is_normalised(getattr(args, "cube", None))
        ):  # a normalised product (M3 L2) is inverted at its standard geometry
            raise ValueError(f"{flag} is required (or --params-from an output that records it)")
    settings["solver"] = settings["solver"] or DEFAULT_SOLVER
    settings["surface"] = settings["surface"] or "auto"
    return settings


def _params_key(params) -> tuple:
    """The values of a model, comparable and hashable (HapkeParams may hold arrays)."""
    from .._params import HapkeParams

    if not isinstance(params, HapkeParams):
        return (params,)
    legendre = None if params.legendre is None else tuple(float(v) for v in params.legendre)
    fields = (float(getattr(params, name)) for _, name, _, _ in HAPKE_OPTIONS)
    return (*fields, legendre, params.model_key)


def same_params(params) -> bool:
    """True when every model of the sequence has the same values."""
    return len({_params_key(p) for p in params}) == 1


def stack_model(args, bands: int, command: str, verb: str):
    """The one model of a command on a stack of cubes of ``bands`` bands (``lumaxlike
    fit``, ``sample``: ``command``, whose parameters are ``verb``, e.g. "fitted") from
    its options; ValueError for values that differ between bands."""
    params = model_from_options(args, bands, cube=args.cubes[0])
    if not same_params(params):
        raise ValueError(
            f"lumaxlike {command} takes one value per Hapke option (the start of a {verb} "
            "parameter, or the fixed value), shared by every band"
        )
    return params[0]


def stack_keywords(args, command: str, verb: str) -> dict:
    """The keywords of a stack command's file front end (`fit_file`, `sample_file`) from
    the options `add_stack_inputs` and `add_stack_selection` declare: the geometry, the
    model (`stack_model`, made once the run has opened the cubes: their bands), free,
    units, DTM and the angle ranges given [deg]."""
    from .._files.arguments import FromBands

    angles = ("incidence", "emission", "phase")
    limits = {angle: getattr(args, f"{angle}_range") for angle in angles}
    return dict(
        geometry=args.geometry,
        params=FromBands(lambda bands: stack_model(args, bands, command, verb)),
        free=args.free,
        units=args.units,
        dtm=args.dtm,
        observation_limits_deg={k: v for k, v in limits.items() if v is not None},
    )


def _photometric_kind(args, record):
    """The photometric function's kind the run uses (--model, else the record's), or None."""
    from .._photometric import PHOTOMETRIC_KINDS, PhotometricFunction

    if getattr(args, "model", None) is not None:
        return args.model if args.model in PHOTOMETRIC_KINDS else None
    if record is not None and isinstance(record.params[0], PhotometricFunction):
        return record.params[0].kind
    return None


def _given(args, flags) -> list[str]:
    """The flags of ``flags`` given on the command line (a parser without one: not given)."""
    return [flag for flag in flags if getattr(args, dest(flag), None) is not None]


def model_from_options(args, bands: int, record=None, *, cube=None) -> list:
    """One model per band from the options, else ``record``'s, else the defaults.

    A PhotometricFunction when --model (or the record) names one, else HapkeParams; the
    other family's options are refused, naming them. Equal bands share one object.

    Args:
        args: parsed options (a command's parser may lack the photometric ones).
        bands: the cube's bands.
        record: the --params-from provenance record, or None.
        cube: the cube named in messages (default ``args.cube``).

    Returns:
        list of ``bands`` models.

    Raises:
        ValueError: a value outside its range, a wrong number of values, an option of the
            other family, a record for another number of bands (the message names the flag).
    """
    from .._params import HapkeParams
    from .._photometric import PhotometricFunction

    cube = args.cube if cube is None else cube
    kind = _photometric_kind(args, record)
    recorded = None if record is None else list(record.params)
    photometric_record = recorded is not None and isinstance(recorded[0], PhotometricFunction)
    if kind is None:
        given = _given(args, [flag for flag, _, _ in PHOTOMETRIC_OPTIONS])
        if given:
            raise ValueError(
                f"{given[0]} is an option of the empirical photometric functions; "
                f"the Hapke model does not use it (give --model lunar_lambert, "
                f"minnaert or shkuratov)"
            )
        base = None if photometric_record else recorded
        options: Sequence[tuple[str, str, float | None, str]] = HAPKE_OPTIONS

        def check(flag, name, value, text):
            try:
                HapkeParams(**{"b": 0.0, "c": 0.0, name: value})
            except ValueError:
                shown = math.degrees(value) if name == "roughness" else value
                raise ValueError(f"{flag} {shown:g} is outside its valid range ({text})") from None

        configuration = {}
        for flag, field, _ in MODEL_OPTIONS:  # the same for every band
            choice = getattr(args, dest(flag))
            if choice is None and base is not None:
                choice = getattr(base[0], field)
            if choice is not None:
                configuration[field] = choice

        def make(fields, legendre):
            return HapkeParams(**fields, legendre=legendre, **configuration)
    else:
        hapke_flags = [flag for flag, _, _, _ in HAPKE_OPTIONS]
        hapke_flags += [flag for flag, _, _ in MODEL_OPTIONS if flag != "--model"]
        given = _given(args, hapke_flags)
        if given:
            raise ValueError(f"{given[0]} is a Hapke option; --model {kind} does not use it")
        photometric_base = recorded is not None and photometric_record and recorded[0].kind == kind
        base = recorded if photometric_base else None
        # no defaults: a kind refuses the fields it does not use
        options = [(flag, name, None, text) for flag, name, text in PHOTOMETRIC_OPTIONS]

        def check(flag, name, value, text):
            try:
                PhotometricFunction(kind, **{name: value})
            except ValueError as error:
                reason = (
                    "is outside its valid range" if value < 0 else f"is not used by --model {kind}"
                )
                raise ValueError(f"{flag} {value:g} {reason} ({text})") from error

        def make(fields, legendre):
            return PhotometricFunction(kind, **fields)

    if base is not None and len(base) != bands:
        if not same_params(base):
            raise ValueError(
                f"--params-from {args.params_from} records parameters for "
                f"{len(base)} bands but the cube {cube} has {bands} bands"
            )
        base = [base[0]] * bands
    per_field = _fields_per_band(args, options, base, bands, cube, check)
    return _models(per_field, base, bands, make)


def _fields_per_band(args, options, base, bands, cube, check) -> dict:
    """`model_from_options`'s values per field, one per band: the option's (checked by
    `check`, ValueError naming the flag), else the record's (`base`), else the default."""
    per_field = {}
    for flag, name, default, text in options:
        values = getattr(args, dest(flag))
        if values is None and base is not None:
            per_field[name] = [getattr(p, name) for p in base]
            continue
        if values is None and default is None:
            continue
        values = [default] if values is None else values
        if len(values) not in (1, bands):
            raise ValueError(
                f"{flag} gives {len(values)} values but the cube {cube} has "
                f"{bands} bands (give one value, or one per band)"
            )
        if name == "roughness":
            values = [math.radians(v) for v in values]
        for value in values:  # checked one field at a time, so the message names the flag
            check(flag, name, value, text)
        per_field[name] = values if len(values) == bands else values * bands
    return per_field


def _models(per_field, base, bands, make) -> list:
    """`model_from_options`'s models, one per band (`make(fields, legendre)`); equal bands
    share one object."""
    legendre = [getattr(p, "legendre", None) for p in base] if base is not None else [None] * bands
    shared: dict[tuple, object] = {}
    params = []
    for band in range(bands):
        fields = {name: values[band] for name, values in per_field.items()}
        band_legendre = legendre[band]
        key = (
            *fields.items(),
            None if band_legendre is None else tuple(band_legendre),
        )
        if key not in shared:
            shared[key] = make(fields, band_legendre)
        params.append(shared[key])
    return params
