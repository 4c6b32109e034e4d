"""Snapshots of what a query set's searches returned: the memory a "did my change make which
questions better or worse?" needs (a new learned model, a setting changed, documents pushed).

A snapshot is a document ``kind: snapshot`` in ``<alias>-judgments`` beside the set's grades,
tenant-scoped as they are: every read, write and delete checks the tenant (``get_query_set``
first, then the snapshot's own ``tenant`` and ``query_set``), and another tenant's snapshot is
reported exactly as a missing one (``NotFoundError``, same message). It holds, per question of
the set, each column's top 10 **documents** (each search mode's, and ``learned`` when the
tenant's model is served), ranked one hit per document as ``loader eval`` searches: the ids the
live scores score, so that ``loader.eval.snapshot_scores`` can score them again with today's
grades. Scores are not stored: a grade given after the snapshot then counts on both sides alike.
``delete_snapshot`` removes one for good: a team that snapshots before every change would
otherwise fill the listing, which shows the newest ``LISTED``.

Beside the rankings: a label (``check_label``), the time, the rater, and what was served
(``served``: the ``search_mode``, the readers, ``rerank``, and the learned model's identity).
A question is stored as a digest of its text, so a set re-sampled under the same name compares
the questions it kept, wherever they now are (``snapshot_scores.aligned``).

Size: at most ``MAX_QUESTIONS`` questions and ``MAX_SNAPSHOT_BYTES`` of JSON; a larger set is
refused with ``InputError`` before anything is written (split the set).

Example::

    snapshot = save_snapshot(client, index_name, "acme", set_id, "before the new model",
                             rankings=[{"bm25": ["refunds.md", ...], ...}, ...],
                             questions=query_set.questions, served=served, rater="alice")
    get_snapshot(client, index_name, "acme", set_id, snapshot.snapshot_id).rankings[0]["bm25"]
    delete_snapshot(client, index_name, "acme", set_id, snapshot.snapshot_id)
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import opensearchpy

from loader.errors import InputError, NotFoundError
from loader.query.judgments import get_query_set, judgments_index
from loader.query.query_log import now_iso
from loader.text import first_surrogate

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

MAX_LABEL_CHARS = 120
DEPTH = 10  # each column's top 10 documents: what nDCG@10 reads
MAX_QUESTIONS = 1000  # as many as `loader judgments sample --size` takes
MAX_SNAPSHOT_BYTES = 8 * 1024 * 1024  # of the stored JSON: well under a request's limit
LISTED = 100  # the newest snapshots a set lists (older ones stay readable by id)
_SNAPSHOT_ID = re.compile(r"[0-9a-f]{20}")


def question_digest(question: str) -> str:
    """How a snapshot names a question: 16 hex of its text's SHA-256 (a question may be 1 MB)."""
    return hashlib.sha256(question.encode("utf-8", "surrogatepass")).hexdigest()[:16]


def check_label(label: Any) -> str:
    """``label`` stripped: 1 to ``MAX_LABEL_CHARS`` characters of text, no lone surrogate and
    no control character (a label is one line a person reads).

    Raises:
        InputError: naming ``label`` and what is wrong.
    """
    if not isinstance(label, str):
        raise InputError("label: must be text")
    label = label.strip()
    if not label:
        raise InputError("label: give the snapshot a name (what is about to change)")
    if len(label) > MAX_LABEL_CHARS:
        raise InputError(f"label: at most {MAX_LABEL_CHARS} characters, not {len(label):,}")
    char = first_surrogate(label)
    if char is not None:
        raise InputError(f"label: holds the lone surrogate U+{ord(char):04X} (a broken escape)")
    control = next((c for c in label if unicodedata.category(c) == "Cc"), None)
    if control is not None:
        raise InputError(f"label: holds the control character U+{ord(control):04X}")
    return label


def check_question_count(name: str, count: int, bound: str = "a snapshot holds") -> None:
    """Refuse a set too large to snapshot, or to try settings on (``bound`` says which), before
    its searches are run.

    Raises:
        InputError: naming the query set, its size and the bound.
    """
    if count > MAX_QUESTIONS:
        raise InputError(
            f"query set {name!r}: {count:,} questions, and {bound} at most "
            f"{MAX_QUESTIONS:,}; split the set"
        )


