"""`unmix` with per-endmember phase functions (`Endmembers.phase`): the mixture's phase
function is sum_j f_j w_j p_j / w_mix (Hapke 2012, ch. 10), per band and pixel.

The shared case of test_unmix.py (4 endmembers, 40 bands, 40 pixels, some with the
horizon problem) is reused, so the JAX solver compiles once here (per-band phase
functions) and the numba kernels not at all beyond the phase-table kernel.
"""

import dataclasses
import functools

import jax
import numpy as np
import pytest

import lumaxlike
from lumaxlike._model._backends import numba_equations
from lumaxlike._model.jax_model import pixel_terms as jax_pixel_terms
from lumaxlike._unmix import unmix as unmix_module
from lumaxlike._unmix.mixing import cross_section_fractions, cross_section_per_mass, mixed_albedo
from lumaxlike._unmix.numba_one_step import _normal_equations_mixed
from lumaxlike._unmix.phase import phase_table

from .helpers import SOLVERS
from .test_unmix import ENDMEMBERS, GEOMETRY, MASS, PARAMS, REFL, assert_recovers, shared_result

Status = lumaxlike.Status
N_END, N_BANDS = ENDMEMBERS.albedo.shape
N_COEFFICIENTS = 12  # b_0..b_11


def band_legendre(seed):
    """Legendre coefficients per endmember and band, (4, 40, 12): double Henyey-Greenstein
    series b_n = (2n+1) b^n (times c for odd n), truncated, with b and c varying smoothly
    over the bands and from one endmember to the next (back- and forward-scattering)."""
    rng = np.random.default_rng(seed)
    band = np.linspace(0.0, 1.0, N_BANDS)
    b = rng.uniform(0.15, 0.45, (N_END, 1)) + 0.1 * band
    c = rng.uniform(-0.6, 0.9, (N_END, 1)) - 0.2 * band
    n = np.arange(N_COEFFICIENTS)
    odd = np.where(n % 2 == 1, c[..., None], 1.0)
    return (2 * n + 1) * b[..., None] ** n * odd


LEGENDRE = band_legendre(seed=11)
PHASED = dataclasses.replace(ENDMEMBERS, phase=LEGENDRE)


def hand_mixed_reflectance(mass, legendre):
    """r of every pixel and band by `lumaxlike.amsa` with a `HapkeParams` whose Legendre
    coefficients are mixed here, b_n,mix = sum_j f_j w_j b_n,j / w_mix (independent of
    the solvers' mixing of the phase terms)."""
    per_mass = cross_section_per_mass(
        ENDMEMBERS.density, ENDMEMBERS.grain_size, ENDMEMBERS.extinction_efficiency
    )
    f = cross_section_fractions(mass, per_mass)
    w = mixed_albedo(f, ENDMEMBERS.albedo)
    refl = np.empty_like(w)
    for pixel in range(w.shape[0]):
        geometry = [g[pixel] for g in GEOMETRY]
        for k in range(N_BANDS):
            weighted = f[pixel] * ENDMEMBERS.albedo[:, k]
            mixed = weighted @ legendre[:, k] / w[pixel, k]
            params = dataclasses.replace(PARAMS, legendre=mixed)
            refl[pixel, k] = lumaxlike.amsa(
                w[pixel, k : k + 1], *geometry, params, backend="numba"
            )[0]
    return refl


PHASED_REFL = hand_mixed_reflectance(MASS, LEGENDRE)


@functools.cache
def phased_result(solver):
    return lumaxlike.unmix(PHASED_REFL, *GEOMETRY, PHASED, PARAMS, solver)


@pytest.mark.parametrize("solver", SOLVERS)
def test_mixture_of_different_phase_functions_recovered(solver):
    result = phased_result(solver)
    assert_recovers(result, MASS, PHASED_REFL)
    valid = np.all(np.isfinite(PHASED_REFL), axis=-1)
    # the model fits to its convergence (the step of f below 1e-10): r within ~1e-12 each
    assert np.all(result.residual_norm[valid] < 1e-10)
    # the phase functions matter here: with PARAMS's for all, the fit is off
    shared = lumaxlike.unmix(PHASED_REFL, *GEOMETRY, ENDMEMBERS, PARAMS, "numba")
    assert np.nanmax(np.abs(shared.fractions - MASS)) > 1e-3


