"""Run the tutorials (notebooks/*.ipynb) and store copies with their outputs in
docs/tutorials/, which the documentation site shows (mkdocs-jupyter, execute: false).

The notebooks themselves are stored without outputs and run in the test suite
(tests/test_notebooks.py); tests/test_docs.py checks that these copies hold the same
cells. Rerun this after editing a notebook, from the repository root:

    python docs/render_tutorials.py            # all eight, a few minutes on 2 cores
    python docs/render_tutorials.py 02_inverting_a_cube
"""

import sys
from pathlib import Path

import nbclient
import nbformat

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS_DIR = ROOT / "notebooks"
RENDERED_DIR = ROOT / "docs" / "tutorials"
CELL_TIMEOUT_S = 600


def render(path: Path) -> Path:
    """Execute one notebook in notebooks/ (its working directory) and write the copy."""
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
    out = RENDERED_DIR / path.name
    nbformat.write(notebook, out)
    return out


def main(names: list[str]) -> None:
    paths = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
    if names:
        paths = [path for path in paths if path.stem in names]
    for path in paths:
        print(f"{path.name} -> {render(path).relative_to(ROOT)}", flush=True)


if __name__ == "__main__":
    main(sys.argv[1:])
