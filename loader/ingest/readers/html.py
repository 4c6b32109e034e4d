"""HTML reader on the standard library's ``html.parser``.

The parser is event-driven and this reader keeps its own stack of open elements, so nesting
depth costs memory, never recursion: 5,000 nested ``<div>`` elements are fine. Page furniture —
``nav``, ``header``, ``footer``, ``aside``, scripts, styles, ``noscript`` and ``template`` — is
dropped. Missing end tags are closed the way browsers do for the common cases (``p``, ``li``,
``td``, ``tr``), and stray end tags are ignored, so sloppy HTML still yields its text.
"""

from __future__ import annotations

import logging
import re
from html.parser import HTMLParser

from loader.documents import Block, Document
from loader.ingest.readers.common import Heading, Rejected, assemble, normalize_space
from loader.ingest.readers.markdown_tokens import pipe_table

log = logging.getLogger(__name__)

SKIPPED_TAGS = frozenset(
    {"nav", "script", "style", "header", "footer", "aside", "noscript", "template", "svg"}
)
_VOID_TAG_NAMES = """
    area base br col embed hr img input link meta param source track wbr
"""
VOID_TAGS = frozenset(_VOID_TAG_NAMES.split())
HEADINGS = {f"h{level}": level for level in range(1, 7)}
# Elements whose start or end separates paragraphs of running text (li, tr, td and th only when
# they stray outside a list or table).
_BLOCK_TAG_NAMES = """
    p div section article main body html blockquote dl dt dd figure figcaption form fieldset
    address details summary hr center li tr td th caption
"""
BLOCK_TAGS = frozenset(_BLOCK_TAG_NAMES.split())
HEADING_ENDERS = BLOCK_TAGS | {"table", "ul", "ol", "pre", *HEADINGS}
# Tags closed implicitly by a new one of their kind, unless one of the boundary tags intervenes.
IMPLICIT_CLOSE = {
    "p": frozenset({"div", "section", "article", "main", "body", "li", "td", "th", "blockquote"}),
    "li": frozenset({"ul", "ol"}),
    "td": frozenset({"tr", "table"}),
    "th": frozenset({"tr", "table"}),
    "tr": frozenset({"table"}),
    "dt": frozenset({"dl"}),
    "dd": frozenset({"dl"}),
}
_LANGUAGE_CLASS = re.compile(r"(?:^|\s)(?:language|lang)-([\w+-]+)")


