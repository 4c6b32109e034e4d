"""Plain-text reader: paragraphs split on blank lines, one section, title from the file name."""

from __future__ import annotations

import re

from loader.documents import Block, Document
from loader.ingest.readers.common import assemble

_BLANK_LINE = re.compile(r"\n[^\S\n]*\n")
LIST_LINE = re.compile(r"^\s*(?:[-*\u2022]|\d{1,3}[.)])\s+\S")


def text_blocks(text: str, page: int | None = None) -> list[Block]:
    """Blocks of plain text: one per blank-line-separated paragraph.

    Hard-wrapped lines are joined into one line (a line break inside a sentence is not a
    boundary); runs of lines that start with a bullet or a number stay a list, one item per line.
    """
    blocks = []
    for paragraph in _BLANK_LINE.split(text):
        lines = [line.strip() for line in paragraph.split("\n") if line.strip()]
        # Runs of list lines become list blocks; the lines between them are prose.
        run: list[str] = []
        in_list = False
        for line in [*lines, None]:
            is_item = line is not None and bool(LIST_LINE.match(line))
            if run and (line is None or is_item != in_list):
                if in_list:
                    blocks.append(Block("list", "\n".join(run), page))
                else:
                    blocks.append(Block("paragraph", unwrap(run), page))
                run = []
            if line is not None:
                run.append(line)
                in_list = is_item
    return blocks


def unwrap(lines: list[str]) -> str:
    """Join hard-wrapped lines, mending words hyphenated across a line break."""
    text = ""
    for line in lines:
        if text.endswith("-") and len(text) > 1 and text[-2].isalpha() and line[:1].islower():
            text = text[:-1] + line
        else:
            text = f"{text} {line}" if text else line
    return text


def read_text(text: str, source: str, stem: str) -> Document:
    """Read a plain-text document."""
    return assemble(source, stem, list(text_blocks(text)))
