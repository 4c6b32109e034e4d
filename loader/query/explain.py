"""`loader explain`: why a question finds, or misses, a document, stage by stage.

For an expected document or section (``refunds.md#Late deliveries``) the question goes through
``loader.query.search.search`` stage by stage (no rewriting), and the section's best chunk and rank
are kept at each: the side lists (``candidates`` deep; in a hybrid mode the hybrid template's own
sub-queries -- BM25, vector, exact terms -- rendered by OpenSearch and run one by one), the fused
list, the rerank and the context. Each side's share of the fused score comes from those lists and
the stored pipeline's technique, rank constant and weights, read back by technique
(``loader.modes.read_fusion``; RRF: ``weight / (rank_constant + rank)``; ``min_max``, ``l2``,
``z_score``: the score normalised as OpenSearch does, times its weight over the weights' sum); the
report names the technique. A section no list holds is looked up in the index: no chunk of it for
any tenant (not indexed), another tenant's only (the tenant), found without the filters (a
filter), else too deep for every list (``candidates``). A ``#`` in
a file name or heading (``C#-guide.md#Using C#``) is told apart by that same look-up, made first:
the source is the longest leading part (the whole text, or up to a ``#``) that names an indexed
document (``Expected.choose``).

OpenSearch 3.6's ``hybrid_score_explanation`` response processor gives per-hit shares too, but
only through a pipeline that carries it and with Lucene's ``explain``; the stored pipelines do not.

Example::

    request = SearchRequest.from_settings(settings, "How long do refunds take?", tenant="acme")
    report = explain(request, settings, expect="refunds.md#Late deliveries")
    report.explanations[0].sentence()
    # 'found by BM25 at 3, missed by the vector side (rank > 50), fused to 7, cut by k=5'
    report.to_dict()          # the numbers, for --json

The pure parts (``Expected``, the contributions, the sentence, ``format_report``) are in
``loader.query.explanation``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loader.cluster.client import cluster_errors, connect, require_cluster
from loader.documents import PATH_SEPARATOR
from loader.errors import ModelError, RerankerUnavailableError
from loader.index.render import config_names
from loader.models.rerank.check import LEARNED
from loader.modes import Fusion, read_fusion, search_mode
from loader.query import context
from loader.query.explanation import (
    Contribution,
    Expected,
    ExplainReport,
    Explanation,
    StageRank,
    contributions,
)
from loader.query.located import IndexedChunk, indexed_chunks, locate, source_owners
from loader.query.request import SearchFilters, SearchRequest
from loader.query.result import hits_from_response
from loader.query.rewrite import IdentityRewriter
from loader.query.search import bm25_text, rerank_depth, search

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

    from loader.models.embedding import Embedder
    from loader.models.rerank import Reranker
    from loader.query.result import SearchHit
    from loader.settings import Settings

log = logging.getLogger(__name__)

# The hybrid templates' sub-queries, in their order (search_templates/hybrid.json.j2): the
# pipelines' weights follow it. The exact-term one is empty unless the question holds identifiers.
# With a second reader (second_embedding_model) its k-NN comes before the exact one.
SUB_QUERIES = ("bm25", "vector", "exact")
TWO_READER_SUB_QUERIES = ("bm25", "vector", "second_vector", "exact")
OPTIONAL_SIDES = ("exact",)
# Headings of an indexed file named when the expected one is not among them.
MAX_HEADINGS_SHOWN = 8
# Chunks of one source read back to tell "not indexed" from "another tenant".


# --- the stages on the cluster -----------------------------------------------------------------


def _first(hits: Sequence[SearchHit], matches: Callable[[SearchHit], bool]) -> tuple[int, Any]:
    for rank, hit in enumerate(hits, start=1):
        if matches(hit):
            return rank, hit
    return 0, None


def _stage(name: str, hits: Sequence[SearchHit], depth: int, matches: Callable) -> StageRank:
    rank, hit = _first(hits, matches)
    if hit is None:
        return StageRank(name, None, depth)
    score_key = "rerank" if name == "rerank" else "retrieval"
    return StageRank(name, rank, depth, hit.chunk_id, hit.scores.get(score_key))


@dataclass
class _Lists:
    """The ranked lists of one question: per side, fused, reranked, and the final context."""

    sides: dict[str, list[SearchHit]]
    retrieved: list[SearchHit]  # the mode's own list (fused for the hybrid modes)
    reranked: list[SearchHit] | None
    final: list[SearchHit]
    fusion: Fusion | None = None  # the stored pipeline's, hybrid only
    # A learned reranker's per-feature shares of each candidate's score: chunk id -> shares.
    learned_shares: dict[str, dict[str, float]] = field(default_factory=dict)


def _retrieval_request(request: SearchRequest, mode: str) -> SearchRequest:
    """One list as retrieved, ``depth`` long: no rerank, no context step."""
    return request.replace(
        mode=mode,
        rerank=False,
        k=request.depth,
        expand=None,
        merge_adjacent=False,
        prompt_order=False,
    )


def _query_vectors(
    request: SearchRequest, settings: Settings, embedder: Embedder | None, *, second: bool
) -> tuple[list[float], list[float] | None]:
    """The question's vector, and the second reader's when asked and there is one."""
    from loader.models.embedding import embedder_for
    from loader.models.readers import second_embedder_for

    searched = [request.searched]
    vector = (embedder or embedder_for(settings)).embed_queries(searched)[0].tolist()
    reader = second_embedder_for(settings) if second else None
    return vector, reader.embed_queries(searched)[0].tolist() if reader else None


def _sub_query_lists(
    request: SearchRequest, settings: Settings, client: OpenSearch, embedder: Embedder | None
) -> dict[str, list[SearchHit]]:
    """The hybrid template's sub-queries, each run on its own ``depth`` deep: the very lists the
    pipeline fuses. OpenSearch renders the stored template (``_render/template``) with the
    parameters ``search`` sends, so the clauses are the template's own."""
    vector, second_vector = _query_vectors(request, settings, embedder, second=True)
    # The sub-queries are compared chunk by chunk: no collapse_doc.
    chunkwise = request.replace(one_per_document=False)
    params = chunkwise.template_params(bm25_text(request.searched), vector, second_vector)
    template_id, _ = config_names(settings.index_name).for_search_mode(request.mode)
    lists: dict[str, list[SearchHit]] = {}
    with cluster_errors(settings, f"running the sub-queries of template {template_id!r}"):
        rendered = client.render_search_template(body={"id": template_id, "params": params})
        queries = rendered["template_output"]["query"]["hybrid"]["queries"]
        names = (
            TWO_READER_SUB_QUERIES if len(queries) == len(TWO_READER_SUB_QUERIES) else SUB_QUERIES
        )
        for position, query in enumerate(queries):
            name = names[position] if position < len(names) else f"sub-query {position}"
            body = {
                "size": request.depth,
                "_source": {"excludes": ["embedding", "second_embedding"]},
                "query": query,
            }
            lists[name] = hits_from_response(client.search(index=settings.index_name, body=body))
    return lists


