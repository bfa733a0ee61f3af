"""File-to-file unmixing: a reflectance cube to mass-fraction maps, streamed by blocks of rows.

The same pipeline as :func:`lumaxlike._files.invert.invert_file` (blocks of rows,
`BlockPool` here or on a dask cluster, atomic `ResultWriter`, provenance), with
:func:`lumaxlike.unmix` per block (`lumaxlike._operations.unmix.unmix_block`, shared with
`unmix_dataarray`). Writes, as GeoTIFF or ENVI:

``OUT``            mass fractions, one band per endmember (band names: the endmembers)
``OUT_sigma``      their 1-sigma uncertainty (scaled by ``sigma`` when given, else by
                   the residual variance), one band per endmember
``OUT_status``     `lumaxlike.Status` per pixel (one band)
``OUT_iterations`` solver steps per pixel (one band)
``OUT_residual``   the route's residual norm per pixel (one band; see `UnmixResult`)

and with ``free`` grain sizes or npFe0 (endmembers from optical constants) also
``OUT_grain_size`` [um] (one band per endmember), ``OUT_grain_size_sigma``,
``OUT_grain_size_at_bound``, ``OUT_npfe`` [wt %] (one band), ``OUT_npfe_sigma`` and
``OUT_npfe_at_bound`` (`lumaxlike._operations.unmix.OPTICAL_FIELDS`).

or, as netCDF (.nc) or zarr (.zarr), one dataset at ``OUT`` with these variables:
fractions and sigma on dimensions (endmember, y, x), the ``endmember`` coordinate holding
the names; status, iterations and residual on (y, x).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from dataclasses import dataclass, field

import numpy as np

from .._declared_options import refuse_unknown, takes_options
from .._operations.unmix import UNMIX, UnmixOptions, unmix_fields, unmix_record
from .._options import (
    RUN_AND_PRODUCT,
    ProductOptions,
    RunOptions,
    SolverOptions,
    front_end_options,
)
from .._params import HapkeParams
from .._run.journal import array_digest
from .._run.progress import occurred_statuses, rate_text, resumed_text
from .._unmix.band_matching import band_order, endmembers_on_bands
from .._unmix.endmembers import Endmembers
from .._unmix.optical import check_free, check_free_names
from .._unmix.optical_starts import check_starts
from .._unmix.options import UnmixSettings
from .._unmix.unmix import DEFAULT_TOLERANCE, default_chunk_pixels
from .arguments import FromBands
from .cube_run import BlockPlan, CubeInputs, run_on_cube
from .wavelengths import known_wavelengths_um

__all__ = ["UnmixSummary", "unmix_file"]


@dataclass(frozen=True)
class UnmixSummary:
    """What :func:`unmix_file` did: ``outputs`` ``{field: path}``, ``pixels``, ``bands``,
    ``endmembers`` (names), ``seconds`` [s], ``status_counts`` ``{status name: pixels}``,
    ``resumed`` (as for :class:`lumaxlike.InversionSummary`)."""

    outputs: dict
    pixels: int
    bands: int
    endmembers: tuple
    seconds: float
    status_counts: dict = field(default_factory=dict)
    resumed: str | None = None

    @classmethod
    def of(cls, summary, endmembers) -> UnmixSummary:
        """The summary of a run (`lumaxlike.InversionSummary`) into ``endmembers``."""
        return cls(
            outputs=summary.outputs,
            pixels=summary.pixels,
            bands=summary.bands,
            endmembers=tuple(endmembers),
            seconds=summary.seconds,
            status_counts=summary.status_counts,
            resumed=summary.resumed,
        )

    def describe(self) -> str:
        counts = occurred_statuses(self.status_counts)
        rate = self.pixels / self.seconds if self.seconds > 0 else float("inf")
        return (
            f"unmixed {self.pixels} pixels x {self.bands} bands into {len(self.endmembers)} endmembers "
            f"({', '.join(self.endmembers)}) in {self.seconds:.2f} s ({rate_text(rate)} pixels/s); "
            f"status of pixels: {counts}" + resumed_text(self.resumed)
        )


@takes_options(UnmixSettings)
def unmix_file(
    cube_path,
    out_path,
    *,
    geometry=None,
    endmembers: Endmembers,
    params: HapkeParams,
    solver: str | SolverOptions,
    units: str,
    dtm=None,
    command=None,
    surface="auto",
    library=None,
    run: RunOptions | None = None,
    product: ProductOptions | None = None,
    settings: UnmixSettings | None = None,
    **keywords,
) -> UnmixSummary:
    """Unmix a reflectance cube file into mass-fraction maps, block by block.

    Args:
        cube_path: as for `lumaxlike.invert_file` (so are ``geometry``, ``dtm``,
            ``surface``, ``units``, ``command``, the run's options ``run`` and the
            product's ``product``; their fields as keywords are deprecated); bad bands
            (``bbl`` = 0) are left out of the bands unmixed (the maps are per endmember,
            not per band), as excluded thermal bands are; said on stderr and recorded
            (``lumaxlike_product``: ``bad_bands``, ``bad_bands_choice``).
        out_path: output ``.tif``/``.tiff`` (GeoTIFF), ``.img``/``.envi``/``.hdr``
            (ENVI), ``.nc`` (netCDF) or ``.zarr``; see the module docstring for the
            files written.
        endmembers: `lumaxlike.Endmembers` on the cube's bands (e.g.
            `Endmembers.from_library`): on all the file's bands (cut to those unmixed,
            matched by wavelength where both give them) or on the unmixed bands only.
        params: one `lumaxlike.HapkeParams` for every band (the mixture's).
        solver: as for `lumaxlike.unmix`, or a `lumaxlike.SolverOptions` (``max_iter``,
            ``tol``: its fields).
        settings: the unmixing's options as one `lumaxlike.UnmixSettings` (None: the
            defaults).
        **keywords: the options of `lumaxlike.UnmixSettings` by name, as `lumaxlike.unmix`
            takes them (``refl_sigma``: one number in ``units``, "r" or "radf", a
            reflectance factor's uncertainty in r varying with cos i per pixel, which
            `unmix` does not take; ``sigma``, its old name, still taken with a
            DeprecationWarning; ``free``, with endmembers from
            `Endmembers.from_optical_constants`: the grain-size and npFe0 maps are
            written too, and the optical endmembers' settings recorded,
            ``lumaxlike_unmix_optical`` and ``lumaxlike_unmix_free``); and the fields of
            ``run`` and ``product`` (above).
        library: how the endmembers were made (JSON-able mapping, e.g. the library
            files and their geometry), recorded with the route, sum-to-one, names,
            densities, grain sizes and extinction efficiencies (``lumaxlike_unmix_*``,
            `Provenance.unmix_settings`); None records none of the library.

    With ``sum_to_one`` false the unmodelled remainder is one more map, ``OUT_remainder``.

    Raises:
        ValueError: as `invert_file` does; and naming the argument for bad endmembers,
            params or a route, or a cube whose bands are not the endmembers' (in number;
            by wavelength where both give them: any order is matched, other centres
            refused).
        TypeError: a keyword that is no option.
    """
    settings = UnmixSettings.merged(settings, keywords)  # sigma= (old name) first refused or taken
    refuse_unknown("unmix_file", keywords, RUN_AND_PRODUCT)
    keywords.update(settings.solver_keywords())
    run, product, options = front_end_options(run, product, solver, keywords, "unmix_file")
    route, sum_to_one, sigma = settings.route, settings.sum_to_one, settings.refl_sigma
    _check_unmix_arguments(endmembers, params, sigma, units)  # a `FromBands` once made
    free = _checked_free(settings.free, endmembers, route, sum_to_one)
    starts = check_starts(settings.starts) if free else None
    task = settings.for_blocks(options, free, starts)
    planner = _Planner(endmembers, params, library, options, task)
    summary = run_on_cube(
        UNMIX,
        CubeInputs(cube_path, out_path, units, geometry, dtm, surface, sigma, product),
        run=run,
        solver=options,
        plan=planner.plan,
        fields=list(unmix_fields(bool(sum_to_one), free)),
        layout=UNMIX.layout(()),  # its main map; the endmembers' names come with the plan
        call=_recorded_call(locals()),
        command=command,
        # one block a chunk here: the plan's chunks are the endmembers' (`_Planner.plan`)
        chunk_pixels=lambda bands: 2**62,
    )
    return UnmixSummary.of(summary, planner.names)


def _recorded_call(arguments: dict) -> dict:
    """The arguments of `unmix_file` its record names (``free``, ``starts`` if any free)."""
    names = ("geometry", "dtm", "endmembers", "params", "units", "route", "sum_to_one")
    call = {name: arguments[name] for name in names} | {"refl_sigma": arguments["sigma"]}
    endmembers = arguments["endmembers"]
    call["endmembers"] = endmembers.names if isinstance(endmembers, Endmembers) else endmembers
    if arguments["free"]:
        call.update(free=arguments["free"], starts=arguments["starts"])
    return call


def _check_unmix_arguments(endmembers, params, sigma, units, *, made: bool = False) -> None:
    """Refuse bad endmembers, params or sigma in REFF, naming the argument; a `FromBands`
    is checked once ``made`` from the opened cube's bands."""
    lazy = () if made else (FromBands,)
    if not isinstance(endmembers, (Endmembers, *lazy)):
        raise ValueError(
            f"endmembers must be a lumaxlike.Endmembers, got {type(endmembers).__name__}"
        )
    if not isinstance(params, (HapkeParams, *lazy)):
        raise ValueError(
            f"params must be one lumaxlike.HapkeParams for every band, got {type(params).__name__}"
        )
    if sigma is not None and units == "reff":
        raise ValueError(
            "sigma with units 'reff' is not supported by unmix (its uncertainty in r varies "
            "with cos i per pixel); give the cube as r or radf"
        )


