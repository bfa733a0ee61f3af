"""The equations of the AMSA model against published numbers and their limits.

Reference numbers come from the project reference set (README copied in tests/data/README.md) (Hapke 2002 a_n, P, P-bar and
the double Henyey-Greenstein p(g) for b = 0.18, c = 1.1) and h_function_exact.csv (exact
Chandrasekhar H-function, tabulated in doi:10.1007/s12648-023-02604-3). The reference
uses c = 1.1, outside `HapkeParams`' range, so those tests call the equations directly,
as plain Python and through both retargets (`_backends.jax_equations`, `numba_equations`).
"""

import csv
import itertools
import math
import pathlib

import jax.numpy as jnp
import numpy as np
import pytest

import lumaxlike
from lumaxlike._model import equations
from lumaxlike._model._backends import jax_equations, numba_equations

from .helpers import FULL_PARAMS

REFERENCE = pathlib.Path(__file__).parent / "data"  # vendored reference table, see its README
NO_LEGENDRE = np.zeros(equations.N_LEGENDRE + 1)

# Reference README, "Legendre expansion terms (Hapke 2002, eqs. 27 and following)".
A_N = [
    0,
    -0.5,
    0,
    0.125,
    0,
    -0.0625,
    0,
    0.0390625,
    0,
    -0.02734375,
    0,
    0.0205078125,
    0,
    -0.01611328125,
    0,
    0.013092041015625,
]
B_REF, C_REF = 0.18, 1.1
P_BAR_REF = 1.1492107509695955
P_X_REF = [
    1.0,
    0.9660547437620005,
    0.9322352894770082,
    0.8986648155318951,
    0.8654613865764601,
    0.8327357177287303,
    0.8005892911272132,
    0.7691128924542041,
    0.73838560141173,
    0.7084742372481021,
]
P_G_REF = [
    0.9224097096832116,
    0.9841088950802653,
    1.0518545991668653,
    1.1266473003371191,
    1.2096863798918371,
    1.302425123769974,
    1.4066436006532723,
    1.5245467267973298,
    1.6588983383879818,
    1.8132076210091634,
]
X_REF = np.linspace(0.0, 1.0, 10)


def _as_jnp(*values):
    return [jnp.asarray(v, dtype=jnp.float64) for v in values]


# Three ways of running the same equations: plain Python floats, JAX, numba.
def _python(name):
    return getattr(equations, name)


def _jax(name):
    function = getattr(jax_equations, name)

    def call(*args):
        args = [
            jnp.asarray(a, jnp.float64) if isinstance(a, (float, np.ndarray)) else a for a in args
        ]
        result = function(*args)
        return tuple(float(r) for r in result) if isinstance(result, tuple) else float(result)

    return call


def _numba(name):
    return getattr(numba_equations, name)


BACKENDS = {"python": _python, "jax": _jax, "numba": _numba}


# ---------------------------------------------------------------------------------------
# Reference numbers (Hapke 2002 Legendre terms, double HG phase function, H-function)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_n_from_legendre_sums_with_unit_b_n(backend):
    """With b = e_n (unit coefficient at order n), P(1) - 1 = a_n P_n(1) = a_n and
    P-bar - 1 = a_n^2: the recurrence reproduces the reference a_n exactly (dyadic)."""
    legendre_sums = BACKENDS[backend]("legendre_sums")
    for n in range(equations.N_LEGENDRE + 1):
        unit = np.zeros(equations.N_LEGENDRE + 1)
        unit[n] = 1.0
        p_one, p_zero, p_bar = legendre_sums(1.0, 0.0, 0.0, 0.0, 0.0, unit, True)
        assert p_one - 1.0 == A_N[n], n
        assert p_bar - 1.0 == A_N[n] ** 2, n
        # P_n(0) = 0 for odd n; even n have a_n = 0 anyway.
        assert p_zero == 1.0, n


