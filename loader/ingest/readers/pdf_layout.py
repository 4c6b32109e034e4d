"""PDF layout, pure: positioned words -> lines -> reading order, running headers and tables.

A PDF page is a bag of positioned words. This module rebuilds what a reader sees:

1. ``page_lines``: words on one baseline form a *line*, cut into *segments* where a gap wider
   than 1.5 em separates them (two columns, or the cells of a table row).
2. ``drop_running_lines``: lines near the top or bottom edge whose text (digits aside) repeats
   on many pages are running headers and footers; a lone page number there is dropped too.
3. ``reading_order``: consecutive lines that share a vertical gutter form a *group*. A group
   whose parts are equally wide, full of long lines and split by a narrow gutter is text in
   columns (read part by part); any other group of two or more rows is a borderless table
   (``TableRegion``, first row the header). Everything else reads top to bottom.

Example::

    lines = page_lines(words)                    # words: ``Word`` of one page
    kept, dropped = drop_running_lines([lines], [792.0])
    items = reading_order(kept[0])               # Segment | TableRegion, in reading order
"""

from __future__ import annotations

import math
import re
from collections import Counter
from dataclasses import dataclass, field

SEGMENT_GAP_EM = 1.5  # a gap this wide (in font sizes) separates segments of one line
MARGIN_ZONE = 0.12  # the top and bottom share of a page where running headers live
_BOLD = re.compile(r"bold|black|heavy|semibold|demi", re.IGNORECASE)
_MONO = re.compile(r"mono|courier|consol|code", re.IGNORECASE)
_SUBSET = re.compile(r"^[A-Z]{6}\+")
_PAGE_NUMBER = re.compile(
    r"^(?:page\s+)?[-\u2013\u2014]?\s*\d{1,4}\s*[-\u2013\u2014]?(?:\s*(?:/|of)\s*\d{1,4})?$",
    re.IGNORECASE,
)


@dataclass(frozen=True)
class Word:
    text: str
    x0: float
    x1: float
    top: float
    bottom: float
    size: float
    font: str  # the font's name, e.g. "BAAAAA+DejaVuSans-Bold"
    page: int  # 1-based


def family(font: str) -> str:
    """The font's family, no subset prefix or style: ``"ABCDEF+Arial-BoldMT"`` -> ``"Arial"``."""
    return re.split(r"[-,]", _SUBSET.sub("", font), maxsplit=1)[0]


@dataclass
class Segment:
    """Words of one line that belong together (a column's line, a table cell's line)."""

    words: list[Word]

    @property
    def page(self) -> int:
        return self.words[0].page

    @property
    def x0(self) -> float:
        return min(word.x0 for word in self.words)

    @property
    def x1(self) -> float:
        return max(word.x1 for word in self.words)

    @property
    def top(self) -> float:
        return min(word.top for word in self.words)

    @property
    def bottom(self) -> float:
        return max(word.bottom for word in self.words)

    @property
    def width(self) -> float:
        return self.x1 - self.x0

    @property
    def text(self) -> str:
        """Words joined by a space only where the page has one (``"order"`` + ``"."``: no)."""
        parts = [self.words[0].text]
        for before, word in zip(self.words, self.words[1:], strict=False):
            gap = word.x0 - before.x1
            parts.append((" " if gap > 0.15 * word.size else "") + word.text)
        return "".join(parts)

    def style(self) -> tuple[float, bool, str]:
        """(size, bold, family) of most of the segment's characters."""
        weights: Counter[tuple[float, bool, str]] = Counter()
        for word in self.words:
            key = (round(word.size * 2) / 2, bool(_BOLD.search(word.font)), family(word.font))
            weights[key] += len(word.text)
        return weights.most_common(1)[0][0]

    def uniform(self) -> bool:
        """Whether (nearly) every character has the segment's style."""
        size, bold, _ = self.style()
        total = sum(len(word.text) for word in self.words)
        same = sum(
            len(word.text)
            for word in self.words
            if round(word.size * 2) / 2 == size and bool(_BOLD.search(word.font)) == bold
        )
        return same >= 0.9 * total

    @property
    def mono(self) -> bool:
        return all(_MONO.search(word.font) for word in self.words)

    @property
    def size(self) -> float:
        return self.style()[0]


