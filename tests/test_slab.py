"""The equivalent slab (w from n, k, grain size and nanophase iron), optical constants'
readers and shipped sets, and k from a laboratory spectrum: against an independent NumPy
implementation of the papers' formulas, limits, finite differences and a round trip."""

import math
import re
import warnings
from pathlib import Path

import jax
import numpy as np
import pytest

import lumaxlike
from lumaxlike._model._backends import slab_twins
from lumaxlike._optical.slab import slab_albedo_and_slopes
from lumaxlike.testing import default_params

BACKENDS = ("numpy", "jax", "numba")
RHO_FE = 7.87


def reference_w(n, k, lam, d, s=0.0, f=0.0, n_fe=0.0, k_fe=0.0, rho=1.0, *, variant="default"):
    """Hapke (2001) / Lucey & Riner (2011) written out from the issue's formulas, in plain
    NumPy (no code of the package)."""
    n, k, lam, d, s, f = np.broadcast_arrays(*(np.asarray(v, float) for v in (n, k, lam, d, s, f)))
    z = n**3 * n_fe * k_fe / ((n_fe**2 - k_fe**2 + 2 * n**2) ** 2 + (2 * n_fe * k_fe) ** 2)
    alpha = 4 * np.pi * k / lam + 36 * np.pi * z * (rho / RHO_FE) * f / lam
    r0 = ((n - 1) ** 2 + k**2) / ((n + 1) ** 2 + k**2)
    if variant == "hapke2012":
        s_e = 0.0587 + 0.8543 * r0 + 0.0870 * r0**2
        s_i = 1 - (0.9413 - 0.8543 * r0 - 0.0870 * r0**2) / n**2
    else:
        s_e = r0 + 0.05
        s_i = 1.014 - 4 / (n * (n + 1) ** 2)
    mean_d = 0.9 * d if variant == "lucey1998" else 2 / 3 * (n**2 - (n**2 - 1) ** 1.5 / n) * d
    with np.errstate(invalid="ignore", divide="ignore"):
        root = np.sqrt(alpha / (alpha + s))
        r_i = np.where(s > 0, (1 - root) / (1 + root), 0.0)
    e = np.exp(-np.sqrt(alpha * (alpha + s)) * mean_d)
    theta = (r_i + e) / (1 + r_i * e)
    return s_e + (1 - s_e) * (1 - s_i) * theta / (1 - s_i * theta)


def hemispherical_fresnel(m):
    """The Fresnel reflectance of unpolarised light averaged over the hemisphere of
    incidence, int_0^(pi/2) R(theta) 2 cos(theta) sin(theta) dtheta (Hapke 2012, eq.
    5.36: the S_e that both `reflections` variants approximate), for the relative
    complex index m = n + i k (1/n for light inside a grain: total internal reflection
    beyond the critical angle). Fresnel's equations in plain NumPy and scipy's quad."""
    from scipy import integrate

    def reflectance(theta):
        cos_i, sin_i = np.cos(theta), np.sin(theta)
        cos_t = np.sqrt(1 - (sin_i / m) ** 2 + 0j)
        r_s = (cos_i - m * cos_t) / (cos_i + m * cos_t)
        r_p = (m * cos_i - cos_t) / (m * cos_i + cos_t)
        return 0.5 * (abs(r_s) ** 2 + abs(r_p) ** 2) * 2 * cos_i * sin_i

    critical = [math.asin(abs(m))] if abs(m) < 1 else None
    return integrate.quad(reflectance, 0, math.pi / 2, points=critical, limit=200)[0]


