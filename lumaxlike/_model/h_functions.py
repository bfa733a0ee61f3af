"""Chandrasekhar's H-function for isotropic scatterers, H(w, x), three ways: the equations,
written once (same dialect and editing rules as `equations`; `_backends` retargets the
functions of `__all__` to JAX and to numba).

Each kind is a pair, so that a model hoists the per-angle work out of its per-band loop:

- ``<kind>_terms(x)``: the w-independent terms of one angle cosine x (mu0e or mue),
  computed once per pixel;
- ``<kind>_values(w, terms_mu0e, terms_mue)`` -> ``(h_mu0e, h_mue, dh_mu0e_dw,
  dh_mue_dw)``: H at both angles and its analytic derivative with respect to w, sharing
  the work that depends on w alone.

``h_<kind>(w, x)`` is H at one angle (for the public `lumaxlike.h_function`).

Kinds (gamma = sqrt(1 - w); w in [0, 1], x in [0, 1]; H(w, 0) = H(0, x) = 1):

- ``hapke1981``: Hapke's (1981, JGR 86:3039) two-stream approximation,
  H = (1 + 2x)/(1 + 2 gamma x) (ISIS3 ``photomet``'s ``Hfunc``), a few % off;
- ``hapke2002``: Hapke's (2002, Icarus 157:523, eq. 13) approximation,
  H = 1/(1 - w x [r0 + (1 - 2 r0 x)/2 ln((1 + x)/x)]), r0 = (1 - gamma)/(1 + gamma),
  < 1 % off; the same numbers as `equations.h_function`;
- ``exact``: Chandrasekhar's (1960) H for isotropic scattering to 1e-13 relative, as a
  Chebyshev series in gamma with per-angle coefficients (see `_exact_h_tables`).

dH/dw is finite for w < 1; at w = 1 it is +inf for x > 0 (all three H have a
sqrt(1 - w) branch point there) and 0 at x = 0 (where H = 1 for every w).
"""

from numpy import expm1 as array_expm1  # elementwise expm1 (rebound by `_backends`)

from ._exact_h_tables import (
    COS2_T,
    INV_ONE_MINUS_GAMMA,
    LOG_M,
    LOG_S,
    LOG_T,
    N_CHEBYSHEV,
    N_MOMENTS,
    NODES_TO_COEF,
    S2,
    S_MAX,
    SIN2_T,
    WEIGHT_S,
    WEIGHT_T,
)
from ._scalar_math import atan2, log, log1p, sqrt, where

__all__ = [
    "slope_at_branch_point",
    "hapke1981_terms",
    "hapke1981_values",
    "h_hapke1981",
    "hapke2002_terms",
    "hapke2002_values",
    "h_hapke2002",
    "exact_terms",
    "exact_values",
    "h_exact",
]

PI = 3.141592653589793
INF = float("inf")


def table_like(table, like):
    """A constant table in the floating-point type of `like` (rebound by `_backends`)."""
    return table


def vector_matrix(vector, matrix):
    """vector @ matrix (rebound by `_backends`: numba's is a plain loop, no BLAS call)."""
    return vector @ matrix


def slope_at_branch_point(positive_gamma, slope, growing):
    """dH/dw where gamma > 0, else +inf where H still varies with w (x > 0), else 0."""
    return where(positive_gamma, slope, where(growing, INF + 0.0 * slope, 0.0 * slope))


# ---------------------------------------------------------------------------------------
# Hapke (1981) two-stream


def hapke1981_terms(x):
    """The per-angle term of the Hapke (1981) H-function: x itself."""
    return x


def hapke1981_values(w, terms_mu0e, terms_mue):
    """H(mu0e), H(mue) and their dH/dw, Hapke (1981): H = (1 + 2x)/(1 + 2 gamma x).

    dH/dw = x (1 + 2x) / (gamma (1 + 2 gamma x)^2) = H x / (gamma (1 + 2 gamma x)).
    """
    gamma = sqrt(1.0 - w)
    positive = gamma > 0.0
    gamma_safe = where(positive, gamma, 1.0)
    x0, xe = terms_mu0e, terms_mue
    den0 = 1.0 + 2.0 * gamma * x0
    dene = 1.0 + 2.0 * gamma * xe
    h0 = (1.0 + 2.0 * x0) / den0
    he = (1.0 + 2.0 * xe) / dene
    dh0 = slope_at_branch_point(positive, h0 * x0 / (gamma_safe * den0), x0 > 0.0)
    dhe = slope_at_branch_point(positive, he * xe / (gamma_safe * dene), xe > 0.0)
    return h0, he, dh0, dhe