def _stored_fusion(request: SearchRequest, settings: Settings, client: OpenSearch) -> Fusion:
    """The fusion of the pipeline the hybrid search goes through, as stored on the cluster and
    read by its technique (``loader.modes.read_fusion``)."""
    _, pipeline = config_names(settings.index_name).for_search_mode(request.mode)
    with cluster_errors(settings, f"reading search pipeline {pipeline!r}"):
        stored = client.transport.perform_request("GET", f"/_search/pipeline/{pipeline}")
    return read_fusion(stored.get(pipeline) or {})


def _search_lists(
    request: SearchRequest,
    settings: Settings,
    client: OpenSearch,
    embedder: Embedder | None,
    reranker: Reranker | None,
) -> _Lists:
    # No rewriting: explain follows the question as asked through every list.
    rewriter = IdentityRewriter()

    def run(with_rerank: bool = False) -> list[SearchHit]:
        wanted = _retrieval_request(request, request.mode).replace(rerank=with_rerank)
        return search(
            wanted,
            settings,
            client=client,
            embedder=embedder,
            reranker=reranker,
            rewriter=rewriter,
        ).hits

    retrieved = run()
    fusion = None
    if search_mode(request.mode).hybrid:
        sides = _sub_query_lists(request, settings, client, embedder)
        fusion = _stored_fusion(request, settings, client)
    else:
        sides = {request.mode: retrieved}
    reranked = run(with_rerank=True) if reranker is not None else None
    shares = {}
    if reranked and reranker is not None and reranker.kind == LEARNED:
        shares = _learned_shares(request, settings, client, embedder, reranker, reranked)
    final = context.assemble(
        reranked if reranked is not None else retrieved,
        request.k,
        expand=request.expand,
        merge=request.merge_adjacent,
        prompt_order=request.prompt_order,
    )
    return _Lists(sides, retrieved, reranked, final, fusion, shares)


