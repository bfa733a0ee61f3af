"""The words of the provenance record: the model's components and their text, the
configuration, the inputs' paths, the time, and the Python call as written; the record
itself is `lumaxlike._provenance.record`."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from .._params import FIELD_NAMES, HapkeParams
from .._photometric import PhotometricFunction

__all__ = [
    "CONFIGURATION_TEXT",
    "LEGENDRE_PHASE_FUNCTION",
    "MODEL",
    "OptionsCall",
    "PHOTOMETRIC_TEXT",
    "PREFIX",
    "configuration_of",
    "geometry_record",
    "input_path",
    "is_photometric",
    "model_of",
    "photometric_kind",
    "python_call",
    "utc_now",
]


PREFIX = "lumaxlike_"
"""Prefix of every provenance key."""


MODEL = {
    "reflectance": "Hapke 2002 AMSA",
    "h_function": "Hapke 2002 eq. 13 approximation",
    "roughness": "Hapke 1984",
    "opposition": "SHOE + CBOE (Hapke 2002)",
    "phase_function": "double Henyey-Greenstein",
}
"""The default model: component -> choice (the phase function may be a Legendre series)."""


LEGENDRE_PHASE_FUNCTION = "Legendre series"


#: How each configuration choice of `HapkeParams` is recorded: field -> {choice: text}.
CONFIGURATION_TEXT = {
    "multiple_scattering": {"amsa": "Hapke 2002 AMSA", "imsa": "Hapke 1981/1993 IMSA"},
    "h_function": {
        "hapke2002": "Hapke 2002 eq. 13 approximation",
        "hapke1981": "Hapke 1981 two-stream",
        "exact": "exact Chandrasekhar H (isotropic scattering)",
    },
    "phase_function": {
        "dhg": "double Henyey-Greenstein",
        "hg": "single Henyey-Greenstein",
        "cornette_shanks": "Cornette-Shanks 1992",
    },
}


_COMPONENT = {
    "multiple_scattering": "reflectance",
    "h_function": "h_function",
    "phase_function": "phase_function",
}


# Legendre coefficients replace the double Henyey-Greenstein (HapkeParams.phase_function "dhg")
_RECORDED_ALSO = {"phase_function": {LEGENDRE_PHASE_FUNCTION: "dhg"}}


#: How each kind of `PhotometricFunction` is recorded (the model's ``reflectance``).
PHOTOMETRIC_TEXT = {
    "lambert": "Lambert (ISIS3 photomet)",
    "lommel_seeliger": "Lommel-Seeliger (ISIS3 photomet)",
    "lunar_lambert": "Lunar-Lambert (McEwen 1991, ISIS3 photomet)",
    "minnaert": "Minnaert (ISIS3 photomet)",
    "shkuratov": "Shkuratov et al. 2011",
}


def photometric_kind(model: Mapping):
    """The `PhotometricFunction` kind a recorded ``model`` stands for, or None (Hapke)."""
    kinds = [kind for kind, text in PHOTOMETRIC_TEXT.items() if model.get("reflectance") == text]
    return kinds[0] if kinds else None


def is_photometric(params) -> bool:
    return isinstance(params[0], PhotometricFunction)


def model_of(params) -> dict[str, str]:
    """The ``{component: choice}`` model a sequence of per-band HapkeParams (or
    PhotometricFunction) runs.

    Raises:
        ValueError: the bands do not share one model configuration.
    """
    if any(isinstance(p, PhotometricFunction) for p in params):
        kinds = {p.kind if isinstance(p, PhotometricFunction) else "hapke" for p in params}
        if len(kinds) > 1:
            raise ValueError(f"the bands' models mix {sorted(kinds)}")
        return {"reflectance": PHOTOMETRIC_TEXT[params[0].kind]}
    keys = {p.model_key for p in params}
    if len(keys) > 1:
        raise ValueError(
            f"the bands' HapkeParams mix model configurations {sorted(k.name for k in keys)}"
        )
    model = dict(MODEL)
    for field, texts in CONFIGURATION_TEXT.items():
        model[_COMPONENT[field]] = texts[getattr(params[0], field)]
    if any(p.legendre is not None for p in params):
        model["phase_function"] = LEGENDRE_PHASE_FUNCTION
    return model


def configuration_of(model: Mapping, source) -> dict[str, str]:
    """The `HapkeParams` configuration fields a recorded ``model`` stands for."""
    configuration = {}
    for field, texts in CONFIGURATION_TEXT.items():
        recorded = model.get(_COMPONENT[field])
        choices = [choice for choice, text in texts.items() if text == recorded]
        choices += [
            choice for text, choice in _RECORDED_ALSO.get(field, {}).items() if text == recorded
        ]
        if not choices:
            raise ValueError(
                f"{source} records the {_COMPONENT[field]} {recorded!r}, which this "
                f"lumaxlike does not know ({', '.join(texts.values())})"
            )
        configuration[field] = choices[0]
    return configuration


def utc_now() -> str:
    """The current time, UTC ISO 8601 to the second (e.g. ``2026-11-30T06:14:30Z``)."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def input_path(path) -> str | None:
    return None if path is None else str(Path(path).resolve())


def geometry_record(geometry):
    """What ``lumaxlike_input_geometry`` records for a geometry argument."""
    if isinstance(geometry, (str, Path)):
        return input_path(geometry)
    if isinstance(geometry, Mapping):
        return tuple(
            (str(role), input_path(value) if isinstance(value, (str, Path)) else None)
            for role, value in geometry.items()
        )
    return None


def python_call(function: str, *args, **kwargs) -> str:
    """``lumaxlike.<function>(...)`` as called, for the record: paths and scalars as written,
    a HapkeParams by its fields, anything bulky (arrays, DataArrays, mappings, per-band
    parameter lists) by its type and shape (the values are recorded apart)."""
    arguments = [_call_repr(value) for value in args]
    arguments += [f"{name}={_call_repr(value)}" for name, value in kwargs.items()]
    return f"lumaxlike.{function}({', '.join(arguments)})"


@dataclass(frozen=True)
class OptionsCall:
    """An options object as a recorded call writes it: ``lumaxlike.<kind>(<fields>)``."""

    kind: str
    fields: Mapping


def _call_repr(value) -> str:
    if isinstance(value, OptionsCall):
        fields = ", ".join(f"{name}={_call_repr(v)}" for name, v in value.fields.items())
        return f"lumaxlike.{value.kind}({fields})"
    if isinstance(value, Path):
        return repr(str(value))
    if value is None or isinstance(value, (str, bool, int, float)):
        return repr(value)
    if isinstance(value, PhotometricFunction):
        fields = ", ".join(
            f"{name}={float(getattr(value, name))!r}" for name in value.used_parameters
        )
        return f"PhotometricFunction({value.kind!r}{', ' if fields else ''}{fields})"
    if isinstance(value, HapkeParams):
        fields = ", ".join(f"{name}={float(getattr(value, name))!r}" for name in FIELD_NAMES)
        return f"HapkeParams({fields}{', legendre=...' if value.legendre is not None else ''})"
    if isinstance(value, Mapping):
        return f"<{type(value).__name__} of {', '.join(map(str, value))}>"
    shape = getattr(value, "shape", None)
    if shape is None and hasattr(value, "__len__"):
        shape = (len(value),)
    return f"<{type(value).__name__}{'' if shape is None else ' of shape ' + str(tuple(shape))}>"
