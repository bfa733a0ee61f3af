"""`unmix`: mass fractions of an intimate mixture per pixel, by either route and solver."""

from __future__ import annotations

from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._declared_options import refuse_unknown, takes_options
from .._inverse.albedo.invert import DEFAULT_MAX_ITER, SOLVERS, invert
from .._inverse.chunking import call_chunk, pad_pixels
from .._model.device_precision import default_is_cpu
from .._model.forward import precision_scope
from .._params import HapkeParams
from .._shapes import as_float_array, check_band_sigma, check_choice, check_positive_int, layout
from .._status import Status
from .band_matching import band_order
from .endmembers import Endmembers
from .jax_unmix import bands_last_on, solve_one_step_jax
from .mixing import cross_section_per_mass
from .numba_one_step import one_step_numba
from .numba_unmix import finish_numba, two_step_numba
from .options import ROUTES, UnmixSettings
from .phase import phase_table
from .result import UnmixResult
from .simplex_qp import QP_SINGULAR, QP_STALLED, max_qp_steps

__all__ = ["unmix", "unmix_flat", "ROUTES", "DEFAULT_TOLERANCE", "default_chunk_pixels"]

DEFAULT_TOLERANCE = 1e-10  # on the step of every cross-section fraction, in float64
FLOAT32_TOLERANCE = 1e-5  # the same in float32 (the JAX solver on float32 input)
# The two-step route inverts w to rounding: a solver error in w (invert's default step
# tolerance 1e-10) would act as noise in w-space, and the fraction of an absent endmember
# would come back as a small positive number instead of its bound.
ALBEDO_TOLERANCE = 1e-13
# band-endmember products per chunk: the JAX solver keeps (pixels, bands, p) columns
# (~16 MB in float64 at this size); the numba kernels keep only the outputs.
PRODUCTS_PER_CHUNK = 1 << 21
# On an accelerator, 8x more (~52 k pixels of 64 bands x 4 endmembers): measured on a TPU
# v5e, 500 x 500 pixels of that shape in float32 ran 2.8x faster in chunks of 65536 pixels
# than of 6553.
ACCELERATOR_PRODUCTS_PER_CHUNK = 1 << 24
# the worst band status decides a two-step pixel that is not solved
_PIXEL_FAILURES = (Status.NONFINITE_INPUT, Status.INVALID_GEOMETRY, Status.UNREACHABLE)
_SOLVED = (Status.CONVERGED, Status.MAX_ITER, Status.UNDETERMINED)


