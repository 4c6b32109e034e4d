"""`loader push`: make the index mirror a folder of documents (the cluster side of a push).

The work is planned (``loader.ingest.plan.plan_push``, which needs no cluster beyond the state it
is given), then applied (``apply_push``, here):

1. read every file (bad ones are reported and skipped; their indexed chunks are kept; files of
   types no reader handles are ignored, counted in one line, no failure);
2. read what the index holds for the push's scope (chunk ids and hashes only);
3. per document: unchanged (same hash) -> nothing, not even chunking; new or changed -> chunk it;
4. delete chunks that no longer exist: stale positions of changed documents, and documents removed
   from the folder (unless ``keep_removed``);
5. apply: embed only texts whose hash the scope does not hold yet (known vectors are reused),
   write in bulk, then delete in bulk (not the stale chunks of a document any of whose writes
   failed: its old version stays until a push writes it whole), refresh once, so searches see
   the new state.

``loader push --dry-run`` stops after the plan and prints it.

Chunk ids are stable (``<doc_id>-<position>``, where ``doc_id`` hashes the tenant, the collection
and the source path), so a re-push overwrites rather than duplicates, and a rerun after an
interruption converges to the same index.

A push's scope is ``(tenant, collection)``: it reads, reuses, overwrites and deletes only the
chunks of that collection that belong to its tenants. With ``--tenant T`` that is T alone (a file
whose front matter names another tenant is skipped with a message); without, each file belongs to
the tenant its front matter names, else to the ``tenant`` setting, and the push's tenants are
those. Two tenants pushing folders of the same name with the same file names never touch each
other's documents.

Example::

    report = push("docs/", settings)                  # a folder
    report = sync_documents(documents, settings, collection="kb", dry_run=True)
    report.plan                                       # ["+ add a.md (3 chunks, 3 to embed)", ...]
"""

from __future__ import annotations

import contextlib
import logging
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from opensearchpy import OpenSearch

from loader.cluster.client import cluster_errors, connect, require_cluster
from loader.documents import Document
from loader.index import bulk_load
from loader.index.compatible import check_index_compatible
from loader.ingest.actions import Vector, blocked_lines, bulk_actions, deletions
from loader.ingest.bulk import (
    BulkAction,
    BulkResult,
    bulk_request_timeout,
    send_bulk,
)
from loader.ingest.index_state import fetch_vectors, read_index_state
from loader.ingest.plan import (
    PushPlan,
    plan_push,
)
from loader.ingest.readers import SUPPORTED_SUFFIXES, Skipped, iter_documents, require_folder
from loader.ingest.report import PushReport
from loader.ingest.workers import embed_passages
from loader.models.readers import FIRST_FIELD, SECOND_FIELD, reader_settings, second_reader
from loader.settings import Settings
from loader.text import require_unicode

if TYPE_CHECKING:  # the model module is imported where a model is loaded
    from loader.models.embedding import Embedder

log = logging.getLogger(__name__)


def push(
    root: str | Path,
    settings: Settings,
    *,
    collection: str | None = None,
    **options: Any,
) -> PushReport:
    """Make the index behind ``settings.index_name`` mirror the documents under ``root``.

    Args:
        root: the folder to push.
        settings: resolved settings.
        collection: the name that scopes this folder's documents in the index (default: the
            folder's name). Removed-file deletion only touches this collection of this push's
            tenant.
        options: as for ``sync_documents``.

    Returns:
        The report; the caller decides the exit code (``report.failed``).
    """
    root = Path(root)
    require_folder(root)
    items = iter_documents(root, settings.max_file_bytes, follow_symlinks=settings.follow_symlinks)
    report = sync_documents(
        items, settings, collection=collection or root.resolve().name, **options
    )
    if not (report.added + report.updated + report.unchanged + report.failed):
        # A wrong folder, or one of files no reader handles: say so, or a push that did nothing
        # (or deleted the collection's chunks) looks like success.
        warning = (
            f"no documents in {root}: push reads files ending in {', '.join(SUPPORTED_SUFFIXES)}"
            + (f"; the {len(report.ignored)} it found are of other types" if report.ignored else "")
        )
        report.warnings.append(warning)
        (options.get("on_event") or (lambda line: None))(warning)
    return report