@pytest.mark.parametrize(
    "variant, tolerance",
    # each variant's fit against the integral over minerals' n 1.4-2.5 (measured worst:
    # 0.0118 and 0.0059); neither holds near n = 1, where S_e -> 0 (0.05 and 0.0587 there)
    [("hapke1993", 0.012), ("hapke2012", 0.006)],
)
def test_surface_reflections_against_the_fresnel_integral(variant, tolerance):
    twin = slab_twins("numpy", variant, "hapke2001")
    for n in np.linspace(1.4, 2.5, 12):
        for k in (0.0, 0.001, 0.05):
            s_e, s_i = twin.surface_reflections(n, k)
            assert abs(s_e - hemispherical_fresnel(n + 1j * k)) <= tolerance, (n, k)
        if variant == "hapke2012":
            # diffuse light inside a clear grain: S_i = 1 - (1 - S_e) / n^2, which is the
            # internal integral (total reflection included) given the exact S_e
            exact_e = hemispherical_fresnel(n)
            s_e, s_i = twin.surface_reflections(n, 0.0)
            assert s_i - (1 - (1 - s_e) / n**2) == pytest.approx(0.0, abs=1e-15)
            assert hemispherical_fresnel(1 / n) == pytest.approx(1 - (1 - exact_e) / n**2, abs=1e-8)


def random_inputs(seed, size=200):
    rng = np.random.default_rng(seed)
    return dict(
        n=rng.uniform(1.3, 2.5, size),
        k=10 ** rng.uniform(-7, -0.5, size),
        wavelength=rng.uniform(0.3, 1.9, size),
        grain_size=10 ** rng.uniform(-0.5, 3, size),
        internal_scattering=np.where(rng.random(size) < 0.5, 0.0, 10 ** rng.uniform(-4, 0, size)),
        npfe_fraction=np.where(rng.random(size) < 0.3, 0.0, rng.uniform(0, 0.01, size)),
    )


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("variant", ["default", "hapke2012", "lucey1998"])
def test_matches_an_independent_numpy_implementation(backend, variant):
    inputs = random_inputs(1)
    iron = lumaxlike.optical_constants("iron")
    n_fe, k_fe = iron.interpolate(inputs["wavelength"])
    options = {"hapke2012": {"reflections": "hapke2012"}, "lucey1998": {"mean_path": "lucey1998"}}
    w = lumaxlike.slab_albedo(
        **inputs, host_density=3.3, backend=backend, **options.get(variant, {})
    )
    expected = reference_w(*inputs.values(), n_fe, k_fe, 3.3, variant=variant)
    np.testing.assert_allclose(w, expected, rtol=1e-12, atol=0)
    assert w.shape == (200,) and w.dtype == np.float64


def test_backends_agree_to_1e_12_values_and_slopes():
    inputs = random_inputs(2)
    microphase = dict(mpfe_fraction=inputs["npfe_fraction"], mpfe_diameter=0.05)
    results = {
        b: slab_albedo_and_slopes(**inputs, **microphase, host_density=3.0, backend=b)
        for b in BACKENDS
    }
    for name in ("jax", "numba"):
        assert len(results[name]) == 4
        for got, want in zip(results[name], results["numpy"], strict=True):
            np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-300)


def test_limits_transparent_and_opaque():
    n = np.array([1.5, 1.7, 2.2])
    # k -> 0 (no internal scattering): w -> 1; exactly 1 at k = 0
    assert np.all(lumaxlike.slab_albedo(n, 0.0, 1.0, 50.0) == 1.0)
    np.testing.assert_allclose(lumaxlike.slab_albedo(n, 1e-13, 1.0, 50.0), 1.0, atol=1e-9)
    # alpha <D> -> infinity: w -> S_e = R0 + 0.05 (also with internal scattering s when
    # alpha >> s, where r_i -> 0)
    k = 0.01
    s_e = ((n - 1) ** 2 + k**2) / ((n + 1) ** 2 + k**2) + 0.05
    np.testing.assert_allclose(lumaxlike.slab_albedo(n, k, 1.0, 1e7), s_e, rtol=1e-15)
    opaque = lumaxlike.slab_albedo(n, k, 1.0, 1e7, internal_scattering=1e-9)
    # r_i ~ s / (4 alpha) ~ 2e-9 is left of the internal scattering: w - S_e ~ 1e-9
    np.testing.assert_allclose(opaque, s_e, rtol=1e-7)
    # variant: <D> = 0.9 D (Lucey 1998) is the default model at D' = 0.9 D / m(n)
    m = 2 / 3 * (n**2 - (n**2 - 1) ** 1.5 / n)
    np.testing.assert_allclose(
        lumaxlike.slab_albedo(n, 1e-3, 1.0, 40.0, mean_path="lucey1998"),
        lumaxlike.slab_albedo(n, 1e-3, 1.0, 0.9 * 40.0 / m),
        rtol=1e-14,
    )


