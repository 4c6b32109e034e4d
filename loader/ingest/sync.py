"""`loader push`: make the index mirror a folder of documents.

The work is planned (``plan_push``, which needs no cluster beyond the state it is given), then
applied (``apply_push``):

1. read every file (bad ones are reported and skipped; their indexed chunks are kept);
2. read what the index holds for the push's scope (chunk ids and hashes only);
3. per document: unchanged (same hash) -> nothing, not even chunking; new or changed -> chunk it;
4. delete chunks that no longer exist: stale positions of changed documents, and documents removed
   from the folder (unless ``keep_removed``);
5. apply: embed only texts whose hash the scope does not hold yet (known vectors are reused),
   write and delete in bulk, refresh once, so searches see the new state.

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
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from opensearchpy import OpenSearch, helpers

from loader.cluster.client import cluster_errors, connect
from loader.documents import PATH_SEPARATOR, Chunk, Document
from loader.errors import ConfigError, InputError, LoaderError
from loader.ingest.bulk import BulkAction, send_bulk
from loader.ingest.chunking import chunk_document, chunking_config
from loader.ingest.readers import Skipped, iter_documents
from loader.models.embedding import Embedder, embedder_for
from loader.settings import Settings

log = logging.getLogger(__name__)

# Fields read back from the index to plan a push: small, so planning stays cheap.
STATE_FIELDS = ["doc_id", "source", "content_hash", "doc_hash"]


@dataclass
class PushReport:
    """What a push did. ``failed`` counts documents that could not be read or written."""

    collection: str = ""
    tenants: list[str] = field(default_factory=list)  # the tenants whose chunks it synced
    added: int = 0
    updated: int = 0
    unchanged: int = 0
    deleted: int = 0
    failed: int = 0
    chunks: int = 0
    chunks_written: int = 0
    chunks_deleted: int = 0
    embedded: int = 0
    reused_vectors: int = 0
    retries: int = 0
    seconds: float = 0.0
    embed_seconds: float = 0.0
    skipped: list[dict[str, str]] = field(default_factory=list)  # {source, reason}
    errors: list[dict[str, str]] = field(default_factory=list)  # {source, reason}
    warnings: list[str] = field(default_factory=list)
    plan: list[str] | None = None  # dry run: what a push would do, one line per change

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PlannedDocument:
    document: Document
    doc_id: str
    doc_hash: str
    chunks: list[Chunk]
    hashes: list[str]  # per chunk: what decides whether its vector can be reused


def stable_id(*parts: str) -> str:
    return hashlib.sha1("\x1f".join(parts).encode("utf-8")).hexdigest()[:20]


def chunk_hash(chunk: Chunk, model: str) -> str:
    """The chunk's content hash, salted with the model: another model means other vectors."""
    return hashlib.sha256(f"{model}\x00{chunk.content_hash}".encode()).hexdigest()


def chunk_id(doc_id: str, position: int) -> str:
    return f"{doc_id}-{position}"


# Bump when the chunkers cut the same document differently, so every document is re-chunked.
CHUNKING_VERSION = "1"


def document_hash(document: Document, settings: Settings) -> str:
    """Everything that decides a document's chunks and vectors: its text and metadata, the
    chunking settings and the model. Equal hashes mean the document need not even be chunked."""
    digest = hashlib.sha256()
    parts = [
        CHUNKING_VERSION,
        settings.embedding_model,
        settings.chunk_strategy,
        str(settings.chunk_target_tokens),
        str(settings.chunk_max_tokens),
        str(settings.chunk_overlap_tokens),
        str(settings.chunk_max_chars),
        repr(settings.semantic_threshold),
        str(settings.sentence_window),
        document.source,
        document.title,
        repr(sorted(document.metadata.items())),
    ]
    for section in document.sections:
        parts.append("\x1e".join(section.heading_path))
        for block in section.blocks:
            parts.extend((block.kind, block.text, str(block.page)))
    for part in parts:
        digest.update(part.encode("utf-8"))
        digest.update(b"\x00")
    return digest.hexdigest()


def stored_doc_hash(source_hash: str, chunk_count: int) -> str:
    """The doc_hash field: the document hash and its chunk count, so a document whose writes
    were interrupted (fewer chunks than planned) is never taken for unchanged."""
    return f"{source_hash}:{chunk_count}"


def is_unchanged(existing: dict[str, Any] | None, source_hash: str) -> bool:
    if existing is None or len(existing["doc_hashes"]) != 1:
        return False
    (stored,) = existing["doc_hashes"]
    return stored == stored_doc_hash(source_hash, len(existing["chunks"]))


