"""The Hapke model family (Hapke 2002 AMSA by default; IMSA, porosity K, three
H-functions, four phase functions) with Hapke (1984) macroscopic roughness: the
equations, written once.

A model configuration (`family`) binds a few slots here, when the equations are rebuilt
for a backend, to one of the small functions that fill them: `multiple_scattering_sums`
(AMSA's `legendre_sums` or IMSA's `isotropic_sums`), `phase_closed_form` and
`phase_closed_coefficient` (the phase function and its Legendre coefficients), and the
H-function slots `h_angle_terms`, `h_values_and_slopes` (from `h_functions`).

Every function here is a scalar, branch-free function of scalars (and of length-3
direction vectors and the length-16 Legendre coefficient vector, indexed element by
element). The names `sqrt`, `exp`, `where`, ... are module globals that `_backends`
rebinds to `jax.numpy` (for the JAX model and its autodiff) or to numba-compiled `math`
(for the numba twin), so the JAX and numba backends evaluate the very same expressions.
Rules for editing this file: no data-dependent `if` (an `if` on a loop index or on the
configuration flag `use_legendre`, a Python bool under JAX, is fine); select with
`where(cond, a, b)` and make both `a` and `b` finite for every input (so no NaN leaks into JAX gradients); call
only the primitives imported below and the other functions listed in `__all__`.

Symbols (Hapke 2002): w single-scattering albedo; mu0e, mue effective cosines of
incidence and emission; g phase angle; psi azimuth between the planes of incidence and
emission in the local horizontal plane; theta-bar (`roughness`) mean slope angle [rad].
Reflectance r is the bidirectional reflectance [1/sr] (RADF = pi r).
"""

from typing import NamedTuple

from .._configuration import N_LEGENDRE  # highest Legendre order of P, P-bar (a constant)
from ._scalar_math import NAN, atan2, exp, expm1, maximum, sqrt, tan, where
from .h_functions import h_hapke2002 as h_function  # noqa: F401  (H(w, x) at one angle; a slot family binds)

# The H-function of the model: two slots that `family` binds, per configuration, to one
# kind of `h_functions` (per-angle terms computed once per pixel; H and dH/dw from w and
# those terms). As plain Python, and for the default configuration, Hapke 2002.
from .h_functions import hapke2002_terms as h_angle_terms
from .h_functions import hapke2002_terms as h_function_terms
from .h_functions import hapke2002_values as h_values_and_slopes

__all__ = [
    "GeometryTerms",
    "PixelTerms",
    "safe_sqrt",
    "hg_legendre_coefficient",
    "single_hg_legendre_coefficient",
    "cornette_shanks_legendre_coefficient",
    "phase_closed_coefficient",
    "phase_coefficient",
    "legendre_sums",
    "isotropic_sums",
    "multiple_scattering_sums",
    "power_three_halves",
    "double_hg_phase",
    "single_hg_phase",
    "cornette_shanks_phase",
    "phase_closed_form",
    "phase_function",
    "shadow_hiding",
    "coherent_backscatter",
    "h_function_terms",
    "roughness_terms",
    "geometry_terms",
    "terms_from_geometry",
    "pixel_terms",
    "reflectance",
    "reflectance_and_slope",
    "phase_terms",
    "mixture_reflectance_and_slope",
    "mixture_slope",
]

PI = 3.141592653589793
# Below this z = tan(g/2)/h_C the coherent-backscatter term uses its Taylor series:
# (1 - exp(-z))/z = 1 - z/2 + z^2/6 - ..., truncation error z^3/24 < 5e-11.
CB_SERIES_LIMIT = 1e-3


class GeometryTerms(NamedTuple):
    """The parameter-free quantities of one observation's geometry (all scalars)."""

    cos_i: object
    sin_i: object
    cos_e: object
    sin_e: object
    cos_g: object
    tan_half_g: object  # tan(g/2), 0 at g = 0
    cos_psi: object
    sin2_half_psi: object  # sin^2(psi/2)
    psi: object  # [rad], in [0, pi]
    f_psi: object  # f(psi) = exp(-2 tan(psi/2)) of Hapke 1984
    valid: object  # cos i > 0 and cos e > 0 (bool)


