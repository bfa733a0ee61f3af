"""How an output was made: the record every lumaxlike output carries, and reading it back.

Every result file (GeoTIFF and ENVI tags, netCDF and zarr global attributes) and the Dataset
returned by `lumaxlike.invert_dataarray` holds these ``lumaxlike_*`` keys, each value
JSON text (so numbers and lists round-trip exactly):

=============================  ========================================================
key                            value
=============================  ========================================================
``lumaxlike_version``          lumaxlike's version, e.g. ``"0.1.0"``
``lumaxlike_model``            ``{component: choice}``: ``reflectance``, ``h_function``,
                               ``roughness``, ``opposition``, ``phase_function``
``lumaxlike_bands``            number of spectral bands
``lumaxlike_param_<name>``     one per `lumaxlike.HapkeParams` field, in its units
                               (``roughness`` in radians): a number when every band has
                               the same value, else a list with one value per band;
                               ``legendre`` only when some band uses Legendre coefficients
``lumaxlike_units``            what the input held: ``"r"``, ``"radf"`` or ``"reff"``
``lumaxlike_solver``           ``"numba"`` or ``"jax"``
``lumaxlike_tol``              convergence tolerance on the step in w (the value used)
``lumaxlike_max_iter``         iteration limit (the value used)
``lumaxlike_refl_sigma``       standard uncertainty of the input, in its units; ``null``
``lumaxlike_input_cube``       input file (absolute path; ``null`` for in-memory data)
``lumaxlike_input_geometry``   OBS raster path, a list of ``[role, path]`` pairs, or null
``lumaxlike_input_dtm``        DTM path or ``null`` (flat surface)
``lumaxlike_geometry_layout``  (file inputs only) how the geometry was read: ``surface``
                               (``"local"`` or ``"ellipsoid"``), ``layout`` (one line),
                               ``bands`` / ``checked`` / ``not_read``: ``{role: band}``
``lumaxlike_command``          the command line, or the Python call
``lumaxlike_created``          when the run started, UTC ISO 8601
``lumaxlike_standard_deg``     (photometric normalisation only) the standard geometry
                               ``[incidence, emission, phase]`` in degrees
``lumaxlike_input_param_maps`` (normalisation with parameter maps only) a list of
                               ``[field, path]`` pairs, roughness maps in degrees
``lumaxlike_product``          (file inputs only) what the input cube is and what was
                               done with it: ``kind`` (e.g. "M3 L2 reflectance (RFL)"),
                               ``label``, ``wavelengths`` (their source, or "unknown"),
                               ``bad_bands``, ``thermal_bands``, the radiance conversion
                               (``solar_spectrum``, ``solar_distance_au``), the
                               ``geometry`` used and why (see docs/mission-products.md)
``lumaxlike_fit_<key>``        (``fit`` outputs only) ``free``, ``cubes``,
                               ``geometries``, ``fitted_maps`` (``{name: path}``), ...;
                               the ``param_*`` keys then hold the starting values
``lumaxlike_unmix_<key>``      (``unmix`` outputs only) ``route``, ``sum_to_one``,
                               ``endmembers``, ``density``, ``grain_size``,
                               ``extinction_efficiency``, ``library``
``lumaxlike_sample_<key>``     (``sample`` outputs only) ``free``, ``cubes``, ``prior``,
                               ``refl_sigma``, ``num_samples``, ``num_chains``,
                               ``num_warmup``, ``seed``, ``median_maps``, ...; the
                               ``param_*`` keys then hold the warm start's values
=============================  ========================================================

A new model choice (another H-function, phase function or multiple-scattering scheme) is
one more value of a ``lumaxlike_model`` component plus its ``lumaxlike_param_*`` keys.
An empirical photometric function (`lumaxlike.PhotometricFunction`) is recorded
as the model ``{"reflectance": <its name>}`` (`PHOTOMETRIC_TEXT`) with one
``lumaxlike_param_<name>`` per parameter of ``PhotometricFunction`` (``limb_darkening``,
``minnaert_k``, ``mu1``, ``m``, ``mu2``, ``eta``) instead of the Hapke ones.
netCDF and zarr outputs also get the CF global attributes ``Conventions``, ``source`` and
``history``.

`read_provenance` (`lumaxlike._io.provenance_files`) reads the record back from any output (the ``w`` map, any sibling
map, a netCDF file or a zarr store); ``lumaxlike invert CUBE --params-from OLD --out NEW``
reruns with it.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np

from ._params import FIELD_NAMES, HapkeParams
from ._photometric import PHOTOMETRIC_PARAMETERS, PhotometricFunction

__all__ = ["MODEL", "PREFIX", "Provenance", "make_provenance", "model_of", "python_call", "utc_now"]

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


def _photometric_kind(model: Mapping):
    """The `PhotometricFunction` kind a recorded ``model`` stands for, or None (Hapke)."""
    kinds = [kind for kind, text in PHOTOMETRIC_TEXT.items() if model.get("reflectance") == text]
    return kinds[0] if kinds else None


def _is_photometric(params) -> bool:
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


def _input_path(path) -> str | None:
    return None if path is None else str(Path(path).resolve())


def geometry_record(geometry):
    """What ``lumaxlike_input_geometry`` records for a geometry argument."""
    if isinstance(geometry, (str, Path)):
        return _input_path(geometry)
    if isinstance(geometry, Mapping):
        return tuple(
            (str(role), _input_path(value) if isinstance(value, (str, Path)) else None)
            for role, value in geometry.items()
        )
    return None


@dataclass(frozen=True)
class Provenance:
    """How a lumaxlike output was made; see `lumaxlike.read_provenance`.

    Attributes:
        version: lumaxlike version that wrote it.
        model: ``{component: choice}`` (reflectance, h_function, roughness, opposition,
            phase_function).
        params: one `lumaxlike.HapkeParams` (roughness in radians) or
            `lumaxlike.PhotometricFunction` per band.
        units: what the input held: ``"r"`` [1/sr], ``"radf"`` or ``"reff"``.
        solver: ``"numba"`` or ``"jax"``.
        tol: convergence tolerance on the step in w that was used [-].
        max_iter: iteration limit that was used.
        refl_sigma: standard uncertainty of the input in ``units``; None when not given.
        cube: input cube file (absolute path); None for in-memory data.
        geometry: OBS raster path, a tuple of ``(role, path or None)`` pairs, or None.
        dtm: DTM path; None for a flat surface (or in-memory data).
        command: the command line, or the Python call.
        created: when the run started, UTC ISO 8601.
        geometry_layout: how the geometry was read (surface, layout, bands read, checked
            and not read; see `lumaxlike.GeometryReader.record`), or None.
        standard: for a photometric normalisation, the standard geometry (incidence,
            emission, phase) [rad]; None otherwise.
        param_maps: for a normalisation with parameter maps, ``((field, path), ...)``;
            None otherwise.
        resumed: for a run resumed from the journal of a killed one (``--resume``),
            what it took from it, e.g. ``"3 of 5 blocks from an interrupted run"``;
            None otherwise.
        product: for file inputs, what the cube is and what was done with it (kind,
            label, wavelengths, bad and thermal bands, radiance conversion, geometry used
            and why); None for in-memory data and older records.
        fit_settings: for a `fit_file` output, its ``lumaxlike_fit_*`` keys
            (``free``, ``cubes``, ``fitted_maps`` ``{name: path}``, ...): ``params``
            then hold the *starting* values of the free parameters, whose fitted
            values are the per-pixel maps; None otherwise.
        unmix_settings: for an `unmix_file` output, its ``lumaxlike_unmix_*`` keys
            (``route``, ``sum_to_one``, ``endmembers``, ``density`` [g/cm^3],
            ``grain_size`` [um], ``extinction_efficiency``, ``library``: the files and
            how they were read, where the command line read them); None otherwise.
        sample_settings: for a `sample_file` output, its ``lumaxlike_sample_*`` keys
            (``free``, ``cubes``, ``prior``, ``refl_sigma``, ``num_samples``, ``seed``,
            ``median_maps`` ``{name: path}``, ...): ``params`` then hold the warm
            start's values of the free parameters; None otherwise.
    """

    version: str
    model: Mapping
    params: tuple
    units: str
    solver: str
    tol: float
    max_iter: int
    refl_sigma: float | None
    cube: str | None
    geometry: object
    dtm: str | None
    command: str
    created: str
    geometry_layout: Mapping | None = None
    standard: tuple | None = None
    param_maps: tuple | None = None
    resumed: str | None = None
    product: Mapping | None = None
    fit_settings: Mapping | None = None
    unmix_settings: Mapping | None = None
    sample_settings: Mapping | None = None

    @property
    def surface(self) -> str | None:
        """``"local"`` or ``"ellipsoid"``: which surface the geometry's angles referred to."""
        return None if self.geometry_layout is None else self.geometry_layout.get("surface")

    @property
    def bands(self) -> int:
        """Number of spectral bands."""
        return len(self.params)

    def describe_model(self) -> str:
        """One line, e.g. ``"Hapke 2002 AMSA, Hapke 1984 roughness, SHOE + CBOE (Hapke 2002), ..."``."""
        return ", ".join(
            f"{choice} {component}" if component == "roughness" else choice
            for component, choice in self.model.items()
        )

    def attrs(self, *, envi: bool = False) -> dict[str, str]:
        """The ``lumaxlike_*`` keys with JSON text values (see the module docstring).

        Args:
            envi: escape ``=`` as ``\\u003d`` (still valid JSON): GDAL drops ENVI header
                values that contain ``=``.
        """
        values = {
            "version": self.version,
            "model": dict(self.model),
            "bands": len(self.params),
            **{
                f"param_{name}": _per_band([getattr(p, name) for p in self.params])
                for name in (
                    PHOTOMETRIC_PARAMETERS if _is_photometric(self.params) else FIELD_NAMES
                )
            },
            "units": self.units,
            "solver": self.solver,
            "tol": self.tol,
            "max_iter": self.max_iter,
            "refl_sigma": self.refl_sigma,
            "input_cube": self.cube,
            "input_geometry": [list(pair) for pair in self.geometry]
            if isinstance(self.geometry, tuple)
            else self.geometry,
            "input_dtm": self.dtm,
            "command": self.command,
            "created": self.created,
        }
        if self.geometry_layout is not None:
            values["geometry_layout"] = dict(self.geometry_layout)
        if self.standard is not None:
            values["standard_deg"] = [math.degrees(angle) for angle in self.standard]
        if self.param_maps is not None:
            values["input_param_maps"] = [list(pair) for pair in self.param_maps]
        if self.resumed is not None:
            values["resumed"] = self.resumed
        if self.product is not None:
            values["product"] = dict(self.product)
        for kind in _SETTINGS_KINDS:
            for key, value in (getattr(self, f"{kind}_settings") or {}).items():
                values[f"{kind}_{key}"] = value
        if any(getattr(p, "legendre", None) is not None for p in self.params):
            values["param_legendre"] = _per_band(
                [
                    None if p.legendre is None else [float(v) for v in np.ravel(p.legendre)]
                    for p in self.params
                ]
            )
        encoded = {
            PREFIX + key: json.dumps(value, allow_nan=False) for key, value in values.items()
        }
        if envi:
            encoded = {key: text.replace("=", "\\u003d") for key, text in encoded.items()}
        return encoded

    def cf_attrs(self) -> dict[str, str]:
        """CF global attributes (``Conventions``, ``source``, ``history``) plus `attrs`."""
        return {
            "Conventions": "CF-1.8",
            "source": f"lumaxlike {self.version}: {self.describe_model()}",
            "history": f"{self.created} {self.command}",
            **self.attrs(),
        }

    @classmethod
    def from_attrs(cls, attrs: Mapping, source="attributes") -> Provenance:
        """Read the record from ``lumaxlike_*`` keys (other keys are ignored).

        Raises:
            ValueError: naming ``source`` and the key, when a key is missing or malformed.
        """
        if not any(str(key).startswith(PREFIX) for key in attrs):
            raise ValueError(
                f"{source} holds no lumaxlike provenance ({PREFIX}* keys): "
                "was it written by lumaxlike?"
            )

        def get(key, optional=False):
            name = PREFIX + key
            if name not in attrs:
                if optional:
                    return None
                raise ValueError(f"{source} lacks the provenance key {name}")
            try:
                return json.loads(attrs[name])
            except (TypeError, ValueError):
                raise ValueError(f"{source}: {name} is not JSON text: {attrs[name]!r}") from None

        def typed(key, kinds, value):
            if not isinstance(value, kinds) or isinstance(value, bool):
                raise ValueError(f"{source}: {PREFIX}{key} has the unexpected value {value!r}")
            return value

        model = typed("model", dict, get("model"))
        kind = _photometric_kind(model)  # None: a Hapke model
        configuration = configuration_of(model, source) if kind is None else {}
        # recorded since they exist; older records mean their defaults (K = 1, xi = 0)
        optional = {"porosity_k": 1.0, "asymmetry": 0.0} if kind is None else {}
        names = FIELD_NAMES if kind is None else PHOTOMETRIC_PARAMETERS
        per_field = {name: get(f"param_{name}", optional=name in optional) for name in names}
        per_field = {
            name: optional[name] if value is None and name in optional else value
            for name, value in per_field.items()
        }
        legendre = get("param_legendre", optional=True) if kind is None else None
        bands = typed("bands", int, get("bands"))
        if bands < 1:
            raise ValueError(f"{source}: {PREFIX}bands = {bands} is not a number of bands")
        if legendre is not None:
            typed("param_legendre", list, legendre)
        per_band = {f"param_{name}": value for name, value in per_field.items()}
        if isinstance(legendre, list) and not _is_number_list(legendre):
            per_band["param_legendre"] = legendre
        for key, value in per_band.items():
            if isinstance(value, list) and len(value) != bands:
                raise ValueError(
                    f"{source}: {PREFIX}{key} gives {len(value)} values for {PREFIX}bands = {bands}"
                )
        params = []
        for band in range(bands):
            fields = {
                name: _band_value(value, band, source, name) for name, value in per_field.items()
            }
            fields.update(configuration)
            if legendre is not None:
                fields["legendre"] = _band_legendre(legendre, band)
            try:
                params.append(
                    HapkeParams(**fields) if kind is None else PhotometricFunction(kind, **fields)
                )
            except (TypeError, ValueError) as error:
                raise ValueError(f"{source}: its model parameters are invalid: {error}") from None
        geometry = get("input_geometry")
        if isinstance(geometry, list):
            geometry = tuple(tuple(pair) for pair in geometry)
        max_iter = typed("max_iter", int, get("max_iter"))
        sigma = get("refl_sigma")
        standard = get("standard_deg", optional=True)
        if standard is not None:
            if not (_is_number_list(standard) and len(standard) == 3):
                raise ValueError(
                    f"{source}: {PREFIX}standard_deg has the unexpected value {standard!r}"
                )
            standard = tuple(math.radians(angle) for angle in standard)
        param_maps = get("input_param_maps", optional=True)
        if param_maps is not None:
            param_maps = tuple(tuple(pair) for pair in typed("input_param_maps", list, param_maps))
        settings = {}
        for kind in _SETTINGS_KINDS:
            start = f"{PREFIX}{kind}_"
            keys = sorted(str(key)[len(start) :] for key in attrs if str(key).startswith(start))
            settings[f"{kind}_settings"] = {key: get(f"{kind}_{key}") for key in keys} or None
        return cls(
            version=typed("version", str, get("version")),
            model=model,
            params=tuple(params),
            units=typed("units", str, get("units")),
            solver=typed("solver", str, get("solver")),
            tol=float(typed("tol", (int, float), get("tol"))),
            max_iter=max_iter,
            refl_sigma=None if sigma is None else float(typed("refl_sigma", (int, float), sigma)),
            cube=get("input_cube"),
            geometry=geometry,
            dtm=get("input_dtm"),
            command=typed("command", str, get("command")),
            created=typed("created", str, get("created")),
            geometry_layout=_geometry_layout(get("geometry_layout", optional=True), source),
            standard=standard,
            param_maps=param_maps,
            resumed=get("resumed", optional=True),
            product=_product(get("product", optional=True), source),
            **settings,
        )

    def check_reproducible(self, source="the output") -> None:
        """Raise ValueError, naming ``source``, unless this lumaxlike runs the recorded model."""
        expected = model_of(self.params)
        if dict(self.model) != expected:
            raise ValueError(
                f"{source} was made with the model {dict(self.model)}; this lumaxlike "
                f"runs {expected}"
            )


