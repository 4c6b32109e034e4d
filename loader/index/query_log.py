"""The query log's indices as plan steps of ``loader apply`` (``query_log = "ubi"``).

Three indices, rendered from ``mappings/ubi_queries.json.j2``, ``mappings/ubi_events.json.j2``
and ``mappings/judgments.json.j2`` like every other file, named after the alias:
``<alias>-ubi_queries`` and ``<alias>-ubi_events`` (OpenSearch's User Behavior Insights shape) and
``<alias>-judgments`` (sampled query sets and grades). Each is created when missing, given the
fields a newer file adds, and otherwise left alone. Retention without the ISM plugin (the node
has none): each apply deletes log entries older than ``query_log_retention_days``, a step the
plan shows with the count it deletes.

Example::

    changes = plan_query_log(client, settings)   # [] unless query_log = "ubi"
    for change in changes: execute_query_log_change(client, change)
"""

from __future__ import annotations

import logging
from pathlib import Path
from typing import TYPE_CHECKING, Any

from loader.index.diff import diff_index
from loader.index.plan import Change
from loader.index.render import render_file
from loader.settings import Settings

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

log = logging.getLogger(__name__)

# After every step of the chunk index: the log never holds up a search's configuration.
STEP_QUERY_LOG = 9
KIND_INDEX = "query log index"
KIND_MAPPING = "query log mapping"
KIND_RETENTION = "query log retention"
KINDS = (KIND_INDEX, KIND_MAPPING, KIND_RETENTION)
# Stem of the mapping file and of the index name; the grades are kept as long as they are wanted.
LOG_STEMS = ("ubi_queries", "ubi_events")
STEMS = (*LOG_STEMS, "judgments")


def log_index(alias: str, stem: str) -> str:
    """``<alias>-<stem>``, e.g. ``log_index("chunks", "ubi_queries")`` -> ``chunks-ubi_queries``."""
    return f"{alias}-{stem}"


def render_query_log(
    settings: Settings, project_dir: str | Path | None = None
) -> dict[str, dict[str, Any]]:
    """The index bodies, by index name; empty unless ``query_log = "ubi"``."""
    if settings.query_log != "ubi":
        return {}
    return {
        log_index(settings.index_name, stem): render_file(
            f"mappings/{stem}.json.j2", settings, 0, project_dir
        )
        for stem in STEMS
    }


def plan_query_log_changes(
    desired: dict[str, dict[str, Any]],
    current: dict[str, dict[str, Any] | None],
    expired: dict[str, int],
    retention_days: int,
) -> list[Change]:
    """The changes for the log indices. Pure.

    Args:
        desired: index name -> rendered body.
        current: index name -> the cluster's ``{"settings", "mappings"}``, or ``None`` if missing.
        expired: index name -> entries older than the retention (absent: none or not counted).
        retention_days: the ``query_log_retention_days`` setting, for the plan's line.
    """
    changes = []
    for name, body in sorted(desired.items()):
        now = current.get(name)
        if now is None:
            changes.append(Change(STEP_QUERY_LOG, KIND_INDEX, name, "create", payload=body))
            continue
        diff = diff_index(body, now)
        if diff.new_fields:
            added = ", ".join(sorted(diff.new_fields))
            payload = {"properties": diff.new_fields}
            changes.append(
                Change(
                    STEP_QUERY_LOG, KIND_MAPPING, name, "update", f"(add fields: {added})", payload
                )
            )
        else:
            changes.append(Change(STEP_QUERY_LOG, KIND_INDEX, name, "none"))
        if expired.get(name):
            changes.append(
                Change(
                    STEP_QUERY_LOG,
                    KIND_RETENTION,
                    name,
                    "delete",
                    f"({expired[name]} entries older than {retention_days} days)",
                    payload={"older_than": _cutoff(retention_days)},
                )
            )
    return changes


def _cutoff(days: int) -> str:
    return f"now-{int(days)}d"


def plan_query_log(
    client: OpenSearch, settings: Settings, project_dir: str | Path | None = None
) -> list[Change]:
    """Render the log's files, read the cluster, plan (``plan_query_log_changes``)."""
    desired = render_query_log(settings, project_dir)
    current: dict[str, dict[str, Any] | None] = {}
    expired: dict[str, int] = {}
    for name in desired:
        if not client.indices.exists(index=name):
            current[name] = None
            continue
        mappings = client.indices.get_mapping(index=name)[name]["mappings"]
        index_settings = client.indices.get_settings(index=name)[name]["settings"]
        current[name] = {"settings": index_settings, "mappings": mappings}
        if name.removeprefix(f"{settings.index_name}-") in LOG_STEMS:
            query = {"range": {"timestamp": {"lt": _cutoff(settings.query_log_retention_days)}}}
            expired[name] = int(client.count(index=name, body={"query": query})["count"])
    return plan_query_log_changes(desired, current, expired, settings.query_log_retention_days)


def execute_query_log_change(client: OpenSearch, change: Change) -> None:
    """Make one change of ``plan_query_log``."""
    if change.kind == KIND_INDEX and change.action == "create":
        client.indices.create(index=change.name, body=change.payload)
    elif change.kind == KIND_MAPPING:
        client.indices.put_mapping(index=change.name, body=change.payload)
    elif change.kind == KIND_RETENTION:
        query = {"range": {"timestamp": {"lt": change.payload["older_than"]}}}
        answer = client.delete_by_query(
            index=change.name, body={"query": query}, params={"refresh": "true"}
        )
        log.info("deleted %s old entries of %s", answer.get("deleted"), change.name)