def _checked_free(free, endmembers, route, sum_to_one) -> tuple:
    """``free`` as a tuple of names (empty: nothing free), checked as `unmix` does (its
    names only where the endmembers are a `FromBands`, the rest once made)."""
    if free is None or free == () or free == "":
        return ()
    if isinstance(endmembers, FromBands):
        return check_free_names(free)
    check_free(free, endmembers, route, sum_to_one)
    return (free,) if isinstance(free, str) else tuple(free)


@dataclass
class _Planner:
    """`unmix_file`'s `BlockPlan` once its cube is open (`plan`), its endmembers, params
    and library record made there from the cube's bands where given as `FromBands`
    (the command line's, resampled to its band centres); ``names``: the endmembers'."""

    endmembers: Endmembers | FromBands
    params: HapkeParams | FromBands
    library: Mapping | FromBands | None
    options: SolverOptions
    task: UnmixSettings  # the block's options
    names: tuple = ()

    def plan(self, setup) -> BlockPlan:
        """The endmembers on the bands unmixed, matched by wavelength (refused before any
        work where they do not match), the task's `UnmixOptions`, the unmixing's record."""
        params, made = setup.made(self.params), setup.made(self.endmembers)
        _check_unmix_arguments(made, params, None, None, made=True)
        if self.task.free:  # (names checked before the cube was opened)
            check_free(self.task.free, made, self.task.route, self.task.sum_to_one)
        library = setup.made(self.library)
        self.names = tuple(made.names)
        task, info, where = self.task, setup.info, f"the cube {setup.cube_path}"
        cube = setup.cube
        endmembers = endmembers_on_bands(
            made,
            cube.band_indices,
            cube.file_info.bands,
            known_wavelengths_um(cube.file_info),
            where,
        )
        if info.bands != endmembers.n_bands:
            raise ValueError(f"{where} has {info.bands} bands, the endmembers {endmembers.n_bands}")
        wavelengths = known_wavelengths_um(info)
        band_order(wavelengths, endmembers, where)
        chunk_size = min(
            setup.chunk_size,
            default_chunk_pixels(info.bands, made.n_endmembers, self.options.solver),
        )
        tol = self.options.tol
        return BlockPlan(
            params=params,
            recorded_params=[params] * info.bands,
            options=UnmixOptions(
                self.options.solver,
                task,
                chunk_size,
                wavelengths=None if wavelengths is None else tuple(wavelengths),
            ),
            extra=lambda rows: {"endmembers": endmembers},
            record={"tol": DEFAULT_TOLERANCE if tol is None else tol},
            amend={
                "unmix_settings": unmix_record(
                    endmembers, task.route, task.sum_to_one, library, task.free
                )
            },
            journal={
                "route": task.route,
                "sum_to_one": bool(task.sum_to_one),
                **({"free": list(task.free), "starts": task.starts} if task.free else {}),
                "endmembers": _endmembers_digest(endmembers),
            },
            layout=UNMIX.layout(self.names),
        )


def _endmembers_digest(endmembers: Endmembers) -> str:
    """A digest of everything the endmembers hold (names, spectra, grains, phase, and
    the optical constants, bounds and variants of optical endmembers)."""
    values = [
        getattr(endmembers, f.name) for f in dataclasses.fields(endmembers) if f.name != "optical"
    ]
    optical = endmembers.optical
    if optical is not None:  # its arrays, not its repr (elided arrays)
        values += [getattr(optical, f.name) for f in dataclasses.fields(optical)]
    return array_digest(*(np.asarray(v) if isinstance(v, np.ndarray) else v for v in values))
