"""The chains' diagnostics (R-hat, bulk and tail ESS) of a chunk's draws, computed on the
host: JAX's CPU backend, in float64, by blackjax's estimators.

blackjax's ESS runs on an FFT of the draws. An accelerator may have no FFT in the
draws' precision (a TPU has no float64 FFT: the chunk program failed there with
``Unexpected operand type for FFT: f64[...]``), so the chunk program on the device
returns the draws and leaves the diagnostics to this module. The draws come to the host
anyway (`sample` keeps them or discards them there); the estimators are blackjax's, so a
float64 run's diagnostics are the ones the device program computed before, and a float32
run's are now its draws' diagnostics in float64 (no float32 FFT rounding).
"""

from __future__ import annotations

import functools

import jax
import numpy as np
from blackjax.diagnostics import effective_sample_size, ess_bulk, ess_tail, rhat

__all__ = ["DIAGNOSTICS", "chain_diagnostics", "indicator_ess"]

DIAGNOSTICS = ("rhat", "ess", "ess_tail")


@functools.cache
def _program():
    """The diagnostics of (chains, draws, series) float64 draws, jitted once per shape."""

    def diagnostics(by_chain):
        # blackjax's diagnostics broadcast by rank promotion (its own code): allowed here only
        with jax.numpy_rank_promotion("allow"):
            return rhat(by_chain), ess_bulk(by_chain), ess_tail(by_chain)

    return jax.jit(diagnostics)


def chain_diagnostics(draws) -> dict[str, np.ndarray]:
    """R-hat, bulk ESS and tail ESS of every problem's every parameter.

    Args:
        draws: (problems..., chains, draws, p) array (NumPy or JAX, any float dtype).
    Returns:
        {"rhat", "ess", "ess_tail"}: float64 NumPy arrays (problems..., p).
    """
    draws = np.asarray(draws, np.float64)
    batch = draws.ndim - 3
    shape = draws.shape
    # (chains, draws, problems x p): blackjax's diagnostics squeeze axes of length 1
    by_chain = np.moveaxis(draws, (batch, batch + 1), (0, 1)).reshape(
        shape[batch], shape[batch + 1], -1
    )
    cpu = jax.devices("cpu")[0]
    with jax.enable_x64(True):
        values = jax.device_get(_program()(jax.device_put(by_chain, cpu)))
    summary_shape = shape[:batch] + shape[-1:]
    return {
        name: np.reshape(np.asarray(value, np.float64), summary_shape)
        for name, value in zip(DIAGNOSTICS, values)
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
