"""PDF reader: pdfplumber for the page layout, pypdf for the outline and metadata.

A PDF has no paragraphs or headings, only positioned text. pdfplumber gives every word with its
font and size and finds ruled tables; ``pdf_layout`` rebuilds lines, columns, borderless tables
and drops running headers and footers; ``pdf_structure`` turns the lines into headings,
paragraphs, lists and code.

Headings come from the outline (bookmarks) when it agrees with the text: when at least half of
its entries are lines on their page, those lines are the headings, at the outline's levels. An
entry whose title is no line (garbled CJK glyphs, right-to-left text in visual order) takes the
heading the layout shows in its place, with the entry's title. Otherwise — no outline, or one
that names nothing on the page — the headings are the ones the layout shows (``pdf_structure``).

What the reader cannot do, it says: a PDF without any text (a scan) is refused with "no text
layer, OCR not available"; pages without text in a PDF that has some are logged as a warning
naming the file and the pages.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
from collections.abc import Iterator
from typing import Any

from loader.documents import Block, Document
from loader.ingest.readers.common import Heading, Rejected, assemble, normalize_space
from loader.ingest.readers.pdf_layout import (
    Segment,
    TableRegion,
    Word,
    drop_running_lines,
    page_lines,
    reading_order,
)
from loader.ingest.readers.pdf_structure import Rank, StructureOutline, rank_of

log = logging.getLogger(__name__)

NO_TEXT_LAYER = "no text layer, OCR not available"


def _outline(reader: Any) -> list[tuple[int, int, str]]:
    """(page index, level, title) of every bookmark, in outline order; no recursion."""
    entries: list[tuple[int, int, str]] = []
    try:
        stack: list[tuple[list, int]] = [(list(reader.outline), 1)]
    except Exception as exc:  # a broken outline is no reason to lose the text
        log.warning("cannot read the PDF outline: %s", exc)
        return entries
    while stack:
        items, level = stack.pop()
        while items:
            item = items.pop(0)
            if isinstance(item, list):
                stack.append((items, level))
                items, level = item, level + 1
                continue
            try:
                page = reader.get_destination_page_number(item)
            except Exception:
                continue
            title = normalize_space(str(getattr(item, "title", "") or ""))
            if title and page is not None and page >= 0:
                entries.append((page, level, title))
    return entries


def _page_items(pdf: Any) -> tuple[list[list[list[Segment]]], list[float], list[TableRegion]]:
    """Per page: the lines outside ruled tables; the page heights; the ruled tables."""
    pages, heights, tables = [], [], []
    for number, page in enumerate(pdf.pages, start=1):
        found = [t for t in page.find_tables() if len(t.rows) >= 2 and len(t.columns) >= 2]
        boxes = [table.bbox for table in found]
        for table in found:
            rows = [[normalize_space(cell or "") for cell in row] for row in table.extract()]
            x0, top, _, bottom = table.bbox
            tables.append(TableRegion(rows, number, top, x0, bottom))
        words = [
            Word(
                w["text"], w["x0"], w["x1"], w["top"], w["bottom"], w["size"], w["fontname"], number
            )
            for w in page.extract_words(extra_attrs=["fontname", "size"])
            if not any(_inside(w, box) for box in boxes)
        ]
        pages.append(page_lines(words) if words else [])
        heights.append(float(page.height))
    return pages, heights, tables


def _inside(word: dict, box: tuple[float, float, float, float]) -> bool:
    x, y = (word["x0"] + word["x1"]) / 2, (word["top"] + word["bottom"]) / 2
    return box[0] <= x <= box[2] and box[1] <= y <= box[3]


def _ordered(
    pages: list[list[list[Segment]]], tables: list[TableRegion]
) -> list[list[Segment | TableRegion]]:
    """Each page's items in reading order, ruled tables placed where they stand."""
    ordered = []
    for number, lines in enumerate(pages, start=1):
        items = reading_order(lines)
        for table in (t for t in tables if t.page == number):
            at = next(
                (
                    i
                    for i, item in enumerate(items)
                    if item.top > table.top and item.x0 >= table.x0 - 1
                ),
                len(items),
            )
            items.insert(at, table)
        ordered.append(items)
    return ordered