def test_zero_npfe_reproduces_the_host_exactly():
    inputs = random_inputs(3)
    inputs["npfe_fraction"] = 0.0
    iron = lumaxlike.optical_constants("iron")
    for backend in BACKENDS:
        host = lumaxlike.slab_albedo(**inputs, backend=backend)
        with_iron = lumaxlike.slab_albedo(**inputs, host_density=3.3, iron=iron, backend=backend)
        np.testing.assert_array_equal(with_iron, host)


@pytest.mark.parametrize("backend", BACKENDS)
def test_slopes_match_central_differences(backend):
    inputs = random_inputs(4, size=60)
    inputs["npfe_fraction"] = inputs["npfe_fraction"] + 1e-3  # away from the bound
    w, dw_dd, dw_df, _ = slab_albedo_and_slopes(**inputs, host_density=3.3, backend=backend)
    d, f = inputs["grain_size"], inputs["npfe_fraction"]

    def at(**change):
        return lumaxlike.slab_albedo(**{**inputs, **change}, host_density=3.3)

    hd, hf = 1e-6 * d, 1e-6 * f
    fd_d = (at(grain_size=d + hd) - at(grain_size=d - hd)) / (2 * hd)
    fd_f = (at(npfe_fraction=f + hf) - at(npfe_fraction=f - hf)) / (2 * hf)
    # central differences with h = 1e-6 relative: truncation ~1e-12, rounding ~1e-10 / h
    np.testing.assert_allclose(dw_dd, fd_d, rtol=1e-6, atol=1e-12)
    np.testing.assert_allclose(dw_df, fd_f, rtol=1e-6, atol=1e-9)
    assert np.all(dw_df < 0)  # iron darkens


def test_jax_autodiff_of_the_twin_equals_the_hand_written_chain_rule():
    inputs = random_inputs(5, size=40)
    iron = lumaxlike.optical_constants("iron")
    n_fe, k_fe = iron.interpolate(inputs["wavelength"])
    args = [*inputs.values(), n_fe, k_fe, np.full(40, 3.3), np.zeros(40)]
    with jax.enable_x64(True):
        twin = slab_twins("jax")
        grad = jax.vmap(jax.grad(twin.slab_albedo, argnums=(3, 5)))(*args)
        _, dw_dd, dw_df, _ = jax.vmap(twin.slab_albedo_and_slopes)(*args)
        # at k = 0 with s > 0 (dq/dalpha infinite), autodiff stays finite, no NaN
        edge = jax.grad(twin.slab_albedo, argnums=(3, 5))(
            1.7, 0.0, 1.0, 50.0, 0.1, 0.0, 3.0, 3.5, 3.3, 0.0
        )
    # where E = exp(-beta <D>) underflows both are ~0 and differ by rounding (~1e-15)
    np.testing.assert_allclose(grad[0], dw_dd, rtol=1e-10, atol=1e-14)
    np.testing.assert_allclose(grad[1], dw_df, rtol=1e-10, atol=1e-14)
    assert np.all(np.isfinite(np.asarray(edge)))


def test_npfe_darkens_and_reddens_monotonically():
    """Lucey & Riner (2011) fig. 2 / Hapke (2001): 20 um grains of a weakly absorbing host,
    npFe0 from 0 to 0.5 wt %: w at 0.75 um falls and w(1.5)/w(0.75) rises."""
    npfe = np.linspace(0.0, 0.005, 11)[:, None]
    w = lumaxlike.slab_albedo(
        1.7, 1e-5, np.array([0.75, 1.5]), 20.0, npfe_fraction=npfe, host_density=3.3
    )
    assert np.all(np.diff(w[:, 0]) < 0)
    assert np.all(np.diff(w[:, 1] / w[:, 0]) > 0)
    assert w[0, 0] > 0.9 and w[-1, 0] < 0.5  # a strong effect, not a rounding trend