@pytest.mark.parametrize("backend", BACKENDS)
def test_p_and_p_bar_against_reference(backend):
    """P(x) at x = linspace(0, 1, 10) and P-bar for b = 0.18, c = 1.1 (reference README)."""
    legendre_sums = BACKENDS[backend]("legendre_sums")
    for x, expected in zip(X_REF, P_X_REF):
        p_x, _, p_bar = legendre_sums(float(x), 0.5, B_REF, C_REF, 0.0, NO_LEGENDRE, False)
        assert abs(p_x - expected) <= 1e-14, x
        assert abs(p_bar - P_BAR_REF) <= 1e-14
        # The second cosine runs the same series independently.
        _, p_x_second, _ = legendre_sums(0.5, float(x), B_REF, C_REF, 0.0, NO_LEGENDRE, False)
        assert abs(p_x_second - expected) <= 1e-14, x


@pytest.mark.parametrize("backend", BACKENDS)
def test_phase_function_against_reference(backend):
    """Closed-form double HG p(g) at cos g = linspace(0, 1, 10) (reference README)."""
    phase_function = BACKENDS[backend]("phase_function")
    for cos_g, expected in zip(X_REF, P_G_REF):
        assert (
            abs(phase_function(float(cos_g), B_REF, C_REF, 0.0, NO_LEGENDRE, False) - expected)
            <= 1e-14
        )


@pytest.mark.parametrize("backend", BACKENDS)
def test_power_three_halves_within_two_ulp(backend):
    """x^1.5 as x sqrt(x) (the closed-form phase functions' denominators, x in
    [(1 - b)^2, (1 + b)^2]) is within 2 ulp of x^1.5 computed in extended precision."""
    power_three_halves = BACKENDS[backend]("power_three_halves")
    for x in np.geomspace(1e-6, 4.0, 201):
        exact = float(np.longdouble(x) ** np.longdouble(1.5))
        assert abs(float(power_three_halves(float(x))) - exact) <= 2 * np.spacing(exact), x


@pytest.mark.parametrize("backend", BACKENDS)
def test_phase_function_legendre_series(backend):
    """The user-coefficient series of the double HG equals the closed form within the
    reference's measured truncation error of the n <= 15 series (5.7e-10 at b = 0.21)."""
    phase_function = BACKENDS[backend]("phase_function")
    b, c = 0.21, 0.45
    coefficients = np.array([equations.hg_legendre_coefficient(n, b, c, 0.0) for n in range(16)])
    for cos_g in np.linspace(-1.0, 1.0, 9):
        series = phase_function(float(cos_g), b, c, 0.0, coefficients, True)
        closed = phase_function(float(cos_g), b, c, 0.0, NO_LEGENDRE, False)
        assert abs(series - closed) <= 6e-10, cos_g


def _h_table():
    with open(REFERENCE / "h_function_exact.csv") as f:
        rows = [(float(r["w"]), float(r["mu"]), float(r["h"])) for r in csv.DictReader(f)]
    return np.array(rows)


# Measured relative errors of Hapke's (2002, eq. 13) approximation stated in the reference
# README, given to two digits: the bound is that number plus half a unit of its last digit
# (the table itself holds 6 significant digits). w = 0.3 and 0.7 are not stated: the bound
# is linear interpolation between the neighbouring stated errors (the error grows
# monotonically with w).
H_ERROR_BOUND = {
    0.1: 5.15e-5,
    0.3: (5.15e-5 + 1.75e-3) / 2,
    0.5: 1.75e-3,
    0.7: (1.75e-3 + 7.65e-3) / 2,
    0.9: 7.65e-3,
    1.0: 7.75e-3,
}


@pytest.mark.parametrize("backend", BACKENDS)
def test_h_function_against_exact_table(backend):
    h_function = BACKENDS[backend]("h_function")
    table = _h_table()
    assert sorted(set(table[:, 0])) == sorted(H_ERROR_BOUND)
    for w, mu, exact in table:
        approx = h_function(float(w), float(mu))
        assert abs(approx / exact - 1.0) <= H_ERROR_BOUND[w], (w, mu, approx, exact)


@pytest.mark.parametrize("backend", BACKENDS)
def test_h_function_at_zero_is_one(backend):
    h_function = BACKENDS[backend]("h_function")
    for w in (0.0, 0.1, 0.5, 0.9, 1.0):
        assert h_function(w, 0.0) == 1.0


