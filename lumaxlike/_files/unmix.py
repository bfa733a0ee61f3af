"""File-to-file unmixing: a reflectance cube to mass-fraction maps, streamed by blocks of rows.

The same pipeline as :func:`lumaxlike._files.invert.invert_file` (blocks of rows,
`BlockPool` here or on a dask cluster, atomic `ResultWriter`, provenance), with
:func:`lumaxlike.unmix` per block. Writes, as GeoTIFF or ENVI:

``OUT``            mass fractions, one band per endmember (band names: the endmembers)
``OUT_sigma``      their 1-sigma uncertainty (scaled by ``sigma`` when given, else by
                   the residual variance), one band per endmember
``OUT_status``     `lumaxlike.Status` per pixel (one band)
``OUT_iterations`` solver steps per pixel (one band)
``OUT_residual``   the route's residual norm per pixel (one band; see `UnmixResult`)

or, as netCDF (.nc) or zarr (.zarr), one dataset at ``OUT`` with these variables:
fractions and sigma on dimensions (endmember, y, x), the ``endmember`` coordinate holding
the names; status, iterations and residual on (y, x).
"""

from __future__ import annotations

import dataclasses
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import rasterio

from .._inverse.status import Status
from .._io.geometry_rasters import GeometryReader
from .._io.product_cube import ProductCube, product_geometry, product_options, recorded_geometry
from .._io.raster import GDAL_CACHE_BYTES, CubeInfo
from .._io.units import check_units
from .._io.writers import FieldLayout, ResultWriter
from .._params import HapkeParams
from .._provenance import make_provenance, python_call
from .._run.journal import Journal, array_digest, run_settings
from .._run.pool import BlockPool
from .._run.progress import progress_bar, resumed_text
from .._run.stream import run_blocks
from .._run.tasks import check_solver, numba_threads
from .._unmix.band_matching import band_order
from .._unmix.endmembers import Endmembers
from .._unmix.unmix import DEFAULT_TOLERANCE, ROUTES, default_chunk_pixels, unmix
from .common import check_not_an_input, cube_block_reader, geometry_paths, parallel_call
from .invert import default_chunk_rows

__all__ = [
    "UNMIX_FIELDS",
    "unmix_fields",
    "unmix_record",
    "UnmixOptions",
    "UnmixSummary",
    "cube_wavelengths_um",
    "unmix_block",
    "unmix_file",
    "unmix_layout",
]

UNMIX_FIELDS = ("fractions", "sigma", "status", "iterations", "residual")
_ATTRS = {
    "fractions": {"long_name": "mass fraction of each endmember", "units": "1"},
    "sigma": {"long_name": "standard uncertainty of the mass fraction", "units": "1"},
    "status": {"long_name": "unmixing status (lumaxlike.Status)", **Status.flag_attrs()},
    "iterations": {"long_name": "solver iterations", "units": "1"},
    "residual": {
        "long_name": "residual norm of the route's objective (r [1/sr] one-step, w two-step; "
        "divided by sigma when given)",
        "units": "1",
    },
    "remainder": {
        "long_name": "cross-section fraction of the unmodelled, perfectly absorbing "
        "remainder (fractions not summing to one)",
        "units": "1",
    },
}
WAVELENGTH_UNITS_UM = (("nano", 1e-3), ("nm", 1e-3), ("micro", 1.0), ("um", 1.0), ("µm", 1.0))


def unmix_fields(sum_to_one: bool = True) -> tuple[str, ...]:
    """The maps `unmix_file` writes: :data:`UNMIX_FIELDS`, and ``remainder`` (the
    unmodelled dark remainder, `UnmixResult.remainder`) when the fractions need not sum
    to one."""
    return UNMIX_FIELDS if sum_to_one else (*UNMIX_FIELDS, "remainder")


def unmix_layout(names) -> FieldLayout:
    """The maps `unmix_file` writes for endmembers ``names``."""
    per_pixel = {name: (name,) for name in ("status", "iterations", "residual", "remainder")}
    return FieldLayout(
        main="fractions",
        attrs=_ATTRS,
        band_names={"fractions": tuple(names), "sigma": tuple(names), **per_pixel},
        integer={"status": np.int8, "iterations": np.int32},
        dimensions={"fractions": "endmember", "sigma": "endmember", **dict.fromkeys(per_pixel)},
    )


