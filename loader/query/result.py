"""What a search returns: ``SearchHit`` (a chunk with its metadata and every stage's score and
rank), ``SearchResult`` (the hits, the queries and per-stage timings), and ``format_result``, the
plain-text form ``loader search`` prints.

Example::

    result = search(request, settings)
    result.to_dict()              # JSON-ready, as ``loader search --json`` and ``loader serve``
    format_result(result)         # lines, as ``loader search``
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from loader.documents import PATH_SEPARATOR
from loader.query.context import Hit
from loader.query.request import MAX_QUESTION_CHARS

TIMINGS = ("rewrite_ms", "embed_ms", "retrieve_ms", "rerank_ms", "context_ms", "total_ms")
# Why a search ran no reranker (``SearchResult.rerank_skipped``).
RERANK_OFF, RERANK_UNAVAILABLE, NOTHING_TO_RERANK = "off", "unavailable", "nothing to rerank"
SNIPPET_CHARS = 300
_WHITESPACE = re.compile(r"\s+")


@dataclass
class SearchHit(Hit):
    """One result: a ``loader.query.context.Hit`` plus the chunk's metadata.

    ``scores`` / ``ranks`` hold each stage's score and 1-based rank: ``retrieval`` (OpenSearch's
    score, or the client-side RRF score when several queries were fused), ``query_<n>`` (per
    rewritten query, when there were several) and ``rerank`` (the reranker's score).
    """

    collection: str = ""
    tenant: str = ""
    lang: str = ""
    tags: tuple[str, ...] = ()
    published: str = ""
    page: int | None = None

    @classmethod
    def from_document(cls, document: dict[str, Any]) -> SearchHit:
        """The hit of one document of an OpenSearch answer (its ``_id`` and ``_source``)."""
        source = document.get("_source") or {}
        heading_path = source.get("heading_path") or ""
        tags = source.get("tags") or []
        return cls(
            chunk_id=str(source.get("chunk_id") or document.get("_id", "")),
            doc_id=str(source.get("doc_id", "")),
            body=str(source.get("body") or source.get("content") or ""),
            source=str(source.get("source", "")),
            title=str(source.get("title", "")),
            heading_path=tuple(part for part in heading_path.split(PATH_SEPARATOR) if part),
            text=str(source.get("content") or source.get("body") or ""),
            position=int(source.get("position") or 0),
            section_id=str(source.get("section_id", "")),
            parent_text=str(source.get("parent_text", "")),
            window=str(source.get("window", "")),
            collection=str(source.get("collection", "")),
            tenant=str(source.get("tenant", "")),
            lang=str(source.get("lang", "")),
            tags=tuple(str(tag) for tag in (tags if isinstance(tags, list) else [tags])),
            published=str(source.get("published", "")),
            page=source.get("page"),
        )

    @property
    def final_score(self) -> float:
        """The score the hit was ranked by: the reranker's when reranked, else retrieval's."""
        return float(self.scores.get("rerank", self.scores.get("retrieval", 0.0)))

    @property
    def heading(self) -> str:
        """``title > heading > subheading``, for display."""
        return PATH_SEPARATOR.join(part for part in (self.title, *self.heading_path) if part)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["heading_path"] = list(self.heading_path)
        data["tags"] = list(self.tags)
        return data


def hits_from_response(response: dict[str, Any]) -> list[SearchHit]:
    """The hits of an OpenSearch search answer, in order, each with its retrieval score and
    rank."""
    hits = []
    for rank, document in enumerate(response.get("hits", {}).get("hits", []), start=1):
        hit = SearchHit.from_document(document)
        hit.scores["retrieval"] = float(document.get("_score") or 0.0)
        hit.ranks["retrieval"] = rank
        hits.append(hit)
    return hits


@dataclass
class SearchResult:
    """What ``search`` found, and how.

    Attributes:
        question: the question as searched (after truncation).
        queries: the queries retrieved for (the rewriter's output, or just the question).
        rerank_query: the text the candidates were reranked against ("" without rerank).
        mode: the search mode.
        tenant: the tenant searched.
        reranked: whether the reranker (cross-encoder, keyword or learned) reordered them.
        candidates: how many distinct candidates retrieval returned.
        rerank_depth: how many of them the reranker reordered (0 without rerank; a learned
            model reranks the depth it learnt at, the rest follow in retrieval order).
        hits: the results, best first (or in prompt order with ``prompt_order``).
        timings: milliseconds per stage: rewrite_ms, embed_ms, retrieve_ms, rerank_ms,
            context_ms, total_ms.
        truncated: the question was longer than ``MAX_QUESTION_CHARS`` and was cut.
        hypothetical: HyDE: the made-up answer whose embedding the vector side searched.
        warnings: what went wrong without failing the search (a query rewriter that failed or
            timed out: the message was searched as it is).
        reranker: the reranker that ran, ``{"kind": "cross-encoder" | "keyword" | "learned",
            "model": <its name or folder, as configured>}``, or ``None`` when none did.
        rerank_skipped: why none ran (``""`` when one did): ``RERANK_OFF`` (not asked for),
            ``RERANK_UNAVAILABLE`` (``rerank = auto`` and no reranker here), or
            ``NOTHING_TO_RERANK`` (no candidate came back).
    """

    question: str
    queries: list[str]
    rerank_query: str
    mode: str
    tenant: str
    reranked: bool
    candidates: int
    rerank_depth: int = 0
    hits: list[SearchHit] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    truncated: bool = False
    hypothetical: str = ""
    warnings: list[str] = field(default_factory=list)
    reranker: dict[str, str] | None = None
    rerank_skipped: str = ""
    query_id: str = ""  # the query log's id of this search (query_log = "ubi"), for its events

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "hits"}
        data["hits"] = [hit.to_dict() for hit in self.hits]
        return data


def _hit_lines(number: int, hit: SearchHit, snippet_chars: int) -> list[str]:
    stages = [f"chunk {hit.chunk_id}"]
    for stage, rank in hit.ranks.items():
        stages.append(f"{stage} #{rank} {hit.scores.get(stage, 0.0):.4f}")
    text = _WHITESPACE.sub(" ", hit.body).strip()
    if len(text) > snippet_chars:
        text = text[:snippet_chars].rstrip() + "…"
    return [f"{number}. {hit.heading}  ({hit.source})", "   " + " | ".join(stages), f"   {text}"]


def reranker_words(reranker: Mapping[str, str]) -> str:
    """The reranker that ran (``SearchResult.reranker``) in words: ``learned models/acme``,
    ``cross-encoder cross-encoder/ms-marco-MiniLM-L-6-v2``, ``keyword``."""
    kind, model = reranker.get("kind", ""), reranker.get("model", "")
    return kind if model in ("", kind) else f"{kind} {model}"


def _summary_line(result: SearchResult) -> str:
    timings = result.timings
    count = len(result.hits)
    reranked = "no rerank"
    if result.reranked:
        partly = 0 < result.rerank_depth < result.candidates
        reranked = f"reranked the top {result.rerank_depth}" if partly else "reranked"
        reranked += f" by {reranker_words(result.reranker)}" if result.reranker else ""
    return (
        f"{count} result{'' if count == 1 else 's'} of {result.candidates} "
        f"candidate{'' if result.candidates == 1 else 's'} for tenant "
        f"{result.tenant!r} ({result.mode}, {reranked}) in "
        f"{timings['total_ms']:.1f} ms: embed {timings['embed_ms']:.1f} ms, retrieve "
        f"{timings['retrieve_ms']:.1f} ms, rerank {timings['rerank_ms']:.1f} ms"
    )


def format_result(
    result: SearchResult, snippet_chars: int = SNIPPET_CHARS, warnings: bool = True
) -> list[str]:
    """Plain-text lines for a result, as ``loader search`` prints them (``warnings``: with
    ``! <warning>`` lines first; ``loader search`` prints those on stderr).

    Per hit: rank, ``title > heading path`` and source; the chunk id and every stage's rank and
    score; the text, whitespace collapsed and cut at ``snippet_chars``. Then one summary line.

    Example::

        1. Printer manual > Error codes  (printer.md)
           chunk 4090d2d8bd4a34f674d6-0 | retrieval #1 1.9237 | rerank #1 0.5131
           Error E1043 means the paper tray is empty. Refill the tray and press resume.

        1 result of 3 candidates for tenant 'A' (bm25, reranked by keyword) in 41.2 ms: ...
    """
    lines = [f"! {warning}" for warning in result.warnings] if warnings else []
    if result.truncated:
        lines.append(
            f"! the question was cut to {len(result.question)} characters "
            f"(limit {MAX_QUESTION_CHARS})"
        )
    if len(result.queries) > 1 or result.queries != [result.question]:
        lines.append("queries: " + " | ".join(result.queries))
    if result.hypothetical:
        lines.append(f"hypothetical answer (vector side): {result.hypothetical}")
    for number, hit in enumerate(result.hits, start=1):
        lines.extend(_hit_lines(number, hit, snippet_chars))
    lines.append(_summary_line(result))
    return lines
