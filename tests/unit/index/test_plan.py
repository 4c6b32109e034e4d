"""Plan diffing, pure: what `loader apply` would do for a given cluster state."""

from __future__ import annotations

import copy

import pytest

from loader.documents import DOC_ID_SCHEME
from loader.errors import ConfigError
from loader.index.diff import diff_index, flatten_settings, normalize
from loader.index.plan import Plan, plan_changes
from loader.index.render import render_config
from loader.index.state import ClusterState
from loader.models.registry import EMBEDDING_META_KEY, index_fingerprint
from loader.settings import Settings

ALIAS = "kb"


@pytest.fixture
def desired(tmp_path):
    return render_config(Settings(index_name=ALIAS), 8, project_dir=tmp_path)


def server_view(index_body: dict) -> dict:
    """The index as GET <index>?flat_settings=true shows it: strings, plus server defaults."""
    flat = {
        key: str(value).lower() if isinstance(value, bool) else str(value)
        for key, value in flatten_settings(index_body["settings"]).items()
    }
    flat |= {
        "index.uuid": "abc",
        "index.creation_date": "1",
        "index.knn.derived_source.enabled": "true",
    }
    mappings = copy.deepcopy(index_body["mappings"])
    return {"settings": flat, "mappings": mappings}


def state_in_sync(desired, version: int = 1) -> ClusterState:
    """A cluster holding exactly what the files describe."""
    index = f"{ALIAS}-v{version}"
    return ClusterState(
        alias_targets=[index],
        versions={version: index},
        index_name=index,
        index=server_view(desired.index),
        search_pipelines=copy.deepcopy(desired.search_pipelines),
        ingest_pipelines=copy.deepcopy(desired.ingest_pipelines),
        search_templates={
            name: {"_id": name, "found": True, **copy.deepcopy(body)}
            for name, body in desired.search_templates.items()
        },
    )


def lines(plan: Plan) -> list[str]:
    return plan.lines()


def test_empty_cluster_creates_everything(desired):
    plan = plan_changes(desired, ClusterState())
    assert lines(plan) == [
        "+ create ingest pipeline kb-ingest",
        "+ create index kb-v1",
        "+ create alias kb -> kb-v1",
        "+ create search pipeline kb-minmax",
        "+ create search pipeline kb-rrf",
        "+ create search pipeline kb-zscore",
        "+ create search template kb-bm25",
        "+ create search template kb-hybrid",
        "+ create search template kb-vector",
    ]
    assert plan.summary() == "9 to create, 0 to update, 0 to delete, 0 unchanged"
    assert plan.has_changes


def test_cluster_in_sync_means_no_changes_despite_server_defaults(desired):
    state = state_in_sync(desired)
    # Server-filled defaults the files never set must not count as differences.
    state.index["mappings"]["properties"]["embedding"]["method"]["parameters"]["encoder"] = {}
    state.index["mappings"]["properties"]["title"]["norms"] = True
    plan = plan_changes(desired, state)
    assert not plan.has_changes
    assert plan.summary() == "no changes"
    assert "= alias kb -> kb-v1 (no change)" in lines(plan)
    assert "= index kb-v1 (no change)" in lines(plan)
    assert plan.notes == []


def test_string_and_number_settings_compare_equal():
    assert normalize({"a": 1, "b": True, "c": [1.0]}) == normalize(
        {"a": "1", "b": "true", "c": ["1"]}
    )
    assert flatten_settings({"index": {"knn": True, "knn.algo_param.ef_search": 100}, "x": 1}) == {
        "index.knn": True,
        "index.knn.algo_param.ef_search": 100,
        "index.x": 1,
    }


def test_changed_pipeline_and_template_are_updated(desired):
    state = state_in_sync(desired)
    state.search_pipelines["kb-rrf"]["phase_results_processors"][0]["score-ranker-processor"][
        "combination"
    ]["rank_constant"] = 20
    state.search_templates["kb-bm25"]["script"]["source"] = "{}"
    state.ingest_pipelines["kb-ingest"] = None
    plan = plan_changes(desired, state)
    assert [line for line in lines(plan) if not line.startswith("=")] == [
        "+ create ingest pipeline kb-ingest",
        "~ update search pipeline kb-rrf",
        "~ update search template kb-bm25",
    ]


def test_new_field_and_replicas_are_changed_in_place(desired):
    state = state_in_sync(desired)
    del state.index["mappings"]["properties"]["strategy"]
    state.index["settings"]["index.number_of_replicas"] = "1"
    plan = plan_changes(desired, state)
    pending = plan.pending
    assert [change.line() for change in pending] == [
        "~ update mapping kb-v1 (add fields: strategy)",
        "~ update index settings kb-v1 (number_of_replicas: 1 -> 0)",
    ]
    assert pending[0].payload == {"properties": {"strategy": {"type": "keyword"}}}
    assert pending[1].payload == {"index.number_of_replicas": 0}


