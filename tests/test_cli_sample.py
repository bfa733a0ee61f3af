"""`lumaxlike sample`: a stack of co-registered cubes and their OBS rasters -> the posterior's
quantile maps, streamed by blocks and resumable.

A 3x3 image, 2 bands, 5 cubes (noisy r from known w), w sampled. Every run here samples
blocks of one row (3 pixels, in a 4-pixel chunk) at the default sampler settings, so they
share one compiled program (in this process, through lumaxlike's JAX cache in the killed
child, and with test_sample.py's xarray test, whose chunks have the same shape). The maps
are compared with `lumaxlike.sample` on the same stacked arrays, each block with its own
seed; the sampler's correctness is tests/test_sample.py's."""

import warnings

import numpy as np
import pytest
import rasterio
import rasterio.errors

import lumaxlike
from lumaxlike import Status
from lumaxlike._cli import main
from lumaxlike._io import result_paths
from lumaxlike._sample.maps import chunk_seed, sample_fields

from .helpers import count_raster_opens
from .test_io import OBS_DESCRIPTIONS, WAVELENGTHS, temporary_leftovers, write_raster
from .test_resume import journal_blocks, kill_mid_run

pytestmark = pytest.mark.slow  # sample runs from files

TRUTH = lumaxlike.HapkeParams(b=0.3, c=0.4)
ROWS, COLS, BANDS, CUBES, SIGMA, SEED = 3, 3, 2, 5, 0.002, 7
FREE = ("w",)
# the defaults, spelled out (the options' parsing is tested with them)
SAMPLER = ["--num-samples", "1000", "--num-warmup", "300", "--num-chains", "4"]
SAMPLER += ["--seed", str(SEED)]


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """5 cubes of noisy r [1/sr] (one NaN observation at pixel (0, 0)) with OBS rasters;
    the command's arguments and the stacked arrays `sample` takes (the geometry as the
    command reads it from the OBS rasters)."""
    folder = tmp_path_factory.mktemp("sample_stack")
    rng = np.random.default_rng(5)
    w = rng.uniform(0.3, 0.8, (ROWS, COLS, BANDS))
    cubes, obs, refl, geometry = [], [], [], []
    for k in range(CUBES):
        angles = np.stack(
            [
                rng.uniform(10.0, 60.0, (ROWS, COLS)),
                rng.uniform(0.0, 360.0, (ROWS, COLS)),
                rng.uniform(0.0, 50.0, (ROWS, COLS)),
                rng.uniform(0.0, 360.0, (ROWS, COLS)),
            ]
        )
        to_sun = lumaxlike.direction_from_zenith_azimuth(*np.radians(angles[:2]))
        to_sensor = lumaxlike.direction_from_zenith_azimuth(*np.radians(angles[2:]))
        normal = np.broadcast_to([0.0, 0.0, 1.0], to_sun.shape)
        r = np.asarray(lumaxlike.amsa(w, to_sun, to_sensor, normal, TRUTH, backend="numba"))
        r = r + SIGMA * rng.standard_normal(r.shape)
        if k == 2:
            r[0, 0] = np.nan
        cubes.append(
            write_raster(
                folder / f"cube{k}.tif", np.moveaxis(r, -1, 0), envi_wavelengths=WAVELENGTHS[:BANDS]
            )
        )
        obs.append(write_raster(folder / f"obs{k}.tif", angles, descriptions=OBS_DESCRIPTIONS))
        refl.append(r)
        with (
            lumaxlike.CubeReader(cubes[-1]) as cube,
            lumaxlike.GeometryReader(obs[-1], cube.info.grid) as reader,
        ):
            geometry.append(reader.read(slice(0, ROWS)))
    arrays = (
        np.stack(refl, axis=-1),
        *(np.stack([g[j] for g in geometry], axis=-2) for j in range(3)),
    )
    args = ["sample", *cubes, "--geometry", *obs, "--units", "r", "--refl-sigma", str(SIGMA)]
    args += ["--free", ",".join(FREE), "--b", "0.3", "--c", "0.4", *SAMPLER, "--chunk", "1"]
    return args, arrays


