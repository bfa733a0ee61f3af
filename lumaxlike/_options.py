"""The option objects of the front ends: how a run on files is carried out
(`RunOptions`), how a mission product is read (`ProductOptions`) and how the solver runs
(`SolverOptions`).

Small, immutable and checked when made, as optimistix's solvers are configured
(``LevenbergMarquardt(rtol, atol)``). Every file command takes them (``run=``,
``product=``, ``solver=``); `merged_options` combines them with the keywords of the same
fields (the solver's ``max_iter``, ``tol``; the run's and product's, deprecated) and
refuses a value given both ways differently.
"""

from __future__ import annotations

import dataclasses
import warnings
from collections.abc import Mapping
from dataclasses import dataclass
from numbers import Integral, Real
from pathlib import Path
from typing import Any, TypeVar

from ._shapes import check_choice

__all__ = [
    "RUN_AND_PRODUCT",
    "run_and_product_but",
    "SOLVERS",
    "ProductOptions",
    "RunOptions",
    "SolverOptions",
    "deprecated_keywords_merged",
    "front_end_options",
    "merged_options",
    "solver_options",
]

SOLVERS = ("jax", "numba")
"""The solvers every operation offers."""

_FILE_ARGUMENTS = ("solar_spectrum", "wavelengths_from")


