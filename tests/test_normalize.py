"""Photometric normalisation: `normalize`, its parameter maps, the CLI and the accessor.

The truth is the model itself: a cube synthesised at random geometry from known w, once
normalised, must equal the cube synthesised from the same w at the standard geometry
(by `amsa`, not by the kernel `normalize` evaluates the model with there).
"""

import math

import numpy as np
import pytest

import lumaxlike
from lumaxlike._normalize.standard import (
    differentiated_at_standard,
    standard_reflectance,
    standard_vectors,
)

from .helpers import FULL_PARAMS, SOLVERS, random_geometry

DEFAULT_STANDARD = np.radians([30.0, 0.0, 30.0])
FIELDS = {
    name: getattr(FULL_PARAMS, name) for name in ("b", "c", "roughness", "hs", "bs0", "hc", "bc0")
}

# One small case per member of the model family (the hg case also moves the standard),
# each with the configuration and array shapes (pixels, bands) of the inversion tests
# (test_invert, test_model_family, test_phase_functions): the JAX solver's compilations
# are shared within a test session.
CASES = {
    "amsa": ({}, DEFAULT_STANDARD, (1500, 8)),
    "imsa": ({"multiple_scattering": "imsa", "porosity_k": 1.5}, DEFAULT_STANDARD, (300, 4)),
    "hapke1981": ({"h_function": "hapke1981", "porosity_k": 1.5}, DEFAULT_STANDARD, (300, 4)),
    "exact": ({"h_function": "exact", "porosity_k": 1.5}, DEFAULT_STANDARD, (300, 4)),
    "hg": (
        {"phase_function": "hg", "asymmetry": -0.35, "porosity_k": 1.2},
        np.radians([45.0, 20.0, 60.0]),
        (300, 3),
    ),
    "cornette_shanks": (
        {"phase_function": "cornette_shanks", "asymmetry": -0.35, "porosity_k": 1.2},
        DEFAULT_STANDARD,
        (300, 3),
    ),
    "porosity_k": ({"porosity_k": 1.8}, DEFAULT_STANDARD, (1500, 8)),
}


def synthesise(params, n_pixels=300, n_bands=4, seed=0):
    rng = np.random.default_rng(seed)
    geometry = random_geometry(n_pixels, rng)
    w_true = rng.uniform(0.03, 0.97, (n_pixels, n_bands))
    return w_true, geometry, lumaxlike.amsa(w_true, *geometry, params, backend="numba")


def at_standard(w, params, standard):
    return lumaxlike.amsa(w, *standard_vectors(*standard), params, backend="numba")


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_normalised_cube_equals_the_cube_synthesised_at_the_standard_geometry(case):
    changes, standard, (n_pixels, n_bands) = CASES[case]
    params = lumaxlike.HapkeParams(**{**FIELDS, **changes})
    w_true, geometry, refl = synthesise(params, n_pixels, n_bands)
    truth = at_standard(w_true, params, standard)
    results = {
        solver: lumaxlike.normalize(refl, *geometry, params, solver, standard=standard)
        for solver in SOLVERS
    }
    for result in results.values():
        solved = result.status <= lumaxlike.Status.MAX_ITER
        assert solved.mean() > 0.9  # a few tilted facets face away from the sun or sensor
        np.testing.assert_allclose(result.reflectance[solved], truth[solved], rtol=0, atol=1e-8)
        assert np.all(np.isnan(result.reflectance[~solved]))
        assert result.reflectance.dtype == np.float64 and result.reflectance.shape == refl.shape
    np.testing.assert_array_equal(results["jax"].status, results["numba"].status)
    np.testing.assert_allclose(
        results["jax"].reflectance, results["numba"].reflectance, rtol=0, atol=1e-9
    )
    np.testing.assert_array_equal(
        results["numba"].w, lumaxlike.invert(refl, *geometry, params, "numba").w
    )


def test_standard_geometry_has_the_requested_angles():
    for standard in (
        [0.5, 0.2, 0.6],
        [0.5, 0.0, 0.5],
        [0.0, 0.3, 0.3],
        [0.4, 0.4, 0.0],
        [0.3, 0.5, 0.8],
    ):
        to_sun, to_sensor, normal = standard_vectors(*standard)

        def angle(a, b):
            return math.acos(np.clip(a @ b / np.linalg.norm(a) / np.linalg.norm(b), -1, 1))

        got = (angle(to_sun, normal), angle(to_sensor, normal), angle(to_sun, to_sensor))
        np.testing.assert_allclose(
            got, standard, rtol=0, atol=1e-7
        )  # acos near 0 loses half the digits


