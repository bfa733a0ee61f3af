"""`InvertSettings`: every option of the inversion for w, declared once.

`lumaxlike.invert`, `invert_file`, `invert_dataarray` (and ``DataArray.hapke.invert``)
take these by name or as ``settings=``; ``lumaxlike invert`` takes each as a flag
(``--max-iter``); `lumaxlike._declared_options` derives all of it from the fields below.
The normalisation inverts first and takes them too (`NormalizeSettings` adds its own).
To add an option: a field here and its test (docs/design.md, "How to add an option").

Imports nothing heavy: the command line's parser is built from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from .._declared_options import DeclaredOptions, option, positive, positive_float, positive_int
from .defaults import DEFAULT_MAX_ITER

__all__ = ["InvertSettings"]


def _positive_integer(name: str, value) -> None:
    from .._shapes import check_positive_int

    check_positive_int(name, value)


@dataclass(frozen=True)
class InvertSettings(DeclaredOptions):
    """How each pixel and band's w is solved: the options of `lumaxlike.invert`,
    `lumaxlike.invert_file`, `lumaxlike.invert_dataarray` (each takes them by name, or
    as one ``settings=``) and ``lumaxlike invert`` (a flag each: ``--max-iter 100``);
    `lumaxlike.NormalizeSettings` holds them too. Each is declared once, below: its
    default, unit, check and record there, its meaning here (the command line's help reads
    it from here). The solver itself is the front ends' ``solver`` argument (a name or a
    `lumaxlike.SolverOptions`).

    Attributes:
        max_iter: Levenberg-Marquardt steps per pixel and band at most.
        tol: convergence tolerance on the solver's step in w [-]; None: 1e-10 for
            float64 data, 1e-5 for float32.
        refl_sigma: standard uncertainty of the reflectance in its units (the cube's for
            files and the command line; r [1/sr] for `invert`, which also takes one per
            band): the sigma map of w is then computed (None: none).

    Raises:
        ValueError: naming the option, for a value its check refuses.
    """

    max_iter: int = option(
        DEFAULT_MAX_ITER, check=_positive_integer, parse=positive_int, metavar="N"
    )
    tol: float | None = option(
        None,
        unit="w",
        check=positive("w"),
        parse=positive_float,
        metavar="VALUE",
    )
    # checked where the bands are known (`check_band_sigma`, the file and xarray checks)
    refl_sigma: Any = option(
        None, parse=positive_float, metavar="VALUE", aliases=("--sigma",), old_names=("sigma",)
    )

    def solver_keywords(self) -> dict:
        """``max_iter`` and ``tol`` as `lumaxlike.SolverOptions` takes them beside a front
        end's ``solver`` (a name or the object): None where not given (``max_iter`` at its
        default), so that the object's, else the operation's default, holds."""
        max_iter = None if self.max_iter == DEFAULT_MAX_ITER else self.max_iter
        return {"max_iter": max_iter, "tol": self.tol}
