"""`sample_file`: the posterior of the free Hapke parameters over a stack of co-registered
cube files, streamed by blocks of rows (the file front end of `lumaxlike.sample`; the
command ``lumaxlike sample``).

As `lumaxlike.fit_file`: each cube is one observation of every pixel, with its own
geometry raster; block by block the same rows of every cube are stacked along an
observation axis and sampled; the maps go to temporary files published atomically at the
end; a killed run continues with ``resume=True`` from its journaled blocks. Memory grows
with the block (its draws), not the image.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .._declared_options import refuse_unknown, takes_options
from .._inverse.fit.arguments import default_bounds
from .._inverse.joint.priors import check_file_priors
from .._io.read.units import check_units, uncertainty_to_r
from .._io.write.writers import result_paths
from .._operations.sample import SAMPLE
from .._options import RunOptions, deprecated_keywords_merged, run_and_product_but
from .._params import HapkeParams
from .._run.pool import BlockPool
from .._run.progress import InversionSummary
from .._sample.maps import (
    check_sample_options,
    quantile_field,
    sample_fields,
    sample_layout,
)
from .._sample.options import SampleSettings
from .._sample.program import QUANTILE_LEVELS
from .._sample.sample import CHUNK_BYTES
from .._shapes import refl_sigma_error
from .arguments import FromBands
from .outputs import BlockSource
from .stack_run import (
    OpenedStack,
    StackInputs,
    StackPlan,
    block_rows,
    run_on_stack,
    stack_arguments,
    stack_paths,
)
from .stacks import stack_limits

__all__ = ["sample_file"]


def _check_sigma(refl_sigma, units: str, bands: int):
    """``refl_sigma`` in ``units`` -> (r [1/sr] scalar or per band, its JSON record)."""
    if units == "reff":  # its r would differ per observation (cos i)
        raise ValueError(
            "sample_file takes units 'r' or 'radf': with 'reff' the noise of r differs per "
            "observation (cos i); give the cubes and refl_sigma as r or radf"
        )
    if refl_sigma is None:
        raise ValueError("refl_sigma is required: the 1-sigma noise of the cubes' values")
    sigma = np.asarray(refl_sigma, float)
    if (
        sigma.ndim > 1
        or (sigma.ndim == 1 and sigma.shape[0] not in (1, bands))
        or not np.all(np.isfinite(sigma) & (sigma > 0.0))
    ):
        raise refl_sigma_error(refl_sigma, bands)
    if sigma.ndim == 1 and sigma.shape[0] == 1:
        sigma = sigma[0]
    record = float(sigma) if sigma.ndim == 0 else [float(v) for v in sigma]
    return uncertainty_to_r(sigma, units), record


# the run's options still taken as keywords (deprecated; no product: cubes of r or radf)
_RUN_KEYWORDS = run_and_product_but("product")


@takes_options(SampleSettings)
def sample_file(
    cubes,
    out_path,
    *,
    geometry,
    params: HapkeParams,
    free,
    units: str,
    dtm=None,
    observation_limits_deg=None,
    command=None,
    run: RunOptions | None = None,
    settings: SampleSettings | None = None,
    **keywords,
) -> InversionSummary:
    """Sample the posterior of the free Hapke parameters per pixel and band over a stack
    of co-registered cube files, and write its quantile maps.

    The file front end of `lumaxlike.sample` (and of ``lumaxlike sample``): each cube is
    one observation of every pixel; block by block the cubes are stacked to (rows, cols,
    bands, observations) and sampled. Each block has its own random stream, from the
    option ``seed`` and its first pixel: the maps depend on the seed and the rows per
    block, not on where the blocks ran nor on an interruption. The maps (``OUT``: the
    median of w; per free parameter the 2.5-97.5 % quantiles, mean, R-hat, bulk and tail
    ESS; status, acceptance, divergences, observations) and the record's
    ``lumaxlike_sample_*`` keys are listed in docs/sampling.md.

    Args:
        cubes: reflectance cube files, one observation each, on one grid with the same
            bands; nodata pixels are missing observations.
        out_path: output path (``.tif``, ``.img``/``.hdr``, ``.nc``, ``.zarr``).
        geometry: one OBS raster per cube (see `lumaxlike.invert_file`), aligned with it.
        params: `lumaxlike.HapkeParams`: the fixed parameters and the warm start's.
        free: names of the sampled parameters, w among them (see `lumaxlike.sample`).
        units: what the cubes hold: ``"r"`` [1/sr] or ``"radf"`` (I/F = pi r).
        dtm: optional DTM on the grid for local normals (shared by all observations).
        observation_limits_deg: the option ``observation_limits`` in degrees (give one
            of the two).
        command: the command line recorded (None: the Python call).
        run: a `lumaxlike.RunOptions`, as for `lumaxlike.invert_file`; its fields
            (``chunk_rows``: rows per block, None for about `lumaxlike.sample`'s chunk,
            64 MB of draws, at least one row; ``overwrite``, ``progress``, ``workers``,
            ``scheduler``, ``resume``), still taken as keywords with a DeprecationWarning.
        settings: the sampling's options as one `lumaxlike.SampleSettings` (None: the
            defaults).
        **keywords: the options of `lumaxlike.SampleSettings` by name, as
            `lumaxlike.sample` takes them (``refl_sigma``, required: the 1-sigma noise of
            the cubes' values in ``units``, a number or one per band; ``prior``, scalar;
            ``shared``, whose maps repeat in every band layer), and the fields of ``run``.

    Returns:
        `InversionSummary` (pixels, bands, time, status counts, outputs).

    Raises:
        ValueError: naming the file or argument: misaligned cubes or rasters, a count of
            geometry rasters that differs from the cubes', a product normalised to a
            standard geometry, units ``"reff"``, a missing or bad refl_sigma, a prior
            map (not scalars), or an option `lumaxlike.sample` refuses (checked before
            any block is read).
        FileNotFoundError, FileExistsError, PermissionError: as `lumaxlike.invert_file`.
        TypeError: a keyword that is none of these.
    """
    settings = SampleSettings.merged(settings, keywords)
    refuse_unknown("sample_file", keywords, _RUN_KEYWORDS)
    run = deprecated_keywords_merged(RunOptions, run, "run", keywords, "sample_file")
    request = _SampleRequest.from_call(locals())
    return _run_sample(request, run, out_path, command)


def _run_sample(request, run, out_path, command) -> InversionSummary:
    """Sample the stack (`run_on_stack`)."""
    inputs = StackInputs(
        request.cubes, request.geometries, out_path, request.units, request.params, request.dtm
    )
    settings = request.settings
    return run_on_stack(
        SAMPLE,
        inputs,
        run=run,
        plan=lambda opened, stack: _plan(request, opened, run, out_path),
        fields=sample_fields(request.free),
        layout=sample_layout(request.free),
        call={
            "params": request.params,
            "free": request.free,
            **({"shared": request.shared} if request.shared else {}),
            "units": request.units,
            "refl_sigma": settings.refl_sigma,
            "seed": settings.seed,
        },
        command=command,
    )


def _plan(request, opened: OpenedStack, run, out_path) -> StackPlan:
    """The sampler's options checked, rows per block from the draws' memory (about
    `lumaxlike.sample`'s chunk, 64 MB, unless ``run.chunk_rows``), each block's task
    arguments and the record."""
    chunk_rows, settings, info = run.chunk_rows, request.settings, opened.info
    if chunk_rows is not None and (int(chunk_rows) != chunk_rows or chunk_rows < 1):
        raise ValueError(f"chunk_rows must be a positive integer, got {chunk_rows!r}")
    sigma_r, sigma_record = _check_sigma(settings.refl_sigma, request.units, info.bands)
    options = request.options(sigma_r)
    check_sample_options(opened.params, options, info.bands, len(request.cubes))
    draws = settings.num_chains * (settings.num_samples + settings.num_warmup)
    row_bytes = info.grid.width * info.bands * draws * len(request.free) * 8
    rows_per_block = block_rows(chunk_rows, row_bytes, CHUNK_BYTES, info.grid.height)
    options["seed"] = int(settings.seed)
    width, params = info.grid.width, opened.params

    def read(rows: slice):  # the block's first pixel and a full block's: its random stream
        block = opened.read(rows) + (params, options)
        return block, {"first_pixel": rows.start * width, "pixels": rows_per_block * width}

    record = {
        "solver": "numba" if params.h_function != "exact" else "jax",  # the warm start's
        "tol": None,
        "max_iter": None,
        "refl_sigma": sigma_record if isinstance(sigma_record, float) else None,
    }
    return StackPlan(
        rows_per_block,
        BlockSource(
            read=read,
            pool_factory=lambda: BlockPool(run.workers, run.scheduler, SAMPLE.block()),
        ),
        record,
        _sample_settings(request, sigma_record, out_path),
        # the sampler's programs are slow to compile: XLA's banner about it is noise
        quiet_compile=run.workers == 1 and run.scheduler is None,  # compiled here
    )


@dataclass(frozen=True)
class _SampleRequest:
    """A `sample_file` call's arguments about the sampling, checked (`from_call`)."""

    cubes: list[Path]
    geometries: list
    params: HapkeParams | FromBands  # made once the cubes are open: `OpenedStack.params`
    free: tuple[str, ...]
    shared: tuple[str, ...]
    units: str
    settings: SampleSettings
    limits: dict
    limits_deg: Mapping | None
    dtm: Any

    @classmethod
    def from_call(cls, call: Mapping) -> _SampleRequest:
        """The request of a `sample_file` call (its ``locals()``), refused naming the
        argument where it cannot be sampled."""
        check_units(call["units"])
        cubes, geometries = stack_arguments(call)
        params, settings = call["params"], call["settings"]
        free, shared = (
            (value,) if isinstance(value, str) else tuple(value)
            for value in (call["free"], settings.shared)
        )
        check_file_priors(settings.prior, free, shared, default_bounds())
        limits, limits_deg = stack_limits(
            settings.observation_limits, call["observation_limits_deg"]
        )
        return cls(
            cubes=cubes,
            geometries=geometries,
            params=params,
            free=free,
            shared=shared,
            units=call["units"],
            settings=settings,
            limits=limits,
            limits_deg=limits_deg,
            dtm=call["dtm"],
        )

    @property
    def prior(self) -> dict:
        """The priors {name: (mean, sigma)}, scalars."""
        return dict(self.settings.prior or {})

    def options(self, sigma_r) -> dict:
        """`lumaxlike.sample`'s keywords: the options, the noise in r and the limits in
        radians (the seed the run's: each block's is made from it)."""
        return {
            "free": self.free,
            **vars(self.settings),
            "refl_sigma": sigma_r,
            "prior": self.prior,
            "shared": self.shared,
            "observation_limits": self.limits,
        }


def _sample_settings(request: _SampleRequest, sigma_record, out_path) -> dict:
    """The sampling's settings recorded beside the common record (``lumaxlike_sample_*``)."""
    settings = request.settings
    median = quantile_field("w", QUANTILE_LEVELS.index(0.5))
    return {
        **stack_paths(request.cubes, request.geometries),
        "free": list(request.free),
        "shared": list(request.shared),
        "prior": {name: [float(v) for v in pair] for name, pair in request.prior.items()},
        "refl_sigma": sigma_record,
        "num_samples": settings.num_samples,
        "num_chains": settings.num_chains,
        "num_warmup": settings.num_warmup,
        "integration_steps": settings.integration_steps,
        "seed": int(settings.seed),
        "min_ess": float(settings.min_ess),
        "max_rhat": float(settings.max_rhat),
        "observation_limits_deg": {
            k: list(map(float, v)) for k, v in (request.limits_deg or {}).items()
        },
        "min_observations": settings.min_observations,
        # the record's param_* keys hold the warm start's values; the posterior's
        # medians are these maps
        "median_maps": {
            name: str(Path(result_paths(out_path, [field], main=median)[field]).absolute())
            for name, field in ((n, quantile_field(n, 2)) for n in request.free)
        },
    }
