"""``lumaxlike thermal``: remove the thermal emission of a cube file (temperature and
corrected reflectance per pixel)."""

from __future__ import annotations

import argparse

from .._thermal.options import ThermalSettings
from .inputs import add_inputs
from .model import model_from_options, read_record, resolve_settings
from .operation import add_command, copy_options, run_command
from .products import resolve_product_options

__all__ = ["add_parser", "run"]

HELP = "remove thermal emission: temperature and corrected reflectance per pixel"

DESCRIPTION = """\
Thermal-emission removal (issue 46): each pixel's temperature from a continuum fit over a
window short of the 3 um band (Clark et al. 2011's assumption; or each band's w with a
prior continued from shorter bands; or a given T), and every
band's reflectance with the emission eps B(T) d^2 / F removed (eps = 1 - r_hd of the same
Hapke model, Kirchhoff's law), streamed by blocks of rows. See lumaxlike.remove_thermal.

Writes OUT (the corrected cube: r for --units r, I/F for radf and radiance) and siblings
OUT_w, OUT_temperature, OUT_temperature_sigma [K], OUT_status (NOT_CONSTRAINED: T's 95 %
upper limit, nothing removed); netCDF/zarr hold them as variables. The Sun's spectrum and
distance are the product's (--solar-spectrum, --solar-distance or the label's). The
options of `lumaxlike invert` work the same here, except: --units takes r, radf or
radiance (reff is refused: its incidence normalisation hides the geometry the emissivity
needs), there is no --parameters (run `lumaxlike parameters` on OUT_w), --temperature is
for --method given only, and --refl-sigma (1-sigma of the cube's values, per band) also
sets the emission's significance test: without it the noise is estimated from each
pixel's residual over the window, and fewer warm pixels are called CONVERGED
(docs/thermal.md). A pixel is CONVERGED only where the emission is significant; a cold
one is NOT_CONSTRAINED; BAND_FAILED where some band could not be corrected (NaN there).
"""

EPILOG = """\
example (--refl-sigma: the radiance's 1-sigma, here one value for every band):
  lumaxlike thermal M3_L1B_RDN.IMG --geometry M3_L1B_OBS.IMG --units radiance \\
      --b 0.25 --c 0.3 --roughness-deg 20 --window 2.3,2.65 --refl-sigma 0.05 \\
      --out corrected.nc
"""
# `invert`'s options that `thermal` does not take (refused by the parser, by name)
NOT_TAKEN = ("--parameters", "--units")
UNITS = ("r", "radf", "radiance")


def _drop_option(parser: argparse.ArgumentParser, flag: str) -> None:
    """Take the option ``flag`` (copied from ``invert``) off ``parser`` only."""
    action = parser._option_string_actions[flag]
    parser._remove_action(action)
    for name in action.option_strings:
        del parser._option_string_actions[name]
    for group in parser._action_groups + parser._mutually_exclusive_groups:
        if action in group._group_actions:
            group._group_actions.remove(action)


def add_parser(commands, invert) -> None:
    """``lumaxlike thermal``: every option of ``invert`` plus the thermal settings."""
    thermal = add_command(commands, "thermal", HELP, DESCRIPTION, EPILOG)
    copy_options(thermal, invert)
    for flag in NOT_TAKEN:
        _drop_option(thermal, flag)
    units = {
        "choices": UNITS,
        "help": "the cube's units: r = bidirectional reflectance [1/sr], radf = I/F = pi r, "
        "radiance [W m^-2 sr^-1 um^-1] (converted with --solar-spectrum and the Sun's "
        "distance); reff is refused. Required, unless --params-from gives it",
    }
    add_inputs(thermal, "units", units=units)
    # every option of `ThermalSettings` (lumaxlike._thermal.options), as it declares it
    ThermalSettings.add_arguments(thermal.add_argument_group("thermal settings"))
    thermal.set_defaults(handler=run)


def run(args) -> int:
    """Run ``lumaxlike thermal`` on parsed ``args``; return its exit code."""
    from .._files import remove_thermal_file
    from .._files.arguments import FromBands
    from .._operations.thermal import THERMAL

    options = ThermalSettings.from_arguments(args)
    args.parameters = None  # not an option of this command (`invert`'s readers ask)
    record = read_record(args)
    settings = resolve_settings(args, record)
    resolve_product_options(args, record, settings["units"])
    described = (
        f"{args.cube} ({settings['units']}) -> {args.out}, method {options.method}, "
        f"solver {settings['solver']}"
    )
    return run_command(
        THERMAL,
        remove_thermal_file,
        args,
        args.cube,
        described=described,
        params=FromBands(lambda bands: _one_model(args, bands, record)),
        settings=options,
        **settings,
    )


def _one_model(args, bands: int, record):
    """The model of every band (the options', else ``record``'s), made once the run has
    opened the cube (its ``bands``); ValueError for one that differs between bands."""
    models = model_from_options(args, bands, record)
    if len({id(m) for m in models}) != 1:
        raise ValueError("lumaxlike thermal takes one model for every band")
    return models[0]