class PixelTerms(NamedTuple):
    """Everything in r that does not depend on w, computed once per pixel (all scalars).

    r = w * scale * (phase_sh + M(w)), M from the P terms and the H-function pieces.
    `scale` is NaN where the geometry is invalid, so r is NaN there. What the H-function
    pieces hold depends on the H-function the model was built with (`h_angle_terms`).
    """

    scale: object  # mu0e/(mu0e + mue) * B_CB * S / (4 pi) * K   [1/sr]
    phase_sh: object  # p(g) * B_SH
    p_mu0e: object  # P(mu0e)
    p_mue: object  # P(mue)
    p_bar: object  # P-bar
    h_mu0e: object  # w-independent pieces of H(mu0e / K) (`h_angle_terms`), a tuple
    h_mue: object  # the same for H(mue / K)


def safe_sqrt(x):
    """sqrt(max(x, 0)) whose derivative at 0 is 0 rather than inf (no NaN in gradients)."""
    positive = x > 0.0
    return where(positive, sqrt(where(positive, x, 1.0)), 0.0 * x)


def hg_legendre_coefficient(n, b, c, asymmetry):
    """Legendre coefficient b_n of the double Henyey-Greenstein phase function.

    p(g) = (1+c)/2 HG(g; b) + (1-c)/2 HG(g; -b)  =>  b_n = (2n+1) b^n, times c for odd n.
    (`asymmetry` is not used: the slot's signature is shared by every phase function.)
    """
    odd_factor = where(n % 2 == 1, c, 1.0)
    return (2.0 * n + 1.0) * b**n * odd_factor


def single_hg_legendre_coefficient(n, b, c, asymmetry):
    """Legendre coefficient b_n of the single Henyey-Greenstein phase function.

    p(g) = (1 - xi^2)/(1 + 2 xi cos g + xi^2)^1.5 (xi = `asymmetry`)  =>  b_n = (2n+1) (-xi)^n,
    from the generating function of the Legendre polynomials. (b, c are not used.)
    """
    return (2.0 * n + 1.0) * (0.0 - asymmetry) ** n


def cornette_shanks_legendre_coefficient(n, b, c, asymmetry):
    """Legendre coefficient b_n of the Cornette-Shanks (1992) phase function (exact).

    p = 3/2 (1 - xi^2)/(2 + xi^2) (1 + cos^2 g) HG(g; xi); with t = -xi, HG's moments
    (1/2) int HG P_k = t^k and x^2 P_n = alpha P_(n+2) + beta P_n + gamma P_(n-2) give
    b_n = 3/(2 (2 + xi^2)) [(2n+1)(1 + beta) t^n + (n+1)(n+2)/(2n+3) t^(n+2)
    + n(n-1)/(2n-1) t^(n-2)], beta = (n+1)^2/((2n+1)(2n+3)) + n^2/((2n+1)(2n-1)).
    (b, c are not used.)
    """
    t = 0.0 - asymmetry
    two_n = 2.0 * n
    beta = (n + 1.0) ** 2 / ((two_n + 1.0) * (two_n + 3.0)) + n * n / (
        (two_n + 1.0) * (two_n - 1.0)
    )
    lower = n * (n - 1.0) / (two_n - 1.0) * t ** ((n - 2) * (n >= 2))  # 0 for n < 2
    series = (
        (two_n + 1.0) * (1.0 + beta) * t**n
        + (n + 1.0) * (n + 2.0) / (two_n + 3.0) * t ** (n + 2)
        + lower
    )
    return 1.5 / (2.0 + asymmetry * asymmetry) * series


# The closed-form phase function's Legendre coefficients: the double Henyey-Greenstein
# unless a model binds another here (see `_model/family.py`).
phase_closed_coefficient = hg_legendre_coefficient


def phase_coefficient(n, b, c, asymmetry, legendre, use_legendre):
    """b_n: user-given `legendre[n]` if `use_legendre`, else the closed form's coefficient."""
    if use_legendre:  # configuration, not data: static under JAX
        return legendre[n] + 0.0 * b
    return phase_closed_coefficient(n, b, c, asymmetry)


