"""Run the tutorials (notebooks/*.ipynb) and store them in place with their outputs, which
the documentation site shows (docs/hooks.py takes them from notebooks/; mkdocs-jupyter
with execute: false).

Each notebook runs in a fresh ``python3`` kernel with notebooks/ as its working
directory, as in the test suite (tests/test_notebooks.py, which also runs them), and is
written back with its outputs, without the cells' execution timestamps, and with the
fingerprint of its code cells (``code_fingerprint``) in its metadata: the test suite
checks that the stored outputs come from the code stored beside them. Rerun this after
editing a notebook's code, from the repository root:

    python docs/render_tutorials.py            # all ten, a few minutes on 2 cores
    python docs/render_tutorials.py 02_inverting_a_cube
"""

import hashlib
import json
import sys
from pathlib import Path

import nbclient
import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS_DIR = ROOT / "notebooks"
CELL_TIMEOUT_S = 600
METADATA_KEY = "lumaxlike"  # notebook metadata: {"outputs_from_code": code_fingerprint(...)}


def code_fingerprint(notebook) -> str:
    """SHA-256 of the notebook's code cells' sources, in order (markdown cells left out:
    editing the prose does not change the outputs)."""
    sources = [cell.source for cell in notebook.cells if cell.cell_type == "code"]
    return "sha256:" + hashlib.sha256(json.dumps(sources).encode("utf-8")).hexdigest()


def render(path: Path) -> Path:
    """Execute one notebook of notebooks/ (its working directory) and store it with its
    outputs, in place."""
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOKS_DIR)}},
    )
    client.execute()
    for cell in notebook.cells:
        cell.metadata.pop("execution", None)  # timestamps: they would change every run
    notebook.metadata[METADATA_KEY] = {"outputs_from_code": code_fingerprint(notebook)}
    nbformat.write(notebook, path)
    return path


def main(names: list[str]) -> None:
    paths = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
    if names:
        paths = [path for path in paths if path.stem in names]
    for path in paths:
        print(f"{render(path).relative_to(ROOT)}: executed, outputs stored", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