def h_hapke1981(w, x):
    """Hapke's (1981) two-stream H(w, x) = (1 + 2x)/(1 + 2 sqrt(1 - w) x)."""
    return hapke1981_values(w, hapke1981_terms(x), hapke1981_terms(x))[0]


# ---------------------------------------------------------------------------------------
# Hapke (2002), eq. 13


def hapke2002_terms(x):
    """The w-independent pieces (A, B) of Hapke's (2002, eq. 13) H-function approximation.

    H(x) = 1 / (1 - w x [r0 + (1 - 2 r0 x)/2 ln((1+x)/x)]) = 1 / (1 - w (r0 A + B)),
    with A = x (1 - x L), B = x L / 2, L = ln((1+x)/x); x L -> 0 as x -> 0, so H(0) = 1.
    """
    positive = x > 0.0
    x_safe = where(positive, x, 1.0)
    x_log = where(positive, x * log1p(1.0 / x_safe), 0.0 * x)  # x L, L = ln(1 + 1/x): one log
    return x - x * x_log, 0.5 * x_log


def hapke2002_values(w, terms_mu0e, terms_mue):
    """H(mu0e), H(mue) and their dH/dw, Hapke (2002, eq. 13) from `hapke2002_terms`.

    H = 1/(1 - w (r0 A + B)); dH/dw = H^2 (r0 A + B + w A dr0/dw),
    dr0/dw = 1/(gamma (1 + gamma)^2): the expressions the model always used (bit for bit).
    At w = 1 (gamma = 0) dr0/dw is inf, so dH/dw is +inf where A > 0 (x > 0) and, by the
    one guard on A, 0 at x = 0 (where H = 1 for every w). This sits in the solvers' inner
    loop: one select, not a branch-point test per angle (which cost JAX's `invert` 40 %).
    """
    a0, b0 = terms_mu0e
    ae, be = terms_mue
    gamma = sqrt(1.0 - w)
    one_plus_gamma = 1.0 + gamma
    r0 = (1.0 - gamma) / one_plus_gamma
    dr0_dw = 1.0 / (gamma * one_plus_gamma * one_plus_gamma)
    k0 = r0 * a0 + b0
    ke = r0 * ae + be
    h0 = 1.0 / (1.0 - w * k0)
    he = 1.0 / (1.0 - w * ke)
    dh0 = where(a0 > 0.0, h0 * h0 * (k0 + w * a0 * dr0_dw), h0 * h0 * k0)
    dhe = where(ae > 0.0, he * he * (ke + w * ae * dr0_dw), he * he * ke)
    return h0, he, dh0, dhe


def h_hapke2002(w, x):
    """Hapke's (2002, eq. 13) H(w, x); the numbers of `equations.h_function`."""
    gamma = sqrt(1.0 - w)
    r0 = (1.0 - gamma) / (1.0 + gamma)
    a, b = hapke2002_terms(x)
    return 1.0 / (1.0 - w * (r0 * a + b))


# ---------------------------------------------------------------------------------------
# Exact (Chandrasekhar 1960), isotropic scattering


