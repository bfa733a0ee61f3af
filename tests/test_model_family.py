"""The Hapke model family: IMSA, the Hapke 1981 H-function, the porosity factor K.

Against outside numbers (USGS ISIS3's HapkeHen unit test), independent formulas and
limits, the previous implementation's own outputs (the default model must not move), the
two backends against each other, and recovery by `invert` and `fit` with both solvers.
"""

import math
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lumaxlike
from lumaxlike._model.jax_model import amsa_scalar

from .helpers import (
    FULL_PARAMS,
    SOLVERS,
    assert_both_solvers_recover_w,
    assert_reproduces_invert,
    random_geometry,
)

pytestmark = pytest.mark.slow  # every model configuration fitted by both solvers

DATA = Path(__file__).parent / "data"
CONFIGURATIONS = [
    {"multiple_scattering": "amsa", "h_function": "hapke2002"},
    {"multiple_scattering": "imsa", "h_function": "hapke2002"},
    {"multiple_scattering": "amsa", "h_function": "hapke1981"},
    {"multiple_scattering": "imsa", "h_function": "hapke1981"},
    {"multiple_scattering": "amsa", "h_function": "exact"},
    {"multiple_scattering": "imsa", "h_function": "exact"},
]
IDS = [f"{c['multiple_scattering']}-{c['h_function']}" for c in CONFIGURATIONS]


def full_params(**changes):
    fields = {
        name: getattr(FULL_PARAMS, name)
        for name in ("b", "c", "roughness", "hs", "bs0", "hc", "bc0")
    }
    return lumaxlike.HapkeParams(**{**fields, **changes})


def angles_to_vectors(incidence_deg, emission_deg, phase_deg):
    """Flat-surface vectors from (i, e, g): cos g = cos i cos e + sin i sin e cos psi."""
    i, e, g = (np.radians(v) for v in (incidence_deg, emission_deg, phase_deg))
    sin_product = np.sin(i) * np.sin(e)
    cos_psi = 1.0 if sin_product == 0.0 else (np.cos(g) - np.cos(i) * np.cos(e)) / sin_product
    return lumaxlike.geometry_from_angles(i, e, np.arccos(np.clip(cos_psi, -1.0, 1.0)))


# ---------------------------------------------------------------------------------------
# The default model has not moved


REFERENCE = np.load(DATA / "default_model_reference.npz")
EPS = np.finfo(np.float64).eps
REFERENCE_PARAMS = {
    "full": FULL_PARAMS,
    "legendre": lumaxlike.HapkeParams(
        b=0.3, c=0.2, roughness=0.2, hs=0.05, bs0=0.8, legendre=np.r_[1.0, 0.4, 0.3, 0.1]
    ),
}


@pytest.mark.parametrize("name", REFERENCE_PARAMS)
@pytest.mark.parametrize("backend", ["jax", "numba"])
def test_default_model_reproduces_the_previous_implementation(name, backend):
    geometry = [REFERENCE[k] for k in ("to_sun", "to_sensor", "normal")]
    for params in (
        REFERENCE_PARAMS[name],
        lumaxlike.HapkeParams(
            **{
                **{
                    f: getattr(REFERENCE_PARAMS[name], f)
                    for f in ("b", "c", "roughness", "hs", "bs0", "hc", "bc0", "legendre")
                },
                "porosity_k": 1.0,
                "multiple_scattering": "amsa",
                "h_function": "hapke2002",
            }
        ),
    ):
        r = lumaxlike.amsa(REFERENCE["w"], *geometry, params, backend=backend)
        # The closed-form phase functions' x^1.5 is x sqrt(x) since the reference was
        # made (a power's logarithm and exponential cost fit a third of its step): r
        # moved by at most ~2.2 eps relative (measured), so 4 eps here and the
        # inversions compared to their last bits in both backends.
        np.testing.assert_allclose(r, REFERENCE[f"r_{backend}_{name}"], rtol=4 * EPS, atol=0)
        result = lumaxlike.invert(
            REFERENCE[f"refl_{name}"], *geometry, params, solver=backend, refl_sigma=1e-3
        )
        fields = ("w", "status", "iterations", "residual", "sigma")
        expected = {field: REFERENCE[f"invert_{backend}_{name}_{field}"] for field in fields}
        assert_reproduces_invert(
            result, expected, REFERENCE[f"refl_{name}"], backend, name, last_bits=True
        )


# ---------------------------------------------------------------------------------------
# Outside numbers and independent formulas


