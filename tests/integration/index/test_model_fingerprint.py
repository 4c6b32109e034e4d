"""Changing the embedding model or backend is an index change: `loader apply` plans a new, empty
version and push refuses the old one, even when the dimension is the same (MiniLM and bge-small
both make 384 dimensions)."""

from __future__ import annotations

import pytest

from loader.errors import IncompatibleIndexError
from loader.index.apply import apply_config, plan_apply
from loader.index.compatible import check_index_compatible
from loader.index.render import render_config
from loader.models.registry import EMBEDDING_META_KEY

DIMENSION = 384  # both models': the fingerprint, not the dimension, tells them apart


@pytest.fixture
def minilm(base_settings, unique_name):
    return base_settings.replace(
        index_name=unique_name, embedding_model="all-MiniLM-L6-v2", embedding_backend="onnx"
    )


def _meta(client, alias: str) -> dict:
    (body,) = client.indices.get_mapping(index=alias).values()
    return body["mappings"]["_meta"]


def test_model_change_plans_a_new_empty_version(client, minilm):
    apply_config(minilm, dimension=DIMENSION, client=client)
    assert _meta(client, minilm.index_name)[EMBEDDING_META_KEY]["model"] == "all-MiniLM-L6-v2"
    bge = minilm.replace(embedding_model="bge-small-en-v1.5")
    plan = plan_apply(bge, dimension=DIMENSION, client=client)
    creates = [c for c in plan.changes if c.kind == "index" and c.action == "create"]
    assert [c.name for c in creates] == [f"{minilm.index_name}-v2"]
    assert "all-MiniLM-L6-v2 (onnx, 384 dims) -> bge-small-en-v1.5 (onnx, 384 dims)" in (
        creates[0].detail
    )
    assert not [c for c in plan.changes if c.kind == "reindex"]  # old vectors are not copied
    assert any(note.startswith("re-push: vectors of another model") for note in plan.notes)
    apply_config(bge, dimension=DIMENSION, client=client)
    assert check_index_compatible(client, bge, DIMENSION) == f"{minilm.index_name}-v2"
    assert _meta(client, minilm.index_name)[EMBEDDING_META_KEY]["model"] == "bge-small-en-v1.5"


def test_push_refuses_an_index_of_another_fingerprint(client, minilm):
    apply_config(minilm, dimension=DIMENSION, client=client)
    assert check_index_compatible(client, minilm, DIMENSION) == f"{minilm.index_name}-v1"
    for other, expected in (
        (minilm.replace(embedding_model="bge-small-en-v1.5"), "bge-small-en-v1.5 (onnx, 384"),
        (
            minilm.replace(embedding_backend="onnx-int8"),
            "all-MiniLM-L6-v2 (onnx-int8 dynamic-s8-per-channel-reduce-range, 384",
        ),
    ):
        with pytest.raises(IncompatibleIndexError) as caught:
            check_index_compatible(client, other, DIMENSION)
        message = str(caught.value)
        assert "holds vectors of all-MiniLM-L6-v2 (onnx, 384 dims)" in message
        assert expected in message and "Run `loader apply`" in message


def test_an_index_without_a_fingerprint_is_refused_until_apply_records_it(client, minilm):
    # An index made before fingerprints: the rendered body without embedding_model in _meta.
    index = f"{minilm.index_name}-v1"
    body = render_config(minilm, DIMENSION).index
    del body["mappings"]["_meta"][EMBEDDING_META_KEY]
    client.indices.create(index=index, body={**body, "aliases": {minilm.index_name: {}}})
    with pytest.raises(IncompatibleIndexError, match="does not record which embedding model"):
        check_index_compatible(client, minilm, DIMENSION)
    plan = apply_config(minilm, dimension=DIMENSION, client=client)
    assert not [c for c in plan.changes if c.kind == "index" and c.action == "create"]
    assert [c.kind for c in plan.changes if c.action == "update"] == ["mapping"]
    assert check_index_compatible(client, minilm, DIMENSION) == index
    assert _meta(client, index)[EMBEDDING_META_KEY]["backend"] == "onnx"
