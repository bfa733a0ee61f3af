"""The maps of a `SampleResult` as the front ends write them: per free parameter its five
quantiles, mean, R-hat, bulk and tail ESS, then status, acceptance, divergences and observations;
and the random stream of a block or chunk of pixels.

Shared by the file front end (`lumaxlike.sample_file`, one map per field) and the xarray
front end (`lumaxlike.sample_dataarray`, the five quantiles on a ``quantile`` dim).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from .._status import Status
from .program import QUANTILE_LEVELS

__all__ = [
    "PARAMETER_SUMMARIES",
    "QUANTILE_SUFFIXES",
    "SAMPLE_LAYOUT_INTEGERS",
    "check_sample_options",
    "chunk_seed",
    "quantile_field",
    "result_maps",
    "sample_field_attrs",
    "sample_fields",
    "sample_layout",
]

QUANTILE_SUFFIXES = tuple(f"q{round(1000 * level):03d}" for level in QUANTILE_LEVELS)
"""The file maps' names for the quantile levels, in per mille: q025, q160, q500, q840,
q975 (2.5, 16, 50, 84, 97.5 %)."""

PARAMETER_SUMMARIES = ("mean", "rhat", "ess", "ess_tail")
"""The per-parameter summaries both front ends write besides the quantiles, each the
`SampleResult` field of that name (``{name: array}``), as the map ``<summary>_<name>``."""

SAMPLE_LAYOUT_INTEGERS = {"status": np.int8, "divergences": np.int32, "observations": np.int32}
"""The integer maps of a sample output and their types (the others are floating)."""

_PARAMETER_UNITS = {"roughness": "rad"}


def quantile_field(name: str, level_index: int) -> str:
    """The file map of parameter ``name``'s quantile ``QUANTILE_LEVELS[level_index]``,
    e.g. ``w_q500`` for the median of w."""
    return f"{name}_{QUANTILE_SUFFIXES[level_index]}"


def chunk_seed(seed: int, first_pixel: int) -> int:
    """The `lumaxlike.sample` seed of a block or chunk of pixels whose first pixel has the
    linear index ``first_pixel`` in the image: one independent stream per block, the same
    whatever else is in the run (so a resumed run and the xarray front end on the same
    chunks draw the same numbers)."""
    return int(np.random.SeedSequence([int(seed), int(first_pixel)]).generate_state(1)[0])


def sample_fields(free: Sequence[str]) -> tuple[str, ...]:
    """The maps a file run writes, in order: per free parameter ``<name>_q025``,
    ``<name>_q160``, ``<name>_q500``, ``<name>_q840``, ``<name>_q975``, ``mean_<name>``,
    ``rhat_<name>``, ``ess_<name>``, ``ess_tail_<name>`` (`PARAMETER_SUMMARIES`); then
    ``status``, ``acceptance``, ``divergences``, ``observations``."""
    fields = []
    for name in free:
        fields += [quantile_field(name, k) for k in range(len(QUANTILE_LEVELS))]
        fields += [f"{summary}_{name}" for summary in PARAMETER_SUMMARIES]
    return (*fields, "status", "acceptance", "divergences", "observations")


def sample_field_attrs(free: Sequence[str]) -> dict[str, dict]:
    """CF-style attributes (``long_name``, ``units``) of every map of `sample_fields`."""
    attrs = {}
    for name in free:
        unit = _PARAMETER_UNITS.get(name, "1")
        for k, level in enumerate(QUANTILE_LEVELS):
            attrs[quantile_field(name, k)] = {
                "long_name": f"posterior {100 * level:g} % quantile of Hapke parameter {name}",
                "units": unit,
            }
        attrs[f"mean_{name}"] = {"long_name": f"posterior mean of {name}", "units": unit}
        attrs[f"rhat_{name}"] = {
            "long_name": f"rank-normalised split R-hat of {name} (bulk and tail, the larger)",
            "units": "1",
        }
        attrs[f"ess_{name}"] = {
            "long_name": f"bulk effective sample size of {name} over all chains",
            "units": "1",
        }
        attrs[f"ess_tail_{name}"] = {
            "long_name": f"tail effective sample size of {name} (5 % and 95 % quantiles)",
            "units": "1",
        }
    attrs["status"] = {
        "long_name": "sample status (lumaxlike.Status): CONVERGED where the chains mixed, "
        "NOT_MIXED where they did not, MULTIMODAL where they missed a mode near a bound, "
        "else why the problem was not sampled",
        **Status.flag_attrs(),
    }
    attrs["acceptance"] = {"long_name": "mean HMC acceptance probability", "units": "1"}
    attrs["divergences"] = {"long_name": "divergent HMC transitions", "units": "1"}
    attrs["observations"] = {"long_name": "valid observations sampled", "units": "1"}
    return attrs


def result_maps(result, free: Sequence[str]) -> dict[str, np.ndarray]:
    """``{field of sample_fields: array pixels + (bands,)}`` of a `SampleResult`."""
    maps = {}
    for name in free:
        for k in range(len(QUANTILE_LEVELS)):
            maps[quantile_field(name, k)] = result.quantiles[name][..., k]
        for summary in PARAMETER_SUMMARIES:
            maps[f"{summary}_{name}"] = getattr(result, summary)[name]
    maps.update(
        status=result.status,
        acceptance=result.acceptance,
        divergences=result.divergences,
        observations=result.observations,
    )
    return maps


def sample_layout(free: Sequence[str]):
    """The `FieldLayout` of a file run's maps (main map: the median of w, ``w_q500``)."""
    from .._io.write.layout import FieldLayout

    return FieldLayout(
        main=quantile_field("w", QUANTILE_LEVELS.index(0.5)),
        attrs=sample_field_attrs(free),
        band_names={},
        integer=dict(SAMPLE_LAYOUT_INTEGERS),
    )


def check_sample_options(params, options: Mapping, n_bands: int, n_obs: int) -> None:
    """`lumaxlike.sample`'s argument checks, run before any block or chunk (a bad option
    raises here, naming it, not inside a task): `sample` with ``options`` on one pixel
    without a finite observation, which checks every argument and samples nothing."""
    from .sample import sample

    up = np.tile([0.0, 0.0, 1.0], (n_obs, 1))
    sample(np.full((1, n_bands, n_obs), np.nan), up, up, up, params, **options)