def test_fused_kernel_equals_jvp_of_the_forward_model_at_the_standard_geometry():
    w = np.linspace(0.01, 0.99, 7)
    vectors = standard_vectors(*np.radians([50.0, 20.0, 40.0]))
    r, slope = standard_reflectance(w, vectors, FULL_PARAMS)
    r_jvp, slope_jvp = differentiated_at_standard(w, vectors, FULL_PARAMS)
    np.testing.assert_allclose(r, r_jvp, rtol=1e-13)
    np.testing.assert_allclose(slope, slope_jvp, rtol=1e-12)
    step = 1e-6
    central = (
        standard_reflectance(w + step, vectors, FULL_PARAMS)[0]
        - standard_reflectance(w - step, vectors, FULL_PARAMS)[0]
    ) / (2 * step)
    np.testing.assert_allclose(
        slope, central, rtol=1e-7
    )  # central differences: O(step^2) + rounding


def test_standard_reflectance_rounds_once_into_a_float32_buffer():
    w = np.linspace(0.01, 0.99, 101)
    vectors = standard_vectors(*np.radians([30.0, 0.0, 30.0]))
    r64, slope64 = standard_reflectance(w, vectors, FULL_PARAMS)
    r_out = np.full(w.shape, np.nan, np.float32)
    r32, slope = standard_reflectance(w, vectors, FULL_PARAMS, r_out=r_out)
    assert np.shares_memory(r32, r_out)
    np.testing.assert_array_equal(r32, r64.astype(np.float32))  # float64's r, rounded once
    np.testing.assert_array_equal(slope, slope64)
    with pytest.raises(ValueError, match="C-contiguous"):
        standard_reflectance(w, vectors, FULL_PARAMS, r_out=np.empty(w.shape, np.float16))


def test_sigma_is_the_finite_difference_propagation_of_refl_sigma():
    w_true, geometry, refl = synthesise(FULL_PARAMS, n_pixels=20, n_bands=2, seed=1)
    refl_sigma = np.array([1e-3, 3e-3])
    result = lumaxlike.normalize(refl, *geometry, FULL_PARAMS, "numba", refl_sigma=refl_sigma)
    h = 1e-5 * refl
    up = lumaxlike.normalize(refl + h, *geometry, FULL_PARAMS, "numba").reflectance
    down = lumaxlike.normalize(refl - h, *geometry, FULL_PARAMS, "numba").reflectance
    expected = np.abs(up - down) / (2 * h) * refl_sigma
    solved = result.status == lumaxlike.Status.CONVERGED
    assert solved.mean() > 0.8
    np.testing.assert_allclose(result.sigma[solved], expected[solved], rtol=1e-6)
    assert np.all(np.isnan(result.sigma[~solved]))
    assert np.all(np.isnan(lumaxlike.normalize(refl, *geometry, FULL_PARAMS, "numba").sigma))


def test_float32_in_float32_out_and_inputs_untouched():
    w_true, geometry, refl = synthesise(FULL_PARAMS, n_pixels=20, n_bands=2, seed=2)
    refl32 = refl.astype(np.float32)
    before = refl32.copy()
    result = lumaxlike.normalize(refl32, *geometry, FULL_PARAMS, "numba", refl_sigma=1e-3)
    assert {a.dtype for a in (result.reflectance, result.sigma, result.w)} == {np.dtype(np.float32)}
    np.testing.assert_array_equal(refl32, before)
    solved = result.status == lumaxlike.Status.CONVERGED
    truth = at_standard(w_true, FULL_PARAMS, DEFAULT_STANDARD)
    np.testing.assert_allclose(
        result.reflectance[solved], truth[solved], rtol=1e-5
    )  # float32 input rounding


