"""Units: what the chunkers cut a section into, and how they pack units into chunk bodies.

Every strategy works the same way underneath: it cuts a section into *units* (whole blocks,
paragraphs, sentences, or — only when nothing else fits — runs of words), then groups units into
chunk bodies (``pack``). The token limit applies to ``chunk.text``, the heading prefix included,
so each section gets a ``Frame`` (``loader.ingest.chunking.limits``) that says how many tokens its
bodies may use; that budget is what the splitting here is given.

Token counts are summed per unit rather than recounted for every candidate chunk. For WordPiece
(the default model) that sum is exact, because the tokenizer splits on whitespace first; for other
tokenizers it is close, and ``enforce_limit`` recounts every finished chunk so the limit holds
whatever the tokenizer.

Example::

    count = counting_cache(embedder.count_tokens)
    units = section_units(section, target=200, budget=250, count=count)
    bodies = [render(group) for group in pack(units, 200, 250, overlap=40, count=count)]
"""

from __future__ import annotations

import itertools
import re
import sys
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from loader.documents import Block, BlockKind, Section
from loader.ingest.chunking.sentences import split_sentences

TokenCounter = Callable[[str], int]

_BLANK_LINE = re.compile(r"\n[^\S\n]*\n\s*")
_TABLE_SEPARATOR_ROW = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(\|\s*:?-{3,}:?\s*)*\|?\s*$")
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")


@dataclass
class Unit:
    """A piece of a section that a chunker keeps whole."""

    text: str  # stripped
    tokens: int
    kind: BlockKind
    joiner: str  # separator between this unit and the one before it in the section
    page: int | None
    whole_sentences: bool  # prose made of complete sentences: may be repeated as overlap


def counting_cache(count_tokens: TokenCounter) -> TokenCounter:
    """Wrap a token counter with a per-document memo: the chunkers count the same pieces often."""
    cache: dict[str, int] = {}

    def count(text: str) -> int:
        tokens = cache.get(text)
        if tokens is None:
            tokens = cache[text] = count_tokens(text)
        return tokens

    return count


# --- splitting ------------------------------------------------------------------------------


def split_characters(text: str, budget: int, count: TokenCounter) -> list[str]:
    """Cut text without whitespace (a URL, a hash) into the longest pieces within ``budget``.

    Each piece is found by doubling a prefix until it no longer fits, then bisecting: the
    tokenizer reads about twice each piece, never the whole rest of a 2 MB line per piece.
    """
    pieces = []
    rest = text
    while rest:
        fit, size = 0, min(64, len(rest))  # fit: a prefix length known to fit
        while count(rest[:size]) <= budget:
            fit = size
            if size == len(rest):
                break
            size = min(2 * size, len(rest))
        if fit == len(rest):
            pieces.append(rest)
            break
        low, high = max(1, fit), size - 1  # rest[:size] does not fit
        while low < high:  # binary search: the longest prefix that fits
            middle = (low + high + 1) // 2
            if count(rest[:middle]) <= budget:
                low = middle
            else:
                high = middle - 1
        pieces.append(rest[:low])
        rest = rest[low:]
    return pieces


def split_words(text: str, budget: int, count: TokenCounter) -> list[str]:
    """Split on whitespace into pieces of at most ``budget`` tokens (the last resort: this cuts
    mid-sentence). Whitespace inside a piece is normalized to single spaces."""
    pieces: list[str] = []
    words: list[str] = []
    used = 0
    for word in text.split():
        tokens = count(word)
        if tokens > budget:
            if words:
                pieces.append(" ".join(words))
                words, used = [], 0
            pieces.extend(split_characters(word, budget, count))
            continue
        if words and used + tokens > budget:
            pieces.append(" ".join(words))
            words, used = [], 0
        words.append(word)
        used += tokens
    if words:
        pieces.append(" ".join(words))
    return pieces


