"""The query log (``query_log = "ubi"``): each search and each event posted against it, written to
the cluster in OpenSearch's User Behavior Insights shape (``<alias>-ubi_queries``,
``<alias>-ubi_events``; ``loader apply`` creates them, ``loader.index.query_log``).

UBI's own fields hold what UBI has a field for (``query_id``, ``user_query``: the question as
sent, ``query_response_hit_ids``, ``timestamp``, ``client_id``, ``application``; ``action_name``,
``event_attributes.object.object_id`` and ``.position.ordinal`` of an event); the rest is in
``query_attributes`` / ``event_attributes``: the tenant, the mode, the question as searched (cut
to ``MAX_QUESTION_CHARS``), each returned chunk's rank and score, the latency. Never a key, a
password, the conversation or a vector: not the rewriter's queries or standalone question either,
since a follow-up's rewrite holds the user's earlier turns (``rewrite = concat`` joins the last
one to it verbatim). Every read filters on the tenant.

A log write that fails never fails the search: it is a warning on the server's log.

Example::

    query_id = record_search(client, log_entry(request, result, query_log="ubi", index_name=alias))
    event = EventBody(query_id=query_id, action_name="click")
    record_event(client, alias, tenant, event, query_log="ubi")
"""

from __future__ import annotations

import datetime as dt
import logging
import re
import time
import uuid
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import opensearchpy

from loader.errors import ClusterError, ForbiddenError, NotFoundError
from loader.query.request import MAX_CLIENT_ID_CHARS

if TYPE_CHECKING:
    from opensearchpy import AsyncOpenSearch, OpenSearch

    from loader.query.request import SearchRequest
    from loader.query.result import SearchResult

log = logging.getLogger(__name__)

APPLICATION = "loader"
# UBI's action names are free text; these are the ones the judging loop reads.
ACTIONS = ("click", "answered", "not_answered", "copy")
MAX_LOGGED_QUESTION_CHARS = 4096
_SPACES = re.compile(r"\s+")
_EDGE_PUNCTUATION = re.compile(r"^[\W_]+|[\W_]+$")


def queries_index(alias: str) -> str:
    return f"{alias}-ubi_queries"


def events_index(alias: str) -> str:
    return f"{alias}-ubi_events"


def normalize_question(text: str) -> str:
    """The form two questions are the same in: case folded, spaces collapsed, punctuation at the
    ends dropped. ``normalize_question("  How long do REFUNDS take? ")`` -> ``'how long do
    refunds take'``."""
    return _EDGE_PUNCTUATION.sub("", _SPACES.sub(" ", text.casefold()).strip())


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def query_document(request: SearchRequest, result: SearchResult, query_id: str) -> dict[str, Any]:
    """The ``ubi_queries`` document of one search: the question of this turn only, never
    ``result.queries`` (a rewrite of a follow-up carries the earlier turns); the request's
    ``client_id`` (its client's session name: the ``worst`` sampler tells one user's follow-ups
    by it); the reranker that ran (``result.reranker``, kept in ``_source`` without a mapping:
    ``dynamic`` is false), or why none did. Pure."""
    question = request.question[:MAX_LOGGED_QUESTION_CHARS]
    hits = [
        {
            "chunk_id": hit.chunk_id,
            "rank": rank,
            "score": hit.final_score,
            "source": hit.source,
        }
        for rank, hit in enumerate(result.hits, start=1)
    ]
    return {
        "query_id": query_id,
        "query_response_id": str(uuid.uuid4()),
        "user_query": question,
        "query_response_hit_ids": [hit.chunk_id for hit in result.hits],
        "timestamp": now_iso(),
        "application": APPLICATION,
        "client_id": request.client_id[:MAX_CLIENT_ID_CHARS],
        "query_attributes": {
            "tenant": result.tenant,
            "mode": result.mode,
            "searched": result.question[:MAX_LOGGED_QUESTION_CHARS],
            "normalized": normalize_question(question),
            "reranked": result.reranked,
            "reranker": result.reranker,
            "rerank_skipped": result.rerank_skipped,
            "top_score": hits[0]["score"] if hits else 0.0,
            "results": hits,
            "latency_ms": float(result.timings.get("total_ms", 0.0)),
        },
    }


@dataclass(frozen=True)
class LogEntry:
    """One search as the log keeps it: the log index, a new query id and the document."""

    index: str
    query_id: str
    body: dict[str, Any]


def log_entry(
    request: SearchRequest, result: SearchResult, *, query_log: str, index_name: str
) -> LogEntry | None:
    """What logging this search writes; ``None`` when the log (``query_log``) is off."""
    if query_log != "ubi":
        return None
    query_id = str(uuid.uuid4())
    return LogEntry(
        queries_index(index_name),
        query_id,
        query_document(request, result, query_id),
    )


def record_search(client: OpenSearch, entry: LogEntry) -> str:
    """Write ``entry``; its ``query_id``, or ``""`` when the log index is missing or the write
    failed."""
    try:
        if not _log_exists(client, entry.index):
            return ""
        client.index(index=entry.index, id=entry.query_id, body=entry.body)
    except opensearchpy.exceptions.OpenSearchException as exc:
        return _not_logged(exc)
    return entry.query_id


async def record_search_async(client: AsyncOpenSearch, entry: LogEntry) -> str:
    """``record_search`` with the async client (``asearch``'s own)."""
    try:
        exists = _known_to_exist(entry.index)
        if exists is None:
            exists = _seen(entry.index, await client.indices.exists(index=entry.index))
        if not exists:
            return ""
        await client.index(index=entry.index, id=entry.query_id, body=entry.body)
    except opensearchpy.exceptions.OpenSearchException as exc:
        return _not_logged(exc)
    return entry.query_id