def test_parameter_maps_equal_per_pixel_normalisation():
    rng = np.random.default_rng(3)
    n_pixels, n_bands = 12, 2
    geometry = random_geometry(n_pixels, rng)
    b_map = rng.choice([0.15, 0.3], n_pixels)  # binned, one value per pixel
    roughness_map = rng.choice(np.radians([10.0, 25.0]), (n_pixels, n_bands))  # per pixel and band
    roughness_map[0, 1] = np.nan  # no parameter here: that problem is not solved
    w_true = rng.uniform(0.05, 0.95, (n_pixels, n_bands))
    refl = np.empty((n_pixels, n_bands))
    truth = np.empty((n_pixels, n_bands))
    for p in range(n_pixels):
        for band in range(n_bands):
            here = lumaxlike.HapkeParams(
                **{**FIELDS, "b": b_map[p], "roughness": np.nan_to_num(roughness_map[p, band])}
            )
            pixel = [g[p] for g in geometry]
            refl[p, band] = lumaxlike.amsa(
                w_true[p, band : band + 1], *pixel, here, backend="numba"
            )[0]
            truth[p, band] = at_standard(w_true[p, band : band + 1], here, DEFAULT_STANDARD)[0]
    maps = {"b": b_map, "roughness": roughness_map}
    results = {
        solver: lumaxlike.normalize(
            refl, *geometry, FULL_PARAMS, solver, param_maps=maps, refl_sigma=1e-3
        )
        for solver in SOLVERS
    }
    for result in results.values():
        assert result.status[0, 1] == lumaxlike.Status.NONFINITE_INPUT and np.isnan(
            result.reflectance[0, 1]
        )
        solved = result.status == lumaxlike.Status.CONVERGED
        assert solved.sum() >= 0.8 * n_pixels * n_bands
        np.testing.assert_allclose(result.reflectance[solved], truth[solved], rtol=0, atol=1e-8)
    np.testing.assert_array_equal(results["jax"].status, results["numba"].status)
    np.testing.assert_allclose(results["jax"].sigma, results["numba"].sigma, rtol=1e-7)
    # the same, one pixel at a time with scalar parameters
    for p in range(n_pixels):
        for band in range(n_bands):
            if np.isnan(roughness_map[p, band]):
                continue
            here = lumaxlike.HapkeParams(
                **{**FIELDS, "b": b_map[p], "roughness": roughness_map[p, band]}
            )
            one = lumaxlike.normalize(
                refl[p, band : band + 1], *(g[p] for g in geometry), here, "numba", refl_sigma=1e-3
            )
            np.testing.assert_array_equal(one.status, results["numba"].status[p, band : band + 1])
            np.testing.assert_allclose(
                one.reflectance, results["numba"].reflectance[p, band : band + 1], rtol=1e-12
            )
            np.testing.assert_allclose(
                one.sigma, results["numba"].sigma[p, band : band + 1], rtol=1e-12
            )


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"standard": (30.0, 0.0, 30.0)}, r"standard incidence .*radians"),
        ({"standard": (0.5, 0.1, 0.1)}, r"standard phase .*impossible"),
        ({"standard": (0.5, 0.1)}, r"standard must be three"),
        ({"standard": (0.5, np.nan, 0.5)}, r"standard must be three"),
        ({"param_maps": {"w": np.zeros(4)}}, r"param_maps\['w'\]: not a numeric"),
        ({"param_maps": {"b": np.zeros(3)}}, r"param_maps\['b'\] has shape"),
        ({"param_maps": {"b": np.full(4, 1.5)}}, r"param_maps\['b'\] holds 1.5"),
        ({"param_maps": {"b": np.array(["x"] * 4)}}, r"param_maps\['b'\] must be a numeric"),
        ({"param_maps": [0.1]}, r"param_maps must be a mapping"),
        ({"solver": "scipy"}, r"solver='scipy'"),
        ({"params": {"b": 0.2}}, r"params must be a lumaxlike.HapkeParams"),
        ({"refl_sigma": [1e-3, 1e-3, 1e-3]}, r"refl_sigma must be"),
    ],
)
def test_bad_input_is_refused_naming_the_argument(changes, message):
    w_true, geometry, refl = synthesise(FULL_PARAMS, n_pixels=4, n_bands=2, seed=4)
    kwargs = {"params": FULL_PARAMS, "solver": "numba", **changes}
    with pytest.raises(ValueError, match=message):
        lumaxlike.normalize(refl, *geometry, **kwargs)


# ---------------------------------------------------------------------------------------
# The command line: lumaxlike normalize