@pytest.fixture(scope="module")
def reference(stack, tmp_path_factory):
    """An uninterrupted run's GeoTIFF maps: (out path, its stderr)."""
    args, _ = stack
    out = tmp_path_factory.mktemp("sample_reference") / "post.tif"
    import contextlib
    import io

    err = io.StringIO()
    with contextlib.redirect_stderr(err), pytest.MonkeyPatch.context() as patch:
        opened = count_raster_opens(patch)
        code = main([*args, "--out", out])
    assert code == 0, err.getvalue()
    # each cube opened once: the model is made from the bands the run opened (`FromBands`)
    cubes = args[1 : 1 + CUBES]  # ["sample", *cubes, "--geometry", ...]
    assert [opened.count(str(cube)) for cube in cubes] == [1] * CUBES, opened
    return out, err.getvalue()


def read_maps(out, free=FREE):
    maps = {}
    for name, path in result_paths(out, sample_fields(free), main="w_q500").items():
        with rasterio.open(path) as src:
            maps[name] = np.moveaxis(src.read(), 0, -1)
    return maps


def test_sample_command_writes_the_maps_sample_computes(stack, reference):
    _, arrays = stack
    out, err = reference
    assert "lumaxlike sample: 5 cubes (r)" in err and "sampled 9 pixels x 2 bands" in err
    maps = read_maps(out)
    for row in range(ROWS):  # each block of one row: `sample` with that block's seed
        expected = lumaxlike.sample(
            *(a[row] for a in arrays),
            TRUTH,
            free=FREE,
            refl_sigma=SIGMA,
            seed=chunk_seed(SEED, row * COLS),
        )
        for name in FREE:
            for k, suffix in enumerate(("q025", "q160", "q500", "q840", "q975")):
                np.testing.assert_array_equal(
                    maps[f"{name}_{suffix}"][row], expected.quantiles[name][..., k]
                )
            np.testing.assert_array_equal(maps[f"mean_{name}"][row], expected.mean[name])
            np.testing.assert_array_equal(maps[f"rhat_{name}"][row], expected.rhat[name])
            np.testing.assert_array_equal(maps[f"ess_{name}"][row], expected.ess[name])
            np.testing.assert_array_equal(maps[f"ess_tail_{name}"][row], expected.ess_tail[name])
        np.testing.assert_array_equal(maps["status"][row], expected.status)
        np.testing.assert_array_equal(maps["acceptance"][row], expected.acceptance)
        np.testing.assert_array_equal(maps["observations"][row], expected.observations)
    assert maps["observations"][0, 0].tolist() == [CUBES - 1] * BANDS  # the NaN observation
    assert np.all(maps["status"] == Status.CONVERGED)
    assert np.all(maps["w_q025"] <= maps["w_q500"]) and np.all(maps["w_q500"] <= maps["w_q975"])
    record = lumaxlike.read_provenance(out)
    assert record.command.startswith("lumaxlike sample") and record.units == "r"
    settings = record.sample_settings
    assert settings["free"] == list(FREE) and settings["seed"] == SEED
    assert settings["num_samples"] == 1000 and settings["refl_sigma"] == SIGMA
    assert settings["median_maps"] == {"w": str(out.absolute())}
    assert temporary_leftovers(out.parent) == []


def test_a_killed_sample_run_resumes_bit_identical(stack, reference, tmp_path, capsys):
    args, _ = stack
    out = tmp_path / "post.tif"
    kill_mid_run([*args, "--out", out], after=1)
    assert not out.exists() and len(journal_blocks(out)) == 1
    capsys.readouterr()
    # another seed: refused, naming it; the journal stays
    changed = [a if a != str(SEED) else "8" for a in args]
    assert main([*changed, "--out", out, "--resume"]) == 2
    assert "the settings changed: sample_seed" in capsys.readouterr().err
    assert main([*args, "--out", out, "--resume"]) == 0
    assert "resumed: 1 of 3 blocks from an interrupted run" in capsys.readouterr().err
    found, expected = read_maps(out), read_maps(reference[0])
    for name in expected:
        assert found[name].dtype == expected[name].dtype, name
        assert np.array_equal(found[name], expected[name], equal_nan=True), name
    assert lumaxlike.read_provenance(out).resumed == "1 of 3 blocks from an interrupted run"
    assert temporary_leftovers(tmp_path) == []


