"""`embedding_location = cluster` on the dev node: `loader apply` puts a text_embedding processor
with the registered model into the index's ingest pipeline, `loader push` sends text only for
chunks whose vector the index lacks, and the result equals a client-side push of the same folder
into another alias: the same chunk ids and hashes, vectors at a cosine >= 0.999, the same search
results. With a second reader (bge, its jar here) the cluster embeds its field too; the module
runs it in fp32 (`second_embedding_backend = "onnx"`), because its int8 copy, the same file run
by ml-commons' onnxruntime and by this process's, gives vectors at a cosine of only 0.996 to each
other (measured on the sample docs), enough to swap a fifth hit. Re-pushes reuse the stored
vectors (a vector the test plants is kept, not re-embedded); a push without the processor is
refused.

Needs the project's image with ml-commons. The module shares one model deployment and one pair
of indices (the sample docs/: 43 chunks, embedded by the cluster in seconds).
"""

from __future__ import annotations

import shutil
import uuid

import numpy as np
import pytest
from opensearchpy import helpers

from loader.errors import ConfigError
from loader.index.apply import apply_config
from loader.index.render import config_names
from loader.ingest.sync import push
from loader.models.readers import reader_settings
from loader.query.request import SearchRequest
from loader.query.search import search
from tests.conftest import cleanup_owned
from tests.paths import SAMPLE_DOCS

QUESTIONS = [
    "How long do refunds take for late deliveries?",
    "Which areas do you deliver to?",
    "Does the food contain nuts or other allergens?",
    "How do I delete my account?",
    "My payment failed, what now?",
]
MODES = ("bm25", "vector", "hybrid-rrf", "hybrid-minmax")


def chunk_state(client, alias: str) -> dict[str, dict]:
    """chunk id -> {content_hash, doc_hash, embedding}, straight from the index."""
    client.indices.refresh(index=alias)
    fields = ["content_hash", "doc_hash", "embedding"]
    hits = helpers.scan(client, index=alias, query={"_source": fields}, size=500)
    return {hit["_id"]: hit["_source"] for hit in hits}


def cosines(a: dict[str, dict], b: dict[str, dict]) -> np.ndarray:
    ids = sorted(a)
    left = np.array([a[i]["embedding"] for i in ids], dtype=np.float64)
    right = np.array([b[i]["embedding"] for i in ids], dtype=np.float64)
    return (left * right).sum(axis=1) / (
        np.linalg.norm(left, axis=1) * np.linalg.norm(right, axis=1)
    )


@pytest.fixture(scope="module")
def pushed(client, base_settings, embedder, tmp_path_factory):
    """docs/ pushed twice under the same collection: into a client-side alias and into a
    cluster-side one (apply with embedding_location = cluster first)."""
    folder = tmp_path_factory.mktemp("cluster-embedding") / "docs"
    shutil.copytree(SAMPLE_DOCS, folder)
    prefix = f"t-cluster-emb-{uuid.uuid4().hex[:8]}"
    base_settings = base_settings.replace(second_embedding_backend="onnx")  # see the docstring
    local = base_settings.replace(index_name=f"{prefix}-client")
    remote = base_settings.replace(
        index_name=f"{prefix}-cluster", embedding_location="cluster", request_timeout=300.0
    )
    try:
        apply_config(local, dimension=embedder.dimension, client=client)
        plan = apply_config(remote, dimension=embedder.dimension, client=client)
        local_report = push(folder, local, client=client, embedder=embedder)
        remote_report = push(folder, remote, client=client, embedder=embedder)
        yield {
            "folder": folder,
            "local": local,
            "remote": remote,
            "plan": plan,
            "local_report": local_report,
            "remote_report": remote_report,
        }
    finally:
        cleanup_owned(client, prefix)


