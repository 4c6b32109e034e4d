"""`loader apply` with ``query_log = "ubi"`` on the session's cluster: the log's indices are plan
steps, retention deletes what is older than ``query_log_retention_days``, and the library's
search writes one UBI document per search (tenant-scoped, no vector)."""

from __future__ import annotations

import asyncio
import datetime as dt

from loader.cluster.client import connect_async
from loader.index.apply import apply_config, plan_apply
from loader.query.query_log import queries_index, tenant_queries
from loader.query.request import SearchRequest
from loader.query.search import asearch, search


def _lines(plan) -> list[str]:
    return [line for line in plan.lines() if "query log" in line]


def test_apply_creates_the_log_indices_and_keeps_them_within_retention(
    client, base_settings, embedder, unique_name
):
    off = base_settings.replace(index_name=unique_name)
    assert _lines(plan_apply(off, dimension=embedder.dimension, client=client)) == []

    settings = off.replace(query_log="ubi", query_log_retention_days=30, rerank="off")
    plan = apply_config(settings, dimension=embedder.dimension, client=client)
    assert _lines(plan) == [
        f"+ create query log index {unique_name}-judgments",
        f"+ create query log index {unique_name}-ubi_events",
        f"+ create query log index {unique_name}-ubi_queries",
    ]
    index = queries_index(unique_name)
    old = (dt.datetime.now(dt.UTC) - dt.timedelta(days=45)).isoformat()
    client.index(
        index=index,
        id="old",
        body={"timestamp": old, "user_query": "old", "query_attributes": {"tenant": "A"}},
    )
    result = search(
        SearchRequest.from_settings(settings, "refund", tenant="A", mode="bm25"),
        settings,
        client=client,
    )
    assert result.query_id
    client.indices.refresh(index=index)
    assert client.count(index=index)["count"] == 2
    logged = client.get(index=index, id=result.query_id)["_source"]
    assert logged["query_attributes"]["tenant"] == "A" and "vector" not in str(logged)
    assert [q["query_id"] for q in tenant_queries(client, settings.index_name, "B")] == []

    plan = apply_config(settings, dimension=embedder.dimension, client=client)
    assert f"- delete query log retention {index} (1 entries older than 30 days)" in plan.lines()
    client.indices.refresh(index=index)
    assert [hit["_id"] for hit in client.search(index=index)["hits"]["hits"]] == [result.query_id]
    assert not plan_apply(settings, dimension=embedder.dimension, client=client).has_changes


def test_an_async_search_is_logged_with_its_own_client(
    client, base_settings, embedder, unique_name, monkeypatch
):
    """asearch writes the log entry with its async client: no synchronous client a search."""

    def no_sync_client(settings):
        raise AssertionError("asearch opened a synchronous client")

    monkeypatch.setattr("loader.query.search.connect", no_sync_client)
    settings = base_settings.replace(index_name=unique_name, query_log="ubi", rerank="off")
    apply_config(settings, dimension=embedder.dimension, client=client)
    request = SearchRequest.from_settings(settings, "refund", tenant="A", mode="bm25")

    async def logged_search():
        async_client = connect_async(settings)
        try:
            return await asearch(request, settings, client=async_client)
        finally:
            await async_client.close()

    result = asyncio.run(logged_search())
    assert result.query_id
    logged = client.get(index=queries_index(unique_name), id=result.query_id)["_source"]
    assert logged["user_query"] == "refund" and logged["query_attributes"]["tenant"] == "A"
