"""Publication of an output set with overwrite: a kill (or a failure) at any step of moving
the old set aside and the new one in leaves, once the next run has looked at the folder,
the whole old set or the whole new set, never a mixture and no hidden file."""

import subprocess
import sys
from pathlib import Path

import pytest

from lumaxlike._io.write import atomic

pytestmark = pytest.mark.slow  # publication killed at every step

# Publishes a new set over an old one (folder argv[1], kind argv[2]) and dies with os._exit
# (standing for SIGKILL: no clean-up, no `finally`) before step argv[3] of the publication:
# the steps are the renames, the removals of the old files and of the journal.
CHILD = r"""
import os, sys
from pathlib import Path
from lumaxlike._io.write import atomic

folder, kind, kill_at = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
names = ["w_status", "w_iterations", "w"]
targets = [folder / f"{name}.{kind}" for name in names]
steps = 0

def counted(function, when=lambda *args: True):
    def step(*args, **kwargs):
        global steps
        if when(*args):
            if steps == kill_at:
                os._exit(137)
            steps += 1
        return function(*args, **kwargs)
    return step

outputs = atomic.AtomicOutputs(targets, overwrite=True, companions=[folder / f"w_sigma.{kind}"])
with outputs as temporary:
    for target, path in temporary.items():
        if kind == "zarr":
            path.mkdir()
            (path / "data").write_text("new " + target.name)
        else:
            path.write_text("new " + target.name)
    atomic.os.replace = counted(os.replace)
    atomic._remove = counted(atomic._remove)
    Path.unlink = counted(Path.unlink, lambda path, *a: path.name.endswith(atomic.PUBLISH_MARK))
print(steps)
"""

NAMES = ("w_status", "w_iterations", "w")


def content(path: Path) -> str:
    return (path / "data").read_text() if path.is_dir() else path.read_text()


def write_old_set(folder: Path, kind: str) -> None:
    for name in (*NAMES, "w_sigma"):
        path = folder / f"{name}.{kind}"
        if kind == "zarr":
            path.mkdir()
            (path / "data").write_text(f"old {path.name}")
        else:
            path.write_text(f"old {path.name}")


def outcome(folder: Path, kind: str) -> str:
    """Which whole set the folder holds, "old" or "new" (asserting it holds one), with
    nothing hidden beside it."""
    assert [p.name for p in folder.iterdir() if p.name.startswith(".")] == []
    found = {p.name: content(p) for p in folder.iterdir()}
    old = {f"{n}.{kind}": f"old {n}.{kind}" for n in (*NAMES, "w_sigma")}
    new = {f"{n}.{kind}": f"new {n}.{kind}" for n in NAMES}  # the companion goes
    assert found in (old, new), found
    return "old" if found == old else "new"


def next_run(folder: Path, kind: str) -> None:
    """What the next run does before writing anything: lock its set, look at the folder."""
    targets = [folder / f"{name}.{kind}" for name in NAMES]
    atomic.AtomicOutputs(targets, overwrite=True).discard()


@pytest.mark.parametrize("kind", ["tif", "zarr"])
def test_a_kill_at_any_step_of_publication_leaves_the_old_or_the_new_set(tmp_path, kind):
    outcomes = []
    for kill_at in range(40):
        folder = tmp_path / f"kill{kill_at}"
        folder.mkdir()
        write_old_set(folder, kind)
        child = subprocess.run(
            [sys.executable, "-c", CHILD, str(folder), kind, str(kill_at)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        if child.returncode == 0:  # the publication has fewer steps: it completed
            assert int(child.stdout) == kill_at and outcome(folder, kind) == "new"
            break
        assert child.returncode == 137, child.stderr
        if 2 <= kill_at <= 4:  # cut short: old files aside, under the journal
            assert any(p.name.endswith(atomic.PUBLISH_MARK) for p in folder.iterdir())
        next_run(folder, kind)
        outcomes.append(outcome(folder, kind))
    else:
        pytest.fail("the publication never completed")
    # journal, 4 old files aside, 3 new ones in: the old set back; then the new one
    assert outcomes == ["old"] * 8 + ["new"] * (len(outcomes) - 8)
    assert len(outcomes) > 8 + 4  # the 4 old files deleted, then the journal


@pytest.mark.parametrize("kind", ["tif", "zarr"])
def test_a_failure_at_any_rename_of_publication_puts_the_old_set_back(tmp_path, monkeypatch, kind):
    """An error from the system mid-publication (a rename refused) undoes it at once."""
    original = atomic.os.replace
    for fail_at in range(1, 8):  # the journal's rename, 4 moves aside, 3 renames in
        folder = tmp_path / f"fail{fail_at}"
        folder.mkdir()
        write_old_set(folder, kind)
        calls = []

        def replace(source, destination, fail_at=fail_at, calls=calls):
            calls.append(source)
            if len(calls) == fail_at:
                raise OSError("injected rename failure")
            return original(source, destination)

        targets = [folder / f"{name}.{kind}" for name in NAMES]
        outputs = atomic.AtomicOutputs(
            targets, overwrite=True, companions=[folder / f"w_sigma.{kind}"]
        )
        with pytest.raises(OSError, match="injected"):
            with outputs as temporary:
                for target, path in temporary.items():
                    if kind == "zarr":
                        path.mkdir()
                        (path / "data").write_text("new " + target.name)
                    else:
                        path.write_text("new " + target.name)
                monkeypatch.setattr(atomic.os, "replace", replace)
        monkeypatch.setattr(atomic.os, "replace", original)
        assert outcome(folder, kind) == "old"
