"""File-to-file spectral parameters, streamed by blocks of rows: the file front end of the
`SPECTRAL_PARAMETERS` operation (a thin adapter of `run_on_cube`). The cube's values are
read as given (w, I/F, ...; radiance converted to I/F), with no geometry; one map per
product: ``OUT`` the first, ``OUT_<name>`` the others (netCDF/zarr: one variable each).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from .._declared_options import refuse_unknown, takes_options
from .._operations.declaration import Operation
from .._operations.spectral import (
    SPECTRAL_PARAMETERS,
    SamePass,
    parameters_record,
    with_parameters,
)
from .._options import (
    ProductOptions,
    RunOptions,
    SolverOptions,
    front_end_options,
    run_and_product_but,
)
from .._run.progress import InversionSummary
from .._spectral.options import SpectralSettings
from .._spectral.products import check_names, prepare_products
from .._spectral.wavelengths import check_spectra
from .cube_run import BlockPlan, CubeInputs, run_on_cube
from .wavelengths import cube_wavelengths_um

__all__ = ["SamePassRun", "same_pass", "same_pass_plan", "spectral_parameters_file"]

_REFLECTANCE_UNITS = ("r", "radf", "reff")
# the product's options that apply to a cube read as it is (no geometry, no normalisation)
_RUN_AND_PRODUCT = run_and_product_but("correction_undone", "reff_incidence")


@takes_options(SpectralSettings)
def spectral_parameters_file(
    cube_path,
    out_path,
    *,
    products: str | Sequence[str],
    units: str | None = None,
    command=None,
    run: RunOptions | None = None,
    product: ProductOptions | None = None,
    settings: SpectralSettings | None = None,
    **keywords,
) -> InversionSummary:
    """Named spectral products (`lumaxlike.spectral_parameters`) of a cube file, block by
    block, one map per product.

    The cube's values are read as it holds them, with no geometry and no conversion to r
    (radiance, ``units="radiance"``, is converted to I/F as `invert_file` does); its
    band centres are the file's (or ``wavelengths_from``), converted to um. Bad bands
    (``bbl`` = 0) are read as NaN and never used: a product that needs one is refused
    by name, before any output is written, as is a product whose bands the cube lacks.
    Outputs are written atomically and recorded (`lumaxlike.read_provenance`: the
    quantity, the products, the band centres each read, the constants, in
    ``spectral_settings``), as `invert_file`'s are.

    Args:
        cube_path: the cube (any raster GDAL opens, a PDS3 label, ...).
        out_path: ``.tif``/``.tiff``, ``.img``/``.envi``/``.hdr``, ``.nc`` or ``.zarr``:
            the first product's map there, each other's at ``OUT_<name>`` (netCDF/zarr:
            one ``(y, x)`` variable per product).
        products: names of `lumaxlike.SPECTRAL_PRODUCTS` (one name or a sequence).
        units: how the file is read: None (default: the quantity's unit; for w,
            normalized and reflectance, r where the file tags its values 1/sr, else
            radf; values as given), ``"r"``, ``"radf"``, ``"reff"`` (checked against the
            file's unit tag and label) or ``"radiance"`` (converted to I/F:
            ``quantity="radf"``).
        run: as for `invert_file` (so are ``command`` and ``product``, whose
            ``correction_undone`` and ``reff_incidence`` do not apply: no geometry).
        settings: the options as one `lumaxlike.SpectralSettings` (None: the keywords').
        **keywords: the options of `lumaxlike.SpectralSettings` by name: ``quantity``
            (required: what the cube holds, recorded; ``"w"`` for an `invert_file`
            output), ``tolerance`` [um], ``lucey``. The fields of ``run`` and ``product``
            are still taken as keywords, with a DeprecationWarning.

    Returns:
        `InversionSummary` (``verb`` "computed"; no status counts, ``status_of`` None;
        ``valued_pixels``: the pixels with a finite value in some product's map, 0 when
        nothing could be computed, e.g. on an all-NaN cube).

    Raises:
        FileNotFoundError, FileExistsError, ResumeRefusedError: as `invert_file`.
        ValueError: a bad argument (named), an unknown product, or a product the cube's
            bands cannot give (named, with the wavelength at fault), before any output.
    """
    settings = SpectralSettings.merged(settings, keywords)
    refuse_unknown("spectral_parameters_file", keywords, _RUN_AND_PRODUCT)
    names = check_names(products)
    run, product, options = front_end_options(
        run, product, SolverOptions("numba"), keywords, "spectral_parameters_file"
    )
    read_as = _read_units(units, settings.quantity, cube_path)
    inputs = CubeInputs(cube_path, out_path, read_as, product=product)
    return run_on_cube(
        SPECTRAL_PARAMETERS,
        inputs,
        run=run,
        solver=options,
        plan=lambda setup: _plan(setup, names, settings),
        fields=list(names),
        layout=SPECTRAL_PARAMETERS.layout(names),
        call=dict(products=list(names), **settings.record(), units=units),
        command=command,
        chunk_pixels=lambda bands: 2**62,
    )


def _read_units(units, quantity, cube_path) -> str:
    """The units the cube is opened in (`ProductCube`): ``units`` when given (checked
    against ``quantity``), else `_implied_units`."""
    if units is None:
        return _implied_units(cube_path, quantity)
    if units not in (*_REFLECTANCE_UNITS, "radiance"):
        raise ValueError(f"units must be None, 'r', 'radf', 'reff' or 'radiance', got {units!r}")
    read = "radf" if units == "radiance" else units
    if quantity in _REFLECTANCE_UNITS and quantity != read:
        raise ValueError(
            f"quantity={quantity!r} contradicts units={units!r} (the cube read as {read})"
        )
    if units == "radiance" and quantity != "radf":
        raise ValueError("units='radiance' is converted to I/F: give quantity='radf'")
    return units


def _implied_units(cube_path, quantity) -> str:
    """The units a cube is opened in when none are given: the quantity's own (r, radf,
    reff), else (w, normalized, reflectance: values as given, unchecked) r where the
    file tags its values 1/sr (a `normalize_file` output of an r cube), else radf. A
    file tagged r or radiance, which the quantity contradicts, is refused in the words
    of ``quantity`` (`ProductCube` would cite units the caller never gave)."""
    from .._io.missions.value_checks import R_UNIT_TAGS, radiance_unit
    from .._io.read.raster import CubeReader

    try:
        with CubeReader(cube_path) as reader:
            tag = reader.unit_tag()
    except (OSError, ValueError):
        tag = None  # (the run's own opening says what is wrong with the file)
    text = str(tag or "").lower().replace(" ", "")
    if text in R_UNIT_TAGS:
        if quantity in _REFLECTANCE_UNITS and quantity != "r":
            raise ValueError(
                f"{cube_path} tags its values units = {tag!r} (bidirectional reflectance "
                f"r), which contradicts quantity={quantity!r}: give quantity 'r' (--quantity "
                "r), or correct the tag"
            )
        return "r" if quantity not in _REFLECTANCE_UNITS else quantity
    if radiance_unit(tag):  # W m-2 um-1 sr-1, as `check_unit_tag` reads it
        raise ValueError(
            f"{cube_path} tags its values units = {tag!r} (radiance), which contradicts "
            f"quantity={quantity!r}: give units='radiance' (--units radiance) and "
            "quantity='radf', or correct the tag"
        )
    return quantity if quantity in _REFLECTANCE_UNITS else "radf"


def _prepared(setup, names, settings: SpectralSettings):
    """The products checked against the opened cube's bands [um] and bad bands (refused
    by name before any work)."""
    info = setup.info
    wavelengths = cube_wavelengths_um(info)
    _, wavelengths, good = check_spectra(
        np.zeros((1, info.bands)), wavelengths, np.asarray(setup.cube.bad_bands, bool)
    )
    return prepare_products(names, wavelengths, good, settings)


def _plan(setup, names, settings: SpectralSettings) -> BlockPlan:
    """The products checked against the cube's bands (refused by name before any work),
    the record of the run and what a resume must match."""
    prepared = _prepared(setup, names, settings)
    record = parameters_record(settings, prepared, setup.info.bands)
    return BlockPlan(
        params=None,
        recorded_params=[],
        options=prepared,
        record={"units": settings.quantity},
        amend={"spectral_settings": record},
        journal=record,
    )


def same_pass_plan(
    plan: BlockPlan, setup, operation: Operation, names, source: str, quantity: str
) -> BlockPlan:
    """``plan`` (``operation``'s, for the opened cube) with the spectral products
    ``names`` of its ``source`` map in the same pass (`with_parameters`): the products
    checked against the cube's bands (refused by name before any block runs), the block
    task's ``same_pass`` keyword, the record's ``spectral_settings`` (``quantity``: what
    ``source`` holds, ``"w"`` or ``"normalized"``; the wavelengths each product read)
    and what a resume must match. ``plan`` unchanged when ``names`` is empty."""
    if not names:
        return plan
    settings = SpectralSettings(quantity=quantity)
    prepared = _prepared(setup, names, settings)
    dtype = setup.info.dtype if np.dtype(setup.info.dtype).kind == "f" else np.float64
    same = SamePass(operation.block_task, source, prepared, np.dtype(dtype))
    inner = plan.extra
    record = {**parameters_record(settings, prepared, setup.info.bands), "map": source}
    return dataclasses.replace(
        plan,
        extra=lambda rows: {**({} if inner is None else inner(rows)), "same_pass": same},
        amend={**plan.amend, "spectral_settings": record},
        journal={**(plan.journal or {}), "spectral": record},
    )


@dataclasses.dataclass(frozen=True)
class SamePassRun:
    """What a file front end (`invert_file`, `normalize_file`) runs with ``parameters=``:
    ``operation`` (its own declaration, or it `with_parameters`), the product ``names``
    (empty: none), the ``source`` map and the ``quantity`` it holds."""

    own: Operation
    names: tuple[str, ...]
    source: str
    quantity: str

    @property
    def operation(self) -> Operation:
        """The declaration run: the front end's own, with the products' maps if any."""
        return with_parameters(self.own, self.names) if self.names else self.own

    def plan(self, plan: Callable[[Any], BlockPlan]) -> Callable[[Any], BlockPlan]:
        """``plan`` (the front end's ``plan(setup)``) with the products (`same_pass_plan`)."""
        return lambda setup: same_pass_plan(
            plan(setup), setup, self.own, self.names, self.source, self.quantity
        )

    def call(self, **call) -> dict:
        """``call`` (the keywords of the recorded call) and ``parameters`` (none without
        products)."""
        return {**call, "parameters": list(self.names)} if self.names else call


def same_pass(operation: Operation, parameters, source: str, quantity: str) -> SamePassRun:
    """`SamePassRun` of ``operation`` with ``parameters`` (None, or names of
    `SPECTRAL_PRODUCTS`, checked here: unknown ones refused before any file is opened)."""
    names = () if parameters is None else check_names(parameters)
    return SamePassRun(operation, names, source, quantity)