def legendre_sums(mu0e, mue, b, c, asymmetry, legendre, use_legendre):
    """P(mu0e), P(mue) and P-bar of Hapke 2002 (eqs. 23-27), series to n = 15.

    P(x) = 1 + sum_n a_n b_n P_n(x), P-bar = 1 + sum_n a_n^2 b_n, with a_n = 0 for even n,
    a_1 = -1/2 and a_n = (2 - n)/(n + 1) a_(n-2) for odd n.
    """
    p_mu0e = 1.0 + 0.0 * mu0e
    p_mue = 1.0 + 0.0 * mue
    p_bar = 1.0 + 0.0 * b
    legendre_prev_0, legendre_0 = 1.0 + 0.0 * mu0e, mu0e  # P_(n-1)(mu0e), P_n(mu0e)
    legendre_prev_e, legendre_e = 1.0 + 0.0 * mue, mue
    a_n = -0.5
    for n in range(1, N_LEGENDRE + 1):
        if n % 2 == 1:  # loop index, not data: a_n vanishes for even n
            if n > 1:
                a_n = a_n * (2.0 - n) / (n + 1.0)
            b_n = phase_coefficient(n, b, c, asymmetry, legendre, use_legendre)
            p_mu0e = p_mu0e + a_n * b_n * legendre_0
            p_mue = p_mue + a_n * b_n * legendre_e
            p_bar = p_bar + a_n * a_n * b_n
        legendre_prev_0, legendre_0 = (
            legendre_0,
            ((2.0 * n + 1.0) * mu0e * legendre_0 - n * legendre_prev_0) / (n + 1.0),
        )
        legendre_prev_e, legendre_e = (
            legendre_e,
            ((2.0 * n + 1.0) * mue * legendre_e - n * legendre_prev_e) / (n + 1.0),
        )
    return p_mu0e, p_mue, p_bar


def isotropic_sums(mu0e, mue, b, c, asymmetry, legendre, use_legendre):
    """P(mu0e) = P(mue) = P-bar = 1: isotropic multiple scattering (IMSA, Hapke 1981/1993).

    With these the multiple-scattering term of `reflectance`,
    M = P(mu0e)(H(mue) - 1) + P(mue)(H(mu0e) - 1) + P-bar (H(mu0e) - 1)(H(mue) - 1),
    is H(mu0e) H(mue) - 1, the IMSA term; the single-scattering phase function p(g) is
    unchanged.
    """
    return 1.0 + 0.0 * mu0e, 1.0 + 0.0 * mue, 1.0 + 0.0 * b


# The multiple-scattering sums of the model: AMSA (Hapke 2002) unless a model binds
# `isotropic_sums` here (see `_model/family.py`).
multiple_scattering_sums = legendre_sums


def power_three_halves(x):
    """x^1.5 as x sqrt(x): a square root where a power costs a logarithm and an
    exponential (one rounding more than a correctly rounded x^1.5: within 2 ulp)."""
    return x * sqrt(x)


def double_hg_phase(cos_g, b, c, asymmetry):
    """Double Henyey-Greenstein phase function in the phase angle g:
    p = (1+c)/2 (1-b^2)/(1-2b cos g+b^2)^1.5 + (1-c)/2 (1-b^2)/(1+2b cos g+b^2)^1.5.
    (`asymmetry` is not used.)"""
    one_minus_b2 = 1.0 - b * b
    back = (1.0 + c) / 2.0 * one_minus_b2 / power_three_halves(1.0 - 2.0 * b * cos_g + b * b)
    forward = (1.0 - c) / 2.0 * one_minus_b2 / power_three_halves(1.0 + 2.0 * b * cos_g + b * b)
    return back + forward


def single_hg_phase(cos_g, b, c, asymmetry):
    """Single Henyey-Greenstein phase function in the phase angle g,
    p = (1 - xi^2)/(1 + 2 xi cos g + xi^2)^1.5, xi = `asymmetry` = the mean cosine of the
    scattering angle pi - g (xi < 0 back-scattering; the DHG's c = 1 lobe is xi = -b).
    (b, c are not used.)"""
    xi = asymmetry
    return (1.0 - xi * xi) / power_three_halves(1.0 + 2.0 * xi * cos_g + xi * xi)


