"""Large Markdown bodies read in windows of lines, so that memory stays bounded.

markdown-it-py keeps a ``Token`` for every table cell, list item and inline piece: one parse of a
10 MB pipe table held about a gigabyte of them. A body over ``WHOLE_BODY_CHARS`` is therefore
parsed a window of lines at a time (``WINDOW_LINES`` lines or ``WINDOW_CHARS`` characters,
whichever comes first), and only the events of each window are kept. A body up to the threshold
(every ordinary document) is parsed at once, exactly as before.

How a window is cut. The top-level blocks of a window's tokens (level 0, with a line ``map``) are
parsed exactly as one parse of the whole body would parse them, all but the last: each ended
because of a line inside the window. So the window's events are taken up to the last top-level
block, and the next window starts at that block's first line, fresh, as the whole parse would
have gone on there. When a window holds one block only, it may go on past the window, and it is
cut inside, where the next window can go on with the same parse:

- a table between rows: the next window starts with the table's header and delimiter lines
  again, then the remaining rows; the rows are joined into one table;
- a list between top-level items: the next window starts at the item's own line, whose number
  markdown-it keeps as the item's marker; the lines are joined into one list;
- a paragraph between lines: the next window starts with a one-word line (``SENTINEL``, taken off
  the text again) before the remaining lines, so that they are read as the continuation lines of
  a paragraph (an indented line stays text, ``2.`` starts no list, a table may interrupt it as in
  the whole parse); the texts are joined with a space, as a line break in a paragraph is;
- a fenced code block or an HTML block between lines: the next window starts with the opening
  line again (its fence, indentation and info string), so the rest is read inside the same block
  and ends where the whole parse ends it; the contents are joined;
- an indented code block between two non-blank lines; a block quote between its child blocks
  (a child begins on a ``>`` line, and the events of a quote are those of its children).

So the events are the whole parse's for every table, list, code block and HTML block, and
headings stay where they were (a paragraph cut open that ends in a setext underline is joined
into the heading it is). Rare differences remain: an inline construct that spans the line where
a paragraph was cut is read as two halves (the cut is moved up to ``PARAGRAPH_CUT_LOOKBACK``
lines back to where no code span, link text or emphasis is open, by counting their marks);
markdown-it's cap on the empty cells a table may fill in (``MAX_AUTOCOMPLETED_CELLS``) counts per
window. A block none of these rules can cut (one list item, or one paragraph in a quote, longer
than a window) widens the window up to ``MAX_GROWTH`` times; past that it is cut at the window's
end and the rest read as new blocks: bounded memory matters more than one block.

Windows are parsed with the block rules only; the inline rules run over the tokens that are
taken (a window's last block is parsed again in the next), which keeps the time at or below
that of one parse.

Link reference definitions (``[label]: url``) apply to the whole body, before or after their
use, so every window starts with all of them in markdown-it's ``env["references"]``. They come
from a cheap prescan (``reference_definitions``: the runs of lines around a line beginning with
``[``, parsed on their own). The windows' parses report the definitions they meet; when those
differ from the prescan's guess (a definition-like line in an HTML block, or a definition in a
paragraph's continuation), the body is read once more knowing them. So ``[text][label]`` reads
as ``text`` exactly when one parse would read it so.

Events carry no line numbers (``Heading`` and ``Block`` hold text only), so the windows' line
numbers, which count from the window's first line, go nowhere.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from markdown_it import MarkdownIt
from markdown_it.rules_core import StateCore
from markdown_it.token import Token

from loader.documents import Block
from loader.ingest.readers.common import Heading
from loader.ingest.readers.markdown_tokens import (
    fence_text,
    html_text,
    inline_text,
    list_lines,
    parser,
    pipe_table,
    table_rows,
    token_events,
)

# A body up to this many characters is parsed at once (its tokens take up to ~100 MB).
WHOLE_BODY_CHARS = 256_000
WINDOW_LINES = 2_000
WINDOW_CHARS = 128_000
MIN_WINDOW_LINES = 4  # however long the lines: a cut needs a few
MAX_GROWTH = 4
SENTINEL = "x"  # no Markdown syntax, no "|": it cannot open a table, a list or a heading

REFERENCE_CONTEXT_LINES = 20
PARAGRAPH_CUT_LOOKBACK = 50

_LISTS = ("bullet_list_open", "ordered_list_open")
_BLANK_SPANNING = (*_LISTS, "code_block", "fence", "html_block")
_NEWLINES = re.compile(r"\r\n?")  # markdown-it's own normalization, so lines match its lines
_FENCE = re.compile(r" {0,3}(`{3,}|~{3,})(.*)")  # a fence's opening or closing line
_BACKTICKS, _ASTERISKS, _UNDERSCORES = re.compile("`+"), re.compile(r"\*+"), re.compile("_+")
_MARKERS = " \t>-+*0123456789.)"  # what may stand before a definition's "[" on its line
# A window is parsed block rules only; the inline rules run over the tokens that are taken
# (the last block of a window is parsed again in the next), as ``parser`` runs them.
_block_parser = MarkdownIt("commonmark").enable("table").disable("inline")
_core_rules = parser.core.ruler
_AFTER_BLOCK = _core_rules.getRules("")[_core_rules.get_active_rules().index("block") + 1 :]


@dataclass(frozen=True)
class _Top:
    """A top-level block of a window: its token's index, first line and end line."""

    index: int
    start: int
    end: int
    kind: str


