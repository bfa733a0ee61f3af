"""`unmix`: intimate-mixture unmixing by both routes and both solvers.

Shapes are kept to one (pixels, bands, endmembers) for the JAX solver (one compile of its
one-step programme); the numba kernels take any library size without recompiling. The
two-step route with solver="jax" is `invert(solver="jax")` followed by the same numba
w-space step as with solver="numba": it is checked as that composition
(`test_two_step_jax_is_jax_invert_then_the_numba_step`), JAX invert itself being checked
against numba in test_invert.py, rather than by compiling a JAX inversion here.
"""

import collections
import functools
import importlib

import numpy as np
import pytest
import scipy.optimize

import lumaxlike
from lumaxlike._model import jax_executables
from lumaxlike._unmix import unmix as unmix_module
from lumaxlike._unmix.mixing import (
    cross_section_fractions,
    cross_section_per_mass,
    mass_fraction_jacobian,
    mass_fractions,
    mixed_albedo,
    pixel_mass_fractions,
)
from lumaxlike._unmix.numba_unmix import two_step_numba
from lumaxlike._unmix.simplex_qp import max_qp_steps

from .helpers import SOLVERS, random_geometry

ROUTES = ("one_step", "two_step")
PARAMS = lumaxlike.HapkeParams(b=0.3, c=0.4, roughness=0.3, hs=0.06, bs0=0.9)
Status = lumaxlike.Status


def library(n_end, n_bands, seed, names=None):
    """Smooth, distinct albedo spectra (Gaussian bands on a sloped continuum) in (0.05, 0.95)."""
    rng = np.random.default_rng(seed)
    wavelength = np.linspace(0.0, 1.0, n_bands)
    albedo = np.empty((n_end, n_bands))
    for j in range(n_end):
        continuum = rng.uniform(0.5, 0.9) + rng.uniform(-0.2, 0.2) * wavelength
        depth, centre, width = rng.uniform(0.2, 0.4), rng.uniform(0.1, 0.9), rng.uniform(0.08, 0.2)
        albedo[j] = continuum - depth * np.exp(-(((wavelength - centre) / width) ** 2))
    return lumaxlike.Endmembers(
        names=names or tuple(f"m{j}" for j in range(n_end)),
        albedo=np.clip(albedo, 0.05, 0.95),
        density=rng.uniform(2.5, 4.5, n_end),
        grain_size=rng.uniform(20.0, 120.0, n_end),
    )


