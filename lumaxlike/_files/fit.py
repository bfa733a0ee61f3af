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

import contextlib
import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import rasterio

from .._declared_options import refuse_unknown, renamed_keyword, takes_options
from .._inverse.defaults import DEFAULT_FIT_MAX_ITER
from .._inverse.fit.arguments import default_bounds
from .._inverse.fit.fit import OBSERVATIONS_PER_CHUNK
from .._inverse.fit.options import FitSettings
from .._inverse.joint.priors import check_file_priors
from .._inverse.joint.restarts import check_starts
from .._io.missions.product_cube import ProductCube, check_reff_incidence, product_options
from .._io.missions.products import refuse_normalised
from .._io.read.geometry_rasters import GeometryReader
from .._io.read.raster import GDAL_CACHE_BYTES, BandRaster, check_aligned
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
from .._provenance import PREFIX, Provenance, make_provenance
from .._run.journal import journal_folder
from .._run.pool import BlockPool
from .._run.progress import InversionSummary, progress_bar
from .._run.region_groups import REGION_MEMORY_BYTES, region_pixel_bytes
from .arguments import check_not_an_input, check_run_arguments
from .blocks import BLOCK_TARGET_BYTES
from .inputs import run_inputs
from .outputs import BlockSource, stream_to_outputs
from .records import recorded_command
from .regions import (
    RegionStore,
    assembled_block,
    fit_gathered_group,
    fit_region_groups,
    gather_region_group,
    plan_regions,
)
from .stacks import check_stack, read_stack_block, stack_limits

__all__ = ["fit_file"]


@dataclass(frozen=True)
class _FitProvenance(Provenance):
    """The record of `invert` plus the stack's inputs and the fit's settings
    (``lumaxlike_fit_*`` keys; `lumaxlike.read_provenance` reads the common part)."""

    fit_settings: Mapping = field(default_factory=dict)

    def attrs(self, *, envi: bool = False) -> dict[str, str]:
        encoded = super().attrs(envi=envi)
        for key, value in self.fit_settings.items():
            text = json.dumps(value, allow_nan=False)
            encoded[f"{PREFIX}fit_{key}"] = text.replace("=", "\\u003d") if envi else text
        return encoded


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
    start = time.perf_counter()
    if "sigma" in keywords:  # refused beside refl_sigma before anything else
        old, new = keywords.pop("sigma"), keywords.get("refl_sigma")
        keywords["refl_sigma"] = renamed_keyword("fit_file", "sigma", old, "refl_sigma", new)
    settings = FitSettings.merged(settings, keywords)
    refuse_unknown("fit_file", keywords, RUN_AND_PRODUCT)
    keywords.update(settings.solver_keywords())
    run, product, options = front_end_options(run, product, solver, keywords, "fit_file")
    check_run_arguments(options.solver, units, settings.refl_sigma, run.chunk_rows, radiance=True)
    request = _FitRequest.from_call({**locals(), **vars(settings), "sigma": settings.refl_sigma})
    fields, layout = fit_fields(request.free, request.joint)
    inputs = run_inputs(
        request.cubes, dtm=dtm, geometries=request.geometries, product=product, extra=[regions]
    )
    check_not_an_input(out_path, fields, inputs)
    return _run_fit(request, inputs, run, options, product, out_path, command, start)


def _run_fit(request, inputs, run, options, product, out_path, command, start):
    """Open the stack, record the run, stream its blocks (or its regions, then the maps)
    into the outputs; the run's `InversionSummary`."""
    fields, layout = fit_fields(request.free, request.joint)
    with rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_BYTES), contextlib.ExitStack() as stack:
        opened = _open_stack(stack, request, product, run.chunk_rows)
        provenance = _fit_record(request, opened, run, options, product, out_path, command)
        fit_options = _fit_options(request, opened, options)
        if request.regional:
            blocks = _regional_blocks(stack, fit_options, request, opened, run, out_path, fields)
        else:
            blocks = _blocks(request, opened, fit_options, run)
        published = stream_to_outputs(
            out_path,
            like=opened.info,
            fields=fields,
            provenance=provenance,
            rows_per_block=opened.rows_per_block,
            inputs=inputs,
            run=run,
            blocks=blocks,
            description=f"{FIT.progress} {request.cubes[0].name}",
            layout=layout,
        )
    return published.summary(opened.info, start, FIT.verb)


