"""Files survive faults: concurrent runs, signals, killed parents, damaged inputs; CLI errors
are one line."""

import contextlib
import os
import re
import signal
import subprocess
import sys
import time

import numpy as np
import psutil
import pytest
import rasterio
import rasterio.shutil

from lumaxlike._cli import main
from lumaxlike._io import read_cube
from lumaxlike._io.write.atomic import TEMP_MARK, AtomicOutputs, remove_stale_temporaries
from lumaxlike._signals import Interrupted, interruptible, raise_if_interrupted, stop_on_signals

from .test_cli import invert_args
from .test_io import digest, make_scene, temporary_leftovers, write_raster, write_scene

pytestmark = pytest.mark.slow  # signals and kills of command-line runs

MAPS = ("w.tif", "w_status.tif", "w_iterations.tif", "w_residual.tif")
# the one line a run prints once it has published its outputs
COMPLETED = re.compile(r"^lumaxlike invert: .* -> .*, solver \w+: inverted .*$")


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    """A 40 x 30 scene (inverts in well under a second)."""
    folder = tmp_path_factory.mktemp("small")
    return folder, *write_scene(folder, make_scene(rows=40, cols=30))[:2]


@pytest.fixture(scope="module")
def large(tmp_path_factory):
    """A 400 x 200 scene: a couple of seconds of inversion by blocks of 10 rows."""
    folder = tmp_path_factory.mktemp("large")
    return folder, *write_scene(folder, make_scene(rows=400, cols=200))[:2]