def cube_wavelengths_um(info: CubeInfo, wavelengths=None) -> np.ndarray:
    """The cube's band centres [um]: ``wavelengths`` [um] when given, else the file's.

    Raises:
        ValueError naming the cube when it gives no wavelengths or no unit for them, or
        ``wavelengths`` when it does not hold one value per band.
    """
    if wavelengths is not None:
        values = np.asarray(wavelengths, np.float64)
        if values.shape != (info.bands,):
            raise ValueError(
                f"wavelengths gives {values.size} values but the cube {info.path} has {info.bands} bands"
            )
        return values
    if info.wavelengths is None:
        raise ValueError(
            f"the cube {info.path} gives no band wavelengths; give them (--wavelengths, in um)"
        )
    units = (info.wavelength_units or "").lower()
    scale = next((factor for key, factor in WAVELENGTH_UNITS_UM if key in units), None)
    if scale is None:
        raise ValueError(
            f"the cube {info.path} gives its wavelengths without a known unit "
            f"({info.wavelength_units!r}); give them (--wavelengths, in um)"
        )
    return np.asarray(info.wavelengths, np.float64) * scale


def known_wavelengths_um(info: CubeInfo) -> np.ndarray | None:
    """The cube's band centres [um] where the file gives them with a known unit, else None."""
    try:
        return cube_wavelengths_um(info)
    except ValueError:
        return None


@dataclass(frozen=True)
class UnmixOptions:
    """How `unmix_block` runs `lumaxlike.unmix` (see its arguments)."""

    solver: str
    route: str = "one_step"
    sum_to_one: bool = True
    max_iter: int | None = None
    tol: float | None = None
    chunk_size: int | None = None
    num_threads: int | None = None
    wavelengths: tuple | None = None  # the data's band centres [um]: matched to the endmembers'


def unmix_block(
    refl,
    to_sun,
    to_sensor,
    normal,
    params: HapkeParams,
    options: UnmixOptions,
    refl_sigma=None,
    *,
    endmembers: Endmembers,
) -> dict[str, np.ndarray]:
    """`lumaxlike.unmix` on a block (the signature `cube_block_reader` gives a block's task);
    returns the maps of :data:`UNMIX_FIELDS`, each ``pixels + (bands,)`` with one band per
    endmember (fractions, sigma) or one band."""
    kwargs = {
        k: v for k, v in (("max_iter", options.max_iter), ("tol", options.tol)) if v is not None
    }
    with numba_threads(options.num_threads):
        result = unmix(refl, to_sun, to_sensor, normal, endmembers, params, options.solver, route=options.route,
                       sum_to_one=options.sum_to_one, refl_sigma=refl_sigma, chunk_size=options.chunk_size,
                       wavelengths=options.wavelengths, **kwargs)  # fmt: skip
    with np.errstate(invalid="ignore"):  # NaN covariance where unsolved
        sigma = np.sqrt(np.diagonal(result.covariance, axis1=-2, axis2=-1))
    return {
        "fractions": result.fractions,
        "sigma": sigma,
        "status": result.status[..., None],
        "iterations": result.iterations[..., None],
        "residual": result.residual_norm[..., None],
        "remainder": result.remainder[..., None],
    }


def unmix_record(endmembers: Endmembers, route: str, sum_to_one: bool, library=None) -> dict:
    """What an unmixing was (`Provenance.unmix_settings`): route, sum-to-one, the
    endmembers' names, densities [g/cm^3], grain sizes [um], extinction efficiencies, and
    ``library`` (how they were made, where known)."""
    return {
        "route": route,
        "sum_to_one": bool(sum_to_one),
        "endmembers": list(endmembers.names),
        "density": [float(v) for v in endmembers.density],
        "grain_size": [float(v) for v in endmembers.grain_size],
        "extinction_efficiency": [float(v) for v in endmembers.extinction_efficiency],
        "library": None if library is None else dict(library),
    }


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

    def describe(self) -> str:
        counts = ", ".join(f"{name} {count}" for name, count in self.status_counts.items())
        rate = self.pixels / self.seconds if self.seconds > 0 else float("inf")
        return (
            f"unmixed {self.pixels} pixels x {self.bands} bands into {len(self.endmembers)} endmembers "
            f"({', '.join(self.endmembers)}) in {self.seconds:.2f} s ({rate:,.0f} pixels/s); "
            f"status of pixels: {counts}" + resumed_text(self.resumed)
        )


