"""`SampleSettings`: every option of the posterior sampling, declared once.

`lumaxlike.sample`, `sample_file`, `sample_dataarray` (and ``DataArray.hapke.sample``)
take these by name or as ``settings=``; ``lumaxlike sample`` takes those the command line
offers as flags (``--num-samples``, ``--shared``); `lumaxlike._declared_options` derives it
from the fields below. The options of the problems, which `fit` has too (``refl_sigma``,
``observation_limits``, ``min_observations``, ``shared``, ``prior``), are `FitSettings`'
declarations (`option_of`). What is no option stays each front end's own argument: the
data, the model (``params``, ``free``, ``bounds``: the flat prior's support), the
warm-start fit's solver (``fit_solver``), what a call returns (``return_samples``) and
where the work runs (``chunk_size``, the run's options). To add an option: a field here
and its test (docs/design.md, "How to add an option").

Imports nothing heavy: the command line's parser is built from it.
"""

from __future__ import annotations

import argparse
import math
import numbers
from dataclasses import dataclass
from typing import Any

from .._declared_options import DeclaredOptions, option, option_of, positive_float, positive_int
from .._inverse.fit.options import FitSettings

__all__ = ["DEFAULT_INTEGRATION_STEPS", "SampleSettings"]

# Leapfrog steps per HMC transition (fixed, so every lane of the batch does the same
# work). 12 in the coordinates of `transport` (its shear straightens the b-c ridge):
# on the ridge problems of tests/test_sample.py (w, b, c free; 7 problems x seeds 5-10)
# 8 steps left R-hat above 1.01 in 2 of 42 runs (a chain slow to leave the high-c end),
# 12 in none, with a median min-ESS of 1970 from 4 x 1000 draws; 16 cost a third more
# for no fewer failures (benchmarks/bench_sample.py has the w, b, c, theta-bar figures).
DEFAULT_INTEGRATION_STEPS = 12


def _integer(value):
    """An integer as a Python int (a NumPy one too), anything else as it is (refused by
    the check)."""
    if isinstance(value, numbers.Integral) and not isinstance(value, bool):
        return int(value)
    return value


def _positive_integer(name: str, value) -> None:
    # the least that sampling needs (2 chains, 4 draws, 10 warm-up steps) is `sample`'s
    # check, whose messages name the Python options on the command line too
    from .._shapes import check_positive_int

    check_positive_int(name, value)


def _positive(name: str, value) -> None:
    if not float(value) > 0.0:
        raise ValueError(f"{name} must be positive, got {value!r}")


def _above_one(name: str, value) -> None:
    if not float(value) > 1.0:
        raise ValueError(f"{name} must exceed 1, got {value!r}")


def _numbers(text: str) -> float | list[float]:
    """The command line's one number, or several comma-separated (one per band)."""
    try:
        values = [float(item) for item in text.split(",")]
    except ValueError:
        values = []
    if not values or not all(math.isfinite(v) for v in values):
        raise argparse.ArgumentTypeError(
            f"expected a number or a comma-separated list of numbers, got {text!r}"
        )
    return values[0] if len(values) == 1 else values


@dataclass(frozen=True)
class SampleSettings(DeclaredOptions):
    """How the posterior of the free Hapke parameters of every pixel and band is sampled:
    the options of `lumaxlike.sample`, `lumaxlike.sample_file`,
    `lumaxlike.sample_dataarray` (each takes them by name, or as one ``settings=``) and
    ``lumaxlike sample`` (a flag each where it has one: ``--num-samples 2000``). Each is
    declared once: the problems' options as `lumaxlike.FitSettings` declares them, the
    sampler's below; its meaning here (the command line's help reads it from here).

    Attributes:
        refl_sigma: 1-sigma Gaussian noise of every observation in its units (the cubes'
            for files and the command line; r [1/sr] for `sample`), one number or one per
            band; no default: it sets the posterior's width.
        observation_limits: {"incidence" | "emission" | "phase": (lower, upper)} [rad],
            closed; an observation outside is left out of its problem (None: no limits;
            the file function also takes them in degrees, ``observation_limits_deg``,
            the command line as --incidence-range, --emission-range, --phase-range).
        min_observations: valid observations a problem needs, else its status is
            TOO_FEW_OBSERVATIONS (None: its free parameters + 1).
        shared: sampled parameters (not w) that take one value per pixel for all its
            bands: each pixel's bands are one joint problem; their maps, and status,
            acceptance and divergences, have no band (files: repeat in every band layer).
        prior: {name: (mean, sigma)} Gaussian priors on free parameters, in their units,
            times the flat prior within the bounds (scalars, or for `sample` arrays
            broadcasting to the parameter's map; sigma inf: none) (None: flat).
        num_samples: draws kept per chain after the warm-up, at least 4.
        num_chains: chains per problem, at least 2 (R-hat compares them).
        num_warmup: adaptation transitions per chain (discarded), at least 10.
        seed: the random seed: the draws depend on it and the problem's position alone
            (files and xarray: each block of rows, or chunk, draws its own stream from it).
        min_ess: a problem whose bulk or tail ESS is below this in any parameter is
            NOT_MIXED.
        max_rhat: a problem whose R-hat exceeds this in any parameter is NOT_MIXED.
        integration_steps: leapfrog steps per HMC transition.

    Raises:
        ValueError: naming the option, for a value its check refuses (those that need the
            data, such as refl_sigma against the bands or prior against free, are checked
            by `lumaxlike.sample`).
    """

    # one per band on the command line too; required there (the Python front ends
    # refuse None); no old spelling: sample never took sigma
    refl_sigma: Any = option_of(
        FitSettings,
        "refl_sigma",
        parse=_numbers,
        metavar="VALUE[,...]",
        aliases=(),
        old_names=(),
        required=True,
    )
    observation_limits: Any = option_of(FitSettings, "observation_limits")
    min_observations: int | None = option_of(FitSettings, "min_observations")
    shared: Any = option_of(FitSettings, "shared")
    prior: Any = option_of(FitSettings, "prior")
    num_samples: int = option(
        1000, convert=_integer, check=_positive_integer, parse=positive_int, metavar="N"
    )
    num_chains: int = option(
        4, convert=_integer, check=_positive_integer, parse=positive_int, metavar="N"
    )
    num_warmup: int = option(
        300, convert=_integer, check=_positive_integer, parse=positive_int, metavar="N"
    )
    seed: int = option(0, parse=int, metavar="N")
    min_ess: float = option(400.0, check=_positive, parse=positive_float, metavar="N")
    max_rhat: float = option(1.01, check=_above_one, parse=positive_float, metavar="VALUE")
    integration_steps: int = option(
        DEFAULT_INTEGRATION_STEPS,
        convert=_integer,
        check=_positive_integer,
        parse=positive_int,
        metavar="N",
    )