def default_chunk_pixels(n_bands: int, n_endmembers: int, solver: str = "numba") -> int:
    """Pixels per chunk: about `PRODUCTS_PER_CHUNK` / (bands x (endmembers + 1)), or
    `ACCELERATOR_PRODUCTS_PER_CHUNK` / ... for the JAX solver where JAX's default device
    is an accelerator."""
    products = PRODUCTS_PER_CHUNK
    if solver == "jax" and not default_is_cpu():
        products = ACCELERATOR_PRODUCTS_PER_CHUNK
    return max(1, products // max(1, n_bands * (n_endmembers + 1)))


@takes_options(UnmixSettings)
def unmix(
    refl,
    to_sun,
    to_sensor,
    normal,
    endmembers: Endmembers,
    params: HapkeParams,
    solver: str = "jax",
    *,
    chunk_size: int | None = None,
    wavelengths=None,
    settings: UnmixSettings | None = None,
    **options,
) -> UnmixResult:
    """Mass fractions of the endmembers in every pixel, by Hapke's intimate mixing.

    w_mix = sum_j f_j w_j with cross-section fractions f_j = M_j c_j / sum_k M_k c_k,
    c_j = Q_j / (rho_j D_j) (Hapke 2012, ch. 10); its reflectance is the model `params`
    at the pixel's geometry. One problem per pixel: its fractions (non-negative; 0 at the
    bound, flagged in `at_bound`) from its bands.

    Args:
        refl: reflectance r [1/sr] (RADF / pi), shape ``pixels + (bands,)``, the
            endmembers' bands last. float32 input gives float32 results; the JAX
            one-step solver computes in refl's precision (float64 is refused where JAX's
            default device is a TPU: pass float32 there), the others in float64. A pixel
            with no band r > 0 is UNREACHABLE.
        to_sun: vectors (east, north, up) toward the source, shape ``pixels + (3,)`` or
            ``(3,)`` for all pixels (as for `invert`).
        to_sensor: toward the observer, same rule.
        normal: outward surface normals, same rule.
        endmembers: `Endmembers` (albedo spectra on the cube's bands, density, grain
            size, extinction efficiency; a dark neutral endmember is a row of constant w).
        params: `HapkeParams` of the mixture (its phase function unless `Endmembers.phase`).
        solver: ``"jax"`` or ``"numba"``: runs the one-step route's Levenberg-Marquardt,
            or the two-step route's `invert` (its w-space step runs in numba).
        chunk_size: pixels per chunk (bounds memory); default about 2 M band-endmember
            products (docs/invert.md#chunks-and-memory).
        wavelengths: refl's band centres [um] (bands,), or None (bands taken in order);
            matched to ``endmembers.wavelengths`` where both are given.
        settings: the options below as one `UnmixSettings` (None: the defaults).
        **options: the options of `UnmixSettings` by name (each there with its unit,
            default and meaning): ``route``, ``sum_to_one``, ``max_iter``, ``tol``,
            ``refl_sigma`` (1-sigma of refl [1/sr], > 0, a scalar or one per band),
            ``free`` (e.g. ``("grain_size", "npfe")``) and ``starts``.

    Returns:
        `UnmixResult`.

    Raises:
        ValueError: naming the argument: unknown solver or route, bands not the
            endmembers', mismatched shapes, non-positive refl_sigma, tol, max_iter or
            chunk_size, float16, route="two_step" with `Endmembers.phase`.
        TypeError: a keyword that is no option.
    """
    settings = UnmixSettings.merged(settings, options)
    refuse_unknown("unmix", options)
    check_choice("solver", solver, SOLVERS)
    route, sum_to_one, refl_sigma = settings.route, settings.sum_to_one, settings.refl_sigma
    max_iter = DEFAULT_MAX_ITER if settings.max_iter is None else settings.max_iter
    solving = (max_iter, settings.tol, refl_sigma, chunk_size)
    if settings.free:  # grain sizes and npFe0 from optical constants
        from .optical_unmix import unmix_optical

        optical: dict[str, Any] = dict(free=settings.free, starts=settings.starts, route=route)
        optical.update(sum_to_one=sum_to_one, refl_sigma=refl_sigma, max_iter=max_iter)
        geometry = (to_sun, to_sensor, normal)
        return unmix_optical(
            refl,
            *geometry,
            endmembers,
            params,
            solver,
            wavelengths=wavelengths,
            chunk_size=chunk_size,
            tol=settings.tol,
            **optical,
        )
    if not isinstance(endmembers, Endmembers):
        raise ValueError(
            f"endmembers must be a lumaxlike.Endmembers, got {type(endmembers).__name__}"
        )
    _refuse_two_step_with_own_phases(route, endmembers)
    if not isinstance(params, HapkeParams):
        raise ValueError(f"params must be a lumaxlike.HapkeParams, got {type(params).__name__}")
    refl = as_float_array("refl", refl)
    problem = _check_problem(
        refl, (to_sun, to_sensor, normal), endmembers, solver, solving, wavelengths
    )
    outputs = _unmix_chunks(problem, endmembers, params, solver, route, bool(sum_to_one))
    outputs = _in_precision_of(refl, outputs)
    return UnmixResult(
        names=endmembers.names,
        route=route,
        **{k: v.reshape(problem.pixel_shape + v.shape[1:]) for k, v in outputs.items()},
    )


# the `UnmixResult` arrays `unmix_flat` returns
_OUTPUTS = (
    "fractions",
    "covariance",
    "at_bound",
    "cross_section",
    "remainder",
    "status",
    "iterations",
    "residual_norm",
)


class _Problem(NamedTuple):
    """`unmix`'s checked problem: refl ``(pixels, bands)`` in the endmembers' band order,
    the geometry ``(pixels, 3)`` each, the pixel shape, refl_sigma per band (or None),
    max_iter, tol (None: the default of the precision the solver computes in) and the
    pixels per chunk."""

    refl: np.ndarray
    geometry: tuple
    pixel_shape: tuple
    band_sigma: np.ndarray | None
    max_iter: int
    tol: float | None
    chunk: int


def _check_problem(refl, geometry, endmembers, solver, settings, wavelengths) -> _Problem:
    """Checks `unmix`'s arrays and settings = (max_iter, tol, refl_sigma, chunk_size)
    (ValueError naming the argument), matches refl's bands to the endmembers' and
    flattens the pixels."""
    max_iter, tol, refl_sigma, chunk_size = settings
    geometry = {
        name: as_float_array(name, g)
        for name, g in zip(("to_sun", "to_sensor", "normal"), geometry)
    }
    shape = layout("refl", refl, geometry)
    if (
        refl.ndim == 0
        or refl.shape[-1:] != (endmembers.n_bands,)
        or shape.n_bands != endmembers.n_bands
    ):
        raise ValueError(
            f"refl has shape {refl.shape}: its last axis must hold the endmembers' {endmembers.n_bands} bands"
        )
    max_iter = check_positive_int("max_iter", max_iter)
    if tol is not None:
        tol = float(tol)
        if not tol > 0.0:
            raise ValueError(f"tol must be positive, got {tol!r}")
    band_sigma = check_band_sigma(refl_sigma, shape.n_bands)
    if wavelengths is not None:
        wavelengths = as_float_array("wavelengths", wavelengths)
        if wavelengths.shape != (shape.n_bands,):
            raise ValueError(
                f"wavelengths must hold refl's {shape.n_bands} band centres [um], "
                f"got shape {wavelengths.shape}"
            )
    order = band_order(wavelengths, endmembers)
    if order is not None and not np.array_equal(order, np.arange(shape.n_bands)):
        refl = refl[..., order]
        if band_sigma is not None and band_sigma.ndim == 1:
            band_sigma = band_sigma[order]
    n_pixels = shape.n_pixels
    chunk = (
        default_chunk_pixels(shape.n_bands, endmembers.n_endmembers, solver)
        if chunk_size is None
        else check_positive_int("chunk_size", chunk_size)
    )
    flat_geometry = tuple(
        np.broadcast_to(g, shape.pixel_shape + (3,)).reshape(n_pixels, 3) for g in geometry.values()
    )
    return _Problem(
        refl.reshape(n_pixels, shape.n_bands),
        flat_geometry,
        shape.pixel_shape,
        band_sigma,
        max_iter,
        tol,
        call_chunk(solver, n_pixels, chunk),
    )


def _unmix_chunks(problem: _Problem, endmembers, params, solver, route, sum_to_one) -> dict:
    """`unmix_flat` chunk by chunk into flat ``(pixels, ...)`` output arrays."""
    n_pixels, n_bands = problem.refl.shape
    chunk = problem.chunk
    settings = dict(
        route=route,
        sum_to_one=sum_to_one,
        band_sigma=problem.band_sigma,
        max_iter=problem.max_iter,
        tol=problem.tol,
    )
    outputs: dict[str, np.ndarray] = {}
    for start in range(0, n_pixels, chunk):
        stop = min(start + chunk, n_pixels)
        to_sun, to_sensor, normal = (g[start:stop] for g in problem.geometry)
        pieces = (problem.refl[start:stop], to_sun, to_sensor, normal)
        solved = unmix_flat(*pieces, endmembers, params, solver, **settings, pad_to=chunk)
        if not outputs:
            outputs = {
                k: np.empty((n_pixels,) + solved[k].shape[1:], solved[k].dtype) for k in _OUTPUTS
            }
        for k in _OUTPUTS:
            outputs[k][start:stop] = solved[k]
    if not outputs:  # no pixels
        none = np.zeros((0, 3))
        pieces = (np.zeros((0, n_bands)), none, none, none)
        empty = unmix_flat(*pieces, endmembers, params, "numba", **settings)
        outputs = {k: empty[k] for k in _OUTPUTS}
    return outputs


def _refuse_two_step_with_own_phases(route, endmembers):
    """ValueError for route="two_step" with per-endmember phase functions."""
    if route == "two_step" and endmembers.phase is not None:
        raise ValueError(
            "route='two_step' cannot unmix endmembers with their own phase functions (endmembers.phase "
            "is given): its invert step assumes one phase function shared by the mixture, which is not "
            "exact when they differ; use route='one_step'"
        )


def unmix_flat(
    refl,
    to_sun,
    to_sensor,
    normal,
    endmembers,
    params,
    solver,
    *,
    route,
    sum_to_one,
    band_sigma,
    max_iter,
    tol,
    pad_to=None,
):
    """`unmix` of one chunk of pixels given flat arrays (the entry point for block-wise
    callers: CLI, xarray). Arguments checked by the caller.

    Args:
        refl: (pixels, bands); to_sun, to_sensor, normal: (pixels, 3); band_sigma: None,
            a scalar or (bands,) array of refl_sigma (> 0); tol: None for the default of
            the precision the solver computes in (`one_step_dtype`); pad_to: the JAX
            solvers pad the chunk to this many pixels (one compile per chunk shape).
    Returns:
        dict of the `UnmixResult` fields as flat arrays (pixels first).
    """
    n, n_bands = refl.shape
    equality = bool(sum_to_one)
    geometry = (to_sun, to_sensor, normal)
    settings = (equality, max_iter, tol, max_qp_steps(endmembers.albedo.shape[0]))
    if route == "one_step":
        solve = _solve_one_step
    else:
        _refuse_two_step_with_own_phases(route, endmembers)
        solve = _solve_two_step
    solved, status, iterations = solve(
        refl, geometry, endmembers, params, solver, band_sigma, settings, pad_to or n
    )
    # no band above 0 (a negated or zero cube): no mixture explains it, though the fit
    # would put it on the darkest vertex (as `fit`; a noisy band <= 0 among others is data)
    with np.errstate(invalid="ignore"):
        none_positive = ~np.any(refl > 0.0, axis=-1)
    status[none_positive & np.isin(status, _SOLVED)] = Status.UNREACHABLE
    return _finish(
        solved, status, iterations, endmembers, equality, band_sigma is not None, n_bands
    )


def _in_precision_of(refl, outputs: dict) -> dict:
    """`outputs` with their float64 arrays in float32 where `refl` is float32 (a result
    comes in its input's precision)."""
    if refl.dtype != np.float32:
        return outputs
    return {k: v.astype(np.float32) if v.dtype == np.float64 else v for k, v in outputs.items()}


def one_step_dtype(solver: str, refl_dtype) -> type:
    """The precision the one-step route computes in: the JAX solver follows float32 input
    (float32 on the device, as `invert` and `fit` do), numba computes in float64."""
    return np.float32 if solver == "jax" and refl_dtype == np.float32 else np.float64


def _solve_one_step(refl, geometry, endmembers, params, solver, band_sigma, settings, pad_to):
    """`unmix_flat`'s one-step route: (solved, status, iterations); settings =
    (equality, max_iter, tol, max_steps), tol None for its precision's default."""
    equality, max_iter, tol, max_steps = settings
    dtype = one_step_dtype(solver, refl.dtype)
    if tol is None:
        tol = DEFAULT_TOLERANCE if dtype == np.float64 else FLOAT32_TOLERANCE
    n_bands = refl.shape[1]
    albedo = endmembers.albedo
    p = albedo.shape[0]
    weights = (
        np.ones(n_bands)
        if band_sigma is None
        else np.broadcast_to(1.0 / np.asarray(band_sigma, np.float64), (n_bands,))
    )
    start = np.full(p, 1.0 / p if equality else 1.0 / (p + 1))
    # per-endmember phase functions: their terms at every pixel, once per chunk (numba,
    # for both solvers: a CPU step before the solve)
    to_sun, to_sensor, normal = geometry
    phase = (
        None
        if endmembers.phase is None
        else phase_table(to_sun, to_sensor, normal, params, endmembers.phase)
    )
    arrays = (refl, to_sun, to_sensor, normal, params, albedo, weights, start)
    if solver == "numba":
        solved = one_step_numba(*arrays, equality, max_iter, tol, max_steps, phase)
    else:
        solved = _one_step_jax(*arrays, equality, max_iter, tol, max_steps, pad_to, phase)
    return solved, solved["status"].astype(np.int8), solved["iterations"].astype(np.int32)


def _solve_two_step(refl, geometry, endmembers, params, solver, band_sigma, settings, pad_to):
    """`unmix_flat`'s two-step route (`invert`, then the w-space programme): (solved,
    status, iterations); settings = (equality, max_iter, tol, max_steps)."""
    equality, max_iter, _, max_steps = settings
    n, n_bands = refl.shape
    to_sun, to_sensor, normal = geometry
    inverted = invert(
        refl,
        to_sun,
        to_sensor,
        normal,
        params,
        solver=solver,
        refl_sigma=band_sigma,
        max_iter=max_iter,
        tol=ALBEDO_TOLERANCE,
        chunk_size=max(1, pad_to),
    )
    band_status = inverted.status.reshape(n, n_bands)
    status = np.where(
        np.any(band_status == Status.MAX_ITER, axis=-1), Status.MAX_ITER, Status.CONVERGED
    ).astype(np.int8)
    for failure in reversed(_PIXEL_FAILURES):  # the first in the list wins
        status[np.any(band_status == failure, axis=-1)] = failure
    solve = (status == Status.CONVERGED) | (status == Status.MAX_ITER)
    sigma_w = None if band_sigma is None else inverted.sigma.reshape(n, n_bands)
    solved = two_step_numba(
        inverted.w.reshape(n, n_bands), sigma_w, solve, endmembers.albedo, equality, max_steps
    )
    status[solve & (solved["code"] == QP_SINGULAR)] = Status.UNDETERMINED
    status[solve & (solved["code"] == QP_STALLED)] = Status.MAX_ITER
    iterations = inverted.iterations.reshape(n, n_bands).max(axis=-1, initial=0).astype(np.int32)
    return solved, status, iterations


def _one_step_jax(
    refl,
    to_sun,
    to_sensor,
    normal,
    params,
    albedo,
    weights,
    start,
    equality,
    max_iter,
    tol,
    max_steps,
    pad_to,
    phase,
):
    """One chunk through `solve_one_step_jax` in `one_step_dtype` of refl's (float32 or
    float64, refused on a TPU: `precision_scope`), padded to `pad_to` pixels; its float
    outputs returned in float64 (the covariance is computed from them in numba)."""
    dtype = one_step_dtype("jax", refl.dtype)
    pieces = [
        pad_pixels(a, pad_to, np.nan if i == 0 else 1.0)
        for i, a in enumerate((refl, to_sun, to_sensor, normal))
    ]
    with precision_scope(np.empty(0, dtype)):
        arrays = [jnp.asarray(a, dtype) for a in (*pieces, albedo, weights, start)]
        if phase is not None:
            phase = jnp.asarray(pad_pixels(phase, pad_to, 1.0), dtype)
        arguments = (*arrays[:4], params, *arrays[4:])
        keywords = dict(
            equality=jnp.asarray(equality),
            max_iter=max_iter,
            tol=tol,
            max_steps=max_steps,
            key=params.model_key,
            phase=phase,
            bands_last=bands_last_on(jax.devices()[0].platform),
        )
        # XLA compiles the solve on a worker thread while numba compiles the finish here
        if solve_one_step_jax.ahead(*arguments, **keywords) is not None:
            _compile_finish(albedo.shape[0], refl.shape[1])
        fetched = jax.device_get(solve_one_step_jax(*arguments, **keywords))
    n = refl.shape[0]
    return {
        k: np.asarray(v[:n], np.float64 if np.issubdtype(v.dtype, np.floating) else v.dtype)
        for k, v in fetched.items()
    }


def _compile_finish(n_endmembers: int, n_bands: int) -> None:
    """`finish_numba` compiled (where this process has not yet: numba's first call), by
    finishing a chunk of no pixels with the argument types of `_finish`'s calls."""
    p = n_endmembers
    empty = {
        "fractions": np.empty((0, p)),
        "hessian": np.empty((0, p, p)),
        "gradient": np.empty((0, p)),
        "sum_active": np.empty(0, np.bool_),
        "cost": np.empty(0),
    }
    finish_numba(empty, np.empty(0, np.int8), np.ones(p), True, True, n_bands)


def _finish(solved, status, iterations, endmembers, equality, weighted, n_bands):
    """The covariance, the UNDETERMINED status, and the conversion to mass fractions."""
    solved = dict(solved, fractions=np.require(solved["fractions"], np.float64, ("C", "W")).copy())
    status = np.require(status, np.int8, ("C", "W"))
    per_mass = cross_section_per_mass(
        endmembers.density, endmembers.grain_size, endmembers.extinction_efficiency
    )
    finished = finish_numba(solved, status, per_mass, weighted, equality, n_bands)
    return {
        **finished,
        "cross_section": solved["fractions"],  # NaN where unsolved (set by the kernel)
        "status": status,
        "iterations": iterations,
        "residual_norm": np.sqrt(solved["cost"]),
    }
