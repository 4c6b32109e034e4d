"""The query path: rewrite, embed, retrieve through a stored template, rerank, assemble context.

One call does it all::

    result = search("How long do UPI refunds take?", settings, tenant="acme")
    for hit in result.hits:
        hit.title, hit.heading_path, hit.source, hit.scores["rerank"], hit.ranks["retrieval"]
    result.timings   # {"rewrite_ms": ..., "embed_ms": ..., "retrieve_ms": ..., "rerank_ms": ...,
                     #  "context_ms": ..., "total_ms": ...}

Stages, in order:

1. **rewrite** (optional): a ``QueryRewriter`` turns ``(history, question)`` into one or more
   standalone queries (``loader.query.rewrite``);
2. **embed** every query with the index's model (``settings.embedding_model``), except in ``bm25``
   mode;
3. **retrieve** ``candidates`` chunks per query through the stored search template of the mode
   (``_search/template``; for the hybrid modes the fusion pipeline is passed as the
   ``search_pipeline`` URL parameter). With several queries, their rankings are fused on the
   client by reciprocal rank fusion (``loader.query.fusion.rrf``);
4. **rerank** (optional) every candidate with the cross-encoder against the *first rewritten
   query* (see ``search`` for why), then order by that score;
5. **context**: parent or sentence-window expansion, merging of adjacent chunks, dropping of
   duplicates (``loader.query.context``), then the top ``k``, optionally in prompt order.

Each stage's score and rank is kept on every hit (``scores`` / ``ranks``: ``retrieval``,
``rerank``, and ``query_<n>`` per query when there were several), and each stage's latency in
``SearchResult.timings``.

Long questions are cut to ``MAX_QUESTION_CHARS`` characters, and the BM25 side to
``MAX_BM25_TERMS`` terms, so OpenSearch's ``indices.query.bool.max_clause_count`` (1024 leaf
clauses over the whole query; the multi_match spans four fields) can never be exceeded.
"""

from __future__ import annotations

import dataclasses
import datetime
import logging
import re
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import opensearchpy

from loader.cluster.client import cluster_errors, connect, safe_url
from loader.documents import PATH_SEPARATOR
from loader.errors import ClusterError, ConfigError, QueryError
from loader.index.render import config_names
from loader.query import context
from loader.query.context import Hit
from loader.query.fusion import rrf
from loader.settings import Settings

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

    from loader.models.embedding import Embedder
    from loader.models.rerank import Reranker
    from loader.query.rewrite import QueryRewriter

log = logging.getLogger(__name__)

SEARCH_MODES = ("bm25", "vector", "hybrid-rrf", "hybrid-minmax")
EXPANSIONS = ("parent", "window")
# Characters of a question that are searched; the rest is cut off (the embedder sees at most
# 256 tokens anyway, about 1,000 characters of English).
MAX_QUESTION_CHARS = 2000
# Terms of the question given to BM25: the multi_match spans 4 fields, so 200 terms make at most
# 800 leaf clauses, under OpenSearch's default max_clause_count of 1024 with room for filters.
MAX_BM25_TERMS = 200
# Queries from a rewriter that are searched; more would multiply the latency for little gain.
MAX_QUERIES = 5
# OpenSearch's default index.max_result_window.
MAX_CANDIDATES = 10_000

