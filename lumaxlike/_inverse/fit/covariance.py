"""Covariance of the fitted parameters from J^T J, and the UNDETERMINED test (both solvers)."""

from __future__ import annotations

import math

import numpy as np

from ..._model.numba_cache import cached_njit
from ..._model.numba_threads import run_in_blocks
from ..._status import Status
from . import numba_solver
from .numba_solver import cholesky, cholesky_solve

__all__ = ["covariance", "MAX_VARIANCE_INFLATION"]

# A free parameter whose variance is this many times what it would be were the others
# known (its variance inflation factor, [C^-1]_jj of the correlation matrix C of J^T J) is
# not determined by the observations: J^T J is singular to working precision.
MAX_VARIANCE_INFLATION = 1e12


@cached_njit(inlines=(numba_solver,), nogil=True, error_model="numpy")  # numba_solver: its Cholesky
def _covariance_kernel(first, last, jtj, variance, solved, out, determined):
    """Problems first to last - 1 (`numba_threads.run_in_blocks`)."""
    p = jtj.shape[1]
    for i in range(first, last):
        determined[i] = False
        for a in range(p):
            for b in range(p):
                out[i, a, b] = math.nan
        if not solved[i]:
            continue
        scale = np.empty(p)
        ok = True
        for a in range(p):
            scale[a] = math.sqrt(jtj[i, a, a])
            ok = ok and scale[a] > 0.0
        if not ok:
            continue
        correlation = np.empty((p, p))
        for a in range(p):
            for b in range(p):
                correlation[a, b] = jtj[i, a, b] / (scale[a] * scale[b])
        factor = np.empty((p, p))
        if not cholesky(correlation, factor):
            continue
        unit = np.zeros(p)
        column = np.empty(p)
        inflation = 0.0
        for b in range(p):
            unit[b] = 1.0
            cholesky_solve(factor, unit, column)
            unit[b] = 0.0
            inflation = max(inflation, column[b])
            for a in range(p):
                out[i, a, b] = column[a] / (scale[a] * scale[b]) * variance[i]
        if not inflation <= MAX_VARIANCE_INFLATION:
            for a in range(p):
                for b in range(p):
                    out[i, a, b] = math.nan
            continue
        determined[i] = True


def covariance(jtj, cost, status, n_obs, band_sigma):
    """Covariance of every problem; CONVERGED problems that are not determined become UNDETERMINED.

    Args:
        jtj: (pixels, bands, p, p) J^T J at the solution [1/sr^2 per parameter unit^2].
        cost: (pixels, bands) sum of squared residuals [1/sr^2].
        status: (pixels, bands) int8 `Status`, updated in place.
        n_obs: (pixels, bands) valid observations of each problem (or one count for all).
        band_sigma: (bands,) refl_sigma [1/sr], or None to use the residual variance
            cost / (n_obs - p) (NaN where n_obs <= p).
    Returns:
        (pixels, bands, p, p) covariance of the free parameters; NaN where unsolved or
        undetermined.
    """
    shape = status.shape
    n_free = jtj.shape[-1]
    solved = (status == Status.CONVERGED) | (status == Status.MAX_ITER)
    if band_sigma is not None:
        variance = np.broadcast_to(band_sigma.astype(np.float64) ** 2, shape)
    else:
        n_obs = np.broadcast_to(n_obs, shape)
        with np.errstate(invalid="ignore", divide="ignore"):
            variance = np.where(n_obs > n_free, cost / np.maximum(n_obs - n_free, 1), np.nan)
    out = np.empty((int(np.prod(shape)), n_free, n_free))
    determined = np.empty(out.shape[0], np.bool_)
    run_in_blocks(
        _covariance_kernel,
        out.shape[0],
        np.require(jtj.reshape(-1, n_free, n_free), np.float64, ("C", "W")),
        np.require(np.reshape(variance, -1), np.float64, ("C", "W")),
        np.require(solved.reshape(-1), np.bool_, ("C", "W")),
        out,
        determined,
    )
    determined = determined.reshape(shape)
    status[(status == Status.CONVERGED) & ~determined] = Status.UNDETERMINED
    return out.reshape(shape + (n_free, n_free))