def sync_documents(
    items: Iterable[Document | Skipped],
    settings: Settings,
    *,
    collection: str,
    tenant: str | None = None,
    keep_removed: bool = False,
    dry_run: bool = False,
    show_progress: bool = False,
    client: OpenSearch | None = None,
    embedder: Embedder | None = None,
    on_event: Callable[[str], None] | None = None,
) -> PushReport:
    """Make the collection's documents in the index exactly ``items`` (documents from any source:
    a folder, a BEIR corpus): plan the push, then (unless ``dry_run``) apply it.

    Args:
        items: documents, and files that could not be read (their indexed chunks are kept).
        settings: resolved settings.
        collection: the name scoping these documents in the index.
        tenant: the one tenant this push writes; without it, each document's front matter
            tenant, else ``settings.tenant``. The sync reads, reuses, overwrites and deletes
            only the chunks of ``collection`` of the tenants it writes.
        keep_removed: keep the chunks of documents no longer among ``items``.
        dry_run: plan only; the report's ``plan`` says what a push would do, nothing is
            embedded or written.
        show_progress: progress bars on stderr (for terminals).
        client, embedder: reuse existing ones (tests, eval).
        on_event: called with one line per skipped file or failure as it happens, and one
            line for all the ignored files (types no reader handles).

    Returns:
        The report.
    """
    started = time.perf_counter()
    require_unicode("collection", collection, "pass another with --collection")
    if tenant is not None:
        require_unicode("tenant", tenant)
    notify = on_event or (lambda line: None)
    client, embedder = _prepare(settings, client, embedder)
    cpu_warnings = [] if dry_run else _int8_warnings(settings)
    for warning in cpu_warnings:
        notify(f"warning: {warning}")
    plan = plan_push(
        _progress(items, show_progress, "reading"),
        settings,
        embedder,
        _scope_reader(client, settings, collection),
        collection=collection,
        tenant=tenant,
        keep_removed=keep_removed,
        on_event=notify,
    )
    report = plan.report()
    report.warnings.extend(cpu_warnings)
    if dry_run:
        report.plan = plan.lines()
    else:
        apply_push(plan, settings, client, embedder, report, show_progress, notify)
    report.seconds = time.perf_counter() - started
    return report


def _int8_warnings(settings: Settings) -> list[str]:
    """``int8_cpu_warning`` of each reader that runs onnx-int8."""
    from loader.models.embedding import int8_cpu_warning

    second = reader_settings(settings)
    readers = [settings, *([second] if second is not None else [])]
    warnings = [
        int8_cpu_warning(reader.embedding_model)
        for reader in readers
        if reader.embedding_backend == "onnx-int8"
    ]
    return [warning for warning in warnings if warning]


def _prepare(
    settings: Settings, client: OpenSearch | None, embedder: Embedder | None
) -> tuple[OpenSearch, Embedder]:
    """Connect and load the embedder (unless given), then check that the index can take this
    push at all: the model's dimension, document ids with the tenant. A cluster that does not
    answer is named before the model loads."""
    if client is None:
        client = connect(settings)
        require_cluster(client, settings)
    if embedder is None:
        from loader.models.embedding import embedder_for

        embedder = embedder_for(settings)
    check_index_compatible(client, settings, embedder.dimension)
    if bulk_load.recorded(client, settings):
        # A bulk-load push that did not finish left the index unrefreshed: make its writes
        # visible, so the plan does not embed them again. apply_push restores the settings.
        with cluster_errors(settings, f"refreshing {settings.index_name}"):
            client.indices.refresh(index=settings.index_name)
    return client, embedder


def _scope_reader(
    client: OpenSearch, settings: Settings, collection: str
) -> Callable[[str], dict[str, dict[str, Any]]]:
    """``plan_push``'s ``read_scope``: the index state of one tenant's collection, with the chunks
    that lack the second reader's vector when there is one."""
    second = second_reader(settings.embedding_model, settings.second_embedding_model)
    second_field = SECOND_FIELD if second else None

    def read_scope(owner: str) -> dict[str, dict[str, Any]]:
        with cluster_errors(
            settings, f"reading the chunks of collection {collection!r} of tenant {owner!r}"
        ):
            return read_index_state(client, settings.index_name, owner, collection, second_field)

    return read_scope


