"""Multi-angle fits over a stack of co-registered cube files, streamed by blocks of rows.

Each cube is one observation of every pixel (an image of repeated orbital coverage, one
goniometer position of an imaging spectrometer, ...), with its own geometry raster. Block
by block, the same rows of every cube and geometry are read, stacked along a last
observation axis and fitted with :func:`lumaxlike.fit`; the maps go to temporary files
published atomically at the end (:class:`~lumaxlike._io.write.writers.ResultWriter`). Memory
grows with the block and the number of cubes, not the image.

Outputs (GeoTIFF/ENVI: one file per map; netCDF/zarr: one dataset), each with one band per
spectral band of the cubes: ``OUT`` the fitted w, ``OUT_<name>`` each other fitted
parameter (e.g. ``OUT_b``), ``OUT_sigma_<name>`` the 1-sigma uncertainty of each fitted
parameter, ``OUT_status``, ``OUT_iterations``, ``OUT_residual`` (the residual norm,
1/sr) and ``OUT_observations`` (valid observations used per pixel and band).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._declared_options import refuse_unknown, takes_options
from .._inverse.defaults import DEFAULT_FIT_MAX_ITER
from .._inverse.fit.arguments import default_bounds
from .._inverse.fit.fit import OBSERVATIONS_PER_CHUNK
from .._inverse.fit.options import FitSettings
from .._inverse.joint.priors import check_file_priors
from .._inverse.joint.restarts import check_starts
from .._io.read.raster import BandRaster
from .._io.read.units import uncertainty_to_r
from .._io.write.writers import result_paths
from .._operations.fit import FIT, fit_fields
from .._operations.good_bands import BAD_BANDS_OPTION
from .._options import (
    RUN_AND_PRODUCT,
    ProductOptions,
    RunOptions,
    SolverOptions,
    front_end_options,
)
from .._params import HapkeParams
from .._run.journal import journal_folder
from .._run.pool import BlockPool
from .._run.progress import InversionSummary, progress_bar
from .._run.region_groups import REGION_MEMORY_BYTES, region_pixel_bytes
from .arguments import FromBands, check_run_arguments
from .blocks import BLOCK_TARGET_BYTES
from .outputs import BlockSource
from .regions import (
    RegionStore,
    assembled_block,
    fit_gathered_group,
    fit_region_groups,
    gather_region_group,
    plan_regions,
)
from .stack_run import (
    OpenedStack,
    StackInputs,
    StackPlan,
    block_rows,
    run_on_stack,
    stack_arguments,
    stack_paths,
)
from .stacks import stack_limits

__all__ = ["fit_file"]


@takes_options(FitSettings)
def fit_file(
    cubes,
    out_path,
    *,
    geometry,
    params: HapkeParams,
    free,
    units,
    dtm=None,
    solver: str | SolverOptions = "numba",
    observation_limits_deg: Mapping | None = None,
    command=None,
    regions=None,
    region_memory=REGION_MEMORY_BYTES,
    run: RunOptions | None = None,
    product: ProductOptions | None = None,
    settings: FitSettings | None = None,
    **keywords,
) -> InversionSummary:
    """Fit Hapke parameters per pixel and band to a stack of co-registered cube files.

    The file front end of `lumaxlike.fit` (and of ``lumaxlike fit``): each cube (rows,
    cols, bands) is one observation of every pixel; block by block the cubes are stacked
    to (rows, cols, bands, observations) and fitted; every map has the cubes' grid.

    Args:
        cubes: reflectance cubes, one observation each, on one grid with the same bands
            (rasters or mission products as `lumaxlike.invert_file` reads them; a
            normalised product is refused unless ``correction_undone``); nodata pixels
            are missing observations; a band any cube marks bad gets ``BAD_BAND``.
        out_path: output path (``.tif``, ``.img``/``.hdr``, ``.nc``, ``.zarr``); the
            maps written are listed in the module docstring.
        geometry: one OBS raster per cube (see `lumaxlike.invert_file`), aligned with it.
        params: `lumaxlike.HapkeParams`: the fixed parameters and the free ones' start.
        free: names of the fitted parameters (see `lumaxlike.fit`); w is always fitted.
        units: as for `lumaxlike.invert_file` (so are ``dtm``, ``command``, the run's
            options ``run`` and the product's ``product``; their fields as keywords are
            deprecated).
        solver: ``"numba"`` (default) or ``"jax"``, or a `lumaxlike.SolverOptions`
            (``max_iter``, ``tol``: its fields).
        observation_limits_deg: the option ``observation_limits`` in degrees (give one
            of the two).
        settings: the fit's options as one `lumaxlike.FitSettings` (None: the defaults).
        **keywords: the options of `lumaxlike.FitSettings` by name, as `lumaxlike.fit`
            takes them (``refl_sigma`` in ``units``, the cubes' noise; ``sigma``, its old
            name, still taken with a DeprecationWarning; ``prior`` needs it; ``profile``,
            no map, is `lumaxlike.fit`'s only and refused here). With ``shared`` or
            ``prior`` the outputs add ``OUT_dfs_<name>`` and ``OUT_cost`` replaces
            ``OUT_residual``; shared maps repeat in every band.
        regions: a label raster on the cubes' grid (negative or nodata: left out), with
            the option ``regional``, the names among ``free`` taking one value per region
            (`lumaxlike.fit`'s ``regions=``; docs/joint-fits.md).
        region_memory: cap on the memory of the regions fitted at once [bytes].

    Returns:
        `InversionSummary` (pixels, bands, time, status counts, outputs).

    Raises:
        ValueError: naming the file or argument, for misaligned cubes or rasters, a
            count of geometry rasters that differs from the cubes', bad settings.
        FileNotFoundError, FileExistsError, PermissionError: as `lumaxlike.invert_file`.
        TypeError: a keyword that is no option.
    """
    settings = FitSettings.merged(settings, keywords)  # sigma= (old name) first refused or taken
    refuse_unknown("fit_file", keywords, RUN_AND_PRODUCT)
    keywords.update(settings.solver_keywords())
    run, product, options = front_end_options(run, product, solver, keywords, "fit_file")
    check_run_arguments(options.solver, units, settings.refl_sigma, run.chunk_rows, radiance=True)
    request = _FitRequest.from_call({**locals(), **vars(settings), "sigma": settings.refl_sigma})
    return _run_fit(request, run, options, product, out_path, command)


def _run_fit(request, run, options, product, out_path, command) -> InversionSummary:
    """Fit the stack (`run_on_stack`): its blocks, or its regions then the maps."""
    fields, layout = fit_fields(request.free, request.joint)
    inputs = StackInputs(
        request.cubes,
        request.geometries,
        out_path,
        request.units,
        request.params,
        request.dtm,
        product,
        extra_files=(request.regions,),
    )
    return run_on_stack(
        FIT,
        inputs,
        run=run,
        plan=lambda opened, stack: _plan(request, opened, stack, run, options, out_path, fields),
        fields=fields,
        layout=layout,
        call={
            "params": request.params,
            "free": request.free,
            "units": request.units,
            "solver": options.solver,
        },
        command=command,
    )


def _plan(request, opened, stack, run, options, out_path, fields) -> StackPlan:
    """Rows per block (about 32 MiB of stacked float64 reflectance unless
    ``run.chunk_rows``), one JAX chunk shape for every block (the last is padded), the
    blocks (per band or joint: `_blocks`; regional: `_regional_blocks`) and the record."""
    info, n_obs = opened.info, len(request.cubes)
    width = info.grid.width
    row_bytes = width * info.bands * n_obs * 8
    rows_per_block = block_rows(run.chunk_rows, row_bytes, BLOCK_TARGET_BYTES, info.grid.height)
    chunk_size = min(rows_per_block * width, max(1, OBSERVATIONS_PER_CHUNK // (info.bands * n_obs)))
    bad_bands = opened.bad_bands()
    fit_options = _fit_options(request, options, chunk_size, bad_bands)
    if request.regional:
        blocks = _regional_blocks(
            stack, fit_options, request, opened, rows_per_block, bad_bands, run, out_path, fields
        )
    else:
        blocks = _blocks(request, opened, bad_bands, fit_options, run)
    record = {
        "solver": options.solver,
        "tol": options.tol,
        "max_iter": DEFAULT_FIT_MAX_ITER if options.max_iter is None else options.max_iter,
        "refl_sigma": request.sigma,
    }
    return StackPlan(rows_per_block, blocks, record, _fit_settings(request, out_path))


@dataclass(frozen=True)
class _FitRequest:
    """A `fit_file` call's arguments about the fit, checked (`from_call`)."""

    cubes: list[Path]
    geometries: list
    params: HapkeParams | FromBands  # made once the cubes are open: `OpenedStack.params`
    free: tuple[str, ...]
    limits: dict
    limits_deg: Mapping | None
    min_observations: int | None
    units: str
    sigma: float | None
    dtm: Any
    shared: tuple[str, ...]
    prior: dict
    starts: int | None
    regions: Any
    regional: tuple[str, ...]
    region_memory: float

    @property
    def joint(self) -> bool:
        """Whether a pixel's bands are fitted together (shared parameters, priors, regions)."""
        return bool(self.shared) or bool(self.prior) or bool(self.regional)

    @classmethod
    def from_call(cls, call: Mapping) -> _FitRequest:
        """The request of a `fit_file` call (its ``locals()``), refused naming the argument
        where it cannot be fitted; priors are checked before anything is read or written
        (a NaN would stop the record's JSON mid-run, a mean outside the bounds pin its
        parameter there)."""
        cubes, geometries = stack_arguments(call, "--geometry")
        if call["sigma"] is not None and call["units"] == "reff":
            raise ValueError(
                "sigma with units 'reff' is not supported by fit: the uncertainty of r then "
                "differs per observation; give it for 'r' or 'radf' data"
            )
        free = (call["free"],) if isinstance(call["free"], str) else tuple(call["free"])
        if "w" not in free:
            raise ValueError(f"free must include 'w', got {free!r}")
        regional = call["regional"]
        regional = (regional,) if isinstance(regional, str) else tuple(regional)
        regions, region_memory = call["regions"], call["region_memory"]
        if (regions is None) != (not regional):
            raise ValueError(
                "regions (a label raster) and regional (the names it applies to) go together"
            )
        if regions is not None and not (
            isinstance(region_memory, (int, float)) and region_memory > 0
        ):
            raise ValueError(
                f"region_memory must be a positive number of bytes, got {region_memory!r}"
            )
        shared, prior = tuple(call["shared"]), dict(call["prior"] or {})
        starts = check_starts(call["starts"], bool(shared) or bool(prior), bool(regional))
        if prior and call["sigma"] is None:
            raise ValueError("prior needs refl_sigma (the observations' noise weighs the prior)")
        check_file_priors(prior, free, shared + regional, default_bounds())
        if call["profile"]:
            raise ValueError("profile is lumaxlike.fit's only (its intervals are no map)")
        limits, limits_deg = stack_limits(
            call["observation_limits"], call["observation_limits_deg"]
        )
        return cls(
            cubes=cubes,
            geometries=geometries,
            params=call["params"],
            free=free,
            limits=limits,
            limits_deg=limits_deg,
            min_observations=call["min_observations"],
            units=call["units"],
            sigma=call["sigma"],
            dtm=call["dtm"],
            shared=shared,
            prior=prior,
            starts=starts,
            regions=regions,
            regional=regional,
            region_memory=region_memory,
        )


def _fit_settings(request: _FitRequest, out_path) -> dict:
    """The fit's settings recorded beside the common record (``lumaxlike_fit_*``)."""
    settings: dict[str, Any] = {
        **stack_paths(request.cubes, request.geometries),
        "free": list(request.free),
        "observation_limits_deg": {
            k: list(map(float, v)) for k, v in (request.limits_deg or {}).items()
        },
        "min_observations": request.min_observations,
    }
    if request.regional:
        settings["regions"] = str(Path(request.regions).absolute())
        settings["regional"] = list(request.regional)
    if request.joint:
        settings["shared"] = list(request.shared)
        settings["prior"] = {name: [float(v) for v in pair] for name, pair in request.prior.items()}
    if request.starts is not None:
        settings["starts"] = request.starts
    # the record's param_* keys hold the starting values; the fitted ones are the maps
    settings["fitted_maps"] = {
        name: str(Path(path).absolute())
        for name, path in result_paths(out_path, request.free, main="w").items()
    }
    return settings


def _fit_options(request: _FitRequest, options, chunk_size: int, bad_bands) -> dict:
    """`lumaxlike.fit`'s keywords for a block of the stack (``chunk_size``: pixels per
    JAX chunk; ``bad_bands``: per band, whether any cube marks it bad)."""
    fit_options: dict[str, Any] = {
        "free": request.free,
        "solver": options.solver,
        "observation_limits": request.limits,
        "min_observations": request.min_observations,
        "chunk_size": chunk_size,
    }
    fit_options.update(
        {k: v for k, v in (("max_iter", options.max_iter), ("tol", options.tol)) if v is not None}
    )
    if request.sigma is not None:
        fit_options["refl_sigma"] = float(uncertainty_to_r(request.sigma, request.units))
    if request.joint:
        fit_options.update(shared=request.shared, prior=request.prior)
        # a joint problem spans a pixel's bands: the bad ones are left out of it
        fit_options[BAD_BANDS_OPTION] = bad_bands
        if request.starts is not None:
            fit_options["starts"] = request.starts
    return fit_options


def _blocks(request: _FitRequest, opened: OpenedStack, bad_bands, fit_options, run) -> BlockSource:
    """A per-band or joint fit's blocks: the stacked cubes read, `fit_block` on each."""
    params = opened.params
    return BlockSource(
        read=lambda rows: (opened.read(rows) + (params, fit_options), {}),
        pool_factory=lambda: BlockPool(run.workers, run.scheduler, function=FIT.block()),
        on_start=opened.tell,
        bad_bands=bad_bands,
    )


def _regional_blocks(
    stack, fit_options, request, opened, rows_per_block, bad_bands, run, out_path, fields
) -> BlockSource:
    """A regional fit's blocks: at the start the regions, group by group (on the workers),
    stored in the journal; then each block's maps assembled from them (``stack`` closes
    the label raster)."""
    fit_options = {**fit_options, "regional": request.regional}
    label_raster = BandRaster(request.regions)
    stack.callback(label_raster.close)
    info, width = opened.info, opened.info.grid.width
    n_band_free = len([n for n in request.free if n not in request.shared + request.regional])
    pixel_bytes = region_pixel_bytes(
        info.bands,
        len(request.cubes),
        n_band_free,
        len(request.shared) + len(request.regional),
    )
    plan = plan_regions(label_raster, info.grid, rows_per_block, pixel_bytes, request.region_memory)
    store = RegionStore(journal_folder(out_path), plan.groups, fields)

    def fit_regions() -> None:
        opened.tell()
        bar = progress_bar(run.progress, int(np.sum(plan.pixels)), "fitting regions")

        def done(number):
            bar.update(int(np.sum(plan.pixels[np.isin(plan.labels, plan.groups[number][0])])))

        def gather(group):
            return gather_region_group(opened.read, label_raster, group, rows_per_block, width)

        try:
            with BlockPool(run.workers, run.scheduler, function=fit_gathered_group) as pool:
                fit_region_groups(plan, store, gather, pool, opened.params, fit_options, done)
        finally:
            bar.close()

    def resumed_work() -> str:  # the region groups the journal holds, fitted already
        stored = sum(number in store for number in range(len(plan.groups)))
        return f"{stored} of {len(plan.groups)} region groups"

    return BlockSource(
        read=lambda rows: ((store.assemble(rows, width, info.bands),), {}),
        pool_factory=lambda: BlockPool(1, None, function=assembled_block),
        on_start=fit_regions,
        bad_bands=bad_bands,
        resumed_work=resumed_work,
        # the groups a resumed run finds in the journal were packed under this cap
        journal={"region_memory": float(request.region_memory)},
    )
