"""The provenance record of an output (`lumaxlike.Provenance`): made for a run
(`make_provenance`), written as ``lumaxlike_*`` keys and read back from them; the keys
are listed in `lumaxlike._provenance`."""

from __future__ import annotations

import dataclasses
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._configuration import DEFAULT_KEY
from .._params import FIELD_NAMES, HapkeParams
from .._photometric import PHOTOMETRIC_PARAMETERS, PhotometricFunction
from .describe import (
    CONFIGURATION_TEXT,
    PREFIX,
    configuration_of,
    geometry_record,
    input_path,
    is_photometric,
    model_of,
    photometric_kind,
    utc_now,
)

__all__ = ["Provenance", "make_provenance", "params_text"]


@dataclass(frozen=True)
class Provenance:
    """How a lumaxlike output was made; see `lumaxlike.read_provenance`.

    Attributes:
        version: lumaxlike version that wrote it.
        model: ``{component: choice}`` (reflectance, h_function, roughness, opposition,
            phase_function).
        params: (none for an operation without a photometric model, as
            `spectral_parameters_file`: ``model`` is then empty) one
            `lumaxlike.HapkeParams` (roughness in radians) or
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
        spectral_settings: for a `spectral_parameters_file` output, its
            ``lumaxlike_spectral_*`` keys (``quantity``, ``products``, ``wavelengths``
            ``{product: [um, ...]}``, ``constants``, ``tolerance``, ``bands``).
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
    spectral_settings: Mapping | None = None

    @property
    def surface(self) -> str | None:
        """``"local"`` or ``"ellipsoid"``: which surface the geometry's angles referred to."""
        return None if self.geometry_layout is None else self.geometry_layout.get("surface")

    @property
    def bands(self) -> int:
        """Number of spectral bands."""
        return len(self.params)

    def __repr__(self) -> str:
        """One line per field; the per-band ``params`` collapsed to runs of bands that share
        one value (``bands 1-85: HapkeParams(b=0.2, ...)``)."""
        lines = [
            f"  {item.name}="
            + (
                params_text(self.params)
                if item.name == "params"
                else repr(getattr(self, item.name))
            )
            + ","
            for item in dataclasses.fields(self)
        ]
        return "Provenance(\n" + "\n".join(lines) + "\n)"

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
                    ()
                    if not self.params
                    else PHOTOMETRIC_PARAMETERS
                    if is_photometric(self.params)
                    else FIELD_NAMES
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
            "source": f"lumaxlike {self.version}: {self.describe_model() or 'no photometric model'}",
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
        if not model:  # an operation without a photometric model (spectral parameters)
            return cls._without_model(attrs, source, get, typed)
        kind = photometric_kind(model)  # None: a Hapke model
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
            fields: dict[str, Any] = {
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
        return cls._common(attrs, source, get, typed, model=model, params=tuple(params))

    @classmethod
    def _without_model(cls, attrs, source, get, typed) -> Provenance:
        """`from_attrs` of a record without a photometric model (no params)."""
        if typed("bands", int, get("bands")) != 0:
            raise ValueError(f"{source}: {PREFIX}bands must be 0 where {PREFIX}model is empty")
        return cls._common(attrs, source, get, typed, model={}, params=())

    @classmethod
    def _common(cls, attrs, source, get, typed, *, model, params) -> Provenance:
        """`from_attrs` of the keys every record has, beyond the model's."""
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
            params=params,
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
        expected = model_of(self.params) if self.params else {}
        if dict(self.model) != expected:
            raise ValueError(
                f"{source} was made with the model {dict(self.model)}; this lumaxlike "
                f"runs {expected}"
            )


#: operations whose outputs carry their own ``lumaxlike_<kind>_*`` settings
_SETTINGS_KINDS = ("fit", "unmix", "sample", "spectral")


# `make_provenance`'s optional inputs, in the order it unpacks them
_INPUTS = (
    "cube",
    "geometry",
    "dtm",
    "created",
    "geometry_layout",
    "standard",
    "param_maps",
    "product",
)


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
    **inputs,
) -> Provenance:
    """The record of a run, with the solver defaults resolved to the values used.

    The optional `inputs` (keywords, each None by default) are those below from cube on;
    another name is a TypeError.

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
            `lumaxlike._io.missions.product_cube.ProductCube.record`), or None.
    """
    from .. import __version__
    from .._inverse.albedo.invert import DEFAULT_MAX_ITER, default_tolerance

    unknown = sorted(set(inputs) - set(_INPUTS))
    if unknown:
        raise TypeError(f"make_provenance() got an unexpected keyword argument {unknown[0]!r}")
    cube, geometry, dtm, created, geometry_layout, standard, param_maps, product = (
        inputs.get(name) for name in _INPUTS
    )
    compute_dtype = np.float32 if np.dtype(dtype) == np.float32 else np.float64  # as invert decides
    params = tuple(params)
    return Provenance(
        version=__version__,
        model=model_of(params) if params else {},
        params=params,
        units=units,
        solver=solver,
        tol=float(default_tolerance(compute_dtype) if tol is None else tol),
        max_iter=int(DEFAULT_MAX_ITER if max_iter is None else max_iter),
        refl_sigma=None if refl_sigma is None else float(refl_sigma),
        cube=None if cube is None else input_path(cube),
        geometry=geometry_record(geometry),
        dtm=None if dtm is None else input_path(dtm),
        command=command,
        created=utc_now() if created is None else created,
        geometry_layout=None if geometry_layout is None else dict(geometry_layout),
        standard=None if standard is None else tuple(float(angle) for angle in standard),
        param_maps=None
        if param_maps is None
        else tuple(
            (str(name), input_path(value) if isinstance(value, (str, Path)) else None)
            for name, value in param_maps.items()
        ),
        product=None if product is None else dict(product),
    )


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


