"""Word reader (``.docx``) on python-docx: headings, paragraphs, lists, tables, code, metadata.

- **Headings** come from paragraph styles: ``Title`` is the title, ``Heading 1`` .. ``Heading 9``
  (or a style based on one) are levels 1..9 (capped at 6), and any other paragraph with an
  outline level (set on it or on its style, as Word's "Outline level" does) is a heading of that
  level.
- **Lists**: numbered paragraphs (``w:numPr``) become one list block, ``- item`` for bullets and
  ``1.`` for numbers, indented by level.
- **Tables**: one table block per table, the first row its header (a pipe table, like Markdown's);
  merged cells count once.
- **Code**: paragraphs in a code style (``Source Code``, ``HTML Preformatted``, ...).
- **Metadata**: the core properties' title, language (``lang``) and keywords (``tags``); the
  ``published`` date is the custom property of that name (pandoc writes front matter there),
  else the creation date. The core part is found by its content type (``_core_properties``):
  python-docx misses the one LibreOffice relates, and then makes up its own.

What it cannot read it says: text boxes, content controls and other body content python-docx
does not expose are counted and logged as a warning naming the file.
"""

from __future__ import annotations

import datetime as dt
import io
import logging
import re
import zipfile
import zlib
from typing import Any

from loader.documents import Block, Document
from loader.ingest.readers.common import Heading, Rejected, assemble, normalize_space
from loader.ingest.readers.markdown_tokens import pipe_table

log = logging.getLogger(__name__)

_HEADING_STYLE = re.compile(r"^heading\s*(\d)$", re.IGNORECASE)
_CODE_STYLE = re.compile(r"source code|preformatted|verbatim|^code\b|plain text", re.IGNORECASE)
_OLE_MAGIC = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # legacy .doc, or a password-protected .docx
_W = "{http://schemas.openxmlformats.org/wordprocessingml/2006/main}"
_CUSTOM_PART = "/docProps/custom.xml"


def _open(data: bytes, docx_module: Any) -> Any:
    """The python-docx document, or ``Rejected`` saying what the file is instead."""
    from lxml import etree  # python-docx's XML parser, imported with it

    if data.startswith(_OLE_MAGIC):
        raise Rejected("encrypted or legacy Word file (an OLE container, not a .docx package)")
    if not data.startswith(b"PK"):
        raise Rejected("not a Word .docx file (not a ZIP package)")
    try:
        return docx_module.Document(io.BytesIO(data))
    # zlib.error and EOFError: a part's deflate stream is garbled or cut short (a bad copy);
    # zipfile itself raises them, not BadZipFile, while python-docx reads that part.
    except (zipfile.BadZipFile, zlib.error, EOFError) as exc:
        raise Rejected(f"unreadable Word file: truncated or damaged ZIP package ({exc})") from None
    except KeyError as exc:  # a ZIP whose parts python-docx needs are missing
        raise Rejected(f"unreadable Word file: missing part {exc}") from None
    except ValueError as exc:  # "file ... is not a Word file, content type is ..."
        raise Rejected(f"not a Word document: {exc}") from None
    except etree.XMLSyntaxError as exc:  # a part whose XML is cut short or mangled
        raise Rejected(f"unreadable Word file: {_broken_part(data)}broken XML ({exc})") from None


def _broken_part(data: bytes) -> str:
    """``"word/document.xml has "`` for the first XML part of the package lxml cannot parse
    (the parser's error does not say which part it was reading), or ``""``."""
    from lxml import etree

    with zipfile.ZipFile(io.BytesIO(data)) as package:
        for name in package.namelist():
            if name.endswith((".xml", ".rels")):
                try:
                    etree.fromstring(package.read(name), etree.XMLParser(resolve_entities=False))
                except etree.XMLSyntaxError:
                    return f"{name} has "
    return ""


def _style_chain(style: Any) -> list[Any]:
    chain = []
    while style is not None and len(chain) < 10:  # based-on loops exist in the wild
        chain.append(style)
        style = style.base_style
    return chain


def _outline_level(paragraph: Any) -> int | None:
    """The outline level (0-based, 9 = body text) set on the paragraph or its styles."""
    elements = [paragraph._p, *(style.element for style in _style_chain(paragraph.style))]
    for element in elements:
        found = element.find(f"{_W}pPr/{_W}outlineLvl")
        if found is not None:
            value = int(found.get(f"{_W}val", "9"))
            return value if value < 9 else None
    return None


def heading_level(paragraph: Any) -> int | None:
    """0 for the title, 1..6 for a heading, None for body text."""
    for style in _style_chain(paragraph.style):
        name = style.name or ""
        if name.casefold() == "title":
            return 0
        match = _HEADING_STYLE.match(name)
        if match:
            return min(int(match.group(1)), 6)
    level = _outline_level(paragraph)
    return min(level + 1, 6) if level is not None else None


class _Numbering:
    """Bullet or number for list paragraphs, from the numbering part's level formats."""

    def __init__(self, document: Any) -> None:
        try:
            self.root = document.part.numbering_part.element
        except (KeyError, NotImplementedError):
            self.root = None
        self.counters: dict[tuple[str, str], int] = {}

    def marker(self, num_id: str, level: str) -> str:
        fmt = "decimal"
        if self.root is not None:
            abstract = self.root.xpath(f'./w:num[@w:numId="{num_id}"]/w:abstractNumId/@w:val')
            if abstract:
                path = f'./w:abstractNum[@w:abstractNumId="{abstract[0]}"]/w:lvl[@w:ilvl="{level}"]'
                fmt = (self.root.xpath(f"{path}/w:numFmt/@w:val") or ["decimal"])[0]
        if fmt in ("bullet", "none"):
            return "-"
        key = (num_id, level)
        self.counters[key] = self.counters.get(key, 0) + 1
        return f"{self.counters[key]}."