@pytest.mark.parametrize(
    ("mutate", "reason"),
    [
        (
            lambda s: s["mappings"]["properties"]["content"].update(analyzer="french"),
            "field content: analyzer 'french' -> 'english'",
        ),
        (
            lambda s: s["mappings"]["properties"]["position"].update(type="long"),
            "field position: type 'long' -> 'integer'",
        ),
        (
            lambda s: s["settings"].update({"index.number_of_shards": "3"}),
            "setting index.number_of_shards: '3' -> 1",
        ),
        (
            lambda s: s["mappings"]["properties"]["content"].pop("fields"),
            "field content: fields None ->",
        ),
    ],
)
def test_incompatible_change_creates_next_version_and_reindexes(desired, mutate, reason):
    state = state_in_sync(desired)
    mutate(state.index)
    plan = plan_changes(desired, state)
    pending = [change.line() for change in plan.pending]
    assert pending[0].startswith("+ create index kb-v2 (replaces kb-v1: ")
    assert reason in pending[0]
    assert pending[1:] == [
        "+ create reindex kb-v1 -> kb-v2 (write-blocks kb-v1 first: a push during the copy "
        "fails instead of being lost)",
        "~ update alias kb -> kb-v2 (was kb-v1; one atomic _aliases call)",
    ]
    assert plan.pending[2].payload == {"remove": "kb-v1", "add": "kb-v2"}
    assert any("kept kb-v1" in note for note in plan.notes)
    assert (
        "kb-v1 is write-blocked while the reindex copies it: a `loader push` meanwhile fails "
        "(exit 8) instead of writing what the copy would miss; push again once the alias is on "
        "kb-v2. The block stays on kb-v1 (kept until `loader apply --delete-old`) and is lifted "
        "if the apply stops before the swap"
    ) in plan.notes


def test_dimension_change_skips_the_reindex_and_says_to_push(desired):
    state = state_in_sync(desired)
    state.index["mappings"]["properties"]["embedding"]["dimension"] = 384
    plan = plan_changes(desired, state)
    pending = [change.line() for change in plan.pending]
    assert pending == [
        "+ create index kb-v2 (replaces kb-v1: vector field embedding: dimension 384 -> 8)",
        "~ update alias kb -> kb-v2 (was kb-v1; one atomic _aliases call)",
    ]
    assert any("384 -> 8" in note and "loader push" in note for note in plan.notes)


def test_index_of_the_old_id_scheme_gets_an_empty_new_version(desired):
    """ids that ignore the tenant are never copied into an index of the new scheme."""
    assert desired.index["mappings"]["_meta"]["doc_id_scheme"] == DOC_ID_SCHEME
    state = state_in_sync(desired)
    del state.index["mappings"]["_meta"]
    plan = plan_changes(desired, state)
    pending = [change.line() for change in plan.pending]
    assert pending == [
        "+ create index kb-v2 (replaces kb-v1: document id scheme: source path only -> "
        f"{DOC_ID_SCHEME})",
        "~ update alias kb -> kb-v2 (was kb-v1; one atomic _aliases call)",
    ]
    assert any("ignore the tenant" in note and "--tenant" in note for note in plan.notes)


def test_a_users_mapping_file_cannot_drop_the_id_scheme(tmp_path):
    (tmp_path / "mappings").mkdir()
    (tmp_path / "mappings" / "chunks.json.j2").write_text(
        '{"settings": {}, "mappings": {"_meta": {"team": "search"}, "properties": {}}}'
    )
    settings = Settings(index_name=ALIAS)
    config = render_config(settings, 8, project_dir=tmp_path)
    assert config.index["mappings"]["_meta"] == {
        "team": "search",
        "doc_id_scheme": DOC_ID_SCHEME,
        EMBEDDING_META_KEY: index_fingerprint(settings, 8),
    }


def test_old_versions_are_deleted_only_with_the_flag(desired):
    state = state_in_sync(desired, version=2)
    state.versions[1] = "kb-v1"
    kept = plan_changes(desired, state)
    assert not kept.has_changes
    assert kept.notes == ["kept kb-v1; `loader apply --delete-old` deletes older versions"]
    deleted = plan_changes(desired, state, delete_old=True)
    assert [change.line() for change in deleted.pending] == ["- delete index kb-v1 (old version)"]
    assert deleted.summary() == "0 to create, 0 to update, 1 to delete, 9 unchanged"


def test_a_newer_version_an_unfinished_apply_left_is_named_and_deleted_with_the_flag(desired):
    # Killed during its reindex, or beaten by another apply: kb-v3 exists, the alias is on v2.
    state = state_in_sync(desired, version=2)
    state.versions[3] = "kb-v3"
    kept = plan_changes(desired, state)
    assert not kept.has_changes
    assert kept.notes == [
        "kept kb-v3, newer than kb-v2 but not behind the alias (left by an apply that did not "
        "finish); `loader apply --delete-old` deletes it"
    ]
    deleted = plan_changes(desired, state, delete_old=True)
    assert [change.line() for change in deleted.pending] == [
        "- delete index kb-v3 (left by an apply that did not finish)"
    ]