@dataclass(frozen=True)
class _FitRequest:
    """A `fit_file` call's arguments about the fit, checked (`from_call`)."""

    cubes: list[Path]
    geometries: list
    params: HapkeParams
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
    correction_undone: bool

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
        cubes, geometries = [Path(c) for c in call["cubes"]], list(call["geometry"])
        _check_stack_arguments(cubes, geometries, call["params"], call["sigma"], call["units"])
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
            correction_undone=bool(call["product"].correction_undone),
        )


def _check_stack_arguments(cubes, geometries, params, sigma, units) -> None:
    """Refuse no cubes, a count of geometries other than the cubes', params that are not
    one `HapkeParams`, sigma of REFF (its r would differ per observation)."""
    if not cubes:
        raise ValueError("give at least one cube")
    if len(geometries) != len(cubes):
        raise ValueError(
            f"--geometry gives {len(geometries)} rasters for {len(cubes)} cubes (one per cube, in order)"
        )
    if not isinstance(params, HapkeParams):
        raise ValueError(f"params must be a lumaxlike.HapkeParams, got {type(params).__name__}")
    if sigma is not None and units == "reff":
        raise ValueError(
            "sigma with units 'reff' is not supported by fit: the uncertainty of r then "
            "differs per observation; give it for 'r' or 'radf' data"
        )


@dataclass(frozen=True)
class _OpenedStack:
    """The stack's cubes and geometries opened, and how the run cuts them."""

    readers: list
    geometry_readers: list
    incidence: str | None
    bad_bands: np.ndarray
    record: dict
    rows_per_block: int
    chunk_size: int

    @property
    def info(self):
        """The first cube's `CubeInfo` (the stack's grid and bands)."""
        return self.readers[0].info

    def read(self, rows) -> tuple:
        """A block of rows of every cube, stacked (`read_stack_block`)."""
        return read_stack_block(
            self.readers, self.geometry_readers, rows, self.readers[0].units, self.incidence
        )

    def tell(self) -> None:
        """Every check passed: the run starts (each cube says what it read)."""
        for reader in self.readers:
            reader.tell()


