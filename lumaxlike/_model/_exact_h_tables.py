"""Constant tables of the exact Chandrasekhar H-function (isotropic scattering), built once
at import with NumPy; `h_functions.exact_terms` and `exact_values` evaluate them.

The H-function (Chandrasekhar 1960, Radiative Transfer, ch. V, eq. 60 ff.):

    ln H(w, mu) = -(mu/pi) * integral_0^(pi/2) ln(1 - w t cot t) / (cos^2 t + mu^2 sin^2 t) dt.

Evaluated here as a Chebyshev series in gamma = sqrt(1 - w), gamma in [0, 1]:

    ln H(w, mu) = (1 - gamma) * Q(mu, x),  Q = sum_j a_j(mu) T_j(x),  x = 2 gamma - 1.

ln H is analytic in gamma on [0, 1] (H has a sqrt(1 - w) branch point at w = 1, none in
gamma): its Chebyshev coefficients fall by ~6x per degree, so `N_CHEBYSHEV` = 18 terms
hold it to 1e-14. The factor (1 - gamma) makes H(0, mu) = 1 exactly. The per-angle
coefficients a_j(mu), and those of dQ/dx, are linear in a mu-dependent weight vector:

    a(mu) = q_t(mu) @ COEF_T + q_s(mu) @ COEF_S + sum_k M_k(mu) COEF_M[k - 1],

whose matrices hold ln(1 - w c) at fixed nodes and at the Chebyshev nodes in gamma
(both fixed, so every logarithm is taken here, at import), with c = t cot t:

- t in [0, pi/4]: Gauss-Legendre in sigma, t = (pi/4) sigma^7 (nodes crowd toward t = 0,
  where ln(1 - w c) ~ ln(1 - w + w t^2/3) is nearly singular as w -> 1);
  q_t = (mu/pi) W_k / (cos^2 t_k + mu^2 sin^2 t_k).
- t in [pi/4, pi/2], written in s = cot t in [0, 1]: the kernel is (mu/pi) ds/(s^2 + mu^2),
  a spike of width mu at s = 0 that no fixed rule resolves as mu -> 0. Its Taylor terms
  f_k(w) s^k (k = 1..8, f_0 = 0) are integrated exactly, by the moments
  M_k(mu) = (mu/pi) integral_0^1 s^k/(s^2 + mu^2) ds
  (M_0 = atan2(1, mu)/pi, M_1 = mu/(2 pi) ln(1 + 1/mu^2), M_k = mu/(pi (k-1)) - mu^2 M_(k-2)),
  and Gauss-Legendre in s the remainder ln(1 - w c) - sum_k f_k s^k = O(s^9):
  q_s = (mu/pi) V_k / (s_k^2 + mu^2).

Node counts are the smallest found (against a 30-digit mpmath quadrature over w in [0, 1],
mu in [0, 1], down to mu = 1e-12 and 1 - w = 1e-12) with a margin: 16 Chebyshev terms give
5e-13, 18 give 1.6e-14 relative error in H (with 64 t-nodes, 20 s-nodes); 60 t-nodes
(grading 7) and 12 s-nodes, 13 % less per-angle work, keep it below 6e-14 against the
tests' reference (56 t-nodes: 1.1e-13; 48: 7e-12).
"""

from __future__ import annotations

import numpy as np
from numpy.polynomial import chebyshev, legendre

__all__ = [
    "N_CHEBYSHEV",
    "N_MOMENTS",
    "S_MAX",
    "WEIGHT_T",
    "COS2_T",
    "SIN2_T",
    "WEIGHT_S",
    "S2",
    "COEF_T",
    "COEF_S",
    "COEF_M",
]

N_CHEBYSHEV = 18  # terms of the series in gamma: the evaluation's cost
N_T = 60  # Gauss-Legendre nodes on t in [0, pi/4]
T_GRADING = 7  # t = (pi/4) sigma^T_GRADING
N_S = 12  # Gauss-Legendre nodes on s = cot t in [0, 1]
N_MOMENTS = 8  # Taylor terms integrated exactly near t = pi/2
T_SPLIT = np.pi / 4
S_MAX = 1.0  # cot(T_SPLIT)


