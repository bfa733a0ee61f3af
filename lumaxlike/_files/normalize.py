"""File-to-file photometric normalisation, streamed by blocks of rows like `invert_file`.

Reuses the inversion's streaming, process pool, atomic writer and provenance: only the
work per block (`lumaxlike._run.normalize_task.normalize_block`, shared with
`normalize_dataarray`) and the maps written differ. Outputs: ``OUT`` the
normalised cube (in the input's units, at the standard geometry), ``OUT_status`` the
inversion's status, and with ``sigma`` ``OUT_sigma`` (see :mod:`lumaxlike._io.writers`).
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from .._io.geometry_rasters import GeometryReader
from .._io.raster import CubeReader, check_aligned
from .._io.writers import FieldLayout
from .._normalize.standard import DEFAULT_STANDARD, standard_angles
from .._run.normalize_task import NORMALIZATION_FIELDS, normalization_attrs, normalize_block
from .._run.pool import BlockPool
from .._run.progress import InversionSummary
from .._run.tasks import per_band_params
from .arguments import check_not_an_input, check_run_arguments
from .blocks import block_setup
from .inputs import run_inputs
from .outputs import stream_to_outputs
from .products import ProductArguments
from .records import recorded_command

__all__ = ["normalization_layout", "normalize_file"]


def normalization_layout(units: str) -> FieldLayout:
    """The maps a normalisation writes (`ResultWriter`): the normalised cube at the output
    path, its status and sigma beside it."""
    return FieldLayout(
        main="reflectance",
        attrs=normalization_attrs(units),
        band_names={},
        integer={"status": np.int8},
    )


class _MapReader:
    """Per-pixel parameter rasters on the cube's grid, read by rows (roughness: degrees)."""

    def __init__(self, param_maps: Mapping, cube_info):
        self._readers = {}
        try:
            for name, path in param_maps.items():
                reader = CubeReader(path)
                self._readers[name] = reader
                check_aligned(cube_info.grid, reader.info.grid, f"param_maps[{name!r}]")
                if reader.info.bands not in (1, cube_info.bands):
                    raise ValueError(
                        f"param_maps[{name!r}] raster {path} has {reader.info.bands} bands; "
                        f"expected 1 (per pixel) or the cube's {cube_info.bands} (per band)"
                    )
        except BaseException:
            self.close()
            raise

    def read(self, rows: slice) -> dict:
        maps = {}
        for name, reader in self._readers.items():
            values = reader.read(rows).astype(np.float64)
            values = values[..., 0] if reader.info.bands == 1 else values
            maps[name] = np.radians(values) if name == "roughness" else values
        return {"param_maps": maps}

    def close(self) -> None:
        for reader in self._readers.values():
            reader.close()