@dataclass(frozen=True)
class _Cut:
    """Where a window ends: ``line`` (of the window's lines) starts the next window, ``index``
    is the first token not taken; ``open``: the window's one block goes on in the next."""

    line: int
    index: int
    open: bool = False


@dataclass
class _Continued:
    """A block read over several windows: its pieces so far, and the lines that re-open it."""

    kind: str
    prefix: list[str]
    info: str
    parts: list[Any] = field(default_factory=list)

    def events(self) -> list[Heading | Block]:
        """The block's event, its pieces joined as one parse of them all would have it."""
        if self.kind == "table_open":
            return [Block("table", pipe_table(self.parts) if self.parts else "")]
        if self.kind in _LISTS:
            return [Block("list", "\n".join(self.parts))]
        if self.kind == "paragraph_open":
            return [Block("paragraph", " ".join(self.parts))]
        if self.kind == "heading_open":  # a paragraph that ended in a setext underline
            return [Heading(int(self.info[1:]), " ".join(self.parts))]
        if self.kind in ("fence", "code_block"):
            return [Block("code", fence_text(self.info, "".join(self.parts)))]
        stripped = html_text("".join(self.parts))  # html_block
        return [Block("paragraph", stripped)] if stripped else []


def windowed_events(
    text: str, *, window_lines: int | None = None, window_chars: int | None = None
) -> list[Heading | Block]:
    """Headings and blocks of a Markdown text, in order, read in windows of lines.

    Args:
        text: the Markdown body (front matter already off).
        window_lines: most lines in a window (at least ``MIN_WINDOW_LINES``; default
            ``WINDOW_LINES``).
        window_chars: most characters in a window, default ``WINDOW_CHARS`` (a window has at
            least ``MIN_WINDOW_LINES`` lines, however long).

    Returns:
        The events one parse of the whole text gives, but for the differences the module's
        docstring names.
    """
    text = _NEWLINES.sub("\n", text).replace("\0", "\ufffd")
    lines = text.split("\n")
    references = reference_definitions(lines) if "]:" in text else {}
    window = (
        max(window_lines or WINDOW_LINES, MIN_WINDOW_LINES),
        window_chars or WINDOW_CHARS,
    )
    events, defined = _walk(lines, references, window)
    if defined.keys() != references.keys():  # the prescan guessed wrong: read again, knowing
        events, _ = _walk(lines, defined, window)
    return events


def _walk(
    lines: list[str], references: dict[str, Any], window: tuple[int, int]
) -> tuple[list[Heading | Block], dict[str, Any]]:
    """The events of ``lines`` read window by window, every window knowing ``references``;
    and the reference definitions the windows' parses met (first one of a label first)."""
    defined: dict[str, Any] = {}
    events: list[Heading | Block] = []
    continued: _Continued | None = None
    start = 0
    growth = 1
    while start < len(lines):
        end = _window_end(lines, start, window[0] * growth, window[1] * growth)
        prefix = continued.prefix if continued else []
        src = prefix + lines[start:end]
        env, tokens, tops = _parse_window(src, references, defined)
        if continued and not (tops and tops[0].start == 0 and _goes_on(continued, tokens)):
            # The re-opened block was read as something else: keep what was gathered, read
            # the rest as it comes.
            events.extend(continued.events())
            continued = None
            continue
        if end == len(lines):
            cut = _Cut(len(src), len(tokens))
        elif len(tops) != 1:
            cut = _Cut(tops[-1].start, tops[-1].index) if tops else _Cut(len(src), len(tokens))
        else:
            cut = _single_cut(src, tokens, tops[0])
            if cut is None or (cut.open and cut.line <= len(prefix)):
                if growth < MAX_GROWTH:
                    growth *= 2
                    continue
                cut = _Cut(len(src), len(tokens))  # bounded memory first: cut at the end
        growth = 1
        taken = 0
        if continued is not None or cut.open:
            top = tops[0]
            block_end = tops[1].index if len(tops) > 1 else len(tokens)
            if continued is None:
                continued = _Continued(top.kind, _reopening(top, src), tokens[top.index].info)
            block = tokens[: min(block_end, cut.index)]
            continued.parts.extend(_piece(continued.kind, block, top, cut, env, bool(prefix)))
            if cut.open:
                start += cut.line - len(prefix)
                continue
            events.extend(continued.events())
            continued = None
            taken = block_end
        _parse_inline(tokens[taken : cut.index], env)
        events.extend(token_events(tokens, taken, cut.index))
        start += max(cut.line - len(prefix), 0)
    return events, defined


