"""The query log's plan steps (``loader.index.query_log``), without a cluster."""

from __future__ import annotations

from loader.index.query_log import plan_query_log_changes, render_query_log
from loader.settings import Settings


def test_nothing_is_rendered_while_the_log_is_off():
    assert render_query_log(Settings(index_name="kb")) == {}


def test_missing_indices_are_created_and_old_entries_deleted():
    desired = render_query_log(Settings(index_name="kb", query_log="ubi"))
    assert sorted(desired) == ["kb-judgments", "kb-ubi_events", "kb-ubi_queries"]
    queries = desired["kb-ubi_queries"]["mappings"]["properties"]
    assert queries["query_attributes"]["properties"]["tenant"] == {"type": "keyword"}
    current = {
        "kb-judgments": None,
        "kb-ubi_events": None,
        "kb-ubi_queries": desired["kb-ubi_queries"],
    }
    changes = plan_query_log_changes(desired, current, {"kb-ubi_queries": 7}, 30)
    assert [change.line() for change in changes] == [
        "+ create query log index kb-judgments",
        "+ create query log index kb-ubi_events",
        "= query log index kb-ubi_queries (no change)",
        "- delete query log retention kb-ubi_queries (7 entries older than 30 days)",
    ]
    assert changes[-1].payload == {"older_than": "now-30d"}


def test_a_field_a_newer_file_adds_is_put_in_place():
    desired = render_query_log(Settings(index_name="kb", query_log="ubi"))
    older = {
        "settings": {},
        "mappings": {"dynamic": False, "properties": {"query_id": {"type": "keyword"}}},
    }
    changes = plan_query_log_changes(
        {"kb-ubi_queries": desired["kb-ubi_queries"]}, {"kb-ubi_queries": older}, {}, 90
    )
    assert changes[0].kind == "query log mapping" and changes[0].action == "update"
    assert "timestamp" in changes[0].payload["properties"]
