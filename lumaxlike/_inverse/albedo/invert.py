"""`invert`: the single-scattering albedo w of every pixel and band; the solver is chosen
by one argument and both return one `InversionResult`."""

from __future__ import annotations

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jaxtyping import ArrayLike, Float

from ..._declared_options import refuse_unknown, takes_options
from ..._model.forward import precision_scope
from ..._model.numba_threads import run_in_blocks
from ..._params import HapkeParams
from ..._photometric import PhotometricFunction
from ..._shapes import as_float_array, check_band_sigma, check_choice, check_positive_int, layout
from ..chunking import (
    call_chunk,
    chunk_problems,
    copy_rows,
    device_memory_bytes,
    pad_pixels,
    pipelined,
)
from ..defaults import DEFAULT_MAX_ITER, SOLVERS
from ..options import InvertSettings
from ..result import InversionResult
from .jax_solver import solve_albedo_jax
from .numba_solver import solve_albedo_numba
from .photometric_solver import solve_photometric_jax, solve_photometric_numba

__all__ = [
    "DEFAULT_MAX_ITER",
    "invert",
    "default_tolerance",
    "default_chunk_pixels",
    "solver_chunk_pixels",
    "albedo_bounds",
    "SOLVERS",
]

# The numba solver's default chunk, in problems (pixels x bands). It writes float64
# results straight into `invert`'s arrays and keeps its work in a row per block of
# pixels, so a chunk costs memory only for float32 input (a float64 copy of the chunk's
# refl and its w and residual: 24 B per problem, 100 MB) or with refl_sigma (the slope,
# 8 B). Each chunk is one parallel loop (`numba_threads.run_in_blocks`), whose start and
# end cost about a millisecond: a few large chunks spend less time there than
# `PROBLEMS_PER_CHUNK`'s many (measured when the loop was numba's prange, whose OpenMP
# threads spin-waited between chunks: benchmarks/bench_invert_units.py).
NUMBA_PROBLEMS_PER_CHUNK = 1 << 22


def default_tolerance(dtype) -> float:
    """Step tolerance in w: 1e-10 for float64, 1e-5 for float32 (a few float32 ulps of w)."""
    return 1e-10 if np.dtype(dtype) == np.float64 else 1e-5


def albedo_bounds(dtype) -> tuple[float, float]:
    """The projection interval for w: strictly inside (0, 1) in the given precision."""
    eps = float(np.finfo(dtype).eps)
    return eps, 1.0 - eps


