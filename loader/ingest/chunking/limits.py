"""The limits of a chunk: its heading prefix and token budget, and the safety nets.

The token limit applies to ``chunk.text``, the heading prefix included, so each section gets a
``Frame`` (``make_frame``): its whole heading trail (stored and shown), its embedded prefix (as
much of the trail as a ``MAX_PREFIX_SHARE``-th of the limit holds, innermost heading first:
``fit_prefix``), and how many tokens its bodies may use. ``enforce_limit`` recounts every
finished chunk and cuts any that is still over ``max_tokens``, so the limit holds whatever the
tokenizer.

Characters are limited too (``max_chars``, the ``chunk_max_chars`` setting), because token counts
can be absurdly low: WordPiece reads any word over 100 characters as one ``[UNK]``, so a 2 MB line
without spaces "fits" in three tokens. ``enforce_chars`` cuts every body longer than
``max_chars`` (at a paragraph, line, sentence or word boundary near the limit, else after
punctuation, else anywhere) and caps the stored expansions (``parent_text``, ``window``) at
``EXPANSION_CHARS_FACTOR`` times ``max_chars`` around the chunk; the heading prefix gets at most a
``MAX_PREFIX_SHARE``-th of ``max_chars``.

Example::

    frame = make_frame(doc, section, ordinal, max_tokens=256, count=count, max_chars=4000)
    chunks = [make_chunk(doc, frame, body, page=None) for body in bodies]
    chunks = enforce_limit(enforce_chars(chunks, 4000), 256, count)
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import re
from dataclasses import dataclass

from loader.documents import PATH_SEPARATOR, Chunk, Document, Section, section_id
from loader.ingest.chunking.units import TokenCounter, split_characters, split_words

log = logging.getLogger(__name__)

# Tokens kept free below the limit, for tokenizers whose counts are not additive over whitespace.
SAFETY_MARGIN = 2
# The heading prefix may use at most this share of the limits (tokens and characters); longer
# prefixes are shortened.
MAX_PREFIX_SHARE = 4
# ``parent_text`` and ``window`` are stored for context expansion, not embedded: they may be this
# many times ``max_chars`` (16,000 characters by default), cut around the chunk's own body.
EXPANSION_CHARS_FACTOR = 4
ELLIPSIS = "\u2026"


@dataclass(frozen=True)
class Frame:
    """Where the chunks of one section go: their heading trail, embedded prefix and body budget.

    ``title`` and ``heading_path`` are stored with each chunk and shown in results: the whole
    trail (only an absurd one, thousands of characters, is cut). ``prefix`` is what the chunk's
    embedded text starts with: as much of the trail as the model's budget holds
    (``fit_prefix``).
    """

    title: str
    heading_path: tuple[str, ...]
    prefix: str
    section_id: str
    prefix_tokens: int
    body_budget: int  # tokens the body may use so that prefix + body stays within the limit


# --- the prefix and budget of a section -----------------------------------------------


def clip(text: str, max_chars: int) -> str:
    """``text`` cut to at most ``max_chars`` characters, at a word boundary when there is one in
    the second half, and ending in an ellipsis when cut."""
    if len(text) <= max_chars:
        return text
    if max_chars <= 1:
        return ELLIPSIS
    return text[: best_cut(text, max_chars - 1)].rstrip() + ELLIPSIS


def _shares(lengths: list[int], room: int) -> list[int]:
    """Split ``room`` characters among parts of these lengths: short parts keep their length and
    what they leave goes to the long ones, in equal shares."""
    shares = [0] * len(lengths)
    left = room
    order = sorted(range(len(lengths)), key=lengths.__getitem__)
    for done, index in enumerate(order):
        shares[index] = min(lengths[index], left // (len(lengths) - done))
        left -= shares[index]
    return shares


def stored_trail(title: str, path: tuple[str, ...], max_chars: int) -> tuple[str, tuple[str, ...]]:
    """The title and heading path as stored with every chunk of their section: whole, unless
    together they are over ``max_chars`` characters (a 2 MB heading line, which every chunk of
    the section would repeat); then each part gets its share of the characters."""
    parts = [title, *path]
    if len(PATH_SEPARATOR.join(parts)) <= max_chars:
        return title, path
    room = max_chars - len(PATH_SEPARATOR) * (len(parts) - 1)
    parts = [
        clip(part, max(8, share))
        for part, share in zip(parts, _shares([len(p) for p in parts], room), strict=True)
    ]
    return parts[0], tuple(parts[1:])


def _cut_heading(heading: str, cap: int, char_cap: int, count: TokenCounter) -> str:
    """One heading cut to ``cap`` tokens and ``char_cap`` characters: its first words, else (one
    enormous word) its first characters, ending in an ellipsis."""
    heading = clip(heading, char_cap)
    if count(heading) <= cap:
        return heading
    words = heading.removesuffix(ELLIPSIS).split()
    low, high = 0, len(words)  # the most first words that fit with the ellipsis
    while low < high:
        middle = (low + high + 1) // 2
        if count(" ".join(words[:middle]) + ELLIPSIS) <= cap:
            low = middle
        else:
            high = middle - 1
    if low:
        return " ".join(words[:low]) + ELLIPSIS
    room = max(1, cap - count(ELLIPSIS))
    return split_characters(words[0], room, count)[0] + ELLIPSIS if words else ELLIPSIS


def fit_prefix(
    title: str, path: tuple[str, ...], cap: int, char_cap: int, count: TokenCounter
) -> str:
    """The embedded prefix of a section: its title and heading path, within ``cap`` tokens and
    ``char_cap`` characters.

    The trail is ``title > outer > ... > inner``; when it does not fit, the budget goes to the
    most specific parts first: the innermost heading, then the title (it tells the sections of
    the same name in two documents apart: every guide has its "Troubleshooting"), then the
    other headings from the inside out, as many as fit. Dropped levels become one ellipsis, so
    a kept heading never reads as the child of one it is not. Only when the innermost heading
    alone does not fit is it cut (its first words), and then it is the whole prefix.

    Args:
        title: the document's title.
        path: the section's headings, outermost first.
        cap: the most tokens the prefix may count.
        char_cap: the most characters it may have.
        count: the model's token counter.

    Returns:
        The prefix, e.g. ``"Admin guide > … > Proxy > Certificates"`` for
        ``("Admin guide", ("Setup", "Network", "Proxy", "Certificates"))`` in a small budget.
    """

    def fits(text: str) -> bool:
        return len(text) <= char_cap and count(text) <= cap  # length first: a 2 MB heading

    whole = PATH_SEPARATOR.join((title, *path))
    if fits(whole):
        return whole
    if not path:
        return _cut_heading(title, cap, char_cap, count)
    if not fits(path[-1]):
        return _cut_heading(path[-1], cap, char_cap, count)

    def trail(with_title: bool, inner: int) -> str:
        kept = path[len(path) - inner :]
        gap = [ELLIPSIS] if inner < len(path) or not with_title else []
        return PATH_SEPARATOR.join([*([title] if with_title else []), *gap, *kept])

    with_title = bool(title) and fits(trail(True, 1))
    if not with_title and not fits(trail(False, 1)):
        return path[-1]  # the innermost fits, but not with the ellipsis before it
    inner = 1
    while inner < len(path) and fits(trail(with_title, inner + 1)):
        inner += 1
    return trail(with_title, inner)


def make_frame(
    doc: Document,
    section: Section,
    ordinal: int,
    max_tokens: int,
    count: TokenCounter,
    max_chars: int,
) -> Frame:
    """The heading trail, embedded prefix and body budget of one section's chunks.

    Args:
        doc: the document.
        section: one of its sections.
        ordinal: the section's index in ``doc.sections`` (part of its ``section_id``).
        max_tokens: the hard limit for ``chunk.text``; the prefix gets at most a
            ``MAX_PREFIX_SHARE``-th of it.
        count: the token counter.
        max_chars: the hard limit for a chunk body in characters; the prefix gets at most a
            ``MAX_PREFIX_SHARE``-th of it, the stored trail at most all of it.

    Returns:
        The frame; ``body_budget`` is at least 1.
    """
    cap = max(1, max_tokens // MAX_PREFIX_SHARE)
    char_cap = max(1, max_chars // MAX_PREFIX_SHARE)
    prefix = fit_prefix(doc.title, section.heading_path, cap, char_cap, count)
    if prefix != PATH_SEPARATOR.join((doc.title, *section.heading_path)):
        log.info(
            "%s: heading path over the prefix's %d tokens; embedding %r", doc.source, cap, prefix
        )
    title, path = stored_trail(doc.title, section.heading_path, max_chars)
    prefix_tokens = count(prefix)
    return Frame(
        title=title,
        heading_path=path,
        prefix=prefix,
        section_id=section_id(doc.source, section.heading_path, ordinal),
        prefix_tokens=prefix_tokens,
        body_budget=max(1, max_tokens - prefix_tokens - SAFETY_MARGIN),
    )


def body_target(frame: Frame, target_tokens: int) -> int:
    """Tokens a body should aim for: the target includes the prefix, but a long prefix may not
    squeeze bodies below half the target."""
    return max(
        1, min(frame.body_budget, max(target_tokens - frame.prefix_tokens, target_tokens // 2))
    )


def make_chunk(doc: Document, frame: Frame, body: str, page: int | None, **extra: str) -> Chunk:
    """A chunk of ``doc`` in ``frame``; ``position`` is set when the document is done."""
    return Chunk(
        source=doc.source,
        position=0,
        title=frame.title,
        heading_path=frame.heading_path,
        body=body,
        prefix=frame.prefix,
        section_id=frame.section_id,
        page=page,
        metadata=copy.deepcopy(doc.metadata),
        **extra,
    )


# --- the limits -----------------------------------------------------------------------------

# Where a body longer than max_chars is cut, best first: each is searched for in the second half
# of the allowed length, and the piece ends right after the match.
_CUT_PATTERNS = (
    re.compile(r"\n[^\S\n]*\n\s*"),  # a blank line
    re.compile(r"\n\s*"),  # a line break
    re.compile(r"""[.!?\u2026]+["'\u2019\u201d)\]]*\s+"""),  # a sentence end
    re.compile(r"\s+"),  # a space
    re.compile(r"[^\w\s]+"),  # punctuation (base64's + and /, a URL's / and &)
)


