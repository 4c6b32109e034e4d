"""The rerankers: one ``Reranker`` protocol, three kinds behind it, and the one loader.

- ``cross_encoder``: a cross-encoder scoring (question, passage) pairs (torch or ONNX);
- ``keyword``: no model, the retrieval score blended with the question's words the chunk holds;
- ``learned``: a LambdaMART model (LightGBM) over features of each fused candidate
  (``features``), trained by ``loader learn`` (``loader.train.learn``);
- ``check``: which of them a search uses (``choose_reranker``; ``rerank = auto``), decided from
  the files alone, before any of them is imported.

Every reranker takes the question and the candidate hits, so each reads what it needs (the
passages' text, the retrieval scores, or the fused ranks and sub-query scores), and may ask the
index for one more request first (``lookup``: the learned one's per-sub-query scores of the
candidates). The search's rerank stage (``loader.query.search``) calls ``lookup``, sends what it
returns as one ``_msearch``, then ``score``; a new reranker is one class with these two methods.

This module imports nothing heavy: ``loader.query.request`` reads ``check`` before the cluster
has answered, and no model module may be imported by then.

Example::

    reranker = load_reranker(settings)
    found = reranker.lookup(query, hits)          # None, or the _msearch lines to send
    scores = reranker.score(query, hits, answers)  # one per hit, higher is better
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

if TYPE_CHECKING:
    from loader.settings import Settings


# What the index answered to a reranker's ``lookup``: the ``_msearch`` responses, in order, or
# ``None`` when it asked for nothing.
LookupAnswers = Sequence[dict[str, Any]] | None


class Candidate(Protocol):
    """What a reranker may read of a candidate (``loader.query.result.SearchHit`` has it all)."""

    chunk_id: str
    doc_id: str
    title: str
    heading_path: tuple[str, ...]
    text: str
    body: str
    position: int
    scores: dict[str, float]
    ranks: dict[str, int]


@dataclass(frozen=True)
class RerankQuery:
    """The question the candidates are reranked against, and what the search sent for it.

    Attributes:
        question: the standalone question (the rewrite's), as the reranker judges it.
        index: the alias searched.
        tenant: whose chunks the candidates are (every lookup filters on it too).
        query_text: the BM25 side's text (bounded: ``loader.query.search.bm25_text``).
        query_vector: the vector side's vector (``None`` in bm25 mode).
        second_query_vector: the second reader's vector (``second_embedding_model``; ``None``
            without one, and outside the hybrid modes).
        exact_terms: the identifiers the search matched exactly (``R-2207``, quoted strings).
    """

    question: str
    index: str = ""
    tenant: str = ""
    query_text: str = ""
    query_vector: list[float] | None = None
    exact_terms: tuple[str, ...] = field(default=())
    second_query_vector: list[float] | None = None

    @classmethod
    def of_call(cls, question: str, index: str, params: Mapping[str, Any]) -> RerankQuery:
        """The query of one stored-template call's parameters (the search's first call)."""
        return cls(
            question=question,
            index=index,
            tenant=str(params.get("tenant") or ""),
            query_text=str(params.get("query_text") or question),
            query_vector=params.get("query_vector"),
            exact_terms=tuple(params.get("exact_terms") or ()),
            second_query_vector=params.get("second_query_vector"),
        )


@runtime_checkable
class Reranker(Protocol):
    """A reranker: scores the candidates of one question, higher is better.

    Attributes:
        name: the model (a cross-encoder's name, a learned model's folder, ``keyword``).
        kind: ``cross-encoder``, ``keyword`` or ``learned`` (what ``rerank = auto`` chose).
    """

    name: str
    kind: str

    def lookup(self, query: RerankQuery, hits: Sequence[Candidate]) -> list[dict[str, Any]] | None:
        """The ``_msearch`` lines (header, body, header, body ...) the reranker needs from the
        index about these candidates, or ``None``: at most one request per search."""
        ...

    def score(
        self, query: RerankQuery, hits: Sequence[Candidate], answers: LookupAnswers = None
    ) -> list[float]:
        """One score per hit, in the hits' order; ``answers``: the ``_msearch`` responses of
        ``lookup``'s lines, in order (``None`` when it asked for none)."""
        ...


def load_reranker(settings: Settings, tenant: str | None = None) -> Reranker:
    """The process-wide reranker the settings choose for ``tenant``'s searches
    (``check.choose_reranker``): the keyword reranker (loads nothing), the tenant's learned
    model (its booster read once per folder) or a cross-encoder (loaded once per model and
    rerank settings).

    Raises:
        RerankerUnavailableError: no reranker the settings name is on this machine (or, learned,
            for this tenant; or no tenant was given: a learned model is one tenant's).
        ModelError: it cannot be loaded (a learned model of another feature version).
    """
    from loader.errors import RerankerUnavailableError
    from loader.models.rerank.check import CROSS_ENCODER, KEYWORD, choose_reranker

    choice = choose_reranker(settings, tenant)
    choice.require()
    if choice.kind not in (KEYWORD, CROSS_ENCODER) and tenant is None:
        raise RerankerUnavailableError(
            f"the learned reranker is chosen per tenant ({choice.model}): name the tenant",
            public_reason="rerank: a learned reranker reranks one tenant's searches",
        )
    if choice.kind == KEYWORD:
        from loader.models.rerank.keyword import KeywordReranker

        return KeywordReranker(settings.keyword_rerank_weight)
    if choice.kind == CROSS_ENCODER:
        from loader.models.rerank.cross_encoder import cached_cross_encoder

        return cached_cross_encoder(
            choice.model,
            settings.rerank_backend,
            settings.rerank_max_tokens,
            settings.rerank_batch_size,
            settings.device,
        )
    from loader.models.rerank.learned import load_learned

    return load_learned(choice.model)
