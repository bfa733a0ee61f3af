"""File-to-file inversion, streamed by blocks of rows so memory grows with the block."""

from __future__ import annotations

import time
from pathlib import Path

from .._io.geometry_rasters import GeometryReader
from .._io.writers import RESULT_FIELDS
from .._run.pool import BlockPool
from .._run.progress import InversionSummary
from .._run.tasks import per_band_params
from .arguments import check_not_an_input, check_run_arguments
from .blocks import block_setup
from .inputs import run_inputs
from .outputs import stream_to_outputs
from .products import ProductArguments
from .records import recorded_command

__all__ = ["InversionSummary", "invert_file"]


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
    check_run_arguments(solver, units, sigma, chunk_rows, radiance=True)
    fields = [f for f in RESULT_FIELDS if f != "sigma" or sigma is not None]
    product = ProductArguments(
        correction_undone,
        reff_incidence,
        solar_spectrum,
        solar_distance,
        wavelengths_from,
        thermal_bands,
    )
    inputs = run_inputs([cube_path], dtm=dtm, geometries=[geometry], product=product)
    check_not_an_input(out_path, fields, inputs)

    with block_setup(
        cube_path,
        units,
        geometry,
        dtm,
        product,
        chunk_rows=chunk_rows,
        solver=solver,
        max_iter=max_iter,
        tol=tol,
    ) as setup:
        opened, cube, info = setup.opened, setup.cube, setup.info
        band_params = per_band_params(params, info.bands)
        with GeometryReader(opened.geometry, info.grid, dtm, surface=surface) as geometry_reader:
            provenance = setup.provenance(
                geometry_reader,
                params=band_params,
                units=units,
                solver=solver,
                tol=tol,
                max_iter=max_iter,
                refl_sigma=sigma,
                command=recorded_command(
                    command,
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
                    workers=workers,
                    scheduler=scheduler,
                    product=product,
                ),
            )
            run = stream_to_outputs(
                out_path,
                like=info,
                fields=fields,
                provenance=provenance,
                rows_per_block=setup.rows_per_block,
                inputs=inputs,
                overwrite=overwrite,
                resume=resume,
                pool_factory=lambda: BlockPool(workers, scheduler),
                read=setup.block_reader(geometry_reader, sigma=sigma, params=band_params),
                progress=progress,
                description=f"inverting {Path(cube_path).name}",
                on_start=cube.tell,  # every check passed: the run starts
                bad_bands=cube.bad_bands,
            )
    return InversionSummary(
        outputs=run.outputs,
        pixels=info.grid.height * info.grid.width,
        bands=info.bands,
        seconds=time.perf_counter() - start,
        status_counts=run.status_counts,
        resumed=run.resumed,
    )
