"""Markdown: headings (ATX and setext), front matter, code, tables, lists."""

from __future__ import annotations

from pathlib import Path

import pytest

from loader.errors import InputError
from loader.ingest.readers import read_document

MAX_BYTES = 1_000_000


def read(tmp_path: Path, text: str, name: str = "doc.md"):
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    return read_document(path, tmp_path, MAX_BYTES)


def paths(doc) -> list[tuple[str, ...]]:
    return [section.heading_path for section in doc.sections]


def test_atx_heading_paths_leave_out_the_title_h1(tmp_path: Path) -> None:
    doc = read(
        tmp_path,
        "Before any heading.\n\n# Refund policy\n\nIntro.\n\n## Refunds\n\nA.\n\n"
        "### Late deliveries\n\nB.\n\n#### Exceptions\n\nC.\n\n## Wallet\n\nD.\n",
    )
    assert doc.title == "Refund policy"
    assert paths(doc) == [
        (),
        ("Refunds",),
        ("Refunds", "Late deliveries"),
        ("Refunds", "Late deliveries", "Exceptions"),
        ("Wallet",),
    ]
    assert doc.sections[0].text == "Before any heading.\n\nIntro."


def test_setext_headings(tmp_path: Path) -> None:
    doc = read(
        tmp_path, "Payments\n========\n\nIntro.\n\nPaying with UPI\n---------------\n\nUPI.\n"
    )
    assert doc.title == "Payments"
    assert paths(doc) == [(), ("Paying with UPI",)]


def test_skipped_levels_and_later_h1s(tmp_path: Path) -> None:
    doc = read(
        tmp_path, "# Guide\n\n### Deep\n\nA.\n\n## Mid\n\nB.\n\n# Appendix\n\n## Notes\n\nC.\n"
    )
    assert paths(doc) == [("Deep",), ("Mid",), ("Appendix", "Notes")]


def test_front_matter_goes_to_metadata(tmp_path: Path) -> None:
    doc = read(
        tmp_path,
        "---\ntitle: Refund policy\ntenant: acme\nlang: en\ntags: [refunds, 'orders']\n"
        "published: 2024-05-02\nowner: legal\n---\n\n# Refunds and cancellations\n\nText.\n",
    )
    assert doc.title == "Refund policy"
    assert doc.metadata == {
        "tenant": "acme",
        "lang": "en",
        "tags": ["refunds", "orders"],
        "published": "2024-05-02",
        "owner": "legal",
    }
    # The H1 differs from the front-matter title, so it stays in the heading path.
    assert paths(doc) == [("Refunds and cancellations",)]


def test_front_matter_block_lists(tmp_path: Path) -> None:
    doc = read(tmp_path, "---\ntags:\n  - payments\n  - upi\n# a comment\n---\nText.\n")
    assert doc.metadata == {"tags": ["payments", "upi"]}


def test_malformed_front_matter_names_file_and_line(tmp_path: Path) -> None:
    with pytest.raises(InputError, match=r"bad\.md: malformed front matter on line 3"):
        read(tmp_path, "---\ntitle: X\nthis is not yaml\n---\nText.\n", name="bad.md")
    with pytest.raises(InputError, match=r"line 2: published 'last week'"):
        read(tmp_path, "---\npublished: last week\n---\nText.\n", name="bad.md")
    with pytest.raises(InputError, match="never closed"):
        read(tmp_path, "---\ntitle: X\n\nText.\n", name="bad.md")


def test_title_falls_back_to_the_file_name(tmp_path: Path) -> None:
    doc = read(tmp_path, "## Section\n\nText.\n", name="late-deliveries.md")
    assert doc.title == "Late deliveries"
    assert paths(doc) == [("Section",)]


def test_code_tables_and_lists_are_blocks(tmp_path: Path) -> None:
    doc = read(
        tmp_path,
        "# T\n\nSome *emphasis* and `code` with a [link](http://x).\n\n"
        "```bash\nadb logcat -d\n\necho done\n```\n\n"
        "| Code | Meaning |\n|---|:--|\n| E1043 | Not accepting orders |\n| E2007 | A \\| B |\n\n"
        "1. First\n2. Second\n   - nested\n\n- loose\n\n  second paragraph\n",
    )
    kinds = [(block.kind, block.text) for block in doc.sections[0].blocks]
    assert kinds == [
        ("paragraph", "Some emphasis and `code` with a link."),
        ("code", "```bash\nadb logcat -d\n\necho done\n```"),
        (
            "table",
            "| Code | Meaning |\n| --- | --- |\n"
            "| E1043 | Not accepting orders |\n| E2007 | A \\| B |",
        ),
        ("list", "1. First\n2. Second\n  - nested"),
        ("list", "- loose\n  second paragraph"),
    ]


def test_only_front_matter_is_no_text(tmp_path: Path) -> None:
    with pytest.raises(InputError, match="no text after the front matter"):
        read(tmp_path, "---\ntitle: Empty\n---\n\n")
