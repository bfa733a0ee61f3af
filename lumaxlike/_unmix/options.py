"""`UnmixSettings`: every option of the unmixing, declared once.

`lumaxlike.unmix`, `unmix_file`, `unmix_dataarray` (and ``DataArray.hapke.unmix``) take
these by name or as ``settings=``; ``lumaxlike unmix`` takes each as a flag (``--route``,
``--no-sum-to-one``, ``--free``); `lumaxlike._declared_options` derives it from the
fields below. What is no option stays each front end's own argument: the data and what is
shaped like it (``wavelengths``, the band centres), the endmembers (``endmembers``, with
their grain sizes and, from optical constants, the bounds of the free ones), the model
(``params``), the solver and where the work runs (``chunk_size``, the run's options). To
add an option: a field here and its test (docs/design.md, "How to add an option").

Imports nothing heavy: the command line's parser is built from it.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from typing import Any

from .._declared_options import (
    DeclaredOptions,
    option,
    option_of,
    positive,
    positive_float,
    positive_int,
)
from .._inverse.defaults import DEFAULT_MAX_ITER
from .._inverse.options import InvertSettings

__all__ = ["ROUTES", "UnmixSettings"]

ROUTES = ("one_step", "two_step")


def _positive_integer(name: str, value) -> None:
    from .._shapes import check_positive_int

    check_positive_int(name, value)


def _true_or_false(name: str, value) -> None:
    import numpy as np

    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")


def _names(value) -> tuple:
    """``free`` as a tuple of names: one name, a sequence of them, or (as the command
    line gives them) comma-separated names."""
    if isinstance(value, str):
        return tuple(name.strip() for name in value.split(",") if name.strip())
    try:
        return tuple(value)
    except TypeError:
        raise ValueError(f"free must name parameters, got {value!r}") from None


def _free_names(name: str, value) -> None:
    from .._unmix.optical import check_free_names

    check_free_names(value)


def _starts(name: str, value) -> None:
    from .._unmix.optical_starts import check_starts

    check_starts(value)


@dataclass(frozen=True)
class UnmixSettings(DeclaredOptions):
    """How each pixel's mass fractions are solved: the options of `lumaxlike.unmix`,
    `lumaxlike.unmix_file`, `lumaxlike.unmix_dataarray` (each takes them by name, or as
    one ``settings=``) and ``lumaxlike unmix`` (a flag each: ``--max-iter 100``). Each is
    declared once, below: its default and check there, its meaning here (the command
    line's help reads it from here). The solver itself is the front ends' ``solver``
    argument (a name or a `lumaxlike.SolverOptions`).

    Attributes:
        route: one_step: Levenberg-Marquardt in reflectance space (weighs the noise
            correctly); two_step: `lumaxlike.invert` to w, then constrained least squares
            in w (faster; not with `Endmembers.phase`) (docs/unmixing.md#which-route).
        sum_to_one: the fractions sum to one; false fits an unmodelled, perfectly
            absorbing remainder (`UnmixResult.remainder`, the map OUT_remainder) and
            gives the fractions relative to the modelled endmembers' total.
        max_iter: Levenberg-Marquardt steps per pixel at most (`lumaxlike.invert`'s per
            band on the two-step route); None: 50.
        tol: convergence tolerance on the step of every cross-section fraction [-];
            None: 1e-10, 1e-5 where the JAX solver computes in float32.
        refl_sigma: standard uncertainty of the reflectance in its units (the cube's for
            files and the command line, r or radf; r [1/sr] for `unmix`, which also takes
            one per band): weighs the bands and scales the covariance and the sigma map
            (None: scaled by the residual variance).
        free: parameters fitted per pixel besides the fractions: grain_size, npfe or
            both, with endmembers from optical constants (`Endmembers.from_optical_constants`,
            which holds their bounds; docs/unmixing.md); the grain-size and npFe0 maps
            are then written too (none: the grain sizes and npFe0 as given).
        starts: with free parameters, starts per pixel (grain sizes scaled by 3, 1/3,
            ...), the CONVERGED one of lowest cost kept; None: 1.

    Raises:
        ValueError: naming the option, for a value its check refuses (those that need the
            endmembers or the bands, such as free against the endmembers or refl_sigma
            per band, are checked by the unmixing).
    """

    route: str = option("one_step", choices=ROUTES, parse=str)
    sum_to_one: Any = option(True, check=_true_or_false, parse=bool)
    # None, not 50: the file and xarray records keep max_iter as given (None: the default)
    max_iter: int | None = option(
        None, check=_positive_integer, parse=positive_int, metavar="N", shown=str(DEFAULT_MAX_ITER)
    )
    tol: float | None = option(
        None,
        unit="-",
        check=positive("-"),
        parse=positive_float,
        metavar="VALUE",
        shown="1e-10",
    )
    # checked where the bands are known (`check_band_sigma`, the file and xarray checks)
    refl_sigma: Any = option_of(InvertSettings, "refl_sigma")
    # checked against the endmembers, route and sum_to_one by the unmixing (`check_free`)
    free: tuple = option((), convert=_names, check=_free_names, parse=str, metavar="NAME[,NAME]")
    starts: int | None = option(None, check=_starts, parse=positive_int, metavar="N", shown="1")

    def for_blocks(self, solver, free: tuple, starts: int | None) -> UnmixSettings:
        """The options a block task runs `lumaxlike.unmix` with: ``solver``'s max_iter
        and tol (the run's `lumaxlike.SolverOptions`, these merged in), no refl_sigma
        (each block gives its own, in r), ``free`` and ``starts`` as the front end checked
        them against the endmembers."""
        return dataclasses.replace(
            self,
            max_iter=solver.max_iter,
            tol=solver.tol,
            sum_to_one=bool(self.sum_to_one),
            refl_sigma=None,
            free=free,
            starts=starts,
        )

    def solver_keywords(self) -> dict:
        """``max_iter`` and ``tol`` as `lumaxlike.SolverOptions` takes them beside a front
        end's ``solver`` (None: the object's, else the unmixing's default)."""
        return {"max_iter": self.max_iter, "tol": self.tol}
