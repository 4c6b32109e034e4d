"""Bulk-load mode: an index relaxed for a large push, and restored even after a crash.

While ``loader push --bulk-load`` writes, the concrete index behind the alias gets
``refresh_interval: -1`` (no segment every second) and ``number_of_replicas: 0`` (each chunk is
indexed once, replicas are copied as whole files afterwards). The index's own values are recorded
*on the cluster* before anything is relaxed, in the mapping's ``_meta.loader_bulk_load``::

    {"refresh_interval": "5s" | null, "number_of_replicas": 1, "started_at": "2026-12-01T11:30:00Z"}

(``null``: the index had no value of its own, the server default applies). The record is what
makes the restore independent of the push finishing: the push restores on the way out (success,
failed items or an exception); a push killed before that leaves the record, and the next
``loader push`` (before its own work) or ``loader apply`` (a plan step, "restore bulk-load
settings") puts the recorded values back and removes the record. A bulk-load push that finds a
record keeps it: the values it would read are the relaxed ones, never the originals.

The record lives in ``_meta`` because that survives restarts with the index and is readable by
any client, and ``loader apply`` compares only the ``_meta`` keys the files set (a record is never
a change); ``PUT _mapping`` replaces ``_meta`` as a whole, so it is always written back with every
other key kept.

Example::

    with bulk_loading(client, settings, warn=print):   # relax, record ...
        send_bulk(client, actions)                      # ... restore, refresh
    restore(client, settings)                           # what a crashed push left, if anything
"""

from __future__ import annotations

import contextlib
import logging
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from opensearchpy import OpenSearch

from loader.cluster.client import cluster_errors
from loader.settings import Settings

log = logging.getLogger(__name__)

META_KEY = "loader_bulk_load"
REFRESH_KEY = "index.refresh_interval"
REPLICAS_KEY = "index.number_of_replicas"
RELAXED = {"index": {"refresh_interval": "-1", "number_of_replicas": 0}}
# A time value OpenSearch accepts for refresh_interval ("-1" turns refresh off).
_TIME_VALUE = re.compile(r"-1|\d{1,9}(\.\d{1,6})?(nanos|micros|ms|s|m|h|d)?")
_MAX_REPLICAS = 1000


# --- the pure part: records and what restoring them means --------------------------------------


