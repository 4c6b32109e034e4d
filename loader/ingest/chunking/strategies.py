"""The chunking strategies: each turns one document into chunks within the token limit.

All take ``(doc, config, count)`` (``semantic`` also ``embed``) and return chunks in document
order with ``position`` left at 0; ``chunk_document`` numbers them and recounts the limit.
"""

from __future__ import annotations

import bisect
import dataclasses
import re
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING

import numpy as np

from loader.documents import Chunk, Document
from loader.errors import ConfigError
from loader.ingest.chunking.limits import body_target, make_chunk, make_frame
from loader.ingest.chunking.sentences import split_sentences
from loader.ingest.chunking.units import (
    TokenCounter,
    Unit,
    first_page,
    pack,
    render,
    section_units,
    split_characters,
)

if TYPE_CHECKING:
    from loader.ingest.chunking import ChunkingConfig

Embed = Callable[[list[str]], np.ndarray]


def structure(doc: Document, config: ChunkingConfig, count: TokenCounter) -> list[Chunk]:
    """Per section, pack whole blocks up to the target, splitting only blocks that do not fit.

    Oversized prose splits into paragraphs, then sentences, then (for one sentence longer than
    the budget) words; code splits on lines and tables between rows, repeating the header.
    Consecutive chunks of a section share up to ``overlap_tokens`` of whole sentences.
    """
    chunks = []
    for ordinal, section in enumerate(doc.sections):
        frame = make_frame(doc, section, ordinal, config.max_tokens, count, config.max_chars)
        target = body_target(frame, config.target_tokens)
        units = section_units(section, target, frame.body_budget, count)
        for group in pack(units, target, frame.body_budget, config.overlap_tokens, count):
            chunks.append(make_chunk(doc, frame, render(group), first_page(group)))
    return chunks


