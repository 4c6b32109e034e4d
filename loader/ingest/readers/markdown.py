"""Markdown reader: CommonMark (plus pipe tables) parsed by markdown-it-py, with front matter.

Front matter is the simple ``key: value`` kind between ``---`` lines at the very top::

    ---
    title: Refund policy
    tags: [refunds, orders]
    lang: en
    published: 2024-05-01
    ---

Values may be a scalar, an inline list ``[a, b]`` or a block list of ``- item`` lines. A line
that is none of these is an error naming the line, because silently dropping metadata (a tenant!)
is worse than refusing the file.
"""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.token import Token

from loader.documents import Block, Document
from loader.ingest.readers.common import Heading, Rejected, assemble, normalize_space

_KEY_VALUE = re.compile(r"^([A-Za-z_][\w-]*)\s*:(?:\s+(.*?))?\s*$")
_LIST_ITEM = re.compile(r"^\s*-\s+(.*?)\s*$")
_TAG = re.compile(r"<[^>]*>")
LIST_KEYS = frozenset({"tags"})
_YAML_BOOLEANS = frozenset({"true", "false", "yes", "no", "on", "off"})
_YAML_NULLS = frozenset({"null", "~"})

_parser = MarkdownIt("commonmark").enable("table")


def _unquote(value: str) -> str:
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
        return value[1:-1]
    return value


def _scalar_or_list(value: str) -> str | list[str]:
    if value.startswith("[") and value.endswith("]"):
        return [_unquote(item) for item in value[1:-1].split(",") if item.strip()]
    return _unquote(value)


def _tenant_value(value: str) -> Any:
    """The ``tenant`` value as YAML reads it when it is no string: ``true`` (and YAML's other
    booleans) a bool, ``{x: 1}`` a mapping, ``null`` or ``~`` nothing (as an empty ``tenant:``).
    Every other value reads as for any key. A quoted ``"true"`` stays the name ``true``.

    Without this, ``tenant: true`` would file the document under a tenant named "true", which
    ``loader.ingest.plan.front_matter_tenant`` refuses when it sees the bool.
    """
    if value.casefold() in _YAML_BOOLEANS:
        return value.casefold() in ("true", "yes", "on")
    if value.casefold() in _YAML_NULLS:
        return None
    if value.startswith("{") and value.endswith("}"):
        pairs = (item.partition(":") for item in value[1:-1].split(",") if item.strip())
        return {_unquote(key): _unquote(item) for key, _, item in pairs}
    return _scalar_or_list(value)


def parse_front_matter(text: str) -> tuple[dict[str, Any], str, int]:
    """Split front matter off the top of a Markdown text.

    Args:
        text: the whole file.

    Returns:
        ``(metadata, rest, lines)``: the parsed keys (lower-cased), the Markdown after the
        closing ``---``, and how many lines the front matter took (for line numbers).

    Raises:
        Rejected: naming the line of anything that is not ``key: value`` or ``- item``, an
            unclosed block, or a ``published`` value that is not an ISO date.
    """
    lines = text.split("\n")
    if lines[0].strip() != "---":
        return {}, text, 0
    end = next((i for i in range(1, len(lines)) if lines[i].strip() in ("---", "...")), None)
    if end is None:
        raise Rejected("front matter opened on line 1 is never closed with '---'")
    metadata = _parse_pairs(lines[1:end])
    _normalize_lists(metadata)
    _check_published(metadata, lines[:end])
    return metadata, "\n".join(lines[end + 1 :]), end + 1


def _parse_pairs(lines: list[str]) -> dict[str, Any]:
    """The ``key: value`` and ``- item`` lines between the ``---`` lines (the first is line 2).

    Raises:
        Rejected: naming the first line that is neither.
    """
    metadata: dict[str, Any] = {}
    open_list: str | None = None  # key whose "- item" lines follow
    for number, line in enumerate(lines, start=2):
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        item = _LIST_ITEM.match(line)
        if item and open_list is not None:
            metadata[open_list].append(_unquote(item.group(1)))
            continue
        pair = _KEY_VALUE.match(line)
        if not pair:
            raise Rejected(
                f"malformed front matter on line {number}: {line.strip()!r} "
                "(expected 'key: value' or '- item')"
            )
        key, value = pair.group(1).lower(), (pair.group(2) or "")
        if value:
            metadata[key] = _tenant_value(value) if key == "tenant" else _scalar_or_list(value)
            open_list = None
        else:
            metadata[key] = []
            open_list = key
    return metadata


def _normalize_lists(metadata: dict[str, Any]) -> None:
    """List keys are lists (``tags: refunds, orders`` too); an empty other key is ``""``."""
    for key in LIST_KEYS & metadata.keys():
        if isinstance(metadata[key], str):  # "tags: refunds, orders"
            metadata[key] = [tag.strip() for tag in metadata[key].split(",") if tag.strip()]
    for key, value in list(metadata.items()):
        if value == [] and key not in LIST_KEYS:
            metadata[key] = ""