@pytest.mark.parametrize("backend", ["jax", "numba"])
@pytest.mark.parametrize(
    "phase, incidence, emission, isis_radf",
    [(0.0, 0.0, 0.0, 0.158749), (60.0, 45.0, 30.0, 0.0911799)],
)
def test_imsa_with_hapke1981_h_matches_isis3_hapkehen(
    backend, phase, incidence, emission, isis_radf
):
    """USGS ISIS3 HapkeHen's unit test (isis/src/base/objs/HapkeHen/HapkeHen.truth in
    DOI-USGS/ISIS3): Wh = 0.52, Theta = 30 deg, Hg1 = 0.213, Hg2 = 1, no opposition
    effect. ISIS returns the radiance factor pi r; its Hg1 is b and Hg2 = (1 + c)/2, so
    c = 1; it uses the Hapke 1981 H-function and isotropic multiple scattering."""
    params = lumaxlike.HapkeParams(
        b=0.213,
        c=1.0,
        roughness=math.radians(30.0),
        multiple_scattering="imsa",
        h_function="hapke1981",
    )
    r = lumaxlike.amsa(
        0.52, *angles_to_vectors(incidence, emission, phase), params, backend=backend
    )
    # the truth file prints 6 significant digits: within half a unit of the last one
    half_unit = 0.5 * 10.0 ** (math.floor(math.log10(isis_radf)) - 5)
    np.testing.assert_allclose(math.pi * float(r), isis_radf, rtol=0, atol=half_unit)


def hapke_imsa_smooth(w, incidence, emission, azimuth, b, c, porosity_k, h_function):
    """Hapke's IMSA with porosity (Hapke 2008; 2012 eq. 12.55 without roughness and
    opposition effects), written independently: r = K w/(4 pi) mu0/(mu0 + mu)
    [p(g) + H(mu0/K) H(mu/K) - 1]."""
    mu0, mu = math.cos(incidence), math.cos(emission)
    cos_g = mu0 * mu + math.sin(incidence) * math.sin(emission) * math.cos(azimuth)
    p = (1 + c) / 2 * (1 - b * b) / (1 - 2 * b * cos_g + b * b) ** 1.5 + (1 - c) / 2 * (
        1 - b * b
    ) / (1 + 2 * b * cos_g + b * b) ** 1.5
    gamma = math.sqrt(1 - w)
    if h_function == "hapke1981":
        h = lambda x: (1 + 2 * x) / (1 + 2 * gamma * x)  # noqa: E731
    elif h_function == "exact":  # checked against a 30-digit quadrature in test_h_functions.py
        h = lambda x: float(lumaxlike.h_function(w, x, kind="exact"))  # noqa: E731
    else:
        r0 = (1 - gamma) / (1 + gamma)
        h = lambda x: 1 / (1 - w * x * (r0 + (1 - 2 * r0 * x) / 2 * math.log((1 + x) / x)))  # noqa: E731
    return (
        porosity_k
        * w
        / (4 * math.pi)
        * mu0
        / (mu0 + mu)
        * (p + h(mu0 / porosity_k) * h(mu / porosity_k) - 1)
    )


@pytest.mark.parametrize("h_function", ["hapke2002", "hapke1981", "exact"])
@pytest.mark.parametrize("porosity_k", [1.0, 1.35, 2.8])
@pytest.mark.parametrize("backend", ["jax", "numba"])
def test_imsa_with_porosity_matches_an_independent_formula(h_function, porosity_k, backend):
    params = lumaxlike.HapkeParams(
        b=0.3, c=0.6, porosity_k=porosity_k, multiple_scattering="imsa", h_function=h_function
    )
    for w, incidence, emission, azimuth in [
        (0.3, 0.4, 0.9, 0.5),
        (0.85, 1.1, 0.2, 2.5),
        (0.6, 0.0, 0.5, 0.0),
        (0.97, 0.7, 0.7, 3.0),
    ]:
        expected = hapke_imsa_smooth(
            w, incidence, emission, azimuth, 0.3, 0.6, porosity_k, h_function
        )
        vectors = lumaxlike.geometry_from_angles(incidence, emission, azimuth)
        np.testing.assert_allclose(
            float(lumaxlike.amsa(w, *vectors, params, backend=backend)), expected, rtol=1e-13
        )