def reference_definitions(lines: list[str]) -> dict[str, Any]:
    """The link reference definitions of a body, as markdown-it's ``env["references"]``.

    A cheap prescan, a guess that the windows' parses check: each run of non-blank lines (up
    to ``REFERENCE_CONTEXT_LINES`` either way) around a line that begins with ``[`` (after
    quote or list markers), outside top-level fenced code, is parsed on its own, in document
    order, so the first definition of a label wins as in one parse.
    """
    references: dict[str, Any] = {}
    done = 0
    fence = ""  # the marker of the fenced code block the scan is in
    for number, line in enumerate(lines):
        marker = _FENCE.match(line)
        if fence:
            if marker and marker[1].startswith(fence) and not marker[2].strip():
                fence = ""
            continue
        if marker and not (marker[1][0] == "`" and "`" in marker[2]):
            fence = marker[1]
            continue
        if number < done or not line.lstrip(_MARKERS).startswith("["):
            continue
        first = number
        while first > max(done, number - REFERENCE_CONTEXT_LINES) and lines[first - 1].strip():
            first -= 1
        done = number + 1
        while done < min(len(lines), number + REFERENCE_CONTEXT_LINES) and lines[done].strip():
            done += 1
        _block_parser.parse("\n".join(lines[first:done]), {"references": references})
    return references


def _parse_inline(tokens: list[Token], env: dict[str, Any]) -> None:
    """Run the inline rules (and what follows them) over ``tokens``, as one parse would."""
    state = StateCore("", parser, env)
    state.tokens = tokens
    for rule in _AFTER_BLOCK:
        rule(state)


def _parse_window(
    src: list[str], references: dict[str, Any], defined: dict[str, Any]
) -> tuple[dict[str, Any], list[Token], list[_Top]]:
    """A window's env, block tokens (the inline rules run only over what is taken: the last
    block is parsed again in the next window) and top-level blocks; the definitions the
    parse meets are added to ``defined``."""
    env: dict[str, Any] = {"references": dict(references)}
    tokens = _block_parser.parse("\n".join(src), env)
    for label, definition in env["references"].items():
        if label not in references:
            defined.setdefault(label, definition)
    for duplicate in env.get("duplicate_refs", ()):
        defined.setdefault(duplicate["label"], duplicate)
    tops = [
        _Top(index, token.map[0], token.map[1], token.type)
        for index, token in enumerate(tokens)
        if token.level == 0 and token.nesting >= 0 and token.map is not None
    ]
    return env, tokens, tops


def _goes_on(continued: _Continued, tokens: list[Token]) -> bool:
    """Whether the first block of a window that began with ``continued``'s re-opening lines
    is its rest. A paragraph's rest may be a setext heading: then the whole paragraph is."""
    first = tokens[0]
    setext = first.type == "heading_open" and first.markup[:1] in ("=", "-")
    if continued.kind == "paragraph_open" and setext:
        continued.kind, continued.info = "heading_open", first.tag
        return True
    return first.type == continued.kind


def _window_end(lines: list[str], start: int, most_lines: int, most_chars: int) -> int:
    """The end (exclusive) of the window from ``start``."""
    end = start
    chars = 0
    while end < len(lines) and end - start < most_lines:
        if chars >= most_chars and end - start >= MIN_WINDOW_LINES:
            break
        chars += len(lines[end]) + 1
        end += 1
    return end


