"""An independent NumPy implementation of the model `lumaxlike.amsa` computes by default.

Written from the papers, not from lumaxlike's equations, so that tests can generate data
and check fits against numbers that share none of lumaxlike's code: Hapke's (2002, Icarus
157:523) anisotropic multiple-scattering approximation (AMSA) with his eq. 13 H-function,
the double Henyey-Greenstein phase function, the shadow-hiding and coherent-backscatter
opposition effects (Hapke 2002, eq. 31; Hapke 2012, *Theory of Reflectance and Emittance
Spectroscopy*, 2nd ed., ch. 9), Hapke's (1984, Icarus 59:41) macroscopic roughness
(Hapke 2012, ch. 12) and the porosity factor K (Hapke 2008, Icarus
195:918), K = 1 by default as in lumaxlike.

Conventions (those of lumaxlike, read from its documentation, not its code paths): the
geometry is three direction vectors in (east, north, up) -- toward the light source, toward
the sensor and the outward surface normal, of any length; psi is the azimuth between the
projections of the source and the sensor on the plane normal to the surface (psi = 0: the
source behind the observer, where the phase angle is smallest); b, c are those of
p(g) = (1+c)/2 HG(g; b) + (1-c)/2 HG(g; -b) in the phase angle g, so c > 0 scatters back;
r is the bidirectional reflectance [1/sr] (RADF = pi r).

Everything is vectorised: parameters broadcast against the geometry's leading shape. The
parameters may be complex (only their real parts are compared), so that a test can take
exact derivatives by the complex step, d r/d x = Im r(x + i h)/h (Squire & Trapp 1998).
"""

import numpy as np

__all__ = ["reflectance", "angles", "henyey_greenstein_legendre", "h_function"]

# Hapke (2002) expands the phase function to this order in P(mu) and P-bar (lumaxlike's
# documented truncation, "series to n = 15"); the next term is below b^17 ~ 1e-7 b_1.
ORDER = 15
# |reflectance - lumaxlike.amsa| / r is below this (tests/test_independent_hapke.py)
AGREEMENT = 1e-13


def angles(to_sun, to_sensor, normal):
    """cos i, cos e, cos g, tan(g/2) and the azimuth psi [rad] of each observation.

    i, e are the angles of the source and the sensor from the normal, g the angle between
    the source and the sensor (the phase angle), psi the angle between the projections of
    the source and the sensor on the surface plane, in [0, pi] (Hapke 2012, fig. 12.1).
    tan(g/2) = |s x v| / (1 + s . v) and psi from atan2 keep full precision near 0.

    Args:
        to_sun, to_sensor, normal: (..., 3) vectors (east, north, up), any length > 0.
    Returns:
        (cos_i, cos_e, cos_g, tan_half_g, psi), each of shape (...).
    """
    s, v, n = (np.asarray(a, float) for a in (to_sun, to_sensor, normal))
    s = s / np.linalg.norm(s, axis=-1, keepdims=True)
    v = v / np.linalg.norm(v, axis=-1, keepdims=True)
    n = n / np.linalg.norm(n, axis=-1, keepdims=True)
    cos_i = np.sum(s * n, axis=-1)
    cos_e = np.sum(v * n, axis=-1)
    cos_g = np.sum(s * v, axis=-1)
    tan_half_g = np.linalg.norm(np.cross(s, v), axis=-1) / (1.0 + cos_g)
    s_flat = s - cos_i[..., None] * n  # projections on the surface plane
    v_flat = v - cos_e[..., None] * n
    psi = np.arctan2(
        np.linalg.norm(np.cross(s_flat, v_flat), axis=-1), np.sum(s_flat * v_flat, axis=-1)
    )
    return cos_i, cos_e, cos_g, tan_half_g, psi


def henyey_greenstein_legendre(b, c, order=ORDER):
    """Legendre coefficients b_1..b_order of the double Henyey-Greenstein phase function.

    The generating function of the Legendre polynomials, (1 - 2 b x + b^2)^(-1/2) =
    sum_n b^n P_n(x), differentiated in b gives (1 - b^2)/(1 - 2 b x + b^2)^(3/2) =
    sum_n (2n + 1) b^n P_n(x), so HG(g; b) has b_n = (2n+1) b^n in cos g and HG(g; -b)
    has (2n+1) (-b)^n; the mixture (1+c)/2, (1-c)/2 keeps the even terms and scales the
    odd ones by c (Hapke 2012, ch. 6).

    Returns:
        (order, ...) array: row n - 1 holds b_n.
    """
    n = np.arange(1, order + 1).reshape((order,) + (1,) * np.ndim(b))
    return (2 * n + 1) * np.asarray(b) ** n * np.where(n % 2 == 1, c, 1.0)