def best_cut(text: str, max_chars: int) -> int:
    """Where to end a piece of ``text`` of at most ``max_chars`` characters.

    Returns:
        An offset in ``1..max_chars``: just after the best boundary (blank line, line break,
        sentence end, space, punctuation) in the second half of ``text[:max_chars]``, else
        ``max_chars`` itself (a hard cut, for text with no boundary at all).
    """
    if len(text) <= max_chars:
        return len(text)
    half = max_chars // 2
    for pattern in _CUT_PATTERNS:
        last = None
        # Whitespace may start right at the limit (it is stripped); punctuation must end by it.
        stop = max_chars if pattern is _CUT_PATTERNS[-1] else max_chars + 1
        for match in pattern.finditer(text, half, stop):
            last = match
        if last is not None:
            # The piece ends after any punctuation of the match, before its whitespace.
            end = last.start() + len(last.group().rstrip())
            if 0 < end <= max_chars:
                return end
    return max_chars


def split_at_chars(text: str, max_chars: int) -> list[str]:
    """Cut ``text`` into stripped pieces of at most ``max_chars`` characters (see ``best_cut``).

    Only whitespace at the cuts is lost: ``"".join(pieces)`` is ``text`` for text without any.
    """
    pieces = []
    rest = text.strip()
    while len(rest) > max_chars:
        end = best_cut(rest, max_chars)
        piece = rest[:end].rstrip()
        if piece:
            pieces.append(piece)
        rest = rest[end:].lstrip()
    if rest:
        pieces.append(rest)
    return pieces


