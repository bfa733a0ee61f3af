"""The type checker passes on the package, at the level pyproject.toml's [tool.mypy] sets.

mypy runs in a subprocess from the repository root with its incremental cache in
``.mypy_cache`` there (git-ignored): the first run on a clean clone checks everything
(about 20 s of CPU), later runs only what changed. (ruff's lint and format checks are
run by their own test.)"""

import subprocess
import sys
from pathlib import Path

import pytest

import lumaxlike

pytestmark = pytest.mark.slow  # mypy over the package

ROOT = Path(lumaxlike.__file__).parent.parent


def test_mypy_passes_on_the_package():
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "mypy",
            "--config-file",
            str(ROOT / "pyproject.toml"),
            "--cache-dir",
            str(ROOT / ".mypy_cache"),
            "--no-error-summary",
            "--no-pretty",
        ],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, (
        "mypy (pyproject.toml [tool.mypy]) finds:\n" + done.stdout[-6000:] + done.stderr[-2000:]
    )
