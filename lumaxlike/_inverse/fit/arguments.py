"""The arguments `fit` and the joint fits (`joint.joint`, `joint.regional_fit`) check
alike, and their starting values: free parameters, bounds, the arrays' shapes, the chunk,
given starts and the albedo's default start.

Written once here so that `fit`, which hands joint problems to `joint.fit_joint`, and the
joint fits, which take `fit`'s checks, import this module and not each other.
"""

from __future__ import annotations

import math

import numpy as np

from ..._model.device_precision import default_is_cpu
from ..._params import PARAMETER_NAMES, HapkeParams
from ..._shapes import as_float_array, check_choice, check_positive_int
from ..._status import Status
from ..albedo.invert import albedo_bounds, default_tolerance, invert
from ..chunking import call_chunk

__all__ = [
    "OBSERVATIONS_PER_CHUNK",
    "albedo_start",
    "check_arrays",
    "check_bounds",
    "check_free",
    "check_iterations",
    "checked_starts",
    "default_bounds",
    "default_chunk",
]

# Problem-observations per chunk: the JAX solver keeps, for each, the row of the model's
# derivative program (20-40 values, `columns_program`), the observation and the p + 1
# columns of a step (~40-50 floats), so 131 k of them take ~50 MB in float64.
OBSERVATIONS_PER_CHUNK = 1 << 17
# On an accelerator a chunk of 131 k problem-observations (512 pixels of 16 bands and 16
# observations) keeps the chip waiting on the host's round trips between rounds. Measured
# on a TPU v5e (float32, 4 free parameters, 16 bands, 16 observations): 1.8e5 problems/s
# with 512-pixel chunks, 5.1e5/s with 4096-pixel chunks (8x, ~30 s of compilation); 32x
# compiled for ~90 s (XLA's compile time there grows with the shape).
ACCELERATOR_CHUNK_SCALE = 8
# The JAX solver on a CPU: each chunk ends with its batch draining (the queue empty, the
# last problems stepping a batch of mostly idle slots, `refill.py`), a cost per chunk
# that larger chunks spread over more problems. bench_fit's JAX subsample (2000 pixels,
# 16 bands, 16 observations, 4 free; 2 cores), warm: 1.7-1.9x numba's time with the
# base chunk (512 pixels), 1.2-1.3x with 4x; ~200 MB of chunk state in float64. Joint
# fits (`joint.py`, this chunk too) gain as well: 6.2-6.9 -> 3.6-3.9 s (bench_joint's
# scene, 2048 pixels), 3.5-3.7 -> 2.5-2.6 s (its six-band row, 1500 pixels).
CPU_JAX_CHUNK_SCALE = 4


def default_bounds(dtype=np.float64) -> dict[str, tuple[float, float]]:
    """The physical bounds every free parameter is projected onto (closed intervals).

    w in (0, 1) (eps inside); b in [0, 1); c in [-1, 1]; roughness theta-bar in
    [1e-3 rad, 45 deg]; hs, hc >= 1e-6; bs0 >= 0; bc0 in [0, 1]; porosity_k >= 1;
    asymmetry in (-1, 1) (as b, eps inside).
    theta-bar, h_S and h_C
    stay off 0, where their effect switches off: at theta-bar = 0 the derivative of r
    vanishes, and a fit projected there could never leave (1e-3 rad = 0.06 deg is
    smooth for any purpose).
    """
    w_lower, w_upper = albedo_bounds(dtype)
    return {
        "w": (w_lower, w_upper),
        "b": (0.0, w_upper),
        "c": (-1.0, 1.0),
        "roughness": (1e-3, math.radians(45.0)),
        "hs": (1e-6, math.inf),
        "bs0": (0.0, math.inf),
        "hc": (1e-6, math.inf),
        "bc0": (0.0, 1.0),
        "porosity_k": (1.0, math.inf),
        "asymmetry": (-w_upper, w_upper),
    }


