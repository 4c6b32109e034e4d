"""Context assembly after the rerank: pure functions over ranked hits, best first.

Typical order::

    hits = expand_parents(hits)            # or expand_windows(hits), per the chunk strategy
    hits = merge_adjacent(hits)            # neighbouring chunks of one document become one
    hits = drop_overlapping_duplicates(hits)
    prompt_hits = order_for_prompt(hits)   # best at the start and at the end

or all of it, then the top ``k``, in one call: ``assemble(hits, k, expand="parent", merge=True)``.

Every function returns new ``Hit`` objects and leaves its input unchanged.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

log = logging.getLogger(__name__)

_WHITESPACE = re.compile(r"\s+")
T = TypeVar("T")
H = TypeVar("H", bound="Hit")
_SENTENCE_END = set(".!?;:)]\"'’”")


@dataclass
class Hit:
    """One retrieved chunk with what context assembly needs.

    ``body`` is the chunk's own text; ``text`` is what was indexed (title and heading path, then
    the body). ``parent_text`` and ``window`` are the expansions stored with the chunk.
    """

    chunk_id: str
    doc_id: str
    body: str
    source: str = ""
    title: str = ""
    heading_path: tuple[str, ...] = ()
    text: str = ""
    position: int = 0  # 0-based order of the chunk within its document
    section_id: str = ""
    parent_text: str = ""
    window: str = ""
    scores: dict[str, float] = field(default_factory=dict)  # e.g. {"rrf": .03, "rerank": .9}
    ranks: dict[str, int] = field(default_factory=dict)  # e.g. {"bm25": 1, "vector": 4}


def _with_body(hit: Hit, body: str, **changes: Any) -> Hit:
    """A copy of ``hit`` with a new body; ``text`` keeps its prefix if it ended with the body."""
    text = hit.text
    if hit.body and text.endswith(hit.body):
        text = text[: len(text) - len(hit.body)] + body
    elif not text or text == hit.body:
        text = body
    fields = {"scores": dict(hit.scores), "ranks": dict(hit.ranks)} | changes
    return dataclasses.replace(hit, body=body, text=text, **fields)


def expand_parents(hits: Sequence[Hit]) -> list[Hit]:
    """Replace each body by its parent section's text, keeping one hit per section.

    The first (best) hit of a section stands for it; later hits of the same section are dropped.
    Hits without a parent text are kept as they are.
    """
    seen_sections: set[tuple[str, str]] = set()
    expanded = []
    for hit in hits:
        if hit.section_id:
            key = (hit.doc_id, hit.section_id)
            if key in seen_sections:
                continue
            seen_sections.add(key)
        expanded.append(_with_body(hit, hit.parent_text or hit.body))
    return expanded


def expand_windows(hits: Sequence[Hit]) -> list[Hit]:
    """Replace each body by its sentence window (the sentences around it), where it has one."""
    return [_with_body(hit, hit.window or hit.body) for hit in hits]


def _borders(text: str) -> list[int]:
    """KMP prefix function: ``result[i]`` is the longest proper border of ``text[: i + 1]``."""
    result = [0] * len(text)
    length = 0
    for i in range(1, len(text)):
        while length and text[i] != text[length]:
            length = result[length - 1]
        if text[i] == text[length]:
            length += 1
        result[i] = length
    return result


def overlap_length(first: str, second: str) -> int:
    """Length of the longest suffix of ``first`` that is a prefix of ``second``, on word bounds.

    Chunks of one section overlap by whole sentences, so an overlap must start at a word start in
    ``first`` and end at a sentence end (or a line end) in ``second``; a chance match of a word
    or a few letters is no overlap.

    Example::

        overlap_length("A b. C d.", "C d. E f.")   # 4 ("C d.")
    """
    if not first or not second:
        return 0
    limit = min(len(first), len(second))
    # Borders of second + separator + the tail of first are the suffix/prefix matches.
    borders = _borders(second[:limit] + "\x00" + first[len(first) - limit :])
    length = borders[-1]
    while length:
        starts_word = length == len(first) or first[-length - 1].isspace()
        ends_sentence = (
            length == len(second)
            or second[length] == "\n"
            or (second[length].isspace() and second[length - 1] in _SENTENCE_END)
        )
        if starts_word and ends_sentence and second[:length].strip():
            return length
        length = borders[length - 1]
    return 0


def _join(first: str, second: str) -> str:
    first, second = first.rstrip(), second.lstrip()
    overlap = overlap_length(first, second)
    if overlap:
        return first + second[overlap:]
    return f"{first}\n\n{second}"


def merge_adjacent(hits: Sequence[Hit]) -> list[Hit]:
    """Merge hits of one document whose positions are consecutive into one hit.

    The merged hit takes the place and the scores of its best member, the heading path and
    position of its first chunk, and the chunks' bodies in document order with the text they
    share (the overlap between consecutive chunks) kept once.

    Example: hits at positions 4, 9, 5 of one document give [4+5 merged, 9].
    """
    runs: dict[int, list[int]] = {}  # index of the run's best hit -> indices of its members
    run_of: dict[int, int] = {}
    by_document: dict[str, list[int]] = {}
    for index, hit in enumerate(hits):
        by_document.setdefault(hit.doc_id, []).append(index)
    for indices in by_document.values():
        ordered = sorted(indices, key=lambda i: hits[i].position)
        current: list[int] = []
        for index in ordered:
            if current and hits[index].position == hits[current[-1]].position:
                continue  # the same chunk twice: keep the first (sorted() is stable)
            if current and hits[index].position != hits[current[-1]].position + 1:
                _close_run(current, runs, run_of)
                current = []
            current.append(index)
        _close_run(current, runs, run_of)

    merged = []
    for index in range(len(hits)):
        if run_of.get(index) != index:
            continue  # not the best member of its run (or a dropped duplicate)
        members = runs[index]
        best = hits[index]
        if len(members) == 1:
            merged.append(_with_body(best, best.body))
            continue
        first = hits[members[0]]
        body = first.body
        for member in members[1:]:
            body = _join(body, hits[member].body)
        merged.append(
            _with_body(
                first,
                body,
                chunk_id=best.chunk_id,
                scores=dict(best.scores),
                ranks=dict(best.ranks),
            )
        )
        log.debug("merged chunks %s of %s", [hits[m].position for m in members], best.doc_id)
    return merged


def _close_run(members: list[int], runs: dict[int, list[int]], run_of: dict[int, int]) -> None:
    if not members:
        return
    best = min(members)  # hits are ranked: the lowest index is the best
    runs[best] = list(members)
    for member in members:
        run_of[member] = best


def _normalized(text: str) -> str:
    return _WHITESPACE.sub(" ", text).strip()


def drop_overlapping_duplicates(hits: Sequence[Hit]) -> list[Hit]:
    """Drop hits whose text another kept hit already contains.

    A hit whose body is contained in a better hit's body (after whitespace normalisation) is
    dropped. If a worse hit's body contains a better one's, the better hit keeps its rank and
    takes the larger body, and the worse one is dropped, so the text appears once.
    """
    kept: list[Hit] = []
    kept_texts: list[str] = []
    for hit in hits:
        text = _normalized(hit.body)
        if any(text in existing for existing in kept_texts):
            continue
        containing = [i for i, existing in enumerate(kept_texts) if existing in text]
        if containing:
            first = containing[0]
            kept[first] = _with_body(kept[first], hit.body)
            kept_texts[first] = text
            for i in reversed(containing[1:]):
                del kept[i], kept_texts[i]
            continue
        kept.append(_with_body(hit, hit.body))
        kept_texts.append(text)
    return kept


def order_for_prompt(hits: Sequence[T]) -> list[T]:
    """Put the best hits at the start and the end of the prompt, the weakest in the middle.

    Models use the beginning and the end of a long context best ("lost in the middle"), so
    ranks 1..n go to positions 1, 3, 5, ..., 6, 4, 2.

    Example::

        order_for_prompt([1, 2, 3, 4, 5])   # [1, 3, 5, 4, 2]
    """
    items = list(hits)
    return items[0::2] + items[1::2][::-1]


def assemble(
    hits: Sequence[H],
    k: int,
    *,
    expand: str | None = None,
    merge: bool = False,
    prompt_order: bool = False,
) -> list[H]:
    """The typical order in one call: expand (``"parent"`` or ``"window"``), merge adjacent
    chunks, drop duplicates (whenever it expanded or merged), keep the top ``k``, and optionally
    put them in prompt order.

    The steps run on the whole ranked list before the top ``k`` are taken, so up to ``k``
    distinct pieces of context come back.

    Example::

        assemble(reranked, 5, expand="parent", prompt_order=True)
    """
    result: list[Any] = list(hits)
    if expand == "parent":
        result = expand_parents(result)
    elif expand == "window":
        result = expand_windows(result)
    if merge:
        result = merge_adjacent(result)
    if expand or merge:
        result = drop_overlapping_duplicates(result)
    result = result[:k]
    return order_for_prompt(result) if prompt_order else result
