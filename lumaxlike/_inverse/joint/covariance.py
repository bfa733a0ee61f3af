"""Posterior covariance of joint problems from their arrow-structured H, and UNDETERMINED.

The inverse of the arrow matrix H (`schur`) in blocks, with S = D - sum_k C_k^T A_k^-1 C_k
and Y_k = A_k^-1 C_k:

    Sigma_ss = S^-1,  Sigma_ks = -Y_k S^-1,  Sigma_kk = A_k^-1 + Y_k S^-1 Y_k^T,
    Sigma_kl = Y_k S^-1 Y_l^T = Sigma_ks Sigma_ss^-1 Sigma_ls^T (k != l),

so the per-band, shared and cross blocks determine the whole covariance
(`full_covariance`). As for `fit` (`fit.covariance`), H is first scaled to its correlation
matrix; a problem is not determined where that is not positive definite or a
parameter's variance inflation factor (the diagonal of its inverse) exceeds
`covariance.MAX_VARIANCE_INFLATION`. Vectorised NumPy over a chunk of problems (p and s
are small); the same code for both solvers.
"""

from __future__ import annotations

import numpy as np

from ..fit.covariance import MAX_VARIANCE_INFLATION

__all__ = ["arrow_covariance", "full_covariance"]


def _positive_definite(matrix):
    """Whether each (..., m, m) symmetric matrix is positive definite (Cholesky pivots)."""
    m = matrix.shape[-1]
    factor = np.zeros_like(matrix)
    ok = np.ones(matrix.shape[:-2], bool)
    for j in range(m):
        pivot = matrix[..., j, j] - np.sum(factor[..., j, :j] ** 2, axis=-1)
        ok &= pivot > 0.0
        root = np.sqrt(np.where(pivot > 0.0, pivot, 1.0))
        factor[..., j, j] = root
        for i in range(j + 1, m):
            value = matrix[..., i, j] - np.sum(factor[..., i, :j] * factor[..., j, :j], axis=-1)
            factor[..., i, j] = value / root
    return ok


def arrow_covariance(a_blocks, c_blocks, d_block, variance, solved):
    """Covariance blocks of every problem, and where it is determined.

    Args:
        a_blocks (n, bands, p, p), c_blocks (n, bands, p, s), d_block (n, s, s): H at the
            solution (weighted by 1 / refl_sigma, prior precisions included).
        variance: (n,) the factor the inverse is scaled by: 1 where the rows are weighted
            by the observations' noise, else the residual variance.
        solved: (n,) bool, problems with a solution (CONVERGED or MAX_ITER).
    Returns:
        (cov_bands (n, bands, p, p), cov_shared (n, s, s), cov_cross (n, bands, p, s),
        determined (n,) bool); NaN where not solved or not determined.
    """
    n, n_bands, p = a_blocks.shape[:3]
    s = d_block.shape[-1]
    with np.errstate(invalid="ignore", divide="ignore"):
        scale_b = np.sqrt(np.diagonal(a_blocks, axis1=-2, axis2=-1))  # (n, bands, p)
        scale_s = np.sqrt(np.diagonal(d_block, axis1=-2, axis2=-1))  # (n, s)
        usable = solved & np.all(scale_b > 0.0, axis=(-2, -1)) & np.all(scale_s > 0.0, axis=-1)
        usable &= np.all(np.isfinite(scale_b), axis=(-2, -1)) & np.all(
            np.isfinite(scale_s), axis=-1
        )
        scale_b = np.where(usable[:, None, None], scale_b, 1.0)
        scale_s = np.where(usable[:, None], scale_s, 1.0)
        a_corr = a_blocks / (scale_b[..., :, None] * scale_b[..., None, :])
        c_corr = c_blocks / (scale_b[..., :, None] * scale_s[:, None, None, :])
        d_corr = d_block / (scale_s[:, :, None] * scale_s[:, None, :])
    eye_p, eye_s = np.eye(p), np.eye(s)
    a_corr = np.where(usable[:, None, None, None], a_corr, eye_p)
    c_corr = np.where(usable[:, None, None, None], c_corr, 0.0)
    d_corr = np.where(usable[:, None, None], d_corr, eye_s)
    bands_ok = np.all(_positive_definite(a_corr), axis=-1)
    a_corr = np.where(bands_ok[:, None, None, None], a_corr, eye_p)
    a_inverse = np.linalg.inv(a_corr)
    y_blocks = a_inverse @ c_corr  # (n, bands, p, s)
    schur = d_corr - np.sum(np.swapaxes(c_corr, -1, -2) @ y_blocks, axis=1)
    shared_ok = _positive_definite(schur) if s else np.ones(n, bool)
    schur = np.where(shared_ok[:, None, None], schur, eye_s)
    schur_inverse = np.linalg.inv(schur) if s else schur
    cov_s = schur_inverse
    cov_x = -y_blocks @ schur_inverse[:, None]
    cov_b = a_inverse + y_blocks @ schur_inverse[:, None] @ np.swapaxes(y_blocks, -1, -2)
    inflation = np.max(np.diagonal(cov_b, axis1=-2, axis2=-1), axis=(-2, -1))
    if s:
        inflation = np.maximum(inflation, np.max(np.diagonal(cov_s, axis1=-2, axis2=-1), axis=-1))
    determined = usable & bands_ok & shared_ok & (inflation <= MAX_VARIANCE_INFLATION)
    variance = np.where(determined, variance, np.nan)
    cov_b = cov_b / (scale_b[..., :, None] * scale_b[..., None, :]) * variance[:, None, None, None]
    cov_s = cov_s / (scale_s[:, :, None] * scale_s[:, None, :]) * variance[:, None, None]
    cov_x = (
        cov_x / (scale_b[..., :, None] * scale_s[:, None, None, :]) * variance[:, None, None, None]
    )
    return cov_b, cov_s, cov_x, determined


def full_covariance(cov_bands, cov_shared, cov_cross):
    """The whole covariance of every problem from its blocks (see the module docstring).

    Args:
        cov_bands (..., bands, p, p), cov_shared (..., s, s), cov_cross (..., bands, p, s).
    Returns:
        (..., bands p + s, bands p + s): parameters in the order band 0's per-band ones,
        band 1's, ..., then the shared ones.
    """
    *lead, n_bands, p, _ = cov_bands.shape
    s = cov_shared.shape[-1]
    size = n_bands * p + s
    out = np.zeros((*lead, size, size))
    if s:
        with np.errstate(invalid="ignore"):
            # Sigma_ks Sigma_ss^-1 Sigma_ls^T for every pair of bands
            finite = np.all(np.isfinite(cov_shared), axis=(-2, -1))
            safe = np.where(finite[..., None, None], cov_shared, np.eye(s))
            left = np.linalg.solve(
                safe[..., None, :, :], np.swapaxes(cov_cross, -1, -2)
            )  # (..., bands, s, p)
            coupled = np.einsum("...kps,...lsq->...kplq", cov_cross, left)
            coupled = np.where(finite[..., None, None, None, None], coupled, np.nan)
        out[..., : n_bands * p, : n_bands * p] = coupled.reshape(*lead, n_bands * p, n_bands * p)
        out[..., : n_bands * p, n_bands * p :] = cov_cross.reshape(*lead, n_bands * p, s)
        out[..., n_bands * p :, : n_bands * p] = np.swapaxes(
            cov_cross.reshape(*lead, n_bands * p, s), -1, -2
        )
        out[..., n_bands * p :, n_bands * p :] = cov_shared
    for k in range(n_bands):
        out[..., k * p : (k + 1) * p, k * p : (k + 1) * p] = cov_bands[..., k, :, :]
    return out
