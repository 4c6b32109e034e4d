"""`loader apply` with ``query_log = "ubi"`` on the session's cluster: the log's indices are plan
steps, retention deletes what is older than ``query_log_retention_days``, and the library's
search writes one UBI document per search (tenant-scoped, no vector)."""

from __future__ import annotations

import datetime as dt

from loader.index.apply import apply_config, plan_apply
from loader.query.query_log import queries_index, tenant_queries
from loader.query.request import SearchRequest
from loader.query.search import search


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
    assert [q["query_id"] for q in tenant_queries(client, settings, "B")] == []

    plan = apply_config(settings, dimension=embedder.dimension, client=client)
    assert f"- delete query log retention {index} (1 entries older than 30 days)" in plan.lines()
    client.indices.refresh(index=index)
    assert [hit["_id"] for hit in client.search(index=index)["hits"]["hits"]] == [result.query_id]
    assert not plan_apply(settings, dimension=embedder.dimension, client=client).has_changes
