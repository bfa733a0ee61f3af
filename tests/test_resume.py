"""Resumable runs: a file run killed with SIGKILL continues with ``--resume`` from its
finished blocks, and its maps are bit-identical to an uninterrupted run's; a resume with
changed inputs or settings is refused, naming what changed."""

import os
import signal
import subprocess
import sys

import numpy as np
import pytest

from lumaxlike import read_provenance
from lumaxlike._cli import main
from lumaxlike._io import read_cube, result_paths
from lumaxlike._run.journal import JOURNAL_MARK

from .test_cli import invert_args
from .test_cli_fit import stack  # noqa: F401 (a fixture)
from .test_io import make_scene, write_scene

pytestmark = pytest.mark.slow  # killed and resumed command-line runs

# Runs the command line in a fresh process that kills itself with SIGKILL once the journal
# holds `after` finished blocks: no clean-up runs, as when a node is lost.
KILLED_RUN = """
import os, signal, sys
from lumaxlike._run import journal
record = journal.Journal.record
def record_then_die(self, rows, block):
    record(self, rows, block)
    if len(self.finished) == {after}:
        os.kill(os.getpid(), signal.SIGKILL)
journal.Journal.record = record_then_die
from lumaxlike._cli import main
sys.exit(main(sys.argv[1:]))
"""

MAPS = ("w", "status", "iterations", "residual")


@pytest.fixture
def scene(tmp_path):
    cube, obs, _ = write_scene(tmp_path, make_scene(rows=8, cols=6, bands=3))
    return cube, obs


def kill_mid_run(args, after):
    """Run the command line until ``after`` blocks are journaled, then SIGKILL it."""
    done = subprocess.run(
        [sys.executable, "-c", KILLED_RUN.format(after=after), *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == -signal.SIGKILL, done.stderr


def journal_blocks(out):
    folder = out.parent / f".{out.name}{JOURNAL_MARK}"
    return sorted(p.name for p in folder.glob("rows-*.npz"))


def maps(out):
    return [read_cube(path)[0] for path in result_paths(out, MAPS).values()]


def assert_bit_identical(found, expected):
    for a, b in zip(found, expected, strict=True):
        assert a.dtype == b.dtype and np.array_equal(a, b, equal_nan=True)


def test_a_killed_run_resumes_bit_identical_and_refuses_changed_inputs(
    tmp_path, scene, capsys, monkeypatch
):
    cube, obs = scene
    (tmp_path / "ref").mkdir()
    reference = tmp_path / "ref" / "w.tif"
    assert main(invert_args(cube, obs, reference, "--chunk", "2")) == 0
    out = tmp_path / "w.tif"
    args = invert_args(cube, obs, out, "--chunk", "2")  # 4 blocks of 2 rows
    kill_mid_run(args, after=2)
    assert not out.exists() and len(journal_blocks(out)) == 2
    capsys.readouterr()

    # changed settings or inputs: refused (exit 2), naming what changed; the journal stays
    assert main([*args, "--b", "0.3", "--resume"]) == 2
    assert "cannot resume w.tif: the settings changed: param_b" in capsys.readouterr().err
    stat = os.stat(cube)
    os.utime(cube, ns=(stat.st_atime_ns, stat.st_mtime_ns + 10**9))
    assert main([*args, "--resume"]) == 2
    assert f"the input {cube.resolve()} changed (modification time)" in capsys.readouterr().err
    os.utime(cube, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert not out.exists() and len(journal_blocks(out)) == 2

    from lumaxlike._operations import invert as tasks

    solved = []
    invert_block = tasks.invert_block

    def counted(*block_args, **kwargs):
        solved.append(block_args[0].shape[0])
        return invert_block(*block_args, **kwargs)

    monkeypatch.setattr(tasks, "invert_block", counted)
    assert main([*args, "--resume"]) == 0
    assert "resumed: 2 of 4 blocks from an interrupted run" in capsys.readouterr().err
    assert solved == [2, 2]  # only the two blocks the killed run had not finished
    assert_bit_identical(maps(out), maps(reference))
    assert read_provenance(out).resumed == "2 of 4 blocks from an interrupted run"
    assert read_provenance(reference).resumed is None
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


def test_a_killed_run_with_workers_resumes_bit_identical(tmp_path, scene, capsys):
    cube, obs = scene
    (tmp_path / "ref").mkdir()
    reference = tmp_path / "ref" / "w.nc"
    assert main(invert_args(cube, obs, reference, "--chunk", "1")) == 0
    out = tmp_path / "w.nc"
    args = invert_args(cube, obs, out, "--chunk", "1", "--workers", "2")  # 8 blocks
    kill_mid_run(args, after=3)
    assert not out.exists() and len(journal_blocks(out)) == 3
    capsys.readouterr()
    assert main([*args, "--resume"]) == 0
    assert "resumed: 3 of 8 blocks from an interrupted run" in capsys.readouterr().err
    import xarray as xr

    with xr.open_dataset(out) as found, xr.open_dataset(reference) as expected:
        for name in MAPS:
            assert found[name].dtype == expected[name].dtype
            assert np.array_equal(found[name].values, expected[name].values, equal_nan=True), name
        assert found.attrs["lumaxlike_resumed"] == '"3 of 8 blocks from an interrupted run"'


def test_resume_without_an_interrupted_run_starts_afresh(tmp_path, scene, capsys):
    cube, obs = scene
    out = tmp_path / "w.tif"
    assert main(invert_args(cube, obs, out, "--resume")) == 0
    assert (
        "resumed: nothing: no interrupted run of these outputs was found" in capsys.readouterr().err
    )
    assert read_provenance(out).resumed is None


def test_a_killed_fit_resumes_bit_identical(tmp_path, stack, capsys):  # noqa: F811
    # fit reads a stack of cubes per block (its own reader), through the same journal
    cubes, obs, _, _ = stack
    args = ["fit", *cubes, "--geometry", *obs, "--units", "r", "--free", "w,b", "--chunk", "1"]
    (tmp_path / "ref").mkdir()
    reference = tmp_path / "ref" / "fit.tif"
    assert main([*args, "--out", reference]) == 0
    out = tmp_path / "fit.tif"
    kill_mid_run([*args, "--out", out], after=2)
    assert not out.exists() and len(journal_blocks(out)) == 2
    capsys.readouterr()
    assert main([*args, "--out", out, "--resume"]) == 0
    assert "resumed: 2 of 5 blocks from an interrupted run" in capsys.readouterr().err
    fields = ("w", "b", "sigma_w", "sigma_b", "status", "iterations", "residual", "observations")
    for name in fields:
        found, expected = (
            read_cube(result_paths(path, fields)[name])[0] for path in (out, reference)
        )
        assert found.dtype == expected.dtype and np.array_equal(found, expected, equal_nan=True), (
            name
        )
