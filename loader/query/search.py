"""The query path: rewrite, embed, retrieve through a stored template, rerank, assemble context.

One call does it all::

    request = SearchRequest.from_settings(settings, "How long do UPI refunds take?", tenant="acme")
    result = search(request, settings)
    for hit in result.hits:
        hit.title, hit.heading_path, hit.source, hit.scores["rerank"], hit.ranks["retrieval"]
    result.timings   # {"rewrite_ms": ..., "embed_ms": ..., "retrieve_ms": ..., "rerank_ms": ...,
                     #  "context_ms": ..., "total_ms": ...}

The request (``loader.query.request.SearchRequest``) has been checked when it was built; the
result types are in ``loader.query.result``. Stages, in order, one function each:

1. **rewrite** (optional): a ``QueryRewriter`` (given, else the ``rewrite`` settings') turns
   ``(history, question)`` into one or more standalone queries, the standalone question and, for
   HyDE, a hypothetical answer (``loader.query.rewrite.rewrite_question``); a rewriter that fails
   leaves the question as it is and a warning in ``SearchResult.warnings``;
2. **embed** every query with the index's model (``settings.embedding_model``), except in a mode
   whose record does not embed (``bm25``; ``loader.modes``; ``_embed``); with HyDE the
   hypothetical answer is embedded instead, while BM25 keeps the query;
3. **retrieve** ``candidates`` chunks per query through the stored search template of the mode
   (``_search/template``; for the hybrid modes the fusion pipeline is passed as the
   ``search_pipeline`` URL parameter). Each query's identifiers (``R-2207``, ``44821``, quoted
   strings: ``request.exact_terms``) go as the templates' ``exact_terms``, so the chunks holding
   them rank first, and ``one_per_document`` as ``collapse_doc``. With several queries, their
   rankings are fused on the client by reciprocal rank fusion (``loader.query.fusion.rrf``),
   then kept one per document if asked (``_retrieve_all``);
4. **rerank** (optional) every candidate with the cross-encoder against the *rewritten
   standalone question* (``Rewrite.standalone``), then order by that score (``_rerank``). Not the
   latest message: it may be a follow-up ("what about for UPI?") that a cross-encoder cannot judge
   passages against; nor one sub-query of a decomposition, which would push the other parts'
   passages down;
5. **context**: parent or sentence-window expansion, merging of adjacent chunks, dropping of
   duplicates (whenever ``expand`` or ``merge_adjacent`` is on), all on the whole reranked list,
   then the top ``k`` (so up to ``k`` distinct pieces of context come back), optionally in prompt
   order (``loader.query.context.assemble``).

Each stage's score and rank is kept on every hit (``scores`` / ``ranks``: ``retrieval``,
``rerank``, and ``query_<n>`` per query when there were several), and each stage's latency in
``SearchResult.timings``.

Long questions are cut to ``MAX_QUESTION_CHARS`` characters, and the BM25 side to
``MAX_BM25_TERMS`` terms, so OpenSearch's ``indices.query.bool.max_clause_count`` (1024 leaf
clauses over the whole query; the BM25 sub-query spans three fields and the hybrid templates'
exact sub-query one, plus at most 2 x ``MAX_EXACT_TERMS`` phrases) can never be exceeded.
"""

from __future__ import annotations

import contextlib
import logging
import re
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import opensearchpy

from loader.cluster.client import (
    bad_request_reason,
    cluster_errors,
    connect,
    require_cluster,
    safe_url,
)
from loader.errors import ClusterError, QueryError
from loader.index.render import config_names
from loader.modes import search_mode
from loader.query import context
from loader.query.fusion import rrf
from loader.query.request import SearchRequest
from loader.query.result import TIMINGS, SearchHit, SearchResult, hits_from_response
from loader.query.rewrite import QueryRewriter, rewrite_question, rewriter_from_settings
from loader.settings import Settings

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

    from loader.models.embedding import Embedder
    from loader.models.rerank import Reranker

log = logging.getLogger(__name__)

# Terms of the question given to BM25: the multi_match spans 4 fields, so 200 terms make at most
# 800 leaf clauses, under OpenSearch's default max_clause_count of 1024 with room for filters.
MAX_BM25_TERMS = 200