def test_h_function_public():
    """`lumaxlike.h_function` is the equations' H and agrees with the table at w = 0.5."""
    table = _h_table()
    rows = table[table[:, 0] == 0.5]
    for w, mu, exact in rows:
        assert abs(lumaxlike.h_function(w, mu) / exact - 1.0) <= H_ERROR_BOUND[0.5]


# ---------------------------------------------------------------------------------------
# Limits


def _flat_geometry(incidence, emission, azimuth):
    source, observer, normal = lumaxlike.geometry_from_angles(incidence, emission, azimuth)
    return source, observer, normal


def _terms(incidence, emission, azimuth, params=FULL_PARAMS, module=equations):
    source, observer, normal = _flat_geometry(incidence, emission, azimuth)
    legendre, use_legendre = params.legendre_coefficients(np)
    scalars = [float(v) for v in params.scalars()]
    return module.pixel_terms(source, observer, normal, *scalars, legendre, use_legendre)


@pytest.mark.parametrize(
    "incidence, emission, azimuth",
    [
        (0.3, 0.7, 0.4),
        (1.2, 0.1, 2.9),
        (0.0, 0.5, 1.0),
        (0.5, 0.0, 1.0),
        (0.6, 0.6, 0.0),
        (1.4, 1.3, np.pi),
    ],
)
def test_no_roughness_is_identity(incidence, emission, azimuth):
    """theta-bar = 0: S = 1, mu0e = cos i, mue = cos e (exactly)."""
    cos_i, cos_e = math.cos(incidence), math.cos(emission)
    sin_i, sin_e = math.sin(incidence), math.sin(emission)
    psi = azimuth
    f_psi = math.exp(-2.0 * math.tan(psi / 2.0)) if psi < math.pi else 0.0
    for module in (equations, numba_equations):
        mu0e, mue, shadowing = module.roughness_terms(
            cos_i, sin_i, cos_e, sin_e, math.cos(psi), math.sin(psi / 2) ** 2, psi, f_psi, 0.0
        )
        assert (mu0e, mue, shadowing) == (cos_i, cos_e, 1.0)
    # and through the geometry: r equals the smooth-surface formula with cos i, cos e
    params = lumaxlike.HapkeParams(b=0.3, c=0.2)
    terms = _terms(incidence, emission, azimuth, params)
    source, observer, normal = _flat_geometry(incidence, emission, azimuth)
    cos_i, cos_e = source @ normal, observer @ normal
    np.testing.assert_allclose(terms.scale, cos_i / (cos_i + cos_e) / (4 * np.pi), rtol=1e-14)


def test_coherent_backscatter_at_zero_phase():
    """B_CB = 1 + B_C0 exactly at g = 0 (no 0/0, no epsilon guard), and the Taylor branch
    joins the expm1 branch continuously at z = CB_SERIES_LIMIT (truncation z^3/24)."""
    for module in (equations, numba_equations):
        for hc, bc0 in [(0.05, 0.5), (1e-4, 1.0), (2.0, 0.3)]:
            assert module.coherent_backscatter(0.0, hc, bc0) == 1.0 + bc0
        hc, bc0 = 0.05, 0.5
        z = equations.CB_SERIES_LIMIT
        below = module.coherent_backscatter(z * (1 - 1e-12) * hc, hc, bc0)
        above = module.coherent_backscatter(z * (1 + 1e-12) * hc, hc, bc0)
        assert abs(below - above) <= 1e-10
        # naive formula where it is well conditioned
        z = 0.7
        naive = 1 + bc0 * (1 + (1 - math.exp(-z)) / z) / (2 * (1 + z) ** 2)
        assert abs(module.coherent_backscatter(z * hc, hc, bc0) - naive) <= 1e-15
        # switched off
        assert module.coherent_backscatter(0.3, 0.0, 0.5) == 1.0
    jax_bcb = jax_equations.coherent_backscatter(*_as_jnp(0.0, 0.05, 0.5))
    assert float(jax_bcb) == 1.5


