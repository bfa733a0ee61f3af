"""Every file command through the same faults, in-process on a 6 x 5 scene.

Rows: a full disk when a map is closed, out-of-range OBS angles, stale companions of an
earlier set, an overlapping output name held by another run, a stop signal during
publication. Columns: invert, fit, unmix, normalize. Each cell checks the exit code, the
one-line message and that the outputs are exactly the old set or exactly the new one.
Plus, by subprocess: a malformed --scheduler, and a SIGTERM after publication.
"""

import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from lumaxlike._cli import main
from lumaxlike._io import read_cube
from lumaxlike._io.write import atomic, writers
from lumaxlike._io.write.provenance_files import read_provenance

from .test_cli import PARAM_FLAGS
from .test_cli_unmix import (
    DENSITY,
    GRAIN_SIZE,
    LIBRARY_ANGLES,
    mixture_files,
    write_library,
)
from .test_io import OBS_DESCRIPTIONS, digest, temporary_leftovers, write_raster

pytestmark = pytest.mark.slow  # command-line runs under faults

COMMANDS = ("invert", "fit", "unmix", "normalize")


@pytest.fixture(scope="module")
def inputs(tmp_path_factory):
    """A mixture cube (r), its OBS, a copy as a second observation, a library; and one
    OBS with a to-sun zenith of 400 deg."""
    folder = tmp_path_factory.mktemp("inputs")
    _, albedo, cube, obs, _ = mixture_files(folder)
    library = write_library(folder / "minerals.csv", albedo)
    second = folder / "cube2.tif"
    shutil.copy(cube, second)
    import rasterio

    with rasterio.open(obs) as src:
        angles = src.read()
    angles[0, 2, 3] = 400.0
    bad_obs = write_raster(folder / "bad_obs.tif", angles, descriptions=OBS_DESCRIPTIONS)
    return {
        "cube": cube,
        "obs": obs,
        "second": second,
        "library": library,
        "bad_obs": bad_obs,
    }


def args_for(command, inputs, out, *extra, obs=None):
    obs = obs or inputs["obs"]
    if command == "fit":
        return [
            "fit",
            inputs["cube"],
            inputs["second"],
            "--geometry",
            obs,
            obs,
            "--units",
            "r",
            "--free",
            "w",
            *PARAM_FLAGS,
            "--out",
            out,
            *extra,
        ]
    common = [
        inputs["cube"],
        "--geometry",
        obs,
        "--units",
        "r",
        *PARAM_FLAGS,
        "--out",
        out,
        *extra,
    ]
    if command == "unmix":
        return [
            "unmix",
            *common,
            "--endmembers",
            inputs["library"],
            "--library-units",
            "r",
            "--library-incidence",
            LIBRARY_ANGLES[0],
            "--library-emission",
            LIBRARY_ANGLES[1],
            "--density",
            ",".join(map(str, DENSITY)),
            "--grain-size",
            ",".join(map(str, GRAIN_SIZE)),
            "--fwhm",
            0.01,
        ]
    return [command, *common, "--solver", "numba"]


def run(capsys, *args):
    code = main([str(a) for a in args])
    return code, [line for line in capsys.readouterr().err.strip().splitlines() if line]


