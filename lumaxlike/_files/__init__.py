"""The file front ends: a cube file (or a stack of them) in, result maps out.

One module per command, each the file twin of an operation: :mod:`.invert`
(:func:`invert_file`), :mod:`.normalize` (:func:`normalize_file`), :mod:`.unmix`
(:func:`unmix_file`), :mod:`.fit` (:func:`fit_file`; its regional fits :mod:`.regions`),
:mod:`.sample` (:func:`sample_file`), :mod:`.spectral` (:func:`spectral_parameters_file`). Each checks its arguments, opens the readers and
the writer (:mod:`lumaxlike._io`) and says how a block is read; the run layer
(:mod:`lumaxlike._run`) streams the blocks. What the commands share is written once, a
module each: :mod:`.arguments` (the argument checks), :mod:`.products` (a mission product
opened, its geometry resolved), :mod:`.blocks` (blocks of rows, how a block of a cube is
read), :mod:`.outputs` (journal, writer and block loop), :mod:`.records` (the recorded
call), :mod:`.summaries` (status counts, why nothing converged), :mod:`.wavelengths` (band
centres in um), :mod:`.inputs` (the input files no output may replace and ``--resume``
fingerprints); :mod:`.stacks` checks `fit_file`'s stack of cubes, :mod:`.good_bands`
leaves its bad bands out of joint and regional fits.

Public names (re-exported by :mod:`lumaxlike`): :func:`invert_file`,
:func:`normalize_file`, :func:`unmix_file`, :func:`fit_file`, :func:`sample_file`,
:func:`spectral_parameters_file`, :func:`remove_thermal_file` (:mod:`.thermal`).
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .fit import fit_file as fit_file
    from .invert import invert_file as invert_file
    from .normalize import normalize_file as normalize_file
    from .sample import sample_file as sample_file
    from .spectral import spectral_parameters_file as spectral_parameters_file
    from .thermal import remove_thermal_file as remove_thermal_file
    from .unmix import UnmixSummary as UnmixSummary
    from .unmix import unmix_file as unmix_file

__all__ = [
    "UnmixSummary",
    "fit_file",
    "invert_file",
    "normalize_file",
    "remove_thermal_file",
    "sample_file",
    "spectral_parameters_file",
    "unmix_file",
]

#: public name -> its module: each imported at its first use, so that a command imports
#: its own front end only (``lumaxlike invert`` neither fit's nor the sampler's blackjax)
_MODULES = {
    "fit_file": "fit",
    "invert_file": "invert",
    "normalize_file": "normalize",
    "remove_thermal_file": "thermal",
    "sample_file": "sample",
    "spectral_parameters_file": "spectral",
    "UnmixSummary": "unmix",
    "unmix_file": "unmix",
}


def __getattr__(name: str):
    """A public name, imported from its module at its first use."""
    if name not in _MODULES:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    import importlib

    value = getattr(importlib.import_module(f".{_MODULES[name]}", __name__), name)
    globals()[name] = value
    return value
