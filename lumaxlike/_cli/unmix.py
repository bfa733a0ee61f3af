"""``lumaxlike unmix``: a reflectance cube file to mass-fraction maps of endmembers."""

from __future__ import annotations

import sys
from pathlib import Path

from .model import model_from_options, same_params
from .options import (
    DEFAULT_SOLVER,
    add_model_options,
    add_run_options,
    number_list,
    positive_float,
    positive_int,
    quiet_cluster_logs,
    scalar_or_list,
)
from .products import (
    INPUT_UNITS,
    UNITS_HELP,
    add_product_options,
    finish,
    product_kwargs,
)

__all__ = ["add_parser", "run"]

DESCRIPTION = """\
Unmix a reflectance cube into mass-fraction maps of an intimate mixture of endmembers
(Hapke's mixing rule: the mixture's single-scattering albedo is the cross-section-weighted
mean of the endmembers'), streaming it by blocks of rows.

The endmembers' albedo spectra come from laboratory spectra (--endmembers: CSV, USGS
splib07 or RELAB files), resampled to the cube's bands (its wavelengths, or --wavelengths)
and inverted at their measurement geometry with the same model. Writes OUT (one band per
endmember), OUT_sigma (their 1-sigma uncertainty), OUT_status, OUT_iterations and
OUT_residual (GeoTIFF or ENVI), each recording how it was made.
"""

EPILOG = """\
example (on the files `lumaxlike demo` writes into lumaxlike-demo/; its library is sampled
at the cube's band centres, so --fwhm 0.001 takes each sample as is):
  lumaxlike unmix lumaxlike-demo/reflectance.tif --geometry lumaxlike-demo/obs.tif \\
      --dtm lumaxlike-demo/dtm.tif --units r --endmembers lumaxlike-demo/minerals.csv \\
      --library-incidence 30 --library-emission 0 --density 2.71,3.96,2.65,2.32,2.6 \\
      --grain-size 60,40,80,50,70 --fwhm 0.001 --b 0.2 --c 0.4 --roughness-deg 20 \\
      --hs 0.06 --bs0 1 --hc 0.05 --bc0 0.5 --route two_step --out abundances.tif
"""


def add_parser(commands, formatter) -> None:
    """Add the ``unmix`` subcommand to ``commands``."""
    unmix = commands.add_parser(
        "unmix",
        help="unmix a reflectance cube file into mass-fraction maps",
        allow_abbrev=False,
        formatter_class=formatter,
        description=DESCRIPTION,
        epilog=EPILOG,
    )
    unmix.add_argument("cube", type=Path, metavar="CUBE", help="reflectance cube file (required)")
    unmix.add_argument(
        "--out",
        type=Path,
        required=True,
        metavar="OUT",
        help="output: .tif/.tiff GeoTIFF or .img/.envi/.hdr ENVI (required)",
    )
    unmix.add_argument(
        "--geometry",
        type=Path,
        metavar="OBS",
        help="geometry backplane on the cube's grid, as for `lumaxlike invert` (required, "
        "unless the cube is a product normalised to a standard geometry, e.g. M3 L2)",
    )
    unmix.add_argument(
        "--surface",
        choices=("auto", "local", "ellipsoid"),
        default="auto",
        help="which angles to use, as for `lumaxlike invert` (default auto)",
    )
    unmix.add_argument(
        "--dtm",
        type=Path,
        metavar="DTM",
        help="DTM on the cube's grid for local slopes (default: a flat surface)",
    )
    unmix.add_argument(
        "--units",
        choices=INPUT_UNITS,
        required=True,
        help=UNITS_HELP + " (required)",
    )
    unmix.add_argument(
        "--endmembers",
        type=Path,
        nargs="+",
        required=True,
        metavar="LIB",
        help="laboratory reflectance spectra of the endmembers: CSV files (a "
        "wavelength column naming its unit, one column per spectrum), USGS splib07 "
        "or RELAB spectrum files (required)",
    )
    unmix.add_argument(
        "--library-format",
        choices=("csv", "splib07", "relab"),
        help="format of the --endmembers files (default: from each file)",
    )
    unmix.add_argument(
        "--library-units",
        choices=("r", "radf", "reff"),
        default="reff",
        help="what the library files hold (default reff, as splib07 and RELAB)",
    )
    unmix.add_argument(
        "--library-incidence",
        type=number_list,
        metavar="DEG[,...]",
        help="incidence angle of the library's measurements [deg], one or one per "
        "spectrum (required unless every file is RELAB: 30)",
    )
    unmix.add_argument(
        "--library-emission",
        type=number_list,
        metavar="DEG[,...]",
        help="emission angle of the library's measurements [deg] (required unless "
        "every file is RELAB: 0)",
    )
    unmix.add_argument(
        "--library-azimuth",
        type=number_list,
        default=[0.0],
        metavar="DEG[,...]",
        help="azimuth of the observer relative to the source in the library's "
        "measurements [deg] (default 0)",
    )
    unmix.add_argument(
        "--density",
        type=number_list,
        required=True,
        metavar="G_CM3[,...]",
        help="solid density of each endmember [g/cm^3], one or one per endmember (required)",
    )
    unmix.add_argument(
        "--grain-size",
        type=number_list,
        required=True,
        metavar="UM[,...]",
        help="grain size of each endmember [um], one or one per endmember (required)",
    )
    unmix.add_argument(
        "--extinction-efficiency",
        type=number_list,
        metavar="Q[,...]",
        help="extinction efficiency of each endmember [-] (default 1)",
    )
    unmix.add_argument(
        "--wavelengths",
        type=number_list,
        metavar="UM,...",
        help="the cube's band centres [um] (default: read from the cube)",
    )
    unmix.add_argument(
        "--fwhm",
        type=number_list,
        metavar="UM[,...]",
        help="the cube's band widths [um] (default: the band spacing)",
    )
    unmix.add_argument(
        "--route",
        choices=("one_step", "two_step"),
        default="one_step",
        help="one_step: Levenberg-Marquardt in reflectance space (weights the noise "
        "correctly); two_step: invert to w, then constrained least squares in w "
        "(faster) (default one_step)",
    )
    unmix.add_argument(
        "--no-sum-to-one",
        dest="sum_to_one",
        action="store_false",
        help="let the fractions sum to less than one: fit an unmodelled, perfectly "
        "absorbing remainder (default: they sum to one)",
    )
    unmix.add_argument(
        "--solver",
        choices=("numba", "jax"),
        default=DEFAULT_SOLVER,
        help=f"solver, as for `lumaxlike invert` (default {DEFAULT_SOLVER})",
    )
    add_model_options(unmix)
    add_product_options(unmix)
    unmix.add_argument(
        "--tol",
        type=positive_float,
        metavar="VALUE",
        help="convergence tolerance on the step of every cross-section fraction (default 1e-10)",
    )
    unmix.add_argument(
        "--max-iter",
        type=positive_int,
        metavar="N",
        help="solver iterations per pixel at most",
    )
    unmix.add_argument(
        "--sigma",
        type=positive_float,
        metavar="VALUE",
        help="standard uncertainty of the cube's values in --units (r or radf): "
        "weights the bands and scales the sigma map (default: scaled by the "
        "residual variance)",
    )
    add_run_options(
        unmix,
        chunk_help="rows per block (default: about 32 MiB of reflectance)",
        parallel=True,
    )
    unmix.set_defaults(handler=run)