def normalize_file(
    cube_path,
    out_path,
    *,
    geometry=None,
    dtm=None,
    surface="auto",
    params,
    solver,
    units,
    standard=DEFAULT_STANDARD,
    param_maps=None,
    chunk_rows=None,
    overwrite=False,
    progress=None,
    sigma=None,
    workers=1,
    scheduler=None,
    max_iter=None,
    tol=None,
    command=None,
    correction_undone=False,
    reff_incidence=None,
    solar_spectrum=None,
    solar_distance=None,
    wavelengths_from=None,
    thermal_bands="keep",
    resume=False,
) -> InversionSummary:
    """Photometric normalisation of a reflectance cube file, block by block.

    Each block is read, converted to r, normalised with `lumaxlike.normalize` and
    written to temporary files that replace the outputs only when all are written, as
    `lumaxlike.invert_file` does (same inputs, options, atomic writes and record).

    Args:
        cube_path: as in `lumaxlike.invert_file` (so are ``geometry``, ``dtm``,
            ``solver``, ``units``, ``chunk_rows``, ``overwrite``, ``progress``,
            ``workers``, ``max_iter``, ``tol``, ``command``, ``resume``, ``correction_undone``,
            ``reff_incidence``, ``solar_spectrum``, ``solar_distance``,
            ``wavelengths_from`` and ``thermal_bands``); a product already normalised,
            such as M3 L2, is read at its standard geometry; radiance
            (``units="radiance"``) is converted to I/F as `invert_file` does; bad bands
            (``bbl`` = 0) are not solved: NaN with status ``BAD_BAND``.
        out_path: output; ``OUT`` holds the normalised cube in ``units`` (REFF with the
            standard incidence; I/F for radiance), ``OUT_status`` the status and, with
            ``sigma``, ``OUT_sigma`` its uncertainty (netCDF/zarr: variables reflectance,
            status, sigma).
        params: `lumaxlike.HapkeParams`, or a sequence of one per band.
        standard: (incidence, emission, phase) [rad] of the standard geometry.
        param_maps: ``{HapkeParams field: raster path}``: rasters on the cube's grid with
            1 band (per pixel) or one per cube band, replacing that field (roughness in
            degrees, the others in their units); NaN/nodata makes the pixel NONFINITE_INPUT.
        sigma: standard uncertainty of the cube's values in ``units``; writes OUT_sigma.

    Returns:
        `InversionSummary` (``verb`` "normalised").
    """
    start = time.perf_counter()
    check_run_arguments(solver, units, sigma, chunk_rows, radiance=True)
    standard = standard_angles(standard)
    if param_maps is not None and not isinstance(param_maps, Mapping):
        raise ValueError(
            f"param_maps must be a mapping of HapkeParams fields to raster paths, got "
            f"{type(param_maps).__name__}"
        )
    param_maps = dict(param_maps or {})
    fields = [f for f in NORMALIZATION_FIELDS if f != "sigma" or sigma is not None]
    product = ProductArguments(
        correction_undone,
        reff_incidence,
        solar_spectrum,
        solar_distance,
        wavelengths_from,
        thermal_bands,
    )
    inputs = run_inputs(
        [cube_path], dtm=dtm, geometries=[geometry], product=product, extra=param_maps.values()
    )
    check_not_an_input(out_path, fields, inputs, main="reflectance")

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
        maps = _MapReader(param_maps, info)
        try:
            with GeometryReader(
                opened.geometry, info.grid, dtm, surface=surface
            ) as geometry_reader:
                provenance = setup.provenance(
                    geometry_reader,
                    params=band_params,
                    units=units,
                    solver=solver,
                    tol=tol,
                    max_iter=max_iter,
                    refl_sigma=sigma,
                    standard=standard,
                    param_maps=param_maps or None,
                    command=recorded_command(
                        command,
                        "normalize_file",
                        cube_path,
                        out_path,
                        geometry=geometry,
                        dtm=dtm,
                        surface=surface,
                        params=params,
                        solver=solver,
                        units=units,
                        standard=standard,
                        param_maps=param_maps or None,
                        sigma=sigma,
                        max_iter=max_iter,
                        tol=tol,
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
                    pool_factory=lambda: BlockPool(workers, scheduler, function=normalize_block),
                    read=setup.block_reader(
                        geometry_reader,
                        sigma=sigma,
                        params=band_params,
                        extra=lambda rows: {
                            "standard": standard,
                            "units": cube.units,
                            **maps.read(rows),
                        },
                    ),
                    progress=progress,
                    description=f"normalising {Path(cube_path).name}",
                    layout=normalization_layout(cube.units),
                    on_start=cube.tell,  # every check passed: the run starts
                    bad_bands=cube.bad_bands,
                )
        finally:
            maps.close()
    return InversionSummary(
        outputs=run.outputs,
        pixels=info.grid.height * info.grid.width,
        bands=info.bands,
        seconds=time.perf_counter() - start,
        status_counts=run.status_counts,
        verb="normalised",
        resumed=run.resumed,
    )
