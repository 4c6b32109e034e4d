"""Word .docx files built with python-docx at test time."""

from __future__ import annotations

import datetime as dt
import re
from pathlib import Path

import docx
import pytest
from docx.enum.style import WD_STYLE_TYPE
from docx.oxml import OxmlElement
from docx.oxml.ns import qn

from loader.errors import InputError
from loader.ingest.readers import read_document


def _outline_style(document, name: str, level: int):
    """A paragraph style that is not a Heading style but has Word's outline level."""
    style = document.styles.add_style(name, WD_STYLE_TYPE.PARAGRAPH)
    outline = OxmlElement("w:outlineLvl")
    outline.set(qn("w:val"), str(level - 1))
    style.element.get_or_add_pPr().append(outline)
    return style


def test_headings_lists_tables_and_properties(tmp_path: Path) -> None:
    document = docx.Document()
    document.core_properties.title = "Courier handbook"
    document.core_properties.language = "en"
    document.core_properties.keywords = "couriers, shifts"
    document.core_properties.created = dt.datetime(2024, 5, 2, 9, 30)
    document.add_paragraph("Courier handbook", style="Title")
    document.add_paragraph("Welcome to the team.")
    document.add_heading("Starting a shift", level=1)
    document.add_paragraph("Check the bag.", style="List Bullet")
    document.add_paragraph("Open the app.", style="List Bullet")
    document.add_heading("Payouts", level=2)
    table = document.add_table(rows=3, cols=3)
    for row, cells in zip(table.rows, [["Day", "Payout", "Note"], ["Monday", "Weekly", ""],
                                       ["Friday", "Tips", "cash"]], strict=True):  # fmt: skip
        for cell, text in zip(row.cells, cells, strict=True):
            cell.text = text
    table.cell(1, 1).merge(table.cell(1, 2))  # one cell over two columns: counted once
    document.add_paragraph("Appendix", style=_outline_style(document, "Annex", 1))
    document.add_paragraph("Contact the hub.")
    path = tmp_path / "handbook.docx"
    document.save(str(path))

    doc = read_document(path, tmp_path, 1_000_000)
    assert doc.title == "Courier handbook"
    assert doc.metadata == {"lang": "en", "tags": ["couriers", "shifts"], "published": "2024-05-02"}
    assert [s.heading_path for s in doc.sections] == [
        (),
        ("Starting a shift",),
        ("Starting a shift", "Payouts"),
        ("Appendix",),
    ]
    blocks = [[(b.kind, b.text) for b in s.blocks] for s in doc.sections]
    assert blocks == [
        [("paragraph", "Welcome to the team.")],
        [("list", "- Check the bag.\n- Open the app.")],
        [
            (
                "table",
                "| Day | Payout | Note |\n| --- | --- | --- |\n| Monday | Weekly |  |\n"
                "| Friday | Tips | cash |",
            )
        ],  # fmt: skip
        [("paragraph", "Contact the hub.")],
    ]


def test_numbered_lists_count_per_level(tmp_path: Path) -> None:
    document = docx.Document()
    document.add_heading("Steps", level=1)
    for text in ("Sign in.", "Pick an order.", "Deliver it."):
        document.add_paragraph(text, style="List Number")
    path = tmp_path / "steps.docx"
    document.save(str(path))
    doc = read_document(path, tmp_path, 1_000_000)
    assert doc.title == "Steps"  # no core title, no Title paragraph: the first Heading 1
    assert doc.sections[0].blocks[0].text == "1. Sign in.\n2. Pick an order.\n3. Deliver it."


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (b"Meeting notes, saved as text.\n", "not a Word .docx file (not a ZIP package)"),
        (b"PK\x03\x04 cut short", "unreadable Word file: truncated or damaged ZIP package"),
        (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + b"\x00" * 64, "encrypted or legacy Word file"),
    ],
)
def test_bad_word_files_are_input_errors(tmp_path: Path, data: bytes, reason: str) -> None:
    path = tmp_path / "bad.docx"
    path.write_bytes(data)
    with pytest.raises(InputError, match="^bad\\.docx: " + re.escape(reason)):
        read_document(path, tmp_path, 1_000_000)


