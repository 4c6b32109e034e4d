"""reStructuredText reader: the doctree docutils builds, walked into headings and blocks.

Sections give the heading paths (a lone top-level section is the document title, as docutils
makes it); literal blocks and ``code`` directives are code blocks with their language; grid,
simple, CSV and list tables are pipe tables whose first row is the header; bullet, enumerated,
definition and field lists are list blocks. The bibliographic fields right after the title
(docinfo) are metadata: ``date`` becomes ``published`` (an ISO date, else it is left out with a
warning), ``tags``, ``lang`` and ``tenant`` are kept as in Markdown front matter.

docutils' own errors (system messages of level ERROR or SEVERE: a malformed table, an
inconsistent title level) refuse the file, naming the line: the broken part would otherwise be
indexed as a raw literal. Sphinx's roles and directives (``:ref:``, ``.. toctree::``), unknown
to plain docutils, are read as their text, with one warning per file. ``include`` and ``raw``
are disabled: a pushed file must not pull in other files of the machine.
"""

from __future__ import annotations

import datetime as dt
import io
import logging
import re
from typing import Any

from loader.documents import Block, Document
from loader.ingest.readers.code import fence
from loader.ingest.readers.common import Heading, Rejected, assemble, normalize_space
from loader.ingest.readers.markdown_tokens import pipe_table

log = logging.getLogger(__name__)

_SETTINGS = {
    "report_level": 5,  # nothing on stderr: the messages are read from the doctree
    "halt_level": 5,  # never raise on a bad file: its messages are reported by name
    "warning_stream": io.StringIO(),
    "file_insertion_enabled": False,
    "raw_enabled": False,
    "_disable_config": True,
    "sectsubtitle_xform": False,
    "syntax_highlight": "none",
    "input_encoding": "unicode",
}
_UNKNOWN = re.compile(r'^Unknown (?:interpreted text role|directive type) "([^"]+)"')
_ROLE = re.compile(r"^:[\w:.+-]+:`(.*)`$", re.S)
_TARGET = re.compile(r"^(.*?)\s*<[^<>]+>$", re.S)
ERROR_LEVEL = 3
_SKIPPED = ("comment", "target", "substitution_definition", "pending", "raw", "transition")
_RECURSED = (
    "block_quote", "container", "compound", "admonition", "attention", "caution", "danger",
    "error", "hint", "important", "note", "tip", "warning", "topic", "sidebar", "figure",
    "footnote", "citation", "legend", "section",
)  # fmt: skip


def _messages(doctree: Any) -> list[Any]:
    from docutils import nodes

    seen: dict[int, Any] = {}
    found = [*doctree.findall(nodes.system_message), *doctree.parse_messages]
    for message in [*found, *doctree.transform_messages]:
        seen.setdefault(id(message), message)
    return list(seen.values())


def _message_text(message: Any) -> str:
    first = message.children[0] if message.children else message
    return normalize_space(first.astext())


def _check_messages(doctree: Any, source: str) -> set[str]:
    """Raise for the first error; log the warnings. Returns the unknown Sphinx names."""
    unknown: set[str] = set()
    warnings: list[str] = []
    for message in sorted(_messages(doctree), key=lambda m: m.get("line") or 0):
        level, text, line = message.get("level", 0), _message_text(message), message.get("line")
        sphinx = _UNKNOWN.match(text)
        if sphinx:
            unknown.add(sphinx.group(1))
        elif level >= ERROR_LEVEL:
            where = f" on line {line}" if line else ""
            raise Rejected(f"reStructuredText error{where}: {text}")
        elif level == ERROR_LEVEL - 1:
            warnings.append(f"line {line}: {text}" if line else text)
    if warnings:
        log.warning("%s: docutils warnings: %s", source, "; ".join(warnings))
    if unknown:
        log.warning(
            "%s: roles and directives docutils does not know (Sphinx's?) read as plain text: %s",
            source, ", ".join(sorted(unknown)),
        )  # fmt: skip
    return unknown


def _role_text(raw: str) -> str:
    """``:ref:`Late deliveries <late>``` -> ``Late deliveries``."""
    match = _ROLE.match(raw.strip())
    if not match:
        return raw
    inner = match.group(1)
    target = _TARGET.match(inner)
    return (target.group(1) if target else inner).lstrip("~!")


def _text(node: Any) -> str:
    """A node's plain text; an unknown role (a ``problematic`` node) gives its content."""
    from docutils import nodes

    parts = []
    for child in node.findall(nodes.Text):
        parent = child.parent
        if isinstance(parent, nodes.problematic):
            parts.append(_role_text(str(child)))
        elif not isinstance(parent, nodes.system_message) and not _inside_message(child):
            parts.append(str(child))
    return normalize_space("".join(parts))


def _inside_message(node: Any) -> bool:
    from docutils import nodes

    parent = node.parent
    while parent is not None:
        if isinstance(parent, nodes.system_message):
            return True
        parent = parent.parent
    return False


