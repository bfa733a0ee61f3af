"""The tutorials in notebooks/ execute top to bottom without an error.

Each notebook runs in a fresh ``python3`` kernel with ``notebooks/`` as its working
directory, at the small sizes set in its parameter cell (together about two minutes on a
2-core machine); the run ignores the stored outputs and compares nothing with them. The
notebooks are stored with the outputs the documentation site shows, written by
docs/render_tutorials.py; that they come from the stored code is checked too.
"""

import ast
import importlib.util
import re
import warnings
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # runs every tutorial notebook

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS_DIR = ROOT / "notebooks"
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
        "09_band_parameters_and_heat.ipynb",
        "10_composition_from_optical_constants.ipynb",
    ]


def _render_tutorials():
    spec = importlib.util.spec_from_file_location(
        "render_tutorials", ROOT / "docs/render_tutorials.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda path: path.stem)
def test_notebook_stored_with_the_outputs_of_its_code(path):
    """Stored as docs/render_tutorials.py writes it: every code cell run once, top to
    bottom, without an error, from the code stored now; a parameter cell at the top."""
    render = _render_tutorials()
    notebook = nbformat.read(path, as_version=4)
    nbformat.validate(notebook)
    code_cells = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert "parameters" in code_cells[0].metadata.get("tags", []), (
        "first code cell must hold the sizes"
    )
    rerun = f"run: python docs/render_tutorials.py {path.stem}"
    stored = notebook.metadata.get(render.METADATA_KEY, {}).get("outputs_from_code")
    assert stored == render.code_fingerprint(notebook), f"code edited since its outputs: {rerun}"
    counts = [cell.execution_count for cell in code_cells]
    assert counts == list(range(1, len(code_cells) + 1)), f"not one run, top to bottom: {rerun}"
    errors = [o for cell in code_cells for o in cell.outputs if o.output_type == "error"]
    assert not errors, errors
    timestamps = [cell.source[:60] for cell in notebook.cells if "execution" in cell.metadata]
    assert not timestamps, f"execution timestamps stored: {rerun}"


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
