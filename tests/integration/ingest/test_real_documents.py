"""Real documents, made with real tools at test time, keep their structure through push.

The sample docs' Markdown files go through pandoc to ``.docx`` and through LibreOffice (headless,
a private profile so parallel runs do not share one) to PDF with bookmarks and without
(``ExportBookmarks`` false: the headings must come from the layout). For each format: at least
90 % of the Markdown original's heading paths come back exactly, tables keep their header row, and
the seed question's top chunk is ``Refund policy > Late deliveries`` from that format's file.

A two-column document with a running header and a page-numbered footer (pandoc, then python-docx
sets the section's columns and header, then LibreOffice) checks reading order and that the
running lines are not in any chunk.

Both tools come from Debian (``scripts/setup.sh``): ``pandoc`` and ``libreoffice-writer-nogui``.
All conversions run once per session (``real_documents``), three LibreOffice runs in all.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
from opensearchpy import helpers

from loader.index.apply import apply_config
from loader.ingest.readers import read_document
from loader.ingest.sync import push
from loader.query.request import SearchRequest
from loader.query.search import search
from tests.paths import SAMPLE_DOCS

SEED_QUESTION = "Do I get a refund if my order is more than 45 minutes late, and how is it paid?"
NO_BOOKMARKS = json.dumps({"ExportBookmarks": {"type": "boolean", "value": "false"}})
FORMATS = {"docx": ".docx", "pdf-bookmarks": ".pdf", "pdf-layout": ".pdf"}
RUNNING_HEADER = "QuickBite courier handbook - internal use only"
PARAGRAPHS = 28


@dataclass(frozen=True)
class RealDocuments:
    markdown: list[Path]  # the originals
    folders: dict[str, Path]  # format -> a folder holding only that format's files
    two_column: Path  # folder holding handbook.pdf
    seconds: float  # how long the conversions took


def _tool(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is missing: scripts/setup.sh installs it (Debian)"
    return path


def _soffice(files: list[Path], outdir: Path, profile: Path, export: str = "pdf") -> None:
    subprocess.run(
        [_tool("soffice"), f"-env:UserInstallation={profile.as_uri()}", "--headless",
         "--convert-to", export, "--outdir", str(outdir), *map(str, files)],
        check=True, capture_output=True, timeout=300,
    )  # fmt: skip
    missing = [f.name for f in files if not (outdir / f.with_suffix(".pdf").name).exists()]
    assert not missing, f"LibreOffice made no PDF of {missing}"


def _handbook_paragraph(number: int) -> str:
    return (
        f"Paragraph {number:02d} opens with its number so that the order can be checked. "
        f"Couriers who read rule {number} learn how to carry insulated bags, when to call the "
        f"customer and how to report a delay of more than {number + 10} minutes to dispatch."
    )


def _two_column_docx(folder: Path) -> Path:
    """handbook.docx: four sections of paragraphs in two columns, a running header, and a footer
    with the page number field."""
    import docx
    from docx.oxml import OxmlElement
    from docx.oxml.ns import qn

    lines = ["---", "title: Courier handbook", "---", ""]
    for number in range(1, PARAGRAPHS + 1):
        if number % 7 == 1:
            lines += [f"# Section {number // 7 + 1}", ""]
        lines += [_handbook_paragraph(number), ""]
    markdown = folder / "handbook.md"
    markdown.write_text("\n".join(lines), encoding="utf-8")
    path = folder / "handbook.docx"
    subprocess.run([_tool("pandoc"), str(markdown), "-o", str(path)], check=True, timeout=60)
    document = docx.Document(str(path))
    section = document.sections[0]
    columns = OxmlElement("w:cols")  # python-docx has no API for a section's columns
    columns.set(qn("w:num"), "2")
    columns.set(qn("w:space"), "720")  # half an inch between the columns
    section._sectPr.append(columns)
    section.header.paragraphs[0].text = RUNNING_HEADER
    footer = section.footer.paragraphs[0]
    footer.add_run("Page ")
    field = OxmlElement("w:fldSimple")
    field.set(qn("w:instr"), "PAGE")
    run, text = OxmlElement("w:r"), OxmlElement("w:t")
    text.text = "1"
    run.append(text)
    field.append(run)
    footer._p.append(field)
    document.save(str(path))
    markdown.unlink()
    return path


@pytest.fixture(scope="session")
def real_documents(tmp_path_factory: pytest.TempPathFactory) -> RealDocuments:
    started = time.monotonic()
    root = tmp_path_factory.mktemp("real-documents")
    profile = root / "libreoffice-profile"
    markdown = sorted(SAMPLE_DOCS.rglob("*.md"))
    folders = {name: root / name for name in FORMATS}
    for folder in folders.values():
        folder.mkdir()
    for original in markdown:
        target = folders["docx"] / f"{original.stem}.docx"
        subprocess.run([_tool("pandoc"), str(original), "-o", str(target)], check=True, timeout=60)
    two_column = root / "two-column"
    two_column.mkdir()
    handbook = _two_column_docx(two_column)
    documents = sorted(folders["docx"].glob("*.docx"))
    _soffice([*documents, handbook], folders["pdf-bookmarks"], profile)
    shutil.move(folders["pdf-bookmarks"] / "handbook.pdf", two_column / "handbook.pdf")
    handbook.unlink()
    _soffice(documents, folders["pdf-layout"], profile, f"pdf:writer_pdf_Export:{NO_BOOKMARKS}")
    return RealDocuments(markdown, folders, two_column, time.monotonic() - started)


def _converted(real_documents: RealDocuments, name: str, original: Path) -> Path:
    return real_documents.folders[name] / f"{original.stem}{FORMATS[name]}"


def test_the_pdfs_differ_in_bookmarks_only(real_documents):
    from pypdf import PdfReader

    for original in real_documents.markdown:
        marked = PdfReader(_converted(real_documents, "pdf-bookmarks", original))
        plain = PdfReader(_converted(real_documents, "pdf-layout", original))
        assert len(marked.outline) > 0 and len(plain.outline) == 0, original.name
        assert len(marked.pages) == len(plain.pages)
    assert real_documents.seconds < 60, f"conversions took {real_documents.seconds:.1f} s"


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_heading_paths_and_titles_are_recovered(real_documents, name):
    expected, recovered = 0, 0
    for original in real_documents.markdown:
        reference = read_document(original, original.parent, 10_000_000)
        path = _converted(real_documents, name, original)
        converted = read_document(path, path.parent, 10_000_000)
        assert converted.title == reference.title, path.name
        found = {section.heading_path for section in converted.sections}
        paths = {section.heading_path for section in reference.sections}
        expected += len(paths)
        recovered += len(paths & found)
    assert expected > 25
    assert recovered >= 0.9 * expected, f"{name}: {recovered} of {expected} heading paths"


def _tables(path: Path) -> list[list[str]]:
    """Each table block of a document, as its lines."""
    document = read_document(path, path.parent, 10_000_000)
    return [
        block.text.split("\n")
        for section in document.sections
        for block in section.blocks
        if block.kind == "table"
    ]


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_tables_keep_their_header_row(real_documents, name):
    for original in real_documents.markdown:
        expected = _tables(original)
        got = _tables(_converted(real_documents, name, original))
        assert len(got) == len(expected), original.name
        for table, reference in zip(got, expected, strict=True):
            assert table[:2] == reference[:2]  # the header and its separator row
            assert len(table) == len(reference)
            assert table == reference or name != "docx"  # Word keeps every cell exactly


@pytest.fixture
def settings(base_settings, unique_name, embedder):
    settings = base_settings.replace(index_name=unique_name)
    apply_config(settings, dimension=embedder.dimension)
    return settings


@pytest.mark.parametrize("name", sorted(FORMATS))
def test_the_seed_question_finds_late_deliveries(real_documents, name, settings, client, embedder):
    report = push(real_documents.folders[name], settings, client=client, embedder=embedder)
    assert report.failed == 0 and report.added == len(real_documents.markdown)
    request = SearchRequest.from_settings(
        settings, SEED_QUESTION, tenant="default", mode="hybrid-rrf", rerank=False, k=1
    )
    top = search(request, settings, client=client, embedder=embedder).hits[0]
    assert (top.source, top.heading) == (
        f"refund-policy{FORMATS[name]}",
        "Refund policy > Late deliveries",
    )
    assert "delayed by more than 45 minutes past the promised time" in top.text


def test_two_column_pdf_reads_in_order_without_running_lines(
    real_documents, settings, client, embedder
):
    report = push(real_documents.two_column, settings, client=client, embedder=embedder)
    assert report.failed == 0 and report.added == 1
    client.indices.refresh(index=settings.index_name)
    hits = helpers.scan(client, index=settings.index_name, query={"_source": ["content"]})
    indexed = " ".join(hit["_source"]["content"] for hit in hits)
    assert "Paragraph 28 opens" in indexed
    assert "courier handbook - internal" not in indexed.lower()  # the running header
    assert not re.search(r"\bPage \d+\b", indexed)  # the footer's page numbers

    path = real_documents.two_column / "handbook.pdf"
    document = read_document(path, path.parent, 10_000_000)
    assert document.title == "Courier handbook"
    assert [s.heading_path for s in document.sections] == [(f"Section {n}",) for n in range(1, 5)]
    text = re.sub(r"\s+", " ", " ".join(s.text for s in document.sections))
    numbers = [int(number) for number in re.findall(r"Paragraph (\d\d) opens", text)]
    assert numbers == list(range(1, PARAGRAPHS + 1))  # column by column, page by page
    for number in range(1, PARAGRAPHS + 1):
        assert _handbook_paragraph(number) in text  # whole, across column and page breaks
