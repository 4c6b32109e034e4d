"""What every reader shares: decoding checks, readable titles, and turning headings into sections.

A format reader produces a flat list of events — ``Heading`` and ``Block`` in document order —
and ``assemble`` turns it into a ``Document``: it picks the title, decides whether the first
heading *is* the title (then it is not repeated in heading paths), and keeps a stack of headings
so each section knows the path above it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from loader.documents import Block, Document, Section

BINARY_SNIFF_BYTES = 8192
_SPACES = re.compile(r"\s+")


class Rejected(Exception):
    """Raised inside the readers when a file cannot become a document; ``reason`` is one line.

    Private to the readers: ``read_document`` turns it into ``InputError`` and
    ``iter_documents`` into ``Skipped`` (``Unsupported``: an ignored one).
    """

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class Unsupported(Rejected):
    """Raised for a file of a type no reader handles (an image, a CSV, a Makefile):
    ``iter_documents`` makes it an ignored ``Skipped``, passed over rather than failed."""


@dataclass(frozen=True)
class Heading:
    level: int  # 1..6
    text: str


def normalize_space(text: str) -> str:
    """Collapse runs of whitespace to one space and strip the ends."""
    return _SPACES.sub(" ", text).strip()


def decode_text(data: bytes) -> str:
    """Decode a text file's bytes as UTF-8, rejecting binary, undecodable and empty files.

    Returns:
        The text with a byte-order mark removed and line endings normalized to ``\\n``.

    Raises:
        Rejected: "binary file", "not valid UTF-8 (byte 0x.. at offset N)" or "empty file".
    """
    if b"\x00" in data[:BINARY_SNIFF_BYTES]:
        raise Rejected("binary file")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        # exc.start counts from after a BOM when utf-8-sig stripped one.
        offset = exc.start + (3 if data.startswith(b"\xef\xbb\xbf") else 0)
        bad = data[offset]
        raise Rejected(f"not valid UTF-8 (byte 0x{bad:02x} at offset {offset})") from None
    if not text.strip():
        raise Rejected("empty file")
    return text.replace("\r\n", "\n").replace("\r", "\n")


def readable_stem(stem: str) -> str:
    """A title from a file name: ``"late-deliveries"`` -> ``"Late deliveries"``."""
    words = normalize_space(re.sub(r"[-_.]+", " ", stem))
    return words[:1].upper() + words[1:] if words else stem


def _same(a: str, b: str) -> bool:
    return normalize_space(a).casefold() == normalize_space(b).casefold()


def assemble(
    source: str,
    stem: str,
    events: list[Heading | Block],
    title: str | None = None,
    metadata: dict[str, Any] | None = None,
) -> Document:
    """Build a document from reader events.

    Args:
        source: the document's path relative to the pushed folder.
        stem: the file name without suffix, for the fallback title.
        events: headings and blocks in document order.
        title: an explicit title (front matter, ``<title>``, PDF metadata), if any.
        metadata: front-matter style metadata.

    Returns:
        The document. Title: ``title``, else the first H1, else the readable file stem. When the
        first heading is an H1 that serves as the title, it is left out of every heading path.

    Raises:
        Rejected: when no text is left ("no text found").
    """
    headings = [event for event in events if isinstance(event, Heading)]
    first = headings[0] if headings else None
    title_heading = None
    if first is not None and first.level == 1 and (not title or _same(title, first.text)):
        title_heading = first
    if not title:
        first_h1 = next((heading for heading in headings if heading.level == 1), None)
        title = first_h1.text if first_h1 else readable_stem(stem)

    sections = [Section(())]
    stack: list[Heading] = []
    for event in events:
        if isinstance(event, Heading):
            if event is title_heading or not event.text:
                continue
            while stack and stack[-1].level >= event.level:
                stack.pop()
            stack.append(event)
            sections.append(Section(tuple(heading.text for heading in stack)))
        elif event.text.strip():
            sections[-1].blocks.append(event)
    kept = [section for section in sections if section.blocks]
    if not kept:
        raise Rejected("no text found")
    return Document(source=source, title=title, sections=kept, metadata=dict(metadata or {}))