def unmix_file(
    cube_path,
    out_path,
    *,
    geometry=None,
    endmembers: Endmembers,
    params: HapkeParams,
    solver: str,
    units: str,
    route: str = "one_step",
    sum_to_one: bool = True,
    dtm=None,
    chunk_rows=None,
    overwrite=False,
    progress=None,
    sigma=None,
    workers=1,
    scheduler=None,
    max_iter=None,
    tol=None,
    command=None,
    surface="auto",
    correction_undone=False,
    reff_incidence=None,
    solar_spectrum=None,
    solar_distance=None,
    wavelengths_from=None,
    thermal_bands="keep",
    library=None,
    resume=False,
) -> UnmixSummary:
    """Unmix a reflectance cube file into mass-fraction maps, block by block.

    Args:
        cube_path: as for `lumaxlike.invert_file` (so are ``geometry``, ``dtm``,
            ``surface``, ``units``, ``chunk_rows``, ``overwrite``, ``progress``,
            ``workers``, ``scheduler``, ``command``, ``resume``, ``correction_undone``,
            ``reff_incidence``, ``solar_spectrum``, ``solar_distance``,
            ``wavelengths_from`` and ``thermal_bands``); bad bands (``bbl`` = 0) are NaN
            in every pixel: give a cube without them.
        out_path: output ``.tif``/``.tiff`` (GeoTIFF) or ``.img``/``.envi``/``.hdr``
            (ENVI); see the module docstring for the files written.
        endmembers: `lumaxlike.Endmembers` on the cube's bands (e.g.
            `Endmembers.from_library`).
        params: one `lumaxlike.HapkeParams` for every band (the mixture's).
        solver: as for `lumaxlike.unmix` (so are ``route``, ``sum_to_one``,
            ``max_iter`` and ``tol``).
        sigma: standard uncertainty of the cube's values, in ``units`` ("r" or "radf";
            a reflectance factor's uncertainty in r varies with cos i per pixel, which
            `unmix` does not take): weights the bands and scales the sigma map.
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
    """
    start = time.perf_counter()
    check_solver(solver)
    if units != "radiance":
        check_units(units)
    elif sigma is not None:
        raise ValueError("sigma with units='radiance' is not supported: give it as I/F")
    if route not in ROUTES:
        raise ValueError(f"route must be one of {ROUTES}, got {route!r}")
    if not isinstance(endmembers, Endmembers):
        raise ValueError(
            f"endmembers must be a lumaxlike.Endmembers, got {type(endmembers).__name__}"
        )
    if not isinstance(params, HapkeParams):
        raise ValueError(
            f"params must be one lumaxlike.HapkeParams for every band, got {type(params).__name__}"
        )
    if sigma is not None:
        if not (isinstance(sigma, (int, float)) and np.isfinite(sigma) and sigma > 0):
            raise ValueError(f"sigma must be a positive number, got {sigma!r}")
        if units == "reff":
            raise ValueError(
                "sigma with units 'reff' is not supported by unmix (its uncertainty in r varies "
                "with cos i per pixel); give the cube as r or radf"
            )
    if chunk_rows is not None and (int(chunk_rows) != chunk_rows or chunk_rows < 1):
        raise ValueError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
    layout = unmix_layout(endmembers.names)
    fields = unmix_fields(bool(sum_to_one))
    inputs = [cube_path, dtm, *geometry_paths(geometry)]
    check_not_an_input(out_path, fields, inputs, main="fractions")

    with (
        rasterio.Env(GDAL_CACHEMAX=GDAL_CACHE_BYTES),
        ProductCube(
            cube_path,
            units,
            **product_options(solar_spectrum, solar_distance, wavelengths_from, thermal_bands),
        ) as cube,
    ):
        info = cube.info
        geometry, incidence, product = product_geometry(
            cube,
            cube_path,
            geometry,
            dtm,
            units=units,
            reff_incidence=reff_incidence,
            correction_undone=correction_undone,
        )
        if info.bands != endmembers.n_bands:
            raise ValueError(
                f"the cube {cube_path} has {info.bands} bands, the endmembers {endmembers.n_bands}"
            )
        rows_per_block = int(chunk_rows) if chunk_rows is not None else default_chunk_rows(info)
        chunk_size = min(
            rows_per_block * info.grid.width,
            default_chunk_pixels(info.bands, endmembers.n_endmembers),
        )
        wavelengths = known_wavelengths_um(info)
        band_order(wavelengths, endmembers, f"the cube {cube_path}")  # refused before any work
        options = UnmixOptions(
            solver,
            route,
            bool(sum_to_one),
            max_iter,
            tol,
            chunk_size,
            wavelengths=None if wavelengths is None else tuple(wavelengths),
        )
        with GeometryReader(geometry, info.grid, dtm, surface=surface) as geometry_reader:
            provenance = make_provenance(
                params=[params] * info.bands, units=units, solver=solver,
                tol=DEFAULT_TOLERANCE if tol is None else tol, max_iter=max_iter, refl_sigma=sigma,
                dtype=info.dtype, cube=cube_path, geometry=recorded_geometry(geometry, product),
                dtm=dtm, geometry_layout=geometry_reader.record(), product=product,
                command=command or python_call("unmix_file", cube_path, out_path, geometry=geometry, dtm=dtm,
                                               endmembers=endmembers.names, params=params, solver=solver,
                                               units=units, route=route, sum_to_one=sum_to_one, sigma=sigma,
                                               max_iter=max_iter, tol=tol, surface=surface,
                                               **parallel_call(workers, scheduler)),
            )  # fmt: skip
            provenance = dataclasses.replace(
                provenance, unmix_settings=unmix_record(endmembers, route, sum_to_one, library)
            )
            settings = run_settings(
                provenance,
                out_path,
                fields,
                rows_per_block,
                route=route,
                sum_to_one=bool(sum_to_one),
                endmembers=_endmembers_digest(endmembers),
            )
            inputs = [cube_path, dtm, *geometry_paths(geometry), solar_spectrum, wavelengths_from]
            journal = Journal(
                out_path, inputs=inputs, resume=resume, fields=fields, settings=settings
            )
            writer = ResultWriter(
                out_path,
                like=info,
                fields=fields,
                overwrite=overwrite,
                chunk_rows=rows_per_block,
                provenance=provenance,
                layout=layout,
            )
            counts, resumed = run_blocks(
                writer,
                lambda: BlockPool(workers, scheduler, function=unmix_block),
                cube_block_reader(
                    cube,
                    geometry_reader,
                    units=cube.units,
                    sigma=sigma,
                    params=params,
                    options=options,
                    extra=lambda rows: {"endmembers": endmembers},
                    reff_incidence=incidence,
                ),
                rows_per_block=rows_per_block,
                journal=journal,
                bar_factory=lambda: progress_bar(
                    progress, info.grid.height * info.grid.width, f"unmixing {Path(cube_path).name}"
                ),
                on_start=cube.tell,
            )  # every check passed: the run starts
    return UnmixSummary(
        outputs=dict(writer.paths),
        pixels=info.grid.height * info.grid.width,
        bands=info.bands,
        endmembers=endmembers.names,
        seconds=time.perf_counter() - start,
        status_counts={member.name: int(counts[member]) for member in Status},
        resumed=resumed,
    )


def _endmembers_digest(endmembers: Endmembers) -> str:
    """A digest of everything the endmembers hold (names, spectra, grains, phase)."""
    values = [getattr(endmembers, f.name) for f in dataclasses.fields(endmembers)]
    return array_digest(*(np.asarray(v) if isinstance(v, np.ndarray) else v for v in values))