# Scripts whose analyzers emit one token per character (CJK ideographs, kana, hangul syllables):
# counted one term per character. Other non-ASCII symbols (emoji) are one token each too.
_PER_CHARACTER = "\u3040-\u30ff\u3400-\u4dbf\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff"
_TERM = re.compile(rf"[{_PER_CHARACTER}]|[^\W{_PER_CHARACTER}]+|[^\w\s\x00-\x7f]")
# What OpenSearch accepts as a date filter (the ``published`` field's default format,
# strict_date_optional_time): an ISO date, its time and zone optional. The parts' ranges are
# checked by ``check_date``, so that 2020-13-45 is refused here, not by the cluster.
_ISO_DATE = re.compile(
    r"(?P<year>\d{4})(-(?P<month>\d{2})(-(?P<day>\d{2})"
    r"(T(?P<hour>\d{2})(:(?P<minute>\d{2})(:(?P<second>\d{2})(\.\d{1,9})?)?)?"
    r"(Z|[+-](?P<zone_hour>\d{2}):?(?P<zone_minute>\d{2}))?)?)?)?",
    re.ASCII,
)
# Or date math from now: at most 4 steps of at most 6 digits, so the result stays inside the
# range of a date in milliseconds (a larger one overflows on the server).
_DATE_MATH = re.compile(r"now([+-]\d{1,6}[yMwdhHms]){0,4}(/[yMwdhHms])?", re.ASCII)
# A decay scale is a time value: a whole number (OpenSearch refuses fractions) and a unit.
_TIME_VALUE = re.compile(r"(?P<number>\d{1,15})(?P<unit>nanos|micros|ms|s|m|h|d)", re.ASCII)
_NANOS_PER_UNIT = {
    "nanos": 1,
    "micros": 1_000,
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60_000_000_000,
    "h": 3_600_000_000_000,
    "d": 86_400_000_000_000,
}
# A date decay's scale is used in whole milliseconds: 1 ms up to 10,000 days (27 years).
_MAX_DECAY_MS = 10_000 * 86_400_000


def check_date(name: str, value: object) -> str:
    """``value`` if it is a date filter OpenSearch accepts: an ISO date (``2024-05-01``, with an
    optional ``T10:30:00Z`` time) or date math from now (``now-1y``, ``now-30d/d``).

    Raises:
        ConfigError: naming ``name``, for any other value (``2020-13-45``, ``yesterday``, a number).
    """
    if isinstance(value, datetime.date):  # a date or datetime object: its ISO form
        value = value.isoformat()
    text = value if isinstance(value, str) else None
    match = _ISO_DATE.fullmatch(text) if text is not None else None
    valid = text is not None and bool(_DATE_MATH.fullmatch(text))
    if match:
        parts = {key: int(part) for key, part in match.groupdict().items() if part is not None}
        try:
            datetime.date(parts["year"], parts.get("month", 1), parts.get("day", 1))
            valid = (
                parts.get("hour", 0) <= 23
                and parts.get("minute", 0) <= 59
                and parts.get("second", 0) <= 59
                and parts.get("zone_hour", 0) <= 18
                and parts.get("zone_minute", 0) <= 59
            )
        except ValueError:
            valid = False
    if not valid:
        raise ConfigError(
            f"{name} {_shown(value)} is not a date; give an ISO date such as 2024-05-01 "
            "or date math such as now-1y"
        )
    return str(text)


def check_time_value(name: str, value: object) -> str:
    """``value`` if it is a positive time value OpenSearch accepts as a decay scale: a whole
    number and a unit (``nanos``, ``micros``, ``ms``, ``s``, ``m``, ``h``, ``d``), at least 1 ms.

    Raises:
        ConfigError: naming ``name``, for ``0d``, ``1.5d``, ``-1d``, ``180 days``, a number ...
    """
    match = _TIME_VALUE.fullmatch(value) if isinstance(value, str) else None
    if match is None:
        raise ConfigError(
            f"{name} {_shown(value)} is not a time value; give a whole number and a unit "
            "(nanos, micros, ms, s, m, h, d) such as 180d or 12h"
        )
    nanos = int(match["number"]) * _NANOS_PER_UNIT[match["unit"]]
    if not 1_000_000 <= nanos <= _MAX_DECAY_MS * 1_000_000:
        raise ConfigError(
            f"{name} {_shown(value)} is out of range; give a duration between 1ms and 10000d "
            "(OpenSearch counts it in whole milliseconds and refuses 0)"
        )
    return str(value)


