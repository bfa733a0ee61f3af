"""`sample`'s chunks on the device: the chunk program compiled ahead, each chunk's
problems padded to one shape and launched before the previous one's draws are fetched,
and the summaries with the host's chain diagnostics written into the outputs."""

from __future__ import annotations

import contextlib
from typing import Any, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np

from .._inverse.chunking import pad_pixels
from .._inverse.fit.observation_masks import masked_chunk as _masked
from .._model.forward import precision_scope
from .diagnostics import chain_diagnostics, indicator_ess
from .modes import rarely_visited

__all__ = ["ChunkProgram", "ModeCheck", "Problems", "compile_chunk_ahead", "sample_chunks"]


class Problems(NamedTuple):
    """Every problem of a `sample` call, flat over pixels: observations, the Laplace
    start in unconstrained coordinates, priors and bounds per problem."""

    refl: np.ndarray  # (pixels, bands, observations)
    geometry: list  # to_sun, to_sensor, normal (pixels, observations, 3) each
    limits: object  # checked observation limits
    sampled: np.ndarray  # (pixels,) + problem axes bool: the warm fit has a start
    z_center: np.ndarray  # (pixels,) + problem axes + (p,)
    metric: np.ndarray  # (pixels,) + problem axes + (p, p)
    prior_mean: np.ndarray
    prior_precision: np.ndarray
    lower: np.ndarray
    upper: np.ndarray
    kinds: tuple


class ChunkProgram(NamedTuple):
    """The chunk program of a `sample` call and what every chunk passes it."""

    program: Any  # `sample_chunk` or `sample_joint_chunk` (a `stored_jit` function)
    static: dict  # its static keywords
    fixed: np.ndarray  # values of PARAMETER_NAMES (w's slot 0.5)
    inv_var: np.ndarray  # (bands,) 1/refl_sigma^2
    chunk: int  # pixels per chunk
    seed: int
    dtype: type


class ModeCheck(NamedTuple):
    """What the chunks need to flag a mode the chains entered too seldom
    (`modes.rarely_visited`): probes = `_probe_fits`' answer, or None; min_ess."""

    probes: tuple | None
    min_ess: float


def sample_chunks(problems: Problems, program: ChunkProgram, outputs: dict, modes: ModeCheck):
    """Run `program` on every chunk with a sampled problem; fill `outputs` in place.

    Each chunk is launched before the previous one's draws are fetched, so that the
    device samples while the host computes the chains' diagnostics (`diagnostics`)."""
    dtype, chunk = program.dtype, program.chunk
    n_pixels = problems.sampled.shape[0]
    ids = np.arange(problems.sampled.size, dtype=np.int64).reshape(problems.sampled.shape)
    spans = [
        (first, min(first + chunk, n_pixels))
        for first in range(0, n_pixels, chunk)
        if problems.sampled[first : first + chunk].any()
    ]
    with _chunk_scope(dtype):
        rng = jax.random.key(int(program.seed))
        constants = [
            jnp.asarray(a, dtype)
            for a in (program.fixed, program.inv_var, problems.lower, problems.upper)
        ]
        pending = None
        for span in [*spans, None]:
            launched = None
            if span is not None:
                launched = (span, _sample_one_chunk(problems, program, span, rng, ids, constants))
            if pending is not None:
                _store_chunk(problems, outputs, modes, *pending)
            pending = launched


@contextlib.contextmanager
def _chunk_scope(dtype):
    """Where the chunk program is traced and called. float32: JAX's 64-bit mode off in
    this scope too (blackjax draws its momenta in the default float type, which would
    promote the float32 chains to float64); matrix products at full float32 precision on
    an accelerator (a TPU's default is bfloat16 passes)."""
    with (
        precision_scope(np.empty(0, dtype)),
        jax.enable_x64(dtype == np.float64),
        jax.default_matmul_precision("highest"),
    ):
        yield


