"""The empirical photometric functions (`PhotometricFunction`): against USGS ISIS3's own
unit-test truth values, an independent implementation of Shkuratov et al. (2011), refmod's
stored numbers, their limits; the two backends; the closed-form inversion with both
solvers; refused parameters. Also refmod's MIMSA, which is lumaxlike's AMSA without
opposition effects."""

from pathlib import Path

import numpy as np
import pytest

import lumaxlike
from lumaxlike import PhotometricFunction, Status

from .helpers import BACKENDS, SOLVERS, random_geometry

DATA = Path(__file__).parent / "data"
REFMOD = np.load(DATA / "refmod_reference.npz")

MODELS = {
    "lambert": PhotometricFunction("lambert"),
    "lommel_seeliger": PhotometricFunction("lommel_seeliger"),
    "lunar_lambert": PhotometricFunction("lunar_lambert", limb_darkening=0.4),
    "minnaert": PhotometricFunction("minnaert", minnaert_k=0.7),
    "shkuratov": PhotometricFunction("shkuratov", mu1=0.5, m=0.3, mu2=4.0, eta=0.6),
}


def angles_to_vectors(incidence_deg, emission_deg, phase_deg):
    """Flat-surface vectors from (i, e, g): cos g = cos i cos e + sin i sin e cos psi."""
    i, e, g = (np.radians(np.asarray(v, float)) for v in (incidence_deg, emission_deg, phase_deg))
    sin_product = np.sin(i) * np.sin(e)
    safe = np.where(sin_product == 0.0, 1.0, sin_product)
    cos_psi = np.where(sin_product == 0.0, 1.0, (np.cos(g) - np.cos(i) * np.cos(e)) / safe)
    return lumaxlike.geometry_from_angles(i, e, np.arccos(np.clip(cos_psi, -1.0, 1.0)))


def pht(model, geometry, backend="jax"):
    """ISIS's photometric function: pi r / A."""
    n = np.shape(geometry[0])[0]
    return np.pi * lumaxlike.reflectance(np.full(n, 0.37), *geometry, model, backend=backend) / 0.37


# ---------------------------------------------------------------------------------------
# ISIS3's truth values: isis/src/base/objs/{Lambert,LommelSeeliger,LunarLambert,Minnaert}/
# *.truth (DOI-USGS/ISIS3), CalcSurfAlbedo(phase, incidence, emission) of the unit tests,
# printed to 6 significant digits. Their third point, (180, 90, 90), is grazing (ISIS
# returns 0 when i or e is 90 deg or more); below the horizon lumaxlike returns NaN
# (and invert INVALID_GEOMETRY), checked here at i = 91 deg.

ISIS_TRUTH = [  # (model, pht at (g, i, e) = (0, 0, 0), pht at (60, 45, 30))
    (PhotometricFunction("lambert"), 1.0, 0.707107),
    (PhotometricFunction("lommel_seeliger"), 1.0, 0.898979),
    (PhotometricFunction("lunar_lambert", limb_darkening=1.0), 1.0, 0.898979),
    (PhotometricFunction("lunar_lambert", limb_darkening=0.0), 1.0, 0.707107),
    (PhotometricFunction("lunar_lambert", limb_darkening=0.5), 1.0, 0.803043),
    (PhotometricFunction("lunar_lambert", limb_darkening=2.0), 1.0, 1.09085),
    (PhotometricFunction("minnaert", minnaert_k=1.0), 1.0, 0.707107),
    (PhotometricFunction("minnaert", minnaert_k=0.0), 1.0, 1.1547),
    (PhotometricFunction("minnaert", minnaert_k=0.5), 1.0, 0.903602),
    (PhotometricFunction("minnaert", minnaert_k=2.0), 1.0, 0.433013),
]


@pytest.mark.parametrize("backend", BACKENDS)
def test_isis3_truth_values(backend):
    geometry = angles_to_vectors([0.0, 45.0, 91.0], [0.0, 30.0, 30.0], [0.0, 60.0, 100.0])
    for model, normal_value, oblique_value in ISIS_TRUTH:
        values = pht(model, geometry, backend)
        # 6 printed significant digits: half a unit of the last one is <= 5e-6 relative
        np.testing.assert_allclose(
            values[:2], [normal_value, oblique_value], rtol=5e-6, err_msg=str(model)
        )
        assert np.isnan(values[2])


