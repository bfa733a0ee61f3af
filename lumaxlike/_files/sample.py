"""`sample_file`: the posterior of the free Hapke parameters over a stack of co-registered
cube files, streamed by blocks of rows (the file front end of `lumaxlike.sample`; the
command ``lumaxlike sample``).

As `lumaxlike.fit_file`: each cube is one observation of every pixel, with its own
geometry raster; block by block the same rows of every cube are stacked along an
observation axis and sampled; the maps go to temporary files published atomically at the
end; a killed run continues with ``resume=True`` from its journaled blocks. Memory grows
with the block (its draws), not the image.
"""

from __future__ import annotations

import contextlib
import time
from pathlib import Path

import numpy as np
import rasterio

from .._compat.xla_log import without_slow_compile_banner
from .._inverse.fit.arguments import default_bounds
from .._inverse.joint.priors import check_file_priors
from .._io.geometry_rasters import GeometryReader
from .._io.product_cube import check_unit_tag
from .._io.products import refuse_normalised
from .._io.raster import GDAL_CACHE_BYTES, CubeReader, check_aligned
from .._io.units import check_units, uncertainty_to_r
from .._io.writers import result_paths
from .._params import HapkeParams
from .._provenance import make_provenance
from .._run.pool import BlockPool
from .._run.progress import InversionSummary
from .._sample.maps import (
    check_sample_options,
    chunk_seed,
    quantile_field,
    result_maps,
    sample_fields,
    sample_layout,
)
from .._sample.program import QUANTILE_LEVELS
from .._sample.sample import CHUNK_BYTES, DEFAULT_INTEGRATION_STEPS
from .._shapes import refl_sigma_error
from .arguments import check_not_an_input
from .inputs import run_inputs
from .outputs import stream_to_outputs
from .records import recorded_command
from .stacks import check_stack, limits_in_radians, read_stack_block

__all__ = ["sample_file"]


def _check_sigma(refl_sigma, units: str, bands: int):
    """``refl_sigma`` in ``units`` -> (r [1/sr] scalar or per band, its JSON record)."""
    if units == "reff":  # its r would differ per observation (cos i)
        raise ValueError(
            "sample_file takes units 'r' or 'radf': with 'reff' the noise of r differs per "
            "observation (cos i); give the cubes and refl_sigma as r or radf"
        )
    if refl_sigma is None:
        raise ValueError("refl_sigma is required: the 1-sigma noise of the cubes' values")
    sigma = np.asarray(refl_sigma, float)
    if (
        sigma.ndim > 1
        or (sigma.ndim == 1 and sigma.shape[0] not in (1, bands))
        or not np.all(np.isfinite(sigma) & (sigma > 0.0))
    ):
        raise refl_sigma_error(refl_sigma, bands)
    if sigma.ndim == 1 and sigma.shape[0] == 1:
        sigma = sigma[0]
    record = float(sigma) if sigma.ndim == 0 else [float(v) for v in sigma]
    return uncertainty_to_r(sigma, units), record


