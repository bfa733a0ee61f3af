"""Chandrasekhar's H-function for isotropic scatterers, H(w, x), three ways: the equations,
written once (same dialect and editing rules as `equations`; `_backends` retargets the
functions of `__all__` to JAX and to numba).

Each kind is a pair, so that a model hoists the per-angle work out of its per-band loop:

- ``<kind>_terms(x)``: the w-independent terms of one angle cosine x (mu0e or mue),
  computed once per pixel;
- ``<kind>_values(w, terms_mu0e, terms_mue)`` -> ``(h_mu0e, h_mue, dh_mu0e_dw,
  dh_mue_dw)``: H at both angles and its analytic derivative with respect to w, sharing
  the work that depends on w alone.

``h_<kind>(w, x)`` is H at one angle (for the public `lumaxlike.h_function`);
``exact_terms_and_slopes(x)`` is `exact_terms` with the derivatives of its coefficients
with respect to x (its tangent rule, for the numba `fit`'s derivative code).

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
    DENOMINATOR_A,
    DENOMINATOR_B,
    INV_ONE_MINUS_GAMMA,
    LOG_M,
    LOG_Q,
    N_CHEBYSHEV,
    NODES_TO_COEF,
    S_MAX,
    WEIGHT_Q,
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
    "exact_moments",
    "exact_node_exponent",
    "exact_terms",
    "exact_terms_and_slopes",
    "chebyshev_sum",
    "exact_values",
    "h_exact",
]

PI = 3.141592653589793
INF = float("inf")
if N_CHEBYSHEV != 20:  # `exact_values` and `chebyshev_sum` are written out for 20 terms
    raise ImportError(
        f"h_functions: the exact H's series has {N_CHEBYSHEV} terms, its evaluation 20"
    )


def table_like(table, like):
    """A constant table in the floating-point type of `like` (rebound by `_backends`)."""
    return table


def coefficients_from(vector, offset):
    """The N_CHEBYSHEV coefficients vector[offset : offset + N_CHEBYSHEV] (rebound by
    `_backends`: numba's are a tuple of scalars, which a solver's loop over a pixel's bands
    keeps in registers rather than reading from memory: no array it must check for overlap
    with the arrays it writes, so the loop vectorises across bands)."""
    return vector[offset : offset + N_CHEBYSHEV]


def matrix_vector(matrix, vector):
    """matrix @ vector (rebound by `_backends`: numba's is a plain loop, no BLAS call)."""
    return matrix @ vector


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


def exact_moments(mu):
    """The moments (M_0, ..., M_8) of `exact_terms` at mu:
    M_k = (mu/pi) integral_0^S s^k/(s^2 + mu^2) ds, by M_k = (mu/pi) S^(k-1)/(k-1) -
    mu^2 M_(k-2) from M_0 (which only feeds it) and M_1, written with logs so that tiny mu
    neither overflows nor divides by zero."""
    mu2 = mu * mu
    scale = mu / PI
    positive = mu > 0.0
    mu_safe = where(positive, mu, 1.0)
    m0 = atan2(S_MAX + 0.0 * mu, mu) / PI
    m1 = where(positive, scale / 2.0 * (log(mu2 + S_MAX * S_MAX) - 2.0 * log(mu_safe)), 0.0 * mu)
    m2 = scale * S_MAX - mu2 * m0
    m3 = scale * S_MAX**2 / 2.0 - mu2 * m1
    m4 = scale * S_MAX**3 / 3.0 - mu2 * m2
    m5 = scale * S_MAX**4 / 4.0 - mu2 * m3
    m6 = scale * S_MAX**5 / 5.0 - mu2 * m4
    m7 = scale * S_MAX**6 / 6.0 - mu2 * m5
    m8 = scale * S_MAX**7 / 7.0 - mu2 * m6
    return m0, m1, m2, m3, m4, m5, m6, m7, m8


def exact_node_exponent(log_h, moments, log_m):
    """ln H at the nodes gamma_m, log_h + sum_k LOG_M[k - 1] M_k (k = 1..8): one element-wise
    expression (numba: one loop, one array). Linear in (log_h, moments): given their
    derivatives, it is the exponent's derivative."""
    m = moments
    return (
        log_h
        + log_m[0] * m[1]
        + log_m[1] * m[2]
        + log_m[2] * m[3]
        + log_m[3] * m[4]
        + log_m[4] * m[5]
        + log_m[5] * m[6]
        + log_m[6] * m[7]
        + log_m[7] * m[8]
    )


def exact_terms(x):
    """Per-angle coefficients of the exact H at x = mu in [0, 1]: a pair, the N_CHEBYSHEV
    coefficients of P(mu, .) and those of dP/dx (its last one 0; see `_exact_h_tables`),
    each an array (JAX) or a tuple of scalars (numba, `coefficients_from`).

    Cost: 72 divisions, a (20 x 72) matrix-vector and a (20) x (20 x 40) vector-matrix
    product, 8 moments and 20 expm1; all zero at x = 0.
    """
    mu = x
    mu2 = mu * mu
    scale = mu / PI
    weight, denominator_a = table_like(WEIGHT_Q, mu), table_like(DENOMINATOR_A, mu)
    denominator_b = table_like(DENOMINATOR_B, mu)
    log_h = matrix_vector(
        table_like(LOG_Q, mu), scale * weight / (denominator_a + mu2 * denominator_b)
    )
    # ln H at the nodes, then P there, (H - 1)/(1 - gamma_m); then its Chebyshev coefficients
    exponent = exact_node_exponent(log_h, exact_moments(mu), table_like(LOG_M, mu))
    p_nodes = array_expm1(exponent) * table_like(INV_ONE_MINUS_GAMMA, mu)
    coefficients = vector_matrix(p_nodes, table_like(NODES_TO_COEF, mu))
    return coefficients_from(coefficients, 0), coefficients_from(coefficients, N_CHEBYSHEV)


def exact_terms_and_slopes(x):
    """`exact_terms(x)` and the derivative of each of its coefficients with respect to x:
    (coefficients of P, of dP/dx, their d/dx, the same). The tangent rule of `exact_terms`
    (forward mode, by hand: its steps with their derivatives alongside), for code that
    cannot differentiate: the numba `fit`'s derivative code calls it where the angles
    depend on a free parameter (roughness, porosity K), instead of JAX's derivative of
    `exact_terms` printed out (~10 k operations per angle to compile).

    At x = 0 the derivative is that of JAX's `exact_terms` there (its selects pass no
    derivative through the branch not taken): d M_1/dx = 0.
    """
    mu = x
    mu2 = mu * mu
    weight, denominator_a = table_like(WEIGHT_Q, mu), table_like(DENOMINATOR_A, mu)
    denominator_b = table_like(DENOMINATOR_B, mu)
    denominator = denominator_a + mu2 * denominator_b
    log_q = table_like(LOG_Q, mu)
    log_h = matrix_vector(log_q, mu / PI * weight / denominator)
    # d/dmu [(mu/pi) W/(A + mu^2 B)] = (W/pi) (A - mu^2 B)/(A + mu^2 B)^2
    d_log_h = matrix_vector(
        log_q, weight * (denominator_a - mu2 * denominator_b) / (PI * denominator * denominator)
    )
    moments = exact_moments(mu)
    m = moments
    s2 = S_MAX * S_MAX
    positive = mu > 0.0
    mu_safe = where(positive, mu, 1.0)
    # d M_0 = d atan2(S, mu)/pi; d M_1 from M_1 = (mu/2pi) (ln(mu^2 + S^2) - 2 ln mu)
    d_m0 = -S_MAX / (PI * (mu2 + s2))
    d_m1 = where(
        positive,
        m[1] / mu_safe + mu / (2.0 * PI) * (2.0 * mu / (mu2 + s2) - 2.0 / mu_safe),
        0.0 * mu,
    )
    # d M_k = S^(k-1)/((k-1) pi) - 2 mu M_(k-2) - mu^2 d M_(k-2)
    d_m2 = S_MAX / PI - 2.0 * mu * m[0] - mu2 * d_m0
    d_m3 = S_MAX**2 / (2.0 * PI) - 2.0 * mu * m[1] - mu2 * d_m1
    d_m4 = S_MAX**3 / (3.0 * PI) - 2.0 * mu * m[2] - mu2 * d_m2
    d_m5 = S_MAX**4 / (4.0 * PI) - 2.0 * mu * m[3] - mu2 * d_m3
    d_m6 = S_MAX**5 / (5.0 * PI) - 2.0 * mu * m[4] - mu2 * d_m4
    d_m7 = S_MAX**6 / (6.0 * PI) - 2.0 * mu * m[5] - mu2 * d_m5
    d_m8 = S_MAX**7 / (7.0 * PI) - 2.0 * mu * m[6] - mu2 * d_m6
    d_moments = (d_m0, d_m1, d_m2, d_m3, d_m4, d_m5, d_m6, d_m7, d_m8)
    log_m = table_like(LOG_M, mu)
    inv_one_minus_gamma = table_like(INV_ONE_MINUS_GAMMA, mu)
    # P at the nodes = expm1(E)/(1 - gamma_m); dP = (expm1(E) + 1) dE/(1 - gamma_m)
    growth = array_expm1(exact_node_exponent(log_h, moments, log_m))
    d_exponent = exact_node_exponent(d_log_h, d_moments, log_m)
    nodes_to_coef = table_like(NODES_TO_COEF, mu)
    coefficients = vector_matrix(growth * inv_one_minus_gamma, nodes_to_coef)
    slopes = vector_matrix((growth + 1.0) * d_exponent * inv_one_minus_gamma, nodes_to_coef)
    return (
        coefficients_from(coefficients, 0),
        coefficients_from(coefficients, N_CHEBYSHEV),
        coefficients_from(slopes, 0),
        coefficients_from(slopes, N_CHEBYSHEV),
    )


def chebyshev_sum(coefficients, t):
    """sum_j coefficients[j] T_j over j < 20, the T_j given as the tuple `t` (t[0] = 1),
    summed pairwise in groups of four (short dependency chains; constant indices)."""
    c = coefficients
    s0 = (c[0] + c[1] * t[1]) + (c[2] * t[2] + c[3] * t[3])
    s1 = (c[4] * t[4] + c[5] * t[5]) + (c[6] * t[6] + c[7] * t[7])
    s2 = (c[8] * t[8] + c[9] * t[9]) + (c[10] * t[10] + c[11] * t[11])
    s3 = (c[12] * t[12] + c[13] * t[13]) + (c[14] * t[14] + c[15] * t[15])
    s4 = (c[16] * t[16] + c[17] * t[17]) + (c[18] * t[18] + c[19] * t[19])
    return ((s0 + s1) + (s2 + s3)) + s4


def exact_values(w, terms_mu0e, terms_mue):
    """H(mu0e), H(mue) and their dH/dw, exact, from `exact_terms` of both angles.

    H = 1 + (1 - gamma) P(x), x = 2 gamma - 1, P = sum_j a_j T_j(x) (20 terms); the
    Chebyshev polynomials T_j(x) are shared by both angles and built in four interleaved
    chains, T_(j+4) = 2 T_4 T_j - T_(j-4) (from T_(m+n) + T_(m-n) = 2 T_m T_n), instead of
    the three-term recurrence: the same values to rounding, a dependency chain of 7 steps
    instead of 19, and straight-line code (no loop), so that the evaluations of a pixel's
    bands overlap. No exponential or logarithm.
    dH/dw = (P - 2 (1 - gamma) dP/dx) / (2 gamma), the derivative of the same series.
    """
    gamma = sqrt(1.0 - w)
    x = 2.0 * gamma - 1.0
    t2 = 2.0 * x * x - 1.0
    t3 = 2.0 * x * t2 - x
    t4 = 2.0 * t2 * t2 - 1.0
    c = 2.0 * t4
    t5, t6, t7 = c * x - t3, c * t2 - t2, c * t3 - x
    t8, t9, t10, t11 = c * t4 - 1.0, c * t5 - x, c * t6 - t2, c * t7 - t3
    t12, t13, t14, t15 = c * t8 - t4, c * t9 - t5, c * t10 - t6, c * t11 - t7
    t16, t17, t18, t19 = c * t12 - t8, c * t13 - t9, c * t14 - t10, c * t15 - t11
    t = (
        1.0 + 0.0 * x,
        x,
        t2,
        t3,
        t4,
        t5,
        t6,
        t7,
        t8,
        t9,
        t10,
        t11,
        t12,
        t13,
        t14,
        t15,
        t16,
        t17,
        t18,
        t19,
    )
    p0 = chebyshev_sum(terms_mu0e[0], t)
    pe = chebyshev_sum(terms_mue[0], t)
    dp0 = chebyshev_sum(terms_mu0e[1], t)  # dP/dx: degree n - 2, its last coefficient 0
    dpe = chebyshev_sum(terms_mue[1], t)
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