def test_limits_between_the_functions():
    geometry = random_geometry(40, np.random.default_rng(1))
    lambert = pht(MODELS["lambert"], geometry)
    lommel = pht(MODELS["lommel_seeliger"], geometry)
    np.testing.assert_allclose(
        pht(PhotometricFunction("lunar_lambert", limb_darkening=0.0), geometry), lambert, rtol=1e-15
    )
    np.testing.assert_allclose(
        pht(PhotometricFunction("lunar_lambert", limb_darkening=1.0), geometry), lommel, rtol=1e-15
    )
    np.testing.assert_allclose(
        pht(PhotometricFunction("minnaert", minnaert_k=1.0), geometry), lambert, rtol=1e-15
    )
    # Shkuratov at zero phase: f = 1, D = 1 (no limb darkening), A = A_N everywhere
    sun, _, normal = geometry
    at_opposition = pht(MODELS["shkuratov"], (sun, sun, normal))
    valid = np.einsum("ij,ij->i", sun, normal) > 0
    np.testing.assert_allclose(at_opposition[valid], 1.0, rtol=1e-14)
    # Lambert is mu0 itself
    cos_i = np.einsum("ij,ij->i", sun, normal) / np.linalg.norm(normal, axis=-1)
    ok = np.isfinite(lambert)
    np.testing.assert_allclose(lambert[ok], cos_i[ok], rtol=1e-14)


def test_lommel_seeliger_is_hapkes_single_scattering_limit():
    """Hapke with an isotropic phase function, no roughness or opposition effects:
    r = w/(4 pi) mu0/(mu0 + mu) (1 + O(w)), i.e. Lommel-Seeliger with A = w/8."""
    geometry = random_geometry(40, np.random.default_rng(2))
    w = 1e-9
    hapke = lumaxlike.amsa(
        np.full(40, w), *geometry, lumaxlike.HapkeParams(b=0.0, c=0.0), backend="numba"
    )
    lommel = lumaxlike.reflectance(np.full(40, w / 8.0), *geometry, MODELS["lommel_seeliger"])
    ok = np.isfinite(hapke)
    assert ok.mean() > 0.8 and np.array_equal(ok, np.isfinite(lommel))
    np.testing.assert_allclose(hapke[ok], lommel[ok], rtol=1e-8)  # the O(w) multiple scattering


# ---------------------------------------------------------------------------------------
# Shkuratov et al. (2011): an independent implementation, and refmod


def shkuratov_reference(to_sun, to_sensor, normal, mu1, m, mu2, eta, refmod_exponent=False):
    """pht = f(alpha) D(alpha, beta, gamma) of Shkuratov et al. (2011) from the photometric
    coordinates found geometrically: the photometric equator is the plane of the sun and
    sensor directions, beta the normal's angle out of it, gamma the angle of its
    projection from the sensor toward the sun (so mu = cos beta cos gamma, mu0 = cos beta
    cos(alpha - gamma)). `refmod_exponent`: refmod's eta alpha (pi - alpha) instead of
    the paper's eta alpha/(pi - alpha)."""
    unit = lambda v: v / np.linalg.norm(v, axis=-1, keepdims=True)  # noqa: E731
    s, v, n = unit(to_sun), unit(to_sensor), unit(normal)
    alpha = np.arccos(np.clip(np.einsum("ij,ij->i", s, v), -1, 1))
    plane_normal = unit(np.cross(v, s))
    toward_sun = unit(s - np.einsum("ij,ij->i", s, v)[:, None] * v)
    beta = np.arcsin(np.einsum("ij,ij->i", n, plane_normal))
    gamma = np.arctan2(np.einsum("ij,ij->i", n, toward_sun), np.einsum("ij,ij->i", n, v))
    phase = (np.exp(-mu1 * alpha) + m * np.exp(-mu2 * alpha)) / (1 + m)
    exponent = eta * alpha * (np.pi - alpha) if refmod_exponent else eta * alpha / (np.pi - alpha)
    disk = (
        np.cos(alpha / 2)
        * np.cos(np.pi / (np.pi - alpha) * (gamma - alpha / 2))
        * np.cos(beta) ** exponent
        / np.cos(gamma)
    )
    return phase * disk