def start(*args):
    return subprocess.Popen(
        [sys.executable, "-m", "lumaxlike", *map(str, args)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # faulthandler: a run sent SIGABRT prints every thread's stack (`ended_within`)
        env={**os.environ, "PYTHONFAULTHANDLER": "1"},
    )


def ended_within(run, timeout: float, what: str) -> int:
    """`run`'s exit code once it ends within `timeout` seconds; otherwise the test fails
    with every thread's stack of the hung run (SIGABRT: faulthandler's dump) and `what`."""
    try:
        return run.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        run.send_signal(signal.SIGABRT)
        run.wait(timeout=60)
        err = run.communicate(timeout=60)[1]
        pytest.fail(f"{what}: the run had not ended after {timeout} s; its stderr:\n{err}")


@contextlib.contextmanager
def running(*args):
    """`start`, killed on leaving if still running: a run that hangs fails its test (its
    wait times out) instead of stopping the suite."""
    with start(*args) as run:
        try:
            yield run
        finally:
            if run.poll() is None:
                run.kill()


def error_lines(err):
    """stderr lines other than the line of a completed run."""
    return [line for line in err.strip().splitlines() if not COMPLETED.match(line)]


def completed(err) -> bool:
    """True when the run got past publishing its outputs (its last safe point)."""
    return any(COMPLETED.match(line) for line in err.strip().splitlines())


def wait_for(condition, timeout=60.0):
    deadline = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < deadline, "timed out"
        time.sleep(0.02)


def temporaries(folder):
    return [p for p in folder.iterdir() if TEMP_MARK in p.name]


# ----------------------------------------------------------------------------- concurrent runs


def read_set(folder):
    return [read_cube(folder / name)[0] for name in MAPS]


def test_two_runs_into_one_output_leave_one_consistent_set(tmp_path, capsys, small):
    _, cube, obs = small
    options = {"a": ["--b", "0.2", "--max-iter", "3"], "b": ["--b", "0.3"]}
    expected = {}
    for key, extra in options.items():
        (tmp_path / key).mkdir()
        assert main(invert_args(cube, obs, tmp_path / key / "w.tif", *extra)) == 0
        expected[key] = read_set(tmp_path / key)
    capsys.readouterr()
    for trial in range(6):
        folder = tmp_path / f"trial{trial}"
        folder.mkdir()
        overwrite = ["--overwrite"] if trial % 2 else []
        runs = [
            start(*invert_args(cube, obs, folder / "w.tif", *extra, *overwrite))
            for extra in options.values()
        ]
        done = [(run.wait(timeout=300), run.communicate(timeout=60)[1]) for run in runs]
        codes = sorted(code for code, _ in done)
        assert codes in ([0, 0], [0, 2]) if overwrite else codes == [0, 2], done
        for code, err in done:
            if code == 2:
                assert len(error_lines(err)) == 1 and "w.tif" in err, err
        assert sorted(p.name for p in folder.iterdir()) == sorted(MAPS)
        found = read_set(folder)
        origins = [
            key
            for key, maps in expected.items()
            if all(np.array_equal(a, b, equal_nan=True) for a, b in zip(found, maps))
        ]
        assert len(origins) == 1, f"trial {trial}: the files come from different runs"


def test_a_held_output_refuses_a_second_writer_naming_it(tmp_path, capsys, small):
    _, cube, obs = small
    out = tmp_path / "w.tif"
    holder = AtomicOutputs([out], overwrite=False)  # holds the output set's lock
    code = main(invert_args(cube, obs, out, "--overwrite"))
    holder.discard()
    lines = error_lines(capsys.readouterr().err)
    assert code == 2 and len(lines) == 1 and f"{out} is being written by another" in lines[0]
    assert sorted(p.name for p in tmp_path.iterdir()) == []  # the lock file went with its holder


# ----------------------------------------------------------------------------- signals


def test_a_signal_lost_in_a_finalizer_still_stops_the_run(monkeypatch):
    lost = []
    monkeypatch.setattr(sys, "unraisablehook", lost.append)

    class Reported:
        def __del__(self):
            raise RuntimeError("not a signal")

    class Finalized:
        def __del__(self):
            os.kill(os.getpid(), signal.SIGINT)
            for _ in range(10_000):  # the handler runs between these bytecodes, in __del__
                pass

    previous = signal.getsignal(signal.SIGINT)
    with stop_on_signals() as stopped_by, interruptible():
        Finalized()  # Python swallows the Interrupted raised in __del__, silently
        Reported()  # other lost exceptions are still reported
        assert [type(u.exc_value) for u in lost] == [RuntimeError]
        assert stopped_by() == signal.SIGINT
        with pytest.raises(Interrupted) as caught:
            raise_if_interrupted()  # ... is raised again at the next safe point
        assert caught.value.exit_code == 130
    assert signal.getsignal(signal.SIGINT) is previous
    raise_if_interrupted()  # no handlers installed: nothing recorded


def test_a_lost_signal_stops_the_run_at_the_next_block(tmp_path, capsys, small, monkeypatch):
    from lumaxlike import _signals
    from lumaxlike._operations import invert as block_inversion

    _, cube, obs = small
    out = tmp_path / "w.tif"
    assert main(invert_args(cube, obs, out)) == 0
    before = {p.name: digest(p) for p in tmp_path.iterdir()}
    invert_block = block_inversion.invert_block

    def signalled_then_swallowed(*args, **kwargs):
        _signals._state.received = signal.SIGTERM  # as if the handler's exception was lost
        return invert_block(*args, **kwargs)

    monkeypatch.setattr(block_inversion, "invert_block", signalled_then_swallowed)
    capsys.readouterr()
    code = main(invert_args(cube, obs, out, "--b", "0.3", "--chunk", "5", "--overwrite"))
    lines = error_lines(capsys.readouterr().err)
    assert code == 143 and lines == ["lumaxlike invert: stopped by SIGTERM"]
    assert {p.name: digest(p) for p in tmp_path.iterdir()} == before


def test_sigint_and_sigterm_at_any_moment_leave_old_outputs_and_no_temporaries(tmp_path, large):
    _, cube, obs = large
    out = tmp_path / "w.tif"
    args = invert_args(cube, obs, out, "--chunk", "10", "--overwrite")
    for _ in range(2):  # the first run may compile numba's kernels: time the second
        with running(*args) as run:
            wait_for(lambda: temporaries(tmp_path))
            began = time.monotonic()
            assert run.wait(timeout=300) == 0, run.communicate(timeout=60)[1]
            writing = time.monotonic() - began
    before = {p.name: digest(p) for p in tmp_path.iterdir()}
    assert sorted(before) == sorted(MAPS)
    moments = [
        (signal.SIGTERM, "start-up"),
        (signal.SIGINT, "locked"),
        (signal.SIGTERM, "locked"),
        (signal.SIGINT, "mid"),
        (signal.SIGTERM, "mid"),
        (signal.SIGINT, "late"),
    ]
    for signum, moment in moments:
        with running(*args) as run:
            stop_at(run, moment, tmp_path, writing)
            # "late" may come after a run on a machine less loaded than when `writing`
            # was timed: the complete run is then checked below as one signalled too late
            ended = run.poll() is not None
            assert not ended or moment == "late", f"{moment}: the run ended before the signal"
            if not ended:
                run.send_signal(signum)
            code = ended_within(run, 120, f"{signal.Signals(signum).name} at {moment!r}")
            err = run.communicate(timeout=60)[1]
        if moment == "late" and completed(err):
            # on a loaded machine "late" can fall after the outputs were published: the
            # run is then complete (exit 0, or 128 + n or -n when the signal came as
            # Python exited) and its outputs are a complete new set, never a mixture
            assert code in (0, 128 + signum, -signum), (signum, moment, code, err)
            assert sorted(p.name for p in tmp_path.iterdir()) == sorted(MAPS)
            before = {p.name: digest(p) for p in tmp_path.iterdir()}
            continue
        assert not completed(err), (signum, moment, err)
        # 128 + n from lumaxlike's handlers, -n when the signal itself ended Python;
        # a shell shows 128 + n for both
        assert code in (128 + signum, -signum), (signum, moment, code, err)
        if code > 0:
            assert error_lines(err) == [
                f"lumaxlike invert: stopped by {signal.Signals(signum).name}"
            ]
        assert {p.name: digest(p) for p in tmp_path.iterdir()} == before, (signum, moment)


def stop_at(run, moment, folder, writing):
    """Wait until ``run`` reaches ``moment``; ``writing``: seconds a run writes its outputs."""
    if moment == "start-up":  # Python starting: the default handler ends it
        time.sleep(0.3)
    elif moment == "locked":  # output set locked, blocks not yet written
        wait_for(lambda: (folder / ".w.tif.lumaxlike-lock").exists() or run.poll() is not None)
    else:
        wait_for(lambda: temporaries(folder) or run.poll() is not None)
        time.sleep({"mid": 0.2, "late": 0.6}[moment] * writing)


def test_after_sigkill_the_next_run_removes_stale_temporaries(tmp_path, capsys, large, small):
    _, cube, obs = large
    run = start(*invert_args(cube, obs, tmp_path / "w.tif", "--chunk", "10"))
    wait_for(lambda: temporaries(tmp_path))
    run.kill()
    run.wait(timeout=60)
    run.communicate(timeout=60)
    stale = temporaries(tmp_path)
    assert stale and all(f"p{run.pid}t" in p.name for p in stale)
    _, small_cube, small_obs = small
    assert main(invert_args(small_cube, small_obs, tmp_path / "other.tif")) == 0
    # its lock files too: nobody holds them; its journal stays for `--resume` (test_resume.py)
    assert temporary_leftovers(tmp_path) == [".w.tif.lumaxlike-journal"]
    assert main(invert_args(small_cube, small_obs, tmp_path / "w.tif")) == 0
    assert temporary_leftovers(tmp_path) == []


def test_stale_temporaries_are_those_whose_writer_is_gone(tmp_path):
    ended = subprocess.Popen([sys.executable, "-c", "pass"])
    ended.wait()
    start_ticks = round(psutil.Process().create_time() * 100)
    dead = tmp_path / f".w.p{ended.pid}t{start_ticks}-abc{TEMP_MARK}.tif"  # ended
    reused = tmp_path / f".w.p{os.getpid()}t{start_ticks - 1}-abc{TEMP_MARK}.hdr"  # id reused
    live = tmp_path / f".w.p{os.getpid()}t{start_ticks}-abc{TEMP_MARK}.tif"  # this process
    folder = tmp_path / f".w.p{ended.pid}t{start_ticks}-abc{TEMP_MARK}.zarr"
    unknown = tmp_path / f".w.abc{TEMP_MARK}.tif"  # not ours to judge
    for path in (dead, reused, live, unknown):
        path.write_text("x")
    folder.mkdir()
    (folder / "chunk").write_text("x")
    assert sorted(remove_stale_temporaries(tmp_path)) == sorted([dead, reused, folder])
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted([live.name, unknown.name])


# ----------------------------------------------------------------------------- worker processes


@pytest.mark.parametrize("signum", [signal.SIGKILL, signal.SIGTERM])
def test_workers_and_resource_tracker_end_with_their_parent(tmp_path, large, signum):
    _, cube, obs = large
    run = start(*invert_args(cube, obs, tmp_path / "w.tif", "--chunk", "10", "--workers", "2"))
    parent = psutil.Process(run.pid)
    wait_for(lambda: len(parent.children(recursive=True)) >= 3 or run.poll() is not None)
    children = parent.children(recursive=True)  # 2 dask workers and the resource tracker
    assert len(children) >= 3 and run.poll() is None
    run.send_signal(signum)
    code = run.wait(timeout=60)
    _, err = run.communicate(timeout=60)
    assert code == (143 if signum == signal.SIGTERM else -signal.SIGKILL)
    _, alive = psutil.wait_procs(children, timeout=10)
    assert alive == []
    if signum == signal.SIGTERM:
        assert temporary_leftovers(tmp_path) == []
        # the one line of a stopped run, nothing from the dask cluster's processes
        assert err.strip().splitlines() == ["lumaxlike invert: stopped by SIGTERM"], err


# ----------------------------------------------------------------------------- damaged input


def test_truncated_cube_exits_2_naming_the_file_and_rows(tmp_path, capsys, small):
    _, cube, obs = small
    damaged = tmp_path / "damaged.tif"
    rasterio.shutil.copy(cube, damaged, driver="GTiff")  # header first, strips after
    os.truncate(damaged, int(damaged.stat().st_size * 0.6))
    code = main(invert_args(damaged, obs, tmp_path / "w.tif", "--chunk", "4"))
    lines = error_lines(capsys.readouterr().err)
    assert code == 2 and len(lines) == 1, lines
    assert re.search(rf"cannot read rows \d+ to \d+ .*of {re.escape(str(damaged))}", lines[0])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["damaged.tif"]


# ----------------------------------------------------------------------------- one-line errors


@pytest.mark.parametrize(
    "case",
    [
        "missing cube",
        "missing geometry",
        "cube not a raster",
        "misaligned geometry",
        "misaligned dtm",
        "existing output",
        "bad units",
        "output under a file",
        "missing output folder",
        "unknown output format",
        "output replaces input",
    ],
)
def test_every_cli_error_is_one_line_naming_files_in_order(tmp_path, capsys, small, case):
    _, cube, obs = small
    out = tmp_path / "w.tif"
    args, extra, names = dict(cube=cube, obs=obs, out=out), [], []
    if case == "missing cube":
        args["cube"] = tmp_path / "absent.tif"
        names = [args["cube"]]
    elif case == "missing geometry":
        args["obs"] = tmp_path / "absent_obs.tif"
        names = [args["obs"]]
    elif case == "cube not a raster":
        args["cube"] = tmp_path / "notes.tif"
        args["cube"].write_text("not a raster")
        names = [args["cube"]]
    elif case == "misaligned geometry":
        args["obs"] = write_raster(tmp_path / "bad_obs.tif", np.zeros((4, 7, 6)))
        names = [args["obs"], cube]
    elif case == "misaligned dtm":
        dtm = write_raster(tmp_path / "bad_dtm.tif", np.zeros((1, 7, 6)))
        extra, names = ["--dtm", dtm], [dtm, cube]
    elif case == "existing output":
        assert main(invert_args(cube, obs, out)) == 0
        names = [out, "--overwrite"]
    elif case == "bad units":
        extra, names = ["--units", "percent"], ["--units", "percent"]
    elif case == "output under a file":
        (tmp_path / "file.txt").write_text("x")
        args["out"] = tmp_path / "file.txt" / "w.tif"
        names = [args["out"], tmp_path / "file.txt"]
    elif case == "missing output folder":
        args["out"] = tmp_path / "no" / "w.tif"
        names = [args["out"], tmp_path / "no"]
    elif case == "unknown output format":
        args["out"] = tmp_path / "w.jpg"
        names = [args["out"]]
    elif case == "output replaces input":
        args["out"] = tmp_path / "cube.tif"
        args["cube"] = write_raster(tmp_path / "cube.tif", np.ones((5, 40, 30)))
        names = [args["out"]]
    capsys.readouterr()
    code = main(invert_args(args["cube"], args["obs"], args["out"], *extra))
    lines = error_lines(capsys.readouterr().err)
    assert code == 2 and len(lines) == 1, lines
    line = lines[0]
    assert "usage" not in line and "overwrite=" not in line and "Traceback" not in line
    positions = [line.find(str(name)) for name in names]
    assert all(p >= 0 for p in positions) and positions == sorted(positions), (names, line)


# ----------------------------------------------------------------------------- --overwrite


def test_overwrite_removes_companions_the_new_run_does_not_write(tmp_path, capsys, small):
    _, cube, obs = small
    out = tmp_path / "w.tif"
    assert main(invert_args(cube, obs, out, "--refl-sigma", "0.001")) == 0
    assert (tmp_path / "w_sigma.tif").exists()
    assert main(invert_args(cube, obs, out, "--overwrite")) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(MAPS)
    # a companion left alone counts as an existing output
    for name in MAPS:
        (tmp_path / name).unlink()
    (tmp_path / "w_sigma.tif").write_text("from an older run")
    capsys.readouterr()
    assert main(invert_args(cube, obs, out)) == 2
    assert "w_sigma.tif" in capsys.readouterr().err
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w_sigma.tif"]


def test_a_signal_during_publication_puts_the_old_outputs_back(tmp_path, monkeypatch):
    """A stop signal recorded while the outputs are being moved into place (after the
    last safe point) undoes the publication: the old set is back, no new file stays."""
    from lumaxlike._io.write import atomic

    targets = [tmp_path / "w_status.tif", tmp_path / "w.tif"]
    for target in targets:
        target.write_text("old " + target.name)
    companion = tmp_path / "w_sigma.tif"
    companion.write_text("old sigma")
    monkeypatch.setattr(atomic, "pending_signal", lambda: signal.SIGTERM)
    with pytest.raises(Interrupted) as caught:
        with atomic.AtomicOutputs(targets, overwrite=True, companions=[companion]) as temporary:
            for target, path in temporary.items():
                path.write_text("new " + target.name)
    assert caught.value.exit_code == 143
    assert sorted(p.name for p in tmp_path.iterdir()) == ["w.tif", "w_sigma.tif", "w_status.tif"]
    assert {p.name: p.read_text() for p in tmp_path.iterdir()} == {
        "w.tif": "old w.tif",
        "w_status.tif": "old w_status.tif",
        "w_sigma.tif": "old sigma",
    }