def test_apply_puts_the_processor_with_the_deployed_model(client, pushed):
    remote = pushed["remote"]
    assert any(c.kind == "ml model" for c in pushed["plan"].changes)
    name = config_names(remote.index_name).ingest_pipeline
    processors = [
        p["text_embedding"]
        for p in client.ingest.get_pipeline(id=name)[name]["processors"]
        if "text_embedding" in p
    ]
    fields = ["embedding"] + (["second_embedding"] if reader_settings(remote) else [])
    assert [processor["field_map"] for processor in processors] == [
        {"content": field} for field in fields
    ]
    ids = {processor["model_id"] for processor in processors}
    assert len(ids) == len(fields)  # each reader its own model
    for model_id in ids:
        model = client.transport.perform_request("GET", f"/_plugins/_ml/models/{model_id}")
        assert model["model_state"] == "DEPLOYED"
    # The model is on the cluster, so the text-only templates are stored too.
    client.get_script(id=config_names(remote.index_name).object_name("hybrid_text"))


def test_cluster_push_gives_the_client_push_ids_hashes_and_vectors(client, pushed):
    local_report, remote_report = pushed["local_report"], pushed["remote_report"]
    assert (remote_report.failed, remote_report.errors) == (0, [])
    assert remote_report.embedding_location == "cluster"
    assert remote_report.embedded == remote_report.chunks == remote_report.chunks_written
    assert remote_report.chunks == local_report.chunks == 43
    local = chunk_state(client, pushed["local"].index_name)
    remote = chunk_state(client, pushed["remote"].index_name)
    assert set(remote) == set(local)
    strip = {"content_hash", "doc_hash"}
    assert {i: {k: v[k] for k in strip} for i, v in remote.items()} == {
        i: {k: v[k] for k in strip} for i, v in local.items()
    }
    assert all(len(chunk["embedding"]) == 384 for chunk in remote.values())
    similarity = cosines(local, remote)
    assert similarity.min() >= 0.999, similarity.min()


@pytest.mark.parametrize("mode", MODES)
def test_cluster_push_gives_the_client_push_search_results(client, pushed, embedder, mode):
    for question in QUESTIONS:
        ranked = []
        for settings in (pushed["local"], pushed["remote"]):
            request = SearchRequest.from_settings(
                settings, question, tenant="default", mode=mode, rerank=False, k=5
            )
            result = search(request, settings, client=client, embedder=embedder)
            ranked.append([hit.chunk_id for hit in result.hits])
        assert ranked[0], (mode, question)
        assert ranked[1] == ranked[0], (mode, question)


def test_repush_reuses_stored_vectors(client, pushed, embedder, unique_name, tmp_path):
    """Unchanged: nothing sent to embed. Partly changed: only the new texts go without a vector;
    a vector planted on a chunk of the changed file whose text stays is sent back as it is, so the
    cluster did not embed it again. Its own alias and folder (two files), so the module's pair
    stays as pushed."""
    folder = tmp_path / "docs"
    folder.mkdir()
    for name in ("refund-policy.md", "payments.md"):
        shutil.copy(SAMPLE_DOCS / name, folder / name)
    settings = pushed["remote"].replace(index_name=unique_name)
    apply_config(settings, dimension=embedder.dimension, client=client)
    first = push(folder, settings, client=client, embedder=embedder)
    assert first.failed == 0 and first.embedded == first.chunks
    again = push(folder, settings, client=client, embedder=embedder)
    assert (again.unchanged, again.embedded, again.chunks_written) == (2, 0, 0)

    before = chunk_state(client, unique_name)
    planted_id = f"{_doc_id_of(client, unique_name, 'refund-policy.md')}-0"  # its text stays
    planted = np.array(before[planted_id]["embedding"]) + 0.01
    planted = (planted / np.linalg.norm(planted)).tolist()
    source = client.get(index=unique_name, id=planted_id)["_source"]
    client.index(  # pipeline=_none: written as it is, no processor runs
        index=unique_name,
        id=planted_id,
        body={**source, "embedding": planted},
        params={"pipeline": "_none", "refresh": "true"},
    )

    refunds = folder / "refund-policy.md"
    refunds.write_text(
        refunds.read_text(encoding="utf-8")
        + "\n## Vouchers\n\nVouchers expire after 12 months and cannot be refunded.\n",
        encoding="utf-8",
    )
    changed = push(folder, settings, client=client, embedder=embedder)
    assert (changed.updated, changed.unchanged, changed.failed) == (1, 1, 0)
    after = chunk_state(client, unique_name)
    new_ids = {cid for cid in after if after[cid]["content_hash"] not in _hashes(before)}
    assert new_ids, "the edit made no new chunk"
    assert changed.embedded == len(new_ids)
    assert changed.reused_vectors == changed.chunks_written - changed.embedded > 0
    assert np.allclose(after[planted_id]["embedding"], planted, atol=1e-6)
    ids = sorted(new_ids)
    local_vectors = embedder.embed_passages([_content(client, unique_name, cid) for cid in ids])
    cluster_vectors = np.array([after[cid]["embedding"] for cid in ids])
    similarity = (local_vectors * cluster_vectors).sum(axis=1) / (
        np.linalg.norm(local_vectors, axis=1) * np.linalg.norm(cluster_vectors, axis=1)
    )
    assert similarity.min() >= 0.999, similarity