def exact_terms(x):
    """Per-angle coefficients of the exact H at x = mu in [0, 1]: an array of length
    2 N_CHEBYSHEV - 1, those of P(mu, .) and of dP/dx (see `_exact_h_tables`).

    Cost: 72 divisions, an (80 x 20) and a (20 x 39) matrix-vector product and 20
    expm1; all zero at x = 0.
    """
    mu = x
    mu2 = mu * mu
    scale = mu / PI
    weight_t, cos2_t, sin2_t = table_like(WEIGHT_T, mu), table_like(COS2_T, mu), table_like(SIN2_T, mu)
    weight_s, s2 = table_like(WEIGHT_S, mu), table_like(S2, mu)
    log_m = table_like(LOG_M, mu)
    log_h = vector_matrix(scale * weight_t / (cos2_t + mu2 * sin2_t), table_like(LOG_T, mu))
    log_h = log_h + vector_matrix(scale * weight_s / (s2 + mu2), table_like(LOG_S, mu))
    # Moments M_k = (mu/pi) integral_0^S s^k/(s^2 + mu^2) ds, k = 1..N_MOMENTS (M_0 only
    # feeds the recurrence); M_1 written with logs so that tiny mu neither overflows nor
    # divides by zero.
    positive = mu > 0.0
    mu_safe = where(positive, mu, 1.0)
    moment_even = atan2(S_MAX + 0.0 * mu, mu) / PI  # M_0
    moment_odd = where(
        positive, scale / 2.0 * (log(mu2 + S_MAX * S_MAX) - 2.0 * log(mu_safe)), 0.0 * mu
    )  # M_1
    log_h = log_h + moment_odd * log_m[0]
    for k in range(2, N_MOMENTS + 1):  # loop index, not data
        if k % 2 == 0:
            moment_even = scale * S_MAX ** (k - 1) / (k - 1) - mu2 * moment_even
            log_h = log_h + moment_even * log_m[k - 1]
        else:
            moment_odd = scale * S_MAX ** (k - 1) / (k - 1) - mu2 * moment_odd
            log_h = log_h + moment_odd * log_m[k - 1]
    # P at the nodes gamma_m: (H - 1)/(1 - gamma_m); then its Chebyshev coefficients
    p_nodes = array_expm1(log_h) * table_like(INV_ONE_MINUS_GAMMA, mu)
    return vector_matrix(p_nodes, table_like(NODES_TO_COEF, mu))


def exact_values(w, terms_mu0e, terms_mue):
    """H(mu0e), H(mue) and their dH/dw, exact, from `exact_terms` of both angles.

    H = 1 + (1 - gamma) P(x), x = 2 gamma - 1: the Chebyshev polynomials T_j(x) are shared
    by both angles (a fixed loop of N_CHEBYSHEV multiply-adds, no exponential or log).
    dH/dw = (P - 2 (1 - gamma) dP/dx) / (2 gamma), the derivative of the same series.
    """
    n = N_CHEBYSHEV
    gamma = sqrt(1.0 - w)
    x = 2.0 * gamma - 1.0
    t_prev = 1.0 + 0.0 * x  # T_0
    t_cur = x  # T_1
    p0 = terms_mu0e[0] + terms_mu0e[1] * t_cur
    pe = terms_mue[0] + terms_mue[1] * t_cur
    dp0 = terms_mu0e[n] + terms_mu0e[n + 1] * t_cur
    dpe = terms_mue[n] + terms_mue[n + 1] * t_cur
    for j in range(2, n):  # loop index, not data
        t_prev, t_cur = t_cur, 2.0 * x * t_cur - t_prev
        p0 = p0 + terms_mu0e[j] * t_cur
        pe = pe + terms_mue[j] * t_cur
        if j < n - 1:  # dP/dx has degree n - 2
            dp0 = dp0 + terms_mu0e[n + j] * t_cur
            dpe = dpe + terms_mue[n + j] * t_cur
    one_minus_gamma = 1.0 - gamma
    h0 = 1.0 + one_minus_gamma * p0
    he = 1.0 + one_minus_gamma * pe
    positive = gamma > 0.0
    gamma_twice = 2.0 * where(positive, gamma, 1.0)
    num0 = p0 - 2.0 * one_minus_gamma * dp0  # -dH/dgamma
    nume = pe - 2.0 * one_minus_gamma * dpe
    dh0 = slope_at_branch_point(positive, num0 / gamma_twice, num0 > 0.0)
    dhe = slope_at_branch_point(positive, nume / gamma_twice, nume > 0.0)
    return h0, he, dh0, dhe


def h_exact(w, x):
    """Chandrasekhar's exact H(w, x) for isotropic scattering (relative error < 1e-13)."""
    terms = exact_terms(x)
    return exact_values(w, terms, terms)[0]
