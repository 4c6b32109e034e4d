"""Every relative link of README.md and guide/ names a file of the repository."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.paths import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "guide").glob("*.md"))]
# [text](target) and ![alt](target); the target ends at a space (a title) or the parenthesis.
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s[^)]*)?\)")
ABSOLUTE = re.compile(r"^[a-z][a-z0-9+.-]*:|^#|^/", re.IGNORECASE)


def relative_links(page: Path) -> list[str]:
    """The page's link targets that are paths (no scheme, no bare #anchor), outside code."""
    text = re.sub(r"```.*?```", "", page.read_text(encoding="utf-8"), flags=re.DOTALL)
    text = re.sub(r"`[^`\n]*`", "", text)
    return [target for target in LINK.findall(text) if not ABSOLUTE.match(target)]


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(REPO).as_posix())
def test_relative_links_resolve_to_files_of_the_repository(page):
    broken = []
    for target in relative_links(page):
        path = (page.parent / target.split("#", 1)[0]).resolve()
        if not path.exists() or not path.is_relative_to(REPO):
            broken.append(target)
    assert not broken, f"{page.relative_to(REPO)} links to missing files: {broken}"


def test_the_guide_has_an_index_naming_every_page():
    pages = {p.name for p in (REPO / "guide").glob("*.md")} - {"README.md"}
    assert pages == {t for t in relative_links(REPO / "guide" / "README.md") if t in pages}, (
        "guide/README.md must link every page of guide/ in one line saying what it is for"
    )


def test_no_path_outside_the_repository_in_the_docs():
    for page in PAGES:
        text = page.read_text(encoding="utf-8")
        assert "../shared" not in text, f"{page.relative_to(REPO)} names a path outside the repo"
