"""Bulk-load records, pure: what a record restores, hostile records, and the apply plan's step."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from loader.index.bulk_load import META_KEY, new_record, plan_restore, restored_view
from loader.index.plan import plan_changes
from loader.index.render import render_config
from loader.settings import Settings
from tests.unit.index.test_plan import ALIAS, state_in_sync

RELAXED_FLAT = {"index.refresh_interval": "-1", "index.number_of_replicas": "0"}


@pytest.fixture
def desired(tmp_path):
    return render_config(Settings(index_name=ALIAS), 8, project_dir=tmp_path)


def relaxed_state(desired, record):
    """A cluster in sync with the files whose index a bulk-load push relaxed and left."""
    state = state_in_sync(desired)
    state.index["settings"].update(RELAXED_FLAT)
    meta = state.index["mappings"]["_meta"]
    meta[META_KEY] = record
    return state


def test_new_record_keeps_the_index_own_values_and_null_for_none():
    now = datetime(2026, 12, 1, 11, 30, tzinfo=UTC)
    flat = {"index.refresh_interval": "5s", "index.number_of_replicas": "2"}
    assert new_record(flat, now) == {
        "refresh_interval": "5s",
        "number_of_replicas": 2,
        "started_at": "2026-12-01T11:30:00Z",
    }
    assert new_record({"index.number_of_replicas": "0"}, now)["refresh_interval"] is None


def test_an_index_without_a_record_has_nothing_to_restore():
    assert plan_restore("kb-v1", RELAXED_FLAT, {"doc_id_scheme": "x"}, 1) is None


def test_a_record_restores_its_values_and_keeps_the_other_meta_keys():
    meta = {"doc_id_scheme": "x", META_KEY: {"refresh_interval": "5s", "number_of_replicas": 1}}
    restore = plan_restore("kb-v1", RELAXED_FLAT, meta, 3)
    assert restore.settings == {"index.refresh_interval": "5s", "index.number_of_replicas": 1}
    assert restore.meta == {"doc_id_scheme": "x"}
    assert restore.warnings == []
    assert restore.detail() == (
        "(restore refresh_interval: -1 -> 5s, number_of_replicas: 0 -> 1: left relaxed by a "
        "bulk-load push that did not finish)"
    )


def test_a_null_refresh_interval_restores_the_server_default():
    meta = {META_KEY: {"refresh_interval": None, "number_of_replicas": "1"}}
    restore = plan_restore("kb-v1", RELAXED_FLAT, meta, 0)
    assert restore.settings == {"index.refresh_interval": None, "index.number_of_replicas": 1}
    assert "refresh_interval: -1 -> default" in restore.detail()


@pytest.mark.parametrize(
    ("record", "expected", "warned"),
    [
        ("not an object", {"index.refresh_interval": None, "index.number_of_replicas": 2}, 2),
        ({}, {"index.refresh_interval": None, "index.number_of_replicas": 2}, 1),
        (
            {"refresh_interval": "1s; DROP", "number_of_replicas": -4},
            {"index.refresh_interval": None, "index.number_of_replicas": 2},
            2,
        ),
        (
            {"refresh_interval": ["5s"], "number_of_replicas": True},
            {"index.refresh_interval": None, "index.number_of_replicas": 2},
            2,
        ),
        (
            {"refresh_interval": "30s", "number_of_replicas": 10**9},
            {"index.refresh_interval": "30s", "index.number_of_replicas": 2},
            1,
        ),
    ],
)
def test_a_hostile_record_falls_back_with_a_warning_naming_the_key(record, expected, warned):
    restore = plan_restore("kb-v1", RELAXED_FLAT, {META_KEY: record}, 2)
    assert restore.settings == expected
    assert restore.meta == {}
    assert len(restore.warnings) == warned, restore.warnings
    assert all(w.startswith(f"index kb-v1: _meta.{META_KEY}") for w in restore.warnings)


def test_restored_view_drops_the_record_and_puts_the_values_back():
    state = {
        "settings": {**RELAXED_FLAT, "index.knn": "true"},
        "mappings": {"_meta": {"a": 1, META_KEY: {}}, "properties": {}},
    }
    restore = plan_restore("kb-v1", state["settings"], state["mappings"]["_meta"], 1)
    view = restored_view(state, restore)
    assert view["settings"] == {"index.knn": "true", "index.number_of_replicas": "1"}
    assert view["mappings"] == {"_meta": {"a": 1}, "properties": {}}
    assert state["mappings"]["_meta"][META_KEY] == {}  # the cluster state itself is untouched


def test_apply_plans_the_restore_as_a_step_and_nothing_else(desired):
    state = relaxed_state(desired, {"refresh_interval": "5s", "number_of_replicas": 0})
    plan = plan_changes(desired, state)
    assert [line for line in plan.lines() if not line.endswith("(no change)")] == [
        "~ update bulk-load settings kb-v1 (restore refresh_interval: -1 -> 5s, "
        "number_of_replicas: 0 -> 0: left relaxed by a bulk-load push that did not finish)"
    ]
    assert plan.summary() == "0 to create, 1 to update, 0 to delete, 9 unchanged"


def test_the_files_replicas_win_over_the_recorded_ones(tmp_path):
    desired = render_config(Settings(index_name=ALIAS, number_of_replicas=2), 8, tmp_path)
    state = relaxed_state(desired, {"refresh_interval": None, "number_of_replicas": 1})
    changes = [change for change in plan_changes(desired, state).pending]
    assert [(c.kind, c.detail) for c in changes] == [
        (
            "bulk-load settings",
            "(restore refresh_interval: -1 -> default, number_of_replicas: 0 -> 1: left relaxed "
            "by a bulk-load push that did not finish)",
        ),
        ("index settings", "(number_of_replicas: 1 -> 2)"),
    ]


def test_a_record_is_never_a_meta_change_nor_put_back_by_one(tmp_path):
    desired = render_config(Settings(index_name=ALIAS), 8, tmp_path)
    state = relaxed_state(desired, {"refresh_interval": "1s", "number_of_replicas": 0})
    desired.index["mappings"]["_meta"]["team"] = "search"  # a project's own _meta key
    mapping = [c for c in plan_changes(desired, state).pending if c.kind == "mapping"]
    assert len(mapping) == 1
    assert META_KEY not in mapping[0].payload["_meta"]
    assert mapping[0].payload["_meta"]["team"] == "search"


def test_a_hostile_record_warns_in_the_plan_notes(desired):
    plan = plan_changes(desired, relaxed_state(desired, "garbage"))
    assert any(note.startswith(f"index kb-v1: _meta.{META_KEY}") for note in plan.notes)