@dataclass
class TableRegion:
    """A table found on a page: rows of cell texts, the first row the header."""

    rows: list[list[str]]
    page: int
    top: float
    x0: float = 0.0
    bottom: float = 0.0


@dataclass
class _Group:
    lines: list[list[Segment]] = field(default_factory=list)

    @property
    def segments(self) -> list[Segment]:
        return [segment for line in self.lines for segment in line]


def page_lines(words: list[Word]) -> list[list[Segment]]:
    """The lines of one page, top to bottom, each cut into segments left to right."""
    lines: list[list[Word]] = []
    for word in sorted(words, key=lambda w: (w.top, w.x0)):
        last = lines[-1] if lines else None
        if last is not None and _same_baseline(last, word):
            last.append(word)
        else:
            lines.append([word])
    return [_segments(sorted(line, key=lambda w: w.x0)) for line in lines]


def _same_baseline(line: list[Word], word: Word) -> bool:
    bottom = max(w.bottom for w in line)
    return abs(bottom - word.bottom) <= 0.35 * min(word.size, line[0].size)


def _segments(words: list[Word]) -> list[Segment]:
    segments = [Segment([words[0]])]
    for before, word in zip(words, words[1:], strict=False):
        if word.x0 - before.x1 > SEGMENT_GAP_EM * max(word.size, before.size):
            segments.append(Segment([word]))
        else:
            segments[-1].words.append(word)
    return segments


def _normalized(line: list[Segment]) -> str:
    text = " ".join(segment.text for segment in line)
    return re.sub(r"\d+", "#", re.sub(r"\s+", " ", text)).strip().casefold()


def drop_running_lines(
    pages: list[list[list[Segment]]], heights: list[float]
) -> tuple[list[list[list[Segment]]], int]:
    """Drop running headers, footers and page numbers.

    Candidates are the lines at a page's top or bottom edge, inside its ``MARGIN_ZONE`` and set
    apart from the body by a gap wider than a paragraph's. One is dropped when its text, digits
    aside, is a candidate on at least two pages and on 40 % of them, or when it is only a page
    number (``"7"``, ``"Page 7 of 9"``, ``"- 7 -"``).

    Returns:
        The pages without those lines, and how many lines were dropped.
    """
    edges = [_edge_lines(lines, height) for lines, height in zip(pages, heights, strict=True)]
    seen: Counter[str] = Counter()
    for lines, candidates in zip(pages, edges, strict=True):
        seen.update({_normalized(lines[index]) for index in candidates})
    needed = max(2, math.ceil(0.4 * sum(1 for lines in pages if lines)))
    kept_pages, dropped = [], 0
    for lines, candidates in zip(pages, edges, strict=True):
        kept = []
        for index, line in enumerate(lines):
            text = " ".join(segment.text for segment in line).strip()
            running = index in candidates and (
                seen[_normalized(line)] >= needed or bool(_PAGE_NUMBER.match(text))
            )
            dropped += running
            if not running:
                kept.append(line)
        kept_pages.append(kept)
    return kept_pages, dropped


