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


def test_front_matter_is_yaml(tmp_path: Path) -> None:
    """Comments, quotes, block scalars and nested values read as YAML reads them; every value but
    the tenant keeps the text it was written with (the documents' hashes stay as they were)."""
    doc = read(
        tmp_path,
        "---\ntitle: 'Refunds: how long'  # shown in results\nlang: en # English\n"
        "tags:\n  - refunds   # first\n  - 'late orders'\nsummary: |\n  Two\n  lines\n"
        "draft: true\nversion: 1.10\nowner: {team: legal, id: 7}\nempty:\n---\nText.\n",
    )
    assert doc.title == "Refunds: how long"
    assert doc.metadata == {
        "lang": "en",
        "tags": ["refunds", "late orders"],
        "summary": "Two\nlines\n",
        "draft": "true",
        "version": "1.10",
        "owner": {"team": "legal", "id": "7"},
        "empty": "",
    }


@pytest.mark.parametrize(
    ("front", "message"),
    [
        ("title: X\nthis is not yaml", "on line 3: not valid YAML .could not find expected ':'"),
        ("title: [unclosed", "on line 2: not valid YAML .expected"),
        ("- just\n- a list", "on line 2: expected 'key: value' lines, got a YAML sequence"),
        ("tenant: *nowhere", "on line 2: not valid YAML .found undefined alias"),
        ("tenant: 2024-13-45", "on line 2: '2024-13-45' is no valid YAML value"),
        ("a: &x [*x, *x]\nb: *x", "on line 2: more than 10,000 values or 20 levels"),
    ],
)
def test_front_matter_that_is_no_valid_yaml_names_file_and_line(tmp_path, front, message):
    with pytest.raises(InputError, match=r"bad\.md: malformed front matter " + message):
        read(tmp_path, f"---\n{front}\n---\nText.\n", name="bad.md")


def test_front_matter_nested_too_deeply_is_no_valid_yaml(tmp_path) -> None:
    # PyYAML composes nested flow collections recursively: this was "unexpected error:
    # RecursionError: maximum recursion depth exceeded while calling a Python object"
    with pytest.raises(
        InputError,
        match=r"^deep\.md: malformed front matter: not valid YAML \(nested too deeply\)$",
    ):
        read(tmp_path, "---\ntitle: " + "[" * 50_000 + "\n---\nText.\n", name="deep.md")


def test_a_push_skips_a_file_of_bad_front_matter_and_reads_the_others(tmp_path: Path) -> None:
    from loader.ingest.readers import Skipped, iter_documents

    (tmp_path / "bad.md").write_text("---\ntenant: [unclosed\n---\nText.\n", encoding="utf-8")
    (tmp_path / "good.md").write_text("---\ntenant: acme # ours\n---\nText.\n", encoding="utf-8")
    bad, good = iter_documents(tmp_path, MAX_BYTES)
    assert isinstance(bad, Skipped) and bad.source == "bad.md"
    assert "malformed front matter on line 2: not valid YAML" in bad.reason
    assert good.metadata == {"tenant": "acme"}


def test_malformed_front_matter_names_file_and_line(tmp_path: Path) -> None:
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
