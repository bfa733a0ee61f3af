"""Every example in README.md and on the documentation site (docs/**/*.md) runs as written.

Each ```python block runs standalone in a fresh subprocess with a temporary working
directory; a block that reads ``lumaxlike-demo/`` finds there the files of a small
``lumaxlike demo`` run. A block that compares with ``w_true`` must print its largest error
as ``max |w - w_true| = ...``, which must be below 1e-6, or, on noisy data, the median of
its errors in units of their sigma as ``median |w - w_true| / sigma_w = ...``, which must
be near 0.67. Every ``lumaxlike`` command line
of the ```bash blocks (except the ``...`` placeholders and the Set-up commands, which
install the package) runs verbatim in one directory after the demo, page by page and in
order within a page; the ``lumaxlike invert`` ones must recover the demo's w. Anything
meant to be read but not run is fenced as ```text.
"""

import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import rasterio

pytestmark = pytest.mark.slow  # runs the docs' examples in subprocesses

ROOT = Path(__file__).resolve().parent.parent
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").glob("**/*.md"))]
DEMO_ARGS = ["--size", "24", "--solver", "numba", "--no-figure"]
DEMO_DIR = "lumaxlike-demo"
ERROR_LINE = re.compile(r"max \|w - w_true\| = (\S+)")
Z_LINE = re.compile(r"median \|w - w_true\| / sigma_w = (\S+)")
TIMEOUT_S = 600


def code_blocks(language: str, pages=PAGES) -> list[tuple[str, str]]:
    """(page, block) for the fenced blocks in ``language`` of ``pages``, in order."""
    return [
        (page.relative_to(ROOT).as_posix(), block)
        for page in pages
        for block in re.findall(
            rf"^```{language}\n(.*?)^```",
            page.read_text(encoding="utf-8"),
            flags=re.DOTALL | re.MULTILINE,
        )
    ]


def command_lines(block: str) -> list[list[str]]:
    """The commands of a bash block: continuations joined, comments dropped."""
    joined = re.sub(r"\\\n", " ", block)
    return [words for line in joined.splitlines() if (words := shlex.split(line, comments=True))]


def cli_commands() -> list[list[str]]:
    """Every ``lumaxlike ...`` command of the pages' bash blocks that can run as written."""
    return [
        words
        for _, block in code_blocks("bash")
        for words in command_lines(block)
        if words[0] == "lumaxlike" and "..." not in words and "&&" not in words
    ]


def run(argv, cwd) -> subprocess.CompletedProcess:
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=TIMEOUT_S)


def read_raster(path) -> np.ndarray:
    with rasterio.open(path) as src:
        return np.moveaxis(src.read(), 0, -1)


@pytest.fixture(scope="module")
def demo_files(tmp_path_factory) -> Path:
    """A folder holding ``lumaxlike-demo/`` as a small ``lumaxlike demo`` writes it."""
    folder = tmp_path_factory.mktemp("demo")
    done = run([sys.executable, "-m", "lumaxlike", "demo", *DEMO_ARGS], folder)
    assert done.returncode == 0, done.stdout + done.stderr
    return folder / DEMO_DIR


PYTHON_BLOCKS = code_blocks("python")


def test_pages_have_the_examples():
    pages = {page for page, _ in PYTHON_BLOCKS}
    assert "README.md" in pages and len(pages) >= 10, pages
    assert len(PYTHON_BLOCKS) >= 15
    opens_the_cube = 'xr.open_dataarray("lumaxlike-demo/reflectance.nc")'
    assert any(opens_the_cube in block for _, block in PYTHON_BLOCKS)
    inverts = [words for words in cli_commands() if words[1] == "invert" and "--out" in words]
    assert any("--params-from" not in words for words in inverts)
    assert any("--params-from" in words for words in inverts)


def _block_ids() -> list[str]:
    seen: dict[str, int] = {}
    ids = []
    for page, _ in PYTHON_BLOCKS:
        seen[page] = seen.get(page, 0) + 1
        ids.append(f"{page}-{seen[page]}")
    return ids


@pytest.mark.parametrize(("page", "block"), PYTHON_BLOCKS, ids=_block_ids())
def test_python_block_runs_standalone(page, block, tmp_path, request):
    if f"{DEMO_DIR}/" in block:
        shutil.copytree(request.getfixturevalue("demo_files"), tmp_path / DEMO_DIR)
    script = tmp_path / "block.py"
    script.write_text(block, encoding="utf-8")
    done = run([sys.executable, str(script)], tmp_path)
    assert done.returncode == 0, (
        f"{page}:\n{block}\n--- stdout\n{done.stdout}\n--- stderr\n{done.stderr}"
    )
    errors = [float(value) for value in ERROR_LINE.findall(done.stdout)]
    z_medians = [float(value) for value in Z_LINE.findall(done.stdout)]
    if "w_true" in block and z_medians:
        # noisy data: the errors in units of their sigma. The median of |z| is 0.67 for
        # calibrated sigmas; over the ~80 problems of an example it scatters by ~0.08, so
        # (0.4, 1.0) is 3-4 of those either side and fails a sigma off by 1.5x.
        assert len(z_medians) == 1 and not errors, done.stdout
        assert 0.4 < z_medians[0] < 1.0, done.stdout
    elif "w_true" in block:
        assert len(errors) == 1, (
            f"the block must print its 'max |w - w_true| = ...':\n{done.stdout}"
        )
        assert errors[0] < 1e-6, done.stdout


def test_cli_example_runs_verbatim_and_recovers_the_demo_w(demo_files, tmp_path):
    shutil.copytree(demo_files, tmp_path / DEMO_DIR)
    w_true = read_raster(tmp_path / DEMO_DIR / "w_true.tif")
    outputs = []
    for words in cli_commands():
        done = run([sys.executable, "-m", "lumaxlike", *words[1:]], tmp_path)
        assert done.returncode == 0, f"{shlex.join(words)}\n{done.stdout}\n{done.stderr}"
        if words[1] == "invert" and "--out" in words:
            outputs.append(tmp_path / words[words.index("--out") + 1])
    assert len(outputs) >= 2
    for out in outputs:
        w = read_raster(out)
        assert w.shape == w_true.shape
        assert np.median(np.abs(w - w_true)) < 1e-6, out.name
        assert np.nanmax(np.abs(w - w_true)) < 1e-6, out.name
        status = read_raster(out.with_name(out.stem + "_status" + out.suffix))
        assert np.all(status == 0), out.name  # Status.CONVERGED everywhere