def state(folder):
    """{name: digest} of every file in ``folder``."""
    return {p.name: digest(p) for p in sorted(folder.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def new_sets(inputs, tmp_path_factory):
    """{command: folder} of each command's run into an empty folder, as ``x.tif``: the
    set it publishes, copied where a test needs an earlier set (the same files a run
    writes, without solving again)."""
    folders = {}
    for command in COMMANDS:
        folders[command] = tmp_path_factory.mktemp(command)
        assert main([str(a) for a in args_for(command, inputs, folders[command] / "x.tif")]) == 0
    return folders


def names_of(folder):
    return sorted(p.name for p in folder.iterdir())


def copy_set(source, folder):
    """An earlier run's set, published: a copy of each file of ``source`` into ``folder``."""
    for path in source.iterdir():
        shutil.copy2(path, folder / path.name)


@pytest.mark.parametrize("command", COMMANDS)
def test_disk_full_when_a_map_is_closed_publishes_nothing_and_keeps_the_old_set(
    command, inputs, new_sets, tmp_path, capsys, monkeypatch
):
    """GDAL reports a full disk at a GeoTIFF's close only on stderr and the file is short:
    once, exit 0 with unreadable outputs and, with --overwrite, the good old set gone."""
    out = tmp_path / "x.tif"
    copy_set(new_sets[command], tmp_path)
    before = state(tmp_path)
    close = writers._RasterSink._close_dataset

    def close_on_a_full_disk(sink):
        close(sink)
        if sink.final_name == "x_status.tif":  # as GDAL leaves it: the last strip short
            size = os.path.getsize(sink.path)
            os.truncate(sink.path, size - 64)

    monkeypatch.setattr(writers._RasterSink, "_close_dataset", close_on_a_full_disk)
    code, lines = run(capsys, *args_for(command, inputs, out, "--overwrite"))
    assert code == 1 and len(lines) == 1, lines
    assert (
        f"error: writing {tmp_path / 'x_status.tif'} failed" in lines[0]
        and "nothing was published" in lines[0]
    )
    assert state(tmp_path) == before and temporary_leftovers(tmp_path) == []


@pytest.mark.parametrize("command", COMMANDS)
def test_an_out_of_range_obs_angle_stops_the_run_naming_band_and_file(
    command, inputs, tmp_path, capsys
):
    """A to-sun zenith of 400 deg was read as 40 deg (CONVERGED, w off by 0.02)."""
    code, lines = run(capsys, *args_for(command, inputs, tmp_path / "x.tif", obs=inputs["bad_obs"]))
    assert code == 2 and len(lines) == 1, lines
    assert (
        str(inputs["bad_obs"]) in lines[0]
        and "To-sun zenith" in lines[0]
        and "holds 400 deg" in lines[0]
    )
    assert list(tmp_path.iterdir()) == []


# the earlier set at the output: another command's (a fit's maps under an invert, ...)
EARLIER = {"invert": "fit", "unmix": "fit", "normalize": "fit", "fit": "invert"}


@pytest.mark.parametrize("command", COMMANDS)
def test_overwrite_replaces_the_whole_old_set(command, inputs, new_sets, tmp_path, capsys):
    """Once, `normalize --overwrite` onto a fit's output kept all of the fit's maps, and
    a fit of fewer parameters kept x_c.tif and x_sigma_c.tif: the published set must be
    exactly the new run's."""
    out = tmp_path / "x.tif"
    earlier = EARLIER[command]
    if earlier == "invert":  # with its sigma map, which a fit does not write
        assert run(capsys, *args_for(earlier, inputs, out, "--refl-sigma", "0.001"))[0] == 0
    else:
        copy_set(new_sets[earlier], tmp_path)
    stale = {p.name for p in tmp_path.iterdir()} - set(names_of(new_sets[command]))
    assert stale  # e.g. x_sigma_w.tif, x_observations.tif of the fit
    unrelated = tmp_path / "x_notes.txt"
    unrelated.write_text("not a lumaxlike output")
    code, lines = run(capsys, *args_for(command, inputs, out, "--overwrite"))
    assert code == 0, lines
    assert names_of(tmp_path) == sorted([*names_of(new_sets[command]), unrelated.name])


@pytest.mark.parametrize("command", COMMANDS)
def test_a_name_another_run_is_writing_is_refused(command, inputs, tmp_path, capsys):
    """`--out x.tif` (which writes x_status.tif) beside a run writing `--out x_status.tif`:
    both once exited 0 with one set mixing both runs' maps."""
    holder = atomic.AtomicOutputs([tmp_path / "x_status.tif"], overwrite=True)  # the other run
    try:
        code, lines = run(capsys, *args_for(command, inputs, tmp_path / "x.tif", "--overwrite"))
    finally:
        holder.discard()
    assert code == 2 and len(lines) == 1, lines
    assert (
        f"output {tmp_path / 'x_status.tif'} is being written by another lumaxlike run" in lines[0]
    )
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize("command", COMMANDS)
def test_a_signal_during_publication_puts_the_old_set_back(
    command, inputs, new_sets, tmp_path, capsys, monkeypatch
):
    out = tmp_path / "x.tif"
    copy_set(new_sets[command], tmp_path)
    before = state(tmp_path)
    replace, sent = os.replace, []

    def replace_then_signal(source, target):
        replace(source, target)
        if str(target) == str(out) and not sent:  # the main map is in place: publication half done
            sent.append(True)
            os.kill(os.getpid(), signal.SIGTERM)

    monkeypatch.setattr(atomic.os, "replace", replace_then_signal)
    code, lines = run(capsys, *args_for(command, inputs, out, "--overwrite"))
    assert sent and code == 143 and lines == [f"lumaxlike {command}: stopped by SIGTERM"], lines
    assert state(tmp_path) == before and temporary_leftovers(tmp_path) == []


def test_a_folder_named_like_an_output_is_never_removed(inputs, tmp_path, capsys):
    folder = tmp_path / "x.tif"
    (folder / "inside").mkdir(parents=True)
    code, lines = run(capsys, *args_for("invert", inputs, folder, "--overwrite"))
    assert code == 2 and len(lines) == 1 and f"output {folder} is a folder" in lines[0], lines
    assert (folder / "inside").is_dir()


def _cli_process(*args, **kwargs):
    return subprocess.run(
        [sys.executable, *map(str, args)],
        check=False,
        capture_output=True,
        text=True,
        **kwargs,
    )


def test_a_run_in_another_process_keeps_its_companion_names(inputs, tmp_path, capsys):
    """The race of item 12 with two processes, made deterministic: run A (`--out x.tif
    --refl-sigma`, which writes x_sigma.tif) is held in its own process after writing its
    first block; run B (`--out x_sigma.tif --overwrite`) meanwhile is refused naming
    x_sigma.tif, and A then publishes exactly its own set."""
    ready, go = tmp_path / "ready", tmp_path / "go"
    script = (
        "import pathlib, runpy, sys, time\n"
        "from lumaxlike._io.write import writers\n"
        "real = writers.ResultWriter.write\n"
        "ready, go = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2])\n"
        "def write(self, rows, block):\n"
        "    real(self, rows, block)\n"
        "    ready.touch()\n"
        "    held = time.monotonic()\n"
        "    while not go.exists() and time.monotonic() - held < 120:  # never orphaned\n"
        "        time.sleep(0.01)\n"
        "writers.ResultWriter.write = write\n"
        "sys.argv = ['lumaxlike', *sys.argv[3:]]\n"
        "runpy.run_module('lumaxlike', run_name='__main__')\n"
    )
    outputs = tmp_path / "out"
    outputs.mkdir()
    a_args = args_for("invert", inputs, outputs / "x.tif", "--refl-sigma", "0.001", "--chunk", "2")
    a = subprocess.Popen(
        [sys.executable, "-c", script, ready, go, *map(str, a_args)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 120
        while not ready.exists():
            assert a.poll() is None, a.communicate()[1]
            assert time.monotonic() < deadline, "run A never wrote a block"
            time.sleep(0.02)
        contested = outputs / "x_sigma.tif"
        code, lines = run(capsys, *args_for("invert", inputs, contested, "--overwrite"))
        assert code == 2 and len(lines) == 1, lines
        assert f"output {contested} is being written by another lumaxlike run" in lines[0]
    finally:
        go.touch()
        err = a.communicate(timeout=120)[1]
    assert a.returncode == 0, err
    assert names_of(outputs) == [
        "x.tif",
        "x_iterations.tif",
        "x_residual.tif",
        "x_sigma.tif",
        "x_status.tif",
    ]
    assert read_provenance(contested).refl_sigma == 0.001  # A's sigma map, not B's w


def test_a_malformed_scheduler_address_is_one_line_without_a_hang(inputs, tmp_path):
    """`--scheduler notanaddress`: the right line, then a 60 s hang and an "Exception
    ignored ... TimeoutError" traceback while the half-made client closed itself."""
    done = _cli_process(
        "-m",
        "lumaxlike",
        *args_for("invert", inputs, tmp_path / "x.tif", "--scheduler", "notanaddress"),
        timeout=50,
    )  # a hang fails here
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(lines) == 1, lines
    assert "scheduler notanaddress: not a scheduler address" in lines[0]


def test_a_sigterm_after_publication_exits_with_a_code_not_the_signal(inputs, tmp_path):
    """A signal landing once the outputs were published (and the run's handlers were
    restored) killed the process: exit -15 beside a complete set. Now 143 (documented in
    lumaxlike._cli.console), or 0 when it lands while the command still handles signals."""
    script = (
        "import os, runpy, signal, sys\n"
        "import lumaxlike._cli as cli\n"
        "real = cli.main\n"
        "def main(argv=None):\n"
        "    code = real(argv)\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    return code\n"
        "cli.main = main\n"
        "sys.argv = ['lumaxlike', *sys.argv[1:]]\n"
        "runpy.run_module('lumaxlike', run_name='__main__')\n"
    )
    out = tmp_path / "x.tif"
    done = _cli_process("-c", script, *args_for("invert", inputs, out), timeout=120)
    assert done.returncode == 143, done.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "x.tif",
        "x_iterations.tif",
        "x_residual.tif",
        "x_status.tif",
    ]
    assert np.isfinite(np.nanmax(read_cube(out)[0]))


def test_a_sigint_after_publication_exits_130_not_by_the_signal(monkeypatch):
    """The SIGINT half of the test above, in-process: a KeyboardInterrupt escaping `main`
    (a SIGINT after the command restored its handlers) once left Python to end the
    process by the signal (-2); `console` exits 130."""
    import lumaxlike._cli as cli

    def main(argv=None):
        raise KeyboardInterrupt

    monkeypatch.setattr(cli, "main", main)
    previous, ended = signal.getsignal(signal.SIGTERM), None
    try:
        cli.console()
    except BaseException as error:  # caught here: an escaping KeyboardInterrupt ends pytest
        ended = error
    finally:
        signal.signal(signal.SIGTERM, previous)  # console installs its own
    assert isinstance(ended, SystemExit) and ended.code == 128 + signal.SIGINT, repr(ended)


def test_a_local_cluster_failing_to_start_is_one_line(inputs, tmp_path, capsys, monkeypatch):
    """A worker SIGKILLed while the cluster started gave dask's 55-line traceback; the
    failure (as dask raises it then) is now one line, exit 1, nothing written."""
    import distributed

    def dying_cluster(*args, **kwargs):
        raise RuntimeError("Worker failed to start: Nanny failed to start (killed by signal 9)")

    monkeypatch.setattr(distributed, "LocalCluster", dying_cluster)
    code, lines = run(capsys, *args_for("invert", inputs, tmp_path / "x.tif", "--workers", "2"))
    assert code == 1 and len(lines) == 1, lines
    assert "the local cluster of 2 workers failed to start (Worker failed to start" in lines[0]
    assert list(tmp_path.iterdir()) == []
