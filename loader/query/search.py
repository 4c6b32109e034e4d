"""The query path: rewrite, embed, retrieve through a stored template, rerank, assemble context.

One call does it all::

    request = SearchRequest.from_settings(settings, "How long do UPI refunds take?", tenant="acme")
    result = search(request, settings)
    for hit in result.hits:
        hit.title, hit.heading_path, hit.source, hit.scores["rerank"], hit.ranks["retrieval"]
    result.timings   # {"rewrite_ms": ..., "embed_ms": ..., "retrieve_ms": ..., "rerank_ms": ...,
                     #  "context_ms": ..., "total_ms": ...}
    result = await asearch(request, settings)   # the same, for asyncio (opensearch-py's async
                                                # client; the model work in a worker thread)

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
   then kept one per document if asked (``loader.query.retrieve``);
4. **rerank** (optional) every candidate with the reranker (``loader.models.rerank``: a
   cross-encoder, the keyword reranker, or a learned model, which first asks the index for each
   candidate's sub-query scores in one ``_msearch``: its ``lookup``) against the *rewritten
   standalone question* (``Rewrite.standalone``), then order by that score (``_rerank``); the
   result names the reranker that ran, or why none did (``SearchResult.reranker``). Not the
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

import asyncio
import contextlib
import logging
import re
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import TYPE_CHECKING, Any

from loader.cluster.client import connect, connect_async, require_cluster, require_cluster_async
from loader.models.rerank import RerankQuery
from loader.modes import search_mode
from loader.query import context
from loader.query.request import SearchRequest
from loader.query.result import (
    NOTHING_TO_RERANK,
    RERANK_OFF,
    RERANK_UNAVAILABLE,
    TIMINGS,
    SearchHit,
    SearchResult,
)
from loader.query.retrieve import (
    TemplateCall,
    ranked_hits,
    send,
    send_async,
    send_lookup,
    send_lookup_async,
    template_calls,
)
from loader.query.rewrite import (
    QueryRewriter,
    Rewrite,
    rewrite_question,
)
from loader.query.rewriters import rewriter_from_settings
from loader.settings import Settings

if TYPE_CHECKING:
    from opensearchpy import AsyncOpenSearch, OpenSearch

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
        self[name] += _milliseconds(started)  # the rerank stage runs in parts

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
    ``loader.models.rerank.check``)."""
    if request.rerank and reranker is None:
        from loader.models.rerank import load_reranker

        reranker = load_reranker(settings, request.tenant)  # a learned model: the tenant's
    embeds = search_mode(request.mode).embeds
    if embeds and embedder is None:
        from loader.models.embedding import embedder_for

        embedder = embedder_for(settings)  # model, backend, instructions, device, batch size
    return (embedder if embeds else None), (reranker if request.rerank else None)


def _second_reader(request: SearchRequest, settings: Settings) -> Embedder | None:
    """The second reader's embedder in a hybrid mode with one (``second_embedding_model``), else
    ``None``: only the hybrid templates have its sub-query."""
    if not search_mode(request.mode).hybrid:
        return None
    from loader.models.readers import second_embedder_for

    return second_embedder_for(settings)


def _embed(embedder: Embedder | None, queries: list[str]) -> list[list[float] | None]:
    """One vector per query, or ``None`` each without an embedder (bm25)."""
    if embedder is None:
        return [None] * len(queries)
    return [vector.tolist() for vector in embedder.embed_queries(queries)]


def rerank_depth(reranker: Reranker, candidates: int) -> int:
    """How many of ``candidates`` the reranker reorders: a learned model the first
    ``candidate_depth`` (the depth it learnt at: reranking deeper gives it candidates unlike
    those it learnt from), any other all of them."""
    depth = getattr(reranker, "candidate_depth", None)
    return min(candidates, depth) if depth else candidates


