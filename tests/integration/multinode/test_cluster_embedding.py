"""`embedding_location = cluster` on the 3-node cluster: the model deployed on every node embeds
what push sends as text, giving the chunk ids, hashes and search results of a client-side push;
a node killed mid-push still converges on the rerun, with every chunk carrying its vector. A
second reader runs in fp32 here: its int8 copy run by ml-commons and by this process gives vectors
at a cosine of only 0.996 to each other (tests/integration/ingest/test_cluster_embedding.py).

The first apply registers the model and deploys it on the three nodes (about a minute on two busy
cores); both tests share that deployment.
"""

from __future__ import annotations

import numpy as np
import pytest

from loader.index import ml_model as ml
from loader.index.apply import apply_config
from loader.index.render import config_names
from loader.ingest.sync import push
from loader.query.request import SearchRequest
from loader.query.search import search
from loader.settings import Settings

from .cluster_fixtures import (
    assert_copies_agree,
    delete_index,
    indexed_chunks,
    planned_chunks,
    push_through_node_loss,
    write_corpus,
)

# Embedding inside bulk requests on 3 small nodes: give them time (see loader/ingest/bulk.py).
TIMEOUT = 120.0


def cluster_settings(three_nodes, index_name: str, **changes) -> Settings:
    return Settings(
        opensearch_url=three_nodes.url,
        index_name=index_name,
        number_of_shards=3,
        number_of_replicas=1,
        embedding_location="cluster",
        second_embedding_backend="onnx",  # see the docstring
        request_timeout=TIMEOUT,
        **changes,
    )


def vectors(client, alias: str) -> dict[str, list[float]]:
    from opensearchpy import helpers

    client.indices.refresh(index=alias)
    hits = helpers.scan(client, index=alias, query={"_source": ["embedding"]}, size=500)
    return {hit["_id"]: hit["_source"].get("embedding") for hit in hits}


def deployed_model(client, settings: Settings) -> dict:
    """The ml-commons model the alias's ingest pipeline embeds with."""
    name = config_names(settings.index_name).ingest_pipeline
    processor = ml.embedding_processor(client.ingest.get_pipeline(id=name)[name])
    assert processor is not None, name
    return client.transport.perform_request("GET", f"/_plugins/_ml/models/{processor['model_id']}")


def test_cluster_push_on_three_nodes_equals_client_push(
    three_nodes, index_name, embedder, tmp_path
):
    client = three_nodes.client(timeout=TIMEOUT)
    remote = cluster_settings(three_nodes, index_name)
    local = remote.replace(index_name=f"{index_name}-client", embedding_location="client")
    folder = tmp_path / "stations"
    write_corpus(folder, range(40))
    try:
        for settings in (remote, local):
            apply_config(settings, dimension=embedder.dimension, client=client)
            client.cluster.health(
                index=settings.index_name, wait_for_status="green", request_timeout=60
            )
        model = deployed_model(client, remote)
        assert model["model_state"] == "DEPLOYED"
        assert model["current_worker_node_count"] == 3  # ML work on every node
        report = push(folder, remote, client=client, embedder=embedder)
        assert (report.added, report.failed, report.embedding_location) == (40, 0, "cluster")
        assert report.embedded == report.chunks_written == report.chunks
        push(folder, local, client=client, embedder=embedder)

        expected = planned_chunks(folder, remote, embedder)
        assert indexed_chunks(client, remote.index_name) == expected
        assert indexed_chunks(client, local.index_name) == expected
        assert_copies_agree(client, remote.index_name, len(expected))
        made, wanted = vectors(client, remote.index_name), vectors(client, local.index_name)
        ids = sorted(expected)
        a = np.array([made[i] for i in ids])
        b = np.array([wanted[i] for i in ids])
        cosine = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
        assert cosine.min() >= 0.999, cosine.min()

        question = "Who keeps the lighthouse of Corlan point number 27?"
        for mode in ("bm25", "vector", "hybrid-rrf"):
            ranked = []
            for settings in (remote, local):
                request = SearchRequest.from_settings(
                    settings, question, tenant="default", mode=mode, rerank=False, k=5
                )
                result = search(request, settings, client=client, embedder=embedder)
                ranked.append([hit.chunk_id for hit in result.hits])
            assert ranked[0] == ranked[1], mode
            top = search(
                SearchRequest.from_settings(
                    remote, question, tenant="default", mode=mode, rerank=False, k=1
                ),
                remote,
                client=client,
                embedder=embedder,
            )
            assert top.hits[0].source == "station-0027.md", mode
    finally:
        delete_index(client, remote.index_name)
        delete_index(client, local.index_name)


def test_node_loss_mid_cluster_push_converges(three_nodes, index_name, embedder, tmp_path):
    """SIGKILL node 3 while the cluster embeds a push of 200 documents in small bulks; start it
    again. The push completes or fails loudly; a rerun completes; the index holds exactly the
    planned chunks, each with its vector."""
    settings = cluster_settings(three_nodes, index_name, bulk_batch_size=5)
    client = three_nodes.client(timeout=TIMEOUT)
    apply_config(settings, dimension=embedder.dimension, client=client)
    client.cluster.health(index=index_name, wait_for_status="green", request_timeout=60)
    folder = tmp_path / "stations"
    write_corpus(folder, range(200))
    expected = planned_chunks(folder, settings, embedder)
    try:
        loss = push_through_node_loss(
            three_nodes,
            folder,
            settings,
            embedder,
            request_timeout=TIMEOUT,
            start_timeout=240,
            join_timeout=600,
        )
        report = loss.report
        rerun = push(folder, settings, client=client, embedder=embedder)
        assert rerun.failed == 0, rerun.errors[:3]
        assert indexed_chunks(client, index_name) == expected
        stored = vectors(client, index_name)
        assert all(v is not None and len(v) == embedder.dimension for v in stored.values())
        assert_copies_agree(client, index_name, len(expected))
        print(
            f"cluster node loss: {loss.written_before} of {len(expected)} chunks before the "
            f"kill; push {'completed' if report and not report.failed else 'failed'} "
            f"{loss.seconds_after_kill:.1f} s after it; rerun embedded {rerun.embedded}, "
            f"wrote {rerun.chunks_written}"
        )
    finally:
        delete_index(three_nodes.client(), index_name)


@pytest.fixture(autouse=True)
def _node_three_running(three_nodes):
    """A failed kill test must not leave the package's cluster with two nodes."""
    yield
    node = three_nodes.nodes[2].container
    node.reload()
    if node.status != "running":
        three_nodes.start(2)
        three_nodes.wait_healthy("green")
