"""Multi-angle fits over a stack of co-registered cube files, streamed by blocks of rows.

Each cube is one observation of every pixel (an image of repeated orbital coverage, one
goniometer position of an imaging spectrometer, ...), with its own geometry raster. Block
by block, the same rows of every cube and geometry are read, stacked along a last
observation axis and fitted with :func:`lumaxlike.fit`; the maps go to temporary files
published atomically at the end (:class:`~lumaxlike._io.writers.ResultWriter`). Memory
grows with the block and the number of cubes, not the image.

Outputs (GeoTIFF/ENVI: one file per map; netCDF/zarr: one dataset), each with one band per
spectral band of the cubes: ``OUT`` the fitted w, ``OUT_<name>`` each other fitted
parameter (e.g. ``OUT_b``), ``OUT_sigma_<name>`` the 1-sigma uncertainty of each fitted
parameter, ``OUT_status``, ``OUT_iterations``, ``OUT_residual`` (the residual norm,
1/sr) and ``OUT_observations`` (valid observations used per pixel and band).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import rasterio

from .._inverse.defaults import DEFAULT_FIT_MAX_ITER
from .._inverse.fit.arguments import default_bounds
from .._inverse.fit.fit import OBSERVATIONS_PER_CHUNK, fit
from .._inverse.fit.observation_masks import LIMITED_ANGLES
from .._inverse.joint.priors import check_file_priors
from .._inverse.joint.restarts import check_starts
from .._io.geometry_rasters import GeometryReader
from .._io.product_cube import ProductCube, check_reff_incidence, product_options
from .._io.products import refuse_normalised
from .._io.raster import GDAL_CACHE_BYTES, BandRaster, check_aligned
from .._io.units import to_bidirectional_reflectance, uncertainty_to_r
from .._io.writers import FIELD_ATTRS, INVERSION_LAYOUT, FieldLayout, result_paths
from .._options import ProductOptions
from .._params import HapkeParams
from .._provenance import PREFIX, Provenance, make_provenance
from .._run.journal import journal_folder
from .._run.pool import BlockPool
from .._run.progress import InversionSummary, progress_bar
from .._run.region_groups import REGION_MEMORY_BYTES, region_pixel_bytes
from .arguments import check_not_an_input, check_run_arguments
from .blocks import BLOCK_TARGET_BYTES, FLAT_NORMAL
from .good_bands import BAD_BANDS_OPTION, good_bands_only, spread_to_all_bands
from .inputs import run_inputs
from .outputs import stream_to_outputs
from .records import recorded_command
from .regions import (
    RegionStore,
    assembled_block,
    fit_gathered_group,
    fit_region_groups,
    gather_region_group,
    plan_regions,
)
from .stacks import check_stack

__all__ = ["fit_block", "fit_fields", "fit_file"]

_PARAMETER_UNITS = {"roughness": "rad"}


def fit_fields(free: Sequence[str], joint: bool = False) -> tuple[tuple[str, ...], FieldLayout]:
    """The maps `fit_file` writes for the free parameters `free` (w first): (field
    names, their `FieldLayout`: invert's maps, their attributes adapted, plus one map and
    one sigma map per free parameter and the count of valid observations). A `joint`
    fit (shared parameters or priors) writes ``dfs_<name>`` (degrees of freedom for
    signal) per free parameter and ``cost`` (the objective) in place of ``residual``."""
    attrs = dict(INVERSION_LAYOUT.attrs)
    for name in free:
        unit = _PARAMETER_UNITS.get(name, "1")
        if name != "w":
            attrs[name] = {"long_name": f"fitted Hapke parameter {name}", "units": unit}
        attrs[f"sigma_{name}"] = {"long_name": f"standard uncertainty of {name}", "units": unit}
    attrs["residual"] = {
        "long_name": "residual norm: sqrt of the sum over valid observations of "
        "(model - observed r)^2",
        "units": "sr-1",
    }
    attrs["status"] = {**FIELD_ATTRS["status"], "long_name": "fit status (lumaxlike.Status)"}
    attrs["observations"] = {"long_name": "valid observations fitted", "units": "1"}
    layout = dataclasses.replace(
        INVERSION_LAYOUT,
        attrs=attrs,
        integer={**INVERSION_LAYOUT.integer, "observations": np.int32},
    )
    fields = (
        "w",
        *(n for n in free if n != "w"),
        *(f"sigma_{n}" for n in free),
        "status",
        "iterations",
        "residual",
        "observations",
    )
    if joint:
        for name in free:
            attrs[f"dfs_{name}"] = {
                "long_name": f"degrees of freedom for signal of {name} (averaging kernel diagonal)",
                "units": "1",
            }
        attrs["cost"] = {
            "long_name": "objective at the solution: sum of ((model - observed r) / sigma)^2 "
            "plus the prior rows' squares (without sigma: of the residuals, sr-2)",
            "units": "1",
        }
        fields = (*fields[:-2], *(f"dfs_{n}" for n in free), "cost", "observations")
    return fields, layout


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


def _limits_in_radians(limits_deg) -> dict:
    """{angle: (lower, upper)} [deg] -> [rad], checked by `fit` (named as the option)."""
    limits = {}
    for angle, interval in (limits_deg or {}).items():
        if angle not in LIMITED_ANGLES:
            raise ValueError(
                f"observation limits: unknown angle {angle!r}; expected some of {LIMITED_ANGLES}"
            )
        lower, upper = (float(v) for v in interval)
        if not (0.0 <= lower <= upper <= 180.0):
            raise ValueError(
                f"observation limits: {angle} range must satisfy 0 <= min <= max <= 180 deg, got {interval!r}"
            )
        limits[angle] = (math.radians(lower), math.radians(upper))
    return limits


def fit_file(
    cubes,
    out_path,
    *,
    geometry,
    params: HapkeParams,
    free,
    units,
    dtm=None,
    solver="numba",
    observation_limits_deg: Mapping | None = None,
    min_observations=None,
    sigma=None,
    chunk_rows=None,
    overwrite=False,
    progress=None,
    max_iter=None,
    tol=None,
    command=None,
    shared=(),
    prior: Mapping | None = None,
    starts: int | None = None,
    workers=1,
    scheduler=None,
    resume=False,
    regions=None,
    regional=(),
    region_memory=REGION_MEMORY_BYTES,
    correction_undone=False,
    reff_incidence=None,
    solar_spectrum=None,
    solar_distance=None,
    wavelengths_from=None,
    thermal_bands="keep",
) -> InversionSummary:
    """Fit Hapke parameters per pixel and band to a stack of co-registered cube files.

    The file front end of `lumaxlike.fit` (as `lumaxlike.invert_file` is of
    `lumaxlike.invert`; `lumaxlike.fit_dataarray` is its xarray twin): each cube of
    (rows, cols, bands) is one observation of every pixel; block by block of rows the
    cubes are stacked to (rows, cols, bands, observations) and fitted; every map has the
    cubes' (rows, cols, bands) grid. Also the command ``lumaxlike fit``.

    Args:
        cubes: reflectance cube files, one observation each, on one grid with the same
            bands (any raster GDAL opens, or a mission product as `lumaxlike.invert_file`
            reads it); nodata pixels are missing observations. A band any cube marks bad
            (``bbl`` = 0) is not solved: NaN with status ``BAD_BAND``. A product
            normalised to a standard geometry (M3 L2) is refused: a fit needs observed
            geometries (unless ``correction_undone``).
        out_path: output path (``.tif``, ``.img``/``.hdr``, ``.nc``, ``.zarr``); the
            maps written are listed in the module docstring.
        geometry: one OBS raster per cube (see `lumaxlike.invert_file`), aligned with it.
        params: `lumaxlike.HapkeParams`: the fixed parameters and the free ones' start.
        free: names of the fitted parameters (see `lumaxlike.fit`); w is always fitted.
        units: what the cubes hold: ``"r"``, ``"radf"``, ``"reff"`` or ``"radiance"``
            (each cube converted to I/F with its own sun distance, as `invert_file` does;
            so are ``solar_spectrum``, ``solar_distance``, ``wavelengths_from``,
            ``thermal_bands``, ``reff_incidence`` and ``correction_undone``).
        dtm: optional DTM on the grid for local normals (shared by all observations).
        solver: ``"numba"`` (default) or ``"jax"``.
        observation_limits_deg: {angle: (min, max)} in degrees for "incidence",
            "emission", "phase": observations outside are left out (`lumaxlike.fit`).
        min_observations: valid observations a problem needs (default: free + 1).
        sigma: standard uncertainty of the cubes' values, in ``units``; the sigma maps
            then come from it rather than from the residuals.
        chunk_rows: rows per block; None picks about 32 MiB of stacked reflectance.
        overwrite: as for `lumaxlike.invert_file` (so are ``progress``, ``max_iter``,
            ``tol``, ``command``, ``workers``, ``scheduler`` and ``resume``; this process
            reads the cubes and writes the maps, the fits of the blocks run where
            ``workers`` or ``scheduler`` say).
        shared: names among `free` shared by a pixel's bands (`lumaxlike.fit`); their
            maps, and a pixel's status, iterations and cost, are the same in every band
            layer of the outputs (the file layout has one layer per band).
        prior: {name: (mean, sigma)} scalar Gaussian priors (`lumaxlike.fit`); need
            `sigma`. With `shared` or `prior` the outputs add ``OUT_dfs_<name>`` and write
            ``OUT_cost`` in place of ``OUT_residual`` (see `fit_fields`).
        starts: with `shared` or `prior`: fits from that many starts (`lumaxlike.fit`'s
            ``starts=``), each pixel keeping its lowest converged minimum (MULTIMODAL
            where another lies within chi^2 4); recorded as ``lumaxlike_fit_starts``.
        regions: a label raster on the cubes' grid (one band of integers: tiles,
            geologic units; negative or nodata: left out), with `regional`: the names
            among `free` that take one value per region for all its pixels and bands
            (`lumaxlike.fit`'s ``regions=``), written as maps like the shared ones. Each
            region is fitted in memory from its pixels gathered over the rows it spans
            (see :mod:`lumaxlike._files.regions`), the maps then streamed by blocks;
            each group of regions is one task of `workers` or `scheduler`'s cluster.
        region_memory: cap on the memory of the regions fitted at once [bytes]
            (default 4 GiB), by this process or by each worker; a region that needs
            more is refused before any fit.

    Returns:
        `InversionSummary` (pixels, bands, time, status counts, outputs).

    Raises:
        ValueError: naming the file or argument, for misaligned cubes or rasters, a
            count of geometry rasters that differs from the cubes', bad settings.
        FileNotFoundError, FileExistsError, PermissionError: as `lumaxlike.invert_file`.
    """
    start = time.perf_counter()
    check_run_arguments(solver, units, sigma, chunk_rows, radiance=True)
    cubes = [Path(c) for c in cubes]
    geometries = list(geometry)
    if not cubes:
        raise ValueError("give at least one cube")
    if len(geometries) != len(cubes):
        raise ValueError(
            f"--geometry gives {len(geometries)} rasters for {len(cubes)} cubes (one per cube, in order)"
        )
    if not isinstance(params, HapkeParams):
        raise ValueError(f"params must be a lumaxlike.HapkeParams, got {type(params).__name__}")
    free = (free,) if isinstance(free, str) else tuple(free)
    if "w" not in free:
        raise ValueError(f"free must include 'w', got {free!r}")
    limits = _limits_in_radians(observation_limits_deg)
    if sigma is not None and units == "reff":  # its r would differ per observation (cos i)
        raise ValueError(
            "sigma with units 'reff' is not supported by fit: the uncertainty of r then "
            "differs per observation; give it for 'r' or 'radf' data"
        )
    regional = (regional,) if isinstance(regional, str) else tuple(regional)
    if (regions is None) != (not regional):
        raise ValueError(
            "regions (a label raster) and regional (the names it applies to) go together"
        )
    if regions is not None and not (isinstance(region_memory, (int, float)) and region_memory > 0):
        raise ValueError(f"region_memory must be a positive number of bytes, got {region_memory!r}")
    joint = bool(shared) or bool(prior) or bool(regional)
    starts = check_starts(starts, bool(shared) or bool(prior), bool(regional))
    if prior and sigma is None:
        raise ValueError("prior needs sigma (the observations' noise weighs the prior)")
    # before anything is read or written: a NaN would stop the record's JSON mid-run, a
    # mean outside the bounds pin its parameter there
    check_file_priors(prior, free, tuple(shared) + regional, default_bounds())
    fields, layout = fit_fields(free, joint)
    product = ProductOptions(
        correction_undone,
        reff_incidence,
        solar_spectrum,
        solar_distance,
        wavelengths_from,
        thermal_bands,
    )
    inputs = run_inputs(cubes, dtm=dtm, geometries=geometries, product=product, extra=[regions])
    check_not_an_input(out_path, fields, inputs)
    with rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_BYTES), contextlib.ExitStack() as stack:
        readers = []
        for path in cubes:
            cube = ProductCube(
                path,
                units,
                **product_options(solar_spectrum, solar_distance, wavelengths_from, thermal_bands),
            )
            readers.append(stack.enter_context(cube))
            if not correction_undone:
                refuse_normalised(cube.located, "fit")
        info = readers[0].info
        for reader in readers[1:]:
            check_aligned(info.grid, reader.info.grid, "cube")
        check_stack([reader.info for reader in readers])
        incidence = check_reff_incidence(units, reff_incidence, readers[0].kind, cubes[0])
        bad_bands = np.any([reader.bad_bands for reader in readers], axis=0)
        record: dict[str, Any] = {"cubes": [reader.record() for reader in readers]}
        if incidence is not None:
            record["reff_incidence"] = incidence
        geometry_readers = [
            stack.enter_context(GeometryReader(g, info.grid, dtm)) for g in geometries
        ]
        n_obs, width = len(cubes), info.grid.width
        row_bytes = width * info.bands * n_obs * 8
        rows_per_block = (
            int(chunk_rows)
            if chunk_rows is not None
            else int(max(1, min(BLOCK_TARGET_BYTES // row_bytes, info.grid.height)))
        )
        # one JAX chunk shape for every block (the last is padded): compiles once
        chunk_size = min(
            rows_per_block * width, max(1, OBSERVATIONS_PER_CHUNK // (info.bands * n_obs))
        )
        settings = {
            "cubes": [str(p.absolute()) for p in cubes],
            "geometries": [
                str(Path(g).absolute()) if isinstance(g, (str, Path)) else None for g in geometries
            ],
            "free": list(free),
            "observation_limits_deg": {
                k: list(map(float, v)) for k, v in (observation_limits_deg or {}).items()
            },
            "min_observations": min_observations,
        }
        if regional:
            settings["regions"] = str(Path(regions).absolute())
            settings["regional"] = list(regional)
        if joint:
            settings["shared"] = list(shared)
            settings["prior"] = {
                name: [float(v) for v in pair] for name, pair in (prior or {}).items()
            }
        if starts is not None:
            settings["starts"] = starts
        base = make_provenance(
            params=[params] * info.bands,
            units=units,
            solver=solver,
            tol=tol,
            max_iter=DEFAULT_FIT_MAX_ITER if max_iter is None else max_iter,
            refl_sigma=sigma,
            dtype=info.dtype,
            cube=None,
            geometry=None,
            dtm=dtm,
            product=record,
            command=recorded_command(
                command,
                "fit_file",
                [str(p) for p in cubes],
                out_path,
                params=params,
                free=free,
                units=units,
                solver=solver,
                workers=workers,
                scheduler=scheduler,
                product=product,
            ),
        )
        # the record's param_* keys hold the starting values; the fitted ones are the maps
        settings["fitted_maps"] = {
            name: str(Path(path).absolute())
            for name, path in result_paths(out_path, free, main="w").items()
        }
        provenance = _FitProvenance(**{**vars(base), "fit_settings": settings})
        fit_options = {
            "free": free,
            "solver": solver,
            "observation_limits": limits,
            "min_observations": min_observations,
            "chunk_size": chunk_size,
        }
        fit_options.update(
            {k: v for k, v in (("max_iter", max_iter), ("tol", tol)) if v is not None}
        )
        if sigma is not None:
            fit_options["refl_sigma"] = float(uncertainty_to_r(sigma, units))
        if joint:
            fit_options.update(shared=tuple(shared), prior=dict(prior or {}))
            # a joint problem spans a pixel's bands: the bad ones are left out of it
            fit_options[BAD_BANDS_OPTION] = bad_bands
            if starts is not None:
                fit_options["starts"] = starts

        def read(rows):
            block = _read_block(readers, geometry_readers, rows, readers[0].units, incidence)
            return block + (params, fit_options), {}

        def tell():  # every check passed: the run starts
            for reader in readers:
                reader.tell()

        pool_factory, on_start = lambda: BlockPool(workers, scheduler, function=fit_block), tell
        resumed_work = None
        if regional:
            fit_options["regional"] = regional
            label_raster = BandRaster(regions)
            stack.callback(label_raster.close)
            n_band_free = len([n for n in free if n not in tuple(shared) + regional])
            pixel_bytes = region_pixel_bytes(
                info.bands, n_obs, n_band_free, len(shared) + len(regional)
            )
            plan = plan_regions(label_raster, info.grid, rows_per_block, pixel_bytes, region_memory)
            store = RegionStore(journal_folder(out_path), plan.groups, fields)

            def on_start():  # the regions, group by group (on the workers), then the maps
                tell()
                bar = progress_bar(progress, int(np.sum(plan.pixels)), "fitting regions")
                read_cubes = lambda rows: _read_block(  # noqa: E731
                    readers, geometry_readers, rows, readers[0].units, incidence
                )
                try:
                    with BlockPool(workers, scheduler, function=fit_gathered_group) as pool:
                        fit_region_groups(
                            plan,
                            store,
                            lambda group: gather_region_group(
                                read_cubes, label_raster, group, rows_per_block, width
                            ),
                            pool,
                            params,
                            fit_options,
                            lambda number: bar.update(
                                int(
                                    np.sum(
                                        plan.pixels[np.isin(plan.labels, plan.groups[number][0])]
                                    )
                                )
                            ),
                        )
                finally:
                    bar.close()

            def read(rows):  # noqa: F811  # the stored regions' maps of the block
                return (store.assemble(rows, width, info.bands),), {}

            pool_factory = lambda: BlockPool(1, None, function=assembled_block)  # noqa: E731

            def resumed_work():  # the region groups the journal holds, fitted already
                stored = sum(number in store for number in range(len(plan.groups)))
                return f"{stored} of {len(plan.groups)} region groups"

        run = stream_to_outputs(
            out_path,
            like=info,
            fields=fields,
            provenance=provenance,
            rows_per_block=rows_per_block,
            inputs=inputs,
            overwrite=overwrite,
            resume=resume,
            pool_factory=pool_factory,
            on_start=on_start,
            # the groups a resumed run finds in the journal were packed under this cap
            settings={"region_memory": float(region_memory)} if regional else None,
            read=read,
            progress=progress,
            description=f"fitting {Path(cubes[0]).name}",
            layout=layout,
            bad_bands=bad_bands,
            resumed_work=resumed_work,
        )
    return InversionSummary(
        outputs=run.outputs,
        pixels=info.grid.height * width,
        bands=info.bands,
        seconds=time.perf_counter() - start,
        status_counts=run.status_counts,
        resumed=run.resumed,
    )


def _read_block(readers, geometry_readers, rows, units, reff_incidence=None) -> tuple:
    """One block of rows of every cube, stacked: r ``(rows, cols, bands, observations)``
    and to_sun, to_sensor, normal ``(rows, cols, observations, 3)``. ``reff_incidence``
    ``"areoid"`` divides REFF by the ellipsoid's cos i, not the facet's."""
    refl, vectors = [], []
    for reader, geometry_reader in zip(readers, geometry_readers):
        to_sun, to_sensor, normal = geometry_reader.read(rows)
        divided_by = FLAT_NORMAL if reff_incidence == "areoid" else normal
        refl.append(to_bidirectional_reflectance(reader.read(rows), units, to_sun, divided_by))
        vectors.append((to_sun, to_sensor, normal))
    stacked = np.stack(refl, axis=-1)  # (rows, cols, bands, observations)
    del refl
    geometry = [
        np.stack([v[k] for v in vectors], axis=-2) for k in range(3)
    ]  # (rows, cols, observations, 3)
    return (stacked, *geometry)


def fit_block(refl, to_sun, to_sensor, normal, params, fit_options) -> dict:
    """The task of a block: `lumaxlike.fit` on stacked observations; returns
    ``{field: (rows, cols, bands)}`` of the maps `fit_files` writes."""
    n_bands = refl.shape[-2]
    refl, fit_options, good = good_bands_only(refl, fit_options)
    result = fit(refl, to_sun, to_sensor, normal, params, **fit_options)
    block = {name: result[name] for name in result.free}
    for name in result.free:
        block[f"sigma_{name}"] = result.sigma(name)
    block.update(
        status=result.status, iterations=result.iterations, observations=result.observations
    )
    if hasattr(result, "dfs"):  # a JointFitResult: per-pixel maps repeated in every band layer
        block.update({f"dfs_{name}": result.dfs[name] for name in result.free}, cost=result.cost)
        shape = refl.shape[:3]
        block = {
            name: np.ascontiguousarray(
                np.broadcast_to(value[..., None] if value.ndim == 2 else value, shape)
            )
            for name, value in block.items()
        }
    else:
        block["residual"] = result.residual_norm
    return spread_to_all_bands(block, good, n_bands)
