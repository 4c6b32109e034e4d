"""The retrieve stage of a search: each query is one stored-template call (``TemplateCall``),
sent with the blocking client (``send``) or the asyncio one (``send_async``), and the answers
become one ranking (``ranked_hits``): another tenant's chunks dropped, several queries fused by
reciprocal rank fusion, one hit per document when asked.

``loader.query.search`` runs it between the embed and the rerank stages; both its ``search``
and ``asearch`` build the same calls and read the answers the same way, so only the sending
differs.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import opensearchpy

from loader.cluster.client import bad_request_reason, cluster_errors, safe_url
from loader.errors import ClusterError, QueryError
from loader.index.render import config_names
from loader.index.search_params import template_url_params
from loader.query.fusion import rrf
from loader.query.request import SearchRequest
from loader.query.result import SearchHit, hits_from_response
from loader.settings import Settings

if TYPE_CHECKING:
    from opensearchpy import AsyncOpenSearch, OpenSearch

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TemplateCall:
    """One ``_search/template`` call: the alias, the stored template, the fusion pipeline (the
    ``search_pipeline`` URL parameter of the hybrid modes) and the template's parameters."""

    index: str
    template_id: str
    pipeline: str | None
    params: dict[str, Any]

    def arguments(self) -> dict[str, Any]:
        """The keyword arguments of ``search_template``, for either client."""
        return {
            "index": self.index,
            "body": {"id": self.template_id, "params": self.params},
            "params": template_url_params(self.pipeline),
        }


def template_calls(
    request: SearchRequest,
    index_name: str,
    texts: Sequence[str],
    vectors: Sequence[list[float] | None],
    second_vectors: Sequence[list[float] | None] | None = None,
) -> list[TemplateCall]:
    """One call per query to the index ``index_name`` serves, through the mode's stored template
    (and fusion pipeline): its text (bounded for BM25: ``loader.query.search.bm25_text``), its
    vector (``None`` in bm25 mode) and the second reader's (``None`` without one)."""
    template_id, pipeline = config_names(index_name).for_search_mode(request.mode)
    seconds = second_vectors if second_vectors is not None else [None] * len(texts)
    return [
        TemplateCall(
            index_name, template_id, pipeline, request.template_params(text, vector, second)
        )
        for text, vector, second in zip(texts, vectors, seconds, strict=True)
    ]


def send(client: OpenSearch, settings: Settings, call: TemplateCall) -> dict[str, Any]:
    """OpenSearch's answer to ``call``.

    Raises:
        QueryError: OpenSearch refused it as a bad request (400).
        ClusterError: the alias, template or pipeline is missing (``loader apply``), or the
            cluster failed (reason kept).
    """
    with _search_errors(settings, call):
        return client.search_template(**call.arguments())


async def send_async(
    client: AsyncOpenSearch, settings: Settings, call: TemplateCall
) -> dict[str, Any]:
    """``send`` with the asyncio client (``loader.cluster.client.connect_async``)."""
    with _search_errors(settings, call):
        return await client.search_template(**call.arguments())


def send_lookup(
    client: OpenSearch, settings: Settings, lines: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The answers of a reranker's lookup (``loader.models.rerank.Reranker.lookup``), sent as one
    ``_msearch``, in order.

    Raises:
        ClusterError: the cluster failed, or one of the searches did (reason kept).
    """
    with cluster_errors(settings, "looking up the candidates' features for the rerank"):
        answer = client.msearch(body=lines)
    return _lookup_answers(settings.opensearch_url, answer)


async def send_lookup_async(
    client: AsyncOpenSearch, settings: Settings, lines: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """``send_lookup`` with the asyncio client."""
    with cluster_errors(settings, "looking up the candidates' features for the rerank"):
        answer = await client.msearch(body=lines)
    return _lookup_answers(settings.opensearch_url, answer)


def _lookup_answers(opensearch_url: str, answer: dict[str, Any]) -> list[dict[str, Any]]:
    responses = list(answer.get("responses") or [])
    for response in responses:
        if "error" in response:  # _msearch answers 200 with each search's own failure
            raise ClusterError(
                f"the rerank's feature lookup failed on {safe_url(opensearch_url)}: "
                f"{response['error']}",
                public_reason="the rerank's feature lookup failed on OpenSearch",
            )
    return responses


def ranked_hits(
    request: SearchRequest,
    calls: Sequence[TemplateCall],
    answers: Sequence[dict[str, Any]],
    rrf_rank_constant: int,
) -> list[SearchHit]:
    """The hits of the calls' answers, each with its retrieval score and rank; several queries'
    fused by RRF (``rrf_rank_constant``), then kept one per document if asked."""
    rankings = [
        _own_tenant(hits_from_response(answer), call.params["tenant"], call.template_id)
        for call, answer in zip(calls, answers, strict=True)
    ]
    if len(rankings) == 1:
        return rankings[0]
    fused = _fuse(rankings, rrf_rank_constant)
    return _best_per_document(fused) if request.one_per_document else fused


@contextlib.contextmanager
def _search_errors(settings: Settings, call: TemplateCall) -> Iterator[None]:
    """``cluster_errors``, with the clearer errors of ``_explained``."""
    doing = f"searching {call.index!r} with template {call.template_id!r}"
    try:
        with cluster_errors(settings, doing):
            yield
    except ClusterError as exc:
        explained = _explained(exc, settings, call.pipeline)
        if explained is exc:
            raise
        raise explained from exc.__cause__


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
