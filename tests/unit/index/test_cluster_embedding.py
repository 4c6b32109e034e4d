"""embedding_location = cluster, pure parts: the ingest pipeline it renders, the plan of a switch
between locations (in place, never a new index version), and what it refuses."""

from __future__ import annotations

import pytest

from loader.errors import ConfigError
from loader.index import ml_model as ml
from loader.index.plan import plan_changes
from loader.index.render import render_config, render_file
from loader.settings import Settings, setting_choices, settings_in_scope
from tests.unit.index.test_plan import ALIAS, state_in_sync

PIPELINE_FILE = "pipelines/ingest/ingest.json.j2"
MODEL_ID = "model-123"


def test_location_is_declared_with_its_choices_and_changes_no_result():
    assert setting_choices("embedding_location") == ("client", "cluster")
    # Not a model/chunking/index setting: a switch neither re-chunks nor plans a new index.
    assert "embedding_location" in settings_in_scope("operations")


@pytest.mark.parametrize(
    ("location", "model_id"), [("client", None), ("client", MODEL_ID), ("cluster", None)]
)
def test_pipeline_without_cluster_location_or_model_has_no_embedding_processor(
    tmp_path, location, model_id
):
    body = render_file(
        PIPELINE_FILE,
        Settings(embedding_location=location),
        8,
        project_dir=tmp_path,
        ml_model_id=model_id,
    )
    assert ml.embedding_processor(body) is None
    assert [next(iter(p)) for p in body["processors"]] == ["set"]


def test_cluster_pipeline_embeds_only_chunks_sent_without_a_vector(tmp_path):
    body = render_file(
        PIPELINE_FILE,
        Settings(embedding_location="cluster"),
        8,
        project_dir=tmp_path,
        ml_model_id=MODEL_ID,
    )
    processor = ml.embedding_processor(body)
    assert processor is not None
    assert processor["model_id"] == MODEL_ID
    assert processor["field_map"] == {"content": "embedding"}
    assert processor["if"] == "ctx.embedding == null"
    assert processor["skip_existing"] is False
    assert ml.embedding_processor({"processors": [{"set": {"field": "x"}}]}) is None
    assert ml.embedding_processor(None) is None


def test_switching_to_cluster_updates_the_pipeline_in_place(tmp_path):
    client_side = render_config(Settings(index_name=ALIAS), 8, project_dir=tmp_path)
    cluster_side = render_config(
        Settings(index_name=ALIAS, embedding_location="cluster"),
        8,
        project_dir=tmp_path,
        ml_model_id=MODEL_ID,
    )
    plan = plan_changes(cluster_side, state_in_sync(client_side))
    pending = {(c.kind, c.name, c.action) for c in plan.pending}
    assert ("ingest pipeline", f"{ALIAS}-ingest", "update") in pending
    # The model is there, so the text-only templates come with it; the index stays as it is.
    assert ("search template", f"{ALIAS}-hybrid_text", "create") in pending
    assert not [c for c in plan.pending if c.kind in ("index", "reindex", "alias")]
    back = plan_changes(client_side, state_in_sync(cluster_side))
    assert {(c.kind, c.action) for c in back.pending} == {("ingest pipeline", "update")}


def test_ml_model_is_wanted_for_either_use():
    defaults = Settings()
    assert not ml.model_on_cluster(
        server_side_embedding=defaults.server_side_embedding,
        embedding_location=defaults.embedding_location,
    )
    assert ml.model_on_cluster(server_side_embedding=True, embedding_location="client")
    assert ml.model_on_cluster(server_side_embedding=False, embedding_location="cluster")


def test_cluster_refuses_a_passage_instruction():
    ml.check_cluster_embedding(Settings(embedding_location="cluster"))
    ml.check_cluster_embedding(Settings(passage_prefix="passage: "))  # client: the client adds it
    with pytest.raises(ConfigError, match="embedding_location = cluster.*'passage: '"):
        ml.check_cluster_embedding(
            Settings(embedding_location="cluster", passage_prefix="passage: ")
        )
