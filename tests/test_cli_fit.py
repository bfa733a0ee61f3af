"""`lumaxlike fit`: a stack of co-registered cubes and their OBS rasters -> fitted maps.

Small float64 cubes made from known w, b, c at random geometry; the command's maps equal
`lumaxlike.fit` on the same stacked arrays, with masks (nodata, --incidence-range)."""

import math
import re

import numpy as np
import pytest
import rasterio

import lumaxlike
from lumaxlike import Status
from lumaxlike._cli import main

from .helpers import count_raster_opens, write_angle_stack
from .test_io import WAVELENGTHS, temporary_leftovers, write_raster

TRUTH = lumaxlike.HapkeParams(b=0.25, c=0.5)
START = lumaxlike.HapkeParams(b=0.3, c=0.4)
ROWS, COLS, BANDS, CUBES = 5, 4, 2, 6


@pytest.fixture(scope="module")
def stack(tmp_path_factory):
    """6 cubes of r [1/sr] (one NaN observation at pixel (0, 0)) with OBS rasters; returns
    their paths and the stacked arrays `fit` takes."""
    folder = tmp_path_factory.mktemp("stack")
    rng = np.random.default_rng(31)
    w = rng.uniform(0.2, 0.9, (ROWS, COLS, BANDS))

    def one_nan(k, r, path):
        if k == 2 and path is None:
            r[0, 0] = np.nan

    return (*write_angle_stack(folder, w, TRUTH, CUBES, rng, one_nan), w)


def read_map(path):
    with rasterio.open(path) as src:
        return np.moveaxis(src.read(), 0, -1), src.tags()


def test_fit_command_writes_the_maps_fit_computes(tmp_path, capsys, stack, monkeypatch):
    cubes, obs, arrays, w = stack
    out = tmp_path / "fit.tif"
    opened = count_raster_opens(monkeypatch)
    limit = ["--incidence-range", "0,50"]
    code = main(
        [
            "fit",
            *cubes,
            "--geometry",
            *obs,
            "--units",
            "r",
            "--free",
            "w,b,c",
            "--b",
            "0.3",
            "--c",
            "0.4",
            *limit,
            "--chunk",
            "2",
            "--out",
            out,
        ]
    )
    err = capsys.readouterr().err
    assert code == 0, err
    assert "lumaxlike fit: 6 cubes" in err and "CONVERGED" in err
    # each cube opened once: the model is made from the bands the run opened (`FromBands`)
    assert [opened.count(str(cube)) for cube in cubes] == [1] * CUBES, opened
    expected = lumaxlike.fit(
        *arrays,
        START,
        free=("w", "b", "c"),
        solver="numba",
        observation_limits={"incidence": (0.0, math.radians(50.0))},
    )
    names = {"w": out, "b": tmp_path / "fit_b.tif", "c": tmp_path / "fit_c.tif"}
    for name, path in names.items():
        np.testing.assert_allclose(read_map(path)[0], expected[name], rtol=0, atol=1e-12)
        sigma = read_map(tmp_path / f"fit_sigma_{name}.tif")[0]
        np.testing.assert_allclose(sigma, expected.sigma(name), rtol=1e-9, equal_nan=True)
    status, tags = read_map(tmp_path / "fit_status.tif")
    np.testing.assert_array_equal(status, expected.status)
    np.testing.assert_array_equal(
        read_map(tmp_path / "fit_observations.tif")[0], expected.observations
    )
    assert "6=too_few_observations" in tags["status_codes"]
    assert expected.observations.min() < 6 and np.any(expected.status == Status.CONVERGED)
    converged = expected.status == Status.CONVERGED
    np.testing.assert_allclose(read_map(out)[0][converged], w[converged], rtol=0, atol=1e-6)
    record = lumaxlike.read_provenance(out)
    assert (
        record.solver == "numba"
        and record.units == "r"
        and record.command.startswith("lumaxlike fit")
    )
    assert read_map(out)[1]["lumaxlike_fit_free"] == '["w", "b", "c"]'
    assert temporary_leftovers(tmp_path) == []