def test_a_word_file_whose_compressed_part_is_garbled(tmp_path: Path) -> None:
    """Bytes garbled inside a part's deflate stream (a bad copy, a failing disk) make zlib fail
    while python-docx reads it: the file is a damaged package, not an "unexpected error"."""
    import struct
    import zipfile

    document = docx.Document()
    document.add_heading("Late deliveries", level=1)
    document.add_paragraph("Orders late by 45 minutes are refunded. " * 20)
    path = tmp_path / "garbled.docx"
    document.save(str(path))
    data = bytearray(path.read_bytes())
    with zipfile.ZipFile(path) as package:
        part = package.getinfo("word/document.xml")
    assert part.compress_type == zipfile.ZIP_DEFLATED
    name_length, extra_length = struct.unpack(
        "<HH", data[part.header_offset + 26 : part.header_offset + 30]
    )
    start = part.header_offset + 30 + name_length + extra_length
    data[start : start + part.compress_size] = b"\xff" * part.compress_size  # invalid block type
    path.write_bytes(bytes(data))
    with pytest.raises(
        InputError,
        match=r"^garbled\.docx: unreadable Word file: truncated or damaged ZIP package \(.*invalid",
    ):
        read_document(path, tmp_path, 1_000_000)


def test_a_zip_that_is_no_word_document(tmp_path: Path) -> None:
    import zipfile

    path = tmp_path / "sheet.docx"
    with zipfile.ZipFile(path, "w") as archive:
        archive.writestr("hello.txt", "not a Word part")
    with pytest.raises(InputError, match=r"^sheet\.docx: (not a Word document|unreadable Word)"):
        read_document(path, tmp_path, 1_000_000)


def test_libreoffice_word_files_keep_their_own_properties(libreoffice_files) -> None:
    """LibreOffice relates docProps/core.xml with a type python-docx does not recognise (it
    spells ``officedocument``); the file's own title and language are read all the same."""
    import zipfile

    titled = libreoffice_files.titled_docx
    with zipfile.ZipFile(titled) as package:
        assert b"/officedocument/2006/relationships/metadata/core" in package.read("_rels/.rels")
    doc = read_document(titled, titled.parent, 1_000_000)
    assert doc.title == "Règles du café"
    assert doc.metadata == {"lang": "fr-FR", "tags": ["café", "règles"]}
    assert [s.heading_path for s in doc.sections] == [(), ("Ouverture",)]

    untitled = libreoffice_files.untitled_docx
    doc = read_document(untitled, untitled.parent, 1_000_000)
    assert doc.title == "Untitled notes"  # no core title, Title paragraph or Heading 1
    assert [s.heading_path for s in doc.sections] == [(), ("Closing",)]


def test_a_package_without_core_properties_gets_no_invented_title(tmp_path: Path) -> None:
    """python-docx makes up core properties (title "Word Document") for a package without
    docProps/core.xml; the reader takes none of them."""
    import zipfile

    document = docx.Document()
    document.add_paragraph("Notes kept without any document properties.")
    saved = tmp_path / "saved.docx"
    document.save(str(saved))
    path = tmp_path / "shift-notes.docx"
    with zipfile.ZipFile(saved) as source, zipfile.ZipFile(path, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "docProps/core.xml":
                continue
            if item.filename == "_rels/.rels":
                data = re.sub(rb"<Relationship [^>]*core-properties[^>]*/>", b"", data)
            target.writestr(item, data)
    doc = read_document(path, tmp_path, 1_000_000)
    assert doc.title == "Shift notes"
    assert doc.metadata == {}


def test_a_part_with_broken_xml_is_one_reason_naming_the_part(tmp_path: Path) -> None:
    import zipfile

    document = docx.Document()
    document.add_paragraph("Shift notes.")
    saved = tmp_path / "saved.docx"
    document.save(str(saved))
    path = tmp_path / "broken.docx"
    with zipfile.ZipFile(saved) as source, zipfile.ZipFile(path, "w") as target:
        for item in source.infolist():
            data = source.read(item)
            if item.filename == "word/document.xml":
                data = data[: len(data) // 2]  # cut inside the XML
            target.writestr(item, data)
    with pytest.raises(
        InputError,
        match=r"^broken\.docx: unreadable Word file: word/document\.xml has broken XML \(",
    ):
        read_document(path, tmp_path, 1_000_000)


def test_an_unforeseen_reader_error_is_one_line_without_a_traceback(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The push names the file and the reason; the traceback is logged for --debug only."""
    import logging

    import loader.ingest.readers as readers
    from loader.ingest.readers import Skipped, iter_documents

    def fails(data: bytes, source: str, stem: str):
        raise RuntimeError("a reader bug")

    monkeypatch.setattr(readers, "read_docx", fails)
    (tmp_path / "notes.docx").write_bytes(b"PK\x03\x04")
    with caplog.at_level(logging.WARNING):
        items = list(iter_documents(tmp_path, 1_000_000))
    assert items == [Skipped("notes.docx", "unexpected error: RuntimeError: a reader bug")]
    assert caplog.records == []
    with caplog.at_level(logging.DEBUG, logger="loader.ingest.readers"):
        list(iter_documents(tmp_path, 1_000_000))
    assert [record.exc_info is not None for record in caplog.records] == [True]