def new_record(flat_settings: Mapping[str, Any], now: datetime | None = None) -> dict[str, Any]:
    """The record of an index's own values, from its ``flat_settings``, before relaxing it."""
    replicas = flat_settings.get(REPLICAS_KEY, 1)
    return {
        "refresh_interval": flat_settings.get(REFRESH_KEY),
        "number_of_replicas": int(replicas),
        "started_at": (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }


@dataclass(frozen=True)
class Restore:
    """What restoring one index's record means: the settings to put back, the ``_meta`` to keep,
    and a warning per recorded value that could not be used."""

    index: str
    settings: dict[str, Any]  # flat: {"index.refresh_interval": "5s" | None, ...}
    meta: dict[str, Any]  # the mapping's _meta without the record
    relaxed: dict[str, Any]  # the values the index has now (for the plan line)
    warnings: list[str] = field(default_factory=list)

    def detail(self) -> str:
        """``(restore refresh_interval: -1 -> 5s, number_of_replicas: 0 -> 1: ...)`` for a plan
        line."""
        parts = [
            f"{key.removeprefix('index.')}: {self.relaxed.get(key) or 'default'} -> "
            f"{'default' if value is None else value}"
            for key, value in self.settings.items()
        ]
        return f"(restore {', '.join(parts)}: left relaxed by a bulk-load push that did not finish)"


def plan_restore(
    index: str, flat_settings: Mapping[str, Any], meta: Mapping[str, Any], fallback_replicas: int
) -> Restore | None:
    """The restore of ``index``'s record, or ``None`` when it has none. Pure.

    A record value that is missing or not what a push writes (a hand-edited or hostile ``_meta``)
    is not sent to the cluster: the refresh interval falls back to the server default, the
    replicas to ``fallback_replicas`` (the ``number_of_replicas`` setting), each with a warning.
    """
    if META_KEY not in meta:
        return None
    record = meta[META_KEY]
    warnings: list[str] = []
    if not isinstance(record, Mapping):
        warnings.append(f"index {index}: _meta.{META_KEY} is not an object; using the defaults")
        record = {}
    refresh = record.get("refresh_interval")
    if refresh is not None and not (isinstance(refresh, str) and _TIME_VALUE.fullmatch(refresh)):
        warnings.append(
            f"index {index}: _meta.{META_KEY}.refresh_interval {str(refresh)[:40]!r} is not a "
            "time value; restoring the server default"
        )
        refresh = None
    replicas = _replicas(record.get("number_of_replicas"))
    if replicas is None:
        warnings.append(
            f"index {index}: _meta.{META_KEY}.number_of_replicas "
            f"{str(record.get('number_of_replicas'))[:40]!r} is not a replica count; restoring "
            f"number_of_replicas = {fallback_replicas}"
        )
        replicas = fallback_replicas
    return Restore(
        index=index,
        settings={REFRESH_KEY: refresh, REPLICAS_KEY: replicas},
        meta={key: value for key, value in meta.items() if key != META_KEY},
        relaxed={key: flat_settings.get(key) for key in (REFRESH_KEY, REPLICAS_KEY)},
        warnings=warnings,
    )


def _replicas(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, str) and value.isdigit():
        value = int(value)
    return value if isinstance(value, int) and 0 <= value <= _MAX_REPLICAS else None


def restored_view(index_state: Mapping[str, Any], restore: Restore) -> dict[str, Any]:
    """The ``{"settings", "mappings"}`` state of an index as it will be once ``restore`` ran, so
    that ``loader apply`` compares the files with the index's own values, not the relaxed ones
    (its own ``number_of_replicas`` change then comes after the restore and wins)."""
    settings = dict(index_state.get("settings") or {})
    for key, value in restore.settings.items():
        if value is None:
            settings.pop(key, None)
        else:
            settings[key] = str(value)
    mappings = {**(index_state.get("mappings") or {}), "_meta": restore.meta}
    return {**index_state, "settings": settings, "mappings": mappings}


# --- the cluster part ------------------------------------------------------------------------


def _read(client: OpenSearch, alias: str) -> dict[str, tuple[dict[str, Any], dict[str, Any]]]:
    """``{concrete index: (flat settings, mapping _meta)}`` of the indices behind ``alias``."""
    answer = client.indices.get(index=alias, flat_settings=True)
    return {
        index: (body.get("settings") or {}, (body.get("mappings") or {}).get("_meta") or {})
        for index, body in answer.items()
    }


def relax(client: OpenSearch, settings: Settings) -> list[str]:
    """Record the own values of each index behind ``settings.index_name`` (unless a record is
    already there), then relax them. Returns the relaxed indices."""
    alias = settings.index_name
    with cluster_errors(settings, f"relaxing the settings of {alias} for a bulk load"):
        indices = _read(client, alias)
        for index, (flat, meta) in sorted(indices.items()):
            if META_KEY in meta:
                log.info("bulk load: %s keeps the record of an earlier bulk load", index)
            else:
                meta = {**meta, META_KEY: new_record(flat)}
                # PUT _mapping replaces _meta as a whole: every other key goes back with it.
                client.indices.put_mapping(index=index, body={"_meta": meta})
            client.indices.put_settings(index=index, body=RELAXED)
            log.info("bulk load: %s relaxed (refresh_interval -1, number_of_replicas 0)", index)
    return sorted(indices)


def restore_index(client: OpenSearch, restore: Restore) -> None:
    """Put the recorded values back, then remove the record, then refresh (what a crashed push
    wrote becomes searchable). A crash in between leaves the record: restoring again is safe."""
    client.indices.put_settings(index=restore.index, body=restore.settings)
    client.indices.put_mapping(index=restore.index, body={"_meta": restore.meta})
    client.indices.refresh(index=restore.index)
    log.info("bulk load: %s restored (%s)", restore.index, restore.detail())


def restore(
    client: OpenSearch, settings: Settings, warn: Callable[[str], None] = log.warning
) -> list[str]:
    """Restore every index behind ``settings.index_name`` that holds a record; the others are
    not touched. Returns the restored indices; ``warn`` gets one line per unusable value."""
    alias = settings.index_name
    restored = []
    with cluster_errors(settings, f"restoring the bulk-load settings of {alias}"):
        for index, (flat, meta) in sorted(_read(client, alias).items()):
            planned = plan_restore(index, flat, meta, settings.number_of_replicas)
            if planned is None:
                continue
            for line in planned.warnings:
                warn(line)
            restore_index(client, planned)
            restored.append(index)
    return restored


def recorded(client: OpenSearch, settings: Settings) -> list[str]:
    """The indices behind ``settings.index_name`` that hold a record."""
    with cluster_errors(settings, f"reading the mapping of {settings.index_name}"):
        return [
            index
            for index, (_, meta) in _read(client, settings.index_name).items()
            if META_KEY in meta
        ]


@contextlib.contextmanager
def bulk_loading(
    client: OpenSearch, settings: Settings, warn: Callable[[str], None] = log.warning
) -> Iterator[list[str]]:
    """Relax the index for the ``with`` block, restore it on the way out, however the block
    ends. A restore that fails after the block failed is logged and the block's error raised;
    after a block that succeeded it is raised (the record stays for the next push or apply)."""
    indices = relax(client, settings)
    try:
        yield indices
    except BaseException:
        try:
            restore(client, settings, warn)
        except Exception:  # the push's own error says more; the record stays for the next run
            log.exception("bulk load: restoring %s failed", settings.index_name)
        raise
    restore(client, settings, warn)