def scene(endmembers, n_pixels, seed, absent=0):
    """Random geometry and mass fractions (the first `absent` endmember missing from the
    first half of the pixels); returns (geometry, mass, noise-free refl)."""
    rng = np.random.default_rng(seed)
    geometry = random_geometry(n_pixels, rng)
    mass = rng.dirichlet(np.ones(endmembers.n_endmembers), n_pixels)
    mass[: n_pixels // 2, :absent] = 0.0
    mass /= mass.sum(axis=-1, keepdims=True)
    per_mass = cross_section_per_mass(
        endmembers.density, endmembers.grain_size, endmembers.extinction_efficiency
    )
    w = mixed_albedo(cross_section_fractions(mass, per_mass), endmembers.albedo)
    return geometry, mass, lumaxlike.amsa(w, *geometry, PARAMS, backend="numba")


# (solver, route) pairs that run for real here; ("jax", "two_step") is checked as a composition
SOLVER_ROUTES = [("numba", "one_step"), ("jax", "one_step"), ("numba", "two_step")]

# The shared case: 4 endmembers, 40 bands, 40 pixels (some with the horizon problem).
ENDMEMBERS = library(4, 40, seed=1)
GEOMETRY, MASS, REFL = scene(ENDMEMBERS, 40, seed=2, absent=1)


@functools.cache
def shared_result(solver, route):
    return lumaxlike.unmix(REFL, *GEOMETRY, ENDMEMBERS, PARAMS, solver, route=route)


def assert_recovers(result, mass, refl):
    valid = np.all(np.isfinite(refl), axis=-1)
    assert np.all(result.status[~valid] == Status.NONFINITE_INPUT)
    assert np.all(result.status[valid] == Status.CONVERGED)
    np.testing.assert_allclose(result.fractions[valid], mass[valid], atol=1e-6, rtol=0)
    np.testing.assert_allclose(result.fractions[valid].sum(axis=-1), 1.0, atol=1e-12, rtol=0)
    absent = valid[:, None] & (mass == 0.0)
    assert np.all(result.fractions[absent] == 0.0) and np.all(result.at_bound[absent])
    assert not np.any(result.at_bound[valid[:, None] & (mass > 1e-6)])
    assert np.all(np.isnan(result.fractions[~valid]))


@pytest.mark.slow
@pytest.mark.parametrize("solver, route", SOLVER_ROUTES)
def test_noise_free_mixtures_recovered(solver, route):
    assert (MASS == 0.0).any() and not np.all(np.isfinite(REFL))  # the case has both
    assert_recovers(shared_result(solver, route), MASS, REFL)


def test_solvers_agree():
    numba, jax = shared_result("numba", "one_step"), shared_result("jax", "one_step")
    np.testing.assert_array_equal(numba.status, jax.status)
    np.testing.assert_array_equal(numba.at_bound, jax.at_bound)
    np.testing.assert_allclose(numba.fractions, jax.fractions, atol=1e-8, rtol=0)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_accelerator_layout_gives_the_cpu_layouts_result(monkeypatch, dtype):
    """The JAX one-step solver keeps the spectra bands-first on an accelerator (the pixels
    on the lanes) and bands-last on a CPU: the same steps, sums in another order, in
    float64 and in float32 (what a TPU runs)."""
    inputs = [a.astype(dtype) for a in (REFL, *GEOMETRY)]
    last = lumaxlike.unmix(*inputs, ENDMEMBERS, PARAMS, "jax")
    monkeypatch.setattr(unmix_module, "bands_last_on", lambda platform: False)
    monkeypatch.setattr(jax_executables, "_memory", {})  # this process's programs: none
    monkeypatch.setattr(jax_executables, "fetched_by", collections.Counter())
    first = lumaxlike.unmix(*inputs, ENDMEMBERS, PARAMS, "jax")
    # compiled ahead (while numba compiles the finish), not by the call
    assert dict(jax_executables.fetched_by) == {("solve_one_step_jax", "ahead"): 1}
    np.testing.assert_array_equal(first.status, last.status)
    # the step tolerance: 1e-10 in float64 (measured 2.9e-14), 1e-5 in float32
    # (`FLOAT32_TOLERANCE`; measured 1.2e-5)
    atol = 1e-10 if dtype == np.float64 else 3e-5
    np.testing.assert_allclose(first.fractions, last.fractions, atol=atol, rtol=0)
    # in float32 an absent endmember may stay that close to its bound instead of on it
    changed = first.at_bound != last.at_bound
    assert np.all(np.maximum(first.fractions, last.fractions)[changed] <= atol)
    assert dtype == np.float32 or not changed.any()


def test_two_step_jax_is_jax_invert_then_the_numba_step(monkeypatch):
    """solver="jax", route="two_step": `invert` runs with solver="jax" (the w it returns
    stands in here for JAX's, which test_invert.py checks against numba's to 1e-10), and
    the rest is the numba route's: the same fractions, statuses and covariance."""
    unmix_module = importlib.import_module("lumaxlike._unmix.unmix")  # the module, not the function
    real_invert, solvers = unmix_module.invert, []

    def spy(*args, solver, **kwargs):
        solvers.append(solver)
        return real_invert(*args, solver="numba", **kwargs)

    monkeypatch.setattr(unmix_module, "invert", spy)
    result = lumaxlike.unmix(REFL, *GEOMETRY, ENDMEMBERS, PARAMS, "jax", route="two_step")
    assert solvers == ["jax"]
    assert_recovers(result, MASS, REFL)
    numba = shared_result("numba", "two_step")
    np.testing.assert_array_equal(result.status, numba.status)
    np.testing.assert_array_equal(result.fractions, numba.fractions)
    np.testing.assert_array_equal(result.covariance, numba.covariance)


@pytest.mark.parametrize("n_end, n_bands", [(2, 30), (6, 200)])
def test_library_sizes_numba(n_end, n_bands):
    endmembers = library(n_end, n_bands, seed=n_end)
    geometry, mass, refl = scene(endmembers, 20, seed=n_bands, absent=1)
    for route in ROUTES:
        result = lumaxlike.unmix(refl, *geometry, endmembers, PARAMS, "numba", route=route)
        assert_recovers(result, mass, refl)
        assert result.fractions.shape == (20, n_end) and result.covariance.shape == (
            20,
            n_end,
            n_end,
        )


def noisy_copies(endmembers, mass, n, sigma, seed):
    """n noisy observations of one mixture at one geometry."""
    rng = np.random.default_rng(seed)
    geometry = [np.broadcast_to(g, (n, 3)) for g in lumaxlike.geometry_from_angles(0.5, 0.3, 0.4)]
    per_mass = cross_section_per_mass(
        endmembers.density, endmembers.grain_size, endmembers.extinction_efficiency
    )
    w = mixed_albedo(cross_section_fractions(mass, per_mass), endmembers.albedo)
    refl = lumaxlike.amsa(np.broadcast_to(w, (n, w.shape[-1])), *geometry, PARAMS, backend="numba")
    return geometry, refl + rng.normal(0.0, sigma, refl.shape)


@pytest.mark.parametrize("route", ROUTES)
def test_covariance_matches_monte_carlo(route):
    # 400 draws: the sample variance is within ~7 % (1 sigma) of the truth, so 20 % is ~3 sigma
    mass = np.array([0.4, 0.3, 0.2, 0.1])
    sigma = 2e-4
    geometry, refl = noisy_copies(ENDMEMBERS, mass, 400, sigma, seed=3)
    result = lumaxlike.unmix(
        refl, *geometry, ENDMEMBERS, PARAMS, "numba", route=route, refl_sigma=sigma
    )
    assert np.all(result.status == Status.CONVERGED) and not result.at_bound.any()
    scatter = np.cov(result.fractions, rowvar=False)
    predicted = np.median(result.covariance, axis=0)
    np.testing.assert_allclose(np.diag(predicted), np.diag(scatter), rtol=0.2)
    # the sum constraint: fractions and their variance along (1, ..., 1) vanish
    np.testing.assert_allclose(
        result.covariance.sum(axis=(-1, -2)), 0.0, atol=1e-12 * np.trace(predicted)
    )
    # without refl_sigma the covariance is scaled by the residual variance: about the same
    unscaled = lumaxlike.unmix(
        refl[:40], *(g[:40] for g in geometry), ENDMEMBERS, PARAMS, "numba", route=route
    )
    if route == "one_step":  # residual variance estimates sigma^2 (36 dof): within ~25 %
        ratio = np.median(unscaled.covariance[:, 0, 0]) / np.median(result.covariance[:40, 0, 0])
        assert 0.6 < ratio < 1.5


@pytest.mark.parametrize("solver", SOLVERS)
def test_absent_endmember_with_noise_is_at_its_bound(solver):
    mass = np.array([0.0, 0.5, 0.3, 0.2])
    geometry, refl = noisy_copies(ENDMEMBERS, mass, 40, 2e-4, seed=4)
    result = lumaxlike.unmix(refl, *geometry, ENDMEMBERS, PARAMS, solver, refl_sigma=2e-4)
    assert np.all(result.status == Status.CONVERGED)
    assert np.all(result.fractions >= 0.0)  # never negative
    np.testing.assert_array_equal(result.at_bound, result.fractions == 0.0)
    assert result.at_bound[:, 0].mean() > 0.25  # about half the draws push it below 0
    assert not result.at_bound[:, 1:].any()
    at_bound = result.at_bound[:, 0]
    assert np.all(result.covariance[at_bound][:, 0, :] == 0.0)  # held at its bound
    assert np.all(result.sigma("m1")[at_bound] > 0.0)


def test_solvers_agree_on_noisy_data_and_covariance():
    mass = np.array([0.0, 0.5, 0.3, 0.2])
    geometry, refl = noisy_copies(ENDMEMBERS, mass, 40, 2e-4, seed=5)
    results = {
        s: lumaxlike.unmix(refl, *geometry, ENDMEMBERS, PARAMS, s, refl_sigma=2e-4) for s in SOLVERS
    }
    np.testing.assert_array_equal(results["numba"].status, results["jax"].status)
    np.testing.assert_allclose(
        results["numba"].fractions, results["jax"].fractions, atol=1e-8, rtol=0
    )
    np.testing.assert_allclose(
        results["numba"].covariance, results["jax"].covariance, rtol=1e-6, atol=1e-14
    )


@pytest.mark.parametrize("kind", ["identical", "collinear"])
def test_degenerate_library_is_undetermined(kind):
    albedo = ENDMEMBERS.albedo[:3]
    extra = albedo[0] if kind == "identical" else 0.5 * albedo[0] + 0.5 * albedo[1]
    endmembers = lumaxlike.Endmembers(
        names=("a", "b", "c", "d"), albedo=np.vstack([albedo, extra]), density=3.0, grain_size=50.0
    )
    geometry = GEOMETRY  # the shared shape: no new JAX compile
    mass = np.array([0.3, 0.3, 0.2, 0.2])
    w = mixed_albedo(mass, endmembers.albedo)  # equal density and size: f = M
    refl = lumaxlike.amsa(np.broadcast_to(w, (40, w.shape[-1])), *geometry, PARAMS, backend="numba")
    valid = np.all(np.isfinite(refl), axis=-1)
    statuses = []
    for solver, route in SOLVER_ROUTES:
        result = lumaxlike.unmix(refl, *geometry, endmembers, PARAMS, solver, route=route)
        # never a confident split: UNDETERMINED (NaN covariance), or a variance too
        # large for the split to mean anything
        undetermined = result.status[valid] == Status.UNDETERMINED
        large = np.sqrt(result.covariance[valid][:, 0, 0]) > 0.1
        assert np.all(undetermined | large), (solver, route)
        assert np.all(np.isnan(result.covariance[valid][undetermined]))
        statuses.append(result.status)
    np.testing.assert_array_equal(statuses[0], statuses[1])  # numba and jax, one-step


@pytest.mark.parametrize("solver", SOLVERS)
def test_unmodelled_dark_remainder(solver):
    # the mixture holds a perfectly absorbing component (w = 0) of cross-section 0.25
    fractions = np.array([0.35, 0.0, 0.25, 0.15])
    geometry = GEOMETRY  # the shared shape: no new JAX compile
    w = mixed_albedo(fractions, ENDMEMBERS.albedo)
    refl = lumaxlike.amsa(np.broadcast_to(w, (40, w.shape[-1])), *geometry, PARAMS, backend="numba")
    valid = np.all(np.isfinite(refl), axis=-1)
    for route in (
        ROUTES if solver == "numba" else ("one_step",)
    ):  # JAX two-step: see the module docstring
        result = lumaxlike.unmix(
            refl, *geometry, ENDMEMBERS, PARAMS, solver, route=route, sum_to_one=False
        )
        assert np.all(result.status[valid] == Status.CONVERGED)
        np.testing.assert_allclose(result.remainder[valid], 0.25, atol=1e-6)
        np.testing.assert_allclose(
            result.cross_section[valid], np.broadcast_to(fractions, (valid.sum(), 4)), atol=1e-6
        )
        per_mass = cross_section_per_mass(
            ENDMEMBERS.density, ENDMEMBERS.grain_size, ENDMEMBERS.extinction_efficiency
        )
        np.testing.assert_allclose(
            result.fractions[valid][0], mass_fractions(fractions, per_mass), atol=1e-6
        )
        assert np.all(result.at_bound[valid][:, 1])
    # with the sum held at one the dark remainder is not representable: a poorer fit
    held = lumaxlike.unmix(refl, *geometry, ENDMEMBERS, PARAMS, solver)
    assert np.all(held.remainder[valid] == 0.0) and np.all(held.residual_norm[valid] > 1e-4)


def test_two_step_programme_matches_scipy():
    """The w-space active-set programme against scipy: NNLS where the sum constraint is
    inactive, and an equality-constrained NNLS (augmented row) with the sum held at one."""
    rng = np.random.default_rng(6)
    n, p, k = 200, 5, 30
    albedo = rng.uniform(0.1, 0.9, (p, k))
    truth = rng.dirichlet(np.ones(p), n) * rng.uniform(0.3, 0.9, (n, 1))
    truth[rng.uniform(size=(n, p)) < 0.3] = 0.0
    w = truth @ albedo + rng.normal(0.0, 0.02, (n, k))  # noisy: many bounds active
    solve = np.ones(n, bool)
    free = two_step_numba(w, None, solve, albedo, False, max_qp_steps(p))
    held = two_step_numba(w, None, solve, albedo, True, max_qp_steps(p))
    delta = 1e3  # the augmented row weighs the sum: it is one to ~1/delta^2
    checked = 0
    for i in range(n):
        expected, _ = scipy.optimize.nnls(albedo.T, w[i])
        if expected.sum() < 1.0:  # the sum constraint is inactive: plain NNLS
            np.testing.assert_allclose(free["fractions"][i], expected, atol=1e-10)
            checked += 1
        augmented = np.vstack([albedo.T, delta * np.ones(p)])
        expected, _ = scipy.optimize.nnls(augmented, np.append(w[i], delta), maxiter=1000)
        np.testing.assert_allclose(held["fractions"][i], expected, atol=1e-5)
        assert held["fractions"][i].sum() == pytest.approx(1.0, abs=1e-13)
    assert checked > n // 4
    assert np.all(free["code"] == 0) and np.all(held["code"] == 0)
    assert np.all(free["fractions"] >= 0.0) and np.any(free["fractions"] == 0.0)


def test_mixing_rule():
    per_mass = cross_section_per_mass([2.0, 4.0, 3.0], [10.0, 50.0, 20.0], [1.0, 1.0, 2.0])
    np.testing.assert_allclose(per_mass, [1 / 20, 1 / 200, 2 / 60])
    mass = np.array([0.2, 0.5, 0.3])
    f = cross_section_fractions(mass, per_mass)
    expected = mass * per_mass / np.sum(mass * per_mass)
    np.testing.assert_allclose(f, expected, rtol=1e-14)
    np.testing.assert_allclose(mass_fractions(f, per_mass), mass, rtol=1e-14)
    # the Jacobian of f -> M against central differences
    step = 1e-6
    numeric = np.stack(
        [
            (mass_fractions(f + step * e, per_mass) - mass_fractions(f - step * e, per_mass))
            / (2 * step)
            for e in np.eye(3)
        ],
        axis=-1,
    )
    jacobian = mass_fraction_jacobian(f, per_mass)
    np.testing.assert_allclose(jacobian, numeric, atol=1e-8)
    # the covariance propagated elementwise is G C G^T
    root = np.random.default_rng(0).normal(size=(3, 3))
    covariance = root @ root.T
    mass_out, covariance_out = np.empty(3), np.empty((3, 3))
    pixel_mass_fractions(
        f, per_mass, covariance, mass_out, covariance_out, np.empty(3)
    )  # the kernels' form
    np.testing.assert_allclose(mass_out, mass, rtol=1e-14)
    np.testing.assert_allclose(covariance_out, jacobian @ covariance @ jacobian.T, rtol=1e-12)


def test_endmembers_from_reflectance():
    incidence, emission, azimuth = 0.5, 0.2, 0.0
    geometry = lumaxlike.geometry_from_angles(incidence, emission, azimuth)
    refl = lumaxlike.amsa(ENDMEMBERS.albedo, *geometry, PARAMS, backend="numba")
    built = lumaxlike.Endmembers.from_reflectance(
        refl,
        incidence,
        emission,
        azimuth,
        PARAMS,
        density=ENDMEMBERS.density,
        grain_size=ENDMEMBERS.grain_size,
        names=ENDMEMBERS.names,
    )
    np.testing.assert_allclose(built.albedo, ENDMEMBERS.albedo, atol=1e-9)
    assert built.names == ENDMEMBERS.names and not built.albedo.flags.writeable
    bad = refl.copy()
    bad[2, 5] = 1.0  # above r(w -> 1)
    with pytest.raises(ValueError, match="endmember 'm2'.*UNREACHABLE"):
        lumaxlike.Endmembers.from_reflectance(
            bad,
            incidence,
            emission,
            azimuth,
            PARAMS,
            density=3.0,
            grain_size=50.0,
            names=ENDMEMBERS.names,
        )


def test_endmembers_from_library_csv(tmp_path):
    # Known w spectra -> r at each spectrum's own measurement geometry -> a CSV on a 1 nm
    # grid, r constant around each band centre (steps half-way between bands, ~12 sigma
    # of the band response away), so resampling gives r at the centre to rounding.
    centres_nm = 500.0 + 20.0 * np.arange(ENDMEMBERS.n_bands)
    incidence, emission, azimuth = (
        np.array([10.0, 30.0, 45.0, 60.0]),
        np.array([0.0, 20.0, 35.0, 5.0]),
        np.array([0.0, 90.0, 180.0, 30.0]),
    )
    geometry = lumaxlike.geometry_from_angles(*np.radians([incidence, emission, azimuth]))
    refl = lumaxlike.amsa(ENDMEMBERS.albedo, *geometry, PARAMS, backend="numba")
    grid_nm = np.arange(centres_nm[0] - 10.0, centres_nm[-1] + 10.0)
    band_of_sample = np.clip(
        np.round((grid_nm - centres_nm[0]) / 20.0).astype(int), 0, ENDMEMBERS.n_bands - 1
    )
    lines = ["wavelength_nm," + ",".join(ENDMEMBERS.names)]
    lines += [
        f"{float(wl)!r}," + ",".join(repr(float(v)) for v in refl[:, band])
        for wl, band in zip(grid_nm, band_of_sample)
    ]
    path = tmp_path / "library.csv"
    path.write_text("\n".join(lines) + "\n")
    library = lumaxlike.read_spectral_library(
        path,
        incidence=np.radians(incidence),
        emission=np.radians(emission),
        azimuth=np.radians(azimuth),
        units="r",
    )
    built = lumaxlike.Endmembers.from_library(
        library,
        PARAMS,
        density=ENDMEMBERS.density,
        grain_size=ENDMEMBERS.grain_size,
        wavelengths=centres_nm * 1e-3,
        fwhm=0.002,
    )
    np.testing.assert_allclose(built.albedo, ENDMEMBERS.albedo, atol=1e-8, rtol=0)
    assert built.names == ENDMEMBERS.names
    np.testing.assert_array_equal(built.wavelengths, centres_nm * 1e-3)
    with pytest.raises(ValueError, match="library.csv.*does not cover band"):
        lumaxlike.Endmembers.from_library(
            library, PARAMS, density=3.0, grain_size=50.0, wavelengths=[0.45, 0.6]
        )


@pytest.mark.parametrize(
    "change, match",
    [
        ({"albedo": np.full((2, 3), np.nan)}, "albedo of 'a' holds NaN"),
        ({"albedo": np.full((2, 3), 1.0)}, "albedo of 'a' must lie strictly inside"),
        ({"albedo": np.full((3, 3), 0.5)}, "albedo must have shape"),
        ({"density": [3.0, -1.0]}, "density must be finite and > 0"),
        ({"grain_size": [1.0, 2.0, 3.0]}, "grain_size must have one value per endmember"),
        ({"names": ("a", "a")}, "names must be unique"),
        ({"wavelengths": [1.0, 2.0]}, "wavelengths must be"),
    ],
)
def test_endmembers_refuse_bad_values(change, match):
    fields = {
        "names": ("a", "b"),
        "albedo": np.full((2, 3), 0.5),
        "density": 3.0,
        "grain_size": 50.0,
        **change,
    }
    with pytest.raises(ValueError, match=match):
        lumaxlike.Endmembers(**fields)


@pytest.mark.parametrize(
    "change, match",
    [
        ({"refl": REFL[:, :30]}, "last axis must hold the endmembers' 40 bands"),
        ({"solver": "cuda"}, "solver="),
        ({"route": "three_step"}, "route="),
        ({"refl_sigma": 0.0}, "refl_sigma must be positive and finite, one number or one per band"),
        (
            {"refl_sigma": np.ones(3)},
            "refl_sigma must be positive and finite, one number or one per band",
        ),
        ({"endmembers": ENDMEMBERS.albedo}, "endmembers must be a lumaxlike.Endmembers"),
        ({"tol": 0.0}, "tol must be positive"),
        ({"max_iter": 0}, "max_iter must be a positive integer"),
        ({"sum_to_one": "yes"}, "sum_to_one must be True or False"),
    ],
)
def test_unmix_refuses_bad_arguments(change, match):
    arguments = {"refl": REFL, "endmembers": ENDMEMBERS, "solver": "numba", **change}
    refl, endmembers, solver = (
        arguments.pop("refl"),
        arguments.pop("endmembers"),
        arguments.pop("solver"),
    )
    with pytest.raises(ValueError, match=match):
        lumaxlike.unmix(refl, *GEOMETRY, endmembers, PARAMS, solver, **arguments)


def test_result_shapes_follow_refl():
    refl = REFL[:12].reshape(3, 4, 40)
    geometry = [g[:12].reshape(3, 4, 3) for g in GEOMETRY]
    result = lumaxlike.unmix(
        refl, *geometry, ENDMEMBERS, PARAMS, "numba", route="two_step", chunk_size=5
    )
    assert result.fractions.shape == (3, 4, 4) and result.covariance.shape == (3, 4, 4, 4)
    assert result.status.shape == result.remainder.shape == result.residual_norm.shape == (3, 4)
    flat = shared_result("numba", "two_step")
    np.testing.assert_array_equal(result.status.reshape(12), flat.status[:12])
    np.testing.assert_allclose(result.fractions.reshape(12, 4), flat.fractions[:12], atol=1e-12)
    np.testing.assert_array_equal(result["m1"], result.fractions[..., 1])


def test_signal_below_the_noise_is_undetermined_not_a_confident_vertex():
    # Reflectance 1000x below its stated noise (as at grazing incidence): whatever vertex
    # the noise pushes the fit onto, the data do not determine the split, so the pixel is
    # UNDETERMINED (NaN covariance), never a fraction of 1 with zero variance.
    mass = np.array([0.1, 0.5, 0.3, 0.1])
    geometry, refl = noisy_copies(ENDMEMBERS, mass, 40, 2e-4, seed=6)
    rng = np.random.default_rng(7)
    faint = 1e-3 * refl + rng.normal(0.0, 0.2, refl.shape)  # signal ~1e-5, noise 0.2 = sigma
    result = lumaxlike.unmix(faint, *geometry, ENDMEMBERS, PARAMS, "numba", refl_sigma=0.2)
    valid = np.all(np.isfinite(refl), axis=-1)
    assert np.all(result.status[valid] == Status.UNDETERMINED)
    assert np.all(np.isnan(result.covariance[valid]))


@pytest.mark.parametrize("solver, route", SOLVER_ROUTES)
def test_non_positive_reflectance_is_unreachable(solver, route):
    """A negated cube once converged to 100 % of the darkest endmember (one-step); a pixel
    with no band r > 0 is reflected by no mixture: UNREACHABLE by either route."""
    refl = REFL[:6].copy()
    refl[0] = -refl[0]
    refl[1] = 0.0
    result = lumaxlike.unmix(
        refl, *(g[:6] for g in GEOMETRY), ENDMEMBERS, PARAMS, solver, route=route
    )
    valid = np.all(np.isfinite(refl), axis=-1)
    expected = np.where(valid, Status.CONVERGED, Status.NONFINITE_INPUT)
    expected[:2] = np.where(valid[:2], Status.UNREACHABLE, Status.NONFINITE_INPUT)
    np.testing.assert_array_equal(result.status, expected)
    assert np.all(np.isnan(result.fractions[:2]))


@pytest.mark.parametrize("route", ROUTES)
def test_float32_input_gives_float32_fractions(route):
    refl = REFL[:4].astype(np.float32)
    result = lumaxlike.unmix(
        refl, *(g[:4] for g in GEOMETRY), ENDMEMBERS, PARAMS, "numba", route=route
    )
    for field in ("fractions", "covariance", "remainder", "residual_norm", "cross_section"):
        assert getattr(result, field).dtype == np.float32, field
    valid = np.all(np.isfinite(refl), axis=-1)
    np.testing.assert_allclose(
        result.fractions[valid], MASS[:4][valid], atol=1e-3, rtol=0
    )  # float32 data


def test_float32_jax_converges_where_float64_does_and_agrees():
    """The JAX one-step solver computes in float32 on float32 input (what runs on a TPU):
    it converges on the pixels float64 converges on, noise-free and noisy (the shared
    case's shapes: one more compile, for float32)."""
    noisy = REFL + np.random.default_rng(7).normal(0.0, 1e-4, REFL.shape)
    for refl, sigma in ((REFL, None), (noisy, 1e-4)):
        results = {
            dtype: lumaxlike.unmix(
                refl.astype(dtype),
                *(g.astype(dtype) for g in GEOMETRY),
                ENDMEMBERS,
                PARAMS,
                "jax",
                refl_sigma=sigma,
            )
            for dtype in (np.float64, np.float32)
        }
        single, double = results[np.float32], results[np.float64]
        assert single.fractions.dtype == np.float32
        converged = double.status == Status.CONVERGED
        assert converged.sum() == np.all(np.isfinite(REFL), axis=-1).sum()  # every valid pixel
        np.testing.assert_array_equal(single.status, double.status)
        # float32's default tol is 1e-5 on the cross-section fractions: the last Gauss-Newton
        # step (<= tol) is left untaken, and float32's minimum differs from float64's by its
        # rounding of r (~6e-8 relative; < 4e-6 here, measured with tol 1e-7). Measured
        # 1.2e-5.
        difference = np.abs(single.cross_section - double.cross_section)[converged]
        assert np.max(difference) <= 3e-5
        # an absent endmember may stay that close to its bound instead of on it
        changed = (single.at_bound != double.at_bound)[converged]
        nearest = np.maximum(single.cross_section, double.cross_section)[converged]
        assert np.all(nearest[changed] <= 3e-5)