def check_free(free, params: HapkeParams) -> tuple[str, ...]:
    """`free` as a tuple of parameter names `params` lets `fit` fit; ValueError naming it."""
    if isinstance(free, str):
        free = (free,)
    free = tuple(free)
    if not free or len(set(free)) != len(free):
        raise ValueError(f"free must name each fitted parameter once, got {free!r}")
    for name in free:
        check_choice("free", name, PARAMETER_NAMES)
    if "w" not in free:
        raise ValueError(
            f"free must include 'w' (HapkeParams holds no albedo to fix it at), got {free!r}"
        )
    if params.legendre is not None:
        raise ValueError(
            "fit needs a closed-form phase function: params.legendre must be "
            "None (invert takes Legendre coefficients)"
        )
    # a phase-function parameter the chosen phase function does not use: zero derivative
    used, unused = (
        ("b, c", ("asymmetry",)) if params.phase_function == "dhg" else ("asymmetry", ("b", "c"))
    )
    for name in free:
        if name in unused:
            raise ValueError(
                f"{name} is free but params.phase_function={params.phase_function!r} does not "
                f"use it (zero derivative); its parameters are {used}"
            )
    switches = {
        "hs": "hs",
        "bs0": "hs",
        "hc": "hc",
        "bc0": "hc",
        "roughness": "roughness",
    }
    for name in free:
        switch = switches.get(name)
        if switch is not None and not getattr(params, switch) > 0.0:
            raise ValueError(
                f"{name} is free but params.{switch} = 0 switches its effect off (zero "
                f"derivative); start from params.{switch} > 0"
            )
    return free


def check_bounds(bounds, free, dtype) -> tuple[np.ndarray, np.ndarray]:
    """(lower, upper) of the `free` parameters: `default_bounds` with `bounds` replacing some."""
    merged = default_bounds(dtype)
    for name, interval in (bounds or {}).items():
        check_choice("bounds", name, PARAMETER_NAMES)
        lower, upper = (float(v) for v in interval)
        if not lower < upper:
            raise ValueError(f"bounds[{name!r}] must have lower < upper, got {interval!r}")
        merged[name] = (lower, upper)
    return np.array([merged[n][0] for n in free]), np.array([merged[n][1] for n in free])


def check_arrays(refl, to_sun, to_sensor, normal) -> tuple[np.ndarray, list[np.ndarray]]:
    """refl ``pixels + (bands, observations)`` and its geometry [to_sun, to_sensor, normal],
    each ``pixels + (observations, 3)`` or ``(observations, 3)``, as float arrays, checked."""
    refl = as_float_array("refl", refl)
    geometry = {
        "to_sun": as_float_array("to_sun", to_sun),
        "to_sensor": as_float_array("to_sensor", to_sensor),
        "normal": as_float_array("normal", normal),
    }
    if refl.ndim < 2:
        raise ValueError(f"refl must have shape pixels + (bands, observations), got {refl.shape}")
    pixel_shape, n_obs = refl.shape[:-2], refl.shape[-1]
    if n_obs == 0:
        raise ValueError(
            f"refl has no observations (its last axis has length 0, shape {refl.shape})"
        )
    for name, array in geometry.items():
        if array.shape not in ((n_obs, 3), pixel_shape + (n_obs, 3)):
            raise ValueError(
                f"{name} must have shape pixels + (observations, 3) = {pixel_shape + (n_obs, 3)} "
                f"or (observations, 3) = {(n_obs, 3)}, got {array.shape}"
            )
    return refl, list(geometry.values())


def check_iterations(max_iter, tol, dtype) -> tuple[int, float]:
    """(max_iter, tol) checked, tol's default for `dtype` where it is None."""
    max_iter = check_positive_int("max_iter", max_iter)
    tol = default_tolerance(dtype) if tol is None else float(tol)
    if not tol > 0.0:
        raise ValueError(f"tol must be positive, got {tol!r}")
    return max_iter, tol