def _outline_marks(
    structure: StructureOutline, outline: list[tuple[int, int, str]]
) -> dict[int, tuple[int, str]] | None:
    """Heading marks from the outline, or None when fewer than half its entries are lines of
    their page (then the outline does not describe this text). The entries that are no line of
    their page are placed by ``_place_unmatched``."""
    marks: dict[int, tuple[int, str]] = {}
    found_at: list[int | None] = []  # per entry: the index of its line, None when not found
    title_index = structure.title_index()
    # Lines that look like headings first: a title line may repeat the first chapter's name.
    looks = [index for index in structure.headings() if index != title_index]
    candidates = looks + [i for i in range(len(structure.items)) if i not in looks]
    for page, level, title in outline:
        wanted = title.casefold()
        found = next(
            (
                index
                for index in candidates
                if isinstance(item := structure.items[index], Segment)
                and item.page == page + 1
                and index not in marks
                and normalize_space(item.text).casefold() == wanted
            ),
            None,
        )
        found_at.append(found)
        if found is not None:
            marks[found] = (1, f"{min(level, 6)}\x00{title}")
    if len(marks) < len(outline) / 2:
        return None
    headings = structure.headings()
    levels: dict[Rank, int] = {}  # the outline level of the found entries' heading styles
    for (_, level, _), at in zip(outline, found_at, strict=True):
        if at in headings:
            levels.setdefault(rank_of(headings[at][1]), min(level, 6))
    start = 0
    while start < len(outline):
        if found_at[start] is not None:
            start += 1
            continue
        end = start
        while end < len(outline) and found_at[end] is None:
            end += 1
        low = found_at[start - 1] if start else -1
        high = found_at[end] if end < len(outline) else len(structure.items)
        _place_unmatched(structure, outline[start:end], (low, high), levels, marks)
        start = end
    return marks


def _place_unmatched(
    structure: StructureOutline,
    run: list[tuple[int, int, str]],
    between: tuple[int, int],
    levels: dict[Rank, int],
    marks: dict[int, tuple[int, str]],
) -> None:
    """Mark the headings of outline entries (``run``, consecutive) that are no line of their
    page, between the lines of the found entries around them (item indexes ``between``).

    Such an entry is usually a heading whose extracted text differs from its bookmark: glyphs
    without a Unicode mapping (CJK in a fallback font), right-to-left words in visual order. The
    layout sees those headings as it does without bookmarks, so the part falls back to it, not
    the whole document (the outline's other entries are still right):

    - as many layout headings on the run's pages there as the run has entries (those styled like
      found entries first): paired in order, with the entries' levels and titles (the outline's
      text is the author's, the page's may be garbled);
    - other counts: pairing would be a guess, so the layout's headings there are kept as they
      are, at the level found entries of their style have (else the run's highest);
    - no layout heading there: each entry starts at the top of its page.

    Putting an entry at the top of its page when the layout has its line would lose it whenever
    that spot is taken (by the title line, by another entry), and its section would merge into
    the one before.
    """
    items, headings = structure.items, structure.headings()
    title_index = structure.title_index()
    low, high = between
    pages = range(min(entry[0] for entry in run) + 1, max(entry[0] for entry in run) + 2)
    layout = [
        index
        for index in sorted(headings)
        if low < index < high
        and index != title_index
        and index not in marks
        and items[index].page in pages
    ]
    known = [index for index in layout if rank_of(headings[index][1]) in levels]
    paired = next((found for found in (known, layout) if len(found) == len(run)), None)
    if paired is not None:
        for index, (_, level, title) in zip(paired, run, strict=True):
            marks[index] = (headings[index][0], f"{min(level, 6)}\x00{title}")
    elif layout:
        highest = min(min(level, 6) for _, level, _ in run)
        for index in known or layout:
            count, style = headings[index]
            text = normalize_space(" ".join(items[i].text for i in range(index, index + count)))
            marks[index] = (count, f"{levels.get(rank_of(style), highest)}\x00{text}")
    else:
        for page, level, title in run:
            at = next(
                (
                    index
                    for index in range(low + 1, high)
                    if items[index].page > page and index != title_index and index not in marks
                ),
                None,
            )
            if at is not None:
                marks[at] = (0, f"{min(level, 6)}\x00{title}")