def test_shkuratov_matches_an_independent_implementation_of_the_paper():
    rng = np.random.default_rng(3)
    geometry = random_geometry(60, rng)
    model = MODELS["shkuratov"]
    expected = shkuratov_reference(*geometry, model.mu1, model.m, model.mu2, model.eta)
    for backend in BACKENDS:
        values = pht(model, geometry, backend)
        ok = np.isfinite(values)
        assert ok.mean() > 0.8
        np.testing.assert_allclose(values[ok], expected[ok], rtol=1e-12)


def test_shkuratov_and_lambert_match_refmod():
    """refmod returns A f D / cos i (pi times the BRDF) for Shkuratov and r for Lambert."""
    geometry = REFMOD["to_sun"], REFMOD["to_sensor"], REFMOD["normal"]
    albedo = REFMOD["albedo"]
    cos_i = np.einsum("ij,ij->i", geometry[0], geometry[2]) / np.linalg.norm(geometry[2], axis=-1)
    r = lumaxlike.reflectance(albedo, *geometry, MODELS["lambert"])
    np.testing.assert_allclose(r, REFMOD["lambert"], rtol=1e-14)
    mu1, eta, m, mu2 = REFMOD["shkuratov_a_params"]  # eta = 0: refmod and the paper agree
    r = lumaxlike.reflectance(
        albedo, *geometry, PhotometricFunction("shkuratov", mu1=mu1, m=m, mu2=mu2)
    )
    refmod_r = REFMOD["shkuratov_a"] * cos_i / np.pi
    # pixels 0, 1 are at zero phase, where refmod's arccos(cos g) gives g ~ 1e-8, not 0
    np.testing.assert_allclose(r[2:], refmod_r[2:], rtol=1e-13)
    np.testing.assert_allclose(r[:2], refmod_r[:2], rtol=1e-7)
    # eta > 0: refmod's disk exponent is eta alpha (pi - alpha), the paper's eta alpha/(pi - alpha)
    mu1, eta, m, mu2 = REFMOD["shkuratov_b_params"]
    tilted = [g[2:] for g in geometry]  # the reference needs a plane of sun and sensor
    refmod_form = shkuratov_reference(*tilted, mu1, m, mu2, eta, refmod_exponent=True)
    np.testing.assert_allclose(
        albedo[2:] * refmod_form, REFMOD["shkuratov_b"][2:] * cos_i[2:], rtol=1e-12
    )
    ours = pht(PhotometricFunction("shkuratov", mu1=mu1, m=m, mu2=mu2, eta=eta), tilted)
    assert np.max(np.abs(ours / refmod_form - 1.0)) > 0.1  # the difference is not negligible


def test_refmod_mimsa_is_amsa_without_opposition_effects():
    geometry = REFMOD["to_sun"], REFMOD["to_sensor"], REFMOD["normal"]
    params = lumaxlike.HapkeParams(b=0.0, c=0.0, legendre=REFMOD["mimsa_b_n"])
    r = lumaxlike.amsa(REFMOD["albedo"], *geometry, params, backend="numba")
    np.testing.assert_allclose(r, REFMOD["mimsa"], rtol=1e-14)


# ---------------------------------------------------------------------------------------
# Backends, the generic forward, inversion


def test_backends_agree_and_reflectance_of_hapke_params_is_amsa():
    rng = np.random.default_rng(4)
    geometry = random_geometry(50, rng)
    albedo = rng.uniform(0.0, 1.0, (50, 2))
    for model in MODELS.values():
        by_jax = lumaxlike.reflectance(albedo, *geometry, model, backend="jax")
        by_numba = lumaxlike.reflectance(albedo, *geometry, model, backend="numba")
        assert np.array_equal(np.isnan(by_jax), np.isnan(by_numba)) and np.isnan(by_jax).any()
        np.testing.assert_allclose(by_jax, by_numba, rtol=1e-12, err_msg=model.kind)
    single = lumaxlike.reflectance(
        albedo.astype(np.float32), *(g.astype(np.float32) for g in geometry), model
    )
    assert single.dtype == np.float32 and np.array_equal(np.isfinite(single), np.isfinite(by_jax))
    np.testing.assert_allclose(single, by_jax, rtol=1e-5)  # float32 rounding
    params = lumaxlike.HapkeParams(b=0.2, c=0.4)
    hapke = lumaxlike.reflectance(albedo, *geometry, params, backend="numba")
    assert np.array_equal(
        hapke, lumaxlike.amsa(albedo, *geometry, params, backend="numba"), equal_nan=True
    )


