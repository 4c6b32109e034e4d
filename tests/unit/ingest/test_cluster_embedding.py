"""embedding_location = cluster on the push side, pure parts: chunks without a known vector go
without an ``embedding`` field (only then), and bulk requests get the time the cluster needs to
embed them."""

from __future__ import annotations

import pytest

from loader.documents import Block, Document, Section
from loader.ingest.actions import bulk_actions
from loader.ingest.bulk import BulkAction, bulk_request_timeout, send_bulk
from loader.ingest.plan import plan_push
from loader.models.embedding import embedder_for
from loader.settings import Settings


@pytest.fixture(scope="module")
def planned():
    settings = Settings()
    embedder = embedder_for(settings)  # the tokenizer counts tokens; the model is not loaded
    document = Document(
        source="a.md",
        title="Doc",
        sections=[Section(("Part",), [Block("paragraph", "Refunds take five days.")])],
        metadata={},
    )
    return plan_push([document], settings, embedder, lambda tenant: {}, collection="kb")


def test_cluster_actions_leave_unknown_vectors_to_the_pipeline(planned):
    (content_hash,) = planned.to_write[0].hashes
    cluster = Settings(embedding_location="cluster")
    (action,) = bulk_actions(planned, cluster, {})
    assert "embedding" not in action.document and action.document["content"]
    (reused,) = bulk_actions(planned, cluster, {content_hash: [0.5, 0.5]})
    assert reused.document["embedding"] == [0.5, 0.5]


def test_client_actions_never_go_without_a_vector(planned):
    with pytest.raises(KeyError):
        bulk_actions(planned, Settings(), {})


def test_bulk_timeout_grows_with_what_the_cluster_embeds():
    assert bulk_request_timeout(30.0, 500, embedding_on_cluster=False) == 30.0
    assert bulk_request_timeout(30.0, 500, embedding_on_cluster=True) == 530.0


class RecordingClient:
    def __init__(self):
        self.calls = []

    def bulk(self, body: str, **options) -> dict:
        self.calls.append(options)
        return {"items": [{"index": {"status": 201}} for _ in body.splitlines()[::2]]}


def test_send_bulk_passes_the_request_timeout():
    client = RecordingClient()
    actions = [BulkAction("index", "kb", str(i), "a.md", {"n": i}) for i in range(3)]
    assert send_bulk(client, actions, request_timeout=530.0).succeeded == 3
    assert send_bulk(client, actions).succeeded == 3
    assert client.calls == [{"request_timeout": 530.0}, {}]