def test_cli_round_trip_with_a_parameter_map_sigma_and_provenance(tmp_path, capsys):
    from lumaxlike._cli import main

    from .test_io import PARAMS, make_scene, write_raster, write_scene

    scene = make_scene()
    rows, cols, bands = scene["r"].shape
    b_map = np.where(np.arange(cols)[None, :] < 3, 0.1, 0.3) * np.ones((rows, 1))  # two bins
    b_map[0, 0] = np.nan  # no parameter: NONFINITE_INPUT there
    r = np.empty_like(scene["r"])
    truth = np.full_like(scene["r"], np.nan)
    standard = np.radians([40.0, 10.0, 35.0])
    for b in (0.1, 0.3):
        params = lumaxlike.HapkeParams(b=b, c=PARAMS.c, roughness=PARAMS.roughness)
        here = b_map == b
        r[here] = lumaxlike.amsa(
            scene["w"][here],
            *(scene[k][here] for k in ("to_sun", "to_sensor", "normal")),
            params,
            backend="numba",
        )
        truth[here] = np.pi * at_standard(scene["w"][here], params, standard)
    cube, obs, dtm = write_scene(tmp_path, scene, cube_values=np.pi * r)  # I/F
    b_path = write_raster(tmp_path / "b.tif", b_map[None])
    hashes = {p: p.read_bytes() for p in (cube, obs, dtm, b_path)}
    out = tmp_path / "norm.tif"
    args = [
        "normalize",
        cube,
        "--geometry",
        obs,
        "--dtm",
        dtm,
        "--units",
        "radf",
        "--c",
        "0.4",
        "--roughness-deg",
        "15",
        "--param-map",
        f"b={b_path}",
        "--standard",
        "40,10,35",
        "--refl-sigma",
        "0.001",
        "--chunk",
        "3",
        "--out",
        out,
    ]
    assert main([str(a) for a in args]) == 0
    assert "normalised 48 pixels x 5 bands" in capsys.readouterr().err
    normalised, info = lumaxlike.read_cube(out)
    status, _ = lumaxlike.read_cube(tmp_path / "norm_status.tif")
    sigma, _ = lumaxlike.read_cube(tmp_path / "norm_sigma.tif")
    assert info.wavelengths is not None and normalised.shape == scene["r"].shape
    assert np.all(status[0, 0] == lumaxlike.Status.NONFINITE_INPUT) and np.all(
        np.isnan(normalised[0, 0])
    )
    solved = status == lumaxlike.Status.CONVERGED
    assert solved.sum() == normalised.size - bands
    np.testing.assert_allclose(normalised[solved], truth[solved], rtol=0, atol=1e-8)
    assert np.all(sigma[solved] > 0)
    record = lumaxlike.read_provenance(tmp_path / "norm_sigma.tif")
    np.testing.assert_allclose(record.standard, standard, rtol=1e-15)
    assert record.param_maps == (("b", str(b_path.resolve())),) and record.units == "radf"
    assert record.command.startswith("lumaxlike normalize") and record.params[0].c == 0.4
    assert {p: p.read_bytes() for p in hashes} == hashes
    # the record reruns it (same model, standard and maps given again)
    again = tmp_path / "again.nc"
    assert (
        main(
            [
                "normalize",
                str(cube),
                "--params-from",
                str(out),
                "--param-map",
                f"b={b_path}",
                "--out",
                str(again),
            ]
        )
        == 0
    )
    import xarray as xr

    with xr.open_dataset(again) as dataset:
        np.testing.assert_array_equal(np.moveaxis(dataset.reflectance.values, 0, -1), normalised)
        assert (
            dataset.reflectance.attrs["units"] == "1"
            and "standard geometry" in dataset.reflectance.attrs["long_name"]
        )
    # and without the map given again: the recorded --param-map (once dropped: the scalar
    # b was used, up to 6 % off, and no map recorded)
    assert (
        main(
            [
                "normalize",
                str(cube),
                "--params-from",
                str(out),
                "--out",
                str(tmp_path / "rerun.tif"),
            ]
        )
        == 0
    )
    np.testing.assert_array_equal(lumaxlike.read_cube(tmp_path / "rerun.tif")[0], normalised)
    assert lumaxlike.read_provenance(tmp_path / "rerun.tif").param_maps == record.param_maps