def cornette_shanks_phase(cos_g, b, c, asymmetry):
    """Cornette & Shanks (1992, eq. 8) phase function in the phase angle g,
    p = 3/2 (1 - xi^2)/(2 + xi^2) (1 + cos^2 g)/(1 + 2 xi cos g + xi^2)^1.5, xi =
    `asymmetry` with the sign convention of `single_hg_phase` (the paper's g in its
    scattering angle pi - g). (b, c are not used.)"""
    xi = asymmetry
    xi2 = xi * xi
    return (
        1.5
        * (1.0 - xi2)
        / (2.0 + xi2)
        * (1.0 + cos_g * cos_g)
        / power_three_halves(1.0 + 2.0 * xi * cos_g + xi2)
    )


# The closed-form phase function of the model: the double Henyey-Greenstein unless a
# model binds another here (see `_model/family.py`).
phase_closed_form = double_hg_phase


def phase_function(cos_g, b, c, asymmetry, legendre, use_legendre):
    """Single-particle phase function p(g), normalised to (1/2) int p d(cos g) = 1.

    The model's closed form (`phase_closed_form`: double Henyey-Greenstein in b, c by
    default; single Henyey-Greenstein or Cornette-Shanks in `asymmetry`) or, with
    `use_legendre`, the series sum_n legendre[n] P_n(cos g), n = 0..15.
    """
    if use_legendre:  # configuration, not data: static under JAX
        series = legendre[0] + 0.0 * cos_g
        legendre_prev, legendre_n = 1.0 + 0.0 * cos_g, cos_g
        for n in range(1, N_LEGENDRE + 1):
            series = series + legendre[n] * legendre_n
            legendre_prev, legendre_n = (
                legendre_n,
                ((2.0 * n + 1.0) * cos_g * legendre_n - n * legendre_prev) / (n + 1.0),
            )
        return series
    return phase_closed_form(cos_g, b, c, asymmetry)


def shadow_hiding(tan_half_g, hs, bs0):
    """Shadow-hiding opposition effect B_SH = 1 + B_S0 / (1 + tan(g/2)/h_S); 1 for h_S = 0."""
    active = hs > 0.0
    hs_safe = where(active, hs, 1.0)
    return where(active, 1.0 + bs0 / (1.0 + tan_half_g / hs_safe), 1.0 + 0.0 * tan_half_g)


def coherent_backscatter(tan_half_g, hc, bc0):
    """Coherent-backscatter opposition effect (Hapke 2002, eq. 31).

    B_CB = 1 + B_C0 (1 + (1 - exp(-z))/z) / (2 (1 + z)^2), z = tan(g/2)/h_C;
    exactly 1 + B_C0 at g = 0 (expm1 and a Taylor series near z = 0, no 0/0); 1 for h_C = 0.
    """
    active = hc > 0.0
    z = tan_half_g / where(active, hc, 1.0)
    small = z < CB_SERIES_LIMIT
    z_safe = where(small, 1.0, z)
    escape = where(small, 1.0 - z / 2.0 + z * z / 6.0, -expm1(-z_safe) / z_safe)
    b_cb = 1.0 + bc0 * (1.0 + escape) / (2.0 * (1.0 + z) ** 2)
    return where(active, b_cb, 1.0 + 0.0 * tan_half_g)


