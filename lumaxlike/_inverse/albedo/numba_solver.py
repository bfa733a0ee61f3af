"""The numba solver: a hand-written Levenberg-Marquardt in w, parallel over pixels.

One fused kernel, serial over a range of pixels (each pixel one call of
`_solve_albedo_pixel`), run over blocks of pixels on threads
(`numba_threads.run_in_blocks`): the pixel's w-independent terms and its table of
r(w) are computed once and reused for every band and every iteration; each band is its
own problem with its own damping, acceptance and early exit (`albedo_rules`); r and
dr/dw come together from the analytic `equations.reflectance_and_slope`. The bands of a
pixel step in lockstep, `BLOCK` at a time: each iteration is one branch-free loop over the
block, finished bands keeping their values by selection, which the compiler vectorises (a
band's own sequence of operations is that of a band stepped alone: the same bits). A
block's state (w, residual, slope, damping, growth, observed r, status, iterations) lives
in one contiguous row per block of pixels (`state`), so the loops touch one array and
the compiler needs no runtime overlap checks between them; the outputs are written once,
when the block is done. Every input and output row is sliced to the block first and indexed
by the loop counter alone: an index like `block + j` is a signed sum that numba wraps when
negative, so LLVM could not prove the accesses consecutive and turned each such loop into
AVX-512 gathers (the observed r, the given starts) and scatters (every output), which cost
about a fifth of the kernel's time on Zen 5. Nothing is allocated inside the loop, so a
call's working memory does not grow with its pixels and one call can take a whole image.
Computes in float64.

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
from jaxtyping import Float

from ..._model._backends import inlined, numba_equations, retarget_to_numba
from ..._model.family import DEFAULT_KEY, ModelKey, numba_equations_for
from ..._model.numba_cache import cached_njit, compile_variant, rebound
from ..._model.numba_model import MODEL_MODULES, as_kernel_array, kernel_params, model_scalars
from ..._model.numba_threads import run_in_blocks
from ..._params import HapkeParams
from .. import lm_rules
from . import rules as albedo_rules

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
# Bands solved together (the rows of a block's state): one pixel's, for most cubes.
BLOCK = 64
# Where each field of a block of bands starts in the state row (BLOCK each).
_W, _RESIDUAL, _SLOPE, _DAMPING, _GROWTH, _R_OBS, _STATUS, _ITERATIONS = (
    k * BLOCK for k in range(8)
)
_STATE_LENGTH = 8 * BLOCK


# The steps of `_solve_albedo_pixel` are functions of their own that numba inlines into it
# (``inline="always"``): the kernel is compiled as one function, as written in one, with
# its variant's options (the exact H's ``fastmath``); the steps that call the model are
# inlined in each variant as the variant's own (`_albedo_kernel_for`).
_inline = numba.njit(error_model="numpy", inline="always")


@_inline
def _pixel_geometry(pixel, to_sun, to_sensor, normal, sun, sensor, up):
    """Whether the pixel's vectors are finite; the vectors copied into its block's own
    arrays `sun`, `sensor`, `up` (a view of a shared array (to_sun[pixel]) updates that
    array's one reference count from every thread)."""
    geometry_finite = True
    for k in range(3):
        geometry_finite = geometry_finite and math.isfinite(to_sun[pixel, k])
        geometry_finite = geometry_finite and math.isfinite(to_sensor[pixel, k])
        geometry_finite = geometry_finite and math.isfinite(normal[pixel, k])
    for k in range(3):
        sun[k], sensor[k], up[k] = to_sun[pixel, k], to_sensor[pixel, k], normal[pixel, k]
    return geometry_finite


@_inline
def _start_block(st, size, r_obs_block, terms, table, geometry_finite):
    """A block's observed r, every band's status and first evaluation at its start (in
    `st`): branch-free loops over the block (vectorised; a problem that is not solved
    computes a value that is selected away); the count of unfinished bands."""
    for j in range(size):
        r_obs = r_obs_block[j]
        st[_R_OBS + j] = r_obs
        status = problem_status(r_obs, geometry_finite, terms.scale, table[N_TABLE - 1])
        solving = status == SOLVING
        w = st[_W + j]
        r, slope = reflectance_and_slope(w, terms)
        residual = r - r_obs
        st[_W + j] = w if solving else math.nan
        st[_RESIDUAL + j] = residual if solving else math.nan
        st[_SLOPE + j] = slope if solving else math.nan
        st[_DAMPING + j] = 0.0
        st[_GROWTH + j] = 2.0
        st[_STATUS + j] = (CONVERGED if residual == 0.0 else SOLVING) if solving else status
    for j in range(size):
        st[_ITERATIONS + j] = 0.0
    unfinished = 0
    for j in range(size):
        unfinished += 1 if st[_STATUS + j] == SOLVING else 0
    return unfinished


@_inline
def _step_block(st, size, terms, tol, w_lower, w_upper):
    """One iteration of every unfinished band of a block together: one branch-free loop;
    a finished band's values are kept (selected). The count of unfinished bands."""
    unfinished = 0
    for j in range(size):
        status = st[_STATUS + j]
        solving = status == SOLVING
        w, residual, slope = st[_W + j], st[_RESIDUAL + j], st[_SLOPE + j]
        damping, growth = st[_DAMPING + j], st[_GROWTH + j]
        w_trial = propose(w, residual, slope, damping, w_lower, w_upper)
        r_trial, slope_trial = reflectance_and_slope(w_trial, terms)
        w_new, residual_new, slope_new, damping_new, growth_new, converged = update(
            w,
            residual,
            slope,
            damping,
            growth,
            w_trial,
            r_trial - st[_R_OBS + j],
            slope_trial,
            tol,
        )
        st[_W + j] = w_new if solving else w
        st[_RESIDUAL + j] = residual_new if solving else residual
        st[_SLOPE + j] = slope_new if solving else slope
        st[_DAMPING + j] = damping_new if solving else damping
        st[_GROWTH + j] = growth_new if solving else growth
        st[_ITERATIONS + j] += 1.0 if solving else 0.0
        st[_STATUS + j] = CONVERGED if solving and converged else status
    for j in range(size):
        unfinished += 1 if st[_STATUS + j] == SOLVING else 0
    return unfinished


@_inline
def _write_block(st, size, pixel, block, outputs, keep_slope):
    """A block's outputs, written once, one loop each (vectorised: plain stores into the
    block's slices, no scatters)."""
    w_out, status_out, iterations_out, residual_out, slope_out = outputs
    w_row = w_out[pixel, block : block + size]
    for j in range(size):
        w_row[j] = st[_W + j]
    residual_row = residual_out[pixel, block : block + size]
    for j in range(size):
        residual_row[j] = st[_RESIDUAL + j]
    if keep_slope:
        slope_row = slope_out[pixel, block : block + size]
        for j in range(size):
            slope_row[j] = st[_SLOPE + j]
    status_row = status_out[pixel, block : block + size]
    for j in range(size):
        s = st[_STATUS + j]
        status_row[j] = MAX_ITER if s == SOLVING else int(s)
    iterations_row = iterations_out[pixel, block : block + size]
    for j in range(size):
        iterations_row[j] = int(st[_ITERATIONS + j])


@cached_njit(inlines=(albedo_rules, lm_rules, *MODEL_MODULES), error_model="numpy")
def _solve_albedo_pixel(pixel, arrays, model, settings, outputs, scratch):
    """Every band of one pixel (`_albedo_kernel`'s loop body; arguments as there;
    scratch = (st, sun, sensor, up): its block's state row and 3-vectors)."""
    refl, to_sun, to_sensor, normal, w_start = arrays
    scalars, legendre, use_legendre = model
    max_iter, tol, w_lower, w_upper = settings
    st, sun, sensor, up = scratch
    n_bands = refl.shape[1]
    use_w_start = w_start.shape[0] > 0
    keep_slope = outputs[4].shape[0] > 0
    geometry_finite = _pixel_geometry(pixel, to_sun, to_sensor, normal, sun, sensor, up)
    terms = pixel_terms(sun, sensor, up, *model_scalars(scalars), legendre, use_legendre)
    table = albedo_table(terms)
    # The pixel's problems, BLOCK bands at a time, live in the state row `st` of its
    # block of pixels (one contiguous block of rows: w, residual, slope, damping, growth,
    # observed r, status and iterations as floats) and reach the outputs once, when
    # the block is done.
    r_obs_row = refl[pixel]
    for block in range(0, n_bands, BLOCK):
        size = min(BLOCK, n_bands - block)
        # The starts (their own loop: a given start is a plain copy), then every band's
        # status and first evaluation.
        r_obs_block = r_obs_row[block : block + size]
        if use_w_start:
            w_start_block = w_start[pixel, block : block + size]
            for j in range(size):
                st[_W + j] = w_start_block[j]
        else:
            for j in range(size):
                st[_W + j] = starting_albedo(r_obs_block[j], table, w_lower, w_upper)
        unfinished = _start_block(st, size, r_obs_block, terms, table, geometry_finite)
        iteration = 0
        while unfinished > 0 and iteration < max_iter:
            unfinished = _step_block(st, size, terms, tol, w_lower, w_upper)
            iteration += 1
        _write_block(st, size, pixel, block, outputs, keep_slope)


@cached_njit(inlines=(albedo_rules, lm_rules, *MODEL_MODULES), nogil=True, error_model="numpy")
def _albedo_kernel(first, last, arrays, model, settings, outputs):
    """Pixels first to last - 1 (`numba_threads.run_in_blocks`), with one state row.

    arrays = (refl, to_sun, to_sensor, normal, w_start), model = `kernel_params`'s
    (scalars, legendre, use_legendre), settings = (max_iter, tol, w_lower, w_upper),
    outputs = (w, status, iterations, residual, slope) as `solve_albedo_numba` passes
    them (w_start and slope (0, ...) when unused).
    """
    # The loop body is a function of its own (when this loop was numba's prange, whose
    # parallel passes grow with its body: the imsa-hapke1981 kernel compiled in 12.6 s
    # with the body inline, 5.3 s so; amsa-exact 22.5 s and 13 s; the same speed).
    scratch = (np.empty(_STATE_LENGTH), np.empty(3), np.empty(3), np.empty(3))
    for pixel in range(first, last):
        _solve_albedo_pixel(pixel, arrays, model, settings, outputs, scratch)


@functools.cache
def _albedo_kernel_for(key: ModelKey):
    """The fused kernel compiled for model configuration `key` (the default's is cached
    at import; another configuration's is the same code over its equations)."""
    if key == DEFAULT_KEY:
        return _albedo_kernel
    equations = numba_equations_for(key)
    rules = _rules_for(equations)
    bindings = {
        "pixel_terms": equations.pixel_terms,
        "reflectance_and_slope": inlined(equations.reflectance_and_slope),
        **{
            name: getattr(rules, name)
            for name in ("albedo_table", "problem_status", "starting_albedo", "propose", "update")
        },
    }
    steps = {
        name: _inline_variant(step, key.name, **bindings)
        for name, step in (("_start_block", _start_block), ("_step_block", _step_block))
    }
    solve_pixel = compile_variant(
        _solve_albedo_pixel,
        key.name,
        # The exact H's Chebyshev series are chains of multiply-adds: contracted into
        # fused multiply-adds they take fewer instructions (and round in the last bits
        # differently from the separate operations; every other configuration keeps its
        # bits, which tests/test_invert_reference holds to stored outputs).
        fastmath={"contract"} if key.h_function == "exact" else None,
        **bindings,
        **steps,
    )
    return compile_variant(_albedo_kernel, key.name, _solve_albedo_pixel=solve_pixel)


def _inline_variant(step, variant: str, **bindings):
    """An inlined step (`_inline`) over other globals (a model configuration's functions),
    for the kernel variant `variant` to inline."""
    clone = rebound(step.py_func, variant, bindings)
    return _inline(clone)


def solve_albedo_numba(
    refl: Float[np.ndarray, "pixels bands"],
    to_sun: Float[np.ndarray, "pixels 3"],
    to_sensor: Float[np.ndarray, "pixels 3"],
    normal: Float[np.ndarray, "pixels 3"],
    params: HapkeParams,
    w_start: Float[np.ndarray, "pixels bands"] | None,
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
    arrays = (as_kernel_array(refl), *geometry, start)
    settings = (int(max_iter), float(tol), float(w_bounds[0]), float(w_bounds[1]))
    outputs = (
        out["w"],
        out["status"],
        out["iterations"],
        out["residual"],
        out["slope"] if keep_slope else np.empty((0, shape[1])),
    )
    run_in_blocks(
        _albedo_kernel_for(params.model_key),
        shape[0],
        arrays,
        kernel_params(params),
        settings,
        outputs,
    )
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