def _shown(value: object, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for messages about a bad parameter."""
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 3] + "..."


@dataclass(frozen=True)
class SearchFilters:
    """Optional filters, passed to the search template as parameters.

    Args:
        lang: only chunks of this language (``lang`` field, e.g. ``en``).
        tags: only chunks carrying at least one of these tags.
        published_from: only chunks published on or after this date (``2024-01-01``, ``now-1y``).
        published_to: only chunks published on or before this date.
        decay_scale: favour recent chunks: the score is halved at ``now - decay_scale`` (``180d``).
    """

    lang: str | None = None
    tags: tuple[str, ...] = ()
    published_from: str | None = None
    published_to: str | None = None
    decay_scale: str | None = None

    def template_params(self) -> dict[str, Any]:
        """The filters as search template parameters; empty ones are left out.

        Raises:
            ConfigError: a date or the decay scale is malformed (named in the message).
        """
        params: dict[str, Any] = {}
        if self.lang:
            params["lang"] = str(self.lang)
        tags = [self.tags] if isinstance(self.tags, str) else list(self.tags or ())
        tags = [str(tag) for tag in tags if str(tag)]
        if tags:
            params["tags"] = tags
        for name in ("published_from", "published_to"):
            value = getattr(self, name)
            if value:
                params[name] = check_date(name, value)
        if self.decay_scale:
            params["decay_scale"] = check_time_value("decay_scale", self.decay_scale)
        return params


@dataclass
class SearchHit(Hit):
    """One result: a ``loader.query.context.Hit`` plus the chunk's metadata.

    ``scores`` / ``ranks`` hold each stage's score and 1-based rank: ``retrieval`` (OpenSearch's
    score, or the client-side RRF score when several queries were fused), ``query_<n>`` (per
    rewritten query, when there were several) and ``rerank`` (the cross-encoder's score).
    """

    collection: str = ""
    tenant: str = ""
    lang: str = ""
    tags: tuple[str, ...] = ()
    published: str = ""
    page: int | None = None

    @property
    def heading(self) -> str:
        """``title > heading > subheading``, for display."""
        return PATH_SEPARATOR.join(part for part in (self.title, *self.heading_path) if part)

    def to_dict(self) -> dict[str, Any]:
        data = dataclasses.asdict(self)
        data["heading_path"] = list(self.heading_path)
        data["tags"] = list(self.tags)
        return data


@dataclass
class SearchResult:
    """What ``search`` found, and how.

    Attributes:
        question: the question as searched (after truncation).
        queries: the queries retrieved for (the rewriter's output, or just the question).
        rerank_query: the text the candidates were reranked against ("" without rerank).
        mode: the search mode.
        tenant: the tenant searched.
        reranked: whether the cross-encoder reordered the candidates.
        candidates: how many distinct candidates retrieval returned.
        hits: the results, best first (or in prompt order with ``prompt_order``).
        timings: milliseconds per stage: rewrite_ms, embed_ms, retrieve_ms, rerank_ms,
            context_ms, total_ms.
        truncated: the question was longer than ``MAX_QUESTION_CHARS`` and was cut.
    """

    question: str
    queries: list[str]
    rerank_query: str
    mode: str
    tenant: str
    reranked: bool
    candidates: int
    hits: list[SearchHit] = field(default_factory=list)
    timings: dict[str, float] = field(default_factory=dict)
    truncated: bool = False

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "hits"}
        data["hits"] = [hit.to_dict() for hit in self.hits]
        return data


def truncate_question(question: str, limit: int = MAX_QUESTION_CHARS) -> str:
    """``question`` cut to at most ``limit`` characters, at a word boundary when one is near."""
    if len(question) <= limit:
        return question
    cut = question[:limit]
    space = cut.rfind(" ", limit - 200)
    return (cut[:space] if space > 0 else cut).rstrip()


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


def _check_arguments(
    question: str, tenant: str, mode: str, k: int, candidates: int, expand: str | None
) -> None:
    for name, value in (("question", question), ("tenant", tenant)):
        if not isinstance(value, str):
            raise ConfigError(
                f"{name} must be a string, got {type(value).__name__} {_shown(value)}"
            )
    if not question.strip():
        raise ConfigError("question is empty; give the text to search for")
    if not tenant.strip():
        raise ConfigError(
            "tenant is required: every search is scoped to one tenant (--tenant, or the tenant "
            "setting)"
        )
    if mode not in SEARCH_MODES:
        raise ConfigError(f"mode {mode!r} is not one of {', '.join(SEARCH_MODES)}")
    for name, value in (("k", k), ("candidates", candidates)):
        # 0 would reach OpenSearch as size 0, which the hybrid query answers with a server error
        # ("score normalization processor cannot produce final query result").
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ConfigError(f"{name} must be a positive whole number, got {_shown(value)}")
    if candidates > MAX_CANDIDATES:
        raise ConfigError(f"candidates must be at most {MAX_CANDIDATES}, got {candidates}")
    if k > MAX_CANDIDATES:
        raise ConfigError(f"k must be at most {MAX_CANDIDATES}, got {k}")
    if expand not in (None, *EXPANSIONS):
        raise ConfigError(f"expand must be one of {', '.join(EXPANSIONS)} or none, got {expand!r}")


def check_search(
    question: str,
    settings: Settings,
    *,
    tenant: str,
    mode: str | None = None,
    k: int | None = None,
    candidates: int | None = None,
    filters: SearchFilters | None = None,
    expand: str | None = None,
) -> dict[str, Any]:
    """Check a search's arguments as ``search`` does, without loading a model or sending a
    request; a front end calls it to refuse bad input before it looks for a model.

    Returns:
        The filters' template parameters.

    Raises:
        ConfigError: the message names the parameter (see ``search``).
    """
    _check_arguments(
        question,
        tenant,
        mode or settings.search_mode,
        settings.top_k if k is None else k,
        settings.candidates if candidates is None else candidates,
        expand,
    )
    return (filters or SearchFilters()).template_params()


def _queries_to_search(
    rewriter: QueryRewriter | None, history: Sequence[dict[str, str]] | None, question: str
) -> list[str]:
    """The rewriter's standalone queries (deduplicated, capped), or ``[question]``."""
    if rewriter is None:
        return [question]
    rewritten = rewriter.rewrite(list(history or []), question)
    queries: list[str] = []
    for query in rewritten or []:
        query = truncate_question(str(query).strip())
        if query and query.lower() not in (q.lower() for q in queries):
            queries.append(query)
    if not queries:
        log.warning("the rewriter returned no query; searching the question as it is")
        return [question]
    if len(queries) > MAX_QUERIES:
        log.warning(
            "the rewriter returned %d queries; searching the first %d", len(queries), MAX_QUERIES
        )
    return queries[:MAX_QUERIES]


def _hit_from_source(document: dict[str, Any]) -> SearchHit:
    source = document.get("_source") or {}
    heading_path = source.get("heading_path") or ""
    tags = source.get("tags") or []
    return SearchHit(
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
        cause = exc.__cause__
        if isinstance(cause, opensearchpy.NotFoundError) and isinstance(cause.info, dict):
            # OpenSearch's own 404 (JSON): a missing alias, template or pipeline, so the
            # configuration was never applied. Another server's 404 page is not that.
            raise ClusterError(
                f"{exc}; run `loader apply` (and `loader push`) for index {alias!r} on "
                f"{safe_url(settings.opensearch_url)} first"
            ) from cause
        if isinstance(cause, opensearchpy.RequestError) and isinstance(cause.info, dict):
            # OpenSearch's own 400: a parameter the checks above let through but the cluster
            # cannot use. The client's fault, so not a ClusterError; no URL in the message.
            raise QueryError(
                f"OpenSearch refused the search as a bad request: {_bad_request_reason(cause)}"
            ) from cause
        raise
    hits = []
    for rank, document in enumerate(response.get("hits", {}).get("hits", []), start=1):
        hit = _hit_from_source(document)
        hit.scores["retrieval"] = float(document.get("_score") or 0.0)
        hit.ranks["retrieval"] = rank
        hits.append(hit)
    return hits


def _bad_request_reason(exc: opensearchpy.TransportError, limit: int = 300) -> str:
    """The reason of OpenSearch's 400, on one line: the root cause's type and reason."""
    error = exc.info.get("error") if isinstance(exc.info, dict) else None
    if isinstance(error, dict):
        root = (error.get("root_cause") or [error])[0]
        reason = f"{root.get('type', '')}: {root.get('reason', '')}".strip(": ")
    else:
        reason = str(error or exc.error)
    reason = " ".join(reason.split())
    return reason if len(reason) <= limit else reason[: limit - 3] + "..."


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


def _milliseconds(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 3)


def search(
    question: str,
    settings: Settings,
    *,
    tenant: str,
    mode: str | None = None,
    rerank: bool | None = None,
    k: int | None = None,
    candidates: int | None = None,
    filters: SearchFilters | None = None,
    expand: str | None = None,
    merge_adjacent: bool = False,
    prompt_order: bool = False,
    history: Sequence[dict[str, str]] | None = None,
    rewriter: QueryRewriter | None = None,
    client: OpenSearch | None = None,
    embedder: Embedder | None = None,
    reranker: Reranker | None = None,
) -> SearchResult:
    """Search the index behind ``settings.index_name`` for one tenant.

    Args:
        question: the user's (latest) message.
        settings: resolved settings (index_name, search_mode, candidates, top_k, models ...).
        tenant: the tenant to search; required and never widened by any other parameter.
        mode: ``bm25``, ``vector``, ``hybrid-rrf`` or ``hybrid-minmax`` (default
            ``settings.search_mode``).
        rerank: rerank the candidates with the cross-encoder (``settings.reranker_model``);
            default ``settings.rerank``.
        k: results returned (default ``settings.top_k``).
        candidates: chunks retrieved per query before the rerank (default
            ``settings.candidates``; at least ``k`` are retrieved).
        filters: language, tags, publication dates and recency decay.
        expand: ``"parent"`` replaces each chunk by its parent section (one hit per section),
            ``"window"`` by its sentence window; ``None`` keeps the chunks.
        merge_adjacent: merge consecutive chunks of one document into one hit.
        prompt_order: return the hits best-at-the-edges ("lost in the middle") instead of best
            first.
        history: earlier chat turns ``[{"role", "content"}]``, given to the rewriter.
        rewriter: turns ``(history, question)`` into 1..N standalone queries. With several, each
            is retrieved and the rankings are fused by RRF. The rerank scores the candidates
            against the *first* rewritten query: the latest message alone may be a follow-up
            ("what about for UPI?") that a cross-encoder cannot judge passages against, while
            the rewriter's first query is standalone and carries the main intent.
        client, embedder, reranker: reuse loaded ones (default: from the settings, loaded once
            per process).

    Returns:
        The ``SearchResult``: hits with every stage's score and rank, and per-stage timings.

    Raises:
        ConfigError: an empty question or tenant, an unknown mode or expansion, a number below
            1, a malformed date or decay scale (the message names the parameter).
        QueryError: OpenSearch still refused the search as a bad request (HTTP 400).
        ModelError: the embedding or reranking model cannot be loaded.
        ClusterError: OpenSearch cannot be reached or refused the search (its reason kept).

    Context steps (expansion, merging, duplicate removal) run on the whole reranked candidate list
    before the top ``k`` are taken, so up to ``k`` distinct pieces of context come back; duplicate
    removal runs whenever ``expand`` or ``merge_adjacent`` is on.
    """
    started = time.perf_counter()
    mode = mode or settings.search_mode
    rerank = settings.rerank if rerank is None else rerank
    k = settings.top_k if k is None else k
    candidates = settings.candidates if candidates is None else candidates
    filter_params = check_search(
        question,
        settings,
        tenant=tenant,
        mode=mode,
        k=k,
        candidates=candidates,
        filters=filters,
        expand=expand,
    )
    template_id, pipeline = config_names(settings.index_name).for_search_mode(mode)
    depth = max(candidates, k)

    question = question.strip()
    searched = truncate_question(question)
    truncated = searched != question
    if truncated:
        log.warning(
            "question of %d characters cut to %d for the search", len(question), len(searched)
        )
    timings = dict.fromkeys(
        ("rewrite_ms", "embed_ms", "retrieve_ms", "rerank_ms", "context_ms", "total_ms"), 0.0
    )

    # Load the models before any request: a model that cannot load fails the search up front.
    if rerank and reranker is None:
        from loader.models.rerank import load_reranker

        reranker = load_reranker(settings)
    if mode != "bm25" and embedder is None:
        from loader.models.embedding import get_embedder

        embedder = get_embedder(
            settings.embedding_model, settings.device, settings.embedding_batch_size
        )
    client = client or connect(settings)

    stage = time.perf_counter()
    queries = _queries_to_search(rewriter, history, searched)
    timings["rewrite_ms"] = _milliseconds(stage)

    vectors: list[list[float] | None] = [None] * len(queries)
    if mode != "bm25":
        stage = time.perf_counter()
        assert embedder is not None
        vectors = [vector.tolist() for vector in embedder.embed(queries)]
        timings["embed_ms"] = _milliseconds(stage)

    stage = time.perf_counter()
    rankings = []
    for query, vector in zip(queries, vectors, strict=True):
        params: dict[str, Any] = {
            "query_text": bm25_text(query),
            "tenant": tenant,
            "size": depth,
            "k": depth,
            **filter_params,
        }
        if vector is not None:
            params["query_vector"] = vector
        rankings.append(_retrieve(client, settings, template_id, pipeline, params))
    hits = rankings[0] if len(rankings) == 1 else _fuse(rankings, settings.rrf_rank_constant)
    timings["retrieve_ms"] = _milliseconds(stage)
    retrieved = len(hits)

    rerank_query = ""
    if rerank and hits:
        assert reranker is not None
        stage = time.perf_counter()
        rerank_query = queries[0]
        scores = reranker.rerank(rerank_query, [hit.text or hit.body for hit in hits])
        for hit, score in zip(hits, scores, strict=True):
            hit.scores["rerank"] = score
        # sorted() is stable: equal scores keep their retrieval order.
        hits = sorted(hits, key=lambda hit: -hit.scores["rerank"])
        for rank, hit in enumerate(hits, start=1):
            hit.ranks["rerank"] = rank
        timings["rerank_ms"] = _milliseconds(stage)

    stage = time.perf_counter()
    if expand == "parent":
        hits = context.expand_parents(hits)
    elif expand == "window":
        hits = context.expand_windows(hits)
    if merge_adjacent:
        hits = context.merge_adjacent(hits)
    if expand or merge_adjacent:
        hits = context.drop_overlapping_duplicates(hits)
    hits = hits[:k]
    if prompt_order:
        hits = context.order_for_prompt(hits)
    timings["context_ms"] = _milliseconds(stage)
    timings["total_ms"] = _milliseconds(started)
    log.debug("search %r (%s, tenant %r): %s", searched, mode, tenant, timings)
    return SearchResult(
        question=searched,
        queries=queries,
        rerank_query=rerank_query,
        mode=mode,
        tenant=tenant,
        reranked=bool(rerank_query),
        candidates=retrieved,
        hits=hits,
        timings=timings,
        truncated=truncated,
    )


SNIPPET_CHARS = 300
_WHITESPACE = re.compile(r"\s+")


def format_result(result: SearchResult, snippet_chars: int = SNIPPET_CHARS) -> list[str]:
    """Plain-text lines for a result, as ``loader search`` prints them.

    Per hit: rank, ``title > heading path`` and source; the chunk id and every stage's rank and
    score; the text, whitespace collapsed and cut at ``snippet_chars``. Then one summary line.

    Example::

        1. Printer manual > Error codes  (printer.md)
           chunk 4090d2d8bd4a34f674d6-0 | retrieval #1 1.9237 | rerank #1 0.5131
           Error E1043 means the paper tray is empty. Refill the tray and press resume.

        1 result of 3 candidates for tenant 'A' (bm25, reranked) in 41.2 ms: embed 0.0 ms, ...
    """
    lines = []
    if result.truncated:
        lines.append(
            f"! the question was cut to {len(result.question)} characters "
            f"(limit {MAX_QUESTION_CHARS})"
        )
    if len(result.queries) > 1 or result.queries != [result.question]:
        lines.append("queries: " + " | ".join(result.queries))
    for number, hit in enumerate(result.hits, start=1):
        lines.append(f"{number}. {hit.heading}  ({hit.source})")
        stages = [f"chunk {hit.chunk_id}"]
        for stage, rank in hit.ranks.items():
            stages.append(f"{stage} #{rank} {hit.scores.get(stage, 0.0):.4f}")
        lines.append("   " + " | ".join(stages))
        text = _WHITESPACE.sub(" ", hit.body).strip()
        if len(text) > snippet_chars:
            text = text[:snippet_chars].rstrip() + "…"
        lines.append(f"   {text}")
    timings = result.timings
    count = len(result.hits)
    lines.append(
        f"{count} result{'' if count == 1 else 's'} of {result.candidates} "
        f"candidate{'' if result.candidates == 1 else 's'} for tenant "
        f"{result.tenant!r} ({result.mode}, {'reranked' if result.reranked else 'no rerank'}) in "
        f"{timings['total_ms']:.1f} ms: embed {timings['embed_ms']:.1f} ms, retrieve "
        f"{timings['retrieve_ms']:.1f} ms, rerank {timings['rerank_ms']:.1f} ms"
    )
    return lines
