"""Constant tables of the exact Chandrasekhar H-function (isotropic scattering), built once
at import with NumPy; `h_functions.exact_terms` and `exact_values` evaluate them.

The H-function (Chandrasekhar 1960, Radiative Transfer, ch. V, eq. 60 ff.):

    ln H(w, mu) = -(mu/pi) * integral_0^(pi/2) ln(1 - w t cot t) / (cos^2 t + mu^2 sin^2 t) dt.

Evaluated here as a Chebyshev series in gamma = sqrt(1 - w), gamma in [0, 1]:

    H(w, mu) = 1 + (1 - gamma) * P(mu, x),  P = sum_j a_j(mu) T_j(x),  x = 2 gamma - 1.

H is analytic in gamma on [0, 1] (it has a sqrt(1 - w) branch point at w = 1, none in
gamma): its Chebyshev coefficients fall geometrically, so `N_CHEBYSHEV` = 20 terms hold
it to 4e-14, with no exponential or logarithm left for the evaluation. The factor
(1 - gamma) makes H(0, mu) = 1 exactly. Per angle, once per pixel: ln H at the
N_CHEBYSHEV Chebyshev nodes gamma_m is linear in a mu-dependent weight vector,

    ln H(gamma_m, mu) = (LOG_Q @ q(mu) + M(mu) @ LOG_M)_m,  q = (q_t, q_s), M = (M_1..M_8),

whose matrices hold -ln(1 - w_m c) at fixed nodes (every logarithm is taken here, at
import), c = t cot t; then P(gamma_m) = expm1(ln H)/(1 - gamma_m), and `NODES_TO_COEF`
maps those values to the coefficients a_j and those of dP/dx:

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
mu in [0, 1], down to mu = 1e-12 and 1 - w = 1e-12) with a margin. A series of ln H needs
fewer terms (16: 5e-13, 18: 6e-14) but an exponential per evaluation (twice the cost in
numba); the series of H needs 20 (18: 1e-12, 20: 4e-14; 22 do no better: the nodes then
reach closer to w = 1, where the t-rule above loses accuracy). 60 t-nodes (grading 7)
and 12 s-nodes keep the node values to 1e-14 (56 t-nodes: 1.1e-13; 48: 7e-12).
"""

from __future__ import annotations

import numpy as np
from numpy.polynomial import chebyshev, legendre

__all__ = [
    "N_CHEBYSHEV",
    "N_MOMENTS",
    "S_MAX",
    "WEIGHT_Q",
    "DENOMINATOR_A",
    "DENOMINATOR_B",
    "LOG_Q",
    "LOG_M",
    "INV_ONE_MINUS_GAMMA",
    "NODES_TO_COEF",
]

N_CHEBYSHEV = 20  # terms of the series in gamma: the evaluation's cost
N_T = 60  # Gauss-Legendre nodes on t in [0, pi/4]
T_GRADING = 7  # t = (pi/4) sigma^T_GRADING
N_S = 12  # Gauss-Legendre nodes on s = cot t in [0, 1]
N_MOMENTS = 8  # Taylor terms integrated exactly near t = pi/2 (h_functions: M_1..M_8)
T_SPLIT = np.pi / 4
S_MAX = 1.0  # cot(T_SPLIT)


def _one_minus_t_cot_t(t):
    """1 - t cot t without cancellation at small t (its Taylor series below t = 0.2)."""
    t2 = t * t
    tail = 1382 / 638512875 + t2 * 4 / 18243225  # the two last terms' Horner step
    series = t2 * (
        1 / 3 + t2 * (1 / 45 + t2 * (2 / 945 + t2 * (1 / 4725 + t2 * (2 / 93555 + t2 * tail))))
    )
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
    # ln H at the nodes = -(kernel integral); rows: t nodes, s nodes, moments 1..N_MOMENTS
    log_nodes = -np.hstack([log_t, log_s, taylor[:, 1:]]).T  # (columns, N_CHEBYSHEV)
    # node values -> Chebyshev coefficients (discrete cosine transform) -> those and dP/dx's
    transform = 2.0 / N_CHEBYSHEV * np.cos(np.outer(k, angles))
    transform[0] /= 2.0
    derivative = np.array([chebyshev.chebder(row) for row in transform.T]).T
    # (N, 2 N): p @ it; dP/dx has degree N - 2, its coefficient N - 1 is a zero column
    nodes_to_coef = np.hstack([transform.T, derivative.T, np.zeros((N_CHEBYSHEV, 1))])
    # The t and s rules as one: q_k = (mu/pi) W_k / (A_k + mu^2 B_k), A = cos^2 t or s^2,
    # B = sin^2 t or 1. LOG_Q is stored (outputs, inputs): each output a dot product over
    # a contiguous row of 72, which numba vectorises; LOG_M and NODES_TO_COEF (inputs,
    # outputs): their rows, of 20 and 40, are scaled and accumulated, which vectorises
    # better than dot products of 8 or 20.
    return (
        np.concatenate([weight_t, weight_s]),
        np.concatenate([np.cos(t) ** 2, s * s]),
        np.concatenate([np.sin(t) ** 2, np.ones(N_S)]),
        np.ascontiguousarray(log_nodes[: N_T + N_S].T),
        np.ascontiguousarray(log_nodes[N_T + N_S :]),
        1.0 / (1.0 - gamma),
        np.ascontiguousarray(nodes_to_coef),
    )


(WEIGHT_Q, DENOMINATOR_A, DENOMINATOR_B, LOG_Q, LOG_M, INV_ONE_MINUS_GAMMA, NODES_TO_COEF) = (
    _tables()
)
for _table in (
    WEIGHT_Q,
    DENOMINATOR_A,
    DENOMINATOR_B,
    LOG_Q,
    LOG_M,
    INV_ONE_MINUS_GAMMA,
    NODES_TO_COEF,
):
    _table.flags.writeable = False
del _table