# Scripts whose analyzers emit one token per character (CJK ideographs, kana, hangul syllables):
# counted one term per character. Other non-ASCII symbols (emoji) are one token each too.
_PER_CHARACTER = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TERM = re.compile(rf"[{_PER_CHARACTER}]|[^\W{_PER_CHARACTER}]+|[^\w\s\x00-\x7f]")


def bm25_text(text: str, max_terms: int = MAX_BM25_TERMS) -> str:
    """``text`` cut after its ``max_terms``-th term, so the BM25 query stays under the clause limit.

    Terms are counted the way analyzers split them, erring on the side of more terms: runs of
    letters and digits, each CJK character, each non-ASCII symbol (emoji).

    Example::

        bm25_text("refund for order E1043, please", max_terms=3)   # 'refund for order'
    """
    for count, match in enumerate(_TERM.finditer(text), start=1):
        if count == max_terms:
            return text[: match.end()]
    return text


class _Timings(dict[str, float]):
    """Milliseconds per stage; a stage that does not run stays at 0.0."""

    def __init__(self) -> None:
        super().__init__(dict.fromkeys(TIMINGS, 0.0))
        self.started = time.perf_counter()

    @contextlib.contextmanager
    def stage(self, name: str) -> Iterator[None]:
        started = time.perf_counter()
        yield
        self[name] = _milliseconds(started)

    def finish(self) -> dict[str, float]:
        self["total_ms"] = _milliseconds(self.started)
        return dict(self)