def _single_cut(src: list[str], tokens: list[Token], top: _Top) -> _Cut | None:
    """Where to end a window holding one top-level block; None: nowhere (widen the window)."""
    after = len(tokens)
    # A list, a code block, a fence and an HTML block (the kinds closed by a marker: a fence
    # is closed by the end of the text) may go on after blank lines.
    ends_inside = any(line.strip() for line in src[top.end :]) or (
        top.end < len(src) and top.kind not in _BLANK_SPANNING
    )
    if ends_inside or top.kind in ("heading_open", "hr"):
        return _Cut(top.end, after)
    if top.kind == "table_open":
        rows = [
            token.map[0]
            for token in tokens[top.index :]
            if token.type == "tr_open" and token.map is not None
        ]
        # rows[0] is the header; a cut at the last row keeps at least one row before it
        return _Cut(rows[-1], after, open=True) if len(rows) >= 3 else None
    if top.kind in _LISTS or top.kind == "blockquote_open":
        children = [
            (token.map[0], index)
            for index, token in enumerate(tokens)
            if index > top.index
            and token.level == 1
            and token.nesting >= 0
            and token.map is not None
            and token.map[0] > top.start
        ]
        if not children:
            return None
        line, index = children[-1]
        # A quote's events are its children's: the next window starts a quote at that child.
        return _Cut(line, index, open=top.kind in _LISTS)
    if top.kind == "paragraph_open":
        line = _paragraph_cut(src, top)
        return _Cut(line, after, open=True) if line > top.start else None
    if top.kind in ("fence", "html_block"):
        # Its last line, whether or not the block ends there: a fence or an HTML block
        # re-opened on its closing line closes at once.
        line = top.end - 1
        return _Cut(line, after, open=True) if line > top.start else None
    if top.kind == "code_block":
        for line in range(top.end - 1, top.start, -1):
            if src[line].strip() and src[line - 1].strip():  # no blank line dropped at the cut
                return _Cut(line, after, open=True)
    return None


def _paragraph_cut(src: list[str], top: _Top) -> int:
    """The line to cut a paragraph at: its last line in the window, or an earlier one (up to
    ``PARAGRAPH_CUT_LOOKBACK`` lines back) before which no code span, link text or emphasis is
    left open (runs of backticks, ``*`` and ``_`` even, brackets matched), so that such a span
    over a line break stays whole."""
    last = top.end - 1
    counts = [0, 0, 0, 0]  # backticks, brackets open, asterisks, underscores before ``line``
    for text in src[top.start : last]:
        _add_marks(counts, text, 1)
    for line in range(last, max(top.start, last - PARAGRAPH_CUT_LOOKBACK), -1):
        if line < last:
            _add_marks(counts, src[line], -1)
        if counts[0] % 2 == 0 and counts[1] == 0 and counts[2] % 2 == 0 and counts[3] % 2 == 0:
            return line
    return last


def _add_marks(counts: list[int], text: str, sign: int) -> None:
    counts[0] += sign * len(_BACKTICKS.findall(text))
    counts[1] += sign * (text.count("[") - text.count("]"))
    counts[2] += sign * len(_ASTERISKS.findall(text))
    counts[3] += sign * len(_UNDERSCORES.findall(text))


def _reopening(top: _Top, src: list[str]) -> list[str]:
    """The lines put before the rest of a block cut open, so that the rest is read in it."""
    if top.kind == "table_open":
        return src[top.start : top.start + 2]  # the header and the delimiter row
    if top.kind == "paragraph_open":
        return [SENTINEL]
    if top.kind in ("fence", "html_block"):
        return [src[top.start]]
    return []  # a list item or an indented code line starts its block itself


def _piece(
    kind: str, tokens: list[Token], top: _Top, cut: _Cut, env: dict[str, Any], reopened: bool
) -> list[Any]:
    """What a window holds of a block read over several: rows, list lines, paragraph text or
    code; up to ``cut.line`` if the block goes on. ``tokens`` ends with the block's tokens.
    ``reopened``: the window began with the block's re-opening lines, which are left out."""
    token = tokens[top.index]
    upto = cut.line - top.start if cut.open else None  # the block's lines in this piece
    if kind == "table_open":
        _parse_inline(tokens[top.index :], env)
        rows, _ = table_rows(tokens, top.index, cut.line if cut.open else None)
        return rows[1:] if reopened else rows
    if kind in _LISTS:
        _parse_inline(tokens[top.index :], env)
        lines, _ = list_lines(tokens, top.index, cut.index if cut.open else None)
        return lines
    if kind in ("paragraph_open", "heading_open"):
        inline = tokens[top.index + 1]
        if upto is None:
            _parse_inline([inline], env)
        else:
            content = "\n".join(inline.content.split("\n")[:upto]).strip()
            inline = parser.parseInline(content, env)[0]
        text = inline_text(inline)
        if reopened:
            text = text[len(SENTINEL) :].lstrip(" ")
        return [text] if text else []
    content = token.content
    if upto is not None:
        lines = content.split("\n")
        if kind == "fence":  # the opening line is no content
            content = "".join(line + "\n" for line in lines[: upto - 1])
        elif kind == "code_block":
            content = "\n".join(lines[:upto]) + "\n"
        else:
            content = "".join(line + "\n" for line in lines[:upto])
    if reopened and kind == "html_block":
        content = content.split("\n", 1)[1] if "\n" in content else ""
    return [content]
