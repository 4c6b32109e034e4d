"""PDF structure, pure: lines in reading order -> headings, paragraphs, lists, code and tables.

Headings are recovered from how they look and where they stand, relative to the body text (the
style — size, weight, font family — that most characters have):

- a line set larger than the body, or bold where the body is not, that stands apart from the
  line above it (not a bold line inside a paragraph) and does not end like a sentence;
- a body-style line numbered like ``2.3 Delivery zones`` that stands alone.

Levels: a numbered heading's depth (``2.3`` is 2); otherwise the rank of its size and weight,
largest first (``heading_ranks``: the font family does not make a level). The largest style, when
it is used once near the top of the first page, is the title: it is not a heading (the chunk
prefix carries the title).

Example::

    outline = StructureOutline(items)            # items: per page, from ``reading_order``
    title, events = outline.events()              # Heading | Block, for ``assemble``
"""

from __future__ import annotations

import functools
import re
import statistics
from collections import Counter
from collections.abc import Iterable

from loader.documents import Block
from loader.ingest.readers.common import Heading, normalize_space
from loader.ingest.readers.markdown_tokens import pipe_table
from loader.ingest.readers.pdf_layout import Segment, TableRegion
from loader.ingest.readers.text import unwrap

_NUMBERED = re.compile(r"^(\d{1,3}(?:\.\d{1,3})*)\.?\s+\S")
_DEEP_NUMBERED = re.compile(r"^\d{1,3}(?:\.\d{1,3})+\.?\s+[A-Z]")
_BULLET = re.compile(r"^([\u2022\u25e6\u25aa\u25cf\u2013\u2014\u2023\u2043\uf0b7\uf0a7*-])\s*(.*)$")
_ORDERED = re.compile(r"^(\d{1,3}[.)]|[a-z][.)])\s+(.*)$")
_SENTENCE_END = re.compile(r"[.,;:]$")
Style = tuple[float, bool, str]
Rank = tuple[float, bool]  # a heading style without its family: what makes a heading level


def rank_of(style: Style) -> Rank:
    """The (size, bold) of a style. The family is left out: a heading set partly or wholly in a
    fallback font (CJK or emoji glyphs its font lacks) is no other level, and its wrapped lines
    stay one heading."""
    return style[0], style[1]


def heading_ranks(styles: Iterable[Style]) -> dict[Rank, int]:
    """The level (1, 2, ...) of each heading style's rank: larger first, bold before regular at
    one size. The order is total, so it does not depend on the order ``styles`` come in (a set of
    styles iterates in an order that changes with ``PYTHONHASHSEED``)."""
    ranks = sorted({rank_of(style) for style in styles}, key=lambda rank: (-rank[0], not rank[1]))
    return {rank: level for level, rank in enumerate(ranks, start=1)}


def _is_list_start(text: str) -> bool:
    return bool(_BULLET.match(text) or _ORDERED.match(text))