def test_invert_recovers_the_albedo_in_closed_form_with_both_solvers():
    rng = np.random.default_rng(5)
    geometry = [g.copy() for g in random_geometry(40, rng)]
    geometry[0][0] = [0.3, 0.0, -0.1]  # the sun below the horizon
    albedo = rng.uniform(0.01, 1.5, (40, 3))
    for model in MODELS.values():
        refl = lumaxlike.reflectance(albedo, *geometry, model, backend="numba")
        scale = refl / albedo  # pht / pi
        invalid_geometry = np.isnan(refl[:, 0])
        assert invalid_geometry.any()
        refl[invalid_geometry] = 0.05  # observed, but not a geometry the model describes
        nan, negative, zero, infinite = np.flatnonzero(~invalid_geometry)[:4]
        refl[nan, 0], refl[negative, 1], refl[zero, 2] = np.nan, -1e-3, 0.0
        broken = [g.copy() for g in geometry]
        broken[1][infinite, 2] = np.inf
        results = {
            s: lumaxlike.invert(refl, *broken, model, solver=s, refl_sigma=[1e-3, 2e-3, 3e-3])
            for s in SOLVERS
        }
        expected = np.full(refl.shape, int(Status.CONVERGED))
        expected[invalid_geometry] = Status.INVALID_GEOMETRY
        expected[negative, 1] = Status.UNREACHABLE
        expected[nan, 0] = Status.NONFINITE_INPUT
        expected[infinite] = Status.NONFINITE_INPUT
        solved = expected == Status.CONVERGED
        truth = albedo.copy()
        truth[zero, 2] = 0.0
        for result in results.values():
            np.testing.assert_array_equal(result.status, expected)
            assert result.iterations.dtype == np.int32 and not result.iterations.any()
            np.testing.assert_allclose(result.w[solved], truth[solved], rtol=1e-12, atol=0)
            assert np.all(np.isnan(result.w[~solved])) and np.all(np.isnan(result.sigma[~solved]))
            assert np.all(np.abs(result.residual[solved]) <= 1e-15 * np.abs(refl[solved]))
            sigma = np.broadcast_to([1e-3, 2e-3, 3e-3], refl.shape)[solved] / scale[solved]
            np.testing.assert_allclose(result.sigma[solved], sigma, rtol=1e-12)
        np.testing.assert_allclose(results["jax"].w, results["numba"].w, rtol=1e-12)
    single = lumaxlike.invert(refl.astype(np.float32), *broken, model, solver="jax")
    assert single.w.dtype == np.float32
    np.testing.assert_array_equal(single.status, results["jax"].status)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"kind": "lamberts"}, "PhotometricFunction.kind"),
        ({"kind": "minnaert", "minnaert_k": -0.1}, "PhotometricFunction.minnaert_k"),
        ({"kind": "lunar_lambert", "limb_darkening": np.nan}, "PhotometricFunction.limb_darkening"),
        ({"kind": "shkuratov", "mu1": "0.3"}, "PhotometricFunction.mu1"),
        ({"kind": "shkuratov", "eta": [0.1, 0.2]}, "PhotometricFunction.eta"),
        ({"kind": "lambert", "minnaert_k": 0.5}, "PhotometricFunction.minnaert_k"),
        ({"kind": "minnaert", "m": 0.5}, "PhotometricFunction.m"),
    ],
)
def test_bad_parameters_are_refused_naming_the_field(fields, message):
    with pytest.raises(ValueError, match=message.replace(".", r"\.")):
        PhotometricFunction(**fields)


def test_fit_refuses_a_photometric_function_and_points_to_invert():
    geometry = random_geometry(2, np.random.default_rng(6))
    refl = np.full((2, 1, 1), 0.05)
    with pytest.raises(ValueError, match="invert"):
        lumaxlike.fit(refl, *(g[:, None] for g in geometry), MODELS["lambert"], free=("w",))
    with pytest.raises(ValueError, match="model must be"):
        lumaxlike.reflectance(np.ones(2), *geometry, "lambert")


# ---------------------------------------------------------------------------------------
# Front ends: the xarray accessor, invert_file, the command line, provenance


