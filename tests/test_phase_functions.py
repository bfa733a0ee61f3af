"""Single Henyey-Greenstein and Cornette-Shanks phase functions (`phase_function` "hg",
"cornette_shanks", parameter `asymmetry`).

Against exact values, refmod's Cornette-Shanks code, the double Henyey-Greenstein's lobes,
a Gauss-Legendre projection of the closed forms (their Legendre coefficients), the two
backends against each other, and recovery by `invert` and `fit` with both solvers.
"""

import json
import math

import jax
import jax.numpy as jnp
import numpy as np
import pytest

import lumaxlike
from lumaxlike import read_provenance
from lumaxlike._cli import main
from lumaxlike._io import read_cube, result_paths
from lumaxlike._model import equations
from lumaxlike._model.family import ModelKey, jax_equations_for, numba_equations_for
from lumaxlike._model.jax_model import amsa_scalar
from lumaxlike._provenance import Provenance, make_provenance

from .helpers import FULL_PARAMS, SOLVERS, assert_both_solvers_recover_w, random_geometry
from .test_io import make_scene, write_scene

PHASES = ("hg", "cornette_shanks")
CLOSED_FORMS = {"hg": equations.single_hg_phase, "cornette_shanks": equations.cornette_shanks_phase}
COEFFICIENTS = {
    "hg": equations.single_hg_legendre_coefficient,
    "cornette_shanks": equations.cornette_shanks_legendre_coefficient,
}
ASYMMETRIES = (-0.7, -0.3, 0.0, 0.25, 0.6)
# Exact for polynomials of degree < 200; the closed forms are analytic on [-1, 1], their
# nearest pole at cos g = -(1 + xi^2)/(2 xi): error ~ (1.43)^-200 < 1e-30 for |xi| <= 0.7.
# (More nodes are worse: NumPy's nodes and weights lose accuracy, 2e-13 at 400.)
NODES, WEIGHTS = np.polynomial.legendre.leggauss(100)


def params(phase_function, asymmetry, **changes):
    fields = {
        name: getattr(FULL_PARAMS, name)
        for name in ("b", "c", "roughness", "hs", "bs0", "hc", "bc0")
    }
    return lumaxlike.HapkeParams(
        **{**fields, "phase_function": phase_function, "asymmetry": asymmetry, **changes}
    )


def closed_form(phase_function, cos_g, asymmetry):
    return np.array(
        [CLOSED_FORMS[phase_function](float(x), 0.0, 0.0, asymmetry) for x in np.atleast_1d(cos_g)]
    )


# ---------------------------------------------------------------------------------------
# The closed forms


@pytest.mark.parametrize("phase_function", PHASES)
@pytest.mark.parametrize("asymmetry", ASYMMETRIES)
def test_closed_forms_are_normalised(phase_function, asymmetry):
    """(1/2) int_{-1}^{1} p d(cos g) = 1 (the integral over the sphere is 4 pi)."""
    integral = 0.5 * np.sum(WEIGHTS * closed_form(phase_function, NODES, asymmetry))
    assert abs(integral - 1.0) < 1e-13


def test_closed_forms_against_exact_values():
    """xi = -1/2 (back-scattering): HG p(0) = (3/4)/(1/8) = 6, p(180 deg) = (3/4)/(27/8) =
    2/9; Cornette-Shanks p(0) = 3/2 (3/4)/(9/4) 2/(1/8) = 8, p(180 deg) = 8/27,
    p(90 deg) = 1/2 (4/5)^1.5."""
    for phase_function, cos_g, expected in [
        ("hg", 1.0, 6.0),
        ("hg", -1.0, 2.0 / 9.0),
        ("hg", 0.0, 0.75 / 1.25**1.5),
        ("cornette_shanks", 1.0, 8.0),
        ("cornette_shanks", -1.0, 8.0 / 27.0),
        ("cornette_shanks", 0.0, 0.5 * 0.8**1.5),
    ]:
        assert closed_form(phase_function, cos_g, -0.5)[0] == pytest.approx(expected, rel=1e-15)


