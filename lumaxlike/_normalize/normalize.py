"""`normalize`: reflectance observed at each pixel's geometry -> reflectance at a standard
geometry, through the albedo that `invert` recovers; one `NormalizationResult`."""

from __future__ import annotations

import dataclasses

import numpy as np

from .._declared_options import refuse_unknown, takes_options
from .._inverse.albedo.invert import SOLVERS, default_chunk_pixels, invert
from .._inverse.chunking import call_chunk, pad_pixels
from .._params import HapkeParams
from .._photometric import PhotometricFunction
from .._shapes import as_float_array, check_band_sigma, check_choice, check_positive_int, layout
from .._status import Status
from .options import NormalizeSettings
from .param_maps import check_param_maps
from .standard import standard_reflectance, standard_vectors

__all__ = ["NormalizationResult", "normalize"]


@dataclasses.dataclass(frozen=True)
class NormalizationResult:
    """Per-problem results of `lumaxlike.normalize`, NumPy arrays shaped like `refl`, in its
    float dtype (status: int8).

    Attributes:
        reflectance: r [1/sr] at the standard geometry; NaN where the inversion did not
            solve the problem (status other than CONVERGED or MAX_ITER).
        status: the inversion's `Status` codes.
        sigma: 1-sigma uncertainty of `reflectance` [1/sr] propagated from `refl_sigma`,
            |dr_std/dw| sigma_w with sigma_w = refl_sigma / |dr/dw| at the observed
            geometry; NaN where unsolved or `refl_sigma` not given.
        w: the single-scattering albedo the normalisation went through (`invert`'s w).
        standard: (incidence, emission, phase) of the standard geometry [rad].
    """

    reflectance: np.ndarray
    status: np.ndarray
    sigma: np.ndarray
    w: np.ndarray
    standard: tuple

    def counts(self) -> dict[str, int]:
        """Number of problems per status name."""
        values = np.bincount(self.status.ravel().astype(np.int64), minlength=len(Status))
        return {code.name: int(values[code]) for code in Status}


@takes_options(NormalizeSettings)
def normalize(
    refl,
    to_sun,
    to_sensor,
    normal,
    params: HapkeParams,
    solver: str = "jax",
    *,
    param_maps=None,
    chunk_size: int | None = None,
    settings: NormalizeSettings | None = None,
    **options,
) -> NormalizationResult:
    """Photometric normalisation: the reflectance each pixel would have at a standard geometry.

    Each (pixel, band)'s albedo w is inverted from `refl` at its own geometry
    (`lumaxlike.invert`, with the model `params`), and the model is evaluated with that w
    on a flat surface at the standard geometry (incidence i, emission e, phase g; the
    relative azimuth from cos g = cos i cos e + sin i sin e cos psi), as ISIS `photomet`
    and the M3 and LROC WAC pipelines do.

    Args:
        refl: observed bidirectional reflectance r [1/sr], shape ``pixels + (bands,)``
            (see `lumaxlike.invert`); float32 or float64, and the results have its dtype.
        to_sun: direction vectors (east, north, up) toward the source, shape
            ``pixels + (3,)`` or ``(3,)`` (see `lumaxlike.invert`).
        to_sensor: toward the sensor, same rule.
        normal: outward surface normals, same rule.
        params: `HapkeParams` (every configuration) or `PhotometricFunction`: the model
            and its parameters.
        solver: ``"jax"`` or ``"numba"``, the inversion's solver (the model at the
            standard geometry is evaluated by the same compiled numba code either way for
            a Hapke model).
        param_maps: optional {HapkeParams field: array} of per-pixel parameters
            replacing that field of `params`: shape ``pixels`` (one value per pixel) or
            ``pixels + (bands,)``, in the field's units (roughness [rad]). Pixels with
            the same values in every map are solved together, so binned maps (e.g. LROC
            WAC's) cost a few solver calls; maps whose every pixel differs cost one call
            per pixel (bin them first for speed). NaN or inf in a map makes that problem
            NONFINITE_INPUT.
        chunk_size: as in `lumaxlike.invert`.
        settings: the options below as one `NormalizeSettings` (None: the defaults).
        **options: the options of `NormalizeSettings` by name (each there with its unit,
            default and meaning): ``standard`` ((incidence, emission, phase) of the
            standard geometry [rad]; default (30, 0, 30) deg; 0 <= i, e < pi/2 and
            |i - e| <= g <= i + e), ``refl_sigma`` (1-sigma uncertainty of `refl`
            [1/sr], a scalar or one per band), ``max_iter`` and ``tol`` (as in
            `lumaxlike.invert`).

    Returns:
        `NormalizationResult` (reflectance, status, sigma, w), each shaped like `refl`.

    Raises:
        ValueError: naming the argument: bad `standard`, `param_maps`, `solver`,
            `refl_sigma`, shapes or dtypes (see `lumaxlike.invert`).
        TypeError: a keyword that is no option.
    """
    settings = NormalizeSettings.merged(settings, options)
    refuse_unknown("normalize", options)
    check_choice("solver", solver, SOLVERS)
    if not isinstance(params, (HapkeParams, PhotometricFunction)):
        raise ValueError(
            f"params must be a lumaxlike.HapkeParams or PhotometricFunction, got {type(params).__name__}"
        )
    if param_maps is not None and not isinstance(params, HapkeParams):
        raise ValueError(
            "param_maps are maps of HapkeParams fields; params is a PhotometricFunction"
        )
    angles = settings.standard
    vectors = standard_vectors(*angles)
    refl = as_float_array("refl", refl)
    geometry = [
        as_float_array(name, value)
        for name, value in (("to_sun", to_sun), ("to_sensor", to_sensor), ("normal", normal))
    ]
    shape = layout("refl", refl, dict(zip(("to_sun", "to_sensor", "normal"), geometry)))
    dtype = np.float32 if refl.dtype == np.float32 else np.float64
    band_sigma = check_band_sigma(settings.refl_sigma, shape.n_bands)
    maps = check_param_maps(param_maps, params, shape.pixel_shape, shape.n_bands)
    options = {"max_iter": settings.max_iter, "tol": settings.tol, "chunk_size": chunk_size}

    if maps is None:
        outputs = _normalize_flat(
            refl, geometry, params, solver, band_sigma, vectors, options, dtype
        )
        return NormalizationResult(**outputs, standard=angles)

    outputs = _normalize_groups(
        refl, geometry, shape, maps, params, solver, band_sigma, vectors, options, dtype
    )
    return NormalizationResult(
        **{name: value.reshape(refl.shape) for name, value in outputs.items()}, standard=angles
    )


