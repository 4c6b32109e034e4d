"""PDF reader on pypdf: page text as paragraphs (with page numbers), headings from the outline.

A PDF has no paragraphs or headings, only positioned text. pypdf extracts each page's text; the
bookmarks (outline), when the PDF has them, give the section headings and the page each starts
on. A heading whose title is found in its page's text splits the page there; otherwise it starts
at the top of its page. Without an outline the document is one section.
"""

from __future__ import annotations

import io
import logging
import re
from typing import Any

from loader.documents import Block, Document
from loader.ingest.readers.common import Heading, Rejected, assemble, normalize_space, readable_stem
from loader.ingest.readers.text import LIST_LINE, unwrap

log = logging.getLogger(__name__)

_SENTENCE_END = re.compile(r"[.!?:]$")


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


def page_paragraphs(text: str, page: int) -> list[Block]:
    """Paragraph blocks of one page's extracted text.

    pypdf gives one line per text line; a paragraph ends at a blank line or at a short line
    that ends a sentence (shorter than 70 % of the page's typical line).
    """
    lines = [line.strip() for line in text.split("\n")]
    lengths = sorted(len(line) for line in lines if line)
    typical = lengths[len(lengths) * 3 // 4] if lengths else 0
    blocks: list[Block] = []
    current: list[str] = []

    def flush() -> None:
        if current:
            if len(current) > 1 and all(LIST_LINE.match(line) for line in current):
                blocks.append(Block("list", "\n".join(current), page))
            else:
                blocks.append(Block("paragraph", unwrap(current), page))
            current.clear()

    for line in lines:
        if not line:
            flush()
            continue
        current.append(line)
        if _SENTENCE_END.search(line) and len(line) < 0.7 * typical:
            flush()
    flush()
    return blocks


def _find_heading(text: str, title: str, start: int) -> tuple[int, int] | None:
    words = [re.escape(word) for word in title.split()]
    match = re.compile(r"\s+".join(words), re.IGNORECASE).search(text, start)
    return (match.start(), match.end()) if match else None


def read_pdf(data: bytes, source: str, stem: str) -> Document:
    """Read a PDF: text per page (``Block.page`` 1-based), outline headings, metadata title."""
    from pypdf import PdfReader  # imported here: only PDFs pay for it

    if not data.startswith(b"%PDF-"):
        raise Rejected("not a PDF file (no %PDF- header)")
    try:
        reader = PdfReader(io.BytesIO(data))
        if reader.is_encrypted and not reader.decrypt(""):
            raise Rejected("encrypted PDF (needs a password)")
        metadata = reader.metadata
        title = normalize_space(str(metadata.title or "")) if metadata else ""
        outline = _outline(reader)
        events: list[Heading | Block] = []
        for index, page in enumerate(reader.pages):
            text = page.extract_text() or ""
            cursor = 0
            for _, level, heading in (entry for entry in outline if entry[0] == index):
                found = _find_heading(text, heading, cursor)
                if found:
                    events.extend(page_paragraphs(text[cursor : found[0]], index + 1))
                    cursor = found[1]
                events.append(Heading(level, heading))
            events.extend(page_paragraphs(text[cursor:], index + 1))
    except Rejected:
        raise
    except Exception as exc:  # pypdf raises many kinds for broken files
        raise Rejected(f"unreadable PDF: {exc}") from exc
    # The title is always explicit for PDFs (metadata, else the file name): top-level outline
    # entries are chapters, not a title to drop from heading paths.
    return assemble(source, stem, events, title=title or readable_stem(stem))
