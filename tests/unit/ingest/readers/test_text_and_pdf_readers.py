"""Plain text and PDF."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from pypdf import PdfWriter
from pypdf.generic import DecodedStreamObject, DictionaryObject, NameObject

from loader.errors import InputError
from loader.ingest.readers import read_document
from loader.ingest.readers.pdf import read_pdf, stated_title
from tests.paths import REPO
from tests.unit.ingest.readers.conftest import HANDBOOK_PATHS


def test_text_paragraphs_and_title(tmp_path: Path) -> None:
    path = tmp_path / "food_safety-notes.txt"
    path.write_text(
        "First paragraph wraps\nonto a second line.\n\n  \nSecond para-\ngraph.\n\n"
        "Steps:\n- one\n- two\n",
        encoding="utf-8",
    )
    doc = read_document(path, tmp_path, 10_000)
    assert doc.title == "Food safety notes"
    assert len(doc.sections) == 1 and doc.sections[0].heading_path == ()
    assert [(b.kind, b.text) for b in doc.sections[0].blocks] == [
        ("paragraph", "First paragraph wraps onto a second line."),
        ("paragraph", "Second paragraph."),
        ("paragraph", "Steps:"),
        ("list", "- one\n- two"),
    ]


def write_pdf(path: Path, pages: list[list[str]], outline: list[tuple[str, int]], title: str = ""):
    """A small text PDF built with pypdf (Helvetica, one text line per entry)."""
    writer = PdfWriter()
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    for lines in pages:
        page = writer.add_blank_page(612, 792)
        page[NameObject("/Resources")] = DictionaryObject(
            {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
        )
        ops = ["BT /F1 12 Tf 72 720 Td 14 TL"]
        for line in lines:
            escaped = line.replace("\\", "\\\\").replace("(", "\\(").replace(")", "\\)")
            ops.append(f"({escaped}) Tj T*")
        ops.append("ET")
        stream = DecodedStreamObject()
        stream.set_data("\n".join(ops).encode("latin-1"))
        page.replace_contents(stream)
    for heading, page_number in outline:
        writer.add_outline_item(title=heading, page_number=page_number)
    if title:
        writer.add_metadata({"/Title": title})
    with path.open("wb") as handle:
        writer.write(handle)


def test_pdf_pages_outline_and_title(tmp_path: Path) -> None:
    path = tmp_path / "courier-handbook.pdf"
    write_pdf(
        path,
        [
            ["Welcome to the handbook.", "Introduction", "Couriers deliver food. They are fast."],
            ["More about couriers on page two."],
            ["Refunds", "Refunds are paid in 5 to 7 working days."],
        ],
        outline=[("Introduction", 0), ("Refunds", 2)],
        title="Courier handbook",
    )
    doc = read_document(path, tmp_path, 1_000_000)
    assert doc.title == "Courier handbook"
    assert [s.heading_path for s in doc.sections] == [(), ("Introduction",), ("Refunds",)]
    pages = [[(b.page, b.text) for b in s.blocks] for s in doc.sections]
    assert pages == [
        [(1, "Welcome to the handbook.")],
        [(1, "Couriers deliver food. They are fast."), (2, "More about couriers on page two.")],
        [(3, "Refunds are paid in 5 to 7 working days.")],
    ]


def test_pdf_without_outline_or_title(tmp_path: Path) -> None:
    path = tmp_path / "late-deliveries.pdf"
    write_pdf(path, [["Page one text."], ["Page two text."]], outline=[])
    doc = read_document(path, tmp_path, 1_000_000)
    assert doc.title == "Late deliveries"
    assert [[(b.page, b.text) for b in s.blocks] for s in doc.sections] == [
        [(1, "Page one text."), (2, "Page two text.")]
    ]


def test_broken_pdf_is_an_input_error(tmp_path: Path) -> None:
    path = tmp_path / "broken.pdf"
    path.write_bytes(b"%PDF-1.4\nthis is not really a pdf\n")
    with pytest.raises(InputError, match=r"broken\.pdf: "):
        read_document(path, tmp_path, 1_000_000)
    fake = tmp_path / "fake.pdf"
    fake.write_bytes(b"hello")
    with pytest.raises(InputError, match=r"fake\.pdf: not a PDF file"):
        read_document(fake, tmp_path, 1_000_000)


def test_bom_and_crlf_are_handled_and_bad_bytes_located(tmp_path: Path) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(b"\xef\xbb\xbfFirst line\r\nsecond line.\r\n\r\nNext.")
    doc = read_document(path, tmp_path, 1000)
    assert [b.text for b in doc.sections[0].blocks] == ["First line second line.", "Next."]
    path.write_bytes(b"\xef\xbb\xbfab\xffc")
    with pytest.raises(InputError, match=r"not valid UTF-8 \(byte 0xff at offset 5\)"):
        read_document(path, tmp_path, 1000)


def test_a_scan_without_text_layer_and_an_encrypted_pdf_are_refused(tmp_path: Path) -> None:
    from PIL import Image, ImageDraw

    scan = Image.new("L", (400, 120), 255)
    ImageDraw.Draw(scan).text((10, 40), "Refunds take 5 to 7 working days", fill=0)
    scan.save(tmp_path / "scan.pdf")  # an image, no text: what a scanner makes
    with pytest.raises(InputError, match=r"^scan\.pdf: no text layer, OCR not available$"):
        read_document(tmp_path / "scan.pdf", tmp_path, 1_000_000)

    write_pdf(tmp_path / "plain.pdf", [["Secret text."]], outline=[])
    writer = PdfWriter(clone_from=tmp_path / "plain.pdf")
    writer.encrypt(user_password="courier")
    with (tmp_path / "locked.pdf").open("wb") as handle:
        writer.write(handle)
    with pytest.raises(InputError, match=r"^locked\.pdf: encrypted PDF \(needs a password\)$"):
        read_document(tmp_path / "locked.pdf", tmp_path, 1_000_000)


_READ = """
import sys
from pathlib import Path
from loader.ingest.readers import read_document
from loader.ingest.readers.pdf import read_pdf, stated_title
path = Path(sys.argv[1])
print(repr(read_document(path, path.parent, 10_000_000)))
"""


def test_a_pdf_without_bookmarks_reads_the_same_whatever_the_hash_seed(libreoffice_files):
    """Heading levels come from the styles in the layout; two styles of one size and weight (a
    heading in another font family) once ranked in a set's order, which PYTHONHASHSEED changes:
    the document's hash changed, and an unchanged file was embedded again on every push."""
    path = libreoffice_files.handbook_layout_pdf
    reads = {
        seed: subprocess.run(
            [sys.executable, "-c", _READ, str(path)],
            env={**os.environ, "PYTHONHASHSEED": seed},
            cwd=REPO,
            capture_output=True,
            text=True,
            check=True,
            timeout=120,
        ).stdout  # fmt: skip
        for seed in ("0", "1", "2")
    }
    assert len(set(reads.values())) == 1
    document = read_document(path, path.parent, 10_000_000)
    assert reads["0"] == repr(document) + "\n"
    # pdfplumber gives right-to-left words in visual order: the layout's Hebrew heading is
    # reversed (with the bookmarks, the outline's own title is used).
    paths = [(p[0][::-1],) if p == ("עברית",) else p for p in HANDBOOK_PATHS]
    assert document.title == "Café handbook"
    assert [section.heading_path for section in document.sections] == paths