def apply_push(
    plan: PushPlan,
    settings: Settings,
    client: OpenSearch,
    embedder: Embedder,
    report: PushReport,
    show_progress: bool = False,
    notify: Callable[[str], None] = lambda line: None,
) -> None:
    """Embed what the index does not hold yet, write the planned chunks, delete the stale ones,
    refresh once; fill in ``report``.

    With ``bulk_load`` (and something to write) the writes run with the index relaxed
    (``loader.index.bulk_load``), restored however they end; otherwise the settings a bulk-load
    push that did not finish left are restored first."""

    def warn(line: str) -> None:
        report.warnings.append(line)
        notify(f"warning: {line}")

    relaxing = settings.bulk_load and bool(plan.to_write or plan.deletions)
    if not relaxing:
        bulk_load.restore(client, settings, warn)
    vectors = _vectors(plan, settings, client, embedder, report, show_progress)
    second_vectors = _second_vectors(plan, settings, client, report, show_progress)
    writes = bulk_actions(plan, settings, vectors, second_vectors)
    with bulk_load.bulk_loading(client, settings, warn) if relaxing else contextlib.nullcontext():
        if second_vectors is not None and plan.fills and settings.embedding_location == "cluster":
            report.chunks_filled = _fill_on_cluster(plan, settings, client)
        result, actions, kept = _write(writes, plan, settings, client, show_progress)
    for source, count in kept:
        warn(
            f"kept {count} old chunk{'s' if count != 1 else ''} of {source}: its new chunks were "
            "not all written; the next push writes it again"
        )
    _record(result, actions, report, notify)


def _vectors(
    plan: PushPlan,
    settings: Settings,
    client: OpenSearch,
    embedder: Embedder,
    report: PushReport,
    show_progress: bool,
) -> dict[str, Vector]:
    """Every planned chunk's vector, by content hash: those the index holds are read back, only
    the others are embedded. With ``embedding_location = cluster`` the others are left out: their
    chunks go without a vector and the index's ingest pipeline embeds them."""
    vectors, texts_by_hash = _stored_and_missing(plan, settings, client)
    report.reused_vectors = sum(1 for doc in plan.to_write for h in doc.hashes if h in vectors)
    report.embedding_location = settings.embedding_location
    if settings.embedding_location == "cluster":
        # The processor embeds each chunk it receives, so a text repeated in new chunks counts
        # (and is embedded) once per chunk; the embedder is still needed for the token counts.
        report.embedded = sum(1 for doc in plan.to_write for h in doc.hashes if h not in vectors)
        return vectors
    if texts_by_hash:
        embed_started = time.perf_counter()
        new_vectors = embed_passages(
            embedder, settings, list(texts_by_hash.values()), show_progress=show_progress
        )
        report.embed_seconds = time.perf_counter() - embed_started
        report.embedded = len(texts_by_hash)
        # float32 rows as they are: the bulk lines write them as float32 (``bulk.to_json``).
        vectors.update(zip(texts_by_hash, new_vectors, strict=True))
    return vectors


def _stored_and_missing(
    plan: PushPlan, settings: Settings, client: OpenSearch, field: str = FIRST_FIELD
) -> tuple[dict[str, Vector], dict[str, str]]:
    """The planned chunks' vectors in ``field`` (a reader's; the first's by default) that the
    index holds, read back by content hash, and the texts of those it lacks, by content hash
    (a text repeated in several chunks once)."""
    needed = {h for doc in plan.to_write for h in doc.hashes}
    known = {h: cid for h, cid in plan.known_vectors.items() if h in needed}
    with cluster_errors(settings, f"reading stored vectors of {field}"):
        vectors = fetch_vectors(client, settings.index_name, known, field)
    missing: dict[str, str] = {}
    for doc in plan.to_write:
        for chunk, content_hash in zip(doc.chunks, doc.hashes, strict=True):
            if content_hash not in vectors:
                missing.setdefault(content_hash, chunk.text)
    return vectors, missing


def _second_vectors(
    plan: PushPlan,
    settings: Settings,
    client: OpenSearch,
    report: PushReport,
    show_progress: bool,
) -> dict[str, Vector] | None:
    """The second reader's vector of every planned chunk and of every chunk of an unchanged
    document that lacks it (``plan.fills``), by content hash: those the index holds are read
    back, only the others are embedded, by the second reader alone (with ``embedding_location
    = cluster``, by the ingest pipeline). ``None`` without a second reader."""
    second = reader_settings(settings)
    if second is None:
        return None
    vectors, texts_by_hash = _stored_and_missing(plan, settings, client, SECOND_FIELD)
    if settings.embedding_location == "cluster":
        # The ingest pipeline's second processor embeds what comes without it; the chunks of
        # unchanged documents go through it again (``_fill_on_cluster``).
        report.second_embedded = len(texts_by_hash)
        return vectors
    for fill in plan.fills:
        if fill.content_hash not in vectors:
            texts_by_hash.setdefault(fill.content_hash, fill.text)
    if texts_by_hash:
        from loader.models.embedding import embedder_for

        started = time.perf_counter()
        new_vectors = embed_passages(
            embedder_for(second), second, list(texts_by_hash.values()), show_progress
        )
        report.embed_seconds += time.perf_counter() - started
        report.second_embedded = len(texts_by_hash)
        vectors.update(zip(texts_by_hash, new_vectors, strict=True))
    return vectors