def around(text: str, body: str, max_chars: int) -> str:
    """At most ``max_chars`` characters of ``text`` (a parent section, a sentence window) centred
    on where ``body`` occurs in it, cut at word boundaries and marked with an ellipsis where cut.
    """
    if len(text) <= max_chars:
        return text
    at = text.find(body[:64]) if body else -1
    if at < 0:
        words = body.split()
        at = max(0, text.find(words[0])) if words else 0
    room = max_chars - 2  # two ellipses at most
    start = max(0, min(at - max(0, room - len(body)) // 2, len(text) - room))
    if start > 0:  # begin at a word
        space = text.find(" ", start, start + room // 4)
        start = space + 1 if space >= 0 else start
    end = start + best_cut(text[start : start + room + 1], room)
    return (
        (ELLIPSIS if start > 0 else "")
        + text[start:end].strip()
        + (ELLIPSIS if end < len(text) else "")
    )


def enforce_chars(chunks: list[Chunk], max_chars: int) -> list[Chunk]:
    """Cut every chunk body longer than ``max_chars`` characters into consecutive pieces, and cap
    ``parent_text`` and ``window`` at ``EXPANSION_CHARS_FACTOR * max_chars`` around the body.

    Token counts cannot see a line of 2 MB without spaces (WordPiece reads it as one ``[UNK]``);
    this does. Run it before ``enforce_limit``: a piece cut inside a long word may count more
    tokens than the whole word did, and ``enforce_limit`` only ever shortens bodies.
    """
    expansion_chars = EXPANSION_CHARS_FACTOR * max_chars
    result: list[Chunk] = []
    for chunk in chunks:
        bodies = [chunk.body]
        if len(chunk.body) > max_chars:
            log.info(
                "%s: chunk of %d characters; cutting it at %d", chunk.source, len(chunk.body),
                max_chars,
            )  # fmt: skip
            bodies = split_at_chars(chunk.body, max_chars)
        for body in bodies:
            changes: dict[str, str] = {}
            if body != chunk.body:
                changes["body"] = body
            for name in ("parent_text", "window"):
                expansion = getattr(chunk, name)
                if len(expansion) > expansion_chars:
                    changes[name] = around(expansion, body, expansion_chars)
            result.append(dataclasses.replace(chunk, **changes) if changes else chunk)
    return result


def enforce_limit(chunks: list[Chunk], max_tokens: int, count: TokenCounter) -> list[Chunk]:
    """Recount every chunk's text and cut any that exceeds ``max_tokens`` (a safety net: the
    strategies budget per unit, which is exact for WordPiece but only close for others)."""
    result: list[Chunk] = []
    for chunk in chunks:
        if count(chunk.text) <= max_tokens:
            result.append(chunk)
            continue
        log.warning("%s: chunk over %d tokens after packing; cutting it", chunk.source, max_tokens)
        budget = max(1, max_tokens - count(chunk.prefix) - SAFETY_MARGIN)
        while True:
            pieces = [
                dataclasses.replace(chunk, body=piece)
                for piece in split_words(chunk.body, budget, count)
            ]
            if all(count(piece.text) <= max_tokens for piece in pieces) or budget == 1:
                break
            budget = max(1, budget - max(1, budget // 10))
        result.extend(pieces)
    return result
