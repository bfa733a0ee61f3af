"""The numba solver: a hand-written Levenberg-Marquardt in w, parallel over pixels.

One fused kernel, `prange` over pixels: the pixel's w-independent terms and its table of
r(w) are computed once and reused for every band and every iteration; each band is its
own problem with its own damping, acceptance and early exit (`albedo_rules`); r and
dr/dw come together from the analytic `equations.reflectance_and_slope`. The bands of a
pixel step in lockstep: each iteration is one branch-free loop over the bands, finished
ones keeping their values by selection, which the compiler can vectorise (a band's own
sequence of operations is that of a band stepped alone: the same bits). Nothing is
allocated inside the loop; the problems' state lives in the outputs, written in place,
and in a few rows per thread (`numba.get_thread_id`), so a call's working memory does not
grow with its pixels and one call can take a whole image. Computes in float64.

What a band's step calls (`propose`, `reflectance_and_slope`, `update` and the LM rules
they use) is inlined by numba, so the band loops hold no call and vectorise for every
model configuration: LLVM would inline the default's small model itself, but not the
exact H's (a call per band and step, and each loop then runs scalar).
"""

from __future__ import annotations

import functools
import math

import numba
import numpy as np

from .._model._backends import inlined, numba_equations, retarget_to_numba
from .._model.family import DEFAULT_KEY, ModelKey, numba_equations_for
from .._model.numba_cache import cached_njit, compile_variant
from .._model.numba_model import MODEL_MODULES, as_kernel_array, kernel_params
from . import albedo_rules, lm_rules

__all__ = ["solve_albedo_numba"]

_lm_rules = vars(retarget_to_numba(lm_rules, inline=tuple(lm_rules.__all__)))


def _rules_for(equations):
    """`albedo_rules` compiled over the model `equations` (a retargeted namespace), every
    rule inlined into its caller. (`albedo_table`, once per pixel, calls the model's
    `reflectance_and_slope` at its nine points: inlined there too, the exact H's kernel
    would compile several times slower for a few percent of speed.)"""
    return retarget_to_numba(
        albedo_rules,
        inline=tuple(albedo_rules.__all__),
        reflectance_and_slope=equations.reflectance_and_slope,
        **_lm_rules,
    )


_rules = _rules_for(numba_equations)
# Module-level names: numba resolves globals, not attributes of a namespace object.
pixel_terms = numba_equations.pixel_terms
reflectance_and_slope = inlined(numba_equations.reflectance_and_slope)
albedo_table = _rules.albedo_table
problem_status = _rules.problem_status
starting_albedo = _rules.starting_albedo
propose = _rules.propose
update = _rules.update
SOLVING = albedo_rules.SOLVING
MAX_ITER = albedo_rules.MAX_ITER
CONVERGED = albedo_rules.CONVERGED
N_TABLE = albedo_rules.N_TABLE


@cached_njit(inlines=(albedo_rules, lm_rules, *MODEL_MODULES), parallel=True, error_model="numpy")
def _albedo_kernel(
    refl, to_sun, to_sensor, normal, scalars, legendre, use_legendre, w_start,
    max_iter, tol, w_lower, w_upper,
    w_out, status_out, iterations_out, residual_out, slope_out, scratch,
):  # fmt: skip
    b, c, roughness, hs, bs0, hc, bc0, porosity_k, asymmetry = (
        scalars[0], scalars[1], scalars[2], scalars[3], scalars[4], scalars[5], scalars[6], scalars[7], scalars[8]
    )  # fmt: skip
    n_pixels, n_bands = refl.shape
    use_w_start = w_start.shape[0] > 0
    keep_slope = slope_out.shape[0] > 0
    for pixel in numba.prange(n_pixels):
        geometry_finite = True
        for k in range(3):
            geometry_finite = geometry_finite and math.isfinite(to_sun[pixel, k])
            geometry_finite = geometry_finite and math.isfinite(to_sensor[pixel, k])
            geometry_finite = geometry_finite and math.isfinite(normal[pixel, k])
        terms = pixel_terms(
            to_sun[pixel], to_sensor[pixel], normal[pixel],
            b, c, roughness, hs, bs0, hc, bc0, porosity_k, asymmetry, legendre, use_legendre,
        )  # fmt: skip
        table = albedo_table(terms)
        # The pixel's problems live in its rows of the outputs (status SOLVING while
        # unfinished) and in its thread's rows of `scratch` (damping, growth, and the
        # slope where the caller does not keep it).
        thread = numba.get_thread_id()
        r_obs_row = refl[pixel]
        w_row, residual_row = w_out[pixel], residual_out[pixel]
        slope_row = slope_out[pixel] if keep_slope else scratch[thread, 2]
        status_row, iterations_row = status_out[pixel], iterations_out[pixel]
        damping_row, growth_row = scratch[thread, 0], scratch[thread, 1]
        # The starts, then every band's status and first evaluation: branch-free loops
        # over the bands (vectorised; a problem that is not solved computes a value
        # that is selected away).
        if use_w_start:
            w_start_row = w_start[pixel]
            for band in range(n_bands):
                w_row[band] = w_start_row[band]
        else:
            for band in range(n_bands):
                w_row[band] = starting_albedo(r_obs_row[band], table, w_lower, w_upper)
        unfinished = 0
        for band in range(n_bands):
            r_obs = r_obs_row[band]
            status = problem_status(r_obs, geometry_finite, terms.scale, table[N_TABLE - 1])
            solving = status == SOLVING
            w = w_row[band]
            r, slope = reflectance_and_slope(w, terms)
            residual = r - r_obs
            iterations_row[band] = 0
            damping_row[band] = 0.0
            growth_row[band] = 2.0
            w_row[band] = w if solving else math.nan
            residual_row[band] = residual if solving else math.nan
            slope_row[band] = slope if solving else math.nan
            status_row[band] = (CONVERGED if residual == 0.0 else SOLVING) if solving else status
            unfinished += 1 if solving and residual != 0.0 else 0
        # Every unfinished band of the pixel takes its step together: one branch-free
        # loop over the bands per iteration, which the compiler can vectorise; a finished
        # band's values are kept (selected, not branched around).
        iteration = 0
        while unfinished > 0 and iteration < max_iter:
            unfinished = 0
            for band in range(n_bands):
                solving = status_row[band] == SOLVING
                w, residual, slope = w_row[band], residual_row[band], slope_row[band]
                damping, growth = damping_row[band], growth_row[band]
                w_trial = propose(w, residual, slope, damping, w_lower, w_upper)
                r_trial, slope_trial = reflectance_and_slope(w_trial, terms)
                w_new, residual_new, slope_new, damping_new, growth_new, converged = update(
                    w,
                    residual,
                    slope,
                    damping,
                    growth,
                    w_trial,
                    r_trial - r_obs_row[band],
                    slope_trial,
                    tol,
                )
                w_row[band] = w_new if solving else w
                residual_row[band] = residual_new if solving else residual
                slope_row[band] = slope_new if solving else slope
                damping_row[band] = damping_new if solving else damping
                growth_row[band] = growth_new if solving else growth
                iterations_row[band] += 1 if solving else 0
                done = solving and converged
                status_row[band] = CONVERGED if done else status_row[band]
                unfinished += 1 if solving and not converged else 0
            iteration += 1
        if unfinished > 0:
            for band in range(n_bands):
                if status_row[band] == SOLVING:
                    status_row[band] = MAX_ITER