def _fill_on_cluster(plan: PushPlan, settings: Settings, client: OpenSearch) -> int:
    """With ``embedding_location = cluster``: put the chunks of unchanged documents that lack the
    second reader's vector (``plan.fills``) through the index's ingest pipeline again
    (``_update_by_query``; a bulk update skips pipelines), whose second processor embeds only
    that vector. Returns how many were updated."""
    ids = [fill.chunk_id for fill in plan.fills]
    size = settings.bulk_batch_size
    updated = 0
    with cluster_errors(settings, f"adding the second reader's vectors in {settings.index_name}"):
        for start in range(0, len(ids), size):
            answer = client.update_by_query(
                index=settings.index_name,
                body={"query": {"ids": {"values": ids[start : start + size]}}},
                params={
                    "conflicts": "proceed",
                    "request_timeout": bulk_request_timeout(settings.request_timeout, size, True),
                },
            )
            updated += int(answer.get("updated") or 0)
    return updated


def _write(
    writes: list[BulkAction],
    plan: PushPlan,
    settings: Settings,
    client: OpenSearch,
    show_progress: bool,
) -> tuple[BulkResult, list[BulkAction], list[tuple[str, int]]]:
    """Send the writes in bulk, then the deletions the writes' results allow (``deletions``),
    and refresh once, so searches see the new state.

    Returns:
        The merged result, every action sent, and the deletions kept per source."""
    alias = settings.index_name
    bar = _progress(None, show_progress, "indexing", total=len(writes) + len(plan.deletions))
    options = {
        "max_count": settings.bulk_batch_size,
        "on_batch": bar.update if bar else None,
        "request_timeout": bulk_request_timeout(
            settings.request_timeout,
            settings.bulk_batch_size,
            settings.embedding_location == "cluster",
        ),
    }
    with cluster_errors(settings, f"writing chunks to {alias}"):
        result = send_bulk(client, writes, **options)
        deletes, kept = deletions(plan, (item_id for _, item_id, _ in result.errors), alias)
        if bar:
            bar.update(sum(count for _, count in kept))
        deleted = send_bulk(client, deletes, **options)
        if bar:
            bar.close()
        client.indices.refresh(index=alias)
    result.succeeded += deleted.succeeded
    result.retries += deleted.retries
    result.errors += deleted.errors
    result.blocked.update(deleted.blocked)
    return result, writes + deletes, kept


def _record(
    result: BulkResult,
    actions: list[BulkAction],
    report: PushReport,
    notify: Callable[[str], None],
) -> None:
    """Fill in the report from the per-item results; name every failed item (those a block on
    the index refused in one line per index: the same cause and remedy for all of them)."""
    report.retries = result.retries
    failed_sources = sorted({tag for tag, _, _ in result.errors})
    for tag, item_id, reason in result.errors:
        report.errors.append({"source": tag, "reason": f"{item_id}: {reason}"})
        if item_id not in result.blocked:
            notify(f"failed {tag}: {item_id}: {reason}")
    for line in blocked_lines(result.blocked, actions):
        notify(line)
    failed_ids = {item_id for _, item_id, _ in result.errors}
    report.chunks_written = sum(1 for a in actions if a.op == "index" and a.id not in failed_ids)
    # += : with embedding_location = cluster the fills went through the pipeline before
    # (_fill_on_cluster), and these writes hold no update.
    report.chunks_filled += sum(1 for a in actions if a.op == "update" and a.id not in failed_ids)
    report.chunks_deleted = sum(1 for a in actions if a.op == "delete" and a.id not in failed_ids)
    report.failed = len(report.skipped) + len(failed_sources)


def _progress(iterable: Any, enabled: bool, description: str, total: int | None = None) -> Any:
    if not enabled:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=description, total=total, unit="item", leave=False)
