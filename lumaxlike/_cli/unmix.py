"""``lumaxlike unmix``: a reflectance cube file to mass-fraction maps of endmembers."""

from __future__ import annotations

from pathlib import Path

from .inputs import CUBE_INPUTS, RECORDED, UNITS_HELP, add_inputs, params_from_help
from .model import (
    model_from_options,
    read_record,
    refuse_recorded_maps,
    resolve_settings,
    same_params,
)
from .operation import add_command, run_command
from .options import (
    DEFAULT_SOLVER,
    add_model_options,
    add_run_options,
    number_list,
    scalar_or_list,
)
from .products import add_product_options, resolve_product_options
from .unmix_optical import (
    add_optical_options,
    optical_endmembers,
    optical_library_record,
    refuse_ignored_options,
)
from .unmix_settings import library_record, recorded_options, unmix_settings

__all__ = ["add_parser", "run"]

HELP = "unmix a reflectance cube file into mass-fraction maps"

DESCRIPTION = """\
Unmix a reflectance cube into mass-fraction maps of an intimate mixture of endmembers
(Hapke's mixing rule: the mixture's single-scattering albedo is the cross-section-weighted
mean of the endmembers'), streaming it by blocks of rows.

The endmembers' albedo spectra come from laboratory spectra (--endmembers: CSV, USGS
splib07 or RELAB files), resampled to the cube's bands (its wavelengths, or --wavelengths)
and inverted at their measurement geometry with the same model. Writes OUT (one band per
endmember), OUT_sigma (their 1-sigma uncertainty), OUT_status, OUT_iterations and
OUT_residual (GeoTIFF or ENVI; netCDF (.nc) and zarr (.zarr) hold them all in one
dataset), each recording how it was made (the route, sum-to-one,
the library and the endmembers' densities and grain sizes included), and --params-from
reruns that record.
"""

EPILOG = """\
example (on the files `lumaxlike demo` writes into lumaxlike-demo/; its library is sampled
at the cube's band centres, so --fwhm 0.001 takes each sample as is):
  lumaxlike unmix lumaxlike-demo/reflectance.tif --geometry lumaxlike-demo/obs.tif \\
      --dtm lumaxlike-demo/dtm.tif --units r --endmembers lumaxlike-demo/minerals.csv \\
      --library-incidence 30 --library-emission 0 --density 2.71,3.96,2.65,2.32,2.6 \\
      --grain-size 60,40,80,50,70 --fwhm 0.001 --b 0.2 --c 0.4 --roughness-deg 20 \\
      --hs 0.06 --bs0 1 --hc 0.05 --bc0 0.5 --route two_step --out abundances.tif
  # the same run again, every setting read from the first one's output
  lumaxlike unmix lumaxlike-demo/reflectance.tif --params-from abundances.tif --out again.tif
"""


def add_parser(commands) -> None:
    """Add the ``unmix`` subcommand to ``commands``."""
    unmix = add_command(commands, "unmix", HELP, DESCRIPTION, EPILOG)
    add_inputs(
        unmix,
        *CUBE_INPUTS,
        params_from=params_from_help(
            "route, sum-to-one, library (files, format, units, angles), --wavelengths, "
            "--fwhm, densities, grain sizes, extinction efficiencies, Hapke parameters, "
            "--units, --solver, --tol, --max-iter, --refl-sigma, --geometry, --surface and "
            "--dtm",
            output="unmix output",
            note=". Another command's output gives its model and inputs only",
        ),
        geometry="geometry backplane on the cube's grid, as for `lumaxlike invert` (required, "
        "unless --params-from gives it or the cube is a product normalised to a standard "
        "geometry, e.g. M3 L2)",
        surface="which angles to use, as for `lumaxlike invert` (default auto" + RECORDED + ")",
        dtm="DTM on the cube's grid for local slopes (default: a flat surface" + RECORDED + ")",
        units=UNITS_HELP + " (required, unless --params-from gives it)",
    )
    _add_library_options(unmix)
    _add_solver_options(unmix)
    add_product_options(unmix)
    add_run_options(
        unmix,
        chunk_help="rows per block (default: about 32 MiB of reflectance)",
        parallel=True,
    )
    add_optical_options(unmix)
    unmix.set_defaults(handler=run)


def _add_library_options(unmix) -> None:
    """`add_parser`'s endmember library and band options."""
    unmix.add_argument(
        "--endmembers",
        type=Path,
        nargs="+",
        metavar="LIB",
        help="laboratory reflectance spectra of the endmembers: CSV files (a "
        "wavelength column naming its unit, one column per spectrum), USGS splib07 "
        "or RELAB spectrum files (required, unless --params-from gives them)",
    )
    unmix.add_argument(
        "--library-format",
        choices=("csv", "splib07", "relab"),
        help="format of the --endmembers files (default: from each file" + RECORDED + ")",
    )
    unmix.add_argument(
        "--library-units",
        choices=("r", "radf", "reff"),
        help="what the library files hold (default reff, as splib07 and RELAB" + RECORDED + ")",
    )
    unmix.add_argument(
        "--library-incidence",
        type=number_list,
        metavar="DEG[,...]",
        help="incidence angle of the library's measurements [deg], one or one per "
        "spectrum (required unless every file is RELAB: 30" + RECORDED + ")",
    )
    unmix.add_argument(
        "--library-emission",
        type=number_list,
        metavar="DEG[,...]",
        help="emission angle of the library's measurements [deg] (required unless "
        "every file is RELAB: 0" + RECORDED + ")",
    )
    unmix.add_argument(
        "--library-azimuth",
        type=number_list,
        metavar="DEG[,...]",
        help="azimuth of the observer relative to the source in the library's "
        "measurements [deg] (default 0" + RECORDED + ")",
    )
    unmix.add_argument(
        "--density",
        type=number_list,
        metavar="G_CM3[,...]",
        help="solid density of each endmember [g/cm^3], one or one per endmember (required, "
        "unless --params-from gives them)",
    )
    unmix.add_argument(
        "--grain-size",
        type=number_list,
        metavar="UM[,...]",
        help="grain size of each endmember [um], one or one per endmember (required, unless "
        "--params-from gives them)",
    )
    unmix.add_argument(
        "--extinction-efficiency",
        type=number_list,
        metavar="Q[,...]",
        help="extinction efficiency of each endmember [-] (default 1" + RECORDED + ")",
    )
    unmix.add_argument(
        "--wavelengths",
        type=number_list,
        metavar="UM,...",
        help="the cube's band centres [um] (default: read from the cube" + RECORDED + ")",
    )
    unmix.add_argument(
        "--fwhm",
        type=number_list,
        metavar="UM[,...]",
        help="the cube's band widths [um] (default: the band spacing" + RECORDED + ")",
    )