def test_bookmarks_that_do_not_match_the_text_keep_their_headings(libreoffice_files):
    """The Hebrew bookmark names a line pdfplumber reads reversed: the layout's heading there
    takes the bookmark's title and level, and its section does not merge into the one before."""
    from pypdf import PdfReader

    path = libreoffice_files.handbook_pdf
    outline = PdfReader(path).outline  # top-level entries, and a list of each one's children
    assert "עברית" in [item.title for item in outline if not isinstance(item, list)]
    document = read_document(path, path.parent, 10_000_000)
    assert document.title == "Café handbook"
    assert [section.heading_path for section in document.sections] == HANDBOOK_PATHS
    assert [[b.text for b in section.blocks] for section in document.sections][0] == [
        "Welcome to the café handbook. It covers opening the café and the espresso machine."
    ]


def test_a_borderless_table_ends_where_the_code_block_under_it_starts(libreoffice_files):
    """LibreOffice sets the code block right under the table, closer than the table's rows: its
    lines once joined the table as a row, their indentation making a column of its own."""
    path = libreoffice_files.handbook_pdf
    document = read_document(path, path.parent, 10_000_000)
    section = next(s for s in document.sections if s.heading_path == ("Espresso machine",))
    assert [(b.kind, b.text) for b in section.blocks] == [
        (
            "table",
            "| Setting | Value | Notes |\n| --- | --- | --- |\n"
            "| Boiler pressure | 1.2 bar | check daily |\n| Shot time | 25–30 s | taste test |",
        ),
        (
            "code",
            "```\ndef dial_in(grams_in, grams_out):\n    ratio = grams_out / grams_in\n"
            "    return round(ratio, 1)\n```",
        ),
    ]