def _check_published(metadata: dict[str, Any], lines: list[str]) -> None:
    """Refuse a ``published`` value that is not an ISO date, naming its line in ``lines`` (the
    file's lines up to the closing ``---``)."""
    published = metadata.get("published")
    if not published:
        return
    try:
        dt.date.fromisoformat(str(published)[:10])
    except ValueError:
        line_number = next(
            i + 1 for i, line in enumerate(lines) if line.strip().startswith("published")
        )
        raise Rejected(
            f"malformed front matter on line {line_number}: published {published!r} is not "
            "an ISO date (YYYY-MM-DD)"
        ) from None


def _inline_text(token: Token) -> str:
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


def _fence(token: Token) -> str:
    language = token.info.strip().split()[0] if token.info.strip() else ""
    fence = "~~~" if "```" in token.content else "```"
    return f"{fence}{language}\n{token.content.rstrip()}\n{fence}"


def pipe_table(rows: list[list[str]]) -> str:
    """Render rows (the first is the header) as a Markdown pipe table."""
    width = max(len(row) for row in rows)
    padded = [
        [cell.replace("|", "\\|") for cell in row] + [""] * (width - len(row)) for row in rows
    ]
    lines = ["| " + " | ".join(padded[0]) + " |", "|" + " --- |" * width]
    lines.extend("| " + " | ".join(row) + " |" for row in padded[1:])
    return "\n".join(lines)


def _table(tokens: list[Token], start: int) -> tuple[str, int]:
    """The pipe-table text of the table opening at ``start`` and the index after it."""
    rows: list[list[str]] = []
    index = start
    while tokens[index].type != "table_close":
        token = tokens[index]
        if token.type == "tr_open":
            rows.append([])
        elif token.type == "inline" and rows:
            rows[-1].append(_inline_text(token).replace("\n", " "))
        index += 1
    return (pipe_table(rows) if rows else ""), index + 1


def _list(tokens: list[Token], start: int) -> tuple[str, int]:
    """The text of the (possibly nested) list opening at ``start``: one line per item paragraph,
    indented by depth, with its bullet or number; and the index after the list."""
    lines: list[str] = []
    markers: list[str] = []  # the marker of the open item at each depth
    first_paragraph: list[bool] = []
    depth = 0
    index = start
    while True:
        token = tokens[index]
        if token.type in ("bullet_list_open", "ordered_list_open"):
            depth += 1
        elif token.type in ("bullet_list_close", "ordered_list_close"):
            depth -= 1
            if depth == 0:
                return "\n".join(lines), index + 1
        elif token.type == "list_item_open":
            marker = f"{token.info}{token.markup}" if token.info else "-"
            markers.append(marker)
            first_paragraph.append(True)
        elif token.type == "list_item_close":
            markers.pop()
            first_paragraph.pop()
        elif token.type in ("inline", "fence", "code_block") and markers:
            indent = "  " * (depth - 1)
            text = _inline_text(token) if token.type == "inline" else _fence(token)
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


def markdown_events(text: str) -> list[Heading | Block]:
    """Headings and blocks of a Markdown text, in order."""
    tokens = _parser.parse(text)
    events: list[Heading | Block] = []
    index = 0
    while index < len(tokens):
        token = tokens[index]
        kind = token.type
        if kind == "heading_open":
            events.append(Heading(int(token.tag[1:]), _inline_text(tokens[index + 1])))
            index += 3
            continue
        if kind == "table_open":
            table, index = _table(tokens, index)
            events.append(Block("table", table))
            continue
        if kind in ("bullet_list_open", "ordered_list_open"):
            items, index = _list(tokens, index)
            events.append(Block("list", items))
            continue
        if kind == "paragraph_open":
            events.append(Block("paragraph", _inline_text(tokens[index + 1])))
            index += 3
            continue
        if kind in ("fence", "code_block"):
            events.append(Block("code", _fence(token)))
        elif kind == "html_block":
            stripped = normalize_space(
                _TAG.sub(" ", re.sub(r"<!--.*?-->", " ", token.content, flags=re.S))
            )
            if stripped:
                events.append(Block("paragraph", stripped))
        index += 1
    return events


def read_markdown(text: str, source: str, stem: str) -> Document:
    """Read a Markdown document (front matter, headings, paragraphs, code, tables, lists)."""
    metadata, body, _ = parse_front_matter(text)
    title = str(metadata.pop("title", "") or "").strip() or None
    if not body.strip():
        raise Rejected("no text after the front matter" if metadata or title else "empty file")
    return assemble(source, stem, markdown_events(body), title=title, metadata=metadata)