def _group_lines(lines: list[str], budget: int, count: TokenCounter) -> list[list[str]]:
    """Greedily group lines into runs of at most ``budget`` tokens; an overlong line is cut."""
    groups: list[list[str]] = []
    current: list[str] = []
    used = 0
    for line in lines:
        tokens = count(line)
        parts = [line] if tokens <= budget else split_words(line, budget, count)
        for part in parts:
            part_tokens = tokens if len(parts) == 1 else count(part)
            if current and used + part_tokens > budget:
                groups.append(current)
                current, used = [], 0
            current.append(part)
            used += part_tokens
    if current:
        groups.append(current)
    return groups


def _statement_groups(
    lines: list[str], starts: list[int], budget: int, count: TokenCounter
) -> list[list[str]]:
    """Group whole statements (the lines from one start to the next) into runs of at most
    ``budget`` tokens; only a statement longer than the budget alone is cut between lines."""
    bounds = [0, *sorted({start for start in starts if 0 < start < len(lines)}), len(lines)]
    groups: list[list[str]] = []
    current: list[str] = []
    used = 0
    for begin, end in itertools.pairwise(bounds):
        statement = lines[begin:end]
        tokens = sum(count(line) for line in statement)
        if current and used + tokens > budget:
            groups.append(current)
            current, used = [], 0
        if tokens > budget:
            groups.extend(_group_lines(statement, budget, count))
            continue
        current.extend(statement)
        used += tokens
    if current:
        groups.append(current)
    return groups