def run(args) -> int:
    """Run ``lumaxlike unmix`` on parsed ``args``; return its exit code."""
    from .._files.unmix import unmix_file
    from .._files.wavelengths import cube_wavelengths_um
    from .._io.product_cube import ProductCube
    from .._io.spectral_library import read_spectral_library
    from .._params import HapkeParams
    from .._unmix.endmembers import Endmembers

    with ProductCube(
        args.cube,
        args.units,
        thermal_bands=args.thermal_bands,
        wavelengths_from=args.wavelengths_from,
        check_values=False,
        convert=False,
    ) as cube:
        info = cube.info
    params = model_from_options(args, info.bands)
    if not isinstance(params[0], HapkeParams) or not same_params(params):
        raise ValueError(
            "unmix takes one set of Hapke parameters for every band (no per-band "
            "values, no empirical photometric function)"
        )
    wavelengths = cube_wavelengths_um(info, args.wavelengths)
    library = read_spectral_library(
        args.endmembers,
        args.library_format,
        units=args.library_units,
        incidence=_radians(scalar_or_list(args.library_incidence)),
        emission=_radians(scalar_or_list(args.library_emission)),
        azimuth=_radians(scalar_or_list(args.library_azimuth)),
    )
    endmembers = Endmembers.from_library(
        library,
        params[0],
        density=scalar_or_list(args.density),
        grain_size=scalar_or_list(args.grain_size),
        wavelengths=wavelengths,
        fwhm=scalar_or_list(args.fwhm),
        extinction_efficiency=scalar_or_list(args.extinction_efficiency),
        solver=args.solver,
    )
    quiet_cluster_logs(args)
    summary = unmix_file(
        args.cube,
        args.out,
        geometry=args.geometry,
        endmembers=endmembers,
        params=params[0],
        solver=args.solver,
        units=args.units,
        route=args.route,
        sum_to_one=args.sum_to_one,
        dtm=args.dtm,
        chunk_rows=args.chunk,
        overwrite=args.overwrite,
        progress=args.progress,
        sigma=args.sigma,
        workers=args.workers,
        scheduler=args.scheduler,
        max_iter=args.max_iter,
        tol=args.tol,
        command=args.command_line,
        resume=args.resume,
        surface=args.surface,
        library={
            "files": [str(Path(path).absolute()) for path in args.endmembers],
            "format": args.library_format,
            "units": args.library_units,
            "incidence_deg": args.library_incidence,
            "emission_deg": args.library_emission,
            "azimuth_deg": args.library_azimuth,
            "wavelengths_um": [float(v) for v in wavelengths],
            "fwhm_um": args.fwhm,
        },
        **product_kwargs(args),
    )
    print(
        f"lumaxlike unmix: {args.cube} ({args.units}) -> {args.out}, {args.route} route, solver "
        f"{args.solver}: {summary.describe()}",
        file=sys.stderr,
    )
    return finish("unmix", summary)


def _radians(degrees):
    """A --library-* angle [deg] (a number, a list, or None) in radians, as Python takes it."""
    import numpy as np

    return None if degrees is None else np.radians(np.asarray(degrees, np.float64))