def identify(
    document: Document, collection: str, settings: Settings, tenant: str | None
) -> tuple[str, str]:
    """Give the document its tenant; return its stable id and its hash.

    The tenant is the push's ``tenant`` when given, else the document's front matter, else the
    ``tenant`` setting.

    Raises:
        InputError: the push names a tenant and the document's front matter names another.
    """
    named = document.metadata.get("tenant")
    named = None if named in (None, "") else str(named)
    if tenant and named and named != tenant:
        raise InputError(
            f"its front matter names tenant {named!r} but this push is for tenant {tenant!r}; "
            f"push it with --tenant {named!r}, or without --tenant"
        )
    owner = tenant or named or settings.tenant
    document.metadata["tenant"] = owner
    return document_id(owner, collection, document.source), document_hash(document, settings)


def document_id(tenant: str, collection: str, source: str) -> str:
    """A document's identity: its tenant, collection and path. The tenant is part of it so that
    two tenants' files of the same name are two documents (``DOC_ID_SCHEME``)."""
    return stable_id(tenant, collection, source)


def plan_document(
    document: Document,
    doc_id: str,
    source_hash: str,
    settings: Settings,
    embedder: Embedder,
) -> PlannedDocument:
    """Chunk one document and compute the hashes that decide what to write."""
    config = chunking_config(settings, embedder.max_text_tokens)
    chunks = chunk_document(document, config, embedder.count_tokens, embed=embedder.embed)
    hashes = [chunk_hash(chunk, settings.embedding_model) for chunk in chunks]
    return PlannedDocument(
        document, doc_id, stored_doc_hash(source_hash, len(chunks)), chunks, hashes
    )


def chunk_body(
    planned: PlannedDocument, position: int, collection: str, strategy: str, vector: list[float]
) -> dict[str, Any]:
    """The indexed document of one chunk (only fields of the strict mapping)."""
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
        "position": position,
        "content": chunk.text,
        "title": chunk.title,
        "heading_path": PATH_SEPARATOR.join(chunk.heading_path),
        "body": chunk.body,
        "embedding": vector,
    }
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


def scope_query(tenant: str, collection: str) -> dict[str, Any]:
    """The chunks a push of ``collection`` for ``tenant`` owns: the only ones it may read for
    reuse, overwrite or delete."""
    return {
        "bool": {"filter": [{"term": {"tenant": tenant}}, {"term": {"collection": collection}}]}
    }


def read_index_state(
    client: OpenSearch, alias: str, tenant: str, collection: str
) -> dict[str, dict[str, Any]]:
    """What the index holds for one tenant's collection:
    doc_id -> {source, doc_hashes, chunks: {id: hash}}."""
    state: dict[str, dict[str, Any]] = {}
    hits = helpers.scan(
        client,
        index=alias,
        query={"query": scope_query(tenant, collection), "_source": STATE_FIELDS},
        size=2000,
        preserve_order=False,
    )
    for hit in hits:
        source = hit["_source"]
        entry = state.setdefault(
            source["doc_id"],
            {"source": source["source"], "doc_hashes": set(), "chunks": {}},
        )
        entry["doc_hashes"].add(source.get("doc_hash"))
        entry["chunks"][hit["_id"]] = source.get("content_hash")
    return state