def split_code(
    text: str, budget: int, count: TokenCounter, statement_lines: Sequence[int] = ()
) -> list[str]:
    """Split a code block on line boundaries; each piece keeps the fence and its language.

    ``statement_lines`` (indices into ``text``'s lines, from the reader's parser: see
    ``Block.statement_lines``) are where statements start: pieces then start
    only there, so no statement is cut unless it alone is over the budget.
    """
    lines = text.split("\n")
    opening = closing = ""
    starts = list(statement_lines)
    if len(lines) >= 2 and _FENCE.match(lines[0]) and _FENCE.match(lines[-1]):
        opening, closing, lines = lines[0], lines[-1], lines[1:-1]
        starts = [start - 1 for start in starts]
    line_budget = budget - count(opening) - count(closing)
    if line_budget < max(8, budget // 4):  # the fence itself is absurd: drop it
        opening = closing = ""
        line_budget = budget
    if starts:
        groups = _statement_groups(lines, starts, line_budget, count)
    else:
        groups = _group_lines(lines, line_budget, count)
    pieces = []
    for group in groups:
        body = "\n".join(group)
        pieces.append(f"{opening}\n{body}\n{closing}" if opening else body)
    return pieces


def split_table(text: str, budget: int, count: TokenCounter) -> list[str]:
    """Split a pipe table between rows; every piece repeats the header and separator rows."""
    rows = text.split("\n")
    header_rows = 2 if len(rows) >= 2 and _TABLE_SEPARATOR_ROW.match(rows[1]) else 1
    header, body_rows = rows[:header_rows], rows[header_rows:]
    header_text = "\n".join(header)
    row_budget = budget - count(header_text)
    if not body_rows or row_budget < max(8, budget // 4):
        # A header that eats the budget cannot be repeated; fall back to plain row groups.
        return ["\n".join(group) for group in _group_lines(rows, budget, count)]
    return [
        header_text + "\n" + "\n".join(group)
        for group in _group_lines(body_rows, row_budget, count)
    ]


def _joiner(whitespace: str) -> str:
    if "\n\n" in whitespace:
        return "\n\n"
    return "\n" if "\n" in whitespace else " "


def sentence_units(
    text: str, kind: BlockKind, page: int | None, budget: int, count: TokenCounter, joiner: str
) -> list[Unit]:
    """One unit per sentence; a sentence longer than ``budget`` becomes word runs."""
    units: list[Unit] = []
    for sentence in split_sentences(text):
        stripped = sentence.strip()
        if not stripped:
            continue
        tokens = count(stripped)
        if tokens <= budget:
            units.append(Unit(stripped, tokens, kind, joiner, page, whole_sentences=True))
        else:
            for index, piece in enumerate(split_words(stripped, budget, count)):
                units.append(
                    Unit(piece, count(piece), kind, joiner if index == 0 else " ", page, False)
                )
        joiner = _joiner(sentence[len(sentence.rstrip()) :])
    return units


def block_units(block: Block, target: int, budget: int, count: TokenCounter) -> list[Unit]:
    """Cut one block into units: whole if it fits, else paragraphs, sentences, then words.

    Prose (paragraphs, lists) stays whole up to ``target`` tokens; code and tables stay whole up
    to ``budget`` and are otherwise split on lines (tables repeating their header).
    """
    text = block.text.strip()
    if not text:
        return []
    tokens = count(text)
    if block.kind in ("code", "table"):
        if tokens <= budget:
            return [Unit(text, tokens, block.kind, "\n\n", block.page, False)]
        if block.kind == "code":
            # Code read through its syntax tree knows where statements start; other code splits
            # anywhere.
            shift = block.text[: len(block.text) - len(block.text.lstrip())].count("\n")
            starts = [line - shift for line in block.statement_lines]
            pieces = split_code(text, budget, count, starts)
        else:
            pieces = split_table(text, budget, count)
        return [
            Unit(piece, count(piece), block.kind, "\n\n", block.page, False) for piece in pieces
        ]
    if tokens <= target:
        return [Unit(text, tokens, block.kind, "\n\n", block.page, True)]
    units: list[Unit] = []
    for paragraph in _BLANK_LINE.split(text):
        paragraph = paragraph.strip()
        paragraph_tokens = count(paragraph) if paragraph else 0
        if not paragraph:
            continue
        if paragraph_tokens <= target:
            units.append(Unit(paragraph, paragraph_tokens, block.kind, "\n\n", block.page, True))
        else:
            units.extend(sentence_units(paragraph, block.kind, block.page, budget, count, "\n\n"))
    return units


def section_units(section: Section, target: int, budget: int, count: TokenCounter) -> list[Unit]:
    """All units of a section in order (``target=0`` gives one unit per sentence)."""
    return [unit for block in section.blocks for unit in block_units(block, target, budget, count)]


# --- packing --------------------------------------------------------------------------------


def render(units: Iterable[Unit]) -> str:
    """The text of consecutive units, joined as they were in the section."""
    parts: list[str] = []
    for unit in units:
        if parts:
            parts.append(unit.joiner)
        parts.append(unit.text)
    return "".join(parts)


def first_page(units: Iterable[Unit]) -> int | None:
    return next((unit.page for unit in units if unit.page is not None), None)


def trailing_sentences(units: list[Unit], limit: int, count: TokenCounter) -> list[Unit]:
    """The longest run of whole sentences ending ``units`` that fits in ``limit`` tokens.

    Only prose counts: overlap made of half a table or a code fragment would help nobody.
    """
    taken: list[Unit] = []
    used = 0
    for unit in reversed(units):
        if not unit.whole_sentences or unit.kind not in ("paragraph", "list"):
            break
        # No budget: a sentence over the limit ends the overlap whole, so cutting it into
        # words first (and counting each word) would be wasted.
        sentences = sentence_units(unit.text, unit.kind, unit.page, sys.maxsize, count, unit.joiner)
        if any(sentence.tokens > limit for sentence in sentences):
            break
        complete = True
        for sentence in reversed(sentences):
            if used + sentence.tokens > limit:
                complete = False
                break
            taken.insert(0, sentence)
            used += sentence.tokens
        if not complete:
            break
    return taken


def pack(
    units: list[Unit], target: int, budget: int, overlap: int, count: TokenCounter
) -> list[list[Unit]]:
    """Group consecutive units into chunks of about ``target`` tokens, never above ``budget``.

    Each chunk after the first starts with up to ``overlap`` tokens of whole sentences from the
    end of the previous one, when they fit together with the next unit.
    """
    chunks: list[list[Unit]] = []
    current: list[Unit] = []
    used = 0
    fresh = False  # whether current holds a unit that is not overlap
    for unit in units:
        if fresh and used + unit.tokens > target:
            chunks.append(current)
            current = trailing_sentences(current, overlap, count) if overlap > 0 else []
            used = sum(item.tokens for item in current)
            if used + unit.tokens > budget:
                current, used = [], 0
        current.append(unit)
        used += unit.tokens
        fresh = True
    if fresh:
        chunks.append(current)
    return chunks