def roughness_terms(cos_i, sin_i, cos_e, sin_e, cos_psi, sin2_half_psi, psi, f_psi, roughness):
    """Hapke (1984) macroscopic roughness: effective cosines mu0e, mue and shadowing S.

    Hapke 1984 eqs. 46-51 (Hapke 2012, eqs. 12.46-12.55), both branches (i <= e, e < i),
    with psi/pi E1 in the denominators of both mu0e and mue of each branch. Without
    roughness (theta-bar = 0): mu0e = cos i, mue = cos e, S = 1. At exact nadir the
    sin x factors and E(x) = 0 give the limit of nearby geometries, no special case.
    """
    rough = roughness > 0.0
    tan_tb = tan(where(rough, roughness, 0.5))
    cot_tb = 1.0 / tan_tb
    chi = 1.0 / sqrt(1.0 + PI * tan_tb * tan_tb)

    i_tilted = sin_i > 0.0
    e_tilted = sin_e > 0.0
    cot_i = cos_i / where(i_tilted, sin_i, 1.0)
    cot_e = cos_e / where(e_tilted, sin_e, 1.0)
    e1_i = where(i_tilted, exp(-2.0 / PI * cot_tb * cot_i), 0.0 * cos_i)
    e1_e = where(e_tilted, exp(-2.0 / PI * cot_tb * cot_e), 0.0 * cos_e)
    e2_i = where(i_tilted, exp(-1.0 / PI * cot_tb * cot_tb * cot_i * cot_i), 0.0 * cos_i)
    e2_e = where(e_tilted, exp(-1.0 / PI * cot_tb * cot_tb * cot_e * cot_e), 0.0 * cos_e)

    eta_i = chi * (cos_i + sin_i * tan_tb * e2_i / (2.0 - e1_i))
    eta_e = chi * (cos_e + sin_e * tan_tb * e2_e / (2.0 - e1_e))

    # i <= e
    denom_ile = 2.0 - e1_e - psi / PI * e1_i
    mu0e_ile = chi * (cos_i + sin_i * tan_tb * (cos_psi * e2_e + sin2_half_psi * e2_i) / denom_ile)
    mue_ile = chi * (cos_e + sin_e * tan_tb * (e2_e - sin2_half_psi * e2_i) / denom_ile)
    s_ile = (mue_ile / eta_e) * (cos_i / eta_i) * chi / (1.0 - f_psi + f_psi * chi * cos_i / eta_i)
    # e < i
    denom_eli = 2.0 - e1_i - psi / PI * e1_e
    mu0e_eli = chi * (cos_i + sin_i * tan_tb * (e2_i - sin2_half_psi * e2_e) / denom_eli)
    mue_eli = chi * (cos_e + sin_e * tan_tb * (cos_psi * e2_i + sin2_half_psi * e2_e) / denom_eli)
    s_eli = (mue_eli / eta_e) * (cos_i / eta_i) * chi / (1.0 - f_psi + f_psi * chi * cos_e / eta_e)

    i_le_e = cos_i >= cos_e
    mu0e = where(rough, where(i_le_e, mu0e_ile, mu0e_eli), cos_i)
    mue = where(rough, where(i_le_e, mue_ile, mue_eli), cos_e)
    shadowing = where(rough, where(i_le_e, s_ile, s_eli), 1.0 + 0.0 * cos_i)
    return mu0e, mue, shadowing