def test_xarray_invert_file_cli_and_provenance(tmp_path, capsys):
    import xarray as xr

    from lumaxlike._cli import main

    from .test_io import make_scene, write_scene
    from .test_provenance import map_bytes

    scene = make_scene(rows=4, cols=3, bands=2, seed=7)
    model = PhotometricFunction("lunar_lambert", limb_darkening=0.3)
    refl = xr.DataArray(scene["r"], dims=("y", "x", "band"))
    vectors = xr.Dataset(
        {name: (("y", "x", "xyz"), scene[name]) for name in ("to_sun", "to_sensor", "normal")}
    )
    result = refl.hapke.invert(vectors, model, "numba", units="r")
    expected = lumaxlike.invert(
        scene["r"], scene["to_sun"], scene["to_sensor"], scene["normal"], model, "numba"
    )
    np.testing.assert_array_equal(result.w.values, expected.w)
    assert lumaxlike.read_provenance(result).params == (model, model)
    assert (
        "PhotometricFunction('lunar_lambert', limb_darkening=0.3)"
        in result.attrs["lumaxlike_command"]
    )

    cube, obs, dtm = write_scene(tmp_path, scene)
    by_python = tmp_path / "python.tif"
    per_band = [PhotometricFunction("lunar_lambert", limb_darkening=v) for v in (0.3, 0.8)]
    lumaxlike.invert_file(
        cube, by_python, geometry=obs, dtm=dtm, params=per_band, solver="numba", units="radf"
    )
    common = ["--geometry", obs, "--dtm", dtm, "--units", "radf", "--no-progress"]
    first = tmp_path / "cli.tif"
    assert (
        main(
            [
                "invert",
                cube,
                *common,
                "--model",
                "lunar_lambert",
                "--limb-darkening",
                "0.3,0.8",
                "--out",
                first,
            ]
        )
        == 0
    ), capsys.readouterr().err
    assert map_bytes(first) == map_bytes(by_python)
    record = lumaxlike.read_provenance(first)
    assert record.params == tuple(per_band) and record.model == {
        "reflectance": "Lunar-Lambert (McEwen 1991, ISIS3 photomet)"
    }
    again = tmp_path / "again.tif"
    assert main(["invert", cube, "--params-from", first, "--out", again, "--no-progress"]) == 0, (
        capsys.readouterr().err
    )
    assert map_bytes(again) == map_bytes(first)
    shkuratov = tmp_path / "shkuratov.tif"
    assert (
        main(
            [
                "invert",
                cube,
                *common,
                "--model",
                "shkuratov",
                "--shkuratov-mu1",
                "0.4",
                "--shkuratov-m",
                "0.2",
                "--shkuratov-mu2",
                "3",
                "--shkuratov-eta",
                "0.5",
                "--out",
                shkuratov,
            ]
        )
        == 0
    ), capsys.readouterr().err
    assert lumaxlike.read_provenance(shkuratov).params[0] == PhotometricFunction(
        "shkuratov", mu1=0.4, m=0.2, mu2=3.0, eta=0.5
    )
    for bad, named in [
        (["--model", "lambert", "--b", "0.3"], "--b"),
        (["--model", "lambert", "--minnaert-k", "0.5"], "--minnaert-k"),
        (["--model", "minnaert", "--minnaert-k", "-1"], "--minnaert-k"),
        (["--limb-darkening", "0.5"], "--limb-darkening"),
    ]:
        assert main(["invert", cube, *common, *bad, "--out", tmp_path / "bad.tif"]) == 2
        assert named in capsys.readouterr().err


def test_jax_gradients_through_the_parameters_are_finite_and_match_finite_differences():
    import jax

    sun, view, normal = random_geometry(6, np.random.default_rng(8))
    view[0] = sun[0]  # zero phase, where the photometric longitude is undefined
    albedo = np.full(6, 0.3)

    def total(eta, mu1):
        model = PhotometricFunction("shkuratov", mu1=mu1, m=0.2, mu2=2.0, eta=eta)
        r = lumaxlike.reflectance(albedo, sun, view, normal, model)
        return jax.numpy.nansum(r)

    with jax.enable_x64(True):
        gradient = jax.grad(total, argnums=(0, 1))(0.3, 0.5)
        step = 1e-6
        for k, point in enumerate(((0.3 + step, 0.5), (0.3, 0.5 + step))):
            low = (0.3 - step, 0.5) if k == 0 else (0.3, 0.5 - step)
            central = (total(*point) - total(*low)) / (2 * step)
            assert np.isfinite(gradient[k])
            np.testing.assert_allclose(
                gradient[k], central, rtol=1e-7
            )  # central difference, step 1e-6