def _normalize_groups(
    refl, geometry, shape, maps, params, solver, band_sigma, vectors, options, dtype
) -> dict:
    """`normalize` with parameter maps: the groups of pixels (and bands) of equal
    parameters (`ParameterMaps.groups`) each normalised by `_normalize_flat`; flat maps
    (pixels, bands)."""
    n_pixels, n_bands = shape.n_pixels, shape.n_bands
    flat_refl = refl.reshape(n_pixels, n_bands)
    if np.any(maps.invalid):
        flat_refl = np.where(maps.invalid, np.nan, flat_refl).astype(refl.dtype, copy=False)
    flat_geometry = [g if g.ndim == 1 else g.reshape(n_pixels, 3) for g in geometry]
    outputs = {
        "reflectance": np.empty((n_pixels, n_bands), dtype),
        "status": np.empty((n_pixels, n_bands), np.int8),
        "sigma": np.empty((n_pixels, n_bands), dtype),
        "w": np.empty((n_pixels, n_bands), dtype),
    }
    # The JAX solver compiles once per chunk shape: every group is padded to a multiple
    # of the largest group's chunk (`call_chunk`) and, when some map has a band axis,
    # solved one band at a time.
    groups = list(maps.groups(params, split_bands=solver == "jax" and maps.per_band))
    if solver == "jax":
        largest = max(len(pixels) for pixels, _, _ in groups)
        bands_per_call = 1 if maps.per_band else n_bands
        cap = (
            default_chunk_pixels(bands_per_call)
            if options["chunk_size"] is None
            else check_positive_int("chunk_size", options["chunk_size"])
        )
        options["chunk_size"] = call_chunk("jax", largest, cap)
    for pixels, bands, group_params in groups:
        group_refl, group_geometry = _padded(
            flat_refl[np.ix_(pixels, bands)],
            [g if g.ndim == 1 else g[pixels] for g in flat_geometry],
            options["chunk_size"] if solver == "jax" else None,
        )
        sigma = (
            None
            if band_sigma is None
            else (band_sigma if band_sigma.ndim == 0 else band_sigma[bands])
        )
        solved = _normalize_flat(
            group_refl, group_geometry, group_params, solver, sigma, vectors, options, dtype
        )
        for name, target in outputs.items():
            target[np.ix_(pixels, bands)] = solved[name][: len(pixels)]
    return outputs


def _normalize_flat(refl, geometry, params, solver, band_sigma, vectors, options, dtype) -> dict:
    """invert, then the model at the standard geometry; arrays shaped like `refl`."""
    to_sun, to_sensor, normal = geometry
    result = invert(
        refl, to_sun, to_sensor, normal, params, solver, refl_sigma=band_sigma, **options
    )
    # The inversion's residual is not part of a normalisation's result: its buffer (of
    # the result's dtype) takes r at the standard geometry, so no new full-size array is
    # first touched, and a float32 r has no float64 copy first.
    residual = result.residual
    spare = residual.dtype == dtype and residual.flags.c_contiguous and residual.flags.writeable
    r_standard, slope = standard_reflectance(
        result.w,
        vectors,
        params,
        r_out=residual if spare else None,
        with_slope=band_sigma is not None,
    )
    outputs = {
        "reflectance": r_standard.astype(dtype, copy=False),
        "status": result.status,
        "w": result.w,
    }
    if band_sigma is None:
        outputs["sigma"] = result.sigma  # NaN, as invert leaves it
    else:
        # |dr/dw| sigma_w, in dr/dw's float64 buffer where it is writable (the fused
        # kernel's; `differentiated_at_standard` gives JAX's read-only arrays)
        sigma = np.abs(slope, out=slope if slope.flags.writeable else None)
        sigma *= result.sigma
        outputs["sigma"] = sigma.astype(dtype, copy=False)
    return outputs


def _padded(refl, geometry, multiple):
    """A group's pixels padded with inert ones (NaN reflectance) to a multiple of `multiple`
    (None: unpadded)."""
    n = refl.shape[0]
    padding = 0 if multiple is None else -n % multiple
    if padding == 0:
        return refl, geometry
    geometry = [g if g.ndim == 1 else pad_pixels(g, n + padding, 1.0) for g in geometry]
    return pad_pixels(refl, n + padding, np.nan), geometry
