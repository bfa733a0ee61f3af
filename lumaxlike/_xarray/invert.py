"""`invert_dataarray`: `lumaxlike.invert` on a reflectance DataArray, chunk by chunk."""

from __future__ import annotations

import xarray as xr

from .._declared_options import refuse_unknown, takes_options
from .._inverse.albedo.invert import solver_chunk_pixels
from .._inverse.options import InvertSettings
from .._operations.invert import INVERT
from .._options import SolverOptions
from .per_band import BandFrontEnd, solve_bands

__all__ = ["invert_dataarray"]

FRONT_END = BandFrontEnd("invert_dataarray", INVERT, solver_chunk_pixels)


@takes_options(InvertSettings)
def invert_dataarray(
    refl: xr.DataArray,
    geometry,
    params,
    solver: str | SolverOptions = "jax",
    *,
    units: str,
    spectral_dim: str | None = None,
    num_threads: int | None = None,
    correction_undone: bool = False,
    settings: InvertSettings | None = None,
    **keywords,
) -> xr.Dataset:
    """Invert a reflectance DataArray for single-scattering albedo, chunk by chunk.

    Args:
        refl: reflectance with one spectral dim (``band`` or ``wavelength``, any position,
            or named by ``spectral_dim``); every other dim is a pixel dim (usually
            ``y``, ``x``). NumPy- or dask-backed; a spectral dim split into several dask
            chunks is rechunked into one.
        geometry: Dataset or dict of DataArrays aligned with ``refl`` on the pixel dims
            (coordinates must match exactly): angles [deg] or vectors, plus an optional
            ``normal`` (see the module docstring). Variables may omit pixel dims over
            which the geometry is constant. None for a product normalised to a standard
            geometry (opened with `lumaxlike.open_product`, e.g. M3 L2): inverted
            flat at that geometry; such a product with a geometry is refused unless
            ``correction_undone``.
        params: `lumaxlike.HapkeParams` or `lumaxlike.PhotometricFunction`
            (then ``w`` holds its albedo A, solved in closed form), or a sequence of one
            per band.
        solver: ``"jax"`` (default, as in `lumaxlike.invert`) or ``"numba"``, or a
            `lumaxlike.SolverOptions` (``max_iter``, ``tol``, ``num_threads``: its fields).
        units: what ``refl`` holds: ``"r"`` [1/sr], ``"radf"`` (pi r) or ``"reff"``
            (pi r / cos i, local incidence); required, never guessed.
        correction_undone: see ``geometry``. Bands ``refl``'s attrs mark bad
            (``lumaxlike_bad_bands``, from `lumaxlike.open_product`) get the status
            ``BAD_BAND``.
        spectral_dim: name of the spectral dim when it is neither ``band`` nor
            ``wavelength``.
        num_threads: numba threads per chunk (see the module docstring); None = automatic.
        settings: the inversion's options as one `lumaxlike.InvertSettings` (None: the
            defaults).
        **keywords: the options of `lumaxlike.InvertSettings` by name: ``refl_sigma``
            (the standard uncertainty of ``refl`` in ``units``, one number; None: no
            uncertainty, ``sigma`` is then NaN), ``max_iter``, ``tol``.

    Returns:
        Dataset with ``w`` [-], ``status`` (int8 `lumaxlike.Status` codes),
        ``iterations`` (int32), ``residual`` [1/sr] and ``sigma`` [-], each with the dims,
        coords and chunks of ``refl`` (lazy when it is dask-backed; its ``spatial_ref`` or
        ``crs`` kept). The attrs keep ``refl``'s and record how the Dataset was made (the
        ``lumaxlike_*`` keys, `lumaxlike.read_provenance`); ``history`` gains a line.

    Raises:
        ValueError: bad argument (names it), misaligned geometry.
        TypeError: a keyword that is no option.
    """
    settings = InvertSettings.merged(settings, keywords)
    refuse_unknown("invert_dataarray", keywords)
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
        correction_undone=correction_undone,
    )
