"""Large Markdown bodies read in windows: the same events as one parse, memory bounded.

The windows here are a few lines long (``window_lines``), so that small documents cross many
window boundaries; the reader uses windows of thousands of lines, and only for bodies over
``WHOLE_BODY_CHARS``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from loader.documents import Block
from loader.ingest.readers import markdown_windows, read_document
from loader.ingest.readers.common import Heading, Rejected
from loader.ingest.readers.markdown import markdown_events, parse_front_matter
from loader.ingest.readers.markdown_tokens import parser, token_events
from loader.ingest.readers.markdown_windows import windowed_events

ROOT = Path(__file__).resolve().parents[4]
DOCUMENTS = sorted(
    path
    for pattern in ("docs/**/*.md", "guide/*.md", "README.md", "tests/fixtures/**/*.md")
    for path in ROOT.glob(pattern)
)
# Windows of 7 lines and more read every document here exactly as one parse; under that, the
# search for a paragraph cut outside code spans and emphasis has too few lines to look back on.
SMALL_WINDOWS = (7, 12, 25)


def whole(text: str) -> list[Heading | Block]:
    return token_events(parser.parse(text))


def windowed(text: str, lines: int) -> list[Heading | Block]:
    return windowed_events(text, window_lines=lines, window_chars=10**9)


def body(path: Path) -> str | None:
    try:
        return parse_front_matter(path.read_text(encoding="utf-8"))[1]
    except (UnicodeDecodeError, Rejected):  # the bad-input fixtures
        return None


@pytest.fixture
def unbounded_growth(monkeypatch: pytest.MonkeyPatch) -> None:
    """Windows of 4 lines widen past 4x for a long list item; these tests are about the cuts."""
    monkeypatch.setattr(markdown_windows, "MAX_GROWTH", 1_000_000)


def test_the_repository_documents_are_found() -> None:
    assert len(DOCUMENTS) >= 10
    assert any(path.parts[-2] == "docs" for path in DOCUMENTS)


@pytest.mark.usefixtures("unbounded_growth")
@pytest.mark.parametrize("path", DOCUMENTS, ids=lambda path: str(path.relative_to(ROOT)))
def test_repository_documents_read_the_same_in_windows(path: Path) -> None:
    text = body(path)
    if text is None or not text.strip():
        pytest.skip("not a readable Markdown body")
    expected = whole(text)
    assert markdown_events(text) == expected  # under the threshold: one parse
    for lines in SMALL_WINDOWS:
        assert windowed(text, lines) == expected, f"window of {lines} lines"


def test_the_reader_reads_the_docs_the_same_through_windows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    docs = ROOT / "docs"
    paths = sorted(docs.rglob("*.md"))
    before = [read_document(path, docs, 10_000_000) for path in paths]
    monkeypatch.setattr("loader.ingest.readers.markdown.WHOLE_BODY_CHARS", 0)
    monkeypatch.setattr(markdown_windows, "WINDOW_LINES", 6)
    monkeypatch.setattr(markdown_windows, "MAX_GROWTH", 1_000_000)
    assert [read_document(path, docs, 10_000_000) for path in paths] == before


def table_text(rows: int) -> str:
    lines = ["| n | name | note |", "| ---: | --- | :-: |"]
    lines += [f"| {n} | item *{n}* | `x{n}` \\| y |" for n in range(rows)]
    return "# Table\n\n" + "\n".join(lines) + "\n\nAfter the table.\n"


def test_a_table_across_windows_is_one_table_with_every_row_in_order() -> None:
    text = table_text(60)
    events = windowed(text, 5)
    assert events == whole(text)
    tables = [event for event in events if isinstance(event, Block) and event.kind == "table"]
    assert len(tables) == 1
    rows = tables[0].text.split("\n")
    assert rows[0] == "| n | name | note |" and len(rows) == 62
    assert [row.split(" | ")[0] for row in rows[2:]] == [f"| {n}" for n in range(60)]


@pytest.mark.usefixtures("unbounded_growth")
def test_a_list_across_windows_keeps_its_items_and_numbers() -> None:
    items = []
    for n in range(7, 37):
        items.append(f"{n}. item {n} with **bold**")
        indent = " " * len(f"{n}. ")
        if n % 4 == 0:
            items += [f"{indent}- nested under {n}", "", f"{indent}More of {n}."]
    text = "Intro.\n\n" + "\n".join(items) + "\n\n- a bullet list after\n- two\n"
    events = windowed(text, 5)
    assert events == whole(text)
    lists = [event.text for event in events if isinstance(event, Block) and event.kind == "list"]
    assert len(lists) == 2
    tops = [line for line in lists[0].split("\n") if line[:1].isdigit()]
    assert [line.split(".")[0] for line in tops] == [str(n) for n in range(7, 37)]


def test_a_paragraph_across_windows_is_one_paragraph_read_as_one() -> None:
    lines = []
    for n in range(40):
        lines.append(f"line {n} of the paragraph")
        if n % 9 == 3:
            lines.append("    indented continuation, no code")  # code only at a block start
        if n % 9 == 6:
            lines.append("2. no list: a list must start at 1 to interrupt a paragraph")
    text = "\n".join(lines) + "\n\n## Next\n\nEnd.\n"
    events = windowed(text, 4)
    assert events == whole(text)
    assert [type(event).__name__ for event in events] == ["Block", "Heading", "Block"]
    assert events[0].kind == "paragraph" and "line 39 of the paragraph" in events[0].text


def test_a_long_paragraph_ending_in_a_setext_underline_is_one_heading() -> None:
    text = "\n".join(f"words {n}" for n in range(12)) + "\n===\n\nBody.\n"
    events = windowed(text, 4)
    assert events == whole(text)
    assert events[0] == Heading(1, " ".join(f"words {n}" for n in range(12)))


@pytest.mark.parametrize("lines", [4, 5, 6, 9])
def test_a_fence_across_a_window_boundary_stays_code_and_what_follows_is_read(lines: int) -> None:
    content = ["# not a heading", "```", "| not | a table |", "", "- not a list", "x = 1"] * 3
    text = (
        "Intro.\n\n~~~python extra\n"
        + "\n".join(content)
        + "\n~~~\n\n# After\n\nA paragraph after.\n"
    )
    events = windowed(text, lines)
    assert events == whole(text)
    assert events == [
        Block("paragraph", "Intro."),
        Block("code", "~~~python\n" + "\n".join(content) + "\n~~~"),  # ``` inside: ~~~
        Heading(1, "After"),
        Block("paragraph", "A paragraph after."),
    ]


def test_an_html_comment_across_windows_leaves_no_text() -> None:
    text = "Before.\n\n<!--\n" + "\n".join(f"hidden {n}" for n in range(20)) + "\n-->\n\nAfter.\n"
    events = windowed(text, 4)
    assert events == whole(text) == [Block("paragraph", "Before."), Block("paragraph", "After.")]


@pytest.mark.usefixtures("unbounded_growth")
def test_indented_code_and_quotes_across_windows() -> None:
    code = "\n".join(f"    step({n})" if n % 5 else "" for n in range(1, 30))
    quote = "\n".join(f"> quoted paragraph {n}\n>" for n in range(12))
    text = f"Code:\n\n{code}\n\n{quote}\n\nEnd.\n"
    for lines in SMALL_WINDOWS:
        assert windowed(text, lines) == whole(text)


FILLER = "\n\n".join(f"Paragraph {n} of filler." for n in range(30))


def test_a_reference_defined_in_a_later_window_still_gives_link_text() -> None:
    text = f"See [the policy][refunds] and [Refunds].\n\n{FILLER}\n\n[refunds]: https://x.org/r\n"
    events = windowed(text, 4)
    assert events == whole(text)
    assert events[0] == Block("paragraph", "See the policy and Refunds.")


def test_references_the_prescan_misreads_are_read_as_one_parse_reads_them() -> None:
    # "```" inside an HTML block is no fence; a definition inside a comment is no definition.
    text = (
        f"Use [a][one], [b][two].\n\n{FILLER}\n\n<div>\n```\n</div>\n\n[one]: /one\n\n"
        "<!--\n\n[two]: /two\n\n-->\n"
    )
    events = windowed(text, 4)
    assert events == whole(text)
    assert events[0] == Block("paragraph", "Use a, [b][two].")


def test_windows_stay_small_however_long_the_block(monkeypatch: pytest.MonkeyPatch) -> None:
    parsed: list[int] = []
    block_parser = markdown_windows._block_parser

    class Counting:
        def parse(self, src: str, env: dict) -> list:
            parsed.append(src.count("\n") + 1)
            return block_parser.parse(src, env)

    monkeypatch.setattr(markdown_windows, "_block_parser", Counting())
    text = table_text(3000)
    assert windowed(text, 100) == whole(text)
    assert max(parsed) <= 100 + 2  # a window, and the table's header and delimiter again
    assert len(parsed) >= 30
