"""The documentation site builds with every warning an error, and its API reference
covers every public name.

``mkdocs build --strict`` (mkdocs.yml) fails on a broken link or anchor, a page of the nav
that is missing, a docstring section that does not match its signature, or a snippet
whose file is gone. The examples on the pages run in tests/test_examples.py; the
tutorials, stored once in notebooks/ with the outputs the site shows (docs/hooks.py adds
them as tutorials/), run in tests/test_notebooks.py, which also checks that their stored
outputs come from their code. The strict build does not see the links inside the rendered
notebooks, so every internal link and anchor of the BUILT site is checked here, and its
scripts (MathJax included) must come from the site itself.
"""

import importlib.util
import os
import re
import subprocess
import sys
import zlib
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit

import griffe
import pytest

ROOT = Path(__file__).resolve().parent.parent
BUILD_TIMEOUT_S = 600
# what __init__.pyi imports "as" a public name (lazy_loader.attach_stub reads the same)
PUBLIC_NAMES = re.findall(r"\bas (\w+)", (ROOT / "lumaxlike" / "__init__.pyi").read_text())
OPTIONAL_PUBLIC_MODULES = ["lumaxlike.testing"]  # documented once they exist


def public_modules() -> list[str]:
    return [
        name
        for name in OPTIONAL_PUBLIC_MODULES
        if (ROOT / Path(*name.split("."))).with_suffix(".py").exists()
        or (ROOT / Path(*name.split(".")) / "__init__.py").exists()
    ]


def inventory_names(path: Path) -> set[str]:
    """The object names in a Sphinx ``objects.inv`` (version 2) as mkdocstrings writes it."""
    data = path.read_bytes()
    header_end = 0
    for _ in range(4):  # four comment lines, then zlib-compressed "name domain:role ..." lines
        header_end = data.index(b"\n", header_end) + 1
    lines = zlib.decompress(data[header_end:]).decode("utf-8").splitlines()
    return {line.split(" ", 1)[0] for line in lines if line}


class PageLinks(HTMLParser):
    """The ids (anchors) of an HTML page and the links it follows: a/link href, script/img src."""

    FOLLOWED = {("a", "href"), ("link", "href"), ("script", "src"), ("img", "src")}

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.ids: set[str] = set()
        self.links: list[tuple[str, str]] = []  # (tag, value)

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if name == "id" and value:
                self.ids.add(value)
            if (tag, name) in self.FOLLOWED and value is not None:
                self.links.append((tag, value))


def parse_page(path: Path) -> PageLinks:
    parser = PageLinks()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser


def broken_links(site_dir: Path) -> list[str]:
    """Every internal link of the built site that names no file, or an anchor no id has;
    every script with an empty or external src (the site must work offline)."""
    pages = {path: parse_page(path) for path in sorted(site_dir.rglob("*.html"))}
    broken = []
    for path, parsed in pages.items():
        where = path.relative_to(site_dir)
        for tag, value in parsed.links:
            parts = urlsplit(value)
            if tag == "script" and (not value or parts.scheme or parts.netloc):
                broken.append(f"{where}: script src {value!r} is not a file of the site")
                continue
            if parts.scheme or parts.netloc:  # http(s), mailto, data: outside the check
                continue
            folder = site_dir if parts.path.startswith("/") else path.parent  # 404.html: "/x/"
            target = (folder / unquote(parts.path).lstrip("/")).resolve() if parts.path else path
            if target.is_dir() or parts.path.endswith("/"):
                target = target / "index.html"
            if not target.is_relative_to(site_dir.resolve()) or not target.is_file():
                broken.append(f"{where}: {value} (no file {target})")
            elif parts.fragment and target.suffix == ".html":
                ids = pages[target].ids if target in pages else parse_page(target).ids
                if unquote(parts.fragment) not in ids:
                    broken.append(f"{where}: {value} (no id {parts.fragment!r})")
    return broken