STATED_TITLE_GUIDE = """# Configuring plugins in Developer Hub

Plugins are configured in the app configuration file that the operator mounts for every replica.

## Editing the app-config.yaml file of the running instance

Open the file and add the plugin entry under the dynamic plugins key, then restart the pods.

# Troubleshooting plugins

When a plugin fails to load, the log names the package and the reason it gave.
"""


def test_a_pdf_without_a_metadata_title_is_titled_by_its_first_top_heading(tmp_path):
    # LibreOffice writes no Title for a document without one, and two top-level headings leave
    # no lone title line: every chunk was titled by the file name, "Plugins rhdh configure".
    from tests.unit.ingest.readers.conftest import _soffice, _tool

    markdown = tmp_path / "plugins-rhdh-configure.md"
    markdown.write_text(STATED_TITLE_GUIDE, encoding="utf-8")
    docx = markdown.with_suffix(".docx")
    subprocess.run([_tool("pandoc"), str(markdown), "-o", str(docx)], check=True, timeout=60)
    _soffice([docx], tmp_path, tmp_path / "profile", "pdf")
    pdf = docx.with_suffix(".pdf")
    document = read_pdf(pdf.read_bytes(), pdf.name, pdf.stem)
    assert document.title == "Configuring plugins in Developer Hub"
    assert [section.heading_path for section in document.sections if section.heading_path] == [
        ("Editing the app-config.yaml file of the running instance",),
        ("Troubleshooting plugins",),
    ]


@pytest.mark.parametrize(
    ("raw", "stated"),
    [
        ("Courier handbook", "Courier handbook"),
        ("  Courier   handbook ", "Courier handbook"),
        ("Untitled", ""),
        ("untitled document", ""),
        ("Microsoft Word - plugins.docx", ""),
        ("plugins-rhdh-configure.docx", ""),
        (None, ""),
    ],
)
def test_a_tools_placeholder_title_is_no_title(raw, stated):
    assert stated_title(raw) == stated


def test_the_pdf_parsers_warnings_name_the_file(tmp_path: Path, caplog) -> None:
    """pdfminer warned about a damaged PDF without naming it ("WARNING pdfminer.pdfinterp:
    Cannot set line width because b'bad' is an invalid float value"): in a push of many PDFs,
    any of them. Its warnings come out as one warning naming the file."""
    import logging

    writer = PdfWriter()
    page = writer.add_blank_page(612, 792)
    font = DictionaryObject(
        {
            NameObject("/Type"): NameObject("/Font"),
            NameObject("/Subtype"): NameObject("/Type1"),
            NameObject("/BaseFont"): NameObject("/Helvetica"),
        }
    )
    page[NameObject("/Resources")] = DictionaryObject(
        {NameObject("/Font"): DictionaryObject({NameObject("/F1"): font})}
    )
    stream = DecodedStreamObject()
    stream.set_data(b"(bad) w (worse) w BT /F1 12 Tf 72 720 Td (Late orders are refunded.) Tj ET")
    page.replace_contents(stream)
    path = tmp_path / "damaged.pdf"
    with path.open("wb") as handle:
        writer.write(handle)
    with caplog.at_level(logging.WARNING):
        doc = read_document(path, tmp_path, 1_000_000)
    assert doc.sections[0].blocks[0].text == "Late orders are refunded."
    assert not [r for r in caplog.records if r.name.startswith("pdfminer")]
    (named,) = [r.getMessage() for r in caplog.records if "line width" in r.getMessage()]
    assert named.startswith("damaged.pdf: the PDF parser warned: Cannot set line width")
    assert named.endswith("(and 1 more)")