@pytest.mark.parametrize("h_function", ["hapke2002", "hapke1981", "exact"])
def test_imsa_equals_amsa_without_odd_legendre_terms(h_function):
    """AMSA's P(mu), P-bar carry only odd Legendre terms: for c = 0 (and with Legendre
    coefficients whose odd terms vanish) AMSA is IMSA exactly."""
    geometry = random_geometry(300, np.random.default_rng(1))
    w = np.random.default_rng(2).uniform(0.05, 0.99, (300, 2))
    for extra in (
        {"b": 0.4, "c": 0.0},
        {"b": 0.4, "c": 0.5, "legendre": np.r_[1.0, 0.0, 0.5, 0.0, 0.2]},
    ):
        amsa = full_params(**extra, h_function=h_function, porosity_k=1.4)
        imsa = full_params(
            **extra, h_function=h_function, porosity_k=1.4, multiple_scattering="imsa"
        )
        np.testing.assert_allclose(
            lumaxlike.amsa(w, *geometry, amsa), lumaxlike.amsa(w, *geometry, imsa), rtol=1e-14
        )


@pytest.mark.parametrize("configuration", CONFIGURATIONS, ids=IDS)
def test_single_scattering_limit(configuration):
    """r(w)/w -> K/(4 pi) mu0e/(mu0e + mue) p(g) B_SH B_CB S as w -> 0: the multiple
    scattering term vanishes for every model (checked against the model at w = 1e-9)."""
    params = full_params(porosity_k=1.6, **configuration)
    geometry = random_geometry(50, np.random.default_rng(3))
    tiny = lumaxlike.amsa(np.full((50, 1), 1e-9), *geometry, params) / 1e-9
    small = lumaxlike.amsa(np.full((50, 1), 1e-5), *geometry, params) / 1e-5
    valid = np.isfinite(tiny)
    assert valid.sum() > 40
    # the multiple-scattering term is O(w): r/w differs from its limit by O(w)
    np.testing.assert_allclose(small[valid], tiny[valid], rtol=1e-4)
    assert np.all(np.abs(small[valid] / tiny[valid] - 1) > 1e-7)  # and it is there


def test_porosity_factor_from_filling_factor():
    """K(phi) = -ln(1 - 1.209 phi^(2/3)) / (1.209 phi^(2/3)) (Hapke 2008): K(0) = 1,
    K grows with phi; phi = 0.41 (a typical lunar regolith) gives K ~ 1.7."""
    assert lumaxlike.porosity_k_from_filling_factor(0.0) == 1.0
    values = [lumaxlike.porosity_k_from_filling_factor(phi) for phi in (0.01, 0.1, 0.3, 0.41, 0.6)]
    assert np.all(np.diff(values) > 0) and values[0] > 1.0
    x = 1.209 * 0.41 ** (2 / 3)
    assert lumaxlike.porosity_k_from_filling_factor(0.41) == pytest.approx(
        -math.log(1 - x) / x, rel=1e-15
    )
    assert 1.6 < values[3] < 1.8
    for bad in (-0.1, 0.76, np.nan, "0.4"):
        with pytest.raises(ValueError, match="filling_factor"):
            lumaxlike.porosity_k_from_filling_factor(bad)


@pytest.mark.parametrize(
    "field, value",
    [("multiple_scattering", "mimsa"), ("h_function", "chandrasekhar"), ("porosity_k", 0.9)],
)
def test_bad_configuration_is_refused_naming_the_field(field, value):
    with pytest.raises(ValueError, match=rf"HapkeParams\.{field}"):
        lumaxlike.HapkeParams(b=0.2, c=0.3, **{field: value})


# ---------------------------------------------------------------------------------------
# Backends, derivatives, precision


@pytest.mark.parametrize("configuration", CONFIGURATIONS, ids=IDS)
def test_backends_agree(configuration):
    params = full_params(porosity_k=1.3, **configuration)
    geometry = random_geometry(400, np.random.default_rng(4))
    w = np.random.default_rng(5).uniform(0.0, 1.0, (400, 3))
    r_jax = lumaxlike.amsa(w, *geometry, params, backend="jax")
    r_numba = lumaxlike.amsa(w, *geometry, params, backend="numba")
    np.testing.assert_array_equal(np.isnan(r_jax), np.isnan(r_numba))
    np.testing.assert_allclose(r_jax, r_numba, rtol=1e-12, atol=0)


@pytest.mark.parametrize("configuration", CONFIGURATIONS, ids=IDS)
def test_analytic_dr_dw_matches_finite_differences(configuration):
    params = full_params(porosity_k=1.3, **configuration)
    geometry = [
        jnp.asarray(g) for g in random_geometry(30, np.random.default_rng(6), max_tilt_deg=0.0)
    ]
    slope = jax.jit(jax.vmap(jax.grad(amsa_scalar), in_axes=(0, 0, 0, 0, None)))
    r = jax.jit(jax.vmap(amsa_scalar, in_axes=(0, 0, 0, 0, None)))
    for w in (0.05, 0.5, 0.95):
        ws = jnp.full(30, w)
        step = 1e-6
        central = (r(ws + step, *geometry, params) - r(ws - step, *geometry, params)) / (2 * step)
        # central difference: truncation ~ step^2 r''' ~ 1e-12 relative, rounding ~ 1e-16/1e-6
        np.testing.assert_allclose(slope(ws, *geometry, params), central, rtol=3e-8)