def _milliseconds(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def _searched_question(request: SearchRequest) -> str:
    """The question as searched; a warning when it had to be cut."""
    if request.truncated:
        log.warning(
            "question of %d characters cut to %d for the search",
            len(request.question.strip()),
            len(request.searched),
        )
    return request.searched


def _load_models(
    request: SearchRequest,
    settings: Settings,
    embedder: Embedder | None,
    reranker: Reranker | None,
) -> tuple[Embedder | None, Reranker | None]:
    """The embedder (``None`` in a mode that does not embed: bm25) and the reranker (``None``
    without rerank), loaded from the settings unless given: a model that cannot load fails the
    search up front (a reranker_model that is nowhere on disk at once:
    ``loader.models.rerank_check``)."""
    if request.rerank and reranker is None:
        from loader.models.rerank import load_reranker

        reranker = load_reranker(settings)
    embeds = search_mode(request.mode).embeds
    if embeds and embedder is None:
        from loader.models.embedding import embedder_for

        embedder = embedder_for(settings)  # model, backend, instructions, device, batch size
    return (embedder if embeds else None), (reranker if request.rerank else None)


def _embed(embedder: Embedder | None, queries: list[str]) -> list[list[float] | None]:
    """One vector per query, or ``None`` each without an embedder (bm25)."""
    if embedder is None:
        return [None] * len(queries)
    return [vector.tolist() for vector in embedder.embed_queries(queries)]


def _explained(
    exc: ClusterError, settings: Settings, pipeline: str | None
) -> ClusterError | QueryError:
    """``exc``, or a clearer error for OpenSearch's own 404 (configuration never applied) and
    400 (a parameter the request's checks let through but the cluster cannot use; a search
    pipeline that was never applied, or was deleted, is the cluster's state, not the request's)."""
    cause = exc.__cause__
    alias = settings.index_name
    if (
        pipeline
        and isinstance(cause, opensearchpy.RequestError)
        and f"Pipeline {pipeline} is not defined" in bad_request_reason(cause, settings)
    ):
        return ClusterError(
            f"search pipeline {pipeline!r} does not exist; run `loader apply` for index "
            f"{alias!r} on {safe_url(settings.opensearch_url)}",
            public_reason="the index's search pipelines are missing on OpenSearch (loader apply)",
        )
    if isinstance(cause, opensearchpy.NotFoundError) and isinstance(cause.info, dict):
        # OpenSearch's own 404 (JSON): a missing alias, template or pipeline, so the
        # configuration was never applied. Another server's 404 page is not that.
        return ClusterError(
            f"{exc}; run `loader apply` (and `loader push`) for index {alias!r} on "
            f"{safe_url(settings.opensearch_url)} first",
            public_reason=exc.public_reason,  # what cluster_errors made of the 404
        )
    if isinstance(cause, opensearchpy.RequestError) and isinstance(cause.info, dict):
        # The client's fault, so not a ClusterError; no URL in the message.
        return QueryError(
            f"OpenSearch refused the search as a bad request: {bad_request_reason(cause, settings)}"
        )
    return exc


def _retrieve(
    client: OpenSearch,
    settings: Settings,
    template_id: str,
    pipeline: str | None,
    params: dict[str, Any],
) -> list[SearchHit]:
    """One stored-template search; the hits with their retrieval score and rank."""
    alias = settings.index_name
    url_params = {"search_pipeline": pipeline} if pipeline else {}
    try:
        with cluster_errors(settings, f"searching {alias!r} with template {template_id!r}"):
            response = client.search_template(
                index=alias, body={"id": template_id, "params": params}, params=url_params
            )
    except ClusterError as exc:
        explained = _explained(exc, settings, pipeline)
        if explained is exc:
            raise
        raise explained from exc.__cause__
    return _own_tenant(hits_from_response(response), params["tenant"], template_id)


def _own_tenant(hits: list[SearchHit], tenant: str, template_id: str) -> list[SearchHit]:
    """The hits of ``tenant`` only, ranked again. The stored templates filter on the tenant, but
    they are the cluster's state: without the security plugin anyone who reaches the cluster can
    overwrite ``_scripts``, and a template that lost its filter must not show another tenant's
    chunks."""
    kept = [hit for hit in hits if hit.tenant == tenant]
    if len(kept) < len(hits):
        log.error(
            "template %r returned %d chunks of other tenants, dropped; it does not filter on the "
            "tenant: run `loader doctor`, then `loader apply`",
            template_id,
            len(hits) - len(kept),
        )
        for rank, hit in enumerate(kept, start=1):
            hit.ranks["retrieval"] = rank
    return kept


def _fuse(rankings: list[list[SearchHit]], rank_constant: int) -> list[SearchHit]:
    """Reciprocal rank fusion of several queries' hits; each query's own score and rank kept."""
    by_id: dict[str, SearchHit] = {}
    for number, hits in enumerate(rankings, start=1):
        for hit in hits:
            kept = by_id.setdefault(hit.chunk_id, hit)
            kept.scores[f"query_{number}"] = hit.scores["retrieval"]
            kept.ranks[f"query_{number}"] = hit.ranks["retrieval"]
    fused = rrf([[hit.chunk_id for hit in hits] for hits in rankings], rank_constant=rank_constant)
    result = []
    for rank, (chunk_id, score) in enumerate(fused, start=1):
        hit = by_id[chunk_id]
        hit.scores["retrieval"] = score
        hit.ranks["retrieval"] = rank
        result.append(hit)
    return result


def _best_per_document(hits: list[SearchHit]) -> list[SearchHit]:
    """The first hit of each document, re-ranked: each query's collapsed hits may name another
    chunk of the same document."""
    seen: set[str] = set()
    kept = []
    for hit in hits:
        if hit.doc_id not in seen:
            seen.add(hit.doc_id)
            kept.append(hit)
    for rank, hit in enumerate(kept, start=1):
        hit.ranks["retrieval"] = rank
    return kept


def _retrieve_all(
    request: SearchRequest,
    settings: Settings,
    client: OpenSearch,
    queries: list[str],
    vectors: list[list[float] | None],
) -> list[SearchHit]:
    """Every query through the mode's stored template (and fusion pipeline), fused by RRF when
    there are several."""
    template_id, pipeline = config_names(settings.index_name).for_search_mode(request.mode)
    filter_params = request.template_params()
    rankings = []
    for query, vector in zip(queries, vectors, strict=True):
        text = bm25_text(query)
        params: dict[str, Any] = {
            "query_text": text,
            "exact_terms": request.exact_terms(text),
            "tenant": request.tenant,
            "size": request.depth,
            "k": request.depth,
            **filter_params,
        }
        if vector is not None:
            params["query_vector"] = vector
        rankings.append(_retrieve(client, settings, template_id, pipeline, params))
    if len(rankings) == 1:
        return rankings[0]
    fused = _fuse(rankings, settings.rrf_rank_constant)
    return _best_per_document(fused) if request.one_per_document else fused


def _embed_and_retrieve(
    request: SearchRequest,
    settings: Settings,
    client: OpenSearch,
    embedder: Embedder | None,
    queries: list[str],
    timings: _Timings,
    vector_texts: list[str] | None = None,
) -> list[SearchHit]:
    """The embed stage (skipped without an embedder) and the retrieve stage, timed.
    ``vector_texts``: what is embedded per query instead of the query (HyDE's passage)."""
    vectors = _embed(None, queries)
    if embedder is not None:
        with timings.stage("embed_ms"):
            vectors = _embed(embedder, vector_texts or queries)
    with timings.stage("retrieve_ms"):
        return _retrieve_all(request, settings, client, queries, vectors)


def _rerank(reranker: Reranker, query: str, hits: list[SearchHit]) -> list[SearchHit]:
    """``hits`` ordered by the reranker's score against ``query`` (a cross-encoder's, or the
    keyword reranker's blend of the retrieval score and the words the chunk shares with
    ``query``), each scored and ranked."""
    passages = [hit.text or hit.body for hit in hits]
    if getattr(reranker, "blends_retrieval", False):  # the keyword reranker
        retrieval = [hit.scores.get("retrieval", 0.0) for hit in hits]
        scores = reranker.rerank(query, passages, retrieval)
    else:
        scores = reranker.rerank(query, passages)
    for hit, score in zip(hits, scores, strict=True):
        hit.scores["rerank"] = score
    # sorted() is stable: equal scores keep their retrieval order.
    ranked = sorted(hits, key=lambda hit: -hit.scores["rerank"])
    for rank, hit in enumerate(ranked, start=1):
        hit.ranks["rerank"] = rank
    return ranked


def _assemble(request: SearchRequest, hits: list[SearchHit]) -> list[SearchHit]:
    """The context stage: ``loader.query.context.assemble`` with the request's options."""
    return context.assemble(
        hits,
        request.k,
        expand=request.expand,
        merge=request.merge_adjacent,
        prompt_order=request.prompt_order,
    )


def search(
    request: SearchRequest,
    settings: Settings,
    *,
    client: OpenSearch | None = None,
    embedder: Embedder | None = None,
    reranker: Reranker | None = None,
    rewriter: QueryRewriter | None = None,
) -> SearchResult:
    """Run ``request`` against the index behind ``settings.index_name``, for its tenant only.

    Args:
        request: what to search (checked when it was built; see ``SearchRequest``).
        settings: resolved settings (index_name, models, rrf_rank_constant, the cluster ...).
        client, embedder, reranker: reuse loaded ones (default: loaded once per process). Without
            a client, one is connected and the cluster must answer before any model loads.
        rewriter: turns ``(request.history, question)`` into 1..N standalone queries, fused by
            RRF (default: ``rewriter_from_settings(settings)``; ``IdentityRewriter()`` for none).

    Returns:
        The ``SearchResult``: hits with every stage's score and rank, and per-stage timings.

    Raises:
        QueryError: OpenSearch still refused the search as a bad request (HTTP 400).
        ModelError, ClusterError: a model cannot be loaded; the cluster failed (reason kept).
        ConfigError: the ``rewrite`` settings are unusable (``rewrite = llm`` without a URL).
    """
    if not isinstance(request, SearchRequest):
        raise TypeError("search() takes a SearchRequest: SearchRequest.from_settings(...)")
    timings = _Timings()
    searched = _searched_question(request)
    rewriter = rewriter if rewriter is not None else rewriter_from_settings(settings)
    if client is None:
        client = connect(settings)
        require_cluster(client, settings)  # a cluster that is down is named before any model
    embedder, reranker = _load_models(request, settings, embedder, reranker)
    with timings.stage("rewrite_ms"):
        rewrite = rewrite_question(rewriter, request.history, searched)
    queries = rewrite.queries
    hits = _embed_and_retrieve(
        request, settings, client, embedder, queries, timings, rewrite.vector_texts
    )
    retrieved = len(hits)
    rerank_query = rewrite.standalone if reranker is not None and hits else ""
    if reranker is not None and rerank_query:
        with timings.stage("rerank_ms"):
            hits = _rerank(reranker, rerank_query, hits)
    with timings.stage("context_ms"):
        hits = _assemble(request, hits)
    finished = timings.finish()
    log.debug("search %r (%s, tenant %r): %s", searched, request.mode, request.tenant, finished)
    return SearchResult(
        question=searched,
        queries=queries,
        rerank_query=rerank_query,
        mode=request.mode,
        tenant=request.tenant,
        reranked=bool(rerank_query),
        candidates=retrieved,
        hits=hits,
        timings=finished,
        truncated=request.truncated,
        hypothetical=rewrite.hypothetical,
        warnings=[*request.warnings, *rewrite.warnings],
    )