def test_shadow_hiding_at_zero_phase():
    for module in (equations, numba_equations):
        for hs, bs0 in [(0.06, 1.0), (1e-3, 2.5)]:
            assert module.shadow_hiding(0.0, hs, bs0) == 1.0 + bs0
        assert module.shadow_hiding(0.2, 0.0, 1.0) == 1.0
        assert abs(module.shadow_hiding(0.2, 0.06, 1.0) - (1 + 1 / (1 + 0.2 / 0.06))) <= 1e-15


def test_zero_phase_through_geometry():
    """Source and observer along the same vector: the pixel terms carry B_SH = 1 + B_S0 and
    B_CB = 1 + B_C0 exactly."""
    params = FULL_PARAMS
    with_opposition = _terms(0.5, 0.5, 0.0, params)
    without = _terms(
        0.5, 0.5, 0.0, lumaxlike.HapkeParams(b=params.b, c=params.c, roughness=params.roughness)
    )
    p_g = equations.phase_function(1.0, params.b, params.c, 0.0, NO_LEGENDRE, False)
    np.testing.assert_allclose(with_opposition.phase_sh, p_g * (1.0 + params.bs0), rtol=1e-14)
    np.testing.assert_allclose(with_opposition.scale / without.scale, 1.0 + params.bc0, rtol=1e-15)


def _r_flat(incidence, emission, azimuth, w=0.6, params=FULL_PARAMS):
    return equations.reflectance(w, _terms(incidence, emission, azimuth, params))


def _extrapolate_to_zero(f, step):
    """f(0) from f(step), f(2 step), f(4 step), exact for a quadratic: error O(step^3)."""
    return (8.0 * f(step) - 6.0 * f(2.0 * step) + f(4.0 * step)) / 3.0


NADIR_CASES = [
    (other, azimuth) for other in (0.0, 0.3, 1.0, 1.4) for azimuth in (0.0, 0.7, 2.0, np.pi)
]


@pytest.mark.parametrize("which", ["incidence", "emission"])
def test_roughness_continuous_at_nadir(which):
    """r at exact nadir (i = 0 or e = 0, with roughness) is the limit of nearby geometries:
    r(delta) -> r(0) linearly, and the extrapolation to delta = 0 from delta = 1e-5..4e-5
    matches r(0) within 1e-9 relative (measured 2e-11; a special case forcing mu0e = cos i
    at nadir is off by ~10 %). r(1e-6) itself differs by O(1e-6): r has a slope in sin i."""
    params = lumaxlike.HapkeParams(
        b=0.21, c=0.45, roughness=np.radians(25.0), hs=0.06, bs0=1.0, hc=0.05, bc0=0.5
    )

    for other, azimuth in NADIR_CASES:

        def r_at(delta, other=other, azimuth=azimuth):
            angles = (delta, other) if which == "incidence" else (other, delta)
            return _r_flat(*angles, azimuth, params=params)

        at_nadir = r_at(0.0)
        assert np.isfinite(at_nadir) and at_nadir > 0
        limit = _extrapolate_to_zero(r_at, 1e-5)
        assert abs(limit / at_nadir - 1.0) <= 1e-9, (other, azimuth, limit, at_nadir)
        for delta in (1e-4, 1e-6):
            assert abs(r_at(delta) / at_nadir - 1.0) <= 20.0 * delta, (other, azimuth, delta)


def test_nadir_effective_cosines():
    """At i = 0 with roughness, mu0e = chi (Hapke 1984), not cos i = 1; S = 1."""
    roughness = np.radians(25.0)
    chi = 1.0 / math.sqrt(1.0 + math.pi * math.tan(roughness) ** 2)
    e = 0.5
    mu0e, mue, shadowing = equations.roughness_terms(
        1.0, 0.0, math.cos(e), math.sin(e), 1.0, 0.0, 0.0, 1.0, roughness
    )
    assert abs(mu0e - chi) <= 1e-15
    assert abs(shadowing - 1.0) <= 1e-15
    # mue at nadir incidence is eta(e) = chi (cos e + sin e tan tb E2(e) / (2 - E1(e)))
    cot_tb, cot_e = 1 / math.tan(roughness), 1 / math.tan(e)
    e1 = math.exp(-2 / math.pi * cot_tb * cot_e)
    e2 = math.exp(-1 / math.pi * cot_tb**2 * cot_e**2)
    eta_e = chi * (math.cos(e) + math.sin(e) * math.tan(roughness) * e2 / (2 - e1))
    assert abs(mue - eta_e) <= 1e-15