def sample_file(
    cubes,
    out_path,
    *,
    geometry,
    params: HapkeParams,
    free,
    units: str,
    refl_sigma,
    prior=None,
    shared=(),
    num_samples: int = 1000,
    num_chains: int = 4,
    num_warmup: int = 300,
    seed: int = 0,
    min_ess: float = 400.0,
    max_rhat: float = 1.01,
    dtm=None,
    observation_limits_deg=None,
    min_observations=None,
    chunk_rows=None,
    overwrite=False,
    progress=None,
    command=None,
    workers=1,
    scheduler=None,
    resume=False,
) -> InversionSummary:
    """Sample the posterior of the free Hapke parameters per pixel and band over a stack
    of co-registered cube files, and write its quantile maps.

    The file front end of `lumaxlike.sample` (as `lumaxlike.fit_file` is of
    `lumaxlike.fit`; `lumaxlike.sample_dataarray` is its xarray twin): each cube of
    (rows, cols, bands) is one observation of every pixel; block by block of rows the
    cubes are stacked to (rows, cols, bands, observations) and sampled. Also the command
    ``lumaxlike sample``. Each block has its own random stream, from `seed` and its
    first pixel: the maps depend on the seed and the rows per block, not on where the
    blocks ran nor on an interruption.

    Maps written (GeoTIFF/ENVI: ``OUT`` and siblings ``OUT_<field>``, one file each;
    netCDF/zarr: one dataset), each with one band per spectral band: ``OUT`` the
    posterior median of w (field ``w_q500``); per free parameter ``<name>_q025``,
    ``<name>_q160``, ``<name>_q500``, ``<name>_q840``, ``<name>_q975`` (the quantiles at
    2.5, 16, 50, 84, 97.5 %, in the parameter's units: roughness in rad),
    ``mean_<name>``, ``rhat_<name>``, ``ess_<name>`` (bulk), ``ess_tail_<name>``;
    ``status`` (CONVERGED where the chains mixed, NOT_MIXED where not, MULTIMODAL
    where they missed a mode near a bound, else the warm-start fit's reason for not
    sampling), ``acceptance``, ``divergences`` and
    ``observations``. The record holds ``lumaxlike_sample_*`` keys (cubes, geometries,
    free, shared, prior, refl_sigma, num_samples, num_chains, num_warmup, seed, min_ess,
    max_rhat, ``median_maps`` ``{name: path}``).

    Args:
        cubes: reflectance cube files, one observation each, on one grid with the same
            bands; nodata pixels are missing observations.
        out_path: output path (``.tif``, ``.img``/``.hdr``, ``.nc``, ``.zarr``).
        geometry: one OBS raster per cube (see `lumaxlike.invert_file`), aligned with it.
        params: `lumaxlike.HapkeParams`: the fixed parameters and the free ones' start
            (of the warm-start fit).
        free: names of the sampled parameters, w among them (see `lumaxlike.sample`).
        units: what the cubes hold: ``"r"`` [1/sr] or ``"radf"`` (I/F = pi r).
        refl_sigma: 1-sigma Gaussian noise of the cubes' values in ``units``: a number,
            or one per band (required: it sets the posterior's width).
        prior: {name: (mean, sigma)}: scalar Gaussian priors on free parameters (their
            units), as in `lumaxlike.sample`; the others flat within their bounds.
        shared: names among `free` (not w) that take one value per pixel for all its
            bands (`lumaxlike.sample`'s ``shared``: each pixel's bands are one joint
            problem); their maps, and a pixel's status, acceptance and divergences,
            are the same in every band layer of the outputs (the file layout has one
            layer per band, as `lumaxlike.fit_file`'s with ``shared``).
        num_samples: draws kept per chain (`lumaxlike.sample`).
        num_chains: chains per problem, at least 2.
        num_warmup: adaptation transitions per chain (discarded).
        seed: the random seed; each block's stream comes from it and its first pixel.
        min_ess: a problem whose bulk or tail ESS is below this in any parameter is
            NOT_MIXED.
        max_rhat: a problem whose R-hat exceeds this in any parameter is NOT_MIXED.
        dtm: optional DTM on the grid for local normals (shared by all observations).
        observation_limits_deg: {angle: (min, max)} in degrees for "incidence",
            "emission", "phase": observations outside are left out.
        min_observations: valid observations a problem needs (default: free + 1).
        chunk_rows: rows per block; None picks blocks of about `lumaxlike.sample`'s
            chunk (64 MB of draws), at least one row.
        overwrite: as for `lumaxlike.invert_file` (so are ``progress``, ``command``,
            ``workers``, ``scheduler`` and ``resume``: ``resume=True`` continues a killed
            run from its finished blocks, and the maps are then those of an
            uninterrupted run).
        progress: progress bar on stderr (None: when stderr is a terminal).
        command: the command line recorded (None: the Python call).
        workers: processes of a local dask cluster running the blocks (1: here).
        scheduler: address of an existing dask.distributed scheduler, or None.
        resume: continue a killed run of these outputs from its journal.

    Returns:
        `InversionSummary` (pixels, bands, time, status counts, outputs).

    Raises:
        ValueError: naming the file or argument: misaligned cubes or rasters, a count of
            geometry rasters that differs from the cubes', a product normalised to a
            standard geometry, units ``"reff"``, a missing or bad refl_sigma, a prior
            map (not scalars), or an option `lumaxlike.sample` refuses, `shared` included
            (checked before any block is read).
        FileNotFoundError, FileExistsError, PermissionError: as `lumaxlike.invert_file`.
    """
    start = time.perf_counter()
    check_units(units)
    cubes = [Path(c) for c in cubes]
    geometries = list(geometry)
    if not cubes:
        raise ValueError("give at least one cube")
    if len(geometries) != len(cubes):
        raise ValueError(
            f"geometry gives {len(geometries)} rasters for {len(cubes)} cubes (one per cube, "
            "in order)"
        )
    if not isinstance(params, HapkeParams):
        raise ValueError(f"params must be a lumaxlike.HapkeParams, got {type(params).__name__}")
    free = (free,) if isinstance(free, str) else tuple(free)
    shared = (shared,) if isinstance(shared, str) else tuple(shared)
    check_file_priors(prior, free, shared, default_bounds())
    limits = limits_in_radians(observation_limits_deg)
    if chunk_rows is not None and (int(chunk_rows) != chunk_rows or chunk_rows < 1):
        raise ValueError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
    fields = sample_fields(free)
    inputs = run_inputs(cubes, dtm=dtm, geometries=geometries)
    check_not_an_input(out_path, fields, inputs, main=sample_layout(free).main)

    with rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_BYTES), contextlib.ExitStack() as stack:
        readers = [stack.enter_context(CubeReader(path)) for path in cubes]
        for path, reader in zip(cubes, readers):
            refuse_normalised(reader.located, "sample")
            check_unit_tag(reader, units, path)
        info = readers[0].info
        for reader in readers[1:]:
            check_aligned(info.grid, reader.info.grid, "cube")
        check_stack([reader.info for reader in readers])
        sigma_r, sigma_record = _check_sigma(refl_sigma, units, info.bands)
        n_obs, width = len(cubes), info.grid.width
        options = {
            "free": free,
            "refl_sigma": sigma_r,
            "prior": dict(prior or {}),
            "shared": shared,
            "num_samples": num_samples,
            "num_chains": num_chains,
            "num_warmup": num_warmup,
            "min_ess": min_ess,
            "max_rhat": max_rhat,
            "observation_limits": limits,
            "min_observations": min_observations,
        }
        check_sample_options(params, options, info.bands, n_obs)
        geometry_readers = [
            stack.enter_context(GeometryReader(g, info.grid, dtm)) for g in geometries
        ]
        per_pixel = (
            info.bands * int(num_chains) * (int(num_samples) + int(num_warmup)) * len(free) * 8
        )
        rows_per_block = (
            int(chunk_rows)
            if chunk_rows is not None
            else int(max(1, min(CHUNK_BYTES // per_pixel // width, info.grid.height)))
        )
        block_pixels = rows_per_block * width
        options["seed"] = int(seed)
        median = quantile_field("w", QUANTILE_LEVELS.index(0.5))
        settings = {
            "cubes": [str(p.absolute()) for p in cubes],
            "geometries": [
                str(Path(g).absolute()) if isinstance(g, (str, Path)) else None for g in geometries
            ],
            "free": list(free),
            "shared": list(shared),
            "prior": {name: [float(v) for v in pair] for name, pair in (prior or {}).items()},
            "refl_sigma": sigma_record,
            "num_samples": int(num_samples),
            "num_chains": int(num_chains),
            "num_warmup": int(num_warmup),
            "integration_steps": DEFAULT_INTEGRATION_STEPS,
            "seed": int(seed),
            "min_ess": float(min_ess),
            "max_rhat": float(max_rhat),
            "observation_limits_deg": {
                k: list(map(float, v)) for k, v in (observation_limits_deg or {}).items()
            },
            "min_observations": min_observations,
            # the record's param_* keys hold the warm start's values; the posterior's
            # medians are these maps
            "median_maps": {
                name: str(Path(result_paths(out_path, [field], main=median)[field]).absolute())
                for name, field in ((n, quantile_field(n, 2)) for n in free)
            },
        }
        provenance = make_provenance(
            params=[params] * info.bands,
            units=units,
            solver="numba" if params.h_function != "exact" else "jax",  # the warm start's
            tol=None,
            max_iter=None,
            refl_sigma=sigma_record if isinstance(sigma_record, float) else None,
            dtype=info.dtype,
            cube=None,
            geometry=None,
            dtm=dtm,
            command=recorded_command(
                command,
                "sample_file",
                [str(p) for p in cubes],
                out_path,
                params=params,
                free=free,
                **({"shared": shared} if shared else {}),
                units=units,
                refl_sigma=refl_sigma,
                seed=seed,
                workers=workers,
                scheduler=scheduler,
            ),
        )
        provenance = _with_settings(provenance, settings)

        def read(rows):
            block = read_stack_block(readers, geometry_readers, rows, units)
            return block + (params, options), {
                "first_pixel": rows.start * width,
                "pixels": block_pixels,
            }

        # the sampler's programs are slow to compile: XLA's banner about it is noise
        quiet = workers == 1 and scheduler is None  # compiled here, not in a worker
        with without_slow_compile_banner() if quiet else contextlib.nullcontext():
            run = stream_to_outputs(
                out_path,
                like=info,
                fields=fields,
                provenance=provenance,
                rows_per_block=rows_per_block,
                inputs=inputs,
                overwrite=overwrite,
                resume=resume,
                pool_factory=lambda: BlockPool(workers, scheduler, function=sample_file_block),
                read=read,
                progress=progress,
                description=f"sampling {Path(cubes[0]).name}",
                layout=sample_layout(free),
            )
    return InversionSummary(
        outputs=run.outputs,
        pixels=info.grid.height * width,
        bands=info.bands,
        seconds=time.perf_counter() - start,
        status_counts=run.status_counts,
        verb="sampled",
        resumed=run.resumed,
    )


def sample_file_block(
    refl, to_sun, to_sensor, normal, params, options, *, first_pixel: int, pixels: int
) -> dict[str, np.ndarray]:
    """The task of a block of `sample_file`: `lumaxlike.sample` on stacked observations.

    Args:
        refl: r [1/sr], ``(rows, cols, bands, observations)``.
        to_sun, to_sensor, normal: ``(rows, cols, observations, 3)``.
        params: `lumaxlike.HapkeParams`.
        options: keyword arguments of `lumaxlike.sample` (free, shared, refl_sigma, ...;
            ``seed`` is the run's, made the block's by `chunk_seed`).
        first_pixel: linear index of the block's first pixel in the image.
        pixels: pixels of a full block: a shorter (last) block is padded with pixels
            without observations (not sampled, then dropped), so that every block runs
            the same compiled program.

    Returns:
        ``{field: (rows, cols, bands)}`` of the maps of `sample_fields`; the per-pixel
        maps of a joint problem (shared parameters, status, acceptance, divergences)
        repeated in every band layer.
    """
    from .._sample.sample import sample

    options = dict(options)
    seed = chunk_seed(options.pop("seed", 0), first_pixel)
    rows, cols, bands, n_obs = refl.shape
    n = rows * cols
    flat = [refl.reshape(n, bands, n_obs)] + [
        v.reshape(n, n_obs, 3) for v in (to_sun, to_sensor, normal)
    ]
    if n < pixels:  # padding: no finite observation (NONFINITE_INPUT, not sampled)
        flat[0] = np.concatenate([flat[0], np.full((pixels - n, bands, n_obs), np.nan)])
        for i in (1, 2, 3):
            flat[i] = np.concatenate(
                [flat[i], np.broadcast_to(flat[i][:1], (pixels - n, n_obs, 3))]
            )
    flat_refl, flat_to_sun, flat_to_sensor, flat_normal = flat
    result = sample(
        flat_refl, flat_to_sun, flat_to_sensor, flat_normal, params, seed=seed, **options
    )
    maps = {}
    for field, values in result_maps(result, result.free).items():
        values = values[:n].reshape((rows, cols) + values.shape[1:])
        per_pixel = values.ndim == 2  # a joint problem's: one value for all bands
        maps[field] = np.ascontiguousarray(
            np.broadcast_to(values[..., None] if per_pixel else values, (rows, cols, bands))
        )
    return maps


def _with_settings(provenance, settings):
    """The record with the ``lumaxlike_sample_*`` keys."""
    import dataclasses

    return dataclasses.replace(provenance, sample_settings=settings)