def test_microphase_iron_tends_to_nanophase_iron_and_darkens_without_reddening():
    """Mie absorption of iron spheres (miepython): at 1 nm the Rayleigh limit, which is
    the npFe0 term; at 0.5 um (Britt-Pieters iron, Lucey & Riner 2011) an absorption
    spectrally flatter than npFe0's: it darkens with less reddening."""
    from lumaxlike._optical.microphase import microphase_absorption_coefficient

    bands = np.array([0.75, 1.5])
    common = dict(n=1.7, k=1e-5, wavelength=bands, grain_size=20.0, host_density=3.3)
    nano = lumaxlike.slab_albedo(**common, npfe_fraction=0.002)
    tiny = lumaxlike.slab_albedo(**common, mpfe_fraction=0.002, mpfe_diameter=1e-3)
    # Rayleigh corrections to Q_abs are O(x^2), x = pi d n / lambda ~ 7e-3
    np.testing.assert_allclose(tiny, nano, rtol=1e-4)
    large = lumaxlike.slab_albedo(**common, mpfe_fraction=0.01, mpfe_diameter=0.1)
    host = lumaxlike.slab_albedo(**common)
    assert np.all(large < host)
    n_fe, k_fe = lumaxlike.optical_constants("iron").interpolate(bands)
    z = 1.7**3 * n_fe * k_fe / ((n_fe**2 - k_fe**2 + 2 * 1.7**2) ** 2 + (2 * n_fe * k_fe) ** 2)
    nano_alpha = 36 * np.pi * z * (3.3 / RHO_FE) / bands
    micro_alpha = microphase_absorption_coefficient(1.7, bands, n_fe, k_fe, 3.3, 0.5)
    assert micro_alpha[1] / micro_alpha[0] > 3 * nano_alpha[1] / nano_alpha[0]
    w, _, _, dw_dm = slab_albedo_and_slopes(**common, mpfe_fraction=0.01, mpfe_diameter=0.1)
    h = 1e-8
    up = lumaxlike.slab_albedo(**common, mpfe_fraction=0.01 + h, mpfe_diameter=0.1)
    down = lumaxlike.slab_albedo(**common, mpfe_fraction=0.01 - h, mpfe_diameter=0.1)
    np.testing.assert_allclose(dw_dm, (up - down) / (2 * h), rtol=1e-6)
    with pytest.raises(ValueError, match="mpfe_diameter"):
        lumaxlike.slab_albedo(**common, mpfe_fraction=0.01)


def test_bad_arguments_are_refused_by_name():
    for kwargs, name in [
        (dict(n=0.9), "n"),
        (dict(k=-1e-3), "k"),
        (dict(wavelength=0.0), "wavelength"),
        (dict(grain_size=-1.0), "grain_size"),
        (dict(internal_scattering=np.nan), "internal_scattering"),
        (dict(npfe_fraction=0.001), "host_density"),
        (dict(reflections="hapke1981"), "reflections"),
        (dict(mean_path="x"), "mean_path"),
        (dict(backend="torch"), "backend"),
        (dict(npfe_fraction=0.001, host_density=3.0, wavelength=0.15), "wavelengths outside"),
        (dict(wavelength=750.0), "wavelength must be in micrometres"),
    ]:
        arguments = dict(n=1.7, k=1e-3, wavelength=1.0, grain_size=10.0) | kwargs
        with pytest.raises(ValueError, match=name):
            lumaxlike.slab_albedo(**arguments)


