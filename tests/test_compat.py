"""The private parts of numba and JAX that lumaxlike relies on are all behind
`lumaxlike._compat` and still there in the installed releases, which lie inside the
bounds pyproject.toml sets. When a new release moves something, these tests say what."""

import ast
import re
import tomllib
from importlib.metadata import version
from pathlib import Path

import pytest
from packaging.requirements import Requirement

import lumaxlike
from lumaxlike._compat import jax_internals, numba_internals
from lumaxlike._model import _jaxpr_to_python

ROOT = Path(lumaxlike.__file__).parent
PRIVATE = re.compile(
    r"^(numba\.core|numba\.np|jax\._src|jax\.extend|jax\.interpreters|jaxlib)(\.|$)"
)


def test_numba_internals_are_there():
    found = numba_internals.problems()
    assert not found, (
        f"numba {version('numba')} moved what lumaxlike/_compat/numba_internals.py uses:\n"
        + "\n".join(found)
    )


def test_jax_internals_are_there():
    found = jax_internals.problems()
    assert not found, (
        f"jax {version('jax')} moved what lumaxlike/_compat/jax_internals.py uses:\n"
        + "\n".join(found)
    )


def test_the_jax_probes_cover_every_primitive_the_translator_matches():
    matched = {*_jaxpr_to_python._BINARY, *_jaxpr_to_python._UNARY}
    matched |= {"integer_pow", "select_n", "convert_element_type"}
    probed = {*jax_internals.PROBES, *jax_internals.INLINED_CALLS, *jax_internals.SHAPE_ONLY}
    assert matched <= probed, f"no probe in jax_internals.PROBES for {sorted(matched - probed)}"


def test_a_renamed_primitive_is_reported(monkeypatch):
    monkeypatch.setitem(jax_internals.PROBES, "maximum", jax_internals.PROBES["max"])
    assert "the operation lumaxlike matches as 'maximum' now traces to 'max'" in "\n".join(
        jax_internals.problems()
    )
    monkeypatch.setitem(numba_internals.USED_METHODS, numba_internals.FunctionCache, ("gone",))
    assert numba_internals.problems() == ["numba.core.caching.FunctionCache.gone is gone"]


def private_imports(path: Path) -> list[str]:
    found = []
    for node in ast.walk(ast.parse(path.read_text())):
        names = []
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level:
            names = [node.module or ""]
        found += [
            f"{path.relative_to(ROOT.parent)}:{node.lineno} {n}" for n in names if PRIVATE.match(n)
        ]
    return found


def test_only_compat_imports_private_modules_of_numba_and_jax():
    found = [
        line
        for path in sorted(ROOT.rglob("*.py"))
        if "_compat" not in path.parts
        for line in private_imports(path)
    ]
    assert not found, (
        "imports of numba's or JAX's internals outside lumaxlike/_compat:\n" + "\n".join(found)
    )


@pytest.mark.parametrize("name", ["jax", "numba"])
def test_installed_release_lies_inside_the_tested_bounds(name):
    pyproject = tomllib.loads((ROOT.parent / "pyproject.toml").read_text())
    (requirement,) = [
        Requirement(text)
        for text in pyproject["project"]["dependencies"]
        if Requirement(text).name == name
    ]
    assert any(spec.operator == "<" for spec in requirement.specifier), f"{name} has no upper bound"
    assert requirement.specifier.contains(version(name)), (name, version(name), str(requirement))