def _add_solver_options(unmix) -> None:
    """`add_parser`'s solver and model options, and the unmixing's (`UnmixSettings`:
    --route, --sum-to-one/--no-sum-to-one, --max-iter, --tol, --refl-sigma; --free and
    --starts with the optical constants' options)."""
    from .._unmix.options import UnmixSettings

    optical = ("free", "starts")
    UnmixSettings.add_arguments(
        unmix, RECORDED, [name for name in UnmixSettings.declared() if name not in optical]
    )
    add_inputs(
        unmix,
        "solver",
        solver=f"solver, as for `lumaxlike invert` (default {DEFAULT_SOLVER}{RECORDED})",
    )
    add_model_options(unmix, RECORDED)


def run(args) -> int:
    """Run ``lumaxlike unmix`` on parsed ``args``; return its exit code."""
    from .._files import unmix_file
    from .._operations.unmix import UNMIX
    from .._unmix.options import UnmixSettings

    refuse_ignored_options(args)
    record = read_record(args)
    refuse_recorded_maps(args, record, "unmix")
    settings = resolve_settings(args, record, UnmixSettings)
    resolve_product_options(args, record, settings["units"])
    unmixing = unmix_settings(args, record)
    options = UnmixSettings.from_arguments(args, recorded_options(args, record))
    described = (
        f"{args.cube} ({settings['units']}) -> {args.out}, {options.route} route, "
        f"solver {settings['solver']}"
    )
    return run_command(
        UNMIX,
        unmix_file,
        args,
        args.cube,
        described=described,
        **_from_bands(args, record, unmixing, settings),
        settings=options,
        **settings,
    )


def _from_bands(args, record, unmixing, settings) -> dict:
    """`unmix_file`'s ``params``, ``endmembers`` and ``library`` (the record of how the
    endmembers were made), each a `FromBands`: made once the run has opened the cube,
    from its bands (the endmembers resampled to, or evaluated at, its band centres: the
    cube's wavelengths, or --wavelengths), so that the command opens the cube once."""
    import functools

    from .._files.arguments import FromBands
    from .._files.wavelengths import cube_wavelengths_um
    from .._params import HapkeParams

    @functools.cache
    def params(bands: int):
        models = model_from_options(args, bands, record)
        if not isinstance(models[0], HapkeParams) or not same_params(models):
            raise ValueError(
                "unmix takes one set of Hapke parameters for every band (no per-band "
                "values, no empirical photometric function)"
            )
        return models[0]

    def wavelengths(info):
        return cube_wavelengths_um(info, unmixing.library["--wavelengths"])

    def endmembers(info):
        if args.optical_constants is not None:  # n, k: grain sizes and npFe0 may be free
            # their free parameters and starts are the options' (`UnmixSettings`)
            return optical_endmembers(args, unmixing.per_endmember, wavelengths(info))[0]
        return _library_endmembers(unmixing, params(info.bands), wavelengths(info), settings)

    def library(info):
        if args.optical_constants is not None:
            return optical_library_record(args, wavelengths(info))
        return library_record(unmixing, wavelengths(info))

    return {
        "params": FromBands(params),
        "endmembers": FromBands(endmembers, info=True),
        "library": FromBands(library, info=True),
    }


def _library_endmembers(unmixing, params, wavelengths, settings):
    """The endmembers from the laboratory spectra of --endmembers."""
    from .._io.read.spectral_library import read_spectral_library
    from .._unmix.endmembers import Endmembers

    options = unmixing.library
    library = read_spectral_library(
        options["--endmembers"],
        options["--library-format"],
        units=options["--library-units"],
        incidence=_radians(scalar_or_list(options["--library-incidence"])),
        emission=_radians(scalar_or_list(options["--library-emission"])),
        azimuth=_radians(scalar_or_list(options["--library-azimuth"])),
    )
    per_endmember = unmixing.endmember_values(library.names)
    return Endmembers.from_library(
        library,
        params,
        density=scalar_or_list(per_endmember["--density"]),
        grain_size=scalar_or_list(per_endmember["--grain-size"]),
        wavelengths=wavelengths,
        fwhm=scalar_or_list(options["--fwhm"]),
        extinction_efficiency=scalar_or_list(per_endmember["--extinction-efficiency"]),
        solver=settings["solver"],
    )


def _radians(degrees):
    """A --library-* angle [deg] (a number, a list, or None) in radians, as Python takes it."""
    import numpy as np

    return None if degrees is None else np.radians(np.asarray(degrees, np.float64))
