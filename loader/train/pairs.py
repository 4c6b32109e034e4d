"""Training pairs mined from a corpus's own structure, with no judged question and no language
model: what `loader adapt` trains the embedding model on.

Three kinds, each a question-like text and the passage it points to, from one tenant's chunks as
the index holds them:

- ``heading``: a section's heading path and the body of the section's first chunk (the heading
  left out of the passage, or the pair teaches string matching);
- ``title``: a document's title and the body of its first chunk;
- ``cloze`` (inverse cloze): a sentence of a chunk and the chunk with that sentence removed.

A heading or title pair whose passage begins with its query (short abstracts that open with their
title) is not mined: any model finds it by its first words, so it teaches string matching and
makes the guard's measure easy. One kind can still outnumber the others (a collection of short
documents gives a title pair per document and few headings): ``balance_kinds`` cuts the largest
kind to the others' number for training, and ``dominant_kind`` names a kind over 80 % of the
pairs, which the command warns about.

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
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

PAIR_KINDS = ("heading", "title", "cloze")
# Training pairs: the largest kind at most this share of them (balance_kinds); a kind over
# DOMINANT_SHARE of the mined pairs is warned about (dominant_kind).
MAX_KIND_SHARE = 0.5
DOMINANT_SHARE = 0.8
_WORD = re.compile(r"\w+")
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
    source: str = ""  # the document's file as pushed: what a judged question names

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
            source=str(source.get("source") or ""),
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
        if heading and heading != chunk.title.strip() and _points_at(heading, chunk.body):
            pairs.append(_pair("heading", heading, chunk.body, chunk))
    for chunk in first_of_document.values():
        title = chunk.title.strip()
        if title and _points_at(title, chunk.body):
            pairs.append(_pair("title", title, chunk.body, chunk))
    for chunk in chunks:
        cloze = _cloze(chunk, rng)
        if cloze is not None:
            pairs.append(cloze)
    return pairs


def _points_at(query: str, body: str) -> bool:
    """Whether a heading or title makes a pair with ``body``: the body long enough to be found,
    and not opening with the query's own words (``starts_with``)."""
    return _words(body) >= MIN_PASSAGE_WORDS and not starts_with(body, query)


def starts_with(passage: str, query: str) -> bool:
    """Whether ``passage`` opens with ``query``'s words (case, punctuation and spacing aside).

    >>> starts_with("Sourdough baking: wild yeast ferments the dough.", "Sourdough Baking")
    True
    >>> starts_with("Wild yeast ferments sourdough.", "Sourdough baking")
    False
    """
    query_words = _WORD.findall(query.casefold())
    return (
        bool(query_words) and _WORD.findall(passage.casefold())[: len(query_words)] == query_words
    )


def balance_kinds(
    pairs: list[Pair], seed: int = 0, max_share: float = MAX_KIND_SHARE
) -> list[Pair]:
    """``pairs`` with the largest kind cut (a seeded sample, order kept) to ``max_share`` of
    the whole, so that no one kind teaches the model most of what it learns. A single kind is
    left as it is: there is nothing to balance it with.

    >>> pairs = [Pair("title", f"t{i}", "p", "a", f"d{i}", "c") for i in range(9)]
    >>> pairs.append(Pair("cloze", "q", "p", "a", "d", "c"))
    >>> sorted(p.kind for p in balance_kinds(pairs))
    ['cloze', 'title']
    """
    counts = Counter(pair.kind for pair in pairs)
    if len(counts) < 2:
        return pairs
    largest, count = counts.most_common(1)[0]
    rest = len(pairs) - count
    cap = int(rest * max_share / (1 - max_share))
    if count <= cap:
        return pairs
    of_kind = [i for i, pair in enumerate(pairs) if pair.kind == largest]
    kept = set(random.Random(seed).sample(of_kind, cap))
    return [pair for i, pair in enumerate(pairs) if pair.kind != largest or i in kept]


def dominant_kind(by_kind: Mapping[str, int], share: float = DOMINANT_SHARE) -> str | None:
    """The kind that is over ``share`` of the pairs, if one is: a warning that the pairs
    teach, and the guard measures, mostly one thing.

    >>> dominant_kind({"heading": 10, "title": 1398, "cloze": 128}), dominant_kind({"title": 5})
    ('title', 'title')
    >>> dominant_kind({"heading": 40, "title": 30, "cloze": 30}) is None
    True
    """
    total = sum(by_kind.values())
    return next((kind for kind, n in by_kind.items() if total and n > share * total), None)


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
