"""File-to-file inversion, streamed by blocks of rows so memory grows with the block: the
file front end of the `INVERT` operation."""

from __future__ import annotations

from .._declared_options import refuse_unknown, takes_options
from .._inverse.options import InvertSettings
from .._operations.blocks import per_band_params
from .._operations.invert import INVERT
from .._options import (
    RUN_AND_PRODUCT,
    ProductOptions,
    RunOptions,
    SolverOptions,
    front_end_options,
)
from .._run.progress import InversionSummary
from .cube_run import BlockPlan, CubeInputs, run_on_cube
from .spectral import same_pass

__all__ = ["InversionSummary", "invert_file"]


@takes_options(InvertSettings)
def invert_file(
    cube_path,
    out_path,
    *,
    geometry=None,
    dtm=None,
    params,
    solver: str | SolverOptions,
    units,
    command=None,
    surface="auto",
    parameters=None,
    run: RunOptions | None = None,
    product: ProductOptions | None = None,
    settings: InvertSettings | None = None,
    **keywords,
) -> InversionSummary:
    """Invert a reflectance cube file for single-scattering albedo maps, block by block.

    Reads ``chunk_rows`` rows of the cube and geometry at a time as r [1/sr], inverts them
    with `lumaxlike.invert` and writes temporary outputs that replace the outputs only at
    the end (`lumaxlike._io.write.writers`). Peak memory grows with the block, not the image.
    NaN, nodata or out-of-range pixels get status codes, never errors.

    Args:
        cube_path: reflectance cube, any raster GDAL opens (GeoTIFF, ENVI, ...), bands
            = spectral bands; nodata pixels are skipped (status NONFINITE_INPUT).
        out_path: output path; ``.tif``/``.tiff`` GeoTIFF, ``.img``/``.envi``/``.hdr``
            ENVI, ``.nc`` netCDF, ``.zarr`` zarr.
        geometry: a backplane raster whose band descriptions name its bands (M3,
            AVIRIS-NG/AVIRIS-3/EMIT OBS, CRISM DDR, ISIS ``phocube``;
            `lumaxlike.OBS_BAND_NAMES`), or a mapping of roles (``incidence``,
            ``emission``, ``phase``, ``to_sun_zenith``, ...; `lumaxlike._io.read.backplanes`)
            to single-band rasters or ``(rows, cols)`` arrays, angles in degrees, aligned
            with the cube. None for a product normalised to a standard geometry (M3 L2,
            CRISM MTRDR/TER), inverted flat at it (docs/mission-products.md).
        dtm: optional DTM path (heights [m], projected CRS, same grid) for local normals.
        surface: with both ellipsoid and local-surface angles: ``"auto"`` (the local
            surface when given), ``"local"`` (required) or ``"ellipsoid"``; recorded.
        params: `lumaxlike.HapkeParams` or `lumaxlike.PhotometricFunction` (the w map then
            holds its albedo A, solved in closed form), or a sequence of one per band.
        solver: ``"jax"`` or ``"numba"``, or a `lumaxlike.SolverOptions` (whose
            ``max_iter`` and ``tol`` the settings' may give instead).
        units: what the cube holds: ``"r"`` (1/sr), ``"radf"`` (pi r = I/F), ``"reff"``
            (pi r / cos i) or ``"radiance"`` [W m^-2 um^-1 sr^-1], converted to I/F =
            pi L d^2 / F; required, never guessed. A cube whose label or values
            contradict it is refused before any work.
        settings: the inversion's options as one `lumaxlike.InvertSettings` (None: the
            defaults).
        **keywords: the options of `lumaxlike.InvertSettings` by name (``refl_sigma``:
            the standard uncertainty of the cube's values, in ``units``, which writes the
            sigma map of w too; ``max_iter``; ``tol``; ``sigma``, ``refl_sigma``'s old
            name, still taken with a DeprecationWarning). The fields of ``run`` and
            ``product`` are still taken as keywords, with a DeprecationWarning.
        parameters: names of `lumaxlike.SPECTRAL_PRODUCTS` made from each block's w in
            the same pass: ``OUT_<name>`` maps (docs/spectral-parameters.md).
        command: the command line to record in the outputs' provenance (see
            `lumaxlike.read_provenance`); None records this Python call.
        run: how the run is carried out, a `lumaxlike.RunOptions` (``workers``,
            ``scheduler``, ``chunk_rows``, ``resume``, ``overwrite``, ``progress``).
        product: how a mission product is read, a `lumaxlike.ProductOptions`
            (``correction_undone``, ``reff_incidence``, ``solar_spectrum``,
            ``solar_distance``, ``wavelengths_from``, ``thermal_bands``).

    Returns:
        `InversionSummary` with output paths, throughput and status counts.

    Raises:
        FileNotFoundError, FileExistsError, NotADirectoryError, PermissionError: a missing
            input file, an existing output (``overwrite`` false), an unusable output folder.
        ClusterError: (a RuntimeError) the dask cluster failed mid-run; nothing published.
        ResumeRefusedError: (a ValueError) resuming with other inputs or settings.
        ValueError: unreadable or misaligned input, bad argument (message names it),
            an unreachable ``scheduler`` or one whose workers lack lumaxlike,
            geometry bands that make no geometry (the message lists the bands found and
            the layouts expected), local-surface bands that cannot be used.
    """
    settings = InvertSettings.merged(settings, keywords)
    refuse_unknown("invert_file", keywords, RUN_AND_PRODUCT)
    same = same_pass(INVERT, parameters, "w", "w")
    keywords.update(settings.solver_keywords())
    run, product, options = front_end_options(run, product, solver, keywords, "invert_file")
    sigma = settings.refl_sigma
    return run_on_cube(
        same.operation,
        CubeInputs(cube_path, out_path, units, geometry, dtm, surface, sigma, product),
        run=run,
        solver=options,
        plan=same.plan(lambda setup: _plan(setup, params, settings)),
        fields=same.operation.written(sigma=sigma),
        layout=same.operation.layout(units),
        call=same.call(geometry=geometry, dtm=dtm, params=params, units=units, refl_sigma=sigma),
        command=command,
    )


def _plan(setup, params, settings: InvertSettings) -> BlockPlan:
    """One model per band of the opened cube, and the settings."""
    band_params = per_band_params(setup.made(params), setup.info.bands)
    extra = {"settings": settings}
    return BlockPlan(params=band_params, recorded_params=band_params, extra=lambda rows: extra)