def _learned_shares(
    request: SearchRequest,
    settings: Settings,
    client: OpenSearch,
    embedder: Embedder | None,
    reranker: Reranker,
    reranked: list[SearchHit],
) -> dict[str, dict[str, float]]:
    """Each candidate's per-feature shares of its learned score (LightGBM's ``pred_contrib``),
    from the same lookup the rerank made: the candidates in their fused order, the question's
    query as the search sent it."""
    from loader.models.rerank import RerankQuery
    from loader.models.rerank.learned import LearnedReranker
    from loader.query.retrieve import send_lookup

    if not isinstance(reranker, LearnedReranker):  # a caller's own learned-kind reranker
        return {}
    vectors: tuple[list[float] | None, list[float] | None] = (None, None)
    if search_mode(request.mode).embeds:  # the second reader's only in a hybrid mode, as search
        second = reranker.feature_set.readers > 1 and search_mode(request.mode).hybrid
        vectors = _query_vectors(request, settings, embedder, second=second)
    params = request.template_params(bm25_text(request.searched), *vectors)
    query = RerankQuery.of_call(request.searched, settings.index_name, params)
    hits = sorted(reranked, key=lambda hit: hit.ranks.get("retrieval", 0))
    hits = hits[: rerank_depth(reranker, len(hits))]  # those the model reranked (search's rule)
    answers = send_lookup(client, settings, reranker.lookup(query, hits))
    shares = reranker.contributions(query, hits, answers)
    return {hit.chunk_id: share for hit, share in zip(hits, shares, strict=True)}


def _contributions(lists: _Lists, chunk_id: str) -> list[Contribution]:
    assert lists.fusion is not None
    ranks = {
        side: _first(hits, lambda hit: hit.chunk_id == chunk_id)[0] or None
        for side, hits in lists.sides.items()
    }
    scores = {
        side: {hit.chunk_id: hit.scores.get("retrieval", 0.0) for hit in hits}
        for side, hits in lists.sides.items()
    }
    return contributions(lists.fusion, ranks, scores, chunk_id)


def _explain_target(
    explanation: Explanation,
    lists: _Lists,
    matches: Callable[[SearchHit], bool],
    request: SearchRequest,
) -> None:
    """Fill the stages of one target from the lists; set ``cut`` to ``k`` or ``fusion``."""
    depth = request.depth
    stages = [
        _stage(side, hits, depth, matches)
        for side, hits in lists.sides.items()
        if hits or side not in OPTIONAL_SIDES
    ]
    hybrid = search_mode(request.mode).hybrid
    if hybrid:
        stages.append(_stage("fused", lists.retrieved, depth, matches))
    explanation.stages = stages
    in_retrieval = _first(lists.retrieved, matches)[1]
    if hybrid:
        fused = explanation.stage("fused")
        best = fused.chunk_id if fused and fused.chunk_id else _best_side_chunk(stages)
        if best:
            explanation.contributions = _contributions(lists, best)
            explanation.fused_score = fused.score if fused and fused.rank else None
    if in_retrieval is None:
        if any(stage.rank for stage in stages):
            explanation.cut, explanation.cut_detail = "fusion", f"lost in fusion (rank > {depth})"
        return
    if lists.reranked is not None:
        reranked = _stage("rerank", lists.reranked, depth, matches)
        explanation.stages.append(reranked)
        explanation.rerank_shares = lists.learned_shares.get(reranked.chunk_id or "", {})
    kept = _stage("context", lists.final, request.k, matches)
    explanation.stages.append(kept)
    if kept.rank is None:
        explanation.cut, explanation.cut_detail = "k", f"cut by k={request.k}"


def _best_side_chunk(stages: Sequence[StageRank]) -> str:
    ranked = [stage for stage in stages if stage.rank]
    return min(ranked, key=lambda stage: stage.rank or 0).chunk_id if ranked else ""


def _why_missing(
    explanation: Explanation,
    expected: Expected,
    request: SearchRequest,
    settings: Settings,
    searcher: Callable[[SearchRequest], _Lists],
    client: OpenSearch,
    chunks: Sequence[IndexedChunk] | None = None,
) -> None:
    """Set ``cut`` for a target that no list holds: not indexed, tenant, filter or candidates.
    ``chunks``: the source's chunks when they were already read (to choose the source)."""
    if chunks is None:
        chunks = indexed_chunks(
            client, settings, [expected.source], request.tenant, expected.source
        )
    tenants, headings = locate(expected, chunks)
    if not tenants and request.tenant in headings:
        # The file is there: the heading is what no chunk of it has (a typo, a renamed section).
        known = sorted(PATH_SEPARATOR.join(path) for path in headings[request.tenant] if path)
        shown = "; ".join(known[:MAX_HEADINGS_SHOWN])
        shown += "; ..." if len(known) > MAX_HEADINGS_SHOWN else ""
        explanation.cut = "not indexed"
        explanation.cut_detail = (
            f"not indexed: {expected.source} is, but no section of it is headed "
            f"{PATH_SEPARATOR.join(expected.heading_path)!r} (its headings: {shown or 'none'})"
        )
    elif not tenants:
        explanation.cut = "not indexed"
        explanation.cut_detail = f"not indexed: no chunk of {expected.label()} for any tenant"
    elif request.tenant not in tenants:
        owners = ", ".join(repr(tenant) for tenant in sorted(tenants))
        explanation.cut = "tenant"
        explanation.cut_detail = (
            f"filtered out by tenant: the chunks of {expected.label()} belong to tenant "
            f"{owners}, not {request.tenant!r}"
        )
    elif request.filters.template_params() and _found_without_filters(expected, request, searcher):
        explanation.cut = "filter"
        explanation.cut_detail = "cut by a filter (found once lang, tags and dates are dropped)"
    else:
        explanation.cut = "candidates"
        explanation.cut_detail = (
            f"cut by candidates={request.depth}: no list ranked it in its top {request.depth}"
        )