@pytest.mark.slow  # compiles invert's numba kernels (~10 s on a cold cache)
def test_round_trip_k_spectrum_from_reflectance_k():
    olivine = lumaxlike.optical_constants("olivine")
    wavelengths = np.linspace(0.45, 2.4, 40)
    n, k_true = olivine.interpolate(wavelengths)
    params = default_params()
    incidence, emission, azimuth = math.radians(30), math.radians(0), 0.0
    w_true = lumaxlike.slab_albedo(n, k_true, wavelengths, 60.0)
    geometry = lumaxlike.geometry_from_angles(incidence, emission, azimuth)
    refl = lumaxlike.amsa(w_true[None], *(g[None] for g in geometry), params, backend="numba")[0]
    derived = lumaxlike.OpticalConstants.from_reflectance(
        refl, incidence, emission, azimuth, params, 60.0, n, 3.32, wavelengths
    )
    s_e = ((n - 1) ** 2 + k_true**2) / ((n + 1) ** 2 + k_true**2) + 0.05  # the opaque limit
    assert np.all((1 - w_true > 1e-6) & (w_true - s_e > 1e-6))  # no band saturated
    np.testing.assert_allclose(derived.k, k_true, rtol=1e-8)
    assert derived.density == 3.32
    # w at another grain size matches the forward model
    np.testing.assert_allclose(
        lumaxlike.slab_albedo(derived.n, derived.k, wavelengths, 200.0),
        lumaxlike.slab_albedo(n, k_true, wavelengths, 200.0),
        rtol=1e-9,
    )


def test_from_reflectance_warns_on_unreachable_bands():
    from lumaxlike._optical.from_reflectance import k_from_albedo

    k, clipped = k_from_albedo(np.array([0.5, 0.01, 0.999999999999]), 1.7, 1.0, 50.0)
    assert clipped.tolist() == [False, True, True]
    np.testing.assert_allclose(lumaxlike.slab_albedo(1.7, k[0], 1.0, 50.0), 0.5, rtol=1e-13)
    params = default_params()
    with pytest.raises(ValueError, match="refl must have"):
        lumaxlike.OpticalConstants.from_reflectance(
            np.ones(3), 0.5, 0.0, 0.0, params, 50.0, 1.7, None, [1.0, 2.0]
        )
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        geometry = lumaxlike.geometry_from_angles(0.5, 0.0, 0.0)
        refl = lumaxlike.amsa(np.array([[0.02, 0.5]]), *geometry, params, backend="numba")[0]
        lumaxlike.OpticalConstants.from_reflectance(
            refl, 0.5, 0.0, 0.0, params, 50.0, 1.7, None, [1.0, 2.0]
        )
    assert any("beyond the slab model's reach" in str(w.message) for w in caught)


def test_csv_reader_and_its_refusals(tmp_path):
    good = tmp_path / "x.csv"
    good.write_text(
        "# name: test mineral\n# density: 3.1\nk,wavelength,n\n0.1,0.5,1.6\n0.2,1.0,1.7\n"
    )
    constants = lumaxlike.OpticalConstants.from_csv(good)
    assert constants.name == "test mineral" and constants.density == 3.1
    np.testing.assert_array_equal(constants.wavelength, [0.5, 1.0])
    n, k = constants.interpolate([0.75])
    np.testing.assert_allclose([n[0], k[0]], [1.65, 0.15])
    with pytest.raises(ValueError, match="wavelengths outside"):
        constants.interpolate([1.5])
    for text, message in [
        ("wavelength,n\n0.5,1.6\n", "missing column"),
        ("wavelength,n,k\n0.5,1.6,abc\n", "line 2: not a number"),
        ("wavelength,n,k\n0.5,1.6,-0.1\n", "k must be"),
        ("wavelength,n,k\n1.0,1.6,0.1\n0.5,1.6,0.1\n", "strictly increasing"),
    ]:
        (tmp_path / "bad.csv").write_text(text)
        with pytest.raises(ValueError, match=message):
            lumaxlike.OpticalConstants.from_csv(tmp_path / "bad.csv")
    with pytest.raises(ValueError, match="density"):
        lumaxlike.OpticalConstants("x", [1.0], 1.5, [0.0], density=-1.0)