def compile_chunk_ahead(program: ChunkProgram, n_bands: int, shared: bool, n_obs: int) -> None:
    """Start compiling the chunk program (`stored_jit`'s ``ahead``, on a worker thread)
    with the arguments' shapes of `_sample_one_chunk`'s calls: `n_bands` bands of `n_obs`
    observations, one problem per pixel where parameters are `shared` by its bands."""
    chunk, dtype = program.chunk, program.dtype
    problems = (chunk, n_bands) if not shared else (chunk,)
    n_parameters = len(program.static["kinds"])

    def array(*shape):
        return jax.ShapeDtypeStruct(shape, dtype)

    with _chunk_scope(dtype):
        ids = jnp.asarray(np.zeros(problems, np.int64))
        geometry = tuple(array(chunk, n_obs, 3) for _ in range(3))
        per_problem = array(*problems, n_parameters)
        program.program.ahead(
            jax.random.key(int(program.seed)),
            jax.ShapeDtypeStruct(ids.shape, ids.dtype),
            array(chunk, n_bands, n_obs),
            geometry,
            array(program.fixed.size),
            (per_problem, array(*problems, n_parameters, n_parameters)),
            array(n_bands),
            (per_problem, per_problem),
            (array(n_parameters), array(n_parameters)),
            **program.static,
        )


def _store_chunk(problems: Problems, outputs: dict, modes: ModeCheck, span, solved) -> None:
    """A launched chunk's summaries, fetched (waits for them), with the chains'
    diagnostics and the probes' rarely visited modes computed on the host, written into
    `outputs` where sampled."""
    first, last = span
    solved = jax.device_get(solved)
    solved.update(chain_diagnostics(solved["draws"]))
    if modes.probes is not None:
        solved["rarely_visited"] = _rarely_visited(
            modes.probes, modes.min_ess, span, solved["draws"][: last - first]
        )
    active = problems.sampled[first:last]
    for name, array in outputs.items():
        if name not in solved:  # rarely_visited where no probe ran (joint problems)
            continue
        value = np.asarray(solved[name][: last - first])
        mask = active.reshape(active.shape + (1,) * (value.ndim - active.ndim))
        array[first:last] = np.where(mask, value, array[first:last])


def _sample_one_chunk(problems: Problems, program: ChunkProgram, span, rng, ids, constants):
    """The chunk program's outputs (JAX arrays) for pixels span = (first, last), padded
    to the chunk size; constants: fixed, inv_var, lower, upper as JAX arrays."""
    (first, last), chunk, dtype = span, program.chunk, program.dtype
    pieces, _ = _masked(
        problems.refl[first:last], [g[first:last] for g in problems.geometry], problems.limits
    )
    active = problems.sampled[first:last]
    pieces[0] = np.where(active.reshape(active.shape[:1] + (-1, 1)), pieces[0], np.nan)
    padded = [pad_pixels(p, chunk, np.nan if i == 0 else 1.0) for i, p in enumerate(pieces)]

    def chunk_of(a, fill):
        """A per-problem array of the chunk, padded, fill where not sampled."""
        mask = active.reshape(active.shape + (1,) * (a.ndim - active.ndim))
        return jnp.asarray(pad_pixels(np.where(mask, a[first:last], fill), chunk, fill), dtype)

    eye = np.eye(problems.z_center.shape[-1])
    metric_chunk = np.where(active[..., None, None], problems.metric[first:last], eye)
    scale = jnp.asarray(
        np.concatenate(
            [
                metric_chunk,
                np.broadcast_to(eye, (chunk - (last - first),) + metric_chunk.shape[1:]),
            ]
        ),
        dtype,
    )
    return program.program(
        rng,
        jnp.asarray(pad_pixels(ids[first:last], chunk, 0)),
        jnp.asarray(padded[0], dtype),
        tuple(jnp.asarray(p, dtype) for p in padded[1:]),
        constants[0],
        (chunk_of(problems.z_center, 0.0), scale),
        constants[1],
        (chunk_of(problems.prior_mean, 0.0), chunk_of(problems.prior_precision, 0.0)),
        (constants[2], constants[3]),
        **program.static,
    )


def _rarely_visited(probed: tuple, min_ess: float, span, draws):
    """`modes.rarely_visited` on the pixels span = (first, last) of a chunk: probed =
    `_probe_fits`' answer; draws (pixels, bands, chains, draws, p) -> (pixels, bands)
    bool."""
    first, last = span
    best, fit_values, probes = probed
    shape = draws.shape[:2]

    def flat(a):
        return np.reshape(a[first:last], (-1,) + a.shape[2:])

    flagged = rarely_visited(
        flat(best),
        [(flat(values), flat(level), flat(status)) for values, level, status in probes],
        flat(fit_values),
        draws.reshape((-1,) + draws.shape[2:]),
        min_ess,
        indicator_ess,
    )
    return flagged.reshape(shape)
