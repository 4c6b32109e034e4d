"""What the docs and the code's comments point at exists (issue #44): every extra an install line
names (``pip install '.[x,y]'``, ``loader[x]``, in README.md, guide/ and the messages of loader/)
is one of pyproject.toml's, and every README or guide section a comment of the code cites
(``README, "Models"``, ``guide/models.md, "Fine-tuning ..."``, ``guide/x.md#anchor``) is a
heading of that page."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import pytest

from tests.paths import REPO

PAGES = [REPO / "README.md", *sorted((REPO / "guide").glob("*.md"))]
# The sources whose comments may cite a page; this file cites broken ones on purpose.
CODE = sorted(
    path
    for folder in ("loader", "tests", "benchmarks")
    for path in (REPO / folder).rglob("*.py")
    if path != Path(__file__).resolve()
)
# '.[a,b]' after a space or quote (pip's spelling for this checkout), or loader[a,b].
EXTRAS = re.compile(r"(?:(?<=[\s'\"])\.|\bloader)\[([a-z][a-z0-9_,\- ]*)\]")
# A page and, optionally, the section it cites: README, "Models"; guide/models.md, "Fine-tuning";
# guide/models.md#fine-tuning.
REFERENCE = re.compile(
    r"\b(README(?:\.md)?|guide/[a-z0-9_-]+\.md)(?:#([a-z0-9-]+)|,? \"([^\"\n]+)\")?"
)
HEADING = re.compile(r"^#+\s+(.*?)\s*$", re.MULTILINE)


def declared_extras() -> set[str]:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    return set(project["optional-dependencies"])


def named_extras(text: str) -> set[str]:
    return {
        name.strip() for group in EXTRAS.findall(text) for name in group.split(",") if name.strip()
    }


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces as hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def broken_references(path: Path) -> list[str]:
    """The page and section references of a source file that name no page or no heading."""
    broken = []
    for match in REFERENCE.finditer(path.read_text(encoding="utf-8")):
        page_name, anchor, section = match.groups()
        page = REPO / ("README.md" if page_name.startswith("README") else page_name)
        if not page.is_file():
            broken.append(match.group(0))
            continue
        headings = HEADING.findall(page.read_text(encoding="utf-8"))
        if anchor and anchor not in {_slug(heading) for heading in headings}:
            broken.append(match.group(0))
        if section and not any(section.lower() in heading.lower() for heading in headings):
            broken.append(match.group(0))
    return broken


@pytest.mark.parametrize("page", PAGES, ids=lambda page: page.relative_to(REPO).as_posix())
def test_every_extra_a_page_installs_is_declared(page):
    unknown = named_extras(page.read_text(encoding="utf-8")) - declared_extras()
    assert not unknown, f"{page.relative_to(REPO)} installs extras pyproject.toml lacks: {unknown}"


def test_every_extra_a_message_names_is_declared():
    unknown = {
        f"{path.relative_to(REPO)}: {name}"
        for path in (REPO / "loader").rglob("*.py")
        for name in named_extras(path.read_text(encoding="utf-8")) - declared_extras()
    }
    assert not unknown, unknown


def test_every_section_the_code_cites_exists():
    broken = {}
    for path in CODE:
        if refs := broken_references(path):
            broken[path.relative_to(REPO).as_posix()] = refs
    assert not broken, broken


def test_the_readings_catch_what_they_are_for(tmp_path):
    assert named_extras("python3 -m pip install -e '.[model,langchain]'") == {"model", "langchain"}
    assert named_extras("needs pip install 'loader[serve]'; x = rows[0]") == {"serve"}
    cited = tmp_path / "cited.py"
    cited.write_text(
        '# measured (README, "Models"); see guide/models.md, "Fine-tuning the embedder"\n'
        "# guide/nowhere.md and README.md#install\n",
        encoding="utf-8",
    )
    assert broken_references(cited) == ['README, "Models"', "guide/nowhere.md"]


def test_the_judging_page_names_every_pooled_mode_and_the_question_limit():
    from loader.query.request import MAX_QUESTION_CHARS
    from loader.settings import SEARCH_MODES  # the page pools every mode (judge_page.POOL_MODES)

    text = (REPO / "guide" / "judging.md").read_text(encoding="utf-8")
    section = " ".join(text.split("## 3. The judging page", 1)[1].split("\n## ", 1)[0].split())
    unnamed = [mode for mode in SEARCH_MODES if f"`{mode}`" not in section]
    assert not unnamed, f"guide/judging.md's judging page section leaves out {unnamed}"
    assert f"{MAX_QUESTION_CHARS:,} characters" in section
