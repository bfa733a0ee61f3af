"""``lumaxlike parameters``: named spectral products (band depths, band centres, FeO,
OLINDEX3, ...) of a cube file, one map per product (`spectral_parameters_file`)."""

from __future__ import annotations

from .._spectral.options import SpectralSettings
from .inputs import add_inputs
from .operation import add_command, run_command
from .options import add_parallel_options, add_run_options, name_list
from .products import add_product_options

__all__ = ["add_parser", "run"]

HELP = "spectral parameters (band depths, centres, FeO, OLINDEX3, ...) of a cube file"

DESCRIPTION = """\
Named spectral products of a cube, per pixel, streamed by blocks of rows: the M3 team's
integrated band depths (BDI1000, BDI2000), Band I and II centres, depths and areas with
the Band Area Ratio, Lucey's FeO, TiO2 and OMAT, and CRISM's summary parameters (OLINDEX3,
LCPINDEX2, ...): docs/spectral-parameters.md lists each with its bands and source.

The cube's values are read as it holds them, with no geometry (--quantity says what they
are, and is recorded: a band depth of w is not one of I/F); its band centres come from its
metadata or --wavelengths-from. A product whose bands the cube lacks, or whose band is
marked bad (bbl = 0), is refused by name before any output is written.

Writes OUT (the first product's map) and, for GeoTIFF/ENVI, OUT_<NAME> for each other
product; netCDF (.nc) and zarr (.zarr) hold one variable per product.
"""

EPILOG = """\
examples:
  # band depths and composition of the w cube `lumaxlike invert` wrote
  lumaxlike parameters w.tif --quantity w --products BDI1000,BDI2000,FeO --out params.tif
  # an M3 L2 reflectance product, as it ships (REFF at i = 30, e = 0 deg)
  lumaxlike parameters M3G20090203T022705_V01_RFL.IMG --quantity normalized --units reff \\
      --products BDI1000,BAND1_CENTER,BAR --out m3_params.nc
"""


def add_parser(commands) -> None:
    """Add the ``parameters`` subcommand to ``commands``."""
    parser = add_command(commands, "parameters", HELP, DESCRIPTION, EPILOG)
    add_inputs(parser, "cube", "out", cube="the cube file (required)")
    parser.add_argument(
        "--products",
        type=name_list,
        required=True,
        metavar="NAMES",
        help="comma-separated product names, e.g. BDI1000,FeO,OLINDEX3 (required; "
        "docs/spectral-parameters.md lists them)",
    )
    # every option of `SpectralSettings` (lumaxlike._spectral.options) with a flag
    SpectralSettings.add_arguments(parser)
    add_inputs(
        parser,
        "units",
        units="how the file is read: r, radf or reff (checked against its label and units "
        "tag; the values are not converted), or radiance, converted to I/F (then "
        "--quantity radf) (default: the quantity's own; for w, normalized and reflectance "
        "the values as given, a file tagged 1/sr read as r)",
    )
    add_run_options(parser, chunk_help="rows per block (default: ~32 MB)", parallel=False)
    add_parallel_options(parser)
    add_product_options(parser, params_from=False, geometry=False)
    parser.set_defaults(handler=run)


def run(args) -> int:
    """Run ``lumaxlike parameters`` on parsed ``args``; return its exit code."""
    from .._files import spectral_parameters_file
    from .._operations.spectral import SPECTRAL_PARAMETERS

    settings = SpectralSettings.from_arguments(args)
    return run_command(
        SPECTRAL_PARAMETERS,
        spectral_parameters_file,
        args,
        args.cube,
        described=f"{args.cube} ({settings.quantity}) -> {args.out}, {', '.join(args.products)}",
        products=args.products,
        units=args.units,
        settings=settings,
    )