def _one_minus_t_cot_t(t):
    """1 - t cot t without cancellation at small t (its Taylor series below t = 0.2)."""
    t2 = t * t
    series = t2 * (1 / 3 + t2 * (1 / 45 + t2 * (2 / 945 + t2 * (1 / 4725 + t2 * (
        2 / 93555 + t2 * (1382 / 638512875 + t2 * 4 / 18243225))))))  # fmt: skip
    safe = np.where(t < 0.2, 1.0, t)
    return np.where(t < 0.2, series, 1 - safe / np.tan(safe))


def _log_taylor(w, order):
    """Taylor coefficients in s of ln(1 - w c(s)), c(s) = s arccot s = pi/2 s - s^2 + s^4/3 - ..."""
    c = np.zeros(order + 1)
    c[1] = np.pi / 2
    for k in range(order // 2):  # c -= s arctan s = sum_k (-1)^k s^(2k+2)/(2k+1)
        c[2 * k + 2] -= (-1) ** k / (2 * k + 1)
    power = np.zeros(order + 1)
    power[0] = 1.0
    out = np.zeros(order + 1)
    for n in range(1, order + 1):  # ln(1 - y) = -sum_n y^n / n
        power = np.convolve(power, c)[: order + 1]
        out -= w**n * power / n
    return out


def _tables():
    k = np.arange(N_CHEBYSHEV)
    angles = np.pi * (k + 0.5) / N_CHEBYSHEV
    gamma = (np.cos(angles) + 1.0) / 2.0  # Chebyshev nodes of the first kind: w < 1
    w = (1.0 - gamma) * (1.0 + gamma)

    sigma, weight = legendre.leggauss(N_T)
    sigma = (sigma + 1.0) / 2.0
    t = T_SPLIT * sigma**T_GRADING
    weight_t = T_SPLIT * T_GRADING * sigma ** (T_GRADING - 1) * weight / 2.0
    s, weight = legendre.leggauss(N_S)
    s = S_MAX * (s + 1.0) / 2.0
    weight_s = S_MAX * weight / 2.0

    w_col = w[:, None]
    log_t = np.log((1.0 - w_col) + w_col * _one_minus_t_cot_t(t))
    taylor = np.array([_log_taylor(wi, N_MOMENTS) for wi in w])  # (N_CHEBYSHEV, N_MOMENTS + 1)
    powers = s[None, :] ** np.arange(N_MOMENTS + 1)[:, None]
    log_s = np.log1p(-w_col * s * np.arctan2(1.0, s)) - taylor @ powers
    # ln H = -(kernel integral); divided by (1 - gamma); columns: t nodes, s nodes, moments
    samples = -np.hstack([log_t, log_s, taylor[:, 1:]]) / (1.0 - gamma)[:, None]
    # values at Chebyshev nodes -> coefficients (discrete cosine transform)
    transform = 2.0 / N_CHEBYSHEV * np.cos(np.outer(k, angles))
    transform[0] /= 2.0
    values = transform @ samples  # (N_CHEBYSHEV, columns)
    derivative = np.array(
        [chebyshev.chebder(column) for column in values.T]
    ).T  # dQ/dx coefficients, (N_CHEBYSHEV - 1, columns)
    coef = np.vstack([values, derivative]).T  # (columns, 2 N_CHEBYSHEV - 1)
    coef = np.ascontiguousarray(coef)
    return (
        weight_t,
        np.cos(t) ** 2,
        np.sin(t) ** 2,
        weight_s,
        s * s,
        np.ascontiguousarray(coef[:N_T]),
        np.ascontiguousarray(coef[N_T : N_T + N_S]),
        np.ascontiguousarray(coef[N_T + N_S :]),
    )


WEIGHT_T, COS2_T, SIN2_T, WEIGHT_S, S2, COEF_T, COEF_S, COEF_M = _tables()
for _table in (WEIGHT_T, COS2_T, SIN2_T, WEIGHT_S, S2, COEF_T, COEF_S, COEF_M):
    _table.flags.writeable = False
del _table