def geometry_terms(to_sun, to_sensor, normal):
    """`GeometryTerms` of one observation from length-3 direction vectors (any length > 0)."""
    s_norm = sqrt(to_sun[0] ** 2 + to_sun[1] ** 2 + to_sun[2] ** 2)
    v_norm = sqrt(to_sensor[0] ** 2 + to_sensor[1] ** 2 + to_sensor[2] ** 2)
    n_norm = sqrt(normal[0] ** 2 + normal[1] ** 2 + normal[2] ** 2)
    sx, sy, sz = to_sun[0] / s_norm, to_sun[1] / s_norm, to_sun[2] / s_norm
    vx, vy, vz = to_sensor[0] / v_norm, to_sensor[1] / v_norm, to_sensor[2] / v_norm
    nx, ny, nz = normal[0] / n_norm, normal[1] / n_norm, normal[2] / n_norm
    cos_i = sx * nx + sy * ny + sz * nz
    cos_e = vx * nx + vy * ny + vz * nz
    cos_g = sx * vx + sy * vy + sz * vz
    cross_x, cross_y, cross_z = sy * vz - sz * vy, sz * vx - sx * vz, sx * vy - sy * vx
    sin_g = safe_sqrt(cross_x * cross_x + cross_y * cross_y + cross_z * cross_z)  # 0 at g = 0
    one_plus_cos_g = 1.0 + cos_g
    tan_half_g = sin_g / where(one_plus_cos_g > 0.0, one_plus_cos_g, 1.0)

    sin_i = safe_sqrt(1.0 - cos_i * cos_i)
    sin_e = safe_sqrt(1.0 - cos_e * cos_e)
    # Azimuth psi between the projections of source and observer on the local horizontal
    # plane: sin_i sin_e cos psi = cos g - cos i cos e, sin_i sin_e sin psi = |(s x v) . n|.
    sin_psi_scaled = abs(cross_x * nx + cross_y * ny + cross_z * nz)
    cos_psi_scaled = cos_g - cos_i * cos_e
    scale_psi = sin_i * sin_e
    has_psi = scale_psi > 0.0
    psi_defined = (sin_psi_scaled > 0.0) | (cos_psi_scaled != 0.0)  # not atan2(0, 0)
    psi = where(
        psi_defined, atan2(sin_psi_scaled, where(psi_defined, cos_psi_scaled, 1.0)), 0.0 * cos_g
    )
    cos_psi = where(has_psi, cos_psi_scaled / where(has_psi, scale_psi, 1.0), 1.0 + 0.0 * cos_g)
    sin2_half_psi = 0.5 * (1.0 - cos_psi)
    # f(psi) = exp(-2 tan(psi/2)) >= 0, f -> 0 as psi -> 180 deg, no overflow. tan(psi/2) =
    # sin psi / (1 + cos psi) for cos psi >= 0, = (1 - cos psi) / sin psi for cos psi < 0:
    # near 180 deg, 1 + cos psi is rounding noise (f came out up to exp(-2 O(1)), not 0).
    psi_acute = cos_psi_scaled >= 0.0
    tan_half_psi_num = where(psi_acute, sin_psi_scaled, scale_psi - cos_psi_scaled)
    tan_half_psi_den = where(psi_acute, scale_psi + cos_psi_scaled, sin_psi_scaled)
    f_defined = 200.0 * tan_half_psi_den > tan_half_psi_num  # tan(psi/2) >= 200: f < 1e-173, 0
    f_psi = where(
        f_defined,
        exp(-2.0 * tan_half_psi_num / where(f_defined, tan_half_psi_den, 1.0)),
        0.0 * cos_g,
    )

    valid = (cos_i > 0.0) & (cos_e > 0.0)
    return GeometryTerms(
        cos_i, sin_i, cos_e, sin_e, cos_g, tan_half_g, cos_psi, sin2_half_psi, psi, f_psi, valid
    )


def terms_from_geometry(
    geometry, b, c, roughness, hs, bs0, hc, bc0, porosity_k, asymmetry, legendre, use_legendre
):
    """`PixelTerms` from an observation's `GeometryTerms` and the Hapke parameters.

    Args:
        geometry: `GeometryTerms`.
        b, c: double Henyey-Greenstein parameters; asymmetry: xi of the single
            Henyey-Greenstein or Cornette-Shanks phase function (each closed form uses
            its own of these, `phase_closed_form`); legendre, use_legendre: user-given
            Legendre coefficients (length 16) used instead when `use_legendre`.
        roughness: theta-bar [rad]; hs, bs0, hc, bc0: opposition-effect parameters.
        porosity_k: Hapke's (2008) porosity factor K >= 1: r scales by K and the
            H-functions take mu0e/K, mue/K (K = 1: no porosity correction, exactly).
    Returns:
        `PixelTerms`; its `scale` is NaN unless the geometry is valid (cos i, cos e > 0).
    """
    cos_i, sin_i, cos_e, sin_e, cos_g, tan_half_g, cos_psi, sin2_half_psi, psi, f_psi, valid = (
        geometry
    )
    mu0e, mue, shadowing = roughness_terms(
        cos_i, sin_i, cos_e, sin_e, cos_psi, sin2_half_psi, psi, f_psi, roughness
    )
    p_mu0e, p_mue, p_bar = multiple_scattering_sums(
        mu0e, mue, b, c, asymmetry, legendre, use_legendre
    )
    phase_sh = phase_function(cos_g, b, c, asymmetry, legendre, use_legendre) * shadow_hiding(
        tan_half_g, hs, bs0
    )
    b_cb = coherent_backscatter(tan_half_g, hc, bc0)
    mu_sum = mu0e + mue
    scale = where(
        valid,
        mu0e / where(valid, mu_sum, 1.0) * b_cb * shadowing / (4.0 * PI) * porosity_k,
        NAN + 0.0 * cos_g,
    )
    h_mu0e = h_angle_terms(maximum(mu0e, 0.0 * mu0e) / porosity_k)
    h_mue = h_angle_terms(maximum(mue, 0.0 * mue) / porosity_k)
    return PixelTerms(scale, phase_sh, p_mu0e, p_mue, p_bar, h_mu0e, h_mue)