def parent_document(doc: Document, config: ChunkingConfig, count: TokenCounter) -> list[Chunk]:
    """Small structure chunks (half the target, no overlap), each carrying its whole section."""
    small = dataclasses.replace(config, target_tokens=max(1, config.target_tokens // 2))
    chunks = []
    for ordinal, section in enumerate(doc.sections):
        frame = make_frame(doc, section, ordinal, config.max_tokens, count, config.max_chars)
        target = min(frame.body_budget, max(1, small.target_tokens - frame.prefix_tokens))
        units = section_units(section, target, frame.body_budget, count)
        for group in pack(units, target, frame.body_budget, 0, count):
            chunks.append(
                make_chunk(doc, frame, render(group), first_page(group), parent_text=section.text)
            )
    return chunks


def sentence_window(doc: Document, config: ChunkingConfig, count: TokenCounter) -> list[Chunk]:
    """One sentence per chunk; ``window`` holds it with ``sentence_window`` sentences each side.

    Code blocks and tables count as one "sentence" each (split on lines if over the budget).
    """
    chunks = []
    for ordinal, section in enumerate(doc.sections):
        frame = make_frame(doc, section, ordinal, config.max_tokens, count, config.max_chars)
        units = section_units(section, 0, frame.body_budget, count)
        for index, unit in enumerate(units):
            start = max(0, index - config.sentence_window)
            window = render(units[start : index + config.sentence_window + 1])
            chunks.append(make_chunk(doc, frame, unit.text, unit.page, window=window))
    return chunks


def semantic(
    doc: Document, config: ChunkingConfig, count: TokenCounter, embed: Embed | None
) -> list[Chunk]:
    """Split each section where consecutive sentences stop being similar.

    A new chunk starts where the cosine similarity of two consecutive sentences drops below
    ``semantic_threshold`` — unless the current chunk is still under ``semantic_min_tokens`` —
    and wherever the next sentence would not fit the budget.
    """
    if embed is None:
        raise ConfigError("semantic chunking needs the embedding model")
    sections = []
    for ordinal, section in enumerate(doc.sections):
        frame = make_frame(doc, section, ordinal, config.max_tokens, count, config.max_chars)
        sections.append((frame, section_units(section, 0, frame.body_budget, count)))
    texts = [unit.text for _, units in sections for unit in units]
    if not texts:
        return []
    vectors = np.asarray(embed(texts), dtype=np.float32)
    norms = np.linalg.norm(vectors, axis=1, keepdims=True)
    vectors = vectors / np.where(norms == 0, 1.0, norms)  # cosine even if embed did not normalize

    chunks = []
    offset = 0
    for frame, units in sections:
        own = vectors[offset : offset + len(units)]
        offset += len(units)
        similarities = np.sum(own[1:] * own[:-1], axis=1) if len(units) > 1 else []
        current: list[Unit] = []
        used = 0
        for index, unit in enumerate(units):
            if current:
                topic_changes = similarities[index - 1] < config.semantic_threshold
                too_big = used + unit.tokens > frame.body_budget
                if too_big or (topic_changes and used >= config.semantic_min_tokens):
                    chunks.append(make_chunk(doc, frame, render(current), first_page(current)))
                    current, used = [], 0
            current.append(unit)
            used += unit.tokens
        if current:
            chunks.append(make_chunk(doc, frame, render(current), first_page(current)))
    return chunks


# --- text-level strategies --------------------------------------------------------------------

_WORD_WITH_SPACE = re.compile(r"\S+\s*")
_EVERY_WORD = re.compile(r"\s*\S+\s*|\s+")  # like _WORD_WITH_SPACE, but loses nothing


def fixed(doc: Document, config: ChunkingConfig, count: TokenCounter) -> list[Chunk]:
    """Fixed token windows over the whole document's text, ``overlap_tokens`` apart.

    Words are the unit (a word's tokens never straddle two chunks); structure is ignored except
    that each chunk is prefixed with the heading path of the section it starts in.
    """
    frames = []
    starts = []  # character offset where each section starts in the joined text
    texts = []
    offset = 0
    for ordinal, section in enumerate(doc.sections):
        frames.append(make_frame(doc, section, ordinal, config.max_tokens, count, config.max_chars))
        starts.append(offset)
        texts.append(section.text)
        offset += len(section.text) + 2
    words = list(_WORD_WITH_SPACE.finditer("\n\n".join(texts)))
    tokens = [count(word.group().strip()) for word in words]
    pages = _word_pages(doc, words, starts)

    chunks = []
    start = 0
    while start < len(words):
        frame = frames[bisect.bisect_right(starts, words[start].start()) - 1]
        target = body_target(frame, config.target_tokens)
        end, used = start, 0
        while end < len(words) and used + tokens[end] <= target:
            used += tokens[end]
            end += 1
        if end == start:  # one "word" longer than the budget: cut it by characters
            for piece in split_characters(words[start].group().strip(), frame.body_budget, count):
                chunks.append(make_chunk(doc, frame, piece, pages[start]))
            start += 1
            continue
        body = "".join(word.group() for word in words[start:end]).strip()
        chunks.append(make_chunk(doc, frame, body, pages[start]))
        if end >= len(words):
            break
        next_start, shared = end, 0
        while next_start > start + 1 and shared + tokens[next_start - 1] <= config.overlap_tokens:
            shared += tokens[next_start - 1]
            next_start -= 1
        start = next_start
    return chunks


def _word_pages(doc: Document, words: list[re.Match[str]], starts: list[int]) -> list[int | None]:
    """The page of every word (for PDFs), from the block it falls in."""
    block_starts: list[int] = []
    block_pages: list[int | None] = []
    for section, section_start in zip(doc.sections, starts, strict=True):
        offset = section_start
        for block in section.blocks:
            block_starts.append(offset)
            block_pages.append(block.page)
            offset += len(block.text) + 2
    if not block_starts:
        return [None] * len(words)
    return [block_pages[max(0, bisect.bisect_right(block_starts, w.start()) - 1)] for w in words]


SENTENCE = "<sentence>"
RECURSIVE_SEPARATORS = ("\n\n", "\n", SENTENCE, " ")


def _split_keeping(text: str, separator: str) -> list[str]:
    """Split text after each separator, keeping it, so the pieces join back to ``text``."""
    if separator == SENTENCE:
        return split_sentences(text)
    if separator == " ":
        return _EVERY_WORD.findall(text)
    return [piece for piece in re.split(f"(?<={re.escape(separator)})", text) if piece]


def _split_recursive(text: str, level: int, target: int, count: TokenCounter) -> list[str]:
    if count(text) <= target:
        return [text]
    if level == len(RECURSIVE_SEPARATORS):
        return split_characters(text, target, count)
    pieces = _split_keeping(text, RECURSIVE_SEPARATORS[level])
    if len(pieces) == 1:
        return _split_recursive(text, level + 1, target, count)
    result = []
    for piece in pieces:
        result.extend(_split_recursive(piece, level + 1, target, count))
    return result


def recursive(doc: Document, config: ChunkingConfig, count: TokenCounter) -> list[Chunk]:
    """LangChain's recursive splitter measured in tokens, per section.

    Text splits on blank lines, then lines, then sentences, then spaces (then characters) until
    every piece fits the target; pieces are merged back up to the target, and each chunk starts
    with trailing pieces of the previous one worth up to ``overlap_tokens``.
    """
    chunks = []
    for ordinal, section in enumerate(doc.sections):
        frame = make_frame(doc, section, ordinal, config.max_tokens, count, config.max_chars)
        target = body_target(frame, config.target_tokens)
        page_at = _section_pages(section)
        for body, offset in _merge_pieces(section.text, target, config.overlap_tokens, count):
            chunks.append(make_chunk(doc, frame, body, page_at(offset)))
    return chunks


def _merge_pieces(
    text: str, target: int, overlap: int, count: TokenCounter
) -> list[tuple[str, int]]:
    """Split ``text`` recursively and merge the pieces into ``(body, offset)`` chunks."""
    merged: list[tuple[str, int]] = []
    window: deque[tuple[str, int, int]] = deque()  # (piece, tokens, offset in text)
    used = 0
    offset = 0
    fresh = False  # whether the window holds a piece not yet emitted

    def emit() -> None:
        body = "".join(piece for piece, _, _ in window).strip()
        if body:
            merged.append((body, window[0][2]))

    for piece in _split_recursive(text, 0, target, count):
        tokens = count(piece.strip())
        if fresh and used + tokens > target:
            emit()
            while window and (used > overlap or used + tokens > target):
                used -= window.popleft()[1]
        window.append((piece, tokens, offset))
        offset += len(piece)
        used += tokens
        fresh = True
    if fresh:
        emit()
    return merged


def _section_pages(section) -> Callable[[int], int | None]:
    """Map a character offset in ``section.text`` to the page of the block it falls in."""
    starts, pages, offset = [], [], 0
    for block in section.blocks:
        starts.append(offset)
        pages.append(block.page)
        offset += len(block.text) + 2
    return lambda at: pages[max(0, bisect.bisect_right(starts, at) - 1)] if pages else None