@dataclass
class Snapshot:
    """One snapshot of a query set (``rankings`` is empty when read by ``list_snapshots``)."""

    snapshot_id: str
    set_id: str
    tenant: str
    label: str
    timestamp: str
    rater: str = ""
    served: dict[str, Any] = field(default_factory=dict)
    columns: list[str] = field(default_factory=list)
    digests: list[str] = field(default_factory=list)  # question_digest of each question
    rankings: list[dict[str, list[str]]] = field(default_factory=list)  # column -> documents
    count: int = 0  # its questions (also when read without them)

    def summary(self) -> dict[str, Any]:
        """What a listing shows of it."""
        return {
            "snapshot": self.snapshot_id,
            "label": self.label,
            "timestamp": self.timestamp,
            "rater": self.rater,
            "served": self.served,
            "columns": self.columns,
            "questions": self.count,
        }


def _document_id(snapshot_id: str) -> str:
    return f"snapshot-{snapshot_id}"


def save_snapshot(
    client: OpenSearch,
    index_name: str,
    tenant: str,
    set_id: str,
    label: str,
    *,
    rankings: Sequence[Mapping[str, Sequence[str]]],
    questions: Sequence[str],
    served: Mapping[str, Any],
    rater: str = "",
) -> Snapshot:
    """Store ``rankings`` (per question of the set: column -> its top documents, best first)
    as a new snapshot of ``tenant``'s set ``set_id``.

    Raises:
        InputError: a bad label, rankings that do not match the set's questions, or a snapshot
            over ``MAX_QUESTIONS`` questions or ``MAX_SNAPSHOT_BYTES`` (nothing written).
        NotFoundError: no such set of this tenant (nothing written).
    """
    label = check_label(label)
    query_set = get_query_set(client, index_name, tenant, set_id)  # the tenant check
    check_question_count(query_set.name, len(questions))
    if len(rankings) != len(questions) or list(questions) != query_set.questions:
        raise InputError(f"query set {query_set.name!r} changed while its snapshot was taken")
    columns = list(rankings[0]) if rankings else []
    snapshot = Snapshot(
        uuid.uuid4().hex[:20],
        set_id,
        tenant,
        label,
        now_iso(),
        rater,
        dict(served),
        columns,
        [question_digest(q) for q in questions],
        [{c: [str(d) for d in r.get(c, [])][:DEPTH] for c in columns} for r in rankings],
        len(questions),
    )
    body = {
        "kind": "snapshot",
        "tenant": tenant,
        "query_set": set_id,
        "snapshot": snapshot.snapshot_id,
        "label": label,
        "rater": rater,
        "served": snapshot.served,
        "columns": columns,
        "question_count": snapshot.count,
        "questions": [
            {"digest": digest, "rankings": ranking}
            for digest, ranking in zip(snapshot.digests, snapshot.rankings, strict=True)
        ],
        "timestamp": snapshot.timestamp,
    }
    size = len(json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass"))
    if size > MAX_SNAPSHOT_BYTES:
        raise InputError(
            f"query set {query_set.name!r}: its snapshot would be {size:,} bytes, and one is at "
            f"most {MAX_SNAPSHOT_BYTES:,}; split the set"
        )
    client.index(
        index=judgments_index(index_name),
        id=_document_id(snapshot.snapshot_id),
        body=body,
        params={"refresh": "true"},
    )
    return snapshot


def _tenant_checked(
    client: OpenSearch,
    index_name: str,
    tenant: str,
    set_id: str,
    snapshot_id: str,
    source_includes: Sequence[str] = (),
) -> dict[str, Any]:
    """The stored document of snapshot ``snapshot_id`` of ``tenant``'s set ``set_id`` (only
    ``source_includes`` of its source when given): the one tenant check of every read and
    delete, so that they cannot drift apart.

    Raises:
        NotFoundError: no such set of this tenant, or no such snapshot of the set: one that is
            another tenant's or another set's, or an id no snapshot can have, gets the same
            message as one that never was.
    """
    get_query_set(client, index_name, tenant, set_id)
    missing = NotFoundError(f"snapshot {str(snapshot_id)[:40]!r} does not exist")
    if not isinstance(snapshot_id, str) or not _SNAPSHOT_ID.fullmatch(snapshot_id):
        raise missing  # no snapshot has such an id: the cluster is not asked
    params = {"_source_includes": ",".join(source_includes)} if source_includes else {}
    try:
        stored = client.get(
            index=judgments_index(index_name), id=_document_id(snapshot_id), params=params
        )
    except opensearchpy.NotFoundError:
        raise missing from None
    s = stored.get("_source") or {}
    if (s.get("kind"), s.get("tenant"), s.get("query_set")) != ("snapshot", tenant, set_id):
        raise missing
    return stored


def get_snapshot(
    client: OpenSearch, index_name: str, tenant: str, set_id: str, snapshot_id: str
) -> Snapshot:
    """Snapshot ``snapshot_id`` of ``tenant``'s set ``set_id``, with its rankings.

    Raises:
        NotFoundError: no such set of this tenant, or no such snapshot of the set: one that is
            another tenant's or another set's gets the same message as one that never was.
    """
    stored = _tenant_checked(client, index_name, tenant, set_id, snapshot_id)
    return _stored_snapshot(stored["_source"], snapshot_id, set_id, tenant)


def delete_snapshot(
    client: OpenSearch, index_name: str, tenant: str, set_id: str, snapshot_id: str
) -> None:
    """Delete snapshot ``snapshot_id`` of ``tenant``'s set ``set_id``; a listing right after
    no longer shows it (the index is refreshed).

    Raises:
        NotFoundError: as ``get_snapshot``, with its message (nothing deleted): another
            tenant's snapshot, another set's, or a malformed id answers as one that never was,
            as does one deleted meanwhile.
    """
    # Only what the check reads: a snapshot's rankings may be megabytes.
    _tenant_checked(
        client, index_name, tenant, set_id, snapshot_id, ("kind", "tenant", "query_set")
    )
    try:
        client.delete(
            index=judgments_index(index_name),
            id=_document_id(snapshot_id),
            params={"refresh": "true"},
        )
    except opensearchpy.NotFoundError:  # deleted meanwhile (another tab, another rater)
        raise NotFoundError(f"snapshot {snapshot_id!r} does not exist") from None


def list_snapshots(client: OpenSearch, index_name: str, tenant: str, set_id: str) -> list[Snapshot]:
    """The newest ``LISTED`` snapshots of ``tenant``'s set ``set_id``, newest first, without
    their rankings.

    Raises:
        NotFoundError: no such set of this tenant.
    """
    get_query_set(client, index_name, tenant, set_id)
    index = judgments_index(index_name)
    query = {
        "bool": {
            "filter": [
                {"term": {"kind": "snapshot"}},
                {"term": {"tenant": tenant}},
                {"term": {"query_set": set_id}},
            ]
        }
    }
    answer = client.search(
        index=index,
        body={
            "query": query,
            "size": LISTED,
            "sort": [{"timestamp": "desc"}],
            "_source": {"excludes": ["questions"]},
        },
    )
    return [
        _stored_snapshot(hit["_source"], str(hit["_source"]["snapshot"]), set_id, tenant)
        for hit in answer["hits"]["hits"]
    ]


def _stored_snapshot(s: dict[str, Any], snapshot_id: str, set_id: str, tenant: str) -> Snapshot:
    """A snapshot as stored (``s``, its ``_source``), with its rankings when they were read."""
    stored = s.get("questions") or []
    return Snapshot(
        snapshot_id,
        set_id,
        tenant,
        str(s.get("label") or ""),
        str(s.get("timestamp") or ""),
        str(s.get("rater") or ""),
        dict(s.get("served") or {}),
        [str(c) for c in s.get("columns") or []],
        [str(q.get("digest") or "") for q in stored],
        [{str(c): list(d) for c, d in (q.get("rankings") or {}).items()} for q in stored],
        int(s.get("question_count") or len(stored)),
    )