def _not_logged(exc: Exception) -> str:
    """A failed log write never fails the search: a warning, and no query id. `loader apply`
    is the fix only when the cluster answered: a timeout or no connection is the cluster's."""
    if isinstance(exc, opensearchpy.exceptions.ConnectionError):  # ConnectionTimeout too
        log.warning("query log: the search was not logged: the cluster did not answer (%s)", exc)
        return ""
    log.warning("query log: the search was not logged (%s); run `loader apply`", exc)
    return ""


# Log indices seen to exist, so each search costs one write, not an existence check as well; and
# those seen missing (when), looked at again a minute later and warned about once: an eval index
# never has a log, and a server started before `loader apply` made one starts logging soon after.
_EXISTING: set[str] = set()
_MISSING: dict[str, float] = {}
RECHECK_SECONDS = 60.0


def _log_exists(client: OpenSearch, index: str) -> bool:
    """Whether the log ``index`` exists, asking the cluster only when not known."""
    exists = _known_to_exist(index)
    return exists if exists is not None else _seen(index, client.indices.exists(index=index))


def _known_to_exist(index: str) -> bool | None:
    """Whether the log ``index`` exists, when known without asking: seen to exist (cached for
    good), or seen missing less than RECHECK_SECONDS ago. A missing log is never written to:
    OpenSearch would create it with guessed mappings instead of the file's (``loader apply``
    creates it)."""
    if index in _EXISTING:
        return True
    if time.monotonic() - _MISSING.get(index, -RECHECK_SECONDS) < RECHECK_SECONDS:
        return False
    return None


def _seen(index: str, exists: bool) -> bool:
    """Remember what the cluster said of ``index``; warn once when it is missing."""
    if exists:
        _EXISTING.add(index)
        return True
    warned = index in _MISSING
    _MISSING[index] = time.monotonic()
    if not warned:
        log.warning(
            "query log: index %r does not exist, searches are not logged; run "
            '`loader apply` with query_log = "ubi"',
            index,
        )
    return False


@dataclass(frozen=True)
class Event:
    """One event against a logged query: ``action_name`` (e.g. ``click``), and the chunk and its
    position it concerns (optional)."""

    query_id: str
    action_name: str
    object_id: str = ""
    position: int | None = None
    client_id: str = ""
    message: str = ""


def find_query(client: OpenSearch, index_name: str, query_id: str) -> dict[str, Any] | None:
    """The logged query ``query_id`` of the index ``index_name`` (its ``_source``), or ``None``."""
    try:
        answer = client.get(index=queries_index(index_name), id=query_id)
    except opensearchpy.NotFoundError:
        return None
    return answer.get("_source")


def record_event(
    client: OpenSearch, index_name: str, tenant: str, event: Event, *, query_log: str
) -> str:
    """Store ``event`` for ``tenant``; its id.

    Raises:
        NotFoundError: the log is off, or no query ``event.query_id`` was logged.
        ForbiddenError: the query is another tenant's (nothing is written).
    """
    if query_log != "ubi":
        raise NotFoundError("the query log is off on this server (query_log)")
    logged = find_query(client, index_name, event.query_id)
    if logged is None:
        raise NotFoundError(f"query_id: no logged query {event.query_id!r}")
    if (logged.get("query_attributes") or {}).get("tenant") != tenant:
        raise ForbiddenError(f"query_id: {event.query_id!r} is another tenant's query")
    attributes: dict[str, Any] = {"tenant": tenant}
    if event.object_id:
        attributes["object"] = {"object_id": event.object_id, "object_id_field": "chunk_id"}
    if event.position is not None:
        attributes["position"] = {"ordinal": event.position}
    body = {
        "action_name": event.action_name,
        "query_id": event.query_id,
        "client_id": event.client_id[:MAX_CLIENT_ID_CHARS],
        "application": APPLICATION,
        "timestamp": now_iso(),
        "message_type": "INFO",
        "message": event.message[:1024],
        "event_attributes": attributes,
    }
    event_id = str(uuid.uuid4())
    index = events_index(index_name)
    try:
        if not _log_exists(client, index):
            raise NotFoundError(f"the query log's index {index!r} does not exist (loader apply)")
        client.index(index=index, id=event_id, body=body)
    except opensearchpy.exceptions.OpenSearchException as exc:
        raise ClusterError(f"query log: the event was not stored: {exc}") from exc
    return event_id


def _all(client: OpenSearch, index: str, query: dict[str, Any], limit: int) -> list[dict]:
    """Up to ``limit`` documents' ``_source`` matching ``query``, newest first."""
    if not client.indices.exists(index=index):
        return []
    client.indices.refresh(index=index)
    answer = client.search(
        index=index,
        body={"query": query, "size": limit, "sort": [{"timestamp": "desc"}]},
    )
    return [hit["_source"] for hit in answer["hits"]["hits"]]


def tenant_queries(
    client: OpenSearch, index_name: str, tenant: str, limit: int = 10_000
) -> list[dict[str, Any]]:
    """The tenant's logged queries, newest first."""
    query = {"term": {"query_attributes.tenant": tenant}}
    return _all(client, queries_index(index_name), query, limit)


def tenant_events(
    client: OpenSearch, index_name: str, tenant: str, limit: int = 10_000
) -> list[dict[str, Any]]:
    """The tenant's events, newest first."""
    query = {"term": {"event_attributes.tenant": tenant}}
    return _all(client, events_index(index_name), query, limit)