#: operations whose outputs carry their own ``lumaxlike_<kind>_*`` settings
_SETTINGS_KINDS = ("fit", "unmix", "sample")


def make_provenance(
    *,
    params,
    units: str,
    solver: str,
    tol,
    max_iter,
    refl_sigma,
    dtype,
    command: str,
    cube=None,
    geometry=None,
    dtm=None,
    created: str | None = None,
    geometry_layout=None,
    standard=None,
    param_maps=None,
    product=None,
) -> Provenance:
    """The record of a run, with the solver defaults resolved to the values used.

    Args:
        params: one HapkeParams per band.
        tol, max_iter: as given to `lumaxlike.invert` (None = its default for
            ``dtype``: the value recorded is the one used).
        dtype: floating type of the reflectance handed to the solver.
        cube, geometry, dtm: input paths (or a geometry mapping); recorded resolved.
        created: UTC ISO 8601 time; None = now.
        geometry_layout: how the geometry was read (``GeometryReader.record()``), or None.
        standard: a normalisation's standard geometry (incidence, emission, phase) [rad].
        param_maps: a normalisation's parameter maps, ``{field: path or array}``.
        product: what the input cube is and what was done with it (a JSON-able mapping,
            `lumaxlike._io.product_cube.ProductCube.record`), or None.
    """
    from . import __version__
    from ._inverse.invert import DEFAULT_MAX_ITER, default_tolerance

    compute_dtype = np.float32 if np.dtype(dtype) == np.float32 else np.float64  # as invert decides
    params = tuple(params)
    return Provenance(
        version=__version__,
        model=model_of(params),
        params=params,
        units=units,
        solver=solver,
        tol=float(default_tolerance(compute_dtype) if tol is None else tol),
        max_iter=int(DEFAULT_MAX_ITER if max_iter is None else max_iter),
        refl_sigma=None if refl_sigma is None else float(refl_sigma),
        cube=None if cube is None else _input_path(cube),
        geometry=geometry_record(geometry),
        dtm=None if dtm is None else _input_path(dtm),
        command=command,
        created=utc_now() if created is None else created,
        geometry_layout=None if geometry_layout is None else dict(geometry_layout),
        standard=None if standard is None else tuple(float(angle) for angle in standard),
        param_maps=None
        if param_maps is None
        else tuple(
            (str(name), _input_path(value) if isinstance(value, (str, Path)) else None)
            for name, value in param_maps.items()
        ),
        product=None if product is None else dict(product),
    )


