"""File-to-file photometric normalisation, streamed by blocks of rows like `invert_file`:
the file front end of the `NORMALIZE` operation. Outputs: ``OUT`` the normalised cube (in
the input's units, at the standard geometry), ``OUT_status`` the inversion's status, and
with ``sigma`` ``OUT_sigma`` (see :mod:`lumaxlike._io.write.writers`).
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping

import numpy as np

from .._declared_options import refuse_unknown, takes_options
from .._io.read.raster import CubeReader, check_aligned
from .._normalize.options import NormalizeSettings
from .._operations.blocks import per_band_params
from .._operations.normalize import NORMALIZE
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

__all__ = ["normalize_file"]


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


@takes_options(NormalizeSettings)
def normalize_file(
    cube_path,
    out_path,
    *,
    geometry=None,
    dtm=None,
    surface="auto",
    params,
    solver: str | SolverOptions,
    units,
    param_maps=None,
    command=None,
    parameters=None,
    run: RunOptions | None = None,
    product: ProductOptions | None = None,
    settings: NormalizeSettings | None = None,
    **keywords,
) -> InversionSummary:
    """Photometric normalisation of a reflectance cube file, block by block.

    Each block is read, converted to r, normalised with `lumaxlike.normalize` and
    written to temporary files that replace the outputs only when all are written, as
    `lumaxlike.invert_file` does (same inputs, options, atomic writes and record).

    Args:
        cube_path: as in `lumaxlike.invert_file` (so are ``geometry``, ``dtm``,
            ``surface``, ``solver``, ``units``, ``command``, the run's options ``run``
            and the product's ``product``, each also by its fields' names); a product
            already normalised,
            such as M3 L2, is read at its standard geometry; radiance
            (``units="radiance"``) is converted to I/F as `invert_file` does; bad bands
            (``bbl`` = 0) are not solved: NaN with status ``BAD_BAND``.
        out_path: output; ``OUT`` holds the normalised cube in ``units`` (REFF with the
            standard incidence; I/F for radiance), ``OUT_status`` the status and, with
            ``sigma``, ``OUT_sigma`` its uncertainty (netCDF/zarr: variables reflectance,
            status, sigma).
        params: `lumaxlike.HapkeParams`, or a sequence of one per band.
        param_maps: ``{HapkeParams field: raster path}``: rasters on the cube's grid with
            1 band (per pixel) or one per cube band, replacing that field (roughness in
            degrees, the others in their units); NaN/nodata makes the pixel NONFINITE_INPUT.
        parameters: spectral products of each block's normalised reflectance (as
            written), as `invert_file`'s of w.
        settings: the normalisation's options as one `lumaxlike.NormalizeSettings`
            (None: the defaults).
        **keywords: the options of `lumaxlike.NormalizeSettings` by name (``standard``
            [rad]; ``refl_sigma``, the cube's standard uncertainty in ``units``, which
            writes OUT_sigma; ``max_iter``; ``tol``; ``sigma``, ``refl_sigma``'s old
            name, with a DeprecationWarning). The fields of ``run`` and ``product``
            are still taken as keywords, with a DeprecationWarning.

    Returns:
        `InversionSummary` (``verb`` "normalised").
    """
    settings = NormalizeSettings.merged(settings, keywords)
    refuse_unknown("normalize_file", keywords, RUN_AND_PRODUCT)
    same = same_pass(NORMALIZE, parameters, "reflectance", "normalized")
    keywords.update(settings.solver_keywords())
    run, product, options = front_end_options(run, product, solver, keywords, "normalize_file")
    standard, sigma = settings.standard, settings.refl_sigma
    if param_maps is not None and not isinstance(param_maps, Mapping):
        raise ValueError(
            f"param_maps must be a mapping of HapkeParams fields to raster paths, got "
            f"{type(param_maps).__name__}"
        )
    param_maps = dict(param_maps or {})
    files = tuple(param_maps.values())
    inputs = CubeInputs(cube_path, out_path, units, geometry, dtm, surface, sigma, product, files)
    with contextlib.ExitStack() as stack:
        return run_on_cube(
            same.operation,
            inputs,
            run=run,
            solver=options,
            plan=same.plan(lambda setup: _plan(setup, params, settings, param_maps, stack)),
            fields=same.operation.written(sigma=sigma),
            layout=same.operation.layout("radf" if units == "radiance" else units),  # I/F
            call=same.call(
                geometry=geometry,
                dtm=dtm,
                params=params,
                units=units,
                standard=standard,
                param_maps=param_maps or None,
                refl_sigma=sigma,
            ),
            command=command,
        )


def _plan(setup, params, settings, param_maps, stack) -> BlockPlan:
    """One model per band, the settings (the standard geometry), the units and the
    parameter maps' rows; the map readers closed with ``stack``."""
    band_params = per_band_params(setup.made(params), setup.info.bands)
    maps = stack.enter_context(contextlib.closing(_MapReader(param_maps, setup.info)))
    units = setup.cube.units
    return BlockPlan(
        params=band_params,
        recorded_params=band_params,
        extra=lambda rows: {"settings": settings, "units": units, **maps.read(rows)},
        record={"standard": settings.standard, "param_maps": param_maps or None},
    )
