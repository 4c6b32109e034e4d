"""The bulk actions of a push plan, pure: the indexed body of each chunk (``chunk_body``), the
writes (``bulk_actions``), the deletions the writes' results allow (``deletions``), and one line
per write-blocked index for what it refused (``blocked_lines``). ``loader.ingest.sync`` sends
them.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from loader.documents import PATH_SEPARATOR
from loader.ingest.bulk import BLOCKED_REMEDY, BulkAction, write_blocked
from loader.ingest.fingerprint import chunking_fingerprint
from loader.ingest.plan import PlannedDocument, PushPlan, chunk_id
from loader.models.readers import FIRST_FIELD, SECOND_FIELD
from loader.settings import Settings

# A chunk's vector: a float32 row just embedded, or the list of floats read back from the index.
Vector = list[float] | np.ndarray


def chunk_body(
    planned: PlannedDocument,
    position: int,
    collection: str,
    strategy: str,
    vector: Vector | None,
    chunking: str,
    second_vector: Vector | None = None,
) -> dict[str, Any]:
    """The indexed document of one chunk (only fields of the strict mapping); ``chunking`` is
    the settings' ``chunking_fingerprint``. Without a ``vector`` the body has no ``embedding``:
    the index's ingest pipeline makes it (``embedding_location = cluster``); ``second_vector``
    is the second reader's, in ``second_embedding`` (none without a second reader)."""
    chunk = planned.chunks[position]
    meta = chunk.metadata
    tags = meta.get("tags") or []
    body: dict[str, Any] = {
        "chunk_id": chunk_id(planned.doc_id, position),
        "doc_id": planned.doc_id,
        "source": chunk.source,
        "collection": collection,
        "content_hash": planned.hashes[position],
        "doc_hash": planned.doc_hash,
        "tenant": str(meta.get("tenant")),
        "tags": [str(tag) for tag in (tags if isinstance(tags, list) else [tags])],
        "section_id": chunk.section_id,
        "strategy": strategy,
        "chunking": chunking,
        "position": position,
        "content": chunk.text,
        "title": chunk.title,
        "heading_path": PATH_SEPARATOR.join(chunk.heading_path),
        "body": chunk.body,
    }
    if vector is not None:
        body[FIRST_FIELD] = vector
    if second_vector is not None:
        body[SECOND_FIELD] = second_vector
    optional = {
        "lang": meta.get("lang"),
        "published": meta.get("published"),
        "page": chunk.page,
        "parent_text": chunk.parent_text,
        "window": chunk.window,
    }
    body.update({key: value for key, value in optional.items() if value not in (None, "")})
    if "published" in body:
        body["published"] = str(body["published"])
    return body


def bulk_actions(
    plan: PushPlan,
    settings: Settings,
    vectors: dict[str, Vector],
    second_vectors: dict[str, Vector] | None = None,
) -> list[BulkAction]:
    """The bulk writes of a plan: index every planned chunk, with the second reader's vector
    when ``second_vectors`` are given (by content hash, as ``vectors``), and add that vector
    alone to the chunks of unchanged documents that lack it (``plan.fills``, partial updates);
    ``deletions`` follow them."""
    alias = settings.index_name
    chunking = chunking_fingerprint(settings)
    cluster = settings.embedding_location == "cluster"
    seconds = second_vectors if second_vectors is not None else {}
    actions = [
        BulkAction(
            "index",
            alias,
            chunk_id(doc.doc_id, position),
            doc.document.source,
            chunk_body(
                doc,
                position,
                plan.collection,
                settings.chunk_strategy,
                # Only the cluster's ingest pipeline may fill in a missing vector.
                vectors.get(content_hash) if cluster else vectors[content_hash],
                chunking,
                # Without it, the cluster's second processor embeds it (embedding_location).
                seconds.get(content_hash),
            ),
        )
        for doc in plan.to_write
        for position, content_hash in enumerate(doc.hashes)
    ]
    if second_vectors is not None and not cluster:  # on the cluster: sync._fill_on_cluster
        actions += [
            BulkAction(
                "update",
                alias,
                fill.chunk_id,
                fill.source,
                {SECOND_FIELD: seconds[fill.content_hash]},
            )
            for fill in plan.fills
        ]
    return actions


def deletions(
    plan: PushPlan, failed_writes: Iterable[str], alias: str
) -> tuple[list[BulkAction], list[tuple[str, int]]]:
    """The deletions to send once the writes are done, and those kept: ``(source, chunks)`` per
    changed document any of whose writes failed (``failed_writes``: their chunk ids). Deleting
    its stale chunks would leave neither version whole; kept, the document holds its old chunks
    beside the new ones written, so the next push takes it for changed and writes it whole.
    Chunks of removed documents are always deleted."""
    failed_docs = {cid.rpartition("-")[0] for cid in failed_writes}
    deletes, kept = [], {}
    for cid, source in plan.deletions:
        if cid.rpartition("-")[0] in failed_docs:
            kept[source] = kept.get(source, 0) + 1
        else:
            deletes.append(BulkAction("delete", alias, cid, source))
    return deletes, sorted(kept.items())


def blocked_lines(blocked: dict[str, str], actions: list[BulkAction]) -> list[str]:
    """One line per blocked index for the items its block refused: the files, the index, the
    cause, how many chunks were not written or not deleted, and the remedy.

    Example::

        ["failed faq.txt, payments.md: index kb-v1 is write-blocked (a `loader apply` copying it
          to a new version, or a full disk): 3 chunks of these documents were not written, 1 not
          deleted; push again when `loader doctor` shows no block"]
    """
    lines = []
    for index in sorted(set(blocked.values())):
        refused = [action for action in actions if blocked.get(action.id) == index]
        files = sorted({action.tag for action in refused})
        named = ", ".join(files[:10]) + (f" and {len(files) - 10} more" if len(files) > 10 else "")
        writes = sum(1 for action in refused if action.op == "index")
        deletes = len(refused) - writes
        count, verb = (writes, "written") if writes else (deletes, "deleted")
        what = (
            f"{'1 chunk' if count == 1 else f'{count} chunks'} of these documents "
            f"{'was' if count == 1 else 'were'} not {verb}"
        )
        if writes and deletes:
            what += f", {deletes} not deleted"
        lines.append(f"failed {named}: {write_blocked(index)}: {what}; {BLOCKED_REMEDY}")
    return lines