def fetch_vectors(client: OpenSearch, alias: str, ids_by_hash: dict[str, str]) -> dict[str, list]:
    """Vectors the index already holds, by content hash (one representative chunk id each)."""
    vectors: dict[str, list] = {}
    ids = list(ids_by_hash.items())
    for start in range(0, len(ids), 500):
        batch = dict(ids[start : start + 500])
        response = client.mget(
            index=alias, body={"ids": list(batch.values())}, _source_includes=["embedding"]
        )
        by_id = {doc["_id"]: doc for doc in response["docs"] if doc.get("found")}
        for content_hash, doc_id in batch.items():
            doc = by_id.get(doc_id)
            if doc and doc["_source"].get("embedding"):
                vectors[content_hash] = doc["_source"]["embedding"]
    return vectors


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
    if not root.is_dir():
        raise ConfigError(f"{root} is not a folder; `loader push` takes a folder of documents")
    items = iter_documents(root, settings.max_file_bytes, follow_symlinks=settings.follow_symlinks)
    return sync_documents(items, settings, collection=collection or root.resolve().name, **options)


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
        on_event: called with one line per skipped file or failure as it happens.

    Returns:
        The report.
    """
    started = time.perf_counter()
    notify = on_event or (lambda line: None)
    client = client or connect(settings)
    embedder = embedder or embedder_for(settings)

    # Can the index take this push at all: the model's dimension, document ids with the tenant.
    from loader.index.apply import check_index_compatible

    check_index_compatible(client, settings, embedder.dimension)

    def read_scope(owner: str) -> dict[str, dict[str, Any]]:
        with cluster_errors(
            settings, f"reading the chunks of collection {collection!r} of tenant {owner!r}"
        ):
            return read_index_state(client, settings.index_name, owner, collection)

    plan = plan_push(
        _progress(items, show_progress, "reading"),
        settings,
        embedder,
        read_scope,
        collection=collection,
        tenant=tenant,
        keep_removed=keep_removed,
        on_event=notify,
    )
    report = plan.report()
    _warn_about_truncation(plan.to_write, embedder, report, notify)
    if dry_run:
        report.plan = plan.lines()
    else:
        apply_push(plan, settings, client, embedder, report, show_progress, notify)
    report.seconds = time.perf_counter() - started
    return report


@dataclass
class PushPlan:
    """What a push will do, decided from the documents and the index state alone."""

    collection: str
    tenants: list[str]
    to_write: list[PlannedDocument]  # new or changed documents, chunked
    added: list[str]  # sources
    updated: list[str]
    unchanged: int
    removed: list[str]  # sources of documents no longer among the items
    deletions: list[tuple[str, str]]  # (chunk id, source): stale and removed chunks
    kept_chunks: int  # chunks the index keeps for unchanged documents
    known_vectors: dict[str, str]  # content hash -> a chunk id in scope holding its vector
    skipped: list[dict[str, str]] = field(default_factory=list)  # {source, reason}

    @property
    def chunks(self) -> int:
        return self.kept_chunks + sum(len(doc.chunks) for doc in self.to_write)

    def hashes_to_embed(self) -> set[str]:
        return {h for doc in self.to_write for h in doc.hashes if h not in self.known_vectors}

    def report(self) -> PushReport:
        return PushReport(
            collection=self.collection,
            tenants=list(self.tenants),
            added=len(self.added),
            updated=len(self.updated),
            unchanged=self.unchanged,
            deleted=len(self.removed),
            chunks=self.chunks,
            failed=len(self.skipped),
            skipped=list(self.skipped),
        )

    def lines(self) -> list[str]:
        """One line per change, as ``loader push --dry-run`` prints them."""
        by_source = {doc.document.source: doc for doc in self.to_write}
        deleted: dict[str, int] = {}
        for _, source in self.deletions:
            deleted[source] = deleted.get(source, 0) + 1
        lines = []
        for symbol, action, sources in (("+", "add", self.added), ("~", "update", self.updated)):
            for source in sources:
                doc = by_source[source]
                fresh = sum(1 for h in set(doc.hashes) if h not in self.known_vectors)
                lines.append(
                    f"{symbol} {action} {source} ({len(doc.chunks)} chunks, {fresh} to embed"
                    f"{f', {deleted[source]} stale deleted' if source in deleted else ''})"
                )
        for source in self.removed:
            lines.append(f"- delete {source} ({deleted.get(source, 0)} chunks)")
        for item in self.skipped:
            lines.append(f"! skip {item['source']}: {item['reason']}")
        return lines


def plan_push(
    items: Iterable[Document | Skipped],
    settings: Settings,
    embedder: Embedder,
    read_scope: Callable[[str], dict[str, dict[str, Any]]],
    *,
    collection: str,
    tenant: str | None = None,
    keep_removed: bool = False,
    on_event: Callable[[str], None] | None = None,
) -> PushPlan:
    """Decide what a push does. No cluster: the index state comes from ``read_scope(tenant)``
    (``read_index_state`` for a real push), called once per tenant the push meets.

    Per document: unchanged (same hash) -> nothing, not even chunking; new or changed -> chunk
    it and write its chunks; then every chunk in scope that no longer exists is deleted (stale
    positions, removed documents unless ``keep_removed``; never the chunks of a document that
    could not be read now).
    """
    notify = on_event or (lambda line: None)
    state: dict[str, dict[str, Any]] = {}
    tenants: list[str] = []

    def enter_scope(owner: str) -> None:
        if owner not in tenants:
            tenants.append(owner)
            state.update(read_scope(owner))

    enter_scope(tenant or settings.tenant)
    plan = PushPlan(collection, tenants, [], [], [], 0, [], [], 0, {})
    chunk_counts: dict[str, int] = {}  # doc_id -> chunks it keeps, for every readable document
    skipped_sources: set[str] = set()

    def skip(source: str, reason: str) -> None:
        plan.skipped.append({"source": source, "reason": reason})
        skipped_sources.add(source)
        notify(f"skipped {source}: {reason}")

    for item in items:
        if isinstance(item, Skipped):
            skip(item.source, item.reason)
            continue
        try:
            doc_id, source_hash = identify(item, collection, settings, tenant)
        except InputError as exc:
            skip(item.source, str(exc))
            continue
        enter_scope(item.metadata["tenant"])
        existing = state.get(doc_id)
        if is_unchanged(existing, source_hash):
            plan.unchanged += 1
            chunk_counts[doc_id] = len(existing["chunks"])
            plan.kept_chunks += len(existing["chunks"])
            continue
        try:
            planned = plan_document(item, doc_id, source_hash, settings, embedder)
        except LoaderError as exc:
            if isinstance(exc, ConfigError):
                raise  # a bad setting fails every document alike: stop at once
            skip(item.source, str(exc))
            continue
        (plan.added if existing is None else plan.updated).append(item.source)
        plan.to_write.append(planned)
        chunk_counts[doc_id] = len(planned.chunks)

    for doc_id, entry in state.items():
        for cid, content_hash in entry["chunks"].items():
            plan.known_vectors.setdefault(content_hash, cid)
        if doc_id in chunk_counts:
            keep = {chunk_id(doc_id, position) for position in range(chunk_counts[doc_id])}
        elif keep_removed or entry["source"] in skipped_sources:
            continue  # removed but kept on request, or unreadable now: never lose indexed text
        else:
            keep = set()
            plan.removed.append(entry["source"])
        plan.deletions += [(cid, entry["source"]) for cid in sorted(set(entry["chunks"]) - keep)]
    return plan


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
    refresh once; fill in ``report``."""
    alias = settings.index_name
    needed = {h for doc in plan.to_write for h in doc.hashes}
    with cluster_errors(settings, "reading stored vectors"):
        vectors = fetch_vectors(
            client, alias, {h: cid for h, cid in plan.known_vectors.items() if h in needed}
        )
    texts_by_hash: dict[str, str] = {}
    for doc in plan.to_write:
        for chunk, content_hash in zip(doc.chunks, doc.hashes, strict=True):
            if content_hash not in vectors:
                texts_by_hash.setdefault(content_hash, chunk.text)
    report.reused_vectors = sum(1 for doc in plan.to_write for h in doc.hashes if h in vectors)
    if texts_by_hash:
        embed_started = time.perf_counter()
        new_vectors = embedder.embed(list(texts_by_hash.values()), show_progress=show_progress)
        report.embed_seconds = time.perf_counter() - embed_started
        report.embedded = len(texts_by_hash)
        vectors.update(zip(texts_by_hash, (v.tolist() for v in new_vectors), strict=True))

    actions = [
        BulkAction(
            "index",
            alias,
            chunk_id(doc.doc_id, position),
            doc.document.source,
            chunk_body(
                doc, position, plan.collection, settings.chunk_strategy, vectors[content_hash]
            ),
        )
        for doc in plan.to_write
        for position, content_hash in enumerate(doc.hashes)
    ]
    actions += [BulkAction("delete", alias, cid, source) for cid, source in plan.deletions]

    bar = _progress(None, show_progress, "indexing", total=len(actions))
    with cluster_errors(settings, f"writing chunks to {alias}"):
        result = send_bulk(
            client,
            actions,
            max_count=settings.bulk_batch_size,
            on_batch=bar.update if bar else None,
        )
        if bar:
            bar.close()
        client.indices.refresh(index=alias)
    report.retries = result.retries
    failed_sources = sorted({tag for tag, _, _ in result.errors})
    for tag, item_id, reason in result.errors:
        report.errors.append({"source": tag, "reason": f"{item_id}: {reason}"})
        notify(f"failed {tag}: {item_id}: {reason}")
    failed_ids = {item_id for _, item_id, _ in result.errors}
    report.chunks_written = sum(1 for a in actions if a.op == "index" and a.id not in failed_ids)
    report.chunks_deleted = sum(1 for a in actions if a.op == "delete" and a.id not in failed_ids)
    report.failed = len(report.skipped) + len(failed_sources)


def _warn_about_truncation(
    planned: list[PlannedDocument],
    embedder: Embedder,
    report: PushReport,
    notify: Callable[[str], None],
) -> None:
    """Warn about any chunk longer than the model reads: its tail would never be embedded."""
    chunks = [chunk for doc in planned for chunk in doc.chunks]
    if not chunks:
        return
    counts = embedder.token_counts([c.text for c in chunks])
    for chunk, count in zip(chunks, counts, strict=True):
        if count > embedder.max_text_tokens:
            line = (
                f"{chunk.source} chunk {chunk.position} has {count} tokens; the model reads "
                f"{embedder.max_text_tokens}: lower chunk_max_tokens"
            )
            report.warnings.append(line)
            notify(f"warning: {line}")


def _progress(iterable: Any, enabled: bool, description: str, total: int | None = None) -> Any:
    if not enabled:
        return iterable
    from tqdm.auto import tqdm

    return tqdm(iterable, desc=description, total=total, unit="item", leave=False)