def pixel_terms(
    to_sun,
    to_sensor,
    normal,
    b,
    c,
    roughness,
    hs,
    bs0,
    hc,
    bc0,
    porosity_k,
    asymmetry,
    legendre,
    use_legendre,
):
    """All w-independent terms of r for one pixel (see `PixelTerms`).

    Args:
        to_sun, to_sensor, normal: length-3 direction vectors (any length > 0).
        b, c, roughness, hs, bs0, hc, bc0, porosity_k, asymmetry, legendre,
            use_legendre: see `terms_from_geometry`.
    Returns:
        `PixelTerms`; its `scale` is NaN unless cos i > 0 and cos e > 0 locally.
    """
    geometry = geometry_terms(to_sun, to_sensor, normal)
    return terms_from_geometry(
        geometry, b, c, roughness, hs, bs0, hc, bc0, porosity_k, asymmetry, legendre, use_legendre
    )


def reflectance(w, terms):
    """Bidirectional reflectance r(w) [1/sr] (Hapke 2002, eq. 38) from per-pixel terms.

    r = K w/(4 pi) mu0e/(mu0e + mue) [p(g) B_SH + M] B_CB S,
    M = P(mu0e)(H(mue) - 1) + P(mue)(H(mu0e) - 1) + P-bar (H(mu0e) - 1)(H(mue) - 1),
    the H-functions at mu0e/K and mue/K (IMSA: P = P-bar = 1, so M = H H - 1).
    """
    h_mu0e, h_mue, _, _ = h_values_and_slopes(
        w, terms.h_mu0e, terms.h_mue
    )  # slopes unused: compiled away
    multiple = (
        terms.p_mu0e * (h_mue - 1.0)
        + terms.p_mue * (h_mu0e - 1.0)
        + terms.p_bar * (h_mu0e - 1.0) * (h_mue - 1.0)
    )
    return w * terms.scale * (terms.phase_sh + multiple)


def reflectance_and_slope(w, terms):
    """r(w) [1/sr] and its analytic derivative dr/dw [1/sr], sharing subexpressions.

    dr/dw = scale [p B_SH + M + w dM/dw], dM/dw from the H-function's analytic dH/dw.
    Finite for w < 1; unbounded as w -> 1.
    """
    h_mu0e, h_mue, dh_mu0e, dh_mue = h_values_and_slopes(w, terms.h_mu0e, terms.h_mue)
    h_mu0e_m1 = h_mu0e - 1.0
    h_mue_m1 = h_mue - 1.0
    multiple = (
        terms.p_mu0e * h_mue_m1 + terms.p_mue * h_mu0e_m1 + terms.p_bar * h_mu0e_m1 * h_mue_m1
    )
    dmultiple = (
        terms.p_mu0e * dh_mue
        + terms.p_mue * dh_mu0e
        + terms.p_bar * (dh_mu0e * h_mue_m1 + h_mu0e_m1 * dh_mue)
    )
    bracket = terms.phase_sh + multiple
    return w * terms.scale * bracket, terms.scale * (bracket + w * dmultiple)