def _amsa_a(order=ORDER):
    """Hapke's (2002, eqs. 23-27) A_n: 0 for even n, for odd n
    A_n = (-1)^((n+1)/2) / n * (1 3 5 ... n) / (2 4 6 ... (n+1))."""
    a = np.zeros(order)
    for n in range(1, order + 1, 2):
        odd = np.prod(np.arange(1.0, n + 1.0, 2.0))
        even = np.prod(np.arange(2.0, n + 2.0, 2.0))
        a[n - 1] = (-1.0) ** ((n + 1) // 2) / n * odd / even
    return a


def _legendre_polynomials(x, order=ORDER):
    """P_1(x)..P_order(x), (order, ...), by Bonnet's recursion."""
    p_prev, p = np.ones_like(x), x
    rows = [p]
    for n in range(1, order):
        p_prev, p = p, ((2 * n + 1) * x * p - n * p_prev) / (n + 1)
        rows.append(p)
    return np.stack(rows)


def h_function(w, x):
    """Hapke's (2002, eq. 13) approximation to Chandrasekhar's H-function:
    H(x) = 1 / (1 - w x [r0 + (1 - 2 r0 x)/2 ln((1 + x)/x)]), r0 = (1 - gamma)/(1 + gamma),
    gamma = sqrt(1 - w) (eq. 7); x > 0."""
    gamma = np.sqrt(1.0 - w)
    r0 = (1.0 - gamma) / (1.0 + gamma)
    return 1.0 / (1.0 - w * x * (r0 + (1.0 - 2.0 * r0 * x) / 2.0 * np.log((1.0 + x) / x)))


def _roughness(cos_i, cos_e, psi, theta_bar):
    """Hapke's (1984) rough-surface effective cosines and shadowing function.

    Hapke 1984, eqs. 46-51 (Hapke 2012, ch. 12): chi = 1/sqrt(1 + pi tan^2 theta-bar),
    E1(x) = exp(-2/pi cot theta-bar cot x), E2(x) = exp(-1/pi cot^2 theta-bar cot^2 x),
    eta(x) = chi [cos x + sin x tan theta-bar E2(x)/(2 - E1(x))], f(psi) = exp(-2 tan(psi/2));
    for i <= e
        mu0e = chi [cos i + sin i tan tb (cos psi E2(e) + sin^2(psi/2) E2(i))
               / (2 - E1(e) - psi/pi E1(i))],
        mue  = chi [cos e + sin e tan tb (E2(e) - sin^2(psi/2) E2(i)) / (same)],
        S    = mue/eta(e) mu0/eta(i) chi / (1 - f + f chi mu0/eta(i));
    for e < i the same with i and e exchanged in the brackets, and
        S    = mue/eta(e) mu0/eta(i) chi / (1 - f + f chi mu/eta(e)).
    theta-bar = 0 is the smooth surface: mu0e = cos i, mue = cos e, S = 1.

    Returns:
        (mu0e, mue, S), broadcast over the inputs.
    """
    theta_bar = np.asarray(theta_bar)
    if np.all(np.real(theta_bar) == 0.0):
        return cos_i + 0.0 * theta_bar, cos_e + 0.0 * theta_bar, 1.0 + 0.0 * theta_bar
    sin_i = np.sqrt(1.0 - cos_i**2)
    sin_e = np.sqrt(1.0 - cos_e**2)
    tan_tb = np.tan(theta_bar)
    chi = 1.0 / np.sqrt(1.0 + np.pi * tan_tb**2)

    def e1(cos_x, sin_x):
        return np.exp(-2.0 / np.pi / tan_tb * cos_x / sin_x)

    def e2(cos_x, sin_x):
        return np.exp(-1.0 / np.pi / tan_tb**2 * (cos_x / sin_x) ** 2)

    def eta(cos_x, sin_x):
        return chi * (cos_x + sin_x * tan_tb * e2(cos_x, sin_x) / (2.0 - e1(cos_x, sin_x)))

    e1_i, e1_e, e2_i, e2_e = e1(cos_i, sin_i), e1(cos_e, sin_e), e2(cos_i, sin_i), e2(cos_e, sin_e)
    cos_psi, sin2_half = np.cos(psi), np.sin(psi / 2.0) ** 2
    f = np.exp(-2.0 * np.tan(psi / 2.0))
    eta_i, eta_e = eta(cos_i, sin_i), eta(cos_e, sin_e)

    d_ile = 2.0 - e1_e - psi / np.pi * e1_i
    mu0e_ile = chi * (cos_i + sin_i * tan_tb * (cos_psi * e2_e + sin2_half * e2_i) / d_ile)
    mue_ile = chi * (cos_e + sin_e * tan_tb * (e2_e - sin2_half * e2_i) / d_ile)
    s_ile = mue_ile / eta_e * cos_i / eta_i * chi / (1.0 - f + f * chi * cos_i / eta_i)

    d_eli = 2.0 - e1_i - psi / np.pi * e1_e
    mu0e_eli = chi * (cos_i + sin_i * tan_tb * (e2_i - sin2_half * e2_e) / d_eli)
    mue_eli = chi * (cos_e + sin_e * tan_tb * (cos_psi * e2_i + sin2_half * e2_e) / d_eli)
    s_eli = mue_eli / eta_e * cos_i / eta_i * chi / (1.0 - f + f * chi * cos_e / eta_e)

    i_le_e = cos_i >= cos_e
    return (
        np.where(i_le_e, mu0e_ile, mu0e_eli),
        np.where(i_le_e, mue_ile, mue_eli),
        np.where(i_le_e, s_ile, s_eli),
    )


def reflectance(
    w,
    to_sun,
    to_sensor,
    normal,
    b,
    c,
    roughness=0.0,
    hs=0.0,
    bs0=0.0,
    hc=0.0,
    bc0=0.0,
    porosity_k=1.0,
):
    """Bidirectional reflectance r [1/sr] of Hapke's AMSA model (Hapke 2002, eq. 38, with
    the roughness of Hapke 1984 and the porosity factor of Hapke 2008):

        r = K w/(4 pi) mu0e/(mu0e + mue) [p(g) B_SH(g) + M] B_CB(g) S,
        M = P(mu0e) [H(mue/K) - 1] + P(mue) [H(mu0e/K) - 1] + P-bar [H(mu0e/K) - 1] [H(mue/K) - 1],
        P(mu) = 1 + sum_n A_n b_n P_n(mu), P-bar = 1 + sum_n A_n^2 b_n (Hapke 2002, eqs. 23-27),
        B_SH = 1 + B_S0 / (1 + tan(g/2)/h_S) (Hapke 2012, ch. 9),
        B_CB = 1 + B_C0 [1 + (1 - exp(-z))/z] / (2 (1 + z)^2), z = tan(g/2)/h_C (Hapke 2002,
        eq. 31; its limit 1 + B_C0 at z = 0),

    with p the double Henyey-Greenstein, the H-function of `h_function`, and mu0e, mue, S
    of Hapke (1984); h_S = 0 or h_C = 0 switches that opposition effect off.

    Args:
        w: single-scattering albedo, broadcast against the geometry's leading shape.
        to_sun, to_sensor, normal: (..., 3) direction vectors (east, north, up).
        b, c, roughness [rad], hs, bs0, hc, bc0, porosity_k: as `lumaxlike.HapkeParams`,
            each a scalar or broadcast like w (complex for a complex step).
    Returns:
        r, of the broadcast shape; NaN where cos i <= 0 or cos e <= 0.
    """
    cos_i, cos_e, cos_g, tan_half_g, psi = angles(to_sun, to_sensor, normal)
    valid = (cos_i > 0.0) & (cos_e > 0.0)
    cos_i, cos_e = np.where(valid, cos_i, 0.5), np.where(valid, cos_e, 0.5)
    mu0e, mue, shadowing = _roughness(cos_i, cos_e, psi, roughness)

    b, c = np.asarray(b), np.asarray(c)
    one_minus_b2 = 1.0 - b**2
    phase = (1.0 + c) / 2.0 * one_minus_b2 / (1.0 - 2.0 * b * cos_g + b**2) ** 1.5 + (
        1.0 - c
    ) / 2.0 * one_minus_b2 / (1.0 + 2.0 * b * cos_g + b**2) ** 1.5

    b_full, c_full, mu0e, mue = np.broadcast_arrays(b, c, mu0e, mue)
    a_n = _amsa_a().reshape((ORDER,) + (1,) * mu0e.ndim)
    b_n = henyey_greenstein_legendre(b_full, c_full)
    p_mu0e = 1.0 + np.sum(a_n * b_n * _legendre_polynomials(mu0e), axis=0)
    p_mue = 1.0 + np.sum(a_n * b_n * _legendre_polynomials(mue), axis=0)
    p_bar = 1.0 + np.sum(a_n**2 * b_n, axis=0)

    h0 = h_function(w, mu0e / porosity_k) - 1.0
    he = h_function(w, mue / porosity_k) - 1.0
    multiple = p_mu0e * he + p_mue * h0 + p_bar * h0 * he

    hs, hc = np.asarray(hs), np.asarray(hc)
    shadow_on = np.real(hs) > 0.0
    b_sh = np.where(shadow_on, 1.0 + bs0 / (1.0 + tan_half_g / np.where(shadow_on, hs, 1.0)), 1.0)
    coherent_on = np.real(hc) > 0.0
    z = tan_half_g / np.where(coherent_on, hc, 1.0)
    tiny = np.real(z) < 1e-4  # (1 - exp(-z))/z = 1 - z/2 + z^2/6 - z^3/24: error < 1e-17
    z_safe = np.where(tiny, 1.0, z)
    escape = np.where(tiny, 1.0 - z / 2.0 + z**2 / 6.0, -np.expm1(-z_safe) / z_safe)
    b_cb = np.where(coherent_on, 1.0 + bc0 * (1.0 + escape) / (2.0 * (1.0 + z) ** 2), 1.0)

    r = (
        porosity_k
        * w
        / (4.0 * np.pi)
        * mu0e
        / (mu0e + mue)
        * (phase * b_sh + multiple)
        * b_cb
        * shadowing
    )
    return np.where(valid, r, np.nan)
