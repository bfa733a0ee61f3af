"""MkDocs hooks: every workflow page is in the navigation and every public name is in the
API reference, even before mkdocs.yml or a page of docs/api/ lists them.

A top-level page of docs/ that the nav of mkdocs.yml does not list (a new workflow page,
such as docs/sampling.md) is added to the "Workflows" section, after the page named in
``AFTER`` or at its end, with the title of its first heading.

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
WORKFLOWS = "Workflows"
# where a workflow page goes when mkdocs.yml does not list it: after this page
AFTER = {
    "joint-fits.md": "fit.md",
    "sampling.md": "joint-fits.md",
    "mission-products.md": "geometry.md",
}


def listed_pages(nav) -> set[str]:
    """Every page path in a nav configuration (nested lists and one-key mappings)."""
    if isinstance(nav, str):
        return {nav}
    if isinstance(nav, dict):
        return set().union(*(listed_pages(value) for value in nav.values()))
    return set().union(set(), *(listed_pages(item) for item in nav))


def page_title(path: Path) -> str:
    heading = re.search(r"^# (.+)$", path.read_text(encoding="utf-8"), re.MULTILINE)
    return heading.group(1).strip() if heading else path.stem.replace("-", " ").capitalize()


def on_config(config):
    nav = config["nav"]
    docs_dir = Path(config["docs_dir"])
    listed = listed_pages(nav)
    unlisted = sorted(p.name for p in docs_dir.glob("*.md") if p.name not in listed)
    workflows = next(
        item[WORKFLOWS] for item in nav if isinstance(item, dict) and WORKFLOWS in item
    )
    for name in unlisted:
        position = len(workflows)
        for after in (AFTER.get(name), AFTER.get(AFTER.get(name, ""))):
            index = [k for k, item in enumerate(workflows) if after in listed_pages(item)]
            if index:
                position = index[0] + 1
                break
        workflows.insert(position, {page_title(docs_dir / name): name})
    return config


def public_names() -> list[str]:
    """The public names (and public submodules) of lumaxlike, in the stub's order."""
    names = re.findall(r"\bas (\w+)", (ROOT / "lumaxlike" / "__init__.pyi").read_text())
    for module in OPTIONAL_MODULES:
        package = ROOT / "lumaxlike"
        if (package / f"{module}.py").exists() or (package / module / "__init__.py").exists():
            names.append(module)
    return list(dict.fromkeys(names))


def ungrouped_names(api_dir: Path) -> list[str]:
    rendered = set()
    for page in api_dir.glob("*.md"):
        rendered |= set(re.findall(r"^::: lumaxlike\.(\w+)\s*$", page.read_text(), re.MULTILINE))
    return [name for name in public_names() if name not in rendered]


def on_page_markdown(markdown, page, config, files):
    if page.file.src_uri != "api/index.md":
        return markdown
    missing = ungrouped_names(Path(config["docs_dir"]) / "api")
    if not missing:
        return markdown
    blocks = "\n\n".join(f"::: lumaxlike.{name}" for name in missing)
    return f"{markdown}\n\n## Not yet grouped\n\n{blocks}\n"