@pytest.fixture(scope="module")
def site(tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("site")
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        check=False,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return out


def module_map(design: str) -> list[str]:
    """The module paths the "Module map" section of docs/design.md lists, one per item
    (``- `_inverse/lm_rules.py`: ...``), in order."""
    section = re.search(r"^## Module map\n(.*?)(?=^## )", design, re.M | re.S)
    assert section, 'docs/design.md has no "## Module map" section'
    return re.findall(r"^- `([^`]+)`:", section.group(1), re.M)


def test_design_module_map_names_every_module_and_no_other():
    """docs/design.md's module map names every module of the package, by its path under
    lumaxlike/: every ``.py`` file, ``__init__.py`` included (several hold code:
    ``_cli/__init__.py`` its ``main``, ``_demo/__init__.py`` its ``run_demo``), generated
    and data-table modules included; and every path it or the rest of the page names
    exists, so that a removed module leaves the map."""
    package = ROOT / "lumaxlike"
    design = (ROOT / "docs" / "design.md").read_text(encoding="utf-8")
    modules = {path.relative_to(package).as_posix() for path in package.rglob("*.py")}
    listed = module_map(design)
    duplicated = sorted({path for path in listed if listed.count(path) > 1})
    assert not duplicated, f"listed twice in docs/design.md's module map: {duplicated}"
    missing = sorted(modules - set(listed))
    assert not missing, f"add to docs/design.md's module map, one line each: {missing}"
    gone = sorted(set(listed) - modules)
    assert not gone, f"remove from docs/design.md's module map (no such module): {gone}"
    # paths with a folder named anywhere on the page: `_x/y.py` under lumaxlike/, others
    # (`lumaxlike/...`, `tests/...`, `benchmarks/...`) from the repository's root
    named = set(re.findall(r"`([\w./-]+/[\w.-]+\.pyi?)`", design))
    absent = sorted(
        path for path in named if not ((package if path.startswith("_") else ROOT) / path).is_file()
    )
    assert not absent, f"docs/design.md names files that do not exist: {absent}"


def test_the_module_map_check_reads_the_map_section_only():
    design = "# D\n\nSee `_a/b.py`.\n\n## Module map\n\n- `_a/b.py`: x\n- `c.py`: y\n\n## Next\n"
    assert module_map(design) == ["_a/b.py", "c.py"]
    assert module_map(design.replace("- `c.py`: y\n", "")) == ["_a/b.py"]


def test_public_names_found():
    assert len(PUBLIC_NAMES) >= 40 and {
        "invert",
        "fit",
        "HapkeParams",
        "Status",
    } <= set(PUBLIC_NAMES)


def test_site_builds_strict_with_every_page(site):
    for page in [
        "index.html",
        "getting-started/index.html",
        "api/inversion/index.html",
        "tutorials/02_inverting_a_cube/index.html",
        "benchmarks/index.html",
        "design/index.html",
        "changelog/index.html",
        "search/search_index.json",
    ]:
        assert (site / page).is_file(), page
    notebook = (site / "tutorials/02_inverting_a_cube/index.html").read_text(encoding="utf-8")
    assert "data:image/png;base64" in notebook  # rendered with its stored figures
    # every notebook of notebooks/ is a tutorial page, with its download copy beside it
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        assert (site / "tutorials" / path.stem / path.name).is_file(), path.name


def test_every_internal_link_and_anchor_of_the_built_site_resolves(site):
    broken = broken_links(site.resolve())
    assert not broken, "\n".join(broken[:40])
    # the notebooks' links, written from notebooks/ in a clone, lead to the site's pages
    for page, href in [
        ("01_forward_model", "../02_inverting_a_cube/"),
        ("07_joint_retrieval", "../../joint-fits/"),
    ]:
        links = parse_page(site / "tutorials" / page / "index.html").links
        assert ("a", href) in links, page


def test_the_link_check_finds_a_missing_page_a_missing_anchor_and_a_cdn_script(tmp_path):
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "index.html").write_text('<h2 id="here">x</h2><a href="#here">ok</a>')
    (tmp_path / "index.html").write_text(
        '<a href="a/">ok</a> <a href="a/#here">ok</a> <a href="https://example.org/x">ok</a>'
        ' <a href="b.ipynb">no file</a> <a href="a/#there">no anchor</a>'
        ' <script src="https://cdn.example.org/mathjax.js"></script> <script src=""></script>'
    )
    broken = broken_links(tmp_path.resolve())
    assert len(broken) == 4, broken
    assert [text.split(" ")[1] for text in broken] == ["b.ipynb", "a/#there", "script", "script"]