@pytest.mark.parametrize("configuration", CONFIGURATIONS, ids=IDS)
@pytest.mark.parametrize("backend", ["jax", "numba"])
def test_float32_is_finite_where_the_geometry_is_valid(configuration, backend):
    params = full_params(porosity_k=1.3, **configuration)
    geometry = random_geometry(300, np.random.default_rng(7))
    w = np.random.default_rng(8).uniform(0.0, 1.0, (300, 2)).astype(np.float32)
    r64 = lumaxlike.amsa(w.astype(np.float64), *geometry, params, backend=backend)
    r32 = lumaxlike.amsa(w, *(g.astype(np.float32) for g in geometry), params, backend=backend)
    assert r32.dtype == np.float32
    valid = np.isfinite(r64)
    assert np.all(np.isfinite(r32[valid]))
    np.testing.assert_allclose(
        r32[valid], r64[valid], rtol=1e-4, atol=1e-6
    )  # float32 rounding of the inputs


# ---------------------------------------------------------------------------------------
# Every model inverts; fit recovers K


@pytest.mark.parametrize("configuration", CONFIGURATIONS[1:], ids=IDS[1:])
def test_every_model_inverts_with_both_solvers(configuration):
    assert_both_solvers_recover_w(full_params(porosity_k=1.5, **configuration), seed=9, n_bands=4)


@pytest.mark.parametrize("solver", SOLVERS)
def test_fit_recovers_the_porosity_factor(solver):
    """K from multi-angle observations of an IMSA surface, with w (noise-free)."""
    truth = lumaxlike.HapkeParams(b=0.3, c=0.5, porosity_k=1.8, multiple_scattering="imsa")
    start = lumaxlike.HapkeParams(b=0.3, c=0.5, porosity_k=1.2, multiple_scattering="imsa")
    rng = np.random.default_rng(10)
    incidence = np.radians(rng.uniform(0, 70, 16))
    emission = np.radians(rng.uniform(0, 70, 16))
    azimuth = np.radians(rng.uniform(0, 180, 16))
    geometry = lumaxlike.geometry_from_angles(incidence, emission, azimuth)
    w_true = rng.uniform(0.1, 0.9, (20, 2))
    refl = np.stack(
        [lumaxlike.amsa(w_true, *(g[k] for g in geometry), truth) for k in range(16)], axis=-1
    )
    result = lumaxlike.fit(refl, *geometry, start, free=("w", "porosity_k"), solver=solver)
    assert np.all(result.status == lumaxlike.Status.CONVERGED)
    np.testing.assert_allclose(result["porosity_k"], 1.8, rtol=1e-6)
    np.testing.assert_allclose(result["w"], w_true, rtol=1e-6)


def test_fit_with_the_exact_h_function_recovers_k_with_both_solvers():
    truth = lumaxlike.HapkeParams(b=0.3, c=0.5, porosity_k=1.8, h_function="exact")
    start = lumaxlike.HapkeParams(b=0.3, c=0.5, porosity_k=1.2, h_function="exact")
    rng = np.random.default_rng(11)
    geometry = lumaxlike.geometry_from_angles(
        np.radians(rng.uniform(0, 70, 12)),
        np.radians(rng.uniform(0, 70, 12)),
        np.radians(rng.uniform(0, 180, 12)),
    )
    w_true = rng.uniform(0.1, 0.9, (6, 2))
    refl = np.stack(
        [lumaxlike.amsa(w_true, *(g[k] for g in geometry), truth) for k in range(12)], axis=-1
    )
    # w starts given, not from `invert` (whose exact-H programs, compiled only for this
    # start, took a third of the test's time; test_every_model_inverts covers them)
    w_start = {"w": np.clip(w_true + 0.05, 0.01, 0.99)}
    results = {
        solver: lumaxlike.fit(
            refl, *geometry, start, free=("w", "porosity_k"), solver=solver, start=w_start
        )
        for solver in SOLVERS
    }
    for result in results.values():
        assert np.all(result.status == lumaxlike.Status.CONVERGED)
        np.testing.assert_allclose(result["porosity_k"], 1.8, rtol=1e-6)
        np.testing.assert_allclose(result["w"], w_true, rtol=0, atol=1e-6)
    np.testing.assert_allclose(
        results["numba"]["porosity_k"], results["jax"]["porosity_k"], rtol=1e-8
    )