def _rerank(
    reranker: Reranker,
    query: RerankQuery,
    hits: list[SearchHit],
    looked_up: list[dict[str, Any]] | None,
) -> list[SearchHit]:
    """``hits`` ordered by the reranker's scores (``loader.models.rerank.Reranker.score``: a
    cross-encoder's, the keyword reranker's, a learned model's), each scored and ranked; only
    the first ``rerank_depth`` are reranked, the others follow in their retrieval order, each
    scored one below the one before it, so the scores still fall with the rank (TREC runs)."""
    depth = rerank_depth(reranker, len(hits))
    head, tail = hits[:depth], hits[depth:]
    scores = reranker.score(query, head, looked_up)
    for hit, score in zip(head, scores, strict=True):
        hit.scores["rerank"] = score
    # sorted() is stable: equal scores keep their retrieval order.
    ranked = sorted(head, key=lambda hit: -hit.scores["rerank"])
    floor = ranked[-1].scores["rerank"] if ranked else 0.0
    for below, hit in enumerate(tail, start=1):
        hit.scores["rerank"] = floor - below
    for rank, hit in enumerate(ranked + tail, start=1):
        hit.ranks["rerank"] = rank
    return ranked + tail


def _assemble(request: SearchRequest, hits: list[SearchHit]) -> list[SearchHit]:
    """The context stage: ``loader.query.context.assemble`` with the request's options."""
    return context.assemble(
        hits,
        request.k,
        expand=request.expand,
        merge=request.merge_adjacent,
        prompt_order=request.prompt_order,
    )


class _Run:
    """One search between its stages: what ``search`` and ``asearch`` share, so that they differ
    only in how the calls reach OpenSearch (and in which thread the rest runs)."""

    def __init__(
        self, request: SearchRequest, settings: Settings, rewriter: QueryRewriter | None
    ) -> None:
        if not isinstance(request, SearchRequest):
            raise TypeError("search() takes a SearchRequest: SearchRequest.from_settings(...)")
        self.request, self.settings = request, settings
        self.timings = _Timings()
        self.searched = _searched_question(request)
        self.rewriter = rewriter if rewriter is not None else rewriter_from_settings(settings)
        self.rewrite = Rewrite([self.searched], self.searched)  # until plan() rewrites
        self.retrieved = 0

    def plan(self, embedder: Embedder | None) -> list[TemplateCall]:
        """The rewrite and embed stages (a model, perhaps an LLM call): the template calls."""
        with self.timings.stage("rewrite_ms"):
            self.rewrite = rewrite_question(self.rewriter, self.request.history, self.searched)
        queries = self.rewrite.queries
        vectors = second_vectors = _embed(None, queries)
        if embedder is not None:
            with self.timings.stage("embed_ms"):
                texts = self.rewrite.vector_texts or queries
                second = _second_reader(self.request, self.settings)
                with ThreadPoolExecutor(1) if second else contextlib.nullcontext() as pool:
                    # The second reader loads and embeds beside the first: onnxruntime runs
                    # without the GIL, so a cold search loads both sessions at once (warm, one
                    # after the other was no faster: each model streams its weights from memory).
                    later = pool.submit(_embed, second, texts) if pool else None
                    vectors = _embed(embedder, texts)
                    second_vectors = later.result() if later else _embed(None, queries)
        texts = [bm25_text(query) for query in queries]
        return template_calls(
            self.request, self.settings.index_name, texts, vectors, second_vectors
        )

    def candidates(
        self, calls: list[TemplateCall], answers: list[dict[str, Any]], reranker: Reranker | None
    ) -> tuple[list[SearchHit], RerankQuery | None, list[dict[str, Any]] | None]:
        """The answers' hits, the query to rerank them against (``None`` without rerank), and
        the one request the reranker asks of the index first (its ``lookup``), if any."""
        hits = ranked_hits(self.request, calls, answers, self.settings.rrf_rank_constant)
        self.retrieved = len(hits)
        if reranker is None or not hits or not self.rewrite.standalone:
            return hits, None, None
        query = RerankQuery.of_call(self.rewrite.standalone, calls[0].index, calls[0].params)
        with self.timings.stage("rerank_ms"):
            lines = reranker.lookup(query, hits[: rerank_depth(reranker, len(hits))])
        return hits, query, lines

    def finish(
        self,
        hits: list[SearchHit],
        reranker: Reranker | None,
        query: RerankQuery | None,
        looked_up: list[dict[str, Any]] | None,
    ) -> SearchResult:
        """The rerank and context stages, and the result."""
        request, rewrite = self.request, self.rewrite
        depth = 0
        if reranker is not None and query is not None:
            depth = rerank_depth(reranker, len(hits))
            with self.timings.stage("rerank_ms"):
                hits = _rerank(reranker, query, hits, looked_up)
        rerank_query = query.question if query is not None else ""
        ran = reranker if reranker is not None and query is not None else None
        with self.timings.stage("context_ms"):
            hits = _assemble(request, hits)
        finished = self.timings.finish()
        log.debug(
            "search %r (%s, tenant %r): %s", self.searched, request.mode, request.tenant, finished
        )
        return SearchResult(
            question=self.searched,
            queries=rewrite.queries,
            rerank_query=rerank_query,
            mode=request.mode,
            tenant=request.tenant,
            reranked=bool(rerank_query),
            candidates=self.retrieved,
            rerank_depth=depth,
            hits=hits,
            timings=finished,
            truncated=request.truncated,
            hypothetical=rewrite.hypothetical,
            warnings=[*request.warnings, *rewrite.warnings],
            reranker={"kind": ran.kind, "model": ran.name} if ran is not None else None,
            rerank_skipped="" if ran is not None else _why_no_rerank(request),
        )