@pytest.mark.parametrize("azimuth", [0.0, 0.9, 2.2, np.pi])
def test_roughness_branches_meet_at_equal_angles(azimuth):
    """The i <= e and e < i branches of Hapke (1984) agree at i = e: r is continuous there
    (|r(i +- delta) - r(i)| = O(delta); no opposition effect, whose cusp at g = 0 would
    add its own O(delta) slope at azimuth 0)."""
    params = lumaxlike.HapkeParams(b=0.21, c=0.45, roughness=np.radians(30.0))
    at_equal = _r_flat(0.7, 0.7, azimuth, params=params)
    for delta in (1e-5, -1e-5, 1e-8, -1e-8):
        np.testing.assert_allclose(
            _r_flat(0.7 + delta, 0.7, azimuth, params=params), at_equal, rtol=2 * abs(delta)
        )


def test_psi_denominator_in_both_effective_cosines():
    """psi/pi E1 sits in the denominators of both mu0e and mue of each branch (Hapke 1984
    eqs. 46-51). Recompute the i <= e branch independently from the published form."""
    roughness = np.radians(30.0)
    i, e, psi = 0.5, 1.1, 1.9
    tan_tb = math.tan(roughness)
    chi = 1.0 / math.sqrt(1.0 + math.pi * tan_tb**2)

    def e1(x):
        return math.exp(-2 / math.pi / tan_tb / math.tan(x))

    def e2(x):
        return math.exp(-1 / math.pi / tan_tb**2 / math.tan(x) ** 2)

    def eta(x):
        return chi * (math.cos(x) + math.sin(x) * tan_tb * e2(x) / (2 - e1(x)))

    denom = 2 - e1(e) - psi / math.pi * e1(i)
    s2 = math.sin(psi / 2) ** 2
    mu0e = chi * (math.cos(i) + math.sin(i) * tan_tb * (math.cos(psi) * e2(e) + s2 * e2(i)) / denom)
    mue = chi * (math.cos(e) + math.sin(e) * tan_tb * (e2(e) - s2 * e2(i)) / denom)
    f = math.exp(-2 * math.tan(psi / 2))
    shadowing = mue / eta(e) * math.cos(i) / eta(i) * chi / (1 - f + f * chi * math.cos(i) / eta(i))
    got = equations.roughness_terms(
        math.cos(i), math.sin(i), math.cos(e), math.sin(e), math.cos(psi), s2, psi, f, roughness
    )
    np.testing.assert_allclose(got, (mu0e, mue, shadowing), rtol=1e-14)
    # and the e < i branch, by symmetry of the published equations (swap the roles)
    i, e = e, i
    denom = 2 - e1(i) - psi / math.pi * e1(e)
    mu0e = chi * (math.cos(i) + math.sin(i) * tan_tb * (e2(i) - s2 * e2(e)) / denom)
    mue = chi * (math.cos(e) + math.sin(e) * tan_tb * (math.cos(psi) * e2(i) + s2 * e2(e)) / denom)
    shadowing = mue / eta(e) * math.cos(i) / eta(i) * chi / (1 - f + f * chi * math.cos(e) / eta(e))
    got = equations.roughness_terms(
        math.cos(i), math.sin(i), math.cos(e), math.sin(e), math.cos(psi), s2, psi, f, roughness
    )
    np.testing.assert_allclose(got, (mu0e, mue, shadowing), rtol=1e-14)


def test_reflectance_vanishes_with_w():
    """r(0) = 0 exactly; r(w)/w -> scale * p(g) B_SH (single scattering) as w -> 0."""
    for incidence, emission, azimuth in [(0.3, 0.7, 0.4), (1.2, 0.1, 2.9), (0.5, 0.5, 0.0)]:
        terms = _terms(incidence, emission, azimuth)
        assert equations.reflectance(0.0, terms) == 0.0
        single = terms.scale * terms.phase_sh
        assert np.isfinite(single) and single > 0
        r_tiny = equations.reflectance(1e-12, terms)
        assert 0 < r_tiny < 1e-11
        np.testing.assert_allclose(r_tiny / 1e-12, single, rtol=1e-9)