@functools.cache
def _albedo_kernel_for(key: ModelKey):
    """The fused kernel compiled for model configuration `key` (the default's is cached
    at import; another configuration's is the same code over its equations)."""
    if key == DEFAULT_KEY:
        return _albedo_kernel
    equations = numba_equations_for(key)
    rules = _rules_for(equations)
    return compile_variant(
        _albedo_kernel,
        key.name,
        # The exact H's Chebyshev series are chains of multiply-adds: contracted into
        # fused multiply-adds they take fewer instructions (and round in the last bits
        # differently from the separate operations; every other configuration keeps its
        # bits, which tests/test_invert_reference holds to stored outputs).
        fastmath={"contract"} if key.h_function == "exact" else None,
        pixel_terms=equations.pixel_terms,
        reflectance_and_slope=inlined(equations.reflectance_and_slope),
        **{
            name: getattr(rules, name)
            for name in ("albedo_table", "problem_status", "starting_albedo", "propose", "update")
        },
    )


def solve_albedo_numba(
    refl,
    to_sun,
    to_sensor,
    normal,
    params,
    w_start,
    max_iter,
    tol,
    w_bounds,
    out=None,
    keep_slope=True,
):
    """Solve every (pixel, band) problem of one chunk.

    Args:
        refl: observed r [1/sr], (pixels, bands), float64.
        to_sun, to_sensor, normal: (pixels, 3) float64 direction vectors.
        params: `HapkeParams`.
        w_start: (pixels, bands) starting albedos, or None for the per-pixel table.
        max_iter, tol: iteration cap and step tolerance in w.
        w_bounds: (w_lower, w_upper), the projection interval inside (0, 1).
        out: optional dict of C-contiguous (pixels, bands) arrays to write into (any of
            w, residual and slope as float64, status as int8, iterations as int32), e.g.
            slices of the caller's result arrays, sparing a copy; the rest are allocated.
        keep_slope: whether to return the slope (False: no (pixels, bands) array for it).
    Returns:
        dict of (pixels, bands) arrays: w, status (int8), iterations (int32), residual
        (model minus observed, 1/sr), and with `keep_slope` slope (dr/dw at w, 1/sr).
    """
    shape = refl.shape
    dtypes = {
        "w": np.float64,
        "status": np.int8,
        "iterations": np.int32,
        "residual": np.float64,
        "slope": np.float64,
    }
    if not keep_slope:
        del dtypes["slope"]
    given = out or {}
    out = {}
    for name, dtype in dtypes.items():
        array = given.get(name)
        out[name] = array if _is_writable(array, dtype, shape) else np.empty(shape, dtype)

    start = np.empty((0, 0)) if w_start is None else as_kernel_array(w_start)
    geometry = (as_kernel_array(a) for a in (to_sun, to_sensor, normal))
    # a thread's rows (damping, growth, slope); ids run below numba's thread count
    scratch = np.empty((numba.config.NUMBA_NUM_THREADS, 3, shape[1]))
    _albedo_kernel_for(params.model_key)(
        as_kernel_array(refl),
        *geometry,
        *kernel_params(params),
        start,
        int(max_iter),
        float(tol),
        float(w_bounds[0]),
        float(w_bounds[1]),
        out["w"], out["status"], out["iterations"], out["residual"],
        out["slope"] if keep_slope else np.empty((0, shape[1])),
        scratch,
    )  # fmt: skip
    return out


def _is_writable(array, dtype, shape) -> bool:
    """Whether `array` is a C-contiguous, writable array of `dtype` and `shape` (a kernel
    may write into it)."""
    return (
        array is not None
        and array.dtype == dtype
        and array.shape == shape
        and array.flags.c_contiguous
        and array.flags.writeable
    )
