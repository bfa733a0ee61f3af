"""The chains' diagnostics (R-hat, bulk and tail ESS) of a chunk's draws, computed on the
host in float64: blackjax's `rhat`, `ess_bulk` and `ess_tail` (Vehtari et al. 2021's
rank-normalised split-chain estimators), with their sorts done by NumPy and SciPy.

blackjax's ESS runs on an FFT of the draws. An accelerator may have no FFT in the
draws' precision (a TPU has no float64 FFT: the chunk program failed there with
``Unexpected operand type for FFT: f64[...]``), so the chunk program on the device
returns the draws and leaves the diagnostics to this module. The draws come to the host
anyway (`sample` keeps them or discards them there), and a float32 run's diagnostics
are its draws' in float64 (no float32 FFT rounding).

blackjax's functions rank the pooled draws, take their median and tail quantiles by
XLA's sort, which on a CPU took 16 s for one chunk's draws (4 chains x 1000 draws x
3072 series, on 2 cores; 87 % of a `sample` call on a TPU v5e). Here the per-series
steps (split, median, tail quantiles and indicators, average ranks) run in NumPy and
`scipy.stats.rankdata`, over blocks of series in threads; blackjax's own estimators
(`potential_scale_reduction`, `effective_sample_size`) then run on JAX's CPU backend,
on the Blom scores of those ranks, as blackjax's `_rank_normalize` forms them. The
tests check every value against blackjax's functions.
"""

from __future__ import annotations

import functools
import os
from concurrent.futures import ThreadPoolExecutor

import jax
import jax.numpy as jnp
import numpy as np
from blackjax.diagnostics import effective_sample_size, potential_scale_reduction
from scipy.stats import rankdata

__all__ = ["DIAGNOSTICS", "chain_diagnostics", "indicator_ess"]

DIAGNOSTICS = ("rhat", "ess", "ess_tail")
# blackjax's ess_tail: the tails beyond the (1 -+ 0.90) / 2 pooled quantiles
TAIL_PROBABILITY = 0.90
# series per block of the host's per-series steps (a block per thread)
SERIES_PER_BLOCK = 256


@functools.cache
def _program():
    """R-hat, bulk ESS and tail ESS from a chunk's split draws' average ranks and tail
    indicators, all (series, split chains, draws) float64, jitted once per shape."""

    def diagnostics(ranks, folded_ranks, lower, upper, contaminated):
        # blackjax's diagnostics broadcast by rank promotion (its own code): allowed here only
        with jax.numpy_rank_promotion("allow"):
            pooled = ranks.shape[1] * ranks.shape[2]

            def scores(r):  # blackjax's _rank_normalize: Blom's plotting position
                return jax.scipy.special.ndtri((r - 3.0 / 8) / (pooled + 1.0 / 4))

            def psrf(x):
                return potential_scale_reduction(x, chain_axis=1, sample_axis=2)

            def ess(x):
                return effective_sample_size(x, chain_axis=1, sample_axis=2)

            bulk = scores(ranks)
            rhat = jnp.maximum(psrf(bulk), psrf(scores(folded_ranks)))
            tail = jnp.minimum(ess(lower), ess(upper))
            return rhat, ess(bulk), jnp.where(jnp.squeeze(contaminated), jnp.nan, tail)

    return jax.jit(diagnostics)


def _block_diagnostics(split: np.ndarray) -> tuple[np.ndarray, ...]:
    """(R-hat, bulk ESS, tail ESS), each (series,), of a block of series, split (series,
    split chains, draws) float64: the pooled draws' average ranks, those of their
    distances to the median and the tail indicators here, the estimators in `_program`."""
    pooled = split.reshape(split.shape[0], -1)
    with np.errstate(invalid="ignore"):  # a NaN series: NaN median and quantiles
        median = np.median(pooled, axis=-1, keepdims=True)
        low = np.quantile(pooled, (1.0 - TAIL_PROBABILITY) / 2.0, axis=-1, keepdims=True)
        high = np.quantile(pooled, (1.0 + TAIL_PROBABILITY) / 2.0, axis=-1, keepdims=True)
    ranks = rankdata(pooled, axis=-1)  # NaN for a series holding one, as blackjax
    folded_ranks = rankdata(np.abs(pooled - median), axis=-1)
    lower, upper = (pooled <= low).astype(np.float64), (pooled >= high).astype(np.float64)
    contaminated = np.isnan(pooled).any(axis=-1)
    cpu = jax.devices("cpu")[0]
    pieces = [a.reshape(split.shape) for a in (ranks, folded_ranks, lower, upper)]
    with jax.enable_x64(True):
        arrays = [jax.device_put(a, cpu) for a in (*pieces, contaminated)]
        values = jax.device_get(_program()(*arrays))
    return tuple(np.asarray(v, np.float64).reshape(-1) for v in values)  # blackjax squeezes


def chain_diagnostics(draws) -> dict[str, np.ndarray]:
    """R-hat, bulk ESS and tail ESS of every problem's every parameter, as blackjax's
    `rhat`, `ess_bulk` and `ess_tail` give them.

    Args:
        draws: (problems..., chains, draws, p) array (NumPy or JAX, any float dtype).
    Returns:
        {"rhat", "ess", "ess_tail"}: float64 NumPy arrays (problems..., p).
    """
    draws = np.asarray(draws, np.float64)
    batch = draws.ndim - 3
    shape = draws.shape
    half = shape[batch + 1] // 2  # each chain split in halves (an odd last draw dropped)
    # (series = problems x p, chains, draws)
    by_series = np.moveaxis(draws, -1, batch).reshape(-1, shape[batch], shape[batch + 1])
    split = np.concatenate([by_series[:, :, :half], by_series[:, :, half : 2 * half]], axis=1)
    n_series = split.shape[0]
    size = min(SERIES_PER_BLOCK, n_series)  # one block shape: one program
    padded = np.concatenate([split, np.zeros((-n_series % size,) + split.shape[1:])])
    blocks = np.split(padded, len(padded) // size)
    with ThreadPoolExecutor(min(len(blocks), os.cpu_count() or 1)) as pool:
        # NumPy's sorts and XLA's programs release the GIL: the blocks run in parallel
        parts = list(pool.map(_block_diagnostics, blocks))
    summary_shape = shape[:batch] + shape[-1:]
    return {
        name: np.concatenate(column)[:n_series].reshape(summary_shape)
        for name, column in zip(DIAGNOSTICS, zip(*parts))
    }


@functools.cache
def _indicator_program():
    def ess(by_chain):
        with jax.numpy_rank_promotion("allow"):
            return effective_sample_size(by_chain)

    return jax.jit(ess)


def indicator_ess(indicators) -> np.ndarray:
    """The ESS of 0/1 series (blackjax's estimator, on the CPU backend in float64).

    Args:
        indicators: (series, chains, draws) bool.
    Returns:
        (series,) float64; NaN where a series is constant (never or always 1).
    """
    values = np.moveaxis(np.asarray(indicators, np.float64), 0, -1)  # (chains, draws, series)
    cpu = jax.devices("cpu")[0]
    with jax.enable_x64(True):
        ess = np.asarray(jax.device_get(_indicator_program()(jax.device_put(values, cpu))))
    constant = np.all(values == values[:1, :1], axis=(0, 1))
    return np.where(constant, np.nan, ess.reshape(-1)).astype(np.float64)