def python_call(function: str, *args, **kwargs) -> str:
    """``lumaxlike.<function>(...)`` as called, for the record: paths and scalars as written,
    a HapkeParams by its fields, anything bulky (arrays, DataArrays, mappings, per-band
    parameter lists) by its type and shape (the values are recorded apart)."""
    arguments = [_call_repr(value) for value in args]
    arguments += [f"{name}={_call_repr(value)}" for name, value in kwargs.items()]
    return f"lumaxlike.{function}({', '.join(arguments)})"


def _call_repr(value) -> str:
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


def _per_band(values: list):
    """One value when every band has the same, else the list of per-band values."""
    values = [v if v is None or isinstance(v, list) else float(v) for v in values]
    if all(v == values[0] for v in values):
        return values[0]
    return values


def _band_value(value, band: int, source, name: str) -> float:
    chosen = value[band] if isinstance(value, list) else value
    if (
        isinstance(chosen, bool)
        or not isinstance(chosen, (int, float))
        or not math.isfinite(chosen)
    ):
        raise ValueError(f"{source}: {PREFIX}param_{name} has the unexpected value {value!r}")
    return float(chosen)


def _geometry_layout(value, source):
    """The recorded geometry layout: a mapping whose ``surface`` is local or ellipsoid, or None."""
    if value is None:
        return None
    if not isinstance(value, dict) or value.get("surface") not in ("local", "ellipsoid"):
        raise ValueError(f"{source}: {PREFIX}geometry_layout has the unexpected value {value!r}")
    return value


def _product(value, source):
    """The recorded product: a mapping, or None."""
    if value is not None and not isinstance(value, dict):
        raise ValueError(f"{source}: {PREFIX}product has the unexpected value {value!r}")
    return value


def _is_number_list(value) -> bool:
    return isinstance(value, list) and all(isinstance(x, (int, float)) for x in value)


def _band_legendre(value: list, band: int):
    """Band ``band``'s Legendre coefficients from one shared list or one list per band."""
    if _is_number_list(value):
        return np.asarray(value, dtype=np.float64)
    chosen = value[band]
    return None if chosen is None else np.asarray(chosen, dtype=np.float64)
