"""The tutorials in notebooks/ execute top to bottom without an error.

Each notebook runs in a fresh ``python3`` kernel with ``notebooks/`` as its working
directory, at the small sizes set in its parameter cell (together about two minutes on a
2-core machine). The notebooks are stored without outputs; that is checked too.
"""

import ast
import re
import warnings
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

NOTEBOOKS_DIR = Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOKS_DIR.glob("*.ipynb"))
CELL_TIMEOUT_S = 300  # per cell; the slowest cell takes well under a minute on 2 cores


def test_notebooks_found():
    assert [path.name for path in NOTEBOOKS] == [
        "01_forward_model.ipynb",
        "02_inverting_a_cube.ipynb",
        "03_memory_on_large_images.ipynb",
        "04_fitting_several_parameters.ipynb",
        "05_mineral_abundances.ipynb",
        "06_photometric_normalisation.ipynb",
        "07_joint_retrieval.ipynb",
        "08_posterior_sampling.ipynb",
    ]


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_stored_clean(path):
    """No outputs or execution counts in the repository, and a parameter cell at the top."""
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    for cell in code_cells:
        assert cell.outputs == [] and cell.execution_count is None, cell.source[:60]
    assert "parameters" in code_cells[0].metadata.get("tags", []), (
        "first code cell must hold the sizes"
    )


def _code_without_magics(cell) -> str:
    return "\n".join(
        line for line in cell.source.splitlines() if not line.lstrip().startswith(("%", "!"))
    )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_uses_the_public_api_only(path):
    """No private module of lumaxlike (``lumaxlike._...``) is imported, named or run."""
    notebook = nbformat.read(path, as_version=4)
    for cell in notebook.cells:
        if cell.cell_type != "code":
            continue
        code = _code_without_magics(cell)
        for node in ast.walk(ast.parse(code)):
            if isinstance(node, ast.Import):
                modules = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                modules = [node.module or ""] + [
                    f"{node.module}.{alias.name}" for alias in node.names
                ]
            else:
                continue
            private = [
                m
                for m in modules
                if m.startswith("lumaxlike.")
                and any(part.startswith("_") for part in m.split(".")[1:])
            ]
            assert not private, f"{path.name} imports {private}: {cell.source[:80]!r}"
        # attribute access or a module run by name (python -m lumaxlike._x) counts too
        assert not re.search(r"\blumaxlike\._", code), (
            f"{path.name} uses a private name: {cell.source[:80]!r}"
        )


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_executes(path):
    notebook = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(
        notebook,
        timeout=CELL_TIMEOUT_S,
        kernel_name="python3",
        resources={"metadata": {"path": str(NOTEBOOKS_DIR)}},  # the kernel's working directory
    )
    # conftest.py turns every warning in this (the test) process into an error. Warnings
    # inside the kernel do not reach it, but jupyter_client/nbclient/zmq themselves may emit
    # DeprecationWarnings here while starting and talking to the kernel (e.g. about
    # jupyter's platformdirs migration or datetime.utcnow), which say nothing about
    # lumaxlike; those alone are ignored, around the execute call only.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        client.execute()  # raises CellExecutionError, with the traceback, on any error
