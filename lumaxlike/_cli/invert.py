"""``lumaxlike invert``: a reflectance cube file to w maps."""

from __future__ import annotations

import argparse

from .inputs import CUBE_INPUTS, RECORDED, add_inputs, params_from_help
from .model import (
    model_from_options,
    read_record,
    recorded_values,
    refuse_recorded_maps,
    resolve_settings,
)
from .operation import add_command, run_command
from .options import add_model_options, add_run_options, name_list
from .products import add_product_options, resolve_product_options

__all__ = ["add_parser", "run"]

HELP = "invert a reflectance cube file for w maps"

DESCRIPTION = """\
Invert a reflectance cube (GeoTIFF, ENVI, anything GDAL opens) for the single-scattering
albedo w per pixel and band, streaming it by blocks of rows.

Writes OUT (w) and, for GeoTIFF/ENVI, siblings OUT_status, OUT_iterations, OUT_residual
(and OUT_sigma with --refl-sigma, OUT_<NAME> per spectral product with --parameters);
netCDF (.nc) and zarr (.zarr) hold them all in one dataset.
Every output records how it was made (lumaxlike version, model, Hapke parameters, units,
solver, tol, max-iter, sigma, input files, this command line, the time; see
lumaxlike.read_provenance), and --params-from reuses that record.
"""

EPILOG = """\
examples (on the files `lumaxlike demo` writes into lumaxlike-demo/):
  # the demo's model: bidirectional reflectance r, its Hapke parameters, local slopes
  lumaxlike invert lumaxlike-demo/reflectance.tif --geometry lumaxlike-demo/obs.tif \\
      --dtm lumaxlike-demo/dtm.tif --units r --b 0.2 --c 0.4 --roughness-deg 20 \\
      --hs 0.06 --bs0 1 --hc 0.05 --bc0 0.5 --out w.tif
  # the same run again, every setting read from the first one's output
  lumaxlike invert lumaxlike-demo/reflectance.tif --params-from w.tif --out w_again.tif
"""


def add_parser(commands) -> argparse.ArgumentParser:
    """Add the ``invert`` subcommand to ``commands``; return its parser (``normalize``
    shares its options)."""
    invert = add_command(commands, "invert", HELP, DESCRIPTION, EPILOG)
    add_inputs(
        invert,
        *CUBE_INPUTS,
        params_from=params_from_help(
            "model, Hapke parameters, --units, --solver, --tol, --max-iter, --refl-sigma, "
            "--geometry and --dtm"
        ),
    )
    invert.add_argument(
        "--parameters",
        type=name_list,
        metavar="NAMES",
        help="comma-separated spectral products (e.g. BDI1000,FeO; `lumaxlike "
        "parameters` lists them) computed in the same pass from each block's w (with "
        "normalize: from the normalised reflectance), as `lumaxlike parameters` would "
        "from the map written: one map each at OUT_<NAME> (netCDF/zarr: a variable "
        "each); a product the cube's bands cannot give is refused by name before any "
        "block runs (default: none)",
    )
    _add_solver_options(invert)
    invert.set_defaults(handler=run)
    return invert


def _add_solver_options(invert) -> None:
    """`add_parser`'s solver, model, product, inversion (`InvertSettings`: --max-iter,
    --tol, --refl-sigma) and run options."""
    from .._inverse.options import InvertSettings

    add_inputs(invert, "solver")
    add_model_options(invert, RECORDED)
    add_product_options(invert)
    # every option of `InvertSettings` (lumaxlike._inverse.options), as it declares it
    InvertSettings.add_arguments(invert, RECORDED)
    add_run_options(
        invert,
        chunk_help="rows per block (default: about 32 MiB of reflectance)",
        parallel=True,
    )


def run(args) -> int:
    """Run ``lumaxlike invert`` on parsed ``args``; return its exit code."""
    from .._files import invert_file
    from .._files.arguments import FromBands
    from .._inverse.options import InvertSettings
    from .._operations.invert import INVERT

    record = read_record(args)
    refuse_recorded_maps(args, record, "invert")
    options = InvertSettings.from_arguments(args, recorded_values(record, InvertSettings))
    settings = resolve_settings(args, record, InvertSettings)
    resolve_product_options(args, record, settings["units"])
    # one model per band of the cube, made once the run has opened it
    params = FromBands(lambda bands: model_from_options(args, bands, record))
    described = f"{args.cube} ({settings['units']}) -> {args.out}, solver {settings['solver']}"
    return run_command(
        INVERT,
        invert_file,
        args,
        args.cube,
        described=described,
        params=params,
        parameters=args.parameters or None,
        settings=options,
        **settings,
    )