def test_solvers_agree_with_per_endmember_phase_functions():
    numba, jax = phased_result("numba"), phased_result("jax")
    np.testing.assert_array_equal(numba.status, jax.status)
    np.testing.assert_array_equal(numba.at_bound, jax.at_bound)
    np.testing.assert_allclose(numba.fractions, jax.fractions, atol=1e-8, rtol=0)


def test_accelerator_layout_gives_the_cpu_layouts_result_with_own_phases(monkeypatch):
    """`test_unmix.test_accelerator_layout_gives_the_cpu_layouts_result` with the
    endmembers' own phase functions (their terms laid out as the spectra)."""
    monkeypatch.setattr(unmix_module, "bands_last_on", lambda platform: False)
    first = lumaxlike.unmix(PHASED_REFL, *GEOMETRY, PHASED, PARAMS, "jax")
    last = phased_result("jax")
    np.testing.assert_array_equal(first.status, last.status)
    # the step tolerance is 1e-10
    np.testing.assert_allclose(first.fractions, last.fractions, atol=1e-10, rtol=0)


def test_equal_phase_functions_reproduce_the_shared_result():
    same = dataclasses.replace(
        ENDMEMBERS, phase=(PARAMS,) * N_END
    )  # the closed form of PARAMS for each
    result = lumaxlike.unmix(REFL, *GEOMETRY, same, PARAMS, "numba")
    shared = shared_result("numba", "one_step")
    np.testing.assert_array_equal(result.status, shared.status)
    np.testing.assert_array_equal(result.at_bound, shared.at_bound)
    # the same optimum, reached along sums that round differently (tol 1e-10 on the step)
    np.testing.assert_allclose(result.fractions, shared.fractions, atol=1e-10, rtol=0)


def test_phase_table_is_the_models_phase_terms():
    # each closed form (with the mixture's roughness and shadow hiding) against the JAX
    # model's own `PixelTerms` of a HapkeParams carrying that phase function
    kinds = (
        dataclasses.replace(PARAMS, b=0.5, c=-0.3),
        lumaxlike.HapkeParams(b=0.0, c=0.0, phase_function="hg", asymmetry=-0.35),
        lumaxlike.HapkeParams(b=0.0, c=0.0, phase_function="cornette_shanks", asymmetry=0.25),
        lumaxlike.HapkeParams(b=0.0, c=0.0, legendre=LEGENDRE[0, 0]),
    )
    endmembers = dataclasses.replace(ENDMEMBERS, phase=kinds)
    table = phase_table(*GEOMETRY, PARAMS, endmembers.phase)
    assert table.shape == (40, N_END, 1, 4)
    for j, kind in enumerate(kinds):
        full = dataclasses.replace(
            kind,
            roughness=PARAMS.roughness,
            hs=PARAMS.hs,
            bs0=PARAMS.bs0,
            hc=PARAMS.hc,
            bc0=PARAMS.bc0,
        )
        terms = jax.vmap(jax_pixel_terms, in_axes=(0, 0, 0, None))(*GEOMETRY, full)
        valid = np.isfinite(terms.scale)  # invalid geometry: not used by the solvers
        assert valid.sum() > 30
        expected = np.stack([terms.phase_sh, terms.p_mu0e, terms.p_mue, terms.p_bar], axis=-1)
        np.testing.assert_allclose(table[valid, j, 0], expected[valid], rtol=1e-13, atol=1e-15)


def test_mixed_phase_derivatives_match_finite_differences():
    """dr_k/df_j of the numba normal equations (read as J^T f with a one-hot band weight
    and zero observations: gradient = r_k dr_k/df, cost = r_k^2) against central
    differences of r_k, the phase function changing with the fractions."""
    pixel = int(np.argmax(np.all(np.isfinite(PHASED_REFL), axis=-1)))
    geometry = [g[pixel] for g in GEOMETRY]
    legendre, use_legendre = PARAMS.legendre_coefficients()
    terms = numba_equations.pixel_terms(
        *geometry, *(float(v) for v in PARAMS.scalars()), legendre, use_legendre
    )
    phase = phase_table(*(g[pixel : pixel + 1] for g in GEOMETRY), PARAMS, PHASED.phase)[0]
    x = np.array([0.1, 0.4, 0.3, 0.2])
    hessian, gradient, column = np.empty((N_END, N_END)), np.empty(N_END), np.empty(N_END)

    def band(k, fractions):
        weights = np.zeros(N_BANDS)
        weights[k] = 1.0
        cost = _normal_equations_mixed(
            fractions,
            terms,
            ENDMEMBERS.albedo,
            phase,
            np.zeros(N_BANDS),
            weights,
            hessian,
            gradient,
            column,
        )
        return np.sqrt(cost), gradient / np.sqrt(cost)

    step = 1e-6
    for k in (0, 17, 39):
        r, slope = band(k, x)
        numeric = [
            (band(k, x + step * e)[0] - band(k, x - step * e)[0]) / (2 * step)
            for e in np.eye(N_END)
        ]
        np.testing.assert_allclose(slope, numeric, rtol=1e-7)
        # without the phase functions' change with f_j, the slopes would be w_jk dr/dw
        own_phase_part = slope / ENDMEMBERS.albedo[:, k]
        assert np.ptp(own_phase_part) > 1e-3 * np.abs(own_phase_part).max()


