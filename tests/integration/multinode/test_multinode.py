"""apply, push and search against a real 3-node cluster, unchanged: an index of 3 shards and 1
replica is green, its copies are spread over the nodes, and it answers like a single node."""

from __future__ import annotations

from collections import Counter

import pytest

from loader.index.apply import apply_config
from loader.ingest.sync import push
from loader.query.request import SearchRequest
from loader.query.search import search
from loader.settings import Settings

from .cluster_fixtures import (
    assert_copies_agree,
    delete_index,
    indexed_chunks,
    planned_chunks,
    shard_copies,
    write_corpus,
)

STATIONS = range(40)


@pytest.fixture
def settings(three_nodes, index_name, embedder):
    settings = Settings(
        opensearch_url=three_nodes.url,
        index_name=index_name,
        number_of_shards=3,
        number_of_replicas=1,
    )
    client = three_nodes.client()
    yield settings
    delete_index(client, index_name)


def test_apply_push_search_on_three_nodes(three_nodes, settings, embedder, tmp_path):
    client = three_nodes.client()
    alias = settings.index_name
    node_names = {node.name for node in three_nodes.nodes}

    apply_config(settings, dimension=embedder.dimension, client=client)
    health = client.cluster.health(index=alias, wait_for_status="green", request_timeout=60)
    assert health["status"] == "green" and health["number_of_nodes"] == 3
    assert (health["active_primary_shards"], health["active_shards"]) == (3, 6)

    copies = shard_copies(client, alias)
    assert Counter(row["prirep"] for row in copies) == {"p": 3, "r": 3}
    assert {row["node"] for row in copies} == node_names  # every node holds a copy
    for shard in ("0", "1", "2"):  # a primary and its replica never share a node
        assert len({row["node"] for row in copies if row["shard"] == shard}) == 2

    folder = tmp_path / "stations"
    write_corpus(folder, STATIONS)
    report = push(folder, settings, client=client, embedder=embedder)
    assert (report.added, report.updated, report.failed, report.chunks_deleted) == (40, 0, 0, 0)
    assert report.chunks_written == report.chunks == report.embedded

    expected = planned_chunks(folder, settings, embedder)
    assert indexed_chunks(client, alias) == expected
    assert client.count(index=alias)["count"] == len(expected)
    assert_copies_agree(client, alias, len(expected))  # replicas hold what the primaries hold

    # The keeper + place pair names exactly one station (station 27: Hugo, Corlan point).
    for mode in ("bm25", "vector", "hybrid-rrf"):
        request = SearchRequest.from_settings(
            settings,
            "Who keeps the lighthouse of Corlan point number 27?",
            tenant="default",
            mode=mode,
            rerank=False,
            k=3,
        )
        result = search(request, settings, client=client, embedder=embedder)
        assert result.hits, mode
        assert result.hits[0].source == "station-0027.md", (mode, result.hits[0].source)

    again = push(folder, settings, client=client, embedder=embedder)
    assert (again.unchanged, again.chunks_written, again.chunks_deleted) == (40, 0, 0)