def params_text(params) -> str:
    """Per-band parameters in a few lines: each run of consecutive bands with equal values
    once, ``[bands 1-85: HapkeParams(b=0.2, ...); band 86: HapkeParams(b=0.3, ...)]``
    (bands counted from 1; roughness in radians, as `lumaxlike.HapkeParams` holds it)."""
    runs: list[list] = []  # [first band, last band, key, text]
    for band, value in enumerate(params, start=1):
        key, text = _band_key_text(value)
        if runs and runs[-1][2] == key:
            runs[-1][1] = band
        else:
            runs.append([band, band, key, text])
    items = [
        f"band {first}: {text}" if first == last else f"bands {first}-{last}: {text}"
        for first, last, _, text in runs
    ]
    return "[" + ";\n    ".join(items) + "]"


def _band_key_text(value) -> tuple:
    """(a key equal for equal parameters, their one-line text)."""
    if isinstance(value, PhotometricFunction):
        numbers = tuple(float(getattr(value, name)) for name in value.used_parameters)
        fields = ", ".join(f"{n}={v!r}" for n, v in zip(value.used_parameters, numbers))
        return (
            value.kind,
            numbers,
        ), f"PhotometricFunction({value.kind!r}{', ' * bool(fields)}{fields})"
    if isinstance(value, HapkeParams):
        numbers = tuple(float(getattr(value, name)) for name in FIELD_NAMES)
        legendre = None if value.legendre is None else tuple(np.ravel(value.legendre).tolist())
        settings = {name: getattr(value, name) for name in CONFIGURATION_TEXT}
        fields = ", ".join(f"{n}={v!r}" for n, v in zip(FIELD_NAMES, numbers))
        configured = "".join(
            f", {n}={v!r}" for n, v in settings.items() if v != getattr(DEFAULT_KEY, n)
        )
        text = f"HapkeParams({fields}{configured}{', legendre=...' if legendre else ''})"
        return (numbers, legendre, tuple(settings.items())), text
    return repr(value), repr(value)
