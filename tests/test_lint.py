"""ruff's lint and format checks pass on the repository, at pyproject.toml's [tool.ruff].

The same commands a contributor runs (CONTRIBUTING.md): ``ruff check .`` and
``ruff format --check .`` from the repository root."""

import subprocess
import sys
from pathlib import Path

import pytest

import lumaxlike

ROOT = Path(lumaxlike.__file__).parent.parent


@pytest.mark.parametrize("command", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_ruff_passes_on_the_repository(command):
    done = subprocess.run(
        [sys.executable, "-m", "ruff", *command, "--no-cache", "."],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, (
        f"ruff {' '.join(command)} (pyproject.toml [tool.ruff]) finds:\n" + done.stdout[-6000:]
    )