def test_nothing_mixed_exits_1_with_one_line_and_writes_the_maps(stack, tmp_path, capsys):
    args, _ = stack
    out = tmp_path / "post.nc"
    # an ESS floor far above the 4 x 1000 draws (HMC's bulk ESS may exceed the draws, not
    # 250-fold): no problem can pass it
    assert main([*args, "--min-ess", "1e6", "--out", out]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(
        "lumaxlike sample: error: no problem converged (NOT_MIXED 18): the chains did not mix"
    )
    import xarray as xr

    with xr.open_dataset(out) as maps:
        assert set(sample_fields(FREE)) <= set(maps.data_vars)
        assert maps["status"].dims == ("band", "y", "x")
        assert np.all(maps["status"] == Status.NOT_MIXED)


def test_sample_command_refuses_bad_input_before_sampling(stack, tmp_path, capsys):
    args, _ = stack
    out = tmp_path / "post.tif"
    cases = [
        (["--prior", "b=0.4:0.1"], "prior names 'b', which is not in free"),
        (
            ["--refl-sigma", "0.01,0.02,0.03"],
            "refl_sigma must be positive and finite, one number or one per band",
        ),
        (["--num-chains", "1"], "num_chains must be at least 2"),
        (["--shared", "b"], "shared names 'b', which is not in free"),
        (["--shared", "w"], "shared cannot name 'w'"),
        (["--units", "reff"], "invalid choice: 'reff'"),
    ]
    for extra, message in cases:
        assert main([*args, *extra, "--out", out]) == 2
        assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_sample_file_refuses_a_normalised_product(tmp_path):
    from .mission_products import M3_WAVELENGTHS, write_m3_l2

    warnings.simplefilter("ignore", rasterio.errors.NotGeoreferencedWarning)  # M3 L2: no CRS

    cube = np.full((3, 4, len(M3_WAVELENGTHS)), 0.1, np.float32)  # the header's 4 samples
    paths = write_m3_l2(tmp_path, cube)
    observed = {role: np.full((3, 4), 30.0) for role in ("incidence", "emission", "phase")}
    with pytest.raises(ValueError, match="sample needs cubes at their observed geometries"):
        lumaxlike.sample_file(
            [paths["lbl"], paths["img"]],
            tmp_path / "s.tif",
            geometry=[observed, observed],
            params=TRUTH,
            free=("w",),
            units="radf",
            refl_sigma=0.01,
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(p.name for p in paths.values())


def test_params_from_a_sample_output_takes_its_median_maps_or_refuses():
    """A sample output's record holds the warm start's values of the sampled parameters;
    `--params-from` gives their posterior median maps (as a fit's fitted maps) to the
    commands that take maps, and `invert` refuses them."""
    import argparse

    from lumaxlike._cli.model import fitted_maps, refuse_recorded_maps

    record = argparse.Namespace(
        fit_settings=None, sample_settings={"median_maps": {"w": "s.tif", "b": "s_b_q500.tif"}}
    )
    args = argparse.Namespace(params_from="s.tif", b=None, param_map=None)
    assert fitted_maps(args, record) == {"b": "s_b_q500.tif"}
    with pytest.raises(ValueError, match="starting values of the fitted b"):
        refuse_recorded_maps(args, record, "invert")
    args.b = [0.3]  # given on the command line: the map is not needed
    assert fitted_maps(args, record) == {}


# b shared by a pixel's two bands (w per band): each pixel one joint problem (2 w + 1 b
# from 10 observations); fewer draws than the defaults to keep the joint program cheap
# (tests/test_xarray_sample.py runs the same program: 4-pixel chunks, 2 bands, 5
# observations, these settings)
JOINT_FREE = ("w", "b")
JOINT_SAMPLER = ["--num-samples", "200", "--num-warmup", "100", "--num-chains", "4"]
JOINT_SAMPLER += ["--min-ess", "50", "--seed", str(SEED)]


def joint_args(args):
    """The stack's command line with w, b free and b shared, and the shorter sampler."""
    start = args.index("--free")
    args = args[:start] + ["--free", ",".join(JOINT_FREE), "--shared", "b"] + args[start + 2 :]
    start = args.index("--num-samples")
    return args[:start] + JOINT_SAMPLER + args[start + len(SAMPLER) :]


@pytest.fixture(scope="module")
def joint_reference(stack, tmp_path_factory):
    """An uninterrupted run with --shared b: its GeoTIFF maps' path."""
    args, _ = stack
    out = tmp_path_factory.mktemp("sample_joint") / "joint.tif"
    assert main([*joint_args(args), "--out", out]) == 0
    return out


def test_shared_parameters_are_sampled_jointly_per_pixel(stack, joint_reference, capsys):
    """Each block (one row) is `lumaxlike.sample(shared=("b",))` of its pixels with the
    block's seed, bit for bit: b's quantile, mean, R-hat and ESS maps and the per-pixel
    status, acceptance and divergences are one value per pixel, repeated in both band
    layers; w's are per band. The record says what was shared."""
    _, arrays = stack
    maps = read_maps(joint_reference, JOINT_FREE)
    sampled = 0
    for row in range(ROWS):
        expected = lumaxlike.sample(
            *(a[row] for a in arrays),
            TRUTH,
            free=JOINT_FREE,
            shared=("b",),
            refl_sigma=SIGMA,
            num_samples=200,
            num_warmup=100,
            min_ess=50,
            seed=chunk_seed(SEED, row * COLS),
        )
        assert expected.quantiles["b"].shape == (COLS, 5) and expected.status.shape == (COLS,)
        for name in JOINT_FREE:
            one = (lambda a: a[:, None]) if name == "b" else (lambda a: a)
            for k, suffix in enumerate(("q025", "q160", "q500", "q840", "q975")):
                found = maps[f"{name}_{suffix}"][row]
                np.testing.assert_array_equal(
                    found, np.broadcast_to(one(expected.quantiles[name][..., k]), found.shape)
                )
            for kind, values in (
                ("mean", expected.mean),
                ("rhat", expected.rhat),
                ("ess", expected.ess),
                ("ess_tail", expected.ess_tail),
            ):
                found = maps[f"{kind}_{name}"][row]
                np.testing.assert_array_equal(
                    found, np.broadcast_to(one(values[name]), found.shape)
                )
        for field in ("status", "acceptance", "divergences"):
            found = maps[field][row]
            np.testing.assert_array_equal(
                found, np.broadcast_to(getattr(expected, field)[:, None], found.shape)
            )
        np.testing.assert_array_equal(maps["observations"][row], expected.observations)
        sampled += np.sum(np.isin(expected.status, [Status.CONVERGED, Status.NOT_MIXED]))
    assert sampled == ROWS * COLS  # every joint problem sampled (200 draws: some NOT_MIXED)
    # b differs between pixels (it is each pixel's own), w between bands
    assert np.unique(maps["b_q500"][..., 0]).size == ROWS * COLS
    assert np.all(maps["w_q500"][..., 0] != maps["w_q500"][..., 1])
    settings = lumaxlike.read_provenance(joint_reference).sample_settings
    assert settings["shared"] == ["b"] and settings["free"] == list(JOINT_FREE)
    assert lumaxlike.read_provenance(joint_reference).command.count("--shared b") == 1


def test_a_killed_shared_run_resumes_bit_identical(stack, joint_reference, tmp_path, capsys):
    args, _ = stack
    args = joint_args(args)
    out = tmp_path / "joint.tif"
    kill_mid_run([*args, "--out", out], after=1)
    assert not out.exists() and len(journal_blocks(out)) == 1
    capsys.readouterr()
    unshared = [a for a in args if a not in ("--shared", "b")]  # the settings changed
    assert main([*unshared, "--out", out, "--resume"]) == 2
    assert "the settings changed: sample_shared" in capsys.readouterr().err
    assert main([*args, "--out", out, "--resume"]) == 0
    assert "resumed: 1 of 3 blocks from an interrupted run" in capsys.readouterr().err
    found, expected = read_maps(out, JOINT_FREE), read_maps(joint_reference, JOINT_FREE)
    for name in expected:
        assert found[name].dtype == expected[name].dtype, name
        assert np.array_equal(found[name], expected[name], equal_nan=True), name


def test_sample_with_workers_equals_the_serial_run(stack, reference, tmp_path, capsys):
    """--workers 2: the blocks run on a local dask cluster of two processes; each block
    keeps its own random stream, so the maps are the serial run's, bit for bit."""
    args, _ = stack
    out = tmp_path / "post.tif"
    assert main([*args, "--workers", "2", "--out", out]) == 0, capsys.readouterr().err
    found, expected = read_maps(out), read_maps(reference[0])
    for name in expected:
        assert found[name].dtype == expected[name].dtype, name
        assert np.array_equal(found[name], expected[name], equal_nan=True), name
    assert lumaxlike.read_provenance(out).command.endswith("--workers 2 --out " + str(out))