class StructureOutline:
    """Headings, paragraphs, lists, code and tables of a document's pages (``reading_order``)."""

    def __init__(self, pages: list[list[Segment | TableRegion]]) -> None:
        self.items = [item for page in pages for item in page]
        segments = [item for item in self.items if isinstance(item, Segment)]
        weights: Counter[Style] = Counter()
        for segment in segments:
            weights[segment.style()] += len(segment.text)
        self.body: Style = weights.most_common(1)[0][0] if weights else (0.0, False, "")
        body_lines = [s for s in segments if s.style() == self.body]
        steps = [
            b.top - a.top
            for a, b in zip(body_lines, body_lines[1:], strict=False)
            if a.page == b.page and 0 < b.top - a.top < 3 * self.body[0]
        ]
        self.pitch = statistics.median(steps) if steps else 1.2 * self.body[0]

    # --- headings -------------------------------------------------------------------------

    def _stands_apart(self, index: int) -> bool:
        """The line is first on its page or column, or further below the line above it than
        the body's line pitch."""
        segment = self.items[index]
        before = self.items[index - 1] if index else None
        if not isinstance(before, Segment) or before.page != segment.page:
            return True
        step = segment.top - before.top
        return step < 0 or step > 1.3 * self.pitch or before.style() != self.body

    def _looks_like_heading(self, index: int) -> bool:
        segment = self.items[index]
        text = segment.text
        size, bold, _ = style = segment.style()
        body_size, body_bold, _ = self.body
        if segment.mono or not re.search(r"[^\W\d_]", text) or len(text.split()) > 25:
            return False
        if not self._stands_apart(index) or _SENTENCE_END.search(text):
            return False
        distinct = style != self.body and segment.uniform() and size >= 0.95 * body_size
        if distinct and (size >= 1.1 * body_size or (bold and not body_bold)):
            return True
        return bool(_DEEP_NUMBERED.match(text)) and len(text.split()) <= 12

    @functools.cached_property
    def _headings(self) -> dict[int, tuple[int, Style]]:
        return self._find_headings()

    def headings(self) -> dict[int, tuple[int, Style]]:
        """Item index -> (line count, style) of each heading; a heading wrapped on several lines
        of one size and weight (whatever their fonts) counts once, at its first line."""
        return dict(self._headings)

    def _find_headings(self) -> dict[int, tuple[int, Style]]:
        found: dict[int, tuple[int, Style]] = {}
        index = 0
        while index < len(self.items):
            if isinstance(self.items[index], Segment) and self._looks_like_heading(index):
                first = self.items[index]
                count = 1
                while index + count < len(self.items):
                    after = self.items[index + count]
                    if not (
                        isinstance(after, Segment)
                        and after.page == first.page
                        and rank_of(after.style()) == rank_of(first.style())
                        and 0 < after.top - self.items[index + count - 1].top <= 1.5 * first.size
                    ):
                        break
                    count += 1
                found[index] = (count, first.style())
                index += count
            else:
                index += 1
        return found

    def _title(self, headings: dict[int, tuple[int, Style]]) -> int | None:
        """The index of the title line: the only use of the largest heading style, near the top
        of the first page."""
        if not headings:
            return None
        ranks = Counter(rank_of(style) for _, style in headings.values())
        largest = max(ranks)  # by size, then bold: a total order
        first = min(headings)
        segment = self.items[first]
        unique = ranks[largest] == 1 and rank_of(headings[first][1]) == largest
        others = [rank[0] for rank in ranks if rank != largest]
        bigger = not others or largest[0] > max(others)
        return first if unique and bigger and segment.page == 1 else None

    def title_index(self) -> int | None:
        """The item index of the layout's title line, or None."""
        return self._title(self.headings())

    def events(self) -> tuple[str | None, list[Heading | Block]]:
        """The layout title (or None) and the document's events in reading order."""
        headings = self.headings()
        title_index = self._title(headings)
        levels = heading_ranks(style for i, (_, style) in headings.items() if i != title_index)
        title = None
        marks: dict[int, tuple[int, str]] = {}  # first line -> (line count, heading text or "")
        for index, (count, style) in headings.items():
            text = join_wrapped(self.items[i].text for i in range(index, index + count))
            if index == title_index:
                title = text
                marks[index] = (count, "")
                continue
            numbered = _NUMBERED.match(text)
            level = numbered.group(1).count(".") + 1 if numbered else levels[rank_of(style)]
            marks[index] = (count, f"{min(level, 6)}\x00{text}")
        return title, self.blocks(marks)

    # --- blocks -----------------------------------------------------------------------------

    def blocks(self, marks: dict[int, tuple[int, str]]) -> list[Heading | Block]:
        """Events from the items: ``marks`` gives the headings (index -> (lines, "level\\0text"),
        an empty text drops the lines, zero lines puts the heading before the item); every
        other line joins a paragraph, list or code."""
        events: list[Heading | Block] = []
        run: list[Segment] = []
        index = 0
        while index < len(self.items):
            item = self.items[index]
            count, heading = marks.get(index, (0, ""))
            if heading or count:
                events.extend(self._flush(run))
                run = []
                if heading:
                    level, text = heading.split("\x00", 1)
                    events.append(Heading(int(level), text))
                if count:
                    index += count
                    continue
            if isinstance(item, TableRegion):
                events.extend(self._flush(run))
                run = []
                events.append(Block("table", pipe_table(item.rows), item.page))
                index += 1
                continue
            if run and self._breaks(run[-1], item):
                events.extend(self._flush(run))
                run = []
            run.append(item)
            index += 1
        events.extend(self._flush(run))
        return events

    def _breaks(self, before: Segment, segment: Segment) -> bool:
        """Whether ``segment`` starts a new block after ``before``."""
        if segment.page != before.page or segment.mono != before.mono:
            return True
        step = segment.top - before.top
        if step < 0:  # the next column: a paragraph that did not end goes on
            return bool(re.search(r"[.!?:]$", before.text)) or _is_list_start(segment.text)
        if step > 1.3 * self.pitch and not segment.mono:
            return True
        return _is_list_start(segment.text) and not _is_list_start(before.text)

    def _flush(self, run: list[Segment]) -> list[Block]:
        if not run:
            return []
        page = run[0].page
        if run[0].mono:
            left = min(segment.x0 for segment in run)
            em = 0.6 * run[0].size  # a monospace character's width
            lines = [" " * round((s.x0 - left) / em) + s.text for s in run]
            return [Block("code", "```\n" + "\n".join(lines) + "\n```", page)]
        if _is_list_start(run[0].text):
            return [Block("list", _list_text(run), page)]
        return [Block("paragraph", unwrap([segment.text for segment in run]), page)]


def _list_text(run: list[Segment]) -> str:
    """List items, one per line (``- item`` for bullets), wrapped lines joined to their item."""
    items: list[list[str]] = []
    for segment in run:
        text = segment.text
        bullet = _BULLET.match(text)
        if bullet:
            items.append([f"- {bullet.group(2)}"])
        elif _ORDERED.match(text) or not items:
            items.append([text])
        else:
            items[-1].append(text)
    return "\n".join(unwrap(item) for item in items)


_ENDS_IN_HYPHEN = re.compile(r"\w-$")


def join_wrapped(lines: Iterable[str]) -> str:
    """The lines of one wrapped heading as one line: a line ending in a hyphen after a letter or
    digit joins the next without a space (``app-`` / ``config.yaml`` is ``app-config.yaml``, not
    ``app- config.yaml``); the hyphen stays, since a heading's hyphen is usually part of a name."""
    joined = ""
    for line in (normalize_space(line) for line in lines):
        if not line:
            continue
        glue = "" if not joined or _ENDS_IN_HYPHEN.search(joined) else " "
        joined += glue + line
    return joined
