"""`FitSettings`: every option of the fit of Hapke parameters, declared once.

`lumaxlike.fit`, `fit_file`, `fit_dataarray` (and ``DataArray.hapke.fit``) take these by
name or as ``settings=``; ``lumaxlike fit`` takes those the command line offers as flags
(``--max-iter``, ``--shared``); `lumaxlike._declared_options` derives it from the fields
below. What is no option stays each front end's own argument: the data and what is shaped
like it (``start``, a value or map per parameter; ``regions``, a label map, raster or
DataArray), the model (``params``, ``free`` and ``bounds``, the space the parameters live
in), the solver and where the work runs (``chunk_size``, the run's options). To add an
option: a field here and its test (docs/design.md, "How to add an option").

Imports nothing heavy: the command line's parser is built from it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..._declared_options import (
    DeclaredOptions,
    option,
    option_of,
    positive,
    positive_float,
    positive_int,
)
from ..defaults import DEFAULT_FIT_MAX_ITER
from ..options import InvertSettings

__all__ = ["FitSettings"]


def _positive_integer(name: str, value) -> None:
    from ..._shapes import check_positive_int

    check_positive_int(name, value)


def _names(text: str) -> tuple[str, ...]:
    """The command line's comma-separated names (``roughness,hs``)."""
    return tuple(item.strip() for item in text.split(",") if item.strip())


@dataclass(frozen=True)
class FitSettings(DeclaredOptions):
    """How the free Hapke parameters of every pixel and band are fitted: the options of
    `lumaxlike.fit`, `lumaxlike.fit_file`, `lumaxlike.fit_dataarray` (each takes them by
    name, or as one ``settings=``) and ``lumaxlike fit`` (a flag each where it has one:
    ``--max-iter 100``). Each is declared once, below: its default and check there, its
    meaning here (the command line's help reads it from here). The joint options
    (``shared``, ``prior``, ``regional``, ``starts``, ``profile``) are described in
    docs/joint-fits.md.

    Attributes:
        max_iter: Levenberg-Marquardt steps per problem at most.
        tol: convergence tolerance on the step of every free parameter; None: 1e-10 for
            float64 data, 1e-5 for float32.
        refl_sigma: standard uncertainty of every observation in its units (the cubes'
            for files and the command line; r [1/sr] for `fit`, which also takes one per
            band): the covariance is then (J^T J)^-1 refl_sigma^2; None: the covariance
            is scaled by the residual variance.
        observation_limits: {"incidence" | "emission" | "phase": (lower, upper)} [rad],
            closed; an observation outside is left out of its problem (None: no limits;
            the file function also takes them in degrees, ``observation_limits_deg``,
            the command line as --incidence-range, --emission-range, --phase-range).
        min_observations: valid observations a problem needs, else its status is
            TOO_FEW_OBSERVATIONS (None: its free parameters + 1).
        shared: fitted parameters (not w) that take one value per pixel for all its
            bands: each pixel is one joint problem, with degrees of freedom for signal
            and the cost as maps.
        prior: {name: (mean, sigma)} Gaussian priors on free parameters, in their units
            (scalars, or for `fit` arrays broadcasting to the parameter's map): a MAP
            fit; needs refl_sigma (None: none).
        regional: fitted parameters (not w) that take one value per region of the
            regions label map for all its pixels and bands, fitted jointly with every
            pixel's own parameters.
        starts: fits of a joint problem (shared or prior) from several starts, each
            problem keeping its lowest converged minimum, MULTIMODAL where another is
            near: an int n (the usual start and n - 1 grid points over the shared
            parameters' bounds; `fit` also takes a sequence of {name: value} laid over
            start). None: with shared (no regions) the usual start and one probe start
            low in the shared opposition parameters (two fits), else one start.
        profile: shared names whose profile-likelihood 2-sigma interval `fit` gives in
            `JointFitResult.profile` (10 more fits; needs refl_sigma; no map, so `fit`
            only).

    Raises:
        ValueError: naming the option, for a value its check refuses (those that need the
            data, such as min_observations against the observations or refl_sigma
            against the bands, are checked by the fit).
    """

    max_iter: int = option(
        DEFAULT_FIT_MAX_ITER, check=_positive_integer, parse=positive_int, metavar="N"
    )
    tol: float | None = option(
        None,
        check=positive("-"),
        parse=positive_float,
        metavar="VALUE",
        shown="1e-10 (float64), 1e-5 (float32)",
    )
    # checked where the bands are known (`check_band_sigma`, the file and xarray checks)
    refl_sigma: Any = option_of(InvertSettings, "refl_sigma")
    # the command line's are its angle ranges, in degrees (`add_stack_selection`)
    observation_limits: Any = option(None)
    # checked against the observations (`fit`'s, `fit_dataarray`'s checks)
    min_observations: int | None = option(None, metavar="N")
    # names checked against free by the fit (`joint.check_shared`)
    shared: Any = option(
        (),
        parse=_names,
        metavar="NAME[,...]",
    )
    # the command line's is --prior NAME=MEAN:SIGMA, repeated (`_cli.options.prior_dict`)
    prior: Any = option(None)
    regional: Any = option(
        (),
        parse=_names,
        metavar="NAME[,...]",
    )
    # checked by `joint.restarts.check_starts`, which knows whether the fit is joint
    starts: Any = option(None, parse=positive_int, metavar="N")
    profile: Any = option(())

    def solver_keywords(self) -> dict:
        """``max_iter`` and ``tol`` as `lumaxlike.SolverOptions` takes them beside a front
        end's ``solver``: None where not given (``max_iter`` at its default), so that the
        object's, else the fit's default, holds."""
        max_iter = None if self.max_iter == DEFAULT_FIT_MAX_ITER else self.max_iter
        return {"max_iter": max_iter, "tol": self.tol}