def test_fit_command_bad_input_exits_2_and_writes_nothing(tmp_path, capsys, stack):
    cubes, obs, _, _ = stack
    out = tmp_path / "fit.tif"
    base = ["fit", *cubes[:4], "--units", "r", "--free", "w,b,c", "--out", out]
    cases = [
        ([*base, "--geometry", *obs[:3]], "3 rasters for 4 cubes"),
        ([*base, "--geometry", *obs[:4], "--phase-range", "10"], "--phase-range"),
        ([*base, "--geometry", *obs[:4], "--free", "w,albedo"], "albedo"),
        (
            [*base, "--geometry", *obs[:4], "--min-observations", "5"],
            "min_observations = 5 exceeds the 4",
        ),
    ]
    for args, message in cases:
        assert main([str(a) for a in args]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_fit_command_refuses_bad_priors_before_writing(tmp_path, capsys, stack):
    """A prior mean outside the parameter's bounds (roughness in degrees, as its start), a
    NaN or infinite value, or a parameter given twice: exit 2, one line, nothing written."""
    cubes, obs, _, _ = stack
    out = tmp_path / "fit.tif"
    base = ["fit", *cubes[:4], "--geometry", *obs[:4], "--units", "r", "--out", out]
    base += ["--free", "w,b,roughness", "--roughness-deg", "15", "--refl-sigma", "1e-4"]
    cases = [
        (["--prior", "roughness=50:5"], "the mean 50 deg lies outside roughness's bounds"),
        (["--prior", "b=5:0.001"], "--prior b=5:0.001: the mean 5 lies outside b's bounds [0, 1]"),
        (["--prior", "b=nan:0.1"], "with a finite MEAN and a finite SIGMA > 0"),
        (["--prior", "b=0.3:inf"], "with a finite MEAN and a finite SIGMA > 0"),
        (["--prior", "b=0.3:0.1", "--prior", "b=0.4:0.1"], "--prior gives b twice"),
    ]
    for extra, message in cases:
        assert main([str(a) for a in [*base, *extra]]) == 2
        err = capsys.readouterr().err
        assert message in err and err.count("\n") == 1, err
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_prior_option_takes_roughness_in_degrees():
    from lumaxlike._cli.options import prior_dict

    prior = prior_dict([("roughness", (20.0, 5.0)), ("b", (0.3, 0.1))])
    assert prior == {"roughness": (math.radians(20.0), math.radians(5.0)), "b": (0.3, 0.1)}


def test_fit_file_refuses_a_nan_prior_before_writing(tmp_path, stack):
    cubes, obs, _, _ = stack
    with pytest.raises(ValueError, match=r"prior\['b'\] mean must be finite"):
        lumaxlike.fit_file(
            cubes[:4],
            tmp_path / "fit.tif",
            geometry=obs[:4],
            params=START,
            free=("w", "b"),
            units="r",
            refl_sigma=1e-4,
            prior={"b": (math.nan, 0.1)},
        )
    assert list(tmp_path.iterdir()) == []


def test_fit_refuses_a_cube_twice_or_cubes_with_other_bands(tmp_path, capsys, stack):
    """Both were fitted without a word: a stack of cubes whose band centres differ (same
    count), and the same cube passed twice (one observation counted twice)."""
    cubes, obs, _, _ = stack
    with rasterio.open(cubes[1]) as src:
        other = write_raster(
            tmp_path / "other.tif", src.read(), envi_wavelengths=WAVELENGTHS[1 : BANDS + 1]
        )
    linked = tmp_path / "again.tif"
    linked.symlink_to(cubes[0])
    out = tmp_path / "fit.tif"
    cases = [
        (
            [cubes[0], other, *cubes[2:4]],
            rf"cube {other} has other band centres than cube {cubes[0]}",
        ),
        ([cubes[0], cubes[1], cubes[0], cubes[3]], rf"the cube {cubes[0]} is given twice"),
        (
            [cubes[0], cubes[1], linked, cubes[3]],
            rf"the cube {linked} is given twice \(also as {cubes[0]}\)",
        ),
    ]
    for stacked, message in cases:
        code = main(
            [
                str(a)
                for a in [
                    "fit",
                    *stacked,
                    "--geometry",
                    *obs[:4],
                    "--units",
                    "r",
                    "--free",
                    "w",
                    "--out",
                    out,
                ]
            ]
        )
        err = capsys.readouterr().err
        assert code == 2 and err.count("\n") == 1 and re.search(message, err), err
    with pytest.raises(ValueError, match="given twice"):
        lumaxlike.fit_file(
            [cubes[0], cubes[0]], out, geometry=obs[:2], params=START, free="w", units="r"
        )
    assert sorted(p.name for p in tmp_path.iterdir()) == ["again.tif", "other.tif"]


def test_params_from_a_fit_output_uses_its_fitted_maps_or_refuses(tmp_path, capsys, stack):
    """A fit's record held its starting values, so `invert --params-from fit.tif` used
    b = 0.3 where fit_b.tif holds the fitted b: the record says what was fitted, invert
    (one value per band) refuses, normalize uses the fitted maps."""
    cubes, obs, _, _ = stack
    out = tmp_path / "fit.tif"
    assert (
        main(
            [
                str(a)
                for a in [
                    "fit",
                    *cubes,
                    "--geometry",
                    *obs,
                    "--units",
                    "r",
                    "--free",
                    "w,b,c",
                    "--b",
                    "0.3",
                    "--c",
                    "0.4",
                    "--out",
                    out,
                ]
            ]
        )
        == 0
    )
    record = lumaxlike.read_provenance(tmp_path / "fit_sigma_b.tif")
    assert record.params[0].b == 0.3 and record.fit_settings["free"] == ["w", "b", "c"]
    assert record.fit_settings["fitted_maps"] == {
        n: str(tmp_path / f"fit_{n}.tif") for n in ("b", "c")
    } | {"w": str(out)}
    capsys.readouterr()
    code = main(
        [
            str(a)
            for a in [
                "invert",
                cubes[0],
                "--params-from",
                out,
                "--geometry",
                obs[0],
                "--out",
                tmp_path / "w.tif",
            ]
        ]
    )
    err = capsys.readouterr().err
    assert (
        code == 2 and err.count("\n") == 1 and "is a fit's output" in err and "fit_b.tif" in err
    ), err
    # with every fitted parameter given, the record's other settings are usable
    assert (
        main(
            [
                str(a)
                for a in [
                    "invert",
                    cubes[0],
                    "--params-from",
                    out,
                    "--geometry",
                    obs[0],
                    "--b",
                    "0.25",
                    "--c",
                    "0.5",
                    "--out",
                    tmp_path / "w.tif",
                ]
            ]
        )
        == 0
    )
    common = [cubes[0], "--geometry", obs[0], "--units", "r"]
    assert (
        main(
            [
                str(a)
                for a in ["normalize", *common, "--params-from", out, "--out", tmp_path / "n1.tif"]
            ]
        )
        == 0
    )
    assert (
        main(
            [
                str(a)
                for a in [
                    "normalize",
                    *common,
                    "--param-map",
                    f"b={tmp_path / 'fit_b.tif'}",
                    "--param-map",
                    f"c={tmp_path / 'fit_c.tif'}",
                    "--out",
                    tmp_path / "n2.tif",
                ]
            ]
        )
        == 0
    )
    np.testing.assert_array_equal(
        read_map(tmp_path / "n1.tif")[0], read_map(tmp_path / "n2.tif")[0]
    )
    assert dict(lumaxlike.read_provenance(tmp_path / "n1.tif").param_maps) == {
        "b": str(tmp_path / "fit_b.tif"),
        "c": str(tmp_path / "fit_c.tif"),
    }


def test_fit_command_joint_shared_and_prior(tmp_path, capsys, stack):
    """--shared c --prior b=0.3:0.1: the maps of `lumaxlike.fit(..., shared=, prior=)`, a
    shared map repeated in every band layer, dfs and cost maps, and the settings recorded."""
    cubes, obs, arrays, _ = stack
    out = tmp_path / "joint.tif"
    code = main(
        [
            "fit",
            *cubes,
            "--geometry",
            *obs,
            "--units",
            "r",
            "--free",
            "w,b,c",
            "--b",
            "0.3",
            "--c",
            "0.4",
            "--shared",
            "c",
            "--prior",
            "b=0.3:0.1",
            "--refl-sigma",
            "1e-4",
            "--out",
            out,
        ]
    )
    assert code == 0, capsys.readouterr().err
    expected = lumaxlike.fit(
        *arrays,
        START,
        free=("w", "b", "c"),
        shared=("c",),
        prior={"b": (0.3, 0.1)},
        refl_sigma=1e-4,
        solver="numba",
    )
    np.testing.assert_allclose(read_map(out)[0], expected["w"], rtol=0, atol=1e-12)
    c_map = read_map(tmp_path / "joint_c.tif")[0]
    np.testing.assert_allclose(
        c_map, np.repeat(expected["c"][..., None], BANDS, axis=-1), rtol=0, atol=1e-12
    )
    np.testing.assert_allclose(
        read_map(tmp_path / "joint_dfs_b.tif")[0], expected.dfs["b"], rtol=1e-9
    )
    status = read_map(tmp_path / "joint_status.tif")[0]
    np.testing.assert_array_equal(status, np.repeat(expected.status[..., None], BANDS, axis=-1))
    assert np.any(expected.status == Status.CONVERGED)
    tags = read_map(out)[1]
    assert (
        tags["lumaxlike_fit_shared"] == '["c"]'
        and tags["lumaxlike_fit_prior"] == '{"b": [0.3, 0.1]}'
    )
    assert not (tmp_path / "joint_residual.tif").exists() and (tmp_path / "joint_cost.tif").exists()


def test_fit_command_starts(tmp_path, capsys, stack):
    """--starts 3 with --shared c: the maps of `lumaxlike.fit(..., starts=3)`, recorded;
    refused, naming it, without --shared or --prior."""
    cubes, obs, arrays, _ = stack
    out = tmp_path / "starts.tif"
    argv = [
        "fit",
        *cubes,
        "--geometry",
        *obs,
        "--units",
        "r",
        "--free",
        "w,b,c",
        "--b",
        "0.3",
        "--c",
        "0.4",
        "--sigma",
        "1e-4",
        "--starts",
        "3",
        "--out",
        out,
    ]
    code = main([*argv, "--shared", "c"])
    assert code == 0, capsys.readouterr().err
    expected = lumaxlike.fit(
        *arrays,
        START,
        free=("w", "b", "c"),
        shared=("c",),
        refl_sigma=1e-4,
        solver="numba",
        starts=3,
    )
    np.testing.assert_allclose(read_map(out)[0], expected["w"], rtol=0, atol=1e-12)
    status = read_map(tmp_path / "starts_status.tif")[0]
    np.testing.assert_array_equal(status, np.repeat(expected.status[..., None], BANDS, axis=-1))
    assert read_map(out)[1]["lumaxlike_fit_starts"] == "3"
    code = main([str(a) for a in argv[:-1]] + [str(tmp_path / "plain.tif")])
    err = capsys.readouterr().err
    assert code == 2 and "starts needs a joint fit" in err, err
