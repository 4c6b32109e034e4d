"""markdown-it-py tokens to reader events: headings, paragraphs, code, tables and lists as text.

``token_events`` turns a token stream into ``Heading`` and ``Block`` events. The pieces it is
built from (``table_rows``, ``list_lines``, ``inline_text``, ``fence_text``, ``html_text``) are
public because the windowed reading of large bodies (``markdown_windows``) joins a table, list,
paragraph or code block that it read in several windows from the same pieces, so that the
joined block is the text one parse of the whole body gives.
"""

from __future__ import annotations

import re

from markdown_it import MarkdownIt
from markdown_it.token import Token

from loader.documents import Block
from loader.ingest.readers.common import Heading, normalize_space

_TAG = re.compile(r"<[^>]*>")
_COMMENT = re.compile(r"<!--.*?-->", re.S)

parser = MarkdownIt("commonmark").enable("table")


def inline_text(token: Token) -> str:
    """Plain text of an inline token: emphasis dropped, link text kept, code in backticks."""
    parts = []
    for child in token.children or []:
        if child.type == "text":
            parts.append(child.content)
        elif child.type == "code_inline":
            parts.append(f"`{child.content}`")
        elif child.type == "softbreak":
            parts.append(" ")
        elif child.type == "hardbreak":
            parts.append("\n")
        elif child.type == "image":
            parts.append(child.content)  # the alt text
    return "\n".join(normalize_space(line) for line in "".join(parts).split("\n")).strip()


def fence_text(info: str, content: str) -> str:
    """A code block's text: fenced again with its language (``~~~`` if it holds ```` ``` ````)."""
    language = info.strip().split()[0] if info.strip() else ""
    fence = "~~~" if "```" in content else "```"
    return f"{fence}{language}\n{content.rstrip()}\n{fence}"


def html_text(content: str) -> str:
    """The text of a raw HTML block: comments and tags dropped, whitespace collapsed."""
    return normalize_space(_TAG.sub(" ", _COMMENT.sub(" ", content)))


def pipe_table(rows: list[list[str]]) -> str:
    """Render rows (the first is the header) as a Markdown pipe table."""
    width = max(len(row) for row in rows)
    padded = [
        [cell.replace("|", "\\|") for cell in row] + [""] * (width - len(row)) for row in rows
    ]
    lines = ["| " + " | ".join(padded[0]) + " |", "|" + " --- |" * width]
    lines.extend("| " + " | ".join(row) + " |" for row in padded[1:])
    return "\n".join(lines)


def table_rows(
    tokens: list[Token], start: int, before_line: int | None = None
) -> tuple[list[list[str]], int]:
    """The cells of the table opening at ``start`` (the header row first), and the index after
    the table; with ``before_line``, only the rows that start before that line."""
    rows: list[list[str]] = []
    index = start
    taking = True
    while tokens[index].type != "table_close":
        token = tokens[index]
        if token.type == "tr_open":
            taking = before_line is None or token.map is None or token.map[0] < before_line
            if taking:
                rows.append([])
        elif token.type == "inline" and rows and taking:
            rows[-1].append(inline_text(token).replace("\n", " "))
        index += 1
    return rows, index + 1


def list_lines(tokens: list[Token], start: int, stop: int | None = None) -> tuple[list[str], int]:
    """The lines of the (possibly nested) list opening at ``start``: one per item paragraph,
    indented by depth, with its bullet or number; and the index after the list. With ``stop``
    (the index of a top-level item), only the items before it."""
    lines: list[str] = []
    markers: list[str] = []  # the marker of the open item at each depth
    first_paragraph: list[bool] = []
    depth = 0
    index = start
    while index != stop:
        token = tokens[index]
        if token.type in ("bullet_list_open", "ordered_list_open"):
            depth += 1
        elif token.type in ("bullet_list_close", "ordered_list_close"):
            depth -= 1
            if depth == 0:
                return lines, index + 1
        elif token.type == "list_item_open":
            marker = f"{token.info}{token.markup}" if token.info else "-"
            markers.append(marker)
            first_paragraph.append(True)
        elif token.type == "list_item_close":
            markers.pop()
            first_paragraph.pop()
        elif token.type in ("inline", "fence", "code_block") and markers:
            indent = "  " * (depth - 1)
            if token.type == "inline":
                text = inline_text(token)
            else:
                text = fence_text(token.info, token.content)
            if first_paragraph[-1]:
                lead = f"{indent}{markers[-1]} "
                first_paragraph[-1] = False
            else:
                lead = indent + " " * (len(markers[-1]) + 1)
            text_lines = text.split("\n")
            lines.append(lead + text_lines[0])
            pad = indent + " " * (len(markers[-1]) + 1)
            lines.extend(pad + line if line else line for line in text_lines[1:])
        index += 1
    return lines, index


def token_events(
    tokens: list[Token], start: int = 0, end: int | None = None
) -> list[Heading | Block]:
    """Headings and blocks of ``tokens[start:end]`` (whole blocks), in order."""
    end = len(tokens) if end is None else end
    events: list[Heading | Block] = []
    index = start
    while index < end:
        token = tokens[index]
        kind = token.type
        if kind == "heading_open":
            events.append(Heading(int(token.tag[1:]), inline_text(tokens[index + 1])))
            index += 3
            continue
        if kind == "table_open":
            rows, index = table_rows(tokens, index)
            events.append(Block("table", pipe_table(rows) if rows else ""))
            continue
        if kind in ("bullet_list_open", "ordered_list_open"):
            lines, index = list_lines(tokens, index)
            events.append(Block("list", "\n".join(lines)))
            continue
        if kind == "paragraph_open":
            events.append(Block("paragraph", inline_text(tokens[index + 1])))
            index += 3
            continue
        if kind in ("fence", "code_block"):
            events.append(Block("code", fence_text(token.info, token.content)))
        elif kind == "html_block":
            stripped = html_text(token.content)
            if stripped:
                events.append(Block("paragraph", stripped))
        index += 1
    return events