@pytest.mark.parametrize(
    "phase, match",
    [
        (np.ones((3, 5)), r"phase as Legendre coefficients must have shape"),
        (np.ones((4, 7, 5)), r"phase as Legendre coefficients must have shape"),
        (np.ones((4, 17)), r"phase as Legendre coefficients must have shape"),
        (
            np.where(np.arange(5) == 2, np.nan, 1.0) * np.ones((4, 5)),
            r"phase holds NaN or inf \(endmember 0\)",
        ),
        (np.full((4, 3), 2.0), r"phase: b_0 must be 1"),
        ((PARAMS,) * 3, r"phase as HapkeParams must be a sequence of 4 HapkeParams"),
        (PARAMS, r"phase must hold one phase function per endmember"),
        (np.array([["a"]] * 4), r"phase must be HapkeParams or numeric"),
    ],
)
def test_endmembers_refuse_bad_phase(phase, match):
    with pytest.raises(ValueError, match=r"Endmembers\." + match):
        dataclasses.replace(ENDMEMBERS, phase=phase)


def test_two_step_refuses_per_endmember_phase_functions():
    with pytest.raises(
        ValueError, match=r"route='two_step' cannot unmix .*endmembers\.phase.*route='one_step'"
    ):
        lumaxlike.unmix(PHASED_REFL, *GEOMETRY, PHASED, PARAMS, "numba", route="two_step")


def test_per_endmember_phase_is_stored_read_only():
    assert PHASED.phase.shape == (N_END, N_BANDS, 16) and not PHASED.phase.flags.writeable
    np.testing.assert_array_equal(PHASED.phase[..., :N_COEFFICIENTS], LEGENDRE)
    assert np.all(PHASED.phase[..., N_COEFFICIENTS:] == 0.0)
    assert ENDMEMBERS.phase is None


@pytest.mark.parametrize(
    "phase",
    [
        LEGENDRE,
        tuple(
            dataclasses.replace(PARAMS, b=b, c=c)
            for b, c in [(0.2, 0.8), (0.5, -0.4), (0.35, 0.1), (0.6, 0.5)]
        ),
    ],
)
def test_endmembers_from_reflectance_with_their_own_phase_functions(phase):
    # laboratory spectra of each endmember alone, at one geometry, with its own phase function
    incidence, emission, azimuth = 0.5, 0.2, 0.0
    geometry = lumaxlike.geometry_from_angles(incidence, emission, azimuth)
    checked = dataclasses.replace(ENDMEMBERS, phase=phase).phase
    refl = np.empty((N_END, N_BANDS))
    for j in range(N_END):
        for k in range(N_BANDS):
            own = (
                dataclasses.replace(PARAMS, b=phase[j].b, c=phase[j].c)
                if isinstance(phase, tuple)
                else dataclasses.replace(PARAMS, legendre=phase[j, k])
            )
            refl[j, k] = lumaxlike.amsa(
                ENDMEMBERS.albedo[j, k : k + 1], *geometry, own, backend="numba"
            )[0]
    built = lumaxlike.Endmembers.from_reflectance(
        refl,
        incidence,
        emission,
        azimuth,
        PARAMS,
        density=ENDMEMBERS.density,
        grain_size=ENDMEMBERS.grain_size,
        phase=phase,
    )
    np.testing.assert_allclose(built.albedo, ENDMEMBERS.albedo, atol=1e-9)
    if isinstance(phase, tuple):
        assert built.phase == checked
    else:
        np.testing.assert_array_equal(built.phase, checked)