def _table(node: Any) -> str:
    """The first tgroup of a table as a pipe table; spanned columns become empty cells."""
    rows: list[list[str]] = []
    for row in node.findall(lambda n: n.tagname == "row"):
        cells: list[str] = []
        for entry in row.children:
            cells.append(_text(entry))
            cells.extend([""] * int(entry.get("morecols", 0)))
        rows.append(cells)
    return pipe_table(rows) if rows else ""


def _list_lines(node: Any, depth: int) -> list[str]:
    """Lines of a bullet or enumerated list, nested lists indented."""
    lines: list[str] = []
    enumerated = node.tagname == "enumerated_list"
    start = int(node.get("start", 1))
    for number, item in enumerate(node.children, start=start):
        marker = f"{number}." if enumerated else "-"
        texts: list[str] = []
        nested: list[str] = []
        for child in item.children:
            if child.tagname in ("bullet_list", "enumerated_list"):
                nested.extend(_list_lines(child, depth + 1))
            else:
                texts.append(_text(child))
        lines.append(f"{'  ' * depth}{marker} {' '.join(t for t in texts if t)}")
        lines.extend(nested)
    return lines


def _pairs(node: Any, name_tag: str, body_tags: tuple[str, ...]) -> str:
    """A definition or field list as ``- term: definition`` lines."""
    lines = []
    for item in node.children:
        name = " ".join(_text(c) for c in item.children if c.tagname == name_tag)
        body = " ".join(_text(c) for c in item.children if c.tagname in body_tags)
        lines.append(f"- {name}: {body}")
    return "\n".join(lines)


class _Walker:
    """Collects the headings and blocks of a doctree, in document order."""

    def __init__(self) -> None:
        self.events: list[Heading | Block] = []

    def block(self, kind: str, text: str) -> None:
        if text.strip():
            self.events.append(Block(kind, text))  # type: ignore[arg-type]

    def children(self, node: Any, depth: int) -> None:
        for child in node.children:
            self.node(child, depth)

    def node(self, node: Any, depth: int) -> None:
        tag = node.tagname
        if tag in _SKIPPED or tag in ("system_message", "docinfo"):
            return
        if tag == "section":
            title = next((c for c in node.children if c.tagname == "title"), None)
            self.events.append(Heading(min(depth + 1, 6), _text(title) if title else ""))
            self.children(node, depth + 1)
        elif tag == "title":
            if node.parent.tagname not in ("section", "document"):
                self.block("paragraph", _text(node))  # a topic's or an admonition's title
        elif tag in ("literal_block", "doctest_block"):
            classes = [c for c in node.get("classes", []) if c != "code"]
            language = "python" if tag == "doctest_block" else (classes[0] if classes else "")
            self.block("code", fence(node.astext().rstrip("\n"), language))
        elif tag == "table":
            self.block("table", _table(node))
        elif tag in ("bullet_list", "enumerated_list"):
            self.block("list", "\n".join(_list_lines(node, 0)))
        elif tag == "definition_list":
            self.block("list", _pairs(node, "term", ("definition",)))
        elif tag == "field_list":
            self.block("list", _pairs(node, "field_name", ("field_body",)))
        elif tag == "line_block":
            self.block("paragraph", "\n".join(_text(line) for line in node.children))
        elif tag in _RECURSED:
            self.children(node, depth)
        else:
            self.block("paragraph", _text(node))


def _docinfo(doctree: Any, source: str) -> dict[str, Any]:
    """Metadata from the bibliographic fields (``:date:``, ``:tags:``, ``:lang:``, ...)."""
    metadata: dict[str, Any] = {}
    for info in doctree.findall(lambda n: n.tagname == "docinfo"):
        for field in info.children:
            if field.tagname == "field":
                name = _text(field.children[0]).lower()
                value = _text(field.children[1])
            else:  # date, author, version, ... as their own node types
                name, value = field.tagname, _text(field)
            metadata[name] = value
    if "tags" in metadata:
        metadata["tags"] = [tag.strip() for tag in metadata["tags"].split(",") if tag.strip()]
    date = metadata.pop("date", "")
    if date:
        try:
            metadata["published"] = dt.date.fromisoformat(date[:10]).isoformat()
        except ValueError:
            log.warning("%s: date %r is not an ISO date (YYYY-MM-DD); left out", source, date)
    return metadata


def read_rst(text: str, source: str, stem: str) -> Document:
    """Read a reStructuredText document (see the module docstring)."""
    import docutils.core  # imported here: only pushes with .rst files pay for it

    try:
        doctree = docutils.core.publish_doctree(text, settings_overrides=dict(_SETTINGS))
    except Exception as exc:  # docutils raises many kinds on pathological input
        raise Rejected(f"unreadable reStructuredText: {type(exc).__name__}: {exc}") from exc
    _check_messages(doctree, source)
    title = doctree.get("title") or None
    walker = _Walker()
    walker.children(doctree, 1 if title else 0)
    return assemble(source, stem, walker.events, title=title, metadata=_docinfo(doctree, source))