# An intimate mixture whose endmembers have their own phase functions (Hapke 2012, ch. 10):
# p_mix = sum_j f_j w_j p_j / w_mix, so its Legendre coefficients, P(mu0e), P(mue), P-bar
# and p(g) B_SH are the same albedo-and-cross-section-weighted means of the endmembers'.
# With A_X = sum_j f_j w_j X_j for each of these X, w_mix X_mix = A_X and
# r = scale [A_sh + A_0 (H(mue) - 1) + A_e (H(mu0e) - 1) + A_bar (H(mu0e) - 1)(H(mue) - 1)],
# the H-functions at w_mix = sum_j f_j w_j: linear in f but for the H-functions.


def phase_terms(mu0e, mue, cos_g, tan_half_g, b, c, hs, bs0, asymmetry, legendre, use_legendre):
    """The phase-function terms of `PixelTerms` for one phase function at one observation.

    Args:
        mu0e, mue: effective cosines (`roughness_terms`); cos_g, tan_half_g: of the phase
            angle (`GeometryTerms`); b, c, asymmetry, legendre, use_legendre: the phase
            function (see `terms_from_geometry`); hs, bs0: shadow hiding.
    Returns:
        (p(g) B_SH, P(mu0e), P(mue), P-bar), as `terms_from_geometry` computes them.
    """
    p_mu0e, p_mue, p_bar = multiple_scattering_sums(
        mu0e, mue, b, c, asymmetry, legendre, use_legendre
    )
    phase_sh = phase_function(cos_g, b, c, asymmetry, legendre, use_legendre) * shadow_hiding(
        tan_half_g, hs, bs0
    )
    return phase_sh, p_mu0e, p_mue, p_bar


def mixture_reflectance_and_slope(w, sum_sh, sum_mu0e, sum_mue, sum_bar, terms):
    """r [1/sr] of a mixture whose phase function is the albedo-weighted mean of its
    endmembers', and the pieces of its derivatives in the fractions (`mixture_slope`).

    Args:
        w: the mixture's albedo w_mix = sum_j f_j w_j.
        sum_sh, sum_mu0e, sum_mue, sum_bar: sum_j f_j w_j X_j for X = p(g) B_SH, P(mu0e),
            P(mue), P-bar of the endmembers (`phase_terms`).
        terms: the pixel's `PixelTerms` (its scale and H-function pieces; its own phase
            terms are not used).
    Returns:
        (r, H(mu0e) - 1, H(mue) - 1, common), common = scale (A_0 dH(mue)/dw + A_e
        dH(mu0e)/dw + A_bar d[(H(mu0e) - 1)(H(mue) - 1)]/dw): the part of dr/df_j / w_j
        that all endmembers share. With equal phase functions r = `reflectance`(w).
    """
    h_mu0e, h_mue, dh_mu0e, dh_mue = h_values_and_slopes(w, terms.h_mu0e, terms.h_mue)
    h_mu0e_m1 = h_mu0e - 1.0
    h_mue_m1 = h_mue - 1.0
    r = terms.scale * (
        sum_sh + sum_mu0e * h_mue_m1 + sum_mue * h_mu0e_m1 + sum_bar * h_mu0e_m1 * h_mue_m1
    )
    common = terms.scale * (
        sum_mu0e * dh_mue + sum_mue * dh_mu0e + sum_bar * (dh_mu0e * h_mue_m1 + h_mu0e_m1 * dh_mue)
    )
    return r, h_mu0e_m1, h_mue_m1, common


def mixture_slope(phase_sh, p_mu0e, p_mue, p_bar, h_mu0e_m1, h_mue_m1, common, scale):
    """dr/df_j / w_j of `mixture_reflectance_and_slope`'s r for endmember j, from its
    phase terms (`phase_terms`) and that function's H(mu0e) - 1, H(mue) - 1, common, and
    the pixel's scale: scale [X_sh + X_0 (H(mue) - 1) + X_e (H(mu0e) - 1) + X_bar
    (H(mu0e) - 1)(H(mue) - 1)] + common. With equal phase functions: dr/dw."""
    own = phase_sh + p_mu0e * h_mue_m1 + p_mue * h_mu0e_m1 + p_bar * h_mu0e_m1 * h_mue_m1
    return scale * own + common
