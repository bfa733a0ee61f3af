"""`unmix`: mass fractions of an intimate mixture per pixel, by either route and solver."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np

from .._inverse.albedo.invert import DEFAULT_MAX_ITER, SOLVERS, invert
from .._inverse.chunking import call_chunk, pad_pixels
from .._model.forward import precision_scope
from .._params import HapkeParams
from .._shapes import as_float_array, check_band_sigma, check_choice, check_positive_int, layout
from .._status import Status
from .band_matching import band_order
from .endmembers import Endmembers
from .jax_unmix import solve_one_step_jax
from .mixing import cross_section_per_mass
from .numba_one_step import one_step_numba
from .numba_unmix import finish_numba, two_step_numba
from .phase import phase_table
from .result import UnmixResult
from .simplex_qp import QP_SINGULAR, QP_STALLED, max_qp_steps

__all__ = ["unmix", "unmix_flat", "ROUTES", "DEFAULT_TOLERANCE", "default_chunk_pixels"]

ROUTES = ("one_step", "two_step")
DEFAULT_TOLERANCE = 1e-10  # on the step of every cross-section fraction
# The two-step route inverts w to rounding: a solver error in w (invert's default step
# tolerance 1e-10) would act as noise in w-space, and the fraction of an absent endmember
# would come back as a small positive number instead of its bound.
ALBEDO_TOLERANCE = 1e-13
# band-endmember products per chunk: the JAX solver keeps (pixels, bands, p) columns
# (~16 MB in float64 at this size); the numba kernels keep only the outputs.
PRODUCTS_PER_CHUNK = 1 << 21
# the worst band status decides a two-step pixel that is not solved
_PIXEL_FAILURES = (Status.NONFINITE_INPUT, Status.INVALID_GEOMETRY, Status.UNREACHABLE)
_SOLVED = (Status.CONVERGED, Status.MAX_ITER, Status.UNDETERMINED)


def default_chunk_pixels(n_bands: int, n_endmembers: int) -> int:
    """Pixels per chunk: about `PRODUCTS_PER_CHUNK` / (bands x (endmembers + 1))."""
    return max(1, PRODUCTS_PER_CHUNK // max(1, n_bands * (n_endmembers + 1)))


def unmix(
    refl,
    to_sun,
    to_sensor,
    normal,
    endmembers: Endmembers,
    params: HapkeParams,
    solver: str = "jax",
    *,
    route: str = "one_step",
    sum_to_one: bool = True,
    refl_sigma=None,
    max_iter: int = DEFAULT_MAX_ITER,
    tol: float | None = None,
    chunk_size: int | None = None,
    wavelengths=None,
    free=(),
    starts: int | None = None,
) -> UnmixResult:
    """Mass fractions of the endmembers in every pixel, through Hapke's intimate mixing.

    The mixture's single-scattering albedo is w_mix = sum_j f_j w_j with cross-section
    fractions f_j = M_j c_j / sum_k M_k c_k, c_j = Q_j / (rho_j D_j) (Hapke 2012, ch. 10);
    its reflectance is the model `params` (every model configuration; the phase function
    and the other parameters shared by all endmembers) at the pixel's geometry. One
    problem per pixel: its n_endmembers fractions from its bands. Fractions are
    non-negative; a fraction at its bound is exactly 0 and flagged in `at_bound`.

    Per-endmember phase functions (`Endmembers.phase`): the mixture's phase function is
    then p_mix = sum_j f_j w_j p_j / w_mix per band and pixel (its Legendre
    coefficients, and AMSA's P(mu0e), P(mue), P-bar, mix the same way), in place of the
    phase function of `params` (its other parameters, the multiple-scattering and
    H-function choices still hold); the one-step route's derivatives include the change
    of p_mix with each fraction. Only the one-step route takes them: the two-step
    route's `invert` assumes one phase function for the whole mixture, which is not
    exact when they differ, so it refuses them (ValueError).

    Routes:
        ``"one_step"`` (default): Levenberg-Marquardt in reflectance space with the
        model's analytic derivatives, dr_k/df_j = dr/dw(w_mix,k) w_jk; each step solves
        the damped linearised subproblem exactly under the constraints (an active-set
        programme). The noise of r is weighted correctly (by refl_sigma), so the
        covariance is the right one. Use it for noisy data and whenever the uncertainties
        matter.
        ``"two_step"``: `invert` every band to w, then per pixel the constrained linear
        least squares in w-space (exact, since w_mix is linear in f). Much faster on large
        cubes and exact on noise-free data, but it weighs the noise in w-space: each band
        by 1/sigma_w^2 = (dr/dw / refl_sigma)^2 when refl_sigma is given (the linearised
        weighting), equally otherwise (bright bands, where dr/dw is small, then count as
        much as dark ones). A band that `invert` cannot fit (r above r(w -> 1), from noise)
        makes the pixel UNREACHABLE, where the one-step route still fits it. Not with
        per-endmember phase functions (`Endmembers.phase`).

    Args:
        refl: observed bidirectional reflectance r [1/sr] (RADF / pi), shape
            ``pixels + (bands,)``, bands last, the endmembers' bands. Computed in float64;
            float32 input gives float32 fractions, covariance, remainder and residuals.
            A pixel with no band r > 0 is UNREACHABLE (no mixture reflects it).
        to_sun: direction vectors (east, north, up) toward the source, shape
            ``pixels + (3,)`` or ``(3,)`` for all pixels (as for `invert`).
        to_sensor: toward the observer, same rule.
        normal: outward surface normals, same rule.
        endmembers: `Endmembers` (albedo spectra on the cube's bands, density, grain
            size, extinction efficiency). A shared dark neutral endmember is one more row
            with constant w. A free grain size per endmember is not offered: under this
            mixing rule D_j only rescales c_j, so it is degenerate with the mass fraction
            unless w_j(D) is modelled from optical constants.
        params: `HapkeParams` of the mixture (its phase function is the mixture's,
            unless the endmembers have their own: `Endmembers.phase`).
        solver: ``"jax"`` or ``"numba"``: the one-step route's Levenberg-Marquardt runs
            in it; the two-step route's `invert` runs in it, and its w-space programme in
            numba for both (a CPU step after the inversion).
        route: ``"one_step"`` or ``"two_step"`` (above).
        sum_to_one: the fractions sum to one (default). False fits an unmodelled
            remainder: a perfectly absorbing component (w = 0) of cross-section fraction
            `UnmixResult.remainder` = 1 - sum_j f_j >= 0 (a dark, opaque or
            space-weathered part of the surface the library does not hold); its density
            and grain size being unknown, `UnmixResult.fractions` are then the mass
            fractions of the modelled endmembers relative to their total.
        refl_sigma: 1-sigma uncertainty of refl [1/sr] (positive), a scalar or one value
            per band: the bands are weighted by it and the covariance is scaled by it.
            Without it the bands weigh equally and the covariance is scaled by the
            residual variance.
        max_iter: Levenberg-Marquardt steps per pixel at most (and `invert`'s cap in the
            two-step route).
        tol: convergence tolerance on the step of every cross-section fraction (default
            1e-10).
        chunk_size: pixels per chunk (memory is bounded by the chunk; the JAX solver
            runs a smaller call as one chunk rounded up to one of a few sizes, so that
            calls of nearby sizes share their compiled programs); default about
            2 M band-endmember products per chunk.
        wavelengths: refl's band centres [um], shape (bands,), or None. With
            ``endmembers.wavelengths`` also given, refl's bands are matched to the
            endmembers' by wavelength (any order); band centres that are not the
            endmembers' are refused. Without either, bands are taken in order.
        free: ``"grain_size"``, ``"npfe"`` or both: fit each endmember's grain size and
            the pixel's nanophase iron too (endmembers from
            `Endmembers.from_optical_constants`; one-step route; docs/unmixing.md).
        starts: with ``free``, the solver's starts per pixel (default 1): the given
            grain sizes, then all of them scaled by 3, 1/3, 9, 1/9, ... (npFe0 alone:
            over its bounds); per pixel the CONVERGED start of lowest cost is kept.

    Returns:
        `UnmixResult`.

    Raises:
        ValueError: naming the argument, for an unknown solver or route, endmembers
            whose bands do not match refl's (in number, or by wavelength), mismatched
            shapes, a non-positive refl_sigma, tol, max_iter or chunk_size, or float16
            arrays, or
            route="two_step" with per-endmember phase functions (`Endmembers.phase`).
    """
    check_choice("solver", solver, SOLVERS)
    check_choice("route", route, ROUTES)
    if free:  # grain sizes and npFe0 from optical constants: `optical`
        from .optical_unmix import unmix_optical

        return unmix_optical(refl, to_sun, to_sensor, normal, endmembers, params, solver, free=free, starts=starts, route=route, sum_to_one=sum_to_one, refl_sigma=refl_sigma, max_iter=max_iter, tol=tol, chunk_size=chunk_size, wavelengths=wavelengths)  # fmt: skip
    if not isinstance(endmembers, Endmembers):
        raise ValueError(
            f"endmembers must be a lumaxlike.Endmembers, got {type(endmembers).__name__}"
        )
    _refuse_two_step_with_own_phases(route, endmembers)
    if not isinstance(params, HapkeParams):
        raise ValueError(f"params must be a lumaxlike.HapkeParams, got {type(params).__name__}")
    if not isinstance(sum_to_one, (bool, np.bool_)):
        raise ValueError(f"sum_to_one must be True or False, got {sum_to_one!r}")
    refl = as_float_array("refl", refl)
    geometry = {
        name: as_float_array(name, g)
        for name, g in zip(("to_sun", "to_sensor", "normal"), (to_sun, to_sensor, normal))
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
    tol = DEFAULT_TOLERANCE if tol is None else float(tol)
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
    n_pixels, n_end = shape.n_pixels, endmembers.n_endmembers
    chunk = (
        default_chunk_pixels(shape.n_bands, n_end)
        if chunk_size is None
        else check_positive_int("chunk_size", chunk_size)
    )
    chunk = call_chunk(solver, n_pixels, chunk)

    flat_refl = refl.reshape(n_pixels, shape.n_bands)
    to_sun, to_sensor, normal = (
        np.broadcast_to(g, shape.pixel_shape + (3,)).reshape(n_pixels, 3) for g in geometry.values()
    )
    names = (
        "fractions",
        "covariance",
        "at_bound",
        "cross_section",
        "remainder",
        "status",
        "iterations",
        "residual_norm",
    )
    outputs: dict[str, np.ndarray] = {}
    for start in range(0, n_pixels, chunk):
        stop = min(start + chunk, n_pixels)
        solved = unmix_flat(
            flat_refl[start:stop],
            to_sun[start:stop],
            to_sensor[start:stop],
            normal[start:stop],
            endmembers,
            params,
            solver,
            route=route,
            sum_to_one=bool(sum_to_one),
            band_sigma=band_sigma,
            max_iter=max_iter,
            tol=tol,
            pad_to=chunk,
        )
        if not outputs:
            outputs = {
                k: np.empty((n_pixels,) + solved[k].shape[1:], solved[k].dtype) for k in names
            }
        for k in names:
            outputs[k][start:stop] = solved[k]
    if not outputs:  # no pixels
        empty = unmix_flat(
            np.zeros((0, shape.n_bands)),
            *(np.zeros((0, 3)),) * 3,
            endmembers,
            params,
            "numba",
            route=route,
            sum_to_one=bool(sum_to_one),
            band_sigma=band_sigma,
            max_iter=max_iter,
            tol=tol,
        )
        outputs = {k: empty[k] for k in names}
    pixel_shape = shape.pixel_shape
    if refl.dtype == np.float32:  # computed in float64, returned in the input's precision
        outputs = {
            k: v.astype(np.float32) if v.dtype == np.float64 else v for k, v in outputs.items()
        }
    return UnmixResult(
        names=endmembers.names,
        route=route,
        **{k: v.reshape(pixel_shape + v.shape[1:]) for k, v in outputs.items()},
    )


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
            a scalar or (bands,) array of refl_sigma (> 0); pad_to: the JAX solvers pad
            the chunk to this many pixels (one compile per chunk shape).
    Returns:
        dict of the `UnmixResult` fields as flat arrays (pixels first).
    """
    n, n_bands = refl.shape
    equality = bool(sum_to_one)
    albedo = endmembers.albedo
    p = albedo.shape[0]
    max_steps = max_qp_steps(p)
    if route == "one_step":
        weights = (
            np.ones(n_bands)
            if band_sigma is None
            else np.broadcast_to(1.0 / np.asarray(band_sigma, np.float64), (n_bands,))
        )
        start = np.full(p, 1.0 / p if equality else 1.0 / (p + 1))
        # per-endmember phase functions: their terms at every pixel, once per chunk (numba,
        # for both solvers: a CPU step before the solve)
        phase = (
            None
            if endmembers.phase is None
            else phase_table(to_sun, to_sensor, normal, params, endmembers.phase)
        )
        if solver == "numba":
            solved = one_step_numba(
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
                phase,
            )
        else:
            solved = _one_step_jax(
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
                pad_to or n,
                phase,
            )
        status = solved["status"].astype(np.int8)
        iterations = solved["iterations"].astype(np.int32)
    else:
        _refuse_two_step_with_own_phases(route, endmembers)
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
            chunk_size=max(1, pad_to or n),
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
            inverted.w.reshape(n, n_bands), sigma_w, solve, albedo, equality, max_steps
        )
        status[solve & (solved["code"] == QP_SINGULAR)] = Status.UNDETERMINED
        status[solve & (solved["code"] == QP_STALLED)] = Status.MAX_ITER
        iterations = (
            inverted.iterations.reshape(n, n_bands).max(axis=-1, initial=0).astype(np.int32)
        )
    # no band above 0 (a negated or zero cube): no mixture explains it, though the fit
    # would put it on the darkest vertex (as `fit`; a noisy band <= 0 among others is data)
    with np.errstate(invalid="ignore"):
        none_positive = ~np.any(refl > 0.0, axis=-1)
    status[none_positive & np.isin(status, _SOLVED)] = Status.UNREACHABLE
    return _finish(
        solved, status, iterations, endmembers, equality, band_sigma is not None, n_bands
    )


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
    phase=None,
):
    pieces = [
        pad_pixels(a, pad_to, np.nan if i == 0 else 1.0)
        for i, a in enumerate((refl, to_sun, to_sensor, normal))
    ]
    with precision_scope(np.empty(0, np.float64)):
        arrays = [jnp.asarray(a, jnp.float64) for a in (*pieces, albedo, weights, start)]
        if phase is not None:
            phase = jnp.asarray(pad_pixels(phase, pad_to, 1.0), jnp.float64)
        solved = solve_one_step_jax(
            *arrays[:4],
            params,
            *arrays[4:],
            equality=jnp.asarray(equality),
            max_iter=max_iter,
            tol=tol,
            max_steps=max_steps,
            key=params.model_key,
            phase=phase,
        )
        return {k: np.asarray(v)[: refl.shape[0]] for k, v in jax.device_get(solved).items()}


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