def _list_item(paragraph: Any, numbering: _Numbering) -> str | None:
    """``"  - text"`` for a numbered paragraph, None for any other."""
    num_pr = None  # on the paragraph, else on its style ("List Bullet" numbers by style)
    for element in (paragraph._p, *(style.element for style in _style_chain(paragraph.style))):
        p_pr = element.pPr
        if p_pr is not None and p_pr.numPr is not None:
            num_pr = p_pr.numPr
            break
    if num_pr is None or num_pr.numId is None or num_pr.numId.val == 0:
        return None
    level = str(num_pr.ilvl.val if num_pr.ilvl is not None else 0)
    marker = numbering.marker(str(num_pr.numId.val), level)
    return "  " * int(level) + f"{marker} {normalize_space(paragraph.text)}"


def _table_rows(table: Any) -> list[list[str]]:
    rows = []
    for row in table.rows:
        cells, seen = [], set()
        for cell in row.cells:
            if id(cell._tc) in seen:  # a merged cell repeats across the columns it spans
                continue
            seen.add(id(cell._tc))
            cells.append(normalize_space(cell.text))
        if any(cells):
            rows.append(cells)
    return rows


def _events(document: Any) -> tuple[str | None, list[Heading | Block]]:
    """The Title paragraph's text (or None) and the body's events in order."""
    from docx.table import Table

    numbering = _Numbering(document)
    title = None
    events: list[Heading | Block] = []
    items: list[str] = []  # the open list's lines

    def close_list() -> None:
        if items:
            events.append(Block("list", "\n".join(items)))
            items.clear()

    for block in document.iter_inner_content():
        if isinstance(block, Table):
            close_list()
            rows = _table_rows(block)
            if rows:
                events.append(Block("table", pipe_table(rows)))
            continue
        item = _list_item(block, numbering)
        if item is not None:
            items.append(item)
            continue
        close_list()
        level = heading_level(block)
        text = normalize_space(block.text)
        if level == 0:
            title = title or text
        elif level is not None:
            events.append(Heading(level, text))
        elif any(_CODE_STYLE.search(style.name or "") for style in _style_chain(block.style)):
            events.append(Block("code", "```\n" + block.text.rstrip() + "\n```"))
        elif text:
            events.append(Block("paragraph", text))
    close_list()
    return title, events


def _custom_properties(document: Any) -> dict[str, str]:
    """The custom document properties (``docProps/custom.xml``), which python-docx does not
    expose: name -> text."""
    for part in document.part.package.iter_parts():
        if part.partname == _CUSTOM_PART:
            from docx.oxml.parser import parse_xml  # python-docx's parser: no entities

            root = parse_xml(part.blob)
            return {
                prop.get("name", ""): normalize_space("".join(prop.itertext()))
                for prop in root
                if prop.get("name")
            }
    return {}


def _core_properties(document: Any) -> Any | None:
    """The package's own core properties (``docProps/core.xml``), or None when it has none.

    ``document.core_properties`` looks the part up by its relationship type spelled exactly;
    LibreOffice writes ``.../officedocument/2006/relationships/metadata/core-properties`` (in
    lower case), so python-docx does not find it and invents defaults instead — the title "Word
    Document", no language. The part is found here by what python-docx loaded it as, which
    follows its content type, and nothing is invented when there is none.
    """
    from docx.opc.parts.coreprops import CorePropertiesPart

    for rel in document.part.package.rels.values():
        if not rel.is_external and isinstance(rel.target_part, CorePropertiesPart):
            return rel.target_part.core_properties
    return None


def _metadata(document: Any) -> tuple[str, dict[str, Any]]:
    core = _core_properties(document)
    custom = _custom_properties(document)
    metadata: dict[str, Any] = {}
    if core is not None and core.language:
        metadata["lang"] = core.language
    if core is not None and core.keywords:
        metadata["tags"] = [tag.strip() for tag in re.split(r"[,;]", core.keywords) if tag.strip()]
    published = custom.get("published", "")
    try:
        metadata["published"] = dt.date.fromisoformat(published[:10]).isoformat()
    except ValueError:
        if core is not None and isinstance(core.created, dt.datetime):
            metadata["published"] = core.created.date().isoformat()
    return normalize_space(core.title or "") if core is not None else "", metadata


def _unread(document: Any) -> int:
    """Body elements python-docx does not yield (content controls, text boxes, ...)."""
    body = document.element.body
    known = {f"{_W}p", f"{_W}tbl", f"{_W}sectPr", f"{_W}bookmarkStart", f"{_W}bookmarkEnd"}
    outside = sum(1 for child in body if child.tag not in known)
    boxes = len(body.xpath(".//w:txbxContent"))
    return outside + boxes


def read_docx(data: bytes, source: str, stem: str) -> Document:
    """Read a Word ``.docx`` document (see the module docstring for what it keeps)."""
    import docx  # imported here: only Word files pay for it

    document = _open(data, docx)
    try:
        layout_title, events = _events(document)
        core_title, metadata = _metadata(document)
        unread = _unread(document)
    except Rejected:
        raise
    except Exception as exc:  # a package python-docx opened but cannot walk
        raise Rejected(f"unreadable Word file: {type(exc).__name__}: {exc}") from exc
    if unread:
        log.warning("%s: %d text boxes or content controls not read", source, unread)
    return assemble(source, stem, events, title=core_title or layout_title, metadata=metadata)
