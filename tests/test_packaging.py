"""The package's metadata as a package index shows it: an SPDX licence with its file, the
project's addresses, and a README whose links work away from the repository.

The index renders README.md on its own, so a link relative to the clone (``docs/x.md``)
leads nowhere there: every link must be absolute, and those into the repository must use
the address that ``[project.urls]`` gives and name a file that exists.
"""

import re
import tomllib
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
PROJECT = PYPROJECT["project"]
LINK = re.compile(r"\]\(([^)\s]+)\)")  # inline markdown links and images


def readme_links(text: str) -> list[str]:
    return LINK.findall(text)


def github_slug(heading: str) -> str:
    """The anchor GitHub gives a markdown heading (lower case, punctuation dropped)."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_license_is_an_spdx_expression_with_its_file_and_a_backend_that_reads_it():
    assert PROJECT["license"] == "MIT"  # a string (SPDX), not the deprecated table
    assert PROJECT["license-files"] and all(
        (ROOT / name).is_file() for name in PROJECT["license-files"]
    )
    # setuptools refuses licence classifiers next to an SPDX expression
    assert not [c for c in PROJECT["classifiers"] if c.startswith("License ::")]
    (setuptools,) = [
        Requirement(text)
        for text in PYPROJECT["build-system"]["requires"]
        if Requirement(text).name == "setuptools"
    ]
    # PEP 639 (`license` string, `license-files`) needs setuptools 77 or later
    assert "77.0" in setuptools.specifier and "76.9" not in setuptools.specifier


def test_project_has_authors_classifiers_and_its_addresses():
    assert PROJECT["authors"] and all(author.get("name") for author in PROJECT["authors"])
    assert any(c.startswith("Programming Language :: Python :: 3.") for c in PROJECT["classifiers"])
    urls = PROJECT["urls"]
    assert {"Homepage", "Repository", "Documentation", "Changelog", "Issues"} <= set(urls)
    assert all(url.startswith(urls["Repository"]) for url in urls.values()), urls


def test_readme_links_work_on_the_package_index():
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    repository = PROJECT["urls"]["Repository"]
    headings = {github_slug(h) for h in re.findall(r"^#+ (.+)$", text, re.MULTILINE)}
    links = readme_links(text)
    assert len(links) >= 10
    relative = [link for link in links if not link.startswith("https://")]
    assert not relative, f"links the package index cannot follow: {relative}"
    for link in links:
        if not link.startswith(repository):
            continue
        path, _, anchor = link.removeprefix(repository).partition("#")
        if path:
            assert path.startswith("/blob/main/"), link
            assert (ROOT / path.removeprefix("/blob/main/")).is_file(), link
        else:
            assert anchor in headings, link


def test_the_readme_check_finds_a_relative_link_and_its_anchors():
    links = readme_links("See [docs](docs/index.md) and [here](https://example.org/a#b).")
    assert links == ["docs/index.md", "https://example.org/a#b"]
    assert github_slug("Citation and licence") == "citation-and-licence"
    assert github_slug("The `fit` command, briefly") == "the-fit-command-briefly"