def _events(pdf: Any, outline: list[tuple[int, int, str]], source: str) -> tuple[str | None, list]:
    """The layout title and the document's events."""
    pages, heights, tables = _page_items(pdf)
    empty = [number for number, lines in enumerate(pages, start=1) if not lines]
    if len(empty) == len(pages) and not tables:
        raise Rejected(NO_TEXT_LAYER)
    if empty:
        log.warning("%s: pages %s have no text layer (OCR not available): not indexed", source,
                    ", ".join(map(str, empty)))  # fmt: skip
    pages, dropped = drop_running_lines(pages, heights)
    if dropped:
        log.debug("%s: dropped %d running header, footer and page-number lines", source, dropped)
    structure = StructureOutline(_ordered(pages, tables))
    layout_title, events = structure.events()
    marks = _outline_marks(structure, outline) if outline else None
    if marks is None:
        return layout_title, events
    title_index = structure.title_index()
    if title_index is not None and title_index not in marks:
        marks[title_index] = (1, "")  # the title line is the prefix, not body text
    return layout_title, structure.blocks(marks)


class _Collected(logging.Handler):
    """pdfminer's warnings kept back; its debug records passed on as they were."""

    def __init__(self) -> None:
        super().__init__()
        self.warnings: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        if record.levelno >= logging.WARNING:
            self.warnings.append(record.getMessage())
        else:
            logging.getLogger().handle(record)


@contextlib.contextmanager
def _parser_warnings_named(source: str) -> Iterator[None]:
    """pdfminer warns about a damaged PDF (an operand that is no number, a font without its box)
    without naming it: in a push of a thousand PDFs, "WARNING pdfminer.pdfinterp: Cannot set
    line width ..." could be any of them. Its warnings while ``source`` is read become one
    warning naming the file."""
    parser = logging.getLogger("pdfminer")
    collected, propagate = _Collected(), parser.propagate
    parser.addHandler(collected)
    parser.propagate = False
    try:
        yield
    finally:
        parser.removeHandler(collected)
        parser.propagate = propagate
    if collected.warnings:
        more = len(collected.warnings) - 1
        log.warning(
            "%s: the PDF parser warned: %s%s",
            source,
            collected.warnings[0][:300],
            f" (and {more} more)" if more else "",
        )


def read_pdf(data: bytes, source: str, stem: str) -> Document:
    """Read a PDF: headings (outline or layout), paragraphs, lists, code and tables, with their
    1-based page (``Block.page``); title from the metadata, the layout or the file name."""
    import pdfplumber  # imported here: only PDFs pay for them
    from pypdf import PdfReader

    if not data.startswith(b"%PDF-"):
        raise Rejected("not a PDF file (no %PDF- header)")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise Rejected("encrypted PDF (needs a password)")
        metadata = reader.metadata
        title = stated_title(metadata.title if metadata else None)
        outline = _outline(reader)
        with _parser_warnings_named(source), pdfplumber.open(io.BytesIO(data)) as pdf:
            layout_title, events = _events(pdf, outline, source)
    except Rejected:
        raise
    except Exception as exc:  # pypdf and pdfminer raise many kinds for broken files
        raise Rejected(f"unreadable PDF: {exc}") from exc
    # The title the document states: its metadata, else the layout's title line, else (in
    # assemble) its first top-level heading, which then heads its own sections; the file name
    # only when there is none. The file name came first before, so every chunk of a PDF without
    # metadata or a lone title line was titled "Plugins rhdh configure".
    events_list: list[Heading | Block] = events
    return assemble(source, stem, events_list, title=title or layout_title or None)


# Titles that tools write when the author gave none: no better than the file name.
_GENERIC_TITLE = re.compile(
    r"(untitled( document)?|microsoft (word|powerpoint) - .*|.*\.(docx?|odt|rtf|pdf|txt|md))",
    re.IGNORECASE,
)


def stated_title(raw: object) -> str:
    """A PDF's metadata title, or "" when it has none or only a tool's placeholder."""
    title = normalize_space(str(raw or ""))
    return "" if _GENERIC_TITLE.fullmatch(title) else title