def _found_without_filters(
    expected: Expected, request: SearchRequest, searcher: Callable[[SearchRequest], _Lists]
) -> bool:
    unfiltered = searcher(request.replace(filters=SearchFilters()))
    matches = _hit_matcher(expected)
    return any(_first(hits, matches)[1] is not None for hits in unfiltered.sides.values()) or (
        _first(unfiltered.retrieved, matches)[1] is not None
    )


def _hit_matcher(expected: Expected) -> Callable[[SearchHit], bool]:
    return lambda hit: expected.matches(hit.source, hit.title, hit.heading_path)


def _load_reranker(
    request: SearchRequest, settings: Settings, reranker: Reranker | None, notes: list[str]
) -> Reranker | None:
    """The reranker when the request reranks and one can be loaded; else a note says why not.
    A rerank asked for when reranker_model is no cross-encoder here is an error, as in search.
    """
    if not request.rerank or reranker is not None:
        return reranker if request.rerank else None
    from loader.models.rerank import load_reranker

    try:
        return load_reranker(settings, request.tenant)  # a learned model: the tenant's
    except RerankerUnavailableError:
        raise
    except ModelError as exc:
        notes.append(f"no rerank stage: {exc}")
        return None


# --- the whole explanation ---------------------------------------------------------------------


def explain(
    request: SearchRequest,
    settings: Settings,
    *,
    expect: str | Expected | None = None,
    client: OpenSearch | None = None,
    embedder: Embedder | None = None,
    reranker: Reranker | None = None,
) -> ExplainReport:
    """Explain where ``request`` puts the expected section, or its top results.

    Args:
        request: the search to explain (``SearchRequest.from_settings``); its ``candidates`` is
            the depth of every list, its ``k`` the context's size.
        settings: resolved settings (the alias, ``rrf_rank_constant``, ``bm25_weight`` ...).
        expect: ``SOURCE[#heading path]``; ``None`` explains the top ``k`` results instead. A
            ``#`` may be part of the file name or a heading (``C#-guide.md#Using C#``): the source
            is the longest leading part (the whole text, or up to a ``#``) that names a document
            the tenant has indexed, else one another tenant has, else the part before the first
            ``#``; one look-up in the index, whose chunks also explain a miss.
        client, embedder, reranker: reuse loaded ones. Without a reranker that can be loaded,
            the rerank stage is left out and a note says why.

    Returns:
        The report.

    Raises:
        ConfigError: a malformed ``expect``.
        ClusterError, QueryError, ModelError: as ``search`` raises them.
    """
    readings = Expected.readings(expect) if isinstance(expect, str) else []
    target = readings[0] if readings else expect
    if client is None:
        client = connect(settings)
        require_cluster(client, settings)  # a cluster that is down is named before any model
    chunks = None
    if len(readings) > 1:  # each '#' may belong to the file name or to a heading
        sources = [reading.source for reading in readings]
        chunks = indexed_chunks(client, settings, sources, request.tenant, str(expect))
        target = Expected.choose(readings, source_owners(chunks), request.tenant)
    report = ExplainReport(request.searched, request.tenant, request.mode, request.k, request.depth)
    report.notes.extend(request.warnings)  # rerank = auto without a cross-encoder
    reranker = _load_reranker(request, settings, reranker, report.notes)
    report.reranker = {"kind": reranker.kind, "model": reranker.name} if reranker else None

    def searcher(wanted: SearchRequest) -> _Lists:
        return _search_lists(wanted, settings, client, embedder, reranker)

    lists = searcher(request)
    report.fusion = lists.fusion
    if target is None:
        for hit in lists.final:
            explanation = Explanation(f"{hit.source}#{PATH_SEPARATOR.join(hit.heading_path)}")
            chunk = hit.chunk_id
            _explain_target(explanation, lists, lambda h, c=chunk: h.chunk_id == c, request)
            report.explanations.append(explanation)
        return report
    explanation = Explanation(target.label())
    _explain_target(explanation, lists, _hit_matcher(target), request)
    if not any(stage.rank for stage in explanation.stages):
        _why_missing(explanation, target, request, settings, searcher, client, chunks)
    report.explanations.append(explanation)
    return report
