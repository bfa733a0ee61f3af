"""`normalize_dataarray`: photometric normalisation of a reflectance DataArray
(`lumaxlike.normalize`), chunk by chunk; also ``DataArray.hapke.normalize``."""

from __future__ import annotations

from collections.abc import Mapping

import xarray as xr

from .._declared_options import refuse_unknown, takes_options
from .._inverse.albedo.invert import default_chunk_pixels
from .._normalize.options import NormalizeSettings
from .._operations.normalize import NORMALIZE
from .._options import SolverOptions
from .per_band import BandFrontEnd, solve_bands

__all__ = ["normalize_dataarray"]

FRONT_END = BandFrontEnd(
    "normalize_dataarray",
    NORMALIZE,
    lambda solver, bands, dtype: default_chunk_pixels(bands),
    param_maps=True,
)


@takes_options(NormalizeSettings)
def normalize_dataarray(
    refl: xr.DataArray,
    geometry,
    params,
    solver: str | SolverOptions = "jax",
    *,
    units: str,
    param_maps: Mapping | None = None,
    spectral_dim: str | None = None,
    num_threads: int | None = None,
    settings: NormalizeSettings | None = None,
    **keywords,
) -> xr.Dataset:
    """Photometric normalisation of a reflectance DataArray to a standard geometry, chunk by chunk.

    As `invert_dataarray` (same ``refl``, ``geometry``, ``params``, ``solver``,
    ``units``, ``spectral_dim``, ``num_threads``), with `lumaxlike.normalize` per chunk.

    Args:
        param_maps: optional ``{HapkeParams field: DataArray}`` of per-pixel parameters
            on ``refl``'s pixel dims (and optionally its spectral dim), in the field's
            units (roughness [rad]); see `lumaxlike.normalize`.
        settings: the normalisation's options as one `lumaxlike.NormalizeSettings`
            (None: the defaults).
        **keywords: the options of `lumaxlike.NormalizeSettings` by name: ``standard``
            [rad], ``refl_sigma`` (one number, in ``units``), ``max_iter``, ``tol``.

    Returns:
        Dataset with ``reflectance`` (in ``units``, at the standard geometry; REFF with
        the standard incidence), ``status`` (int8, the inversion's) and ``sigma`` (in
        ``units``; NaN without ``refl_sigma``), with ``refl``'s dims, coords and chunks
        (lazy when ``refl`` is dask-backed) and the provenance attributes of
        `invert_dataarray` plus the standard geometry.

    Raises:
        ValueError: bad argument (names it), misaligned geometry or maps.
        TypeError: a keyword that is no option.
    """
    settings = NormalizeSettings.merged(settings, keywords)
    refuse_unknown("normalize_dataarray", keywords)
    return solve_bands(
        FRONT_END,
        refl,
        geometry,
        params,
        solver,
        units=units,
        spectral_dim=spectral_dim,
        num_threads=num_threads,
        settings=settings,
        param_maps=param_maps,
        own={"standard": settings.standard, "param_maps": param_maps},
        record={"standard": settings.standard},
    )