class _Extractor(HTMLParser):
    """Collects headings and blocks from HTML events."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.events: list[Heading | Block] = []
        self.title_parts: list[str] = []
        self.lang = ""
        self._stack: list[tuple[str, bool]] = []  # (tag, whether its start was handled)
        self._open: dict[str, int] = {}
        self._skip = 0
        self._in_title = False
        self._text: list[str] = []  # running text of the current paragraph or heading
        self._heading: int | None = None
        self._pre = 0
        self._pre_text: list[str] = []
        self._pre_language = ""
        self._table = 0
        self._rows: list[list[str]] = []
        self._cell: list[str] | None = None
        self._list = 0
        self._list_kinds: list[list] = []  # [tag, next number] per open list
        self._items: list[str] = []
        self._item: list[str] | None = None

    # --- element stack ------------------------------------------------------------------

    def _push(self, tag: str, handled: bool) -> None:
        self._stack.append((tag, handled))
        self._open[tag] = self._open.get(tag, 0) + 1

    def _pop_to(self, tag: str) -> None:
        """Close elements from the top of the stack down to and including ``tag``."""
        while self._stack:
            top, handled = self._stack.pop()
            self._open[top] -= 1
            if handled:
                self._close(top)
            if top == tag:
                return

    def _implicitly_close(self, tag: str) -> None:
        boundaries = IMPLICIT_CLOSE.get(tag)
        if not boundaries or not self._open.get(tag):
            return
        for open_tag, _ in reversed(self._stack):
            if open_tag == tag:
                self._pop_to(tag)
                return
            if open_tag in boundaries:
                return

    # --- parser callbacks ---------------------------------------------------------------

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "html" and not self.lang:
            self.lang = next((value or "" for name, value in attrs if name == "lang"), "")
        self._implicitly_close(tag)
        handled = self._skip == 0
        if handled:
            self._open_element(tag, dict(attrs))
        elif tag in SKIPPED_TAGS:
            self._skip += 1
            handled = True  # so its end decrements the counter
        if tag not in VOID_TAGS:
            self._push(tag, handled)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if self._skip == 0:
            self._open_element(tag, dict(attrs))
            if tag not in VOID_TAGS:
                self._close(tag)

    def handle_endtag(self, tag: str) -> None:
        if self._open.get(tag):
            self._pop_to(tag)
        # A stray end tag closes nothing, as in browsers.

    def handle_data(self, data: str) -> None:
        if self._skip:
            return
        if self._in_title:
            self.title_parts.append(data)
        elif self._pre:
            self._pre_text.append(data)
        elif self._cell is not None:
            self._cell.append(data)
        elif self._item is not None:
            self._item.append(data)
        elif self._table == 0:
            self._text.append(data)

    def close(self) -> None:
        super().close()
        while self._stack:
            self._pop_to(self._stack[-1][0])
        self._flush_text()

    # --- element handling ---------------------------------------------------------------

    def _open_element(self, tag: str, attrs: dict[str, str | None]) -> None:
        """Handle a start tag: by the mode the parser is in (pre, table, running text)."""
        if self._heading is not None and tag in HEADING_ENDERS:
            self._end_heading()  # "<h2>Title<p>text" : the paragraph is not part of the heading
        if tag in SKIPPED_TAGS:
            self._skip += 1
        elif tag == "title":
            self._in_title = True
        elif self._pre:
            self._open_in_pre(tag, attrs)
        elif tag == "pre":
            self._start_pre(attrs)
        elif tag == "table":
            self._start_table()
        elif self._table:
            self._open_in_table(tag)
        else:
            self._open_in_text(tag, attrs)

    def _close(self, tag: str) -> None:
        """Handle an end tag (given or implied): by the mode the parser is in."""
        if tag in SKIPPED_TAGS:
            self._skip -= 1
        elif tag == "title":
            self._in_title = False
        elif tag == "pre" and self._pre:
            self._end_pre()
        elif self._pre:
            return
        elif self._table:
            self._close_in_table(tag)
        elif self._list:
            self._close_in_list(tag)
        elif tag in HEADINGS and self._heading is not None:
            self._end_heading()
        elif tag in BLOCK_TAGS:
            self._flush_text()

    # preformatted text: everything inside is code, only a ``code`` tag's language counts

    def _start_pre(self, attrs: dict[str, str | None]) -> None:
        self._flush_text()
        self._pre = 1
        self._pre_text = []
        self._pre_language = self._language(attrs)

    def _open_in_pre(self, tag: str, attrs: dict[str, str | None]) -> None:
        if tag == "code" and not self._pre_language:
            self._pre_language = self._language(attrs)

    def _end_pre(self) -> None:
        self._pre = 0
        code = "".join(self._pre_text).strip("\n")
        if code.strip():
            fence = "~~~" if "```" in code else "```"
            self.events.append(Block("code", f"{fence}{self._pre_language}\n{code}\n{fence}"))

    # tables: rows of cells of the outermost table; nested tables only add their text

    def _start_table(self) -> None:
        self._table += 1
        if self._table == 1:
            self._flush_text()
            self._rows = []

    def _open_in_table(self, tag: str) -> None:
        if self._table == 1 and tag == "tr":
            self._rows.append([])
        elif self._table == 1 and tag in ("td", "th"):
            if not self._rows:
                self._rows.append([])
            self._cell = []
        elif tag == "br" and self._cell is not None:
            self._cell.append(" ")

    def _close_in_table(self, tag: str) -> None:
        if tag == "table":
            self._table -= 1
            if self._table == 0:
                rows = [row for row in self._rows if any(cell for cell in row)]
                if rows:
                    self.events.append(Block("table", pipe_table(rows)))
        elif tag in ("td", "th") and self._table == 1 and self._cell is not None:
            self._rows[-1].append(normalize_space("".join(self._cell)))
            self._cell = None

    # running text: lists, headings, paragraphs

    def _open_in_text(self, tag: str, attrs: dict[str, str | None]) -> None:
        if tag in ("ul", "ol"):
            self._start_list(tag, attrs)
        elif tag == "li" and self._list:
            self._finish_item()
            self._item = []
        elif tag == "br":
            (self._item if self._item is not None else self._text).append(" ")
        elif self._list:
            return  # paragraphs inside list items stay part of the item
        elif tag in HEADINGS:
            self._flush_text()
            self._heading = HEADINGS[tag]
        elif tag in BLOCK_TAGS:
            self._flush_text()

    def _start_list(self, tag: str, attrs: dict[str, str | None]) -> None:
        if self._list == 0:
            self._flush_text()
            self._items = []
        else:
            self._finish_item()
        self._list += 1
        self._list_kinds.append([tag, int(attrs.get("start") or 1) if tag == "ol" else 0])

    def _close_in_list(self, tag: str) -> None:
        if tag == "li":
            self._finish_item()
        elif tag in ("ul", "ol"):
            self._finish_item()
            self._list -= 1
            self._list_kinds.pop()
            if self._list == 0 and self._items:
                self.events.append(Block("list", "\n".join(self._items)))
                self._items = []

    def _end_heading(self) -> None:
        text = normalize_space("".join(self._text))
        self._text = []
        if text and self._heading is not None:
            self.events.append(Heading(self._heading, text))
        self._heading = None

    def _finish_item(self) -> None:
        if self._item is None:
            return
        text = normalize_space("".join(self._item))
        self._item = None
        if not text or not self._list_kinds:
            return
        kind = self._list_kinds[-1]
        if kind[0] == "ol":
            marker = f"{kind[1]}."
            kind[1] += 1
        else:
            marker = "-"
        self._items.append("  " * (self._list - 1) + f"{marker} {text}")

    def _flush_text(self) -> None:
        if self._heading is not None:
            return  # a heading collects its text until it closes
        text = normalize_space("".join(self._text))
        self._text = []
        if text:
            self.events.append(Block("paragraph", text))

    @staticmethod
    def _language(attrs: dict[str, str | None]) -> str:
        match = _LANGUAGE_CLASS.search(attrs.get("class") or "")
        return match.group(1) if match else ""


def read_html(text: str, source: str, stem: str) -> Document:
    """Read an HTML page: headings, paragraphs, ``pre`` as code, tables, lists.

    Title: ``<title>`` (or the first ``h1`` when ``<title>`` is missing or is that ``h1`` plus a
    site name, e.g. ``"Delivery areas | FoodCo"``).
    """
    extractor = _Extractor()
    try:
        extractor.feed(text)
        extractor.close()
    except Exception as exc:  # html.parser is lenient; anything it still raises means "malformed"
        raise Rejected(f"malformed HTML: {exc}") from exc
    title = normalize_space("".join(extractor.title_parts)) or None
    first = next((event for event in extractor.events if isinstance(event, Heading)), None)
    is_h1 = first is not None and first.level == 1
    if title and is_h1 and title.casefold().startswith(first.text.casefold()):
        title = first.text  # "<title>Delivery areas | FoodCo" is the h1 plus the site name
    metadata = {"lang": extractor.lang} if extractor.lang else {}
    return assemble(source, stem, extractor.events, title=title, metadata=metadata)
