"""The file front ends: a cube file (or a stack of them) in, result maps out.

One module per command, each the file twin of an operation: :mod:`.invert`
(:func:`invert_file`), :mod:`.normalize` (:func:`normalize_file`), :mod:`.unmix`
(:func:`unmix_file`), :mod:`.fit` (:func:`fit_file`). Each checks its arguments, opens the
readers and the writer (:mod:`lumaxlike._io`) and says how a block is read; the run layer
(:mod:`lumaxlike._run`) streams the blocks. :mod:`.common` holds what the commands share,
:mod:`.stacks` the checks on `fit_file`'s stack of cubes.

Public names (re-exported by :mod:`lumaxlike`): :func:`invert_file`,
:func:`normalize_file`, :func:`unmix_file`, :func:`fit_file`.
"""

from .fit import fit_file as fit_file
from .invert import invert_file as invert_file
from .normalize import normalize_file as normalize_file
from .unmix import UnmixSummary as UnmixSummary
from .unmix import unmix_file as unmix_file

__all__ = ["UnmixSummary", "fit_file", "invert_file", "normalize_file", "unmix_file"]