RECORD = {"dest": "kb-v2", "started_at": "2026-12-01T11:30:00Z"}


def test_the_block_a_killed_apply_left_on_the_alias_index_is_lifted_with_its_record(desired):
    # Killed between its reindex and its swap: v1 (the alias's) keeps the block and its record.
    state = state_in_sync(desired)
    state.versions[2] = "kb-v2"
    state.index["settings"]["index.blocks.write"] = "true"
    state.index["mappings"]["_meta"]["loader_reindex_block"] = RECORD
    plan = plan_changes(desired, state)
    assert [change.line() for change in plan.pending] == [
        "~ update write block kb-v1 (lift index.blocks.write: left by a `loader apply` copying "
        "kb-v1 to kb-v2, started 2026-12-01T11:30:00Z that did not finish)"
    ]
    lift = plan.pending[0].payload
    assert lift.blocked and "loader_reindex_block" not in lift.meta
    assert lift.meta == {
        k: v for k, v in state.index["mappings"]["_meta"].items() if k != "loader_reindex_block"
    }
    # A record alone (the block already lifted) is removed; a block alone is someone else's.
    del state.index["settings"]["index.blocks.write"]
    assert [change.line() for change in plan_changes(desired, state).pending] == [
        "~ update write block kb-v1 (remove _meta.loader_reindex_block: its block is already "
        "lifted)"
    ]
    state.index["settings"]["index.blocks.write"] = "true"
    del state.index["mappings"]["_meta"]["loader_reindex_block"]
    assert not plan_changes(desired, state).has_changes


def test_a_reindex_of_the_blocked_index_keeps_the_recorded_block_instead_of_lifting_it(desired):
    # Another apply recorded the block on v1 and is (maybe still) copying it into v2: lifted
    # first, v1 would take pushes for a moment while that copy runs.
    state = state_in_sync(desired)
    state.versions[2] = "kb-v2"
    state.index["settings"]["index.blocks.write"] = "true"
    state.index["mappings"]["_meta"]["loader_reindex_block"] = RECORD
    state.index["mappings"]["properties"]["position"]["type"] = "long"
    plan = plan_changes(desired, state)
    assert [change.line() for change in plan.pending][1:] == [
        "+ create reindex kb-v1 -> kb-v3 (keeps the write block on kb-v1 left by a `loader "
        "apply` copying kb-v1 to kb-v2, started 2026-12-01T11:30:00Z that did not finish, as "
        "its own: a push during the copy fails instead of being lost)",
        "~ update alias kb -> kb-v3 (was kb-v1; one atomic _aliases call)",
    ]
    assert plan.pending[1].payload == {
        "source": "kb-v1",
        "dest": "kb-v3",
        "takes_over_block": True,
    }


def test_a_meta_update_after_the_lift_does_not_write_the_record_back(desired):
    # An index built before fingerprints gets its _meta put in place, after the lift.
    state = state_in_sync(desired)
    state.index["settings"]["index.blocks.write"] = "true"
    meta = state.index["mappings"]["_meta"]
    del meta[EMBEDDING_META_KEY]
    meta["loader_reindex_block"] = RECORD
    plan = plan_changes(desired, state)
    assert [(change.kind, change.action) for change in plan.pending] == [
        ("write block", "update"),
        ("mapping", "update"),
    ]
    written = plan.pending[1].payload["_meta"]
    assert EMBEDDING_META_KEY in written and "loader_reindex_block" not in written


def test_missing_alias_points_at_a_fitting_existing_version(desired):
    state = state_in_sync(desired)
    state.alias_targets = []
    plan = plan_changes(desired, state)
    assert [change.line() for change in plan.pending] == ["+ create alias kb -> kb-v1"]


def test_a_concrete_index_with_the_alias_name_is_refused(desired):
    with pytest.raises(ConfigError, match="'kb' is an index, not an alias"):
        plan_changes(desired, ClusterState(alias_is_index=True))


def test_an_alias_on_two_indices_is_refused(desired):
    with pytest.raises(ConfigError, match="points at several indices"):
        plan_changes(desired, ClusterState(alias_targets=["a", "b"]))


def test_diff_index_reports_nothing_for_identical_bodies(desired):
    diff = diff_index(desired.index, server_view(desired.index))
    assert not diff.incompatible and not diff.in_place


def test_plan_to_dict(desired):
    data = plan_changes(desired, ClusterState()).to_dict()
    assert data["alias"] == "kb" and data["applied"] is False
    assert data["changes"][1] == {
        "action": "create",
        "kind": "index",
        "name": "kb-v1",
        "detail": "",
    }