def _open_stack(stack, request: _FitRequest, product, chunk_rows) -> _OpenedStack:
    """Open the cubes (as products) and geometries under ``stack``, checked aligned and
    alike; rows per block (about 32 MiB of stacked float64 reflectance unless
    ``chunk_rows``) and one JAX chunk shape for every block (the last is padded)."""
    readers = []
    for path in request.cubes:
        cube = ProductCube(
            path,
            request.units,
            **product_options(
                product.solar_spectrum,
                product.solar_distance,
                product.wavelengths_from,
                product.thermal_bands,
            ),
        )
        readers.append(stack.enter_context(cube))
        if not request.correction_undone:
            refuse_normalised(cube.located, "fit")
    info = readers[0].info
    for reader in readers[1:]:
        check_aligned(info.grid, reader.info.grid, "cube")
    check_stack([reader.info for reader in readers])
    incidence = check_reff_incidence(
        request.units, product.reff_incidence, readers[0].kind, request.cubes[0]
    )
    record: dict[str, Any] = {"cubes": [reader.record() for reader in readers]}
    if incidence is not None:
        record["reff_incidence"] = incidence
    geometry_readers = [
        stack.enter_context(GeometryReader(g, info.grid, request.dtm)) for g in request.geometries
    ]
    n_obs, width = len(request.cubes), info.grid.width
    row_bytes = width * info.bands * n_obs * 8
    rows_per_block = (
        int(chunk_rows)
        if chunk_rows is not None
        else int(max(1, min(BLOCK_TARGET_BYTES // row_bytes, info.grid.height)))
    )
    chunk_size = min(rows_per_block * width, max(1, OBSERVATIONS_PER_CHUNK // (info.bands * n_obs)))
    bad_bands = np.any([reader.bad_bands for reader in readers], axis=0)
    return _OpenedStack(
        readers, geometry_readers, incidence, bad_bands, record, rows_per_block, chunk_size
    )


def _fit_settings(request: _FitRequest, out_path) -> dict:
    """The fit's settings recorded beside the common record (``lumaxlike_fit_*``)."""
    settings: dict[str, Any] = {
        "cubes": [str(p.absolute()) for p in request.cubes],
        "geometries": [
            str(Path(g).absolute()) if isinstance(g, (str, Path)) else None
            for g in request.geometries
        ],
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


def _fit_record(request, opened, run, options, product, out_path, command) -> _FitProvenance:
    """The run's record: the common one (starting values, units, solver) and the fit's."""
    base = make_provenance(
        params=[request.params] * opened.info.bands,
        units=request.units,
        solver=options.solver,
        tol=options.tol,
        max_iter=DEFAULT_FIT_MAX_ITER if options.max_iter is None else options.max_iter,
        refl_sigma=request.sigma,
        dtype=opened.info.dtype,
        cube=None,
        geometry=None,
        dtm=request.dtm,
        product=opened.record,
        command=recorded_command(
            command,
            FIT.file_function,
            [str(p) for p in request.cubes],
            out_path,
            params=request.params,
            free=request.free,
            units=request.units,
            solver=options.solver,
            workers=run.workers,
            scheduler=run.scheduler,
            product=product,
        ),
    )
    return _FitProvenance(**{**vars(base), "fit_settings": _fit_settings(request, out_path)})


def _fit_options(request: _FitRequest, opened: _OpenedStack, options) -> dict:
    """`lumaxlike.fit`'s keywords for a block of the stack."""
    fit_options: dict[str, Any] = {
        "free": request.free,
        "solver": options.solver,
        "observation_limits": request.limits,
        "min_observations": request.min_observations,
        "chunk_size": opened.chunk_size,
    }
    fit_options.update(
        {k: v for k, v in (("max_iter", options.max_iter), ("tol", options.tol)) if v is not None}
    )
    if request.sigma is not None:
        fit_options["refl_sigma"] = float(uncertainty_to_r(request.sigma, request.units))
    if request.joint:
        fit_options.update(shared=request.shared, prior=request.prior)
        # a joint problem spans a pixel's bands: the bad ones are left out of it
        fit_options[BAD_BANDS_OPTION] = opened.bad_bands
        if request.starts is not None:
            fit_options["starts"] = request.starts
    return fit_options


def _blocks(request: _FitRequest, opened: _OpenedStack, fit_options, run) -> BlockSource:
    """A per-band or joint fit's blocks: the stacked cubes read, `fit_block` on each."""
    params = request.params
    return BlockSource(
        read=lambda rows: (opened.read(rows) + (params, fit_options), {}),
        pool_factory=lambda: BlockPool(run.workers, run.scheduler, function=FIT.block()),
        on_start=opened.tell,
        bad_bands=opened.bad_bands,
    )


def _regional_blocks(stack, fit_options, request, opened, run, out_path, fields) -> BlockSource:
    """A regional fit's blocks: at the start the regions, group by group (on the workers),
    stored in the journal; then each block's maps assembled from them."""
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
    plan = plan_regions(
        label_raster, info.grid, opened.rows_per_block, pixel_bytes, request.region_memory
    )
    store = RegionStore(journal_folder(out_path), plan.groups, fields)

    def fit_regions() -> None:
        opened.tell()
        bar = progress_bar(run.progress, int(np.sum(plan.pixels)), "fitting regions")

        def done(number):
            bar.update(int(np.sum(plan.pixels[np.isin(plan.labels, plan.groups[number][0])])))

        def gather(group):
            return gather_region_group(
                opened.read, label_raster, group, opened.rows_per_block, width
            )

        try:
            with BlockPool(run.workers, run.scheduler, function=fit_gathered_group) as pool:
                fit_region_groups(plan, store, gather, pool, request.params, fit_options, done)
        finally:
            bar.close()

    def resumed_work() -> str:  # the region groups the journal holds, fitted already
        stored = sum(number in store for number in range(len(plan.groups)))
        return f"{stored} of {len(plan.groups)} region groups"

    return BlockSource(
        read=lambda rows: ((store.assemble(rows, width, info.bands),), {}),
        pool_factory=lambda: BlockPool(1, None, function=assembled_block),
        on_start=fit_regions,
        bad_bands=opened.bad_bands,
        resumed_work=resumed_work,
        # the groups a resumed run finds in the journal were packed under this cap
        journal={"region_memory": float(request.region_memory)},
    )