def _edge_lines(lines: list[list[Segment]], height: float) -> set[int]:
    """Indexes of the lines at the top (and at the bottom) of a page that lie in the margin zone
    and end in a gap wider than 1.2 em before the next line inward."""
    boxes = [
        (min(s.top for s in line), max(s.bottom for s in line), max(s.size for s in line))
        for line in lines
    ]

    def in_zone(index: int) -> bool:
        top, bottom, _ = boxes[index]
        return bottom <= MARGIN_ZONE * height or top >= (1 - MARGIN_ZONE) * height

    def gap(a: int, b: int) -> float:
        (top_a, bottom_a, _), (top_b, bottom_b, _) = boxes[a], boxes[b]
        return top_b - bottom_a if top_b > top_a else top_a - bottom_b

    found: set[int] = set()
    for order in (list(range(len(lines))), list(range(len(lines) - 1, -1, -1))):
        for position, index in enumerate(order[:-1]):
            if not in_zone(index):
                break
            inward = order[position + 1]
            if gap(index, inward) > 1.2 * max(boxes[index][2], boxes[inward][2]):
                found.update(order[: position + 1])
                break
    return found


def _gutters(segments: list[Segment]) -> list[tuple[float, float]]:
    """Vertical strips no segment covers, at least 1.5 em wide, with text on both sides."""
    size = max(segment.size for segment in segments)
    spans = sorted((segment.x0, segment.x1) for segment in segments)
    gutters = []
    reach = spans[0][1]
    for x0, x1 in spans[1:]:
        if x0 - reach >= SEGMENT_GAP_EM * size:
            gutters.append((reach, x0))
        reach = max(reach, x1)
    return gutters


def _joins(group: _Group, line: list[Segment]) -> bool:
    """Whether a line continues a group: the group has two parts or more, the line keeps a gutter
    open, and a lone segment is a wrapped cell, not the next paragraph or code block: it stays in
    one part, is monospaced only where the group has monospaced cells, and follows closely or
    fills its part."""
    if not group.lines:
        return False
    gutters = _gutters(group.segments + line)
    if not gutters:
        return False
    if (
        len(group.lines) == 1
        and len(group.lines[0]) == 1
        and not _side_by_side(group.lines[0], line)
    ):
        return False  # lines under each other: one column, however short the lines
    if len(line) >= 2:
        return True  # a row, even one of code cells only
    segment = line[0]
    if any(segment.x0 < x0 and segment.x1 > x1 for x0, x1 in _gutters(group.segments)):
        return False  # it spans a gap between the group's columns: no cell wraps over it
    if segment.mono and not any(s.mono for s in group.segments):
        return False  # code under a table, however close: its indentation would make a column
    previous = group.lines[-1][0]
    close = segment.top - previous.top <= 1.6 * segment.size
    part = _parts(group.segments, gutters)
    long = any(
        segment.x0 >= x0 - 1 and segment.x1 <= x1 + 1 and segment.width >= 0.7 * (x1 - x0)
        for x0, x1 in part
    )
    return close or long


def _side_by_side(above: list[Segment], line: list[Segment]) -> bool:
    """Whether no segment of ``line`` shares an x-range with a segment of ``above``."""
    return all(s.x1 <= a.x0 or s.x0 >= a.x1 for s in line for a in above)


def _parts(
    segments: list[Segment], gutters: list[tuple[float, float]]
) -> list[tuple[float, float]]:
    """The x-ranges between gutters, each as wide as the segments in it."""
    edges = [-math.inf, *(x for gutter in gutters for x in gutter), math.inf]
    parts = []
    for low, high in zip(edges[::2], edges[1::2], strict=True):
        inside = [s for s in segments if s.x0 >= low and s.x1 <= high]
        if inside:
            parts.append((min(s.x0 for s in inside), max(s.x1 for s in inside)))
    return parts


def _part_of(segment: Segment, parts: list[tuple[float, float]]) -> int:
    return next(
        i for i, (x0, x1) in enumerate(parts) if segment.x0 >= x0 - 1 and segment.x1 <= x1 + 1
    )