def default_chunk_pixels(n_bands: int, dtype=np.float64, memory_bytes: int | None = None) -> int:
    """Pixels per chunk: about `chunking.PROBLEMS_PER_CHUNK` problems on a CPU (`memory_bytes`
    None), or as many as `chunking.chunk_problems` sizes from a device's memory [bytes]."""
    return max(1, chunk_problems(dtype, memory_bytes) // max(1, n_bands))


def solver_chunk_pixels(solver: str, n_bands: int, dtype) -> int:
    """`invert`'s default pixels per chunk for `solver`: the JAX solver's follow the
    memory of JAX's default device (a CPU's do not), the numba solver's are about
    `NUMBA_PROBLEMS_PER_CHUNK` problems."""
    if solver == "numba":
        return max(1, NUMBA_PROBLEMS_PER_CHUNK // max(1, n_bands))
    return default_chunk_pixels(n_bands, dtype, device_memory_bytes(jax.devices()[0]))


@takes_options(InvertSettings)
def invert(
    refl: Float[ArrayLike, "*pixels bands"],
    to_sun: Float[ArrayLike, "*#pixels 3"],
    to_sensor: Float[ArrayLike, "*#pixels 3"],
    normal: Float[ArrayLike, "*#pixels 3"],
    params: HapkeParams | PhotometricFunction,
    solver: str = "jax",
    *,
    w0=None,
    chunk_size: int | None = None,
    out: InversionResult | None = None,
    settings: InvertSettings | None = None,
    **options,
) -> InversionResult:
    """Invert the model for the albedo of every pixel and band: w of a Hapke model, or
    the albedo A of an empirical photometric function (docs/invert.md).

    With `HapkeParams`, each (pixel, band) is its own one-parameter least-squares problem
    r(w) = refl with the other parameters fixed at `params`, solved by Levenberg-Marquardt
    started from a per-pixel table of r(w). With a `PhotometricFunction` (r = A pht / pi)
    each is solved in closed form, A = pi refl / pht (docs/forward-model.md): w then
    holds A, iterations are 0, and w0, max_iter and tol are checked but unused.

    Args:
        refl: observed reflectance r [1/sr] (RADF / pi), shape ``pixels + (bands,)``, the
            bands last; float32 is solved in float32 by JAX (numba computes in float64);
            results have refl's dtype (float64 for integers); float16 is refused.
        to_sun: vectors (east, north, up) toward the light source, shape
            ``pixels + (3,)`` or ``(3,)`` for all pixels; any length > 0.
        to_sensor: vectors toward the sensor (the observer), same rule.
        normal: outward surface normals, same rule.
        params: `HapkeParams` or `PhotometricFunction`.
        solver: ``"jax"`` (CPU or GPU; the default here) or ``"numba"`` (CPU, parallel).
        w0: optional start in (0, 1), a scalar or shaped like `refl`; default: the table.
        chunk_size: pixels per chunk, which bounds memory; the default depends on the
            solver and device (docs/invert.md#chunks-and-memory).
        out: an `InversionResult` of an earlier call whose arrays are written in place
            (as NumPy's ``out=``): w, status, iterations and residual shaped like
            `refl`, of this call's dtypes, writable, C-contiguous and sharing no memory
            with the inputs or each other; sigma too where it is such an array (else a
            new one where `refl_sigma` is given). Saves allocating the results (where
            the host's fresh memory is slow to write: docs/benchmarks.md). On an
            exception, its contents are undefined.
        settings: the options below as one `InvertSettings` (None: the defaults).
        **options: the options of `InvertSettings` by name (each there with its unit,
            default and meaning): ``max_iter`` (Levenberg-Marquardt steps per problem at
            most), ``tol`` (tolerance on the step in w; default 1e-10 for float64, 1e-5
            for float32), ``refl_sigma`` (1-sigma of `refl` [1/sr], a scalar or one per
            band; gives `sigma`).

    Returns:
        `InversionResult` with w, status, iterations, residual and sigma shaped like refl
        (`out`'s arrays where given).

    Raises:
        ValueError: naming the argument, for an unknown solver, mismatched shapes, w0
            outside (0, 1), non-positive tol, max_iter or chunk_size, a negative or
            infinite refl_sigma, float16 arrays, an `out` whose arrays do not fit.
        TypeError: a keyword that is no option.
    """
    settings = InvertSettings.merged(settings, options)
    refuse_unknown("invert", options)
    max_iter, tol, refl_sigma = settings.max_iter, settings.tol, settings.refl_sigma
    check_choice("solver", solver, SOLVERS)
    if not isinstance(params, (HapkeParams, PhotometricFunction)):
        raise ValueError(
            f"params must be a lumaxlike.HapkeParams or lumaxlike.PhotometricFunction, got {type(params).__name__}"
        )
    refl = as_float_array("refl", refl)
    problem = _check_problem(refl, (to_sun, to_sensor, normal), solver, w0, refl_sigma, chunk_size)
    given = {} if out is None else _outputs_in(out, refl, problem)  # out's arrays used
    problem = problem._replace(
        outputs=problem.outputs | {k: a.reshape(problem.refl.shape) for k, a in given.items()}
    )
    tol = default_tolerance(problem.dtype) if tol is None else float(tol)
    if isinstance(params, PhotometricFunction):  # A = pi r / pht: no iterations
        _invert_closed_form(problem, params, solver)
    elif solver == "numba":
        _invert_numba(problem, params, max_iter, tol)
    else:
        _invert_jax(problem, params, max_iter, tol)
    return InversionResult(  # out's own arrays where given (not new views of them)
        **{
            name: given.get(name, problem.outputs[name].reshape(refl.shape))
            for name in _OUTPUTS + ("sigma",)
        }
    )


# the outputs a solver returns per chunk (sigma is computed from the slope)
_OUTPUTS = ("w", "status", "iterations", "residual")


class _Problem(NamedTuple):
    """`invert`'s checked, flattened problem: refl ``(pixels, bands)``, the three geometry
    arrays ``(pixels, 3)``, the start (or None), refl_sigma per band (or None), the pixels
    per chunk, the dtype and the output arrays ``(pixels, bands)`` by name."""

    refl: np.ndarray
    geometry: list
    w0: np.ndarray | None
    band_sigma: np.ndarray | None
    chunk: int
    dtype: type
    outputs: dict

    def pieces(self, start: int):
        """The chunk at `start`: (start, stop, [refl, to_sun, to_sensor, normal], w0)."""
        stop = min(start + self.chunk, self.refl.shape[0])
        pieces = [self.refl[start:stop], *(g[start:stop] for g in self.geometry)]
        return start, stop, pieces, None if self.w0 is None else self.w0[start:stop]

    def targets(self, start: int, stop: int) -> dict:
        """The output rows of pixels start..stop (views), sigma excepted."""
        return {name: self.outputs[name][start:stop] for name in _OUTPUTS}

    def store(self, start: int, stop: int, solved: dict, targets: dict) -> None:
        """Copies a chunk's results into `targets` (where not written there already) and
        sets sigma_w = sigma_r / |dr/dw| where refl_sigma is given."""
        for name, target in targets.items():
            if solved[name] is not target:  # the numba solver wrote into it already
                copy_rows(target, solved[name])
        if self.band_sigma is not None:  # rows on the run's threads, as `copy_rows`
            sigma = self.outputs["sigma"][start:stop]
            run_in_blocks(_sigma_rows, stop - start, sigma, self.band_sigma, solved["slope"])


def _sigma_rows(first: int, last: int, sigma, band_sigma, slope) -> None:
    """sigma_w = sigma_r / |dr/dw| for rows first..last - 1 of a chunk."""
    np.divide(band_sigma, np.abs(slope[first:last]), out=sigma[first:last])


def _check_problem(refl, geometry, solver, w0, refl_sigma, chunk_size) -> _Problem:
    """Checks `invert`'s arrays, start, refl_sigma and chunk size (ValueError naming the
    argument) and sets up the flat problem and its empty outputs."""
    geometry = {
        name: as_float_array(name, g)
        for name, g in zip(("to_sun", "to_sensor", "normal"), geometry)
    }
    shape = layout("refl", refl, geometry)
    dtype = np.float32 if refl.dtype == np.float32 else np.float64
    n_pixels, n_bands = shape.n_pixels, shape.n_bands
    if chunk_size is None:
        chunk = solver_chunk_pixels(solver, n_bands, dtype)
    else:
        chunk = check_positive_int("chunk_size", chunk_size)
    chunk = call_chunk(solver, n_pixels, chunk)
    flat_geometry = [
        np.broadcast_to(g, shape.pixel_shape + (3,)).reshape(n_pixels, 3) for g in geometry.values()
    ]
    flat_w0 = None if w0 is None else _check_w0(w0, refl.shape, (n_pixels, n_bands))
    band_sigma = check_band_sigma(refl_sigma, n_bands)
    outputs = {
        "w": np.empty((n_pixels, n_bands), dtype),
        "status": np.empty((n_pixels, n_bands), np.int8),
        "iterations": np.empty((n_pixels, n_bands), np.int32),
        "residual": np.empty((n_pixels, n_bands), dtype),
        # written chunk by chunk where refl_sigma is given; else NaN everywhere, a read-only
        # broadcast view that takes no memory
        "sigma": np.empty((n_pixels, n_bands), dtype)
        if band_sigma is not None
        else np.broadcast_to(np.array(np.nan, dtype), (n_pixels, n_bands)),
    }
    flat_refl = refl.reshape(n_pixels, n_bands)
    return _Problem(flat_refl, flat_geometry, flat_w0, band_sigma, chunk, dtype, outputs)


def _outputs_in(out, refl: np.ndarray, problem: _Problem) -> dict:
    """The arrays of `out` (`invert`'s ``out``) that hold this call's outputs, by name,
    checked (ValueError naming the array): all but sigma, which is used only where
    ``refl_sigma`` is given and ``out.sigma`` fits."""
    if not isinstance(out, InversionResult):
        raise ValueError(
            f"out must be a lumaxlike.InversionResult (an earlier call's), got {type(out).__name__}"
        )
    dtypes = {"w": problem.dtype, "status": np.int8, "iterations": np.int32}
    dtypes |= {"residual": problem.dtype, "sigma": problem.dtype}
    taken = [refl, *problem.geometry] + ([] if problem.w0 is None else [problem.w0])
    given = {}
    for name, dtype in dtypes.items():
        array = getattr(out, name)
        why = _unfit_output(array, refl.shape, np.dtype(dtype), taken)
        if name == "sigma":  # optional: used where it fits and is needed
            if problem.band_sigma is None or why is not None:
                continue
        elif why is not None:
            raise ValueError(
                f"out.{name} must be a writable, C-contiguous {np.dtype(dtype).name} array "
                f"of refl's shape {refl.shape}, sharing no memory with the inputs or "
                f"out's other arrays: {why}"
            )
        given[name] = array
        taken.append(array)
    return given


def _unfit_output(array, shape: tuple, dtype: np.dtype, taken: list) -> str | None:
    """Why `array` cannot hold one of `invert`'s outputs (`_outputs_in`), or None."""
    if not isinstance(array, np.ndarray):
        return f"got {type(array).__name__}"
    if array.shape != shape or array.dtype != dtype:
        return f"got {array.dtype.name} of shape {array.shape}"
    if not (array.flags.writeable and array.flags.c_contiguous):
        return "got a read-only or non-contiguous array"
    if any(np.may_share_memory(array, other) for other in taken):
        return "it shares memory with an input or another of out's arrays"
    return None


def _check_w0(w0, refl_shape, flat_shape) -> np.ndarray:
    """`invert`'s w0 strictly inside (0, 1) and broadcast to refl's shape, flattened to
    ``(pixels, bands)``."""
    w0 = as_float_array("w0", w0)
    if not np.all((w0 > 0.0) & (w0 < 1.0)):
        raise ValueError(
            f"w0 must lie strictly inside (0, 1), got values in [{np.nanmin(w0)}, {np.nanmax(w0)}]"
        )
    try:
        return np.broadcast_to(w0, refl_shape).reshape(flat_shape)
    except ValueError:
        raise ValueError(
            f"w0 has shape {w0.shape}, which does not broadcast to refl's {refl_shape}"
        ) from None


def _invert_closed_form(problem: _Problem, params, solver: str) -> None:
    """A `PhotometricFunction`'s A = pi r / pht, chunk by chunk, into `problem.outputs`."""
    for start in range(0, problem.refl.shape[0], problem.chunk):
        start, stop, pieces, _ = problem.pieces(start)
        targets = problem.targets(start, stop)
        targets.pop("iterations")[...] = 0
        solved = _solve_chunk_photometric(pieces, problem.chunk, problem.dtype, params, solver)
        problem.store(start, stop, solved, targets)


def _invert_numba(problem: _Problem, params, max_iter: int, tol: float) -> None:
    """The numba solver, chunk by chunk, writing straight into `problem.outputs` where
    the dtypes match."""
    n_pixels, n_bands = problem.refl.shape
    # the slope only where sigma needs it: one chunk's, reused by every chunk
    slope = np.empty((problem.chunk, n_bands)) if problem.band_sigma is not None else None
    for start in range(0, n_pixels, problem.chunk):
        start, stop, pieces, piece_w0 = problem.pieces(start)
        targets = problem.targets(start, stop)
        given = targets if slope is None else {**targets, "slope": slope[: stop - start]}
        piece_refl, piece_sun, piece_sensor, piece_normal = pieces
        solved = solve_albedo_numba(
            piece_refl,
            piece_sun,
            piece_sensor,
            piece_normal,
            params,
            piece_w0,
            max_iter,
            tol,
            albedo_bounds(problem.dtype),
            out=given,
            keep_slope=slope is not None,
        )
        problem.store(start, stop, solved, targets)


def _invert_jax(problem: _Problem, params, max_iter: int, tol: float) -> None:
    """The JAX solver: chunk k + 1 dispatched before chunk k's results are fetched
    (`pipelined`)."""
    chunk, dtype = problem.chunk, problem.dtype
    bounds = albedo_bounds(dtype)
    with_slope = problem.band_sigma is not None

    def launch(start):
        start, stop, pieces, piece_w0 = problem.pieces(start)
        launched = _launch_chunk_jax(pieces, piece_w0, chunk, dtype, params, max_iter, tol, bounds)
        for name in _fetched(with_slope):  # each transfer starts once its output is computed
            launched[name].copy_to_host_async()
        return start, stop, launched

    def collect(launched):
        start, stop, solved = launched
        fetched = _fetch(solved, with_slope)
        problem.store(start, stop, fetched, problem.targets(start, stop))

    pipelined(range(0, problem.refl.shape[0], chunk), launch, collect)


def _solve_chunk_photometric(pieces, chunk, dtype, params, solver):
    """One chunk of a `PhotometricFunction`'s closed-form inversion by `solver`'s backend
    (JAX: padded to `chunk` pixels, in the inputs' precision; numba: float64)."""
    if solver == "numba":
        refl, to_sun, to_sensor, normal = pieces
        return solve_photometric_numba(refl, to_sun, to_sensor, normal, params)
    refl, to_sun, to_sensor, normal = (
        pad_pixels(p, chunk, np.nan if i == 0 else 1.0) for i, p in enumerate(pieces)
    )
    with precision_scope(np.empty(0, dtype)):
        solved = solve_photometric_jax(
            jnp.asarray(refl, dtype),
            jnp.asarray(to_sun, dtype),
            jnp.asarray(to_sensor, dtype),
            jnp.asarray(normal, dtype),
            params,
        )
        return {name: np.asarray(value) for name, value in jax.device_get(solved).items()}


def _launch_chunk_jax(pieces, w0, chunk, dtype, params, max_iter, tol, bounds):
    """Start one chunk's solve (asynchronous: returns the device arrays at once), padded
    to `chunk` pixels so that every chunk has one shape and compiles once."""
    refl, to_sun, to_sensor, normal = (
        pad_pixels(p, chunk, np.nan if i == 0 else 1.0) for i, p in enumerate(pieces)
    )
    with precision_scope(np.empty(0, dtype)):
        arrays = [jnp.asarray(a, dtype) for a in (refl, to_sun, to_sensor, normal)]
        start = None if w0 is None else jnp.asarray(pad_pixels(w0, chunk, 0.5), dtype)
        return solve_albedo_jax(*arrays, params, start, max_iter, tol, bounds)


def _fetched(with_slope: bool) -> tuple:
    """The outputs fetched from a launched chunk: the slope only where sigma needs it."""
    return _OUTPUTS + (("slope",) if with_slope else ())


def _fetch(solved, with_slope):
    """A launched chunk's results (waits for them): one transfer per output
    (`_fetched`), already started at the launch; `invert` then copies them once, into its
    result arrays (`copy_rows`)."""
    fetched = jax.device_get({name: solved[name] for name in _fetched(with_slope)})
    return {name: np.asarray(value) for name, value in fetched.items()}
