"""A push with a second reader, without a cluster: the chunks of unchanged documents that lack
its vector are planned as fills, written as partial updates of that field alone; written chunks
carry both vectors."""

from __future__ import annotations

import json

import numpy as np
import pytest

from loader.ingest.actions import bulk_actions
from loader.ingest.plan import chunk_id, plan_push
from loader.models.embedding import embedder_for
from loader.settings import Settings
from tests.unit.ingest.test_plan import as_state, doc

SETTINGS = Settings(second_embedding_model="bge-small-en-v1.5")


@pytest.fixture(scope="module")
def embedder():
    return embedder_for(SETTINGS)


def _plan(items, embedder, state):
    return plan_push(items, SETTINGS, embedder, lambda tenant: state, collection="kb")


def test_unchanged_chunks_without_the_second_vector_are_filled_and_nothing_else(embedder):
    items = [doc("a.md", "Alpha text."), doc("b.md", "Beta text.")]
    state = as_state(_plan(items, embedder, {}))
    (a_id,) = [doc_id for doc_id, entry in state.items() if entry["source"] == "a.md"]
    lacking = chunk_id(a_id, 0)
    state[a_id]["lacking"] = {lacking: (state[a_id]["chunks"][lacking], "Doc > Part\nAlpha text.")}
    plan = _plan([doc("a.md", "Alpha text."), doc("b.md", "Beta text.")], embedder, state)
    assert (plan.unchanged, plan.to_write, plan.deletions) == (2, [], [])
    assert [(fill.chunk_id, fill.source) for fill in plan.fills] == [(lacking, "a.md")]
    assert plan.lines() == [
        "~ add the second reader's vectors to 1 chunks of 1 unchanged documents (1 to embed)"
    ]
    vector = np.ones(384, dtype=np.float32)
    (update,) = bulk_actions(plan, SETTINGS, {}, {plan.fills[0].content_hash: vector})
    assert (update.op, update.id) == ("update", lacking)
    header, body = update.payload().decode().splitlines()
    assert json.loads(header) == {"update": {"_index": "chunks", "_id": lacking}}
    assert list(json.loads(body)) == ["doc"]
    assert list(json.loads(body)["doc"]) == ["second_embedding"]


def test_a_changed_document_is_written_with_both_vectors_and_not_filled(embedder):
    state = as_state(_plan([doc("a.md", "Alpha text.")], embedder, {}))
    for entry in state.values():
        entry["lacking"] = {cid: (h, "old") for cid, h in entry["chunks"].items()}
    plan = _plan([doc("a.md", "Alpha text, changed.")], embedder, state)
    assert plan.updated == ["a.md"] and plan.fills == []
    hashes = plan.to_write[0].hashes
    first = {h: np.zeros(384, dtype=np.float32) for h in hashes}
    second = {h: np.ones(384, dtype=np.float32) for h in hashes}
    actions = bulk_actions(plan, SETTINGS, first, second)
    assert {action.op for action in actions} == {"index"}
    for action in actions:
        assert {"embedding", "second_embedding"} <= set(action.document)
    one_reader = bulk_actions(plan, SETTINGS.replace(second_embedding_model="none"), first)
    assert all("second_embedding" not in action.document for action in one_reader)
