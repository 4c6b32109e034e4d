"""``asearch``, the query path on asyncio, without a cluster: the same calls and the same
result as ``search``, its answers read the same way, and its errors the same."""

from __future__ import annotations

import asyncio

import opensearchpy
import pytest

from loader.errors import ClusterUnavailableError, QueryError
from loader.query.request import SearchFilters, SearchRequest
from loader.query.search import asearch, search
from tests.unit.query.fakes import (
    CORPUS,
    SETTINGS,
    FakeAsyncClient,
    FakeClient,
    FakeEmbedder,
    FakeReranker,
    FakeRewriter,
    chunk,
)


def both(question: str = "q", answers=None, rewriter=None, **options):
    """``search`` and ``asearch`` of one request: their results and their clients."""
    answers = answers or {"q": CORPUS}
    request = SearchRequest.from_settings(SETTINGS, question, tenant="A", **options)
    sync_client, async_client = FakeClient(answers), FakeAsyncClient(answers)
    models = {"embedder": FakeEmbedder(), "reranker": FakeReranker(), "rewriter": rewriter}
    expected = search(request, SETTINGS, client=sync_client, **models)
    result = asyncio.run(asearch(request, SETTINGS, client=async_client, **models))
    return expected, result, sync_client, async_client


@pytest.mark.parametrize("mode", ["bm25", "vector", "hybrid-rrf", "hybrid-minmax"])
def test_the_same_calls_and_hits_as_search(mode: str) -> None:
    filters = SearchFilters(lang="en", tags=("x",))
    expected, result, sync_client, async_client = both(
        mode=mode, k=2, filters=filters, one_per_document=True
    )
    assert async_client.calls == sync_client.calls
    assert [hit.to_dict() for hit in result.hits] == [hit.to_dict() for hit in expected.hits]
    assert (result.reranked, result.candidates, result.queries) == (True, 3, ["q"])
    assert set(result.timings) == set(expected.timings)


def test_a_rewrite_s_queries_are_sent_and_fused_alike() -> None:
    answers = {
        "one": [chunk("a-0", "x"), chunk("b-0", "y")],
        "two": [chunk("c-0", "z"), chunk("a-0", "x")],
    }
    expected, result, sync_client, async_client = both(
        "question", answers, FakeRewriter(["one", "two"]), rerank=False
    )
    assert len(async_client.calls) == 2 and async_client.calls == sync_client.calls
    assert [hit.chunk_id for hit in result.hits] == [hit.chunk_id for hit in expected.hits]
    assert result.hits[0].ranks == expected.hits[0].ranks


class _Refusing(FakeAsyncClient):
    def __init__(self, error: Exception) -> None:
        super().__init__({})
        self.error = error

    async def search_template(self, **kwargs):
        raise self.error


def test_errors_are_search_s() -> None:
    request = SearchRequest.from_settings(SETTINGS, "q", tenant="A", rerank=False)
    models = {"embedder": FakeEmbedder()}
    refused = opensearchpy.RequestError(
        400, "x", {"error": {"root_cause": [{"type": "parsing_exception", "reason": "bad"}]}}
    )
    with pytest.raises(QueryError, match="bad request: parsing_exception: bad"):
        asyncio.run(asearch(request, SETTINGS, client=_Refusing(refused), **models))
    down = opensearchpy.ConnectionError("N/A", "refused", Exception())
    with pytest.raises(ClusterUnavailableError, match="cannot connect"):
        asyncio.run(asearch(request, SETTINGS, client=_Refusing(down), **models))


def test_without_a_client_the_cluster_is_asked_first() -> None:
    # unit tests point OPENSEARCH_URL at a port where nothing answers
    request = SearchRequest.from_settings(
        SETTINGS.replace(opensearch_url="http://127.0.0.1:9"), "q", tenant="A", rerank=False
    )
    with pytest.raises(ClusterUnavailableError, match="while checking that OpenSearch answers"):
        asyncio.run(asearch(request, SETTINGS.replace(opensearch_url="http://127.0.0.1:9")))
