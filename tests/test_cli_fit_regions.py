"""`lumaxlike fit --regions LABELS --regional NAME`: a regional fit of a stack of cube
files, streamed (regions spanning blocks, fitted group by group) and resumable; its maps
equal the in-memory `lumaxlike.fit(regions=...)` on the same stacked arrays."""

import subprocess
import sys

import numpy as np
import pytest

import lumaxlike
from lumaxlike import Status
from lumaxlike._cli import main
from lumaxlike._io import read_cube, result_paths

from .test_cli_fit import BANDS, COLS, ROWS, START, read_map, stack  # noqa: F401 (a fixture)
from .test_io import write_raster
from .test_resume import journal_blocks, kill_mid_run

FIELDS = (
    "w",
    "b",
    "c",
    "sigma_w",
    "sigma_b",
    "sigma_c",
    "status",
    "iterations",
    "dfs_w",
    "dfs_b",
    "dfs_c",
    "cost",
    "observations",
)


@pytest.fixture(scope="module")
def labels(tmp_path_factory):
    """3 regions of 2 rows each but the last (1 row) on the 5 x 4 grid, one pixel left
    out (-1): with one row per block every region spans blocks."""
    regions = np.repeat(np.arange(ROWS) // 2, COLS).reshape(ROWS, COLS).astype(np.int16)
    regions[1, 2] = -1
    path = write_raster(tmp_path_factory.mktemp("labels") / "tiles.tif", regions[None])
    return path, regions


def args_of(cubes, obs, out, labels_path, *extra):
    return [
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
        "--regions",
        labels_path,
        "--regional",
        "c",
        "--refl-sigma",
        "1e-4",
        "--chunk",
        "1",
        *extra,
        "--out",
        out,
    ]


def test_fit_command_regional_maps_equal_the_in_memory_fit(tmp_path, capsys, stack, labels):  # noqa: F811
    cubes, obs, arrays, _ = stack
    labels_path, regions = labels
    out = tmp_path / "regional.tif"
    # a cap of 3e-5 GiB (32 kB) holds one region at a time: three groups, each read over
    # its rows block by block
    code = main(args_of(cubes, obs, out, labels_path, "--region-memory", "3e-5"))
    err = capsys.readouterr().err
    assert code == 0, err
    expected = lumaxlike.fit(
        *arrays,
        START,
        free=("w", "b", "c"),
        regions=regions,
        regional=("c",),
        refl_sigma=1e-4,
        solver="numba",
    )
    assert len(expected.region_labels) == 3 and np.all(expected.region_status == Status.CONVERGED)
    paths = result_paths(out, FIELDS)
    per_pixel = {
        "status": expected.status,
        "iterations": expected.iterations,
        "cost": expected.cost,
        "c": expected["c"],
        "sigma_c": expected.sigma("c"),
        "dfs_c": expected.dfs["c"],
    }
    for name in FIELDS:
        if name in per_pixel:
            want = np.repeat(np.asarray(per_pixel[name])[..., None], BANDS, axis=-1)
        elif name == "observations":
            want = expected.observations
        elif name.startswith("sigma_"):
            want = expected.sigma(name[6:])
        elif name.startswith("dfs_"):
            want = expected.dfs[name[4:]]
        else:
            want = expected[name]
        found = read_map(paths[name])[0]
        # the same computation on the same pixels in the same order: equal to the bit
        np.testing.assert_array_equal(found, want, err_msg=name)
    assert read_map(paths["status"])[0][1, 2, 0] == Status.TOO_FEW_OBSERVATIONS
    tags = read_map(out)[1]
    assert tags["lumaxlike_fit_regional"] == '["c"]'
    assert tags["lumaxlike_fit_regions"] == f'"{labels_path.absolute()}"'


def test_a_killed_regional_fit_resumes_bit_identical(tmp_path, capsys, stack, labels):  # noqa: F811
    cubes, obs, _, _ = stack
    labels_path, _ = labels
    (tmp_path / "ref").mkdir()
    reference = tmp_path / "ref" / "fit.tif"
    # compiles the kernels here and caches them, so the two runs below load the same code
    # (measured: a joint kernel compiled afresh and one loaded from numba's cache can
    # differ in the last bits, so both runs compared take them from the cache)
    assert main(args_of(cubes, obs, reference, labels_path, "--overwrite")) == 0
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "lumaxlike",
            *map(str, args_of(cubes, obs, reference, labels_path, "--overwrite")),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    out = tmp_path / "fit.tif"
    kill_mid_run(args_of(cubes, obs, out, labels_path), after=2)
    folder = out.parent / f".{out.name}.lumaxlike-journal" / "regions"
    assert not out.exists() and len(journal_blocks(out)) == 2
    assert [p.name for p in folder.iterdir()] == ["group-00000"]  # the regions, kept
    capsys.readouterr()
    assert main([*args_of(cubes, obs, out, labels_path), "--resume"]) == 0
    assert (
        "resumed: 1 of 1 region groups and 2 of 5 blocks from an interrupted run"
        in capsys.readouterr().err
    )
    for name in FIELDS:
        found, expected = (read_cube(result_paths(p, FIELDS)[name])[0] for p in (out, reference))
        assert found.dtype == expected.dtype and np.array_equal(found, expected, equal_nan=True)


def test_a_resume_counts_the_region_groups_it_took(tmp_path, capsys, stack, labels, monkeypatch):  # noqa: F811
    """A run that died after its first region group (its journal kept, as by a SIGKILL):
    the resume says it took that group, not "0 of 5 blocks"."""
    from lumaxlike._files.regions import RegionStore
    from lumaxlike._run.journal import Journal

    cubes, obs, _, _ = stack
    labels_path, _ = labels
    out = tmp_path / "fit.tif"
    args = args_of(cubes, obs, out, labels_path, "--region-memory", "3e-5")  # 3 groups
    save = RegionStore.save

    def save_then_die(self, number, index, block):
        save(self, number, index, block)
        raise RuntimeError("died")

    with monkeypatch.context() as patch:
        patch.setattr(RegionStore, "save", save_then_die)
        patch.setattr(Journal, "remove", lambda self: None)  # kept, as after a SIGKILL
        assert main(args) == 1
    capsys.readouterr()
    assert main([*args, "--resume"]) == 0
    assert (
        "resumed: 1 of 3 region groups and 0 of 5 blocks from an interrupted run"
        in capsys.readouterr().err
    )


def test_a_region_above_the_memory_cap_is_refused_before_any_fit(tmp_path, capsys, stack, labels):  # noqa: F811
    cubes, obs, _, _ = stack
    labels_path, _ = labels
    out = tmp_path / "fit.tif"
    assert main(args_of(cubes, obs, out, labels_path, "--region-memory", "1e-6")) == 2
    err = capsys.readouterr().err
    assert (
        "region 1 of" in err
        and "has 8 pixels" in err
        and "above the cap" in err
        and "--region-memory" in err
    )
    assert not list(tmp_path.iterdir())


def test_region_groups_on_two_workers_equal_the_serial_run(tmp_path, capsys, stack, labels):  # noqa: F811
    """--workers 2: each of the three groups (the cap holds one region) is a task of the
    local cluster's workers; the maps equal the run in this process."""
    cubes, obs, _, _ = stack
    labels_path, _ = labels
    serial, parallel = tmp_path / "serial.tif", tmp_path / "parallel.tif"
    cap = ("--region-memory", "3e-5")
    assert main(args_of(cubes, obs, serial, labels_path, *cap)) == 0, capsys.readouterr().err
    code = main(args_of(cubes, obs, parallel, labels_path, *cap, "--workers", "2"))
    assert code == 0, capsys.readouterr().err
    for name in FIELDS:
        found, expected = (read_cube(result_paths(p, FIELDS)[name])[0] for p in (parallel, serial))
        assert found.dtype == expected.dtype, name
        if name in ("status", "iterations", "observations"):
            np.testing.assert_array_equal(found, expected, err_msg=name)
        elif name == "cost":  # noise-free cubes: the cost at the optimum is rounding, ~1e-23
            np.testing.assert_allclose(found, expected, rtol=0, atol=1e-20, err_msg=name)
        else:
            # the workers load the joint kernel from numba's cache, this process may have
            # compiled it afresh: the two can differ in the last bits (see the resume test)
            np.testing.assert_allclose(found, expected, rtol=1e-12, atol=0, err_msg=name)