def _why_no_rerank(request: SearchRequest) -> str:
    """Why a search ran no reranker (``SearchResult.rerank_skipped``)."""
    if request.rerank:
        return NOTHING_TO_RERANK
    return RERANK_UNAVAILABLE if request.rerank_unavailable else RERANK_OFF


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
    run = _Run(request, settings, rewriter)
    if client is None:
        client = connect(settings)
        require_cluster(client, settings)  # a cluster that is down is named before any model
    embedder, reranker = _load_models(request, settings, embedder, reranker)
    calls = run.plan(embedder)
    with run.timings.stage("retrieve_ms"):
        answers = [send(client, settings, call) for call in calls]
    hits, query, lines = run.candidates(calls, answers, reranker)
    looked_up = None
    if lines:
        with run.timings.stage("rerank_ms"):
            looked_up = send_lookup(client, settings, lines)
    result = run.finish(hits, reranker, query, looked_up)
    if settings.query_log != "off":  # the opt-in query log (loader.query.query_log)
        from loader.query.query_log import log_entry, record_search

        entry = log_entry(
            request, result, query_log=settings.query_log, index_name=settings.index_name
        )
        result.query_id = record_search(client, entry) if entry else ""
    return result


async def asearch(
    request: SearchRequest,
    settings: Settings,
    *,
    client: AsyncOpenSearch | None = None,
    embedder: Embedder | None = None,
    reranker: Reranker | None = None,
    rewriter: QueryRewriter | None = None,
) -> SearchResult:
    """``search`` for asyncio: the same stages and the same result, the calls to OpenSearch
    sent with opensearch-py's async client (the queries of a rewrite all at once), and the
    model work -- loading, rewrite, embedding, rerank, all CPU-bound or blocking -- in a worker
    thread (``asyncio.to_thread``), so the event loop keeps serving other tasks.

    Args:
        client: an ``AsyncOpenSearch`` of this event loop
            (``loader.cluster.client.connect_async``); without one, one is connected for this
            search, the cluster must answer before any model loads, and it is closed after.
        request, settings, embedder, reranker, rewriter: as for ``search``.

    Raises:
        As ``search``; ``ConfigError`` also when opensearch-py's async support (aiohttp) is not
        installed.
    """
    run = _Run(request, settings, rewriter)
    owned = client is None
    if client is None:
        client = connect_async(settings)
    try:
        if owned:
            await require_cluster_async(client, settings)
        embedder, reranker = await asyncio.to_thread(
            _load_models, request, settings, embedder, reranker
        )
        calls = await asyncio.to_thread(run.plan, embedder)
        with run.timings.stage("retrieve_ms"):
            answers = await asyncio.gather(*(send_async(client, settings, c) for c in calls))
        hits, query, lines = await asyncio.to_thread(run.candidates, calls, list(answers), reranker)
        looked_up = None
        if lines:
            with run.timings.stage("rerank_ms"):
                looked_up = await send_lookup_async(client, settings, lines)
        result = await asyncio.to_thread(run.finish, hits, reranker, query, looked_up)
        if settings.query_log != "off":
            from loader.query.query_log import log_entry, record_search_async

            entry = log_entry(
                request, result, query_log=settings.query_log, index_name=settings.index_name
            )
            result.query_id = await record_search_async(client, entry) if entry else ""
        return result
    finally:
        if owned:
            await client.close()
