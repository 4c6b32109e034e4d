"""The write block ``loader apply`` puts on the version a reindex copies, and its record.

Before ``_reindex`` copies ``<alias>-v<N>`` into ``v<N+1>``, apply write-blocks the source
(``index.blocks.write``) so a push meanwhile fails instead of writing where the copy has passed.
The block is recorded *on the cluster* first, in the source's mapping ``_meta``::

    {"loader_reindex_block": {"dest": "kb-v2", "started_at": "2026-12-01T11:30:00Z"}}

then set. An apply that stops before the alias swap lifts the block and removes the record. One
killed in between (SIGKILL, a lost machine) leaves both on the version the alias still points
at, where every push fails: the next ``loader apply`` plans a step that lifts the block and
removes the record ("update write block", even when nothing else changes), and ``loader doctor``
names the interrupted apply as the cause. A block without the record (someone else's) is never
lifted by apply.

After a successful swap the record stays on the old version, beside the block it explains: one
write fewer after the swap (the moment the apply has finished), and should the alias ever be
pointed back at that version, apply knows the block is its own and lifts it.

The record is written with every other ``_meta`` key kept (``PUT _mapping`` replaces ``_meta`` as
a whole), and ``loader apply`` compares only the ``_meta`` keys the files set, so it is never a
change by itself. Lifting runs block first, record second: a crash in between leaves a record
without a block, which the next apply removes.

Example::

    lift = plan_lift("kb-v1", flat_settings, meta)   # pure: None unless the record is there
    lift_index(client, lift)                          # the block off, then the record
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from opensearchpy import OpenSearch

log = logging.getLogger(__name__)

META_KEY = "loader_reindex_block"
WRITE_BLOCK = "index.blocks.write"
PLAN_KIND = "write block"  # the kind of the plan step that lifts it
_SHOWN = 60  # characters of a recorded value shown in a plan line or doctor message


# --- the pure part ----------------------------------------------------------------------------


def new_record(dest: str, now: datetime | None = None) -> dict[str, str]:
    """The record of a write block set before copying into ``dest``."""
    return {"dest": dest, "started_at": (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ")}


def is_write_blocked(flat_settings: Mapping[str, Any]) -> bool:
    """``index.blocks.write`` is set to true in an index's flat settings."""
    return str(flat_settings.get(WRITE_BLOCK, "")).lower() == "true"


def describe(index: str, record: Any) -> str:
    """``a `loader apply` copying kb-v1 to kb-v2 (started 2026-...Z) that did not finish``."""
    record = record if isinstance(record, Mapping) else {}
    dest = str(record.get("dest") or "a new version")[:_SHOWN]
    started = record.get("started_at")
    when = f", started {str(started)[:_SHOWN]}" if started else ""
    return f"a `loader apply` copying {index} to {dest}{when} that did not finish"


@dataclass(frozen=True)
class Lift:
    """Lifting the write block apply recorded on ``index``: the ``_meta`` to keep, and whether
    the block is still set (a record alone is what a crash between lift and removal left)."""

    index: str
    meta: dict[str, Any]  # the mapping's _meta without the record
    blocked: bool
    record: Any

    def detail(self) -> str:
        """The plan line's detail."""
        if self.blocked:
            return f"(lift index.blocks.write: left by {describe(self.index, self.record)})"
        return f"(remove _meta.{META_KEY}: its block is already lifted)"


def plan_lift(index: str, flat_settings: Mapping[str, Any], meta: Mapping[str, Any]) -> Lift | None:
    """The lift of the block apply recorded on ``index``, or ``None`` when it has no record
    (a block without one is someone else's and stays). Pure."""
    if META_KEY not in meta:
        return None
    return Lift(
        index=index,
        meta={key: value for key, value in meta.items() if key != META_KEY},
        blocked=is_write_blocked(flat_settings),
        record=meta[META_KEY],
    )


def lifted_view(index_state: Mapping[str, Any], lift: Lift) -> dict[str, Any]:
    """The ``{"settings", "mappings"}`` state of an index once ``lift`` ran, for the comparison
    with the files (a later ``_meta`` change must not write the record back)."""
    settings = {k: v for k, v in (index_state.get("settings") or {}).items() if k != WRITE_BLOCK}
    mappings = {**(index_state.get("mappings") or {}), "_meta": lift.meta}
    return {**index_state, "settings": settings, "mappings": mappings}


# --- the cluster part -------------------------------------------------------------------------


def block_for_reindex(client: OpenSearch, index: str, dest: str) -> None:
    """Record the block (keeping every other ``_meta`` key), then set it with the add index
    block API (``PUT <index>/_block/write``), which answers once every shard has taken it: a
    bulk request already past the block check when it was set has finished, so every write
    acknowledged before is in the index and none comes after. Putting ``index.blocks.write``
    with ``_settings`` gives no such guarantee: an acknowledged write could still land after
    the copy's snapshot."""
    answer = client.indices.get_mapping(index=index)
    meta = ((answer.get(index) or {}).get("mappings") or {}).get("_meta") or {}
    client.indices.put_mapping(index=index, body={"_meta": {**meta, META_KEY: new_record(dest)}})
    client.indices.add_block(index=index, block="write")


def lift_index(client: OpenSearch, lift: Lift) -> None:
    """Lift the block, then remove the record. A crash in between leaves the record alone: the
    next apply removes it."""
    if lift.blocked:
        client.indices.put_settings(index=lift.index, body={WRITE_BLOCK: None})
    client.indices.put_mapping(index=lift.index, body={"_meta": lift.meta})
    log.info("lifted the write block on %s %s", lift.index, lift.detail())


def unblock_after_failed_reindex(client: OpenSearch, index: str) -> None:
    """Lift the block this apply set and remove its record (the apply stopped before the swap)."""
    client.indices.put_settings(index=index, body={WRITE_BLOCK: None})
    answer = client.indices.get_mapping(index=index)
    meta = ((answer.get(index) or {}).get("mappings") or {}).get("_meta") or {}
    if META_KEY in meta:
        kept = {key: value for key, value in meta.items() if key != META_KEY}
        client.indices.put_mapping(index=index, body={"_meta": kept})