def refmod_cornette_shanks(cos_g, xi):
    """refmod's Cornette-Shanks function as written in its source
    (arunoruto/reflectance-models, refmod/hapke/functions/phase.py, `cornette_shanks`),
    evaluated by refmod on the cosine of the phase angle g (refmod/hapke/amsa.py passes
    cos_alpha of the incidence and emission directions). Its denominator has
    -2 xi cos g, so refmod's xi > 0 back-scatters: refmod's xi is lumaxlike's -asymmetry
    (lumaxlike keeps Cornette & Shanks' own sign, the mean cosine of the scattering angle)."""
    return (
        1.5 * (1 - xi**2) / (2 + xi**2) * (1 + cos_g**2) / np.power(1 + xi**2 - 2 * xi * cos_g, 1.5)
    )


@pytest.mark.parametrize("asymmetry", ASYMMETRIES)
def test_cornette_shanks_matches_refmod_with_its_sign_of_xi(asymmetry):
    cos_g = np.linspace(-1.0, 1.0, 41)
    np.testing.assert_allclose(
        closed_form("cornette_shanks", cos_g, asymmetry),
        refmod_cornette_shanks(cos_g, -asymmetry),
        rtol=1e-14,
    )


@pytest.mark.parametrize("backend", ["jax", "numba"])
def test_single_hg_is_one_lobe_of_the_double_hg(backend):
    """HG(xi) = DHG(b = -xi, c = 1) for xi < 0 and DHG(b = xi, c = -1) for xi > 0, in p(g)
    and in the Legendre coefficients of AMSA's P(mu), P-bar: the whole model agrees."""
    rng = np.random.default_rng(20)
    geometry = random_geometry(200, rng)
    w = rng.uniform(0.05, 0.95, (200, 2))
    for asymmetry, b, c in [(-0.45, 0.45, 1.0), (0.3, 0.3, -1.0)]:
        single = params("hg", asymmetry)
        double = params("dhg", 0.0, b=b, c=c)
        np.testing.assert_allclose(
            lumaxlike.amsa(w, *geometry, single, backend=backend),
            lumaxlike.amsa(w, *geometry, double, backend=backend),
            rtol=1e-14,
        )
        for n in range(16):
            assert equations.single_hg_legendre_coefficient(
                n, 0.0, 0.0, asymmetry
            ) == pytest.approx(equations.hg_legendre_coefficient(n, b, c, 0.0), rel=1e-15, abs=0.0)


# ---------------------------------------------------------------------------------------
# Legendre coefficients


@pytest.mark.parametrize("phase_function", PHASES)
@pytest.mark.parametrize("asymmetry", ASYMMETRIES)
def test_legendre_coefficients_match_a_projection_of_the_closed_form(phase_function, asymmetry):
    """b_n = (2n+1)/2 int p(x) P_n(x) dx by 100-point Gauss-Legendre quadrature."""
    p = closed_form(phase_function, NODES, asymmetry)
    for n in range(16):
        projected = (
            (2 * n + 1) / 2 * np.sum(WEIGHTS * p * np.polynomial.legendre.Legendre.basis(n)(NODES))
        )
        assert abs(COEFFICIENTS[phase_function](n, 0.0, 0.0, asymmetry) - projected) < 1e-12, n


@pytest.mark.parametrize("phase_function", ["dhg", *PHASES])
@pytest.mark.parametrize("backend", ["jax", "numba"])
def test_backends_bind_the_configured_phase_function(phase_function, backend):
    """The retargeted equations of a configuration use its closed form and coefficients."""
    equations_for = jax_equations_for if backend == "jax" else numba_equations_for
    namespace = equations_for(ModelKey(phase_function=phase_function))
    b, c, asymmetry = 0.35, 0.4, -0.35
    for cos_g in (-0.9, 0.1, 0.8):
        expected = (
            equations.double_hg_phase if phase_function == "dhg" else CLOSED_FORMS[phase_function]
        )(cos_g, b, c, asymmetry)
        value = namespace.phase_function(cos_g, b, c, asymmetry, np.zeros(16), False)
        assert float(value) == pytest.approx(expected, rel=1e-14)


# ---------------------------------------------------------------------------------------
# The model