def _positive_int(name: str, value, *, optional: bool) -> None:
    if value is None and optional:
        return
    if isinstance(value, bool) or not isinstance(value, Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")


@dataclass(frozen=True)
class SolverOptions:
    """How an operation's solver runs.

    Attributes:
        solver: ``"jax"`` (optimistix, CPU or GPU) or ``"numba"`` (CPU threads).
        max_iter: iterations per problem; None for the operation's default.
        tol: convergence tolerance (relative step); None for the operation's default.
        chunk_size: problems per solver chunk; None for the operation's default (a
            chunk's memory is bounded by it).
        num_threads: numba threads; None for numba's setting. Ignored by the JAX solver.
    """

    solver: str
    max_iter: int | None = None
    tol: float | None = None
    chunk_size: int | None = None
    num_threads: int | None = None

    def __post_init__(self):
        check_choice("solver", self.solver, SOLVERS)
        _positive_int("max_iter", self.max_iter, optional=True)
        _positive_int("chunk_size", self.chunk_size, optional=True)
        _positive_int("num_threads", self.num_threads, optional=True)
        if self.tol is not None and not (isinstance(self.tol, Real) and self.tol > 0):
            raise ValueError(f"tol must be positive, got {self.tol!r}")


@dataclass(frozen=True)
class RunOptions:
    """How a file command runs: where its blocks are solved, how big they are, and what
    it does with outputs that exist.

    Attributes:
        workers: processes solving blocks: 1 in this process, more a dask.distributed
            ``LocalCluster`` of that many workers. The maps do not depend on it.
        scheduler: address of a running dask.distributed scheduler (``"tcp://host:8786"``)
            whose workers solve the blocks; ``workers`` is then ignored.
        chunk_rows: rows per block; None for about 32 MiB of reflectance per block.
        resume: continue the run a killed process left for these outputs.
        overwrite: replace existing outputs (otherwise refused before any work).
        progress: a progress bar on stderr: True, False, or None for "when stderr is a
            terminal".
    """

    workers: int = 1
    scheduler: str | None = None
    chunk_rows: int | None = None
    resume: bool = False
    overwrite: bool = False
    progress: bool | None = None

    def __post_init__(self):
        _positive_int("workers", self.workers, optional=False)
        _positive_int("chunk_rows", self.chunk_rows, optional=True)
        if self.scheduler is not None and not isinstance(self.scheduler, str):
            raise ValueError(f"scheduler must be an address string, got {self.scheduler!r}")

    def call(self) -> dict:
        """The options that are not the defaults (the recorded call shows where a run ran)."""
        return {k: v for k, v in _changed(self).items() if k in ("workers", "scheduler")}


@dataclass(frozen=True)
class ProductOptions:
    """How a mission product is read (see `lumaxlike.invert_file`): its normalisation,
    REFF incidence, radiance, wavelengths and thermal bands.

    Attributes:
        correction_undone: the product is normalised (M3 L2, CRISM MTRDR/TER) but that
            normalisation was undone: invert it at the geometry given.
        reff_incidence: for REFF: ``"local"`` (facet, the default) or ``"areoid"``
            (ellipsoid, as CRISM's Lambert correction).
        solar_spectrum: for radiance: solar spectrum file (wavelength, irradiance at 1 au
            [W m^-2 um^-1]); None for ASTM G173-03.
        solar_distance: for radiance: the sun's distance [au]; None reads the label's.
        wavelengths_from: wavelength file replacing the cube's own.
        thermal_bands: lunar bands beyond 2.5 um: ``"keep"`` (a warning names them) or
            ``"exclude"``.

    Checked where the product is opened, against the file it is read with.
    """

    correction_undone: bool = False
    reff_incidence: str | None = None
    solar_spectrum: Any = None
    solar_distance: float | None = None
    wavelengths_from: Any = None
    thermal_bands: str = "keep"

    def call(self) -> dict:
        """The options that are not the defaults, for the recorded call."""
        return _changed(self)

    def record(self) -> dict:
        """The options that are not the defaults, JSON-able (files as absolute paths):
        the product record's ``arguments``, which ``--params-from`` takes back."""
        return {
            name: str(Path(value).absolute()) if name in _FILE_ARGUMENTS else value
            for name, value in self.call().items()
        }

    def files(self) -> list:
        """The input files among them (None where not given), for the run's journal."""
        return [self.solar_spectrum, self.wavelengths_from]


RUN_AND_PRODUCT: dict[str, Any] = {
    **{field.name: field.default for field in dataclasses.fields(RunOptions)},
    **{field.name: field.default for field in dataclasses.fields(ProductOptions)},
}
"""The fields of `RunOptions` and `ProductOptions` at their defaults: the keywords a file
front end still takes beside ``run=`` and ``product=`` (``chunk_rows=``,
``solar_distance=``), deprecated: `front_end_options` merges them with a warning."""


def run_and_product_but(*names: str) -> dict[str, Any]:
    """`RUN_AND_PRODUCT` without ``names``: the deprecated keywords of a file front end
    that does not take those options (``"correction_undone"``, or every field of
    ``"product"``)."""
    if "product" in names:
        names += tuple(field.name for field in dataclasses.fields(ProductOptions))
    return {name: value for name, value in RUN_AND_PRODUCT.items() if name not in names}


def _same(a, b) -> bool:
    try:
        return bool(a == b)
    except (TypeError, ValueError):  # arrays: compare by identity
        return a is b


def _changed(options) -> dict:
    return {
        field.name: getattr(options, field.name)
        for field in dataclasses.fields(options)
        if not _same(getattr(options, field.name), field.default)
    }


Options = TypeVar("Options", RunOptions, ProductOptions, SolverOptions)


def merged_options(kind: type[Options], given, argument: str, **keywords) -> Options:
    """``given`` (an options object, or None for the defaults) with the ``keywords`` that
    are not at their defaults.

    Args:
        kind: `RunOptions`, `ProductOptions` or `SolverOptions`.
        given: an instance of ``kind`` or None.
        argument: the name of the argument ``given`` came in, for messages.
        keywords: the function's keywords for the same fields.

    Raises:
        ValueError: ``given`` is not a ``kind``, or a keyword and ``given`` set one field
            to different values (naming both).
    """
    if given is not None and not isinstance(given, kind):
        raise ValueError(
            f"{argument} must be a lumaxlike.{kind.__name__}, got {type(given).__name__}"
        )
    defaults = {field.name: field.default for field in dataclasses.fields(kind)}
    base = given if given is not None else None
    changes = {}
    for name, value in keywords.items():
        if _same(value, defaults.get(name, dataclasses.MISSING)):
            continue
        if base is not None:
            current = getattr(base, name)
            if not _same(current, defaults[name]) and not _same(current, value):
                raise ValueError(
                    f"{name} is given as a keyword ({value!r}) and in {argument}= "
                    f"({current!r}): give it once"
                )
        changes[name] = value
    if base is None:
        return kind(**changes)
    return dataclasses.replace(base, **changes)


def solver_options(solver, **keywords) -> SolverOptions:
    """A `SolverOptions` from a front end's ``solver`` argument (a name or the object) and
    its keywords for the same fields (``max_iter``, ``tol``, ...), as `merged_options`."""
    if isinstance(solver, SolverOptions):
        return merged_options(SolverOptions, solver, "solver", **keywords)
    return merged_options(SolverOptions, None, "solver", solver=solver, **keywords)


def front_end_options(
    run, product, solver, keywords: Mapping, function: str = "a file function"
) -> tuple[RunOptions, ProductOptions, SolverOptions]:
    """The option objects of a file front end's call.

    Args:
        run, product, solver: the call's ``run=`` and ``product=`` (objects or None) and
            ``solver`` (a name or a `SolverOptions`).
        keywords: the call's arguments by name: those named as a field of an option object
            are merged into it (`merged_options`). A field of `RunOptions` or
            `ProductOptions` given as a keyword (not at its default) is deprecated: a
            DeprecationWarning names ``run=`` or ``product=``.
        function: the front end's name, for the warning.

    Returns:
        (`RunOptions`, `ProductOptions`, `SolverOptions`).
    """

    def fields_of(kind, skip=()):
        names = {field.name for field in dataclasses.fields(kind)} - set(skip)
        return {name: keywords[name] for name in names if name in keywords}

    return (
        deprecated_keywords_merged(RunOptions, run, "run", keywords, function, stacklevel=4),
        deprecated_keywords_merged(
            ProductOptions, product, "product", keywords, function, stacklevel=4
        ),
        solver_options(solver, **fields_of(SolverOptions, skip=("solver",))),
    )


def deprecated_keywords_merged(
    kind: type[Options], given, argument: str, keywords: Mapping, function: str, stacklevel=3
) -> Options:
    """``given`` (a `RunOptions` or `ProductOptions`, or None) merged with its fields among
    ``keywords`` (`merged_options`), those not at their defaults taken with a
    DeprecationWarning naming ``function`` and ``argument`` (``chunk_rows=4``:
    ``run=lumaxlike.RunOptions(chunk_rows=4)`` instead), attributed to the caller
    ``stacklevel`` frames up (3: the caller of the file function calling this)."""
    defaults = {field.name: field.default for field in dataclasses.fields(kind)}
    keywords = {name: keywords[name] for name in defaults if name in keywords}
    changed = sorted(name for name, value in keywords.items() if not _same(value, defaults[name]))
    if changed:
        fields = ", ".join(f"{name}=..." for name in changed)
        warnings.warn(
            f"{function}: the keywords {fields} are deprecated and will be removed; "
            f"pass {argument}=lumaxlike.{kind.__name__}({fields})",
            DeprecationWarning,
            stacklevel=stacklevel,
        )
    return merged_options(kind, given, argument, **keywords)