def test_refractiveindex_yaml_reader_and_its_refusals(tmp_path):
    nk = tmp_path / "Fe.yml"
    nk.write_text(
        "REFERENCES: x\nDATA:\n  - type: tabulated nk\n    data: |\n        0.5 2.8 3.3\n        1.0 3.0 4.0\n"
    )
    constants = lumaxlike.OpticalConstants.from_refractiveindex_yaml(nk, density=7.87)
    assert constants.name == "Fe" and constants.density == 7.87
    np.testing.assert_array_equal(constants.k, [3.3, 4.0])
    split = tmp_path / "split.yml"
    split.write_text(
        "DATA:\n  - type: tabulated n\n    data: |\n        0.4 1.5\n        1.2 1.7\n"
        "  - type: tabulated k\n    data: |\n        0.8 0.01\n        1.2 0.02\n"
    )
    constants = lumaxlike.OpticalConstants.from_refractiveindex_yaml(split)
    np.testing.assert_allclose(constants.n, [1.6, 1.7])
    for text, message in [
        ("DATA:\n  - type: formula 1\n    coefficients: 0 1 2\n", "formula 1"),
        ("DATA:\n  - type: tabulated n\n    data: |\n        0.4 1.5\n", "no k"),
        ("DATA:\n  - type: tabulated nk\n    data: |\n        0.4 1.5\n", "3 finite columns"),
        ("REFERENCES: x\n", "no DATA"),
        ("DATA: [unclosed\n", "not YAML"),
    ]:
        (tmp_path / "bad.yml").write_text(text)
        with pytest.raises(ValueError, match=message):
            lumaxlike.OpticalConstants.from_refractiveindex_yaml(tmp_path / "bad.yml")


def test_refractiveindex_yaml_blocks_of_one_type_are_joined_or_refused(tmp_path):
    """Before: of two ``tabulated nk`` blocks only the last was read, the first range
    dropped without a word. Blocks of one type are joined where their ranges do not
    overlap, refused where they do, and an nk block beside a k block is refused."""

    def block(kind, rows):
        lines = "".join(f"        {' '.join(str(v) for v in row)}\n" for row in rows)
        return f"  - type: {kind}\n    data: |\n{lines}"

    low, high = [(0.5, 2.8, 3.3), (1.0, 3.0, 4.0)], [(2.0, 3.8, 6.7), (5.0, 5.0, 14.7)]
    path = tmp_path / "two.yml"
    path.write_text("DATA:\n" + block("tabulated nk", high) + block("tabulated nk", low))
    constants = lumaxlike.OpticalConstants.from_refractiveindex_yaml(path)
    np.testing.assert_array_equal(
        np.stack([constants.wavelength, constants.n, constants.k], -1), low + high
    )
    split = "DATA:\n" + block("tabulated n", [(0.4, 1.5), (1.0, 1.6)])
    split += block("tabulated n", [(1.5, 1.7), (3.0, 1.8)])
    split += block("tabulated k", [(0.5, 0.01), (2.5, 0.02)])
    path.write_text(split)  # n's blocks joined: k's grid lies within them
    constants = lumaxlike.OpticalConstants.from_refractiveindex_yaml(path)
    np.testing.assert_allclose(constants.n, [1.5 + 0.1 * 0.1 / 0.6, 1.7 + 0.1 * 1.0 / 1.5])
    for text, message in [
        (block("tabulated nk", low) + block("tabulated nk", [(0.9, 1, 1), (3.0, 1, 1)]), "overlap"),
        (block("tabulated nk", low) + block("tabulated k", [(2.0, 0.1), (3.0, 0.2)]), "not said"),
    ]:
        path.write_text("DATA:\n" + text)
        with pytest.raises(ValueError, match=message):
            lumaxlike.OpticalConstants.from_refractiveindex_yaml(path)


def test_shipped_sets_load_and_each_has_a_sources_entry():
    names = lumaxlike.optical_constants_names()
    folder = Path(lumaxlike.__file__).parent / "data" / "optical_constants"
    sources = (folder / "SOURCES.md").read_text(encoding="utf-8")
    headings = re.findall(r"`(\w+)`", " ".join(re.findall(r"^## .*$", sources, re.M)))
    stems = {path.stem for path in folder.glob("*.csv")}
    assert stems and stems <= set(headings) and stems <= set(names)
    for name in names:
        constants = lumaxlike.optical_constants(name)
        assert constants.k.min() >= 0 and constants.n.min() >= 1
    iron = lumaxlike.optical_constants("iron")
    assert iron.density == RHO_FE and iron.wavelength[0] == 0.188 and iron.wavelength[-1] == 286
    with pytest.raises(ValueError, match="shipped"):
        lumaxlike.optical_constants("plagioclase")