@pytest.mark.slow
@pytest.mark.parametrize("phase_function", PHASES)
@pytest.mark.parametrize("multiple_scattering", ["amsa", "imsa"])
def test_backends_agree(phase_function, multiple_scattering):
    model = params(phase_function, -0.4, multiple_scattering=multiple_scattering, porosity_k=1.3)
    rng = np.random.default_rng(21)
    geometry = random_geometry(300, rng)
    w = rng.uniform(0.0, 1.0, (300, 3))
    r_jax = lumaxlike.amsa(w, *geometry, model, backend="jax")
    r_numba = lumaxlike.amsa(w, *geometry, model, backend="numba")
    np.testing.assert_array_equal(np.isnan(r_jax), np.isnan(r_numba))
    assert np.isfinite(r_jax).mean() > 0.5
    np.testing.assert_allclose(r_jax, r_numba, rtol=1e-12, atol=0)


@pytest.mark.parametrize("phase_function", PHASES)
@pytest.mark.parametrize("asymmetry", [0.0, -0.4, 0.5])
def test_derivative_in_the_asymmetry_matches_finite_differences(phase_function, asymmetry):
    """dr/dxi by autodiff (what `fit` uses, both solvers) against a central difference,
    also at xi = 0 where the coefficients' powers of xi start."""
    geometry = [jnp.asarray(g) for g in lumaxlike.geometry_from_angles(0.6, 0.3, 2.0)]

    def r(xi):
        return amsa_scalar(jnp.float64(0.7), *geometry, params(phase_function, xi, roughness=0.3))

    step = 1e-6
    central = (float(r(asymmetry + step)) - float(r(asymmetry - step))) / (2 * step)
    assert float(jax.grad(r)(jnp.float64(asymmetry))) == pytest.approx(central, rel=1e-8)
    assert abs(central) > 1e-4


@pytest.mark.parametrize("phase_function", PHASES)
def test_imsa_equals_amsa_only_for_an_isotropic_phase_function(phase_function):
    """HG with xi = 0 is isotropic: its b_n vanish for n >= 1, so AMSA is IMSA. Any
    xi != 0 gives odd b_n != 0 (Cornette-Shanks has b_2 = 1/2 even at xi = 0, but no odd
    terms: AMSA = IMSA there too); for xi != 0 the two differ."""
    rng = np.random.default_rng(22)
    geometry = random_geometry(300, rng)
    w = rng.uniform(0.05, 0.99, (300, 2))

    def both(asymmetry):
        return [
            lumaxlike.amsa(
                w,
                *geometry,
                params(phase_function, asymmetry, multiple_scattering=m),
                backend="numba",
            )
            for m in ("amsa", "imsa")
        ]

    amsa, imsa = both(0.0)
    np.testing.assert_allclose(amsa, imsa, rtol=1e-14)
    for asymmetry in (-0.3, 0.2):
        amsa, imsa = both(asymmetry)
        valid = np.isfinite(amsa)
        assert np.max(np.abs(amsa[valid] / imsa[valid] - 1.0)) > 1e-3


@pytest.mark.slow
@pytest.mark.parametrize("phase_function", PHASES)
def test_every_phase_function_inverts_with_both_solvers(phase_function):
    assert_both_solvers_recover_w(params(phase_function, -0.35, porosity_k=1.2), seed=23)


@pytest.mark.slow
@pytest.mark.parametrize("phase_function", PHASES)
@pytest.mark.parametrize("solver", SOLVERS)
def test_fit_recovers_the_asymmetry(phase_function, solver):
    """xi from multi-angle observations, with w (noise-free)."""
    truth = lumaxlike.HapkeParams(b=0.0, c=0.0, phase_function=phase_function, asymmetry=-0.4)
    start = lumaxlike.HapkeParams(b=0.0, c=0.0, phase_function=phase_function, asymmetry=-0.1)
    rng = np.random.default_rng(24)
    geometry = lumaxlike.geometry_from_angles(
        *(np.radians(rng.uniform(0, high, 16)) for high in (70, 70, 180))
    )
    w_true = rng.uniform(0.1, 0.9, (10, 2))
    refl = np.stack(
        [lumaxlike.amsa(w_true, *(g[k] for g in geometry), truth) for k in range(16)], axis=-1
    )
    result = lumaxlike.fit(refl, *geometry, start, free=("w", "asymmetry"), solver=solver)
    assert np.all(result.status == lumaxlike.Status.CONVERGED)
    np.testing.assert_allclose(result["asymmetry"], -0.4, rtol=1e-6)
    np.testing.assert_allclose(result["w"], w_true, rtol=1e-6)


# ---------------------------------------------------------------------------------------
# Refusals, record


