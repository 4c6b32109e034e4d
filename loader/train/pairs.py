"""Training pairs mined from a corpus's own structure, with no judged question and no language
model: what `loader adapt` trains the embedding model on.

Three kinds, each a question-like text and the passage it points to, from one tenant's chunks as
the index holds them:

- ``heading``: a section's heading path and the body of the section's first chunk (the heading
  left out of the passage, or the pair teaches string matching);
- ``title``: a document's title and the body of its first chunk;
- ``cloze`` (inverse cloze): a sentence of a chunk and the chunk with that sentence removed.

Pairs never cross tenants: the chunks are grouped by tenant first, and a pair's query and
passage come from one chunk or one section. Which sentence and which pairs are kept is decided by
a seeded random generator, so the same corpus gives the same pairs.

Example::

    pairs = mine_pairs(chunks, seed=0)
    Counter(pair.kind for pair in pairs)   # Counter({'cloze': 41, 'heading': 36, 'title': 7})
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

PAIR_KINDS = ("heading", "title", "cloze")
# A sentence ends at . ! or ? followed by whitespace and an upper-case letter, digit or quote.
_SENTENCE_END = re.compile(r"(?<=[.!?])\s+(?=[\"'“(\[A-Z0-9])")
# Shorter queries say too little to point at one passage; a passage with less than this left
# after the sentence is removed says too little to be found.
MIN_QUERY_WORDS = 4
MIN_PASSAGE_WORDS = 8


@dataclass(frozen=True)
class Chunk:
    """The fields of an indexed chunk the miner reads."""

    tenant: str
    doc_id: str
    chunk_id: str
    title: str
    heading_path: str
    section_id: str
    position: int
    body: str
    content: str  # what the index embeds: the heading prefix, a blank line, the body

    @classmethod
    def from_source(cls, source: Mapping[str, Any]) -> Chunk:
        """A chunk from an index hit's ``_source`` (missing fields as empty)."""
        return cls(
            tenant=str(source.get("tenant") or ""),
            doc_id=str(source.get("doc_id") or ""),
            chunk_id=str(source.get("chunk_id") or ""),
            title=str(source.get("title") or ""),
            heading_path=str(source.get("heading_path") or ""),
            section_id=str(source.get("section_id") or ""),
            position=int(source.get("position") or 0),
            body=str(source.get("body") or ""),
            content=str(source.get("content") or source.get("body") or ""),
        )


@dataclass(frozen=True)
class Pair:
    kind: str  # one of PAIR_KINDS
    query: str
    positive: str
    tenant: str
    doc_id: str
    chunk_id: str  # the chunk the positive comes from


def sentences(text: str) -> list[str]:
    """``text`` cut into sentences (a plain rule: enough to pick one to remove)."""
    return [part.strip() for part in _SENTENCE_END.split(" ".join(text.split())) if part.strip()]


def _words(text: str) -> int:
    return len(text.split())


def mine_pairs(chunks: Iterable[Chunk], seed: int = 0) -> list[Pair]:
    """Every pair the chunks give, per tenant, in a stable order."""
    by_tenant: dict[str, list[Chunk]] = {}
    for chunk in chunks:
        by_tenant.setdefault(chunk.tenant, []).append(chunk)
    pairs: list[Pair] = []
    for tenant in sorted(by_tenant):
        ordered = sorted(by_tenant[tenant], key=lambda c: (c.doc_id, c.position, c.chunk_id))
        pairs.extend(_tenant_pairs(ordered, random.Random(f"{seed}:{tenant}")))
    return pairs


def _tenant_pairs(chunks: list[Chunk], rng: random.Random) -> list[Pair]:
    pairs: list[Pair] = []
    first_of_section: dict[tuple[str, str], Chunk] = {}
    first_of_document: dict[str, Chunk] = {}
    for chunk in chunks:
        first_of_section.setdefault((chunk.doc_id, chunk.section_id), chunk)
        first_of_document.setdefault(chunk.doc_id, chunk)
    for chunk in first_of_section.values():
        heading = chunk.heading_path.strip()
        if heading and heading != chunk.title.strip() and _words(chunk.body) >= MIN_PASSAGE_WORDS:
            pairs.append(_pair("heading", heading, chunk.body, chunk))
    for chunk in first_of_document.values():
        title = chunk.title.strip()
        if title and _words(chunk.body) >= MIN_PASSAGE_WORDS:
            pairs.append(_pair("title", title, chunk.body, chunk))
    for chunk in chunks:
        cloze = _cloze(chunk, rng)
        if cloze is not None:
            pairs.append(cloze)
    return pairs


def _cloze(chunk: Chunk, rng: random.Random) -> Pair | None:
    """A sentence of the chunk's body and the chunk (heading prefix kept) without it."""
    parts = sentences(chunk.body)
    candidates = [i for i, part in enumerate(parts) if _words(part) >= MIN_QUERY_WORDS]
    if len(parts) < 2 or not candidates:
        return None
    chosen = rng.choice(candidates)
    rest = " ".join(part for i, part in enumerate(parts) if i != chosen)
    if _words(rest) < MIN_PASSAGE_WORDS:
        return None
    prefix, separator, _ = chunk.content.partition("\n\n")
    passage = f"{prefix}\n\n{rest}" if separator and chunk.content != chunk.body else rest
    return _pair("cloze", parts[chosen], passage, chunk)


def _pair(kind: str, query: str, positive: str, chunk: Chunk) -> Pair:
    return Pair(kind, query, positive, chunk.tenant, chunk.doc_id, chunk.chunk_id)


def split_by_document(
    pairs: list[Pair], held_out_share: float, seed: int = 0
) -> tuple[list[Pair], list[Pair]]:
    """Pairs to train on and pairs held aside, whole documents to one side (a document's pairs
    share text, so splitting within one would measure what was learnt)."""
    documents = sorted({(pair.tenant, pair.doc_id) for pair in pairs})
    random.Random(seed).shuffle(documents)
    held = set(documents[: round(len(documents) * held_out_share)])
    train = [pair for pair in pairs if (pair.tenant, pair.doc_id) not in held]
    return train, [pair for pair in pairs if (pair.tenant, pair.doc_id) in held]
