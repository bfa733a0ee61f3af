"""File-to-file inversion, streamed by blocks of rows so memory grows with the block."""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import rasterio

from .._inverse.invert import default_chunk_pixels
from .._inverse.status import Status
from .._io.geometry_rasters import GeometryReader
from .._io.product_cube import ProductCube, product_geometry, product_options, recorded_geometry
from .._io.raster import GDAL_CACHE_BYTES, CubeInfo
from .._io.units import check_units
from .._io.writers import RESULT_FIELDS, ResultWriter
from .._provenance import make_provenance, python_call
from .._run.journal import Journal, run_settings
from .._run.pool import BlockPool
from .._run.progress import InversionSummary, progress_bar
from .._run.stream import run_blocks
from .._run.tasks import SolverOptions, check_solver, per_band_params
from .common import check_not_an_input, cube_block_reader, geometry_paths, parallel_call

__all__ = ["InversionSummary", "default_chunk_rows", "invert_file"]

BLOCK_TARGET_BYTES = 32 * 2**20
"""Default block size: rows such that the block's reflectance in float64 is about this [bytes]."""


def default_chunk_rows(info: CubeInfo) -> int:
    """Rows per block for a cube: about :data:`BLOCK_TARGET_BYTES` of float64 reflectance.

    Rounded down to a multiple of the file's internal block height when larger than it,
    so windows do not re-read the file's blocks.
    """
    row_bytes = info.grid.width * info.bands * 8
    rows = max(1, BLOCK_TARGET_BYTES // row_bytes)
    if rows > info.block_height:
        rows -= rows % info.block_height
    return int(min(rows, info.grid.height))


def invert_file(
    cube_path,
    out_path,
    *,
    geometry=None,
    dtm=None,
    params,
    solver,
    units,
    chunk_rows=None,
    overwrite=False,
    progress=None,
    sigma=None,
    workers=1,
    max_iter=None,
    tol=None,
    command=None,
    surface="auto",
    scheduler=None,
    correction_undone=False,
    reff_incidence=None,
    solar_spectrum=None,
    solar_distance=None,
    wavelengths_from=None,
    thermal_bands="keep",
    resume=False,
) -> InversionSummary:
    """Invert a reflectance cube file for single-scattering albedo maps, block by block.

    Reads ``chunk_rows`` rows of the cube and of the geometry at a time, converts them to
    r [1/sr], inverts them with `lumaxlike.invert` and writes them into temporary
    output files, which replace the outputs only at the end (see
    `lumaxlike._io.writers` for the files written). Peak memory grows with the block
    size, not the image. NaN, nodata or out-of-range pixels become status codes in the
    status map, never errors.

    Args:
        cube_path: reflectance cube, any raster GDAL opens (GeoTIFF, ENVI, ...), bands
            = spectral bands; nodata pixels are skipped (status NONFINITE_INPUT).
        out_path: output path; ``.tif``/``.tiff`` GeoTIFF, ``.img``/``.envi``/``.hdr``
            ENVI, ``.nc`` netCDF, ``.zarr`` zarr.
        geometry: a geometry backplane raster whose band descriptions name its bands
            (M3, AVIRIS-NG/AVIRIS-3/EMIT OBS, CRISM DDR, ISIS ``phocube``; see
            `lumaxlike.OBS_BAND_NAMES`), or a mapping of roles (``to_sun_zenith``,
            ``to_sun_azimuth``, ``to_sensor_zenith``, ``to_sensor_azimuth``, or
            ``incidence``, ``emission``, ``phase``, plus optionally ``facet_slope``,
            ``facet_aspect``, ``local_incidence``, ``local_emission``, ``facet_cos_i``)
            to single-band raster paths or ``(rows, cols)`` arrays; angles in degrees,
            azimuths clockwise from north (see `lumaxlike._io.backplanes`). Rasters
            must be aligned with the cube. None (the default) for a product normalised
            to a standard geometry (M3 L2 ``RFL``: i = 30, e = 0, g = 30 deg; CRISM
            MTRDR / TER), which is then inverted flat at that geometry; such a product
            with a geometry is refused unless ``correction_undone``. See
            docs/mission-products.md.
        dtm: optional DTM path (heights [m], projected CRS, same grid) for local normals;
            None for none.
        surface: which angles to use when the geometry carries both ellipsoid and
            local-surface ones: ``"auto"`` (default: the local surface when given, else
            the ellipsoid), ``"local"`` (required) or ``"ellipsoid"`` (local-surface bands
            left out, and recorded as such). The choice made is recorded in the outputs
            (``lumaxlike_geometry_layout``).
        params: `lumaxlike.HapkeParams` or `lumaxlike.PhotometricFunction`
            (the w map then holds its albedo A, solved in closed form), or a sequence of
            one per band.
        solver: ``"jax"`` or ``"numba"``.
        units: what the cube holds: ``"r"`` (1/sr), ``"radf"`` (pi r = I/F), ``"reff"``
            (pi r / cos i) or ``"radiance"`` [W m^-2 um^-1 sr^-1], converted to I/F =
            pi L d^2 / F; required, never guessed. A cube whose label or values
            contradict it is refused before any work.
        correction_undone: the product is normalised (M3 L2, CRISM MTRDR/TER) but the
            user has undone that normalisation: invert it at the ``geometry`` given.
        reff_incidence: for ``units="reff"``: the incidence the cube was divided by,
            ``"local"`` (facet; the default) or ``"areoid"`` (ellipsoid, as CRISM's
            Lambert correction; required for CRISM cubes). Recorded.
        solar_spectrum: for ``"radiance"``: solar spectrum file (wavelength, irradiance
            at 1 au [W m^-2 um^-1]; the M3 archive's table works), None for ASTM G173-03
            (pvlib). Resampled to the bands; recorded.
        solar_distance: for ``"radiance"``: the sun's distance [au]; None reads the
            label's ``SOLAR_DISTANCE``.
        wavelengths_from: wavelength file replacing the cube's own (CRISM CDR ``WA``, or
            one wavelength per line).
        thermal_bands: lunar bands beyond 2.5 um (thermal emission): ``"keep"`` (default;
            a warning names them) or ``"exclude"`` (left out of the run and outputs).
        chunk_rows: rows per block; None picks about 32 MiB of reflectance per block.
        overwrite: replace existing outputs (otherwise ``FileExistsError`` before any work).
        progress: show a tqdm progress bar on stderr: True, False, or None for "when
            stderr is a terminal".
        sigma: standard uncertainty of the cube's values, in ``units``; when given the
            sigma map of w is written too.
        workers: processes inverting blocks in parallel: 1 = in this process, more = a
            dask.distributed ``LocalCluster`` of that many worker processes (each with
            ``cpu_count // workers`` numba threads). The maps do not depend on it.
        scheduler: address of an existing dask.distributed cluster's scheduler
            (``"tcp://host:8786"``) whose workers invert the blocks (they need lumaxlike,
            this version); ``workers`` is then ignored. This process still reads the cube
            and writes every output, so the outputs are published as atomically as ever.
            A worker lost mid-run has its blocks run again elsewhere (identical maps);
            losing the scheduler fails the run (``ClusterError``), publishing nothing.
        max_iter: solver setting passed to `lumaxlike.invert` (None = default).
        tol: solver setting passed to `lumaxlike.invert` (None = default).
        command: the command line to record in the outputs' provenance (see
            `lumaxlike.read_provenance`); None records this Python call.
        resume: continue the run that a killed process (SIGKILL, power, a lost node)
            left for these outputs, from its finished blocks (see "Resumable runs" in
            the design page): the maps are bit-identical to an uninterrupted run's, and
            the provenance records ``resumed``. Refused with a ``ResumeRefusedError`` (a
            ValueError) naming what changed when the inputs or settings differ from
            that run's; with no such run it starts afresh.

    Returns:
        `InversionSummary` with output paths, throughput and status counts.

    Raises:
        FileNotFoundError: an input file does not exist.
        FileExistsError: an output exists and ``overwrite`` is false.
        NotADirectoryError, PermissionError: the output folder is unusable.
        ClusterError: (a RuntimeError) the dask cluster failed mid-run; nothing published.
        ValueError: unreadable or misaligned input, bad argument (message names it),
            an unreachable ``scheduler`` or one whose workers lack lumaxlike,
            geometry bands that make no geometry (the message lists the bands found and
            the layouts expected), local-surface bands that cannot be used.
    """
    start = time.perf_counter()
    check_solver(solver)
    if units != "radiance":
        check_units(units)
    elif sigma is not None:
        raise ValueError(
            "sigma with units='radiance' is not supported: give the cube's "
            "uncertainty as I/F (convert first)"
        )
    if sigma is not None and not (
        isinstance(sigma, (int, float)) and np.isfinite(sigma) and sigma > 0
    ):
        raise ValueError(f"sigma must be a positive number, got {sigma!r}")
    if chunk_rows is not None and (int(chunk_rows) != chunk_rows or chunk_rows < 1):
        raise ValueError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
    fields = [f for f in RESULT_FIELDS if f != "sigma" or sigma is not None]
    check_not_an_input(out_path, fields, [cube_path, dtm, *geometry_paths(geometry)])

    with (
        rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_BYTES),
        ProductCube(
            cube_path,
            units,
            **product_options(solar_spectrum, solar_distance, wavelengths_from, thermal_bands),
        ) as cube,
    ):
        info = cube.info
        geometry_used, incidence, product = product_geometry(
            cube,
            cube_path,
            geometry,
            dtm,
            units=units,
            reff_incidence=reff_incidence,
            correction_undone=correction_undone,
        )
        band_params = per_band_params(params, info.bands)
        rows_per_block = int(chunk_rows) if chunk_rows is not None else default_chunk_rows(info)
        # one JAX chunk shape for every block (the last one is padded): compiles once
        chunk_size = min(rows_per_block * info.grid.width, default_chunk_pixels(info.bands))
        options = SolverOptions(solver, max_iter=max_iter, tol=tol, chunk_size=chunk_size)
        with GeometryReader(geometry_used, info.grid, dtm, surface=surface) as geometry_reader:
            provenance = make_provenance(
                params=band_params,
                units=units,
                solver=solver,
                tol=tol,
                max_iter=max_iter,
                refl_sigma=sigma,
                dtype=info.dtype,
                cube=cube_path,
                geometry=recorded_geometry(geometry_used, product),
                dtm=dtm,
                geometry_layout=geometry_reader.record(),
                product=product,
                command=command
                or python_call(
                    "invert_file",
                    cube_path,
                    out_path,
                    geometry=geometry,
                    dtm=dtm,
                    params=params,
                    solver=solver,
                    units=units,
                    sigma=sigma,
                    max_iter=max_iter,
                    tol=tol,
                    surface=surface,
                    **parallel_call(workers, scheduler),
                    **_product_call(
                        correction_undone,
                        reff_incidence,
                        solar_spectrum,
                        solar_distance,
                        wavelengths_from,
                        thermal_bands,
                    ),
                ),
            )
            inputs = [
                cube_path,
                dtm,
                *geometry_paths(geometry_used),
                solar_spectrum,
                wavelengths_from,
            ]
            journal = Journal(
                out_path,
                inputs=inputs,
                resume=resume,
                fields=fields,
                settings=run_settings(provenance, out_path, fields, rows_per_block),
            )
            writer = ResultWriter(
                out_path,
                like=info,
                fields=fields,
                overwrite=overwrite,
                chunk_rows=rows_per_block,
                provenance=provenance,
            )
            counts, resumed = run_blocks(
                writer,
                lambda: BlockPool(workers, scheduler),
                cube_block_reader(
                    cube,
                    geometry_reader,
                    units=cube.units,
                    sigma=sigma,
                    params=band_params,
                    options=options,
                    reff_incidence=incidence,
                ),
                rows_per_block=rows_per_block,
                journal=journal,
                bar_factory=lambda: progress_bar(
                    progress,
                    info.grid.height * info.grid.width,
                    f"inverting {Path(cube_path).name}",
                ),
                on_start=cube.tell,  # every check passed: the run starts
                bad_bands=cube.bad_bands,
            )
    return InversionSummary(
        outputs=dict(writer.paths),
        pixels=info.grid.height * info.grid.width,
        bands=info.bands,
        seconds=time.perf_counter() - start,
        status_counts={member.name: int(counts[member]) for member in Status},
        resumed=resumed,
    )


def _product_call(
    correction_undone,
    reff_incidence,
    solar_spectrum,
    solar_distance,
    wavelengths_from,
    thermal_bands,
) -> dict:
    """The mission-product arguments for the recorded call, when not the defaults."""
    given = {
        "correction_undone": (correction_undone, False),
        "reff_incidence": (reff_incidence, None),
        "solar_spectrum": (solar_spectrum, None),
        "solar_distance": (solar_distance, None),
        "wavelengths_from": (wavelengths_from, None),
        "thermal_bands": (thermal_bands, "keep"),
    }
    return {name: value for name, (value, default) in given.items() if value != default}