def test_bad_phase_configuration_is_refused_naming_the_fields():
    with pytest.raises(ValueError, match="phase_function='mie'"):
        lumaxlike.HapkeParams(b=0.2, c=0.3, phase_function="mie")
    for asymmetry in (1.0, -1.0, math.nan):
        with pytest.raises(ValueError, match="asymmetry"):
            lumaxlike.HapkeParams(b=0.2, c=0.3, phase_function="hg", asymmetry=asymmetry)
    with pytest.raises(ValueError, match="legendre.*phase_function='cornette_shanks'"):
        lumaxlike.HapkeParams(
            b=0.2, c=0.3, phase_function="cornette_shanks", legendre=np.r_[1.0, 0.3]
        )


def test_fit_refuses_a_parameter_the_phase_function_does_not_use():
    geometry = lumaxlike.geometry_from_angles(
        np.radians([10.0, 30.0, 50.0]), np.radians([0.0, 20.0, 40.0]), 0.0
    )
    refl = np.full((1, 3), 0.05)
    with pytest.raises(ValueError, match="b is free but params.phase_function='hg'"):
        lumaxlike.fit(
            refl,
            *geometry,
            lumaxlike.HapkeParams(b=0.2, c=0.3, phase_function="hg"),
            free=("w", "b"),
        )
    with pytest.raises(ValueError, match="asymmetry is free but params.phase_function='dhg'"):
        lumaxlike.fit(refl, *geometry, lumaxlike.HapkeParams(b=0.2, c=0.3), free=("w", "asymmetry"))


def test_provenance_records_the_phase_function_and_reads_older_records():
    model = lumaxlike.HapkeParams(b=0.2, c=0.3, phase_function="cornette_shanks", asymmetry=-0.25)
    record = make_provenance(
        params=[model],
        units="r",
        solver="numba",
        tol=None,
        max_iter=None,
        refl_sigma=None,
        dtype=np.float64,
        command="test",
    )
    attrs = record.attrs()
    assert json.loads(attrs["lumaxlike_param_asymmetry"]) == -0.25
    assert record.model["phase_function"] == "Cornette-Shanks 1992"
    assert Provenance.from_attrs(attrs).params == (model,)
    default = make_provenance(
        params=[lumaxlike.HapkeParams(b=0.2, c=0.3)],
        units="r",
        solver="numba",
        tol=None,
        max_iter=None,
        refl_sigma=None,
        dtype=np.float64,
        command="test",
    ).attrs()
    older = {key: value for key, value in default.items() if key != "lumaxlike_param_asymmetry"}
    (params_read,) = Provenance.from_attrs(older).params
    assert (params_read.phase_function, params_read.asymmetry) == ("dhg", 0.0)


def test_phase_choice_goes_through_the_cli_and_is_reproduced(tmp_path, capsys):
    """--phase and --asymmetry reach the solver, are recorded, and --params-from reruns them."""
    cube, obs, dtm = write_scene(tmp_path, make_scene(bands=2))
    first = tmp_path / "hg.tif"
    assert (
        main(
            [
                "invert",
                cube,
                "--geometry",
                obs,
                "--dtm",
                dtm,
                "--units",
                "radf",
                "--phase",
                "hg",
                "--asymmetry",
                "-0.3",
                "--out",
                first,
                "--no-progress",
            ]
        )
        == 0
    ), capsys.readouterr().err
    record = read_provenance(first)
    assert {(p.phase_function, p.asymmetry) for p in record.params} == {("hg", -0.3)}
    assert record.model["phase_function"] == "single Henyey-Greenstein"
    again = tmp_path / "again.tif"
    assert main(["invert", cube, "--params-from", first, "--out", again, "--no-progress"]) == 0, (
        capsys.readouterr().err
    )
    assert (
        read_cube(result_paths(again)["w"])[0].tobytes()
        == read_cube(result_paths(first)["w"])[0].tobytes()
    )
    assert (
        main(
            [
                "invert",
                cube,
                "--geometry",
                obs,
                "--units",
                "radf",
                "--asymmetry",
                "1.5",
                "--out",
                tmp_path / "bad.tif",
                "--no-progress",
            ]
        )
        == 2
    )
    assert "--asymmetry 1.5 is outside its valid range" in capsys.readouterr().err