@pytest.mark.parametrize(
    "extra, names",
    [
        (["--standard", "30,0,90"], ["--standard", "phase"]),
        (["--standard", "30,0"], ["--standard"]),
        (["--param-map", "w=x.tif"], ["--param-map", "'w'"]),
        (["--param-map", "b=missing.tif"], ["missing.tif"]),
    ],
)
def test_cli_bad_input_exits_2_naming_it(tmp_path, capsys, extra, names):
    from lumaxlike._cli import main

    from .test_io import make_scene, write_scene

    cube, obs, _ = write_scene(tmp_path, make_scene(rows=2, cols=2, bands=1))
    code = main(
        [
            str(a)
            for a in [
                "normalize",
                cube,
                "--geometry",
                obs,
                "--units",
                "r",
                *extra,
                "--out",
                tmp_path / "out.tif",
            ]
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and len(err.strip().splitlines()) == 1, err
    assert all(name in err for name in names), err
    assert not list(tmp_path.glob("out*"))


# ---------------------------------------------------------------------------------------
# xarray: DataArray.hapke.normalize on dask


def test_accessor_on_dask_equals_normalize_with_a_parameter_map():
    import xarray as xr

    rng = np.random.default_rng(5)
    rows, cols, bands = 4, 5, 2
    angles = {
        "to_sun_zenith": rng.uniform(10, 60, (rows, cols)),
        "to_sun_azimuth": rng.uniform(0, 360, (rows, cols)),
        "to_sensor_zenith": rng.uniform(0, 40, (rows, cols)),
        "to_sensor_azimuth": rng.uniform(0, 360, (rows, cols)),
    }
    to_sun = lumaxlike.direction_from_zenith_azimuth(
        np.radians(angles["to_sun_zenith"]), np.radians(angles["to_sun_azimuth"])
    )
    to_sensor = lumaxlike.direction_from_zenith_azimuth(
        np.radians(angles["to_sensor_zenith"]), np.radians(angles["to_sensor_azimuth"])
    )
    normal = np.array([0.0, 0.0, 1.0])
    w = rng.uniform(0.1, 0.9, (rows, cols, bands))
    roughness = np.where(np.arange(cols) < 2, 0.1, 0.3) * np.ones((rows, 1))
    params = lumaxlike.HapkeParams(b=0.25, c=0.5)
    refl = np.empty((rows, cols, bands))
    for value in (0.1, 0.3):
        here = roughness == value
        refl[here] = lumaxlike.amsa(
            w[here],
            to_sun[here],
            to_sensor[here],
            normal,
            lumaxlike.HapkeParams(b=0.25, c=0.5, roughness=value),
            backend="numba",
        )
    expected = lumaxlike.normalize(
        refl,
        to_sun,
        to_sensor,
        normal,
        params,
        "numba",
        refl_sigma=1e-3,
        param_maps={"roughness": roughness},
    )
    dims = ("y", "x")
    cube = xr.DataArray(np.moveaxis(np.pi * refl, -1, 0), dims=("band",) + dims).chunk({"y": 2})
    geometry = xr.Dataset({name: (dims, values) for name, values in angles.items()})
    maps = {"roughness": xr.DataArray(roughness, dims=dims)}
    result = cube.hapke.normalize(
        geometry, params, "numba", units="radf", refl_sigma=np.pi * 1e-3, param_maps=maps
    )
    assert result.reflectance.chunks is not None  # lazy
    computed = result.compute()
    np.testing.assert_allclose(
        np.moveaxis(computed.reflectance.values, 0, -1), np.pi * expected.reflectance, rtol=1e-12
    )
    np.testing.assert_allclose(
        np.moveaxis(computed.sigma.values, 0, -1), np.pi * expected.sigma, rtol=1e-12
    )
    np.testing.assert_array_equal(np.moveaxis(computed.status.values, 0, -1), expected.status)
    assert np.all(expected.status == lumaxlike.Status.CONVERGED)
    record = lumaxlike.read_provenance(computed)
    np.testing.assert_allclose(record.standard, np.radians([30.0, 0.0, 30.0]), rtol=1e-15)
    assert record.param_maps == (("roughness", None),)


@pytest.mark.parametrize("solver", SOLVERS)
def test_photometric_functions_normalise_to_their_standard_geometry(solver):
    # r = A pht(i, e, g)/pi: the normalised cube is A pht(standard)/pi, exactly what the
    # forward model gives at the standard geometry (independent of the solver's route).
    rng = np.random.default_rng(11)
    geometry = random_geometry(30, rng)
    albedo = rng.uniform(0.05, 0.6, (30, 2))
    standard = np.radians((30.0, 0.0, 30.0))
    at_standard = lumaxlike.geometry_from_angles(*standard[:2], phase=standard[2])
    for model in (
        lumaxlike.PhotometricFunction("lunar_lambert", limb_darkening=0.4),
        lumaxlike.PhotometricFunction("minnaert", minnaert_k=0.7),
    ):
        refl = lumaxlike.reflectance(albedo, *geometry, model)
        result = lumaxlike.normalize(refl, *geometry, model, solver=solver, refl_sigma=1e-3)
        valid = result.status == lumaxlike.Status.CONVERGED
        assert valid.mean() > 0.5 and np.all(np.isnan(result.reflectance[~valid]))
        expected = lumaxlike.reflectance(albedo, *at_standard, model)
        np.testing.assert_allclose(result.reflectance[valid], expected[valid], rtol=1e-12, atol=0)
        # sigma_A = pi sigma_r / pht(obs): sigma_norm = pht(std)/pi sigma_A
        ratio = expected / refl
        np.testing.assert_allclose(result.sigma[valid], (1e-3 * ratio)[valid], rtol=1e-12)