def test_slope_finite_below_one_and_unbounded_at_one():
    terms = _terms(0.4, 0.8, 1.0)
    ws = [0.5, 0.9, 0.99, 1 - 1e-4, 1 - 1e-6, 1 - 1e-8, 1 - 1e-10, 1 - 1e-12]
    slopes = []
    for w in ws:
        r, slope = equations.reflectance_and_slope(w, terms)
        assert r == equations.reflectance(w, terms)
        assert np.isfinite(slope) and slope > 0
        slopes.append(slope)
    assert all(b > a for a, b in itertools.pairwise(slopes))
    assert slopes[-1] > 1e3 * slopes[0]  # dr/dw ~ (1 - w)^(-1/2)
    # at w = 1 exactly r is finite and the slope infinite (JAX: IEEE division, no exception)
    jax_terms = _terms(0.4, 0.8, 1.0, module=jax_equations)
    r_one, slope_one = jax_equations.reflectance_and_slope(jnp.float64(1.0), jax_terms)
    assert np.isfinite(r_one) and r_one > 0
    assert slope_one == np.inf


def test_slope_matches_finite_difference():
    """The analytic dr/dw of `reflectance_and_slope` against a central difference."""
    for incidence, emission, azimuth in [(0.3, 0.7, 0.4), (1.2, 0.1, 2.9), (0.0, 0.0, 0.0)]:
        terms = _terms(incidence, emission, azimuth)
        for w in (1e-6, 0.1, 0.5, 0.9, 0.999):
            h = 1e-6 * min(w, 1 - w)
            central = (
                equations.reflectance(w + h, terms) - equations.reflectance(w - h, terms)
            ) / (2 * h)
            _, slope = equations.reflectance_and_slope(w, terms)
            np.testing.assert_allclose(slope, central, rtol=1e-7)


def test_user_legendre_coefficients_match_double_hg():
    """HapkeParams(legendre=[(2n+1) b^n c^(n odd)]) gives the closed double HG's r within the
    series truncation of p(g) (~1e-9 at b = 0.2); the P terms use the same b_n in both."""
    b, c = 0.2, 0.45
    coefficients = [(2 * n + 1) * b**n * (c if n % 2 else 1.0) for n in range(16)]
    rest = {"roughness": np.radians(20.0), "hs": 0.06, "bs0": 1.0, "hc": 0.05, "bc0": 0.5}
    closed = lumaxlike.HapkeParams(b=b, c=c, **rest)
    series = lumaxlike.HapkeParams(b=0.9, c=-1.0, legendre=coefficients, **rest)  # b, c unused
    for incidence, emission, azimuth in [
        (0.3, 0.7, 0.4),
        (1.2, 0.1, 2.9),
        (0.5, 0.5, 0.0),
        (0.0, 0.9, 1.0),
    ]:
        for w in (0.05, 0.5, 0.95):
            np.testing.assert_allclose(
                _r_flat(incidence, emission, azimuth, w, series),
                _r_flat(incidence, emission, azimuth, w, closed),
                rtol=1e-8,
            )


def test_short_legendre_list_is_padded():
    """legendre=[1] (isotropic) equals the double HG with b = 0 (b_n = 0 for n >= 1)."""
    isotropic = lumaxlike.HapkeParams(b=0.5, c=0.5, legendre=[1.0], roughness=0.3)
    hg_zero = lumaxlike.HapkeParams(b=0.0, c=0.0, roughness=0.3)
    for incidence, emission, azimuth in [(0.3, 0.7, 0.4), (0.5, 0.5, 0.0)]:
        np.testing.assert_allclose(
            _r_flat(incidence, emission, azimuth, 0.7, isotropic),
            _r_flat(incidence, emission, azimuth, 0.7, hg_zero),
            rtol=1e-15,
        )
