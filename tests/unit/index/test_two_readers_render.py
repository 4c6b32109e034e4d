"""The configuration files with a second reader: its knn_vector field and fingerprint, a fourth
hybrid sub-query, one weight per sub-query in every pipeline; without one, today's files; adding
one to an index is an in-place change, another one a new version."""

from __future__ import annotations

import pytest

from loader.index.diff import diff_index
from loader.index.render import render_config
from loader.models.registry import SECOND_READER_META_KEY
from loader.settings import Settings

ONE = Settings(index_name="kb", second_embedding_model="none")
TWO = ONE.replace(second_embedding_model="bge-small-en-v1.5")


def _weights(config, stem: str) -> list[float]:
    (processor,) = config.search_pipelines[f"kb-{stem}"]["phase_results_processors"]
    (body,) = processor.values()
    return body["combination"]["parameters"]["weights"]


def _as_cluster(index: dict) -> dict:
    return {"settings": {f"index.{k}": v for k, v in index["settings"]["index"].items()},
            "mappings": index["mappings"]}  # fmt: skip


def test_the_second_reader_has_its_field_and_fingerprint(tmp_path):
    one = render_config(ONE, 384, tmp_path)
    two = render_config(TWO, 384, tmp_path)
    properties = two.index["mappings"]["properties"]
    assert properties["second_embedding"] == properties["embedding"]  # same method, 384 dims
    assert "second_embedding" not in one.index["mappings"]["properties"]
    assert two.index["mappings"]["_meta"][SECOND_READER_META_KEY]["model"] == "bge-small-en-v1.5"
    assert SECOND_READER_META_KEY not in one.index["mappings"]["_meta"]
    assert (one.second_dimension, two.second_dimension) == (0, 384)


@pytest.mark.parametrize("share", [0.0, 0.25, 0.5, 1.0])
def test_every_pipeline_weighs_four_sub_queries_the_readers_sharing_the_vector_side(
    tmp_path, share
):
    settings = TWO.replace(second_reader_share=share)
    one, two = render_config(ONE, 384, tmp_path), render_config(settings, 384, tmp_path)
    for stem in ("rrf", "minmax", "zscore"):
        alone, both = _weights(one, stem), _weights(two, stem)
        assert len(alone) == 3 and len(both) == 4
        assert sum(both) == pytest.approx(1.0, abs=1e-5)
        # BM25 and exact unchanged; the readers split the one-reader vector weight.
        assert (both[0], both[3]) == (alone[0], alone[2])
        assert both[1] + both[2] == pytest.approx(alone[1], abs=1e-6)
        assert both[2] == pytest.approx(alone[1] * share, abs=1e-6)


def test_the_hybrid_template_gets_the_second_readers_sub_query(tmp_path):
    one = render_config(ONE, 384, tmp_path).search_templates["kb-hybrid"]["script"]["source"]
    two = render_config(TWO, 384, tmp_path).search_templates["kb-hybrid"]["script"]["source"]
    assert "second_embedding" not in one.replace('"second_embedding"]}', "")
    assert two.count('{"knn": {"embedding"') == 3  # k-NN, the fallback, the exact holders
    assert two.count('{"knn": {"second_embedding"') == 1
    assert "{{#toJson}}second_query_vector{{/toJson}}" in two
    for name in ("kb-bm25", "kb-vector"):  # only the hybrid modes search the second reader
        assert (
            render_config(TWO, 384, tmp_path).search_templates[name]
            == render_config(ONE, 384, tmp_path).search_templates[name]
        )


def test_adding_a_second_reader_is_in_place_and_another_one_a_new_version(tmp_path):
    current = _as_cluster(render_config(ONE, 384, tmp_path).index)
    added = diff_index(render_config(TWO, 384, tmp_path).index, current)
    assert not added.incompatible
    assert list(added.new_fields) == ["second_embedding"]
    assert added.mapping_params["_meta"][SECOND_READER_META_KEY]["model"] == "bge-small-en-v1.5"
    two = _as_cluster(render_config(TWO, 384, tmp_path).index)
    assert not diff_index(render_config(TWO, 384, tmp_path).index, two).in_place
    other = TWO.replace(
        embedding_model="bge-small-en-v1.5", second_embedding_model="all-MiniLM-L6-v2"
    )
    swapped = diff_index(render_config(other, 384, tmp_path).index, two)
    assert any(reason.startswith("second reader:") for reason in swapped.incompatible)
    assert swapped.model_change is not None


def test_another_second_reader_copies_the_chunks_without_its_vectors(tmp_path):
    from loader.index.plan import plan_changes
    from tests.unit.index.test_plan import state_in_sync

    int8 = TWO  # the default: bge-small on onnx-int8
    fp32 = TWO.replace(second_embedding_backend="onnx")
    state = state_in_sync(render_config(int8, 384, tmp_path))
    plan = plan_changes(render_config(fp32, 384, tmp_path), state)
    (reindex,) = [change for change in plan.pending if change.kind == "reindex"]
    assert reindex.payload == {
        "source": "kb-v1",
        "dest": "kb-v2",
        "drop_fields": ["second_embedding"],
    }
    assert "without second_embedding" in reindex.line()
    assert any("embed its vectors alone" in note for note in plan.notes)
    # Another first reader still starts empty: its vectors would mix two models.
    first = TWO.replace(embedding_model="bge-small-en-v1.5", second_embedding_model="none")
    plan = plan_changes(render_config(first, 384, tmp_path), state)
    assert not [change for change in plan.pending if change.kind == "reindex"]


def test_the_text_templates_get_each_readers_model_id_once_both_are_registered(tmp_path):
    """apply renders the text-only templates with placeholders for models it registers in the
    same run, then puts each model's id in place of its own placeholder (``with_model_ids``)."""
    from loader.index.ml_model import PENDING_IDS, with_model_ids
    from loader.index.plan import ML_MODEL, SECOND_ML_MODEL, Change

    config = render_config(
        TWO.replace(server_side_embedding=True), 384, tmp_path,
        ml_model_id=PENDING_IDS[ML_MODEL], second_ml_model_id=PENDING_IDS[SECOND_ML_MODEL],
    )  # fmt: skip
    template = config.search_templates["kb-hybrid_text"]
    change = Change(2, "search template", "kb-hybrid_text", "create", "", payload=template)
    ids = {PENDING_IDS[ML_MODEL]: "first-model-id", PENDING_IDS[SECOND_ML_MODEL]: "bge-model-id"}
    source = with_model_ids(change, ids).payload["script"]["source"]
    assert source.count('"model_id": "first-model-id"') == 1
    assert source.count('"model_id": "bge-model-id"') == 1
    assert not any(placeholder in source for placeholder in ids)