def test_math_is_typeset_by_mathjax_served_from_the_site(site):
    assert (site / "assets/mathjax/tex-svg.js").stat().st_size > 500_000
    assert "Apache License" in (site / "assets/mathjax/LICENSE").read_text(encoding="utf-8")
    for page in ["forward-model/index.html", "tutorials/01_forward_model/index.html"]:
        scripts = [value for tag, value in parse_page(site / page).links if tag == "script"]
        assert [src.rsplit("/", 2)[-2:] for src in scripts if "mathjax" in src] == [
            ["javascripts", "mathjax.js"],
            ["mathjax", "tex-svg.js"],
        ], (page, scripts)
    forward_model = (site / "forward-model/index.html").read_text(encoding="utf-8")
    assert forward_model.count('class="arithmatex"') >= 10  # the model tables' equations
    notebook = (site / "tutorials/01_forward_model/index.html").read_text(encoding="utf-8")
    assert "jp-MarkdownOutput" in notebook and "$$\nr = \\frac{w}{4\\pi}" in notebook


def test_api_reference_covers_every_public_name(site):
    documented = inventory_names(site / "objects.inv")
    missing = [name for name in PUBLIC_NAMES if f"lumaxlike.{name}" not in documented]
    missing += [name for name in public_modules() if name not in documented]
    assert not missing, f"add these to a page of docs/api/: {missing}"


def test_every_public_name_has_a_docstring():
    package = griffe.load(
        "lumaxlike",
        search_paths=[str(ROOT)],
        docstring_parser="google",
        allow_inspection=False,
    )
    names = PUBLIC_NAMES + [module.removeprefix("lumaxlike.") for module in public_modules()]
    undocumented = []
    for name in names:
        obj = package[name]
        target = obj.final_target if obj.is_alias else obj
        if target.docstring is None or not target.docstring.value.strip():
            undocumented.append(name)
    assert not undocumented, f"public names without a docstring: {undocumented}"


def test_the_pages_link_to_the_notebooks_where_they_lie_in_a_clone():
    """A page's link to a tutorial names the notebook in notebooks/ (so it works on the
    repository's web pages too); docs/hooks.py turns it into the site's tutorial page."""
    links = [
        (page, target)
        for page in sorted((ROOT / "docs").rglob("*.md"))
        for target in re.findall(r"\]\(([^()\s#]*\.ipynb)", page.read_text(encoding="utf-8"))
    ]
    assert len(links) >= 8  # the tutorials' index and the workflow pages
    missing = [
        f"{page.relative_to(ROOT)}: {target}"
        for page, target in links
        if not (page.parent / target).resolve().is_file()
    ]
    assert not missing, missing
    assert not list((ROOT / "docs").rglob("*.ipynb")), "the notebooks live in notebooks/ only"


def test_a_workflow_page_missing_from_the_nav_is_added_after_its_neighbour(tmp_path):
    spec = importlib.util.spec_from_file_location("docs_hooks", ROOT / "docs" / "hooks.py")
    hooks = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(hooks)
    for name, title in [
        ("fit.md", "Fit"),
        ("sampling.md", "Posterior sampling"),
        ("x.md", "X"),
    ]:
        (tmp_path / name).write_text(f"# {title}\n\ntext\n")
    nav = [
        {"Home": "fit.md"},
        {"Workflows": [{"Fit": "fit.md"}, {"Other": "other.md"}]},
    ]
    hooks.on_config({"nav": nav, "docs_dir": str(tmp_path)})
    assert nav[1]["Workflows"] == [
        {"Fit": "fit.md"},
        {"Posterior sampling": "sampling.md"},
        {"Other": "other.md"},
        {"X": "x.md"},
    ]
