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

Math is typeset in the browser by MathJax 3 served from the site itself, never from a
CDN: ``on_files`` adds MathJax's single-file ``tex-svg.js`` (and its licence) from the
``django-static-mathjax`` package of the docs extra to ``assets/mathjax/``;
``docs/javascripts/mathjax.js`` configures it for the workflow pages' ``$...$``
(pymdownx.arithmatex) and the notebooks' markdown cells.

The tutorials are stored once, with their outputs, in notebooks/ (docs/render_tutorials.py
runs them): ``on_files`` copies each ``notebooks/NAME.ipynb`` into a temporary folder as
``tutorials/NAME.ipynb`` and adds it to the site there (the page ``tutorials/NAME/``),
before mkdocs-jupyter renders it (its ``include`` pattern, ``tutorials/*.ipynb``, needs
that path, and its pages read the file from where it lies); ``mkdocs serve`` watches
notebooks/. They link to each other and to the workflow pages as seen from notebooks/ in
a clone (``02_inverting_a_cube.ipynb``, ``../docs/joint-fits.md#anchor``), so the links
work in Jupyter and on the repository's web pages; ``on_page_content`` turns them into
the site's URLs, and drops the MathJax 2 loader (an empty ``<script src="">``) that
mkdocs-jupyter puts in every notebook page. The pages of docs/ link to a notebook where it
lies in a clone too (``../notebooks/NAME.ipynb``), and ``on_page_markdown`` turns those
links into links to its tutorial page.
"""

import html
import posixpath
import re
import shutil
import tempfile
from pathlib import Path

from mkdocs.plugins import event_priority
from mkdocs.structure.files import File
from mkdocs.utils import get_relative_url

ROOT = Path(__file__).resolve().parent.parent
OPTIONAL_MODULES = ["testing"]
WORKFLOWS = "Workflows"
MATHJAX_DIR = "assets/mathjax"  # in the built site
NOTEBOOKS_DIR = ROOT / "notebooks"  # the tutorials, with their outputs
TUTORIALS_DIR = "tutorials"  # where the site shows them
_staging: list[tempfile.TemporaryDirectory] = []  # this build's copies of the notebooks
NBCONVERT_MATHJAX = re.compile(
    r"<!-- Load mathjax -->.*?<!-- End of mathjax configuration -->", re.DOTALL
)
HREF = re.compile(r'href="([^"]*)"')
MARKDOWN_NOTEBOOK_LINK = re.compile(r"\]\(([^()\s]*\.ipynb)((?:#[^()\s]*)?)\)")
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


def tutorial_links(markdown: str, src_uri: str) -> str:
    """A page's markdown links to ``notebooks/NAME.ipynb`` (relative to the page in a clone)
    as links to the tutorial ``tutorials/NAME.ipynb`` (relative to the page in docs/)."""
    page_dir = posixpath.dirname(src_uri)

    def link(match):
        target, anchor = match.groups()
        in_clone = posixpath.normpath(posixpath.join("docs", page_dir, target))
        if posixpath.dirname(in_clone) != "notebooks":
            return match.group(0)
        tutorial = f"{TUTORIALS_DIR}/{posixpath.basename(in_clone)}"
        return f"]({posixpath.relpath(tutorial, page_dir or '.')}{anchor})"

    return MARKDOWN_NOTEBOOK_LINK.sub(link, markdown)


def on_page_markdown(markdown, page, config, files):
    markdown = tutorial_links(markdown, page.file.src_uri)
    if page.file.src_uri != "api/index.md":
        return markdown
    missing = ungrouped_names(Path(config["docs_dir"]) / "api")
    if not missing:
        return markdown
    blocks = "\n\n".join(f"::: lumaxlike.{name}" for name in missing)
    return f"{markdown}\n\n## Not yet grouped\n\n{blocks}\n"


def mathjax_sources() -> dict[str, Path]:
    """MathJax 3's one-file TeX-to-SVG bundle and its licence, from django-static-mathjax."""
    try:
        import mathjax  # django-static-mathjax (docs extra): MathJax 3.2 as package data
    except ImportError as error:
        raise RuntimeError(
            "the documentation needs MathJax from the django-static-mathjax package: "
            'pip install -e ".[docs]"'
        ) from error
    root = Path(mathjax.__file__).parent / "static" / "mathjax"
    return {"tex-svg.js": root / "es5" / "tex-svg.js", "LICENSE": root / "LICENSE"}


def add_tutorials(files, config) -> None:
    """notebooks/*.ipynb as the site's tutorials/*.ipynb, copied to a temporary folder."""
    release_staging()
    staging = tempfile.TemporaryDirectory(prefix="lumaxlike-tutorials-")
    _staging.append(staging)
    (Path(staging.name) / TUTORIALS_DIR).mkdir()
    for path in sorted(NOTEBOOKS_DIR.glob("*.ipynb")):
        src_uri = f"{TUTORIALS_DIR}/{path.name}"
        if files.get_file_from_path(src_uri) is not None:
            raise RuntimeError(
                f"docs/{src_uri}: the tutorials live in notebooks/ only; remove this copy"
            )
        shutil.copyfile(path, Path(staging.name) / src_uri)
        files.append(
            File(
                src_uri,
                src_dir=staging.name,
                dest_dir=config["site_dir"],
                use_directory_urls=config["use_directory_urls"],
            )
        )


def release_staging() -> None:
    while _staging:
        _staging.pop().cleanup()


@event_priority(50)  # before mkdocs-jupyter's on_files (priority 0), which renders notebooks
def on_files(files, config):
    for name, path in mathjax_sources().items():
        if not path.is_file():
            raise RuntimeError(f"MathJax file missing from django-static-mathjax: {path}")
        files.append(File.generated(config, f"{MATHJAX_DIR}/{name}", abs_src_path=str(path)))
    add_tutorials(files, config)
    return files


def on_post_build(config):
    release_staging()


def on_serve(server, config, builder):
    server.watch(str(NOTEBOOKS_DIR))
    return server


def site_href(href: str, page, files) -> str:
    """A notebook's link (relative to notebooks/ in a clone) as a URL of the site.

    ``NN_name.ipynb`` is the tutorial page of that notebook, ``../docs/PAGE.md`` the
    workflow page; other links (absolute, in-page, or to files the site lacks) are kept,
    and the site's link check reports those that do not resolve.
    """
    target, hash_, anchor = html.unescape(href).partition("#")
    if not target or "://" in target or target.startswith(("/", "mailto:")):
        return href
    in_clone = posixpath.normpath(posixpath.join("notebooks", target))
    if in_clone.startswith("notebooks/") and in_clone.endswith(".ipynb"):
        in_clone = f"docs/{TUTORIALS_DIR}/" + in_clone.removeprefix("notebooks/")
    if not in_clone.startswith("docs/"):
        return href
    file = files.get_file_from_path(in_clone.removeprefix("docs/"))
    if file is None:
        return href
    return html.escape(get_relative_url(file.url, page.url) + hash_ + anchor)


def on_page_content(html_text, page, config, files):
    if not page.file.src_uri.endswith(".ipynb"):
        return html_text
    html_text = NBCONVERT_MATHJAX.sub("", html_text)
    return HREF.sub(lambda m: f'href="{site_href(m.group(1), page, files)}"', html_text)