def _hashes(state: dict[str, dict]) -> set[str]:
    return {chunk["content_hash"] for chunk in state.values()}


def _doc_id_of(client, alias: str, source: str) -> str:
    body = {"query": {"term": {"source": source}}, "size": 1, "_source": ["doc_id"]}
    (hit,) = client.search(index=alias, body=body)["hits"]["hits"]
    return hit["_source"]["doc_id"]


def _content(client, alias: str, chunk_id: str) -> str:
    return client.get(index=alias, id=chunk_id, _source_includes=["content"])["_source"]["content"]


def test_push_refuses_cluster_location_without_apply(client, pushed, embedder):
    """The client-side alias was applied without the setting: its pipeline does not embed."""
    settings = pushed["local"].replace(embedding_location="cluster")
    with pytest.raises(ConfigError, match="embedding_location = cluster.*loader apply"):
        push(pushed["folder"], settings, client=client, embedder=embedder)


def test_a_cluster_index_that_gains_the_second_reader_is_filled_by_its_pipeline(
    client, pushed, embedder, unique_name
):
    """An index pushed with one reader, then given the second (apply in place): the next push
    embeds nothing with the first reader and sends the unchanged chunks through the ingest
    pipeline again, whose second processor adds bge's vector; the report counts them."""
    remote = pushed["remote"]
    if reader_settings(remote) is None:
        pytest.fail("the module's settings have no second reader (bge's jar is fetched by setup)")
    one = remote.replace(index_name=unique_name, second_embedding_model="none")
    apply_config(one, dimension=embedder.dimension, client=client)
    first = push(pushed["folder"], one, client=client, embedder=embedder)
    assert (first.failed, first.chunks_written) == (0, 43)
    two = one.replace(second_embedding_model=remote.second_embedding_model)
    apply_config(two, dimension=embedder.dimension, client=client)
    filled = push(pushed["folder"], two, client=client, embedder=embedder)
    assert (filled.failed, filled.errors, filled.embedded) == (0, [], 0)
    assert (filled.chunks_written, filled.chunks_filled) == (0, 43)
    client.indices.refresh(index=unique_name)
    fields = ["second_embedding"]
    stored = {
        hit["_id"]: hit["_source"].get("second_embedding")
        for hit in helpers.scan(client, index=unique_name, query={"_source": fields}, size=500)
    }
    local = {
        hit["_id"]: hit["_source"]["second_embedding"]
        for hit in helpers.scan(
            client, index=pushed["local"].index_name, query={"_source": fields}, size=500
        )
    }
    assert set(stored) == set(local) and all(vector for vector in stored.values())
    similarity = cosines(
        {i: {"embedding": v} for i, v in stored.items()},
        {i: {"embedding": v} for i, v in local.items()},
    )
    assert similarity.min() >= 0.999, similarity.min()
