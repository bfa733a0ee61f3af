"""MkDocs hook: every public name is in the API reference, even before a page lists it.

The public names are those of ``lumaxlike/__init__.pyi`` (plus ``lumaxlike.testing``
once it exists). A name that no page of ``docs/api/`` renders (``::: lumaxlike.NAME``)
is appended to the API reference's index page under "Not yet grouped", so a new public
name is documented, and its docstring checked by the strict build, the moment it is
added; move it to the page where it belongs.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
OPTIONAL_MODULES = ["testing"]


def public_names() -> list[str]:
    """The public names (and public submodules) of lumaxlike, in the stub's order."""
    names = re.findall(r"\bas (\w+)", (ROOT / "lumaxlike" / "__init__.pyi").read_text())
    for module in OPTIONAL_MODULES:
        package = ROOT / "lumaxlike"
        if (package / f"{module}.py").exists() or (
            package / module / "__init__.py"
        ).exists():
            names.append(module)
    return list(dict.fromkeys(names))


def ungrouped_names(api_dir: Path) -> list[str]:
    rendered = set()
    for page in api_dir.glob("*.md"):
        rendered |= set(
            re.findall(r"^::: lumaxlike\.(\w+)\s*$", page.read_text(), re.MULTILINE)
        )
    return [name for name in public_names() if name not in rendered]


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri != "api/index.md":
        return markdown
    missing = ungrouped_names(Path(config["docs_dir"]) / "api")
    if not missing:
        return markdown
    blocks = "\n\n".join(f"::: lumaxlike.{name}" for name in missing)
    return f"{markdown}\n\n## Not yet grouped\n\n{blocks}\n"