def _is_text_columns(group: _Group, parts: list[tuple[float, float]]) -> bool:
    """Columns of running text, not a table: equal parts, narrow gutters, mostly long lines."""
    widths = [x1 - x0 for x0, x1 in parts]
    gutters = [parts[i + 1][0] - parts[i][1] for i in range(len(parts) - 1)]
    if min(widths) < 0.8 * max(widths) or max(gutters) > 0.35 * min(widths):
        return False
    if len(group.segments) < 6:
        return False
    for index, width in enumerate(widths):  # a column may hold just a paragraph's last lines
        inside = [s for s in group.segments if _part_of(s, parts) == index]
        if sum(1 for s in inside if s.width >= 0.7 * width) < 0.5 * len(inside):
            return False
    return True


def _table(group: _Group) -> TableRegion:
    """Rows of a borderless table: a line with text in the first column starts a row (or a line
    after a gap wider than a wrapped cell's); other lines continue the cells above them."""
    edges = _column_edges(group)
    group = _split_at(group, edges)
    rows: list[list[list[str]]] = []
    previous_top = None
    for line in group.lines:
        columns = {_column(segment, edges) for segment in line}
        gap = line[0].top - previous_top if previous_top is not None else math.inf
        if not rows or 0 in columns or gap > 1.6 * line[0].size:
            rows.append([[] for _ in edges])
        for segment in line:
            rows[-1][_column(segment, edges)].append(segment.text)
        previous_top = line[0].top
    first = group.lines[0][0]
    return TableRegion(
        rows=[[" ".join(cell) for cell in row] for row in rows],
        page=first.page,
        top=first.top,
        x0=min(s.x0 for s in group.segments),
        bottom=max(s.bottom for s in group.segments),
    )


def _column_edges(group: _Group) -> list[float]:
    """A table's column edges: where two or more of its segments start (and its left edge)."""
    starts = Counter(round(segment.x0) for segment in group.segments)
    left = min(starts)
    edges = sorted({left, *(x for x, count in starts.items() if count >= 2)})
    merged = [edges[0]]
    for x in edges[1:]:  # starts a pixel apart are one edge
        if x - merged[-1] > 3:
            merged.append(x)
    return [float(x) for x in merged]


def _column(segment: Segment, edges: list[float]) -> int:
    return max(i for i, x in enumerate(edges) if x <= segment.x0 + 2 or i == 0)


def _split_at(group: _Group, edges: list[float]) -> _Group:
    """Cut segments where a word starts at a column edge: a cell filled to its edge leaves less
    than a segment gap before the next cell."""
    lines = []
    for line in group.lines:
        cut: list[Segment] = []
        for segment in line:
            cut.append(Segment([segment.words[0]]))
            for before, word in zip(segment.words, segment.words[1:], strict=False):
                at_edge = any(abs(word.x0 - x) <= 2 for x in edges)
                if at_edge and word.x0 - before.x1 > 0.5 * word.size:
                    cut.append(Segment([word]))
                else:
                    cut[-1].words.append(word)
        lines.append(cut)
    return _Group(lines)


def reading_order(lines: list[list[Segment]]) -> list[Segment | TableRegion]:
    """One page's lines (top to bottom) in reading order: text columns one after the other,
    borderless tables as ``TableRegion``, everything else top to bottom."""
    groups: list[_Group] = []
    for line in lines:
        if groups and _joins(groups[-1], line):
            groups[-1].lines.append(line)
        else:
            groups.append(_Group([line]))
    items: list[Segment | TableRegion] = []
    for group in groups:
        segments = group.segments
        gutters = _gutters(segments) if len(group.lines) > 1 else []
        if not gutters:
            items.extend(_merge_line(line) for line in group.lines)
            continue
        parts = _parts(segments, gutters)
        if _is_text_columns(group, parts):
            for index in range(len(parts)):
                items.extend(s for s in segments if _part_of(s, parts) == index)
        else:
            items.append(_table(group))
    return items


def _merge_line(line: list[Segment]) -> Segment:
    """A line that is not part of a column or table reads as one segment, left to right."""
    return Segment([word for segment in line for word in segment.words])
