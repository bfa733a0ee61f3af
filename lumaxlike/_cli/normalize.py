"""``lumaxlike normalize``: photometric normalisation of a cube file to a standard geometry."""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from .inputs import RECORDED
from .model import (
    fitted_maps,
    model_from_options,
    normalisation_maps,
    read_record,
    recorded_values,
    resolve_settings,
)
from .operation import add_command, copy_options, run_command
from .options import HAPKE_OPTIONS
from .products import resolve_product_options

__all__ = ["add_parser", "run"]

HELP = "photometric normalisation of a reflectance cube to a standard geometry"

DESCRIPTION = """\
Photometric normalisation of a reflectance cube: the reflectance every pixel would have at
a standard geometry (incidence, emission, phase; default 30, 0, 30 deg, as ISIS photomet
and the M3 and LROC WAC pipelines use), through the albedo w inverted at the pixel's own
geometry with the given Hapke model, streamed by blocks of rows.

Writes OUT (the normalised cube, in --units, REFF with the standard incidence) and, for
GeoTIFF/ENVI, siblings OUT_status (the inversion's status), with --refl-sigma OUT_sigma and
with --parameters OUT_<NAME> per spectral product of the normalised reflectance; netCDF
(.nc) and zarr (.zarr) hold them as reflectance, status, sigma and one variable per
product. Every option of `lumaxlike invert` works the same here; outputs record how they
were made, the standard geometry and parameter maps included.
"""

EPILOG = """\
examples (on the files `lumaxlike demo` writes into lumaxlike-demo/):
  lumaxlike normalize lumaxlike-demo/reflectance.tif --geometry lumaxlike-demo/obs.tif \\
      --dtm lumaxlike-demo/dtm.tif --units r --b 0.2 --c 0.4 --roughness-deg 20 \\
      --hs 0.06 --bs0 1 --hc 0.05 --bc0 0.5 --standard 30,0,30 --out normalised.tif
  # a roughness map (degrees, one band, on the cube's grid) instead of one value
  lumaxlike normalize CUBE --geometry OBS --units radf --param-map roughness-deg=theta.tif --out OUT.tif
"""

#: --param-map names: the Hapke option's name (without --) -> HapkeParams field
PARAM_MAP_NAMES = {flag[2:]: field for flag, field, _, _ in HAPKE_OPTIONS}


def _param_map(text: str) -> tuple[str, Path]:
    name, separator, path = text.partition("=")
    if not separator or not path:
        raise argparse.ArgumentTypeError(f"expected NAME=RASTER, got {text!r}")
    if name not in PARAM_MAP_NAMES:
        raise argparse.ArgumentTypeError(
            f"unknown parameter {name!r} in {text!r}; one of {', '.join(PARAM_MAP_NAMES)}"
        )
    return name, Path(path)


def add_parser(commands, invert) -> None:
    """``lumaxlike normalize``: every option of ``invert`` plus --standard and --param-map."""
    normalize = add_command(commands, "normalize", HELP, DESCRIPTION, EPILOG)
    from .._inverse.options import InvertSettings
    from .._normalize.options import NormalizeSettings

    # the same Action objects, as argparse's parents= shares them
    copy_options(normalize, invert)
    # the options of `NormalizeSettings` that `InvertSettings` lacks (--standard)
    own = NormalizeSettings.declared().keys() - InvertSettings.declared().keys()
    NormalizeSettings.add_arguments(normalize, RECORDED, names=own)
    normalize.add_argument(
        "--param-map",
        type=_param_map,
        action="append",
        metavar="NAME=RASTER",
        help="a per-pixel Hapke parameter raster on the cube's grid replacing "
        "that option's value: NAME is b, c, roughness-deg (degrees), hs, bs0, "
        "hc, bc0, porosity-k or asymmetry; 1 band (per pixel) or one per cube "
        "band; nodata makes the pixel NONFINITE_INPUT. Repeatable (default: none)",
    )
    normalize.set_defaults(handler=run)


def run(args) -> int:
    """Run ``lumaxlike normalize`` on parsed ``args``; return its exit code."""
    from .._files import normalize_file
    from .._files.arguments import FromBands
    from .._normalize.options import NormalizeSettings
    from .._operations.normalize import NORMALIZE

    record = read_record(args)
    options = NormalizeSettings.from_arguments(args, recorded_values(record, NormalizeSettings))
    settings = resolve_settings(args, record, NormalizeSettings)
    resolve_product_options(args, record, settings["units"])
    param_maps = {PARAM_MAP_NAMES[name]: path for name, path in (args.param_map or [])}
    if len(param_maps) != len(args.param_map or []):
        raise ValueError("--param-map gives the same parameter twice")
    param_maps = {**_recorded_maps(args, record), **param_maps}
    # one model per band of the cube, made once the run has opened it
    params = FromBands(lambda bands: model_from_options(args, bands, record))
    described = (
        f"{args.cube} ({settings['units']}) -> {args.out}, standard "
        f"{', '.join(f'{math.degrees(v):g}' for v in options.standard)} deg, "
        f"solver {settings['solver']}"
    )
    return run_command(
        NORMALIZE,
        normalize_file,
        args,
        args.cube,
        described=described,
        params=params,
        param_maps=param_maps or None,
        parameters=args.parameters or None,
        settings=options,
        **settings,
    )


def _recorded_maps(args, record) -> dict:
    """The parameter maps --params-from's record brings, where no option replaces them:
    a normalisation's ``--param-map``s, or a fit's fitted maps (``{field: path}``)."""
    if record is None:
        return {}
    flags = {field: flag for flag, field, _, _ in HAPKE_OPTIONS}
    maps = {}
    for field, path in normalisation_maps(args, record).items():  # those no option replaces
        if path is None:
            raise ValueError(
                f"--params-from {args.params_from} records a {field} map given as an "
                f"array; give it again (--param-map {flags[field][2:]}=RASTER)"
            )
        maps[field] = Path(path)
    fitted = fitted_maps(args, record)
    if "roughness" in fitted:  # a fit's map is in radians, --param-map roughness-deg in degrees
        raise ValueError(
            f"--params-from {args.params_from} is a fit's output with a fitted "
            f"roughness map in radians ({fitted['roughness']}); normalize reads "
            "roughness maps in degrees: convert it and give --param-map "
            "roughness-deg=RASTER"
        )
    return {**maps, **{field: Path(path) for field, path in fitted.items()}}