def default_chunk(chunk_size, n_bands: int, n_obs: int, n_pixels: int, solver: str) -> int:
    """Pixels per chunk: at most `chunk_size`, checked, or about `OBSERVATIONS_PER_CHUNK`
    problem-observations (for the JAX solver `CPU_JAX_CHUNK_SCALE` times more on a CPU,
    `ACCELERATOR_CHUNK_SCALE` on an accelerator), cut for `solver` by
    `chunking.call_chunk`."""
    per_chunk = OBSERVATIONS_PER_CHUNK
    if solver == "jax" and chunk_size is None:
        on_cpu = default_is_cpu()
        per_chunk *= CPU_JAX_CHUNK_SCALE if on_cpu else ACCELERATOR_CHUNK_SCALE
    default = max(1, per_chunk // max(1, n_bands * n_obs))
    chunk = default if chunk_size is None else check_positive_int("chunk_size", chunk_size)
    return call_chunk(solver, n_pixels, chunk)


def checked_starts(start, free, shared, params, pixel_shape, n_bands, lower, upper) -> dict:
    """{name: flat array} of the starting values `start` gives, checked: (pixels, bands),
    or (pixels,) for a name in `shared`; a fixed start in `params` is checked too."""
    n_pixels = int(np.prod(pixel_shape, dtype=np.int64))
    checked = {}
    for name, value in dict(start or {}).items():
        if name not in free:
            raise ValueError(f"start names {name!r}, which is not in free={free!r}")
        j = free.index(name)
        shape = pixel_shape if name in shared else pixel_shape + (n_bands,)
        value = as_float_array(f"start[{name!r}]", value)
        try:
            value = np.broadcast_to(value, shape).reshape((n_pixels,) + shape[len(pixel_shape) :])
        except ValueError:
            where = "pixels" if name in shared else "pixels + (bands,)"
            raise ValueError(
                f"start[{name!r}] has shape {value.shape}, which does not broadcast to {where} = {shape}"
            ) from None
        if not np.all((value >= lower[j]) & (value <= upper[j])):
            raise ValueError(f"start[{name!r}] must lie within its bounds [{lower[j]}, {upper[j]}]")
        checked[name] = value
    for j, name in enumerate(free):
        if (
            name not in checked
            and name != "w"
            and not lower[j] <= float(getattr(params, name)) <= upper[j]
        ):
            raise ValueError(
                f"params.{name} = {getattr(params, name)} lies outside its bounds [{lower[j]}, {upper[j]}]"
            )
    return checked


# the starting w's tolerance: a start needs no more than ~1e-6 (the fit's first step does better)
ALBEDO_START_TOL = 1e-6


def albedo_start(refl, geometry, params, solver, lower, upper):
    """Median over observations of w from each observation alone (`invert`).

    refl: (pixels, bands, observations); geometry: (pixels, observations, 3) each.
    """
    per_observation = np.moveaxis(refl, -1, 1)  # (pixels, observations, bands)
    to_sun, to_sensor, normal = geometry
    single = invert(
        per_observation, to_sun, to_sensor, normal, params, solver=solver, tol=ALBEDO_START_TOL
    )
    w = np.sort(np.where(single.status == Status.CONVERGED, single.w, np.nan), axis=1)  # NaN last
    n_solved = np.sum(np.isfinite(w), axis=1, keepdims=True)
    low = np.take_along_axis(w, np.maximum(n_solved - 1, 0) // 2, axis=1)[:, 0]
    high = np.take_along_axis(w, n_solved // 2 - (n_solved == 0), axis=1)[:, 0]
    median = np.where(n_solved[:, 0] > 0, 0.5 * (low + high), 0.5)  # 0.5 where none solved
    return np.clip(median, lower, upper)


def check_shared(shared, free, argument: str = "shared") -> tuple[str, ...]:
    """`shared` (or `regional`) as a tuple of names among `free` (not w); ValueError naming it."""
    if isinstance(shared, str):
        shared = tuple(s for s in shared.split(",") if s) if "," in shared else (shared,)
    shared = tuple(shared or ())
    if len(set(shared)) != len(shared):
        raise ValueError(f"{argument} must name each parameter once, got {shared!r}")
    for name in shared:
        check_choice(argument, name, PARAMETER_NAMES)
        if name == "w":
            raise ValueError(f"{argument} cannot name 'w': the albedo is fitted per band")
        if name not in free:
            raise ValueError(
                f"{argument} names {name!r}, which is not in free={free!r} (add it to free)"
            )
    return shared
