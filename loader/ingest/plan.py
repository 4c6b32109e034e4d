"""Plan a push: decide, without a cluster, what ``loader push`` adds, updates, keeps and deletes.

The plan is pure: it is given the documents and a function that returns what the index holds for
one tenant's collection (``loader.ingest.index_state.read_index_state`` for a real push, a dict
in tests), and it returns a ``PushPlan``. ``loader.ingest.sync.apply_push`` then carries it out;
``loader push --dry-run`` prints its ``lines()``.

Identity lives here too. Chunk ids are stable (``<doc_id>-<position>``, where ``doc_id`` hashes
the tenant, the collection and the source path), so a re-push overwrites rather than duplicates;
``document_hash`` covers everything that decides a document's chunks, so an unchanged document is
not even chunked.

Example::

    plan = plan_push(documents, settings, embedder, lambda tenant: {}, collection="kb")
    plan.added      # ["a.md", "b.md"]: an empty index adds every document
    plan.lines()    # ["+ add a.md (1 chunks, 1 to embed)", ...]
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, NamedTuple

from loader.documents import Chunk, Document, joined_parts
from loader.errors import ConfigError, InputError, LoaderError
from loader.ingest.chunking import chunk_document, chunking_config
from loader.ingest.readers import Skipped, is_within
from loader.ingest.report import (
    PushReport,
    foreign_write_warning,
    ignored_summary,
    kept_foreign_warning,
)
from loader.settings import Settings, settings_in_scope, tenant_problem
from loader.text import check_document

if TYPE_CHECKING:  # the model module is imported where a model is loaded, not by every command
    from loader.models.embedding import Embedder

# Bump when the chunkers cut the same document differently, so every document is re-chunked.
CHUNKING_VERSION = "2"


class SecondFill(NamedTuple):
    """A chunk of an unchanged document that lacks the second reader's vector: only that vector
    is embedded (from ``text``, the chunk's indexed content) and written, in a partial update."""

    chunk_id: str
    source: str
    content_hash: str
    text: str


@dataclass
class PlannedDocument:
    document: Document
    doc_id: str
    doc_hash: str
    chunks: list[Chunk]
    hashes: list[str]  # per chunk: what decides whether its vector can be reused


# --- identity and hashes ------------------------------------------------------------------------


def stable_id(*parts: str) -> str:
    """A 20-hex id of ``parts``, different for every different tuple of parts."""
    return hashlib.sha1(joined_parts(parts).encode("utf-8")).hexdigest()[:20]


def chunk_hash(chunk: Chunk, model: str) -> str:
    """The chunk's content hash, salted with the model: another model means other vectors."""
    return hashlib.sha256(f"{model}\x00{chunk.content_hash}".encode()).hexdigest()


def chunk_id(doc_id: str, position: int) -> str:
    return f"{doc_id}-{position}"


def document_hash(document: Document, settings: Settings) -> str:
    """Everything that decides a document's chunks and vectors: its text and metadata, the
    chunking settings and the model. Equal hashes mean the document need not even be chunked."""
    digest = hashlib.sha256()
    parts = [
        CHUNKING_VERSION,
        # The settings registry says which settings decide the chunks and the vectors.
        *(f"{name}={getattr(settings, name)!r}" for name in settings_in_scope("model", "chunking")),
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


def recorded_chunk_count(doc_hash: str | None) -> int | None:
    """The chunk count a stored doc_hash records (``stored_doc_hash``), or ``None`` for one that
    records none."""
    _, colon, count = (doc_hash or "").rpartition(":")
    return int(count) if colon and count.isdecimal() else None


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
        InputError: the push names a tenant and the document's front matter names another, the
            front matter's tenant is no usable name, or the document holds text no UTF-8 can
            carry (``loader.text``).
    """
    check_document(document)  # before the id and the hash, which encode it
    named = front_matter_tenant(document.metadata.get("tenant"))
    if tenant and named and named != tenant:
        raise InputError(
            f"its front matter names tenant {named!r} but this push is for tenant {tenant!r}; "
            f"push it with --tenant {named!r}, or without --tenant"
        )
    owner = tenant or named or settings.tenant
    document.metadata["tenant"] = owner
    return document_id(owner, collection, document.source), document_hash(document, settings)


def front_matter_tenant(named: Any) -> str | None:
    """The tenant a document's front matter names, or None (no ``tenant:``, or an empty one).

    Raises:
        InputError: a value that is no name (a list, a mapping, true, a date: YAML's ``tenant:
            [a, b]`` would otherwise become the tenant ``"['a', 'b']"``), or one the ``tenant``
            setting refuses (blank, padded).
    """
    if named is None or named == "":
        return None
    if isinstance(named, bool) or not isinstance(named, str | int):
        raise InputError(
            f"its front matter's tenant must be a name, got {type(named).__name__} {named!r:.60}"
        )
    problem = tenant_problem(str(named))
    if problem:
        raise InputError(f"its front matter's tenant {str(named)!r:.60} {problem}")
    return str(named)


def document_id(tenant: str, collection: str, source: str) -> str:
    """A document's identity: its tenant, collection and path. The tenant is part of it so that
    two tenants' files of the same name are two documents (``DOC_ID_SCHEME``)."""
    return stable_id(tenant, collection, source)


def scope_query(tenant: str, collection: str) -> dict[str, Any]:
    """The chunks a push of ``collection`` for ``tenant`` owns: the only ones it may read for
    reuse, overwrite or delete."""
    return {
        "bool": {"filter": [{"term": {"tenant": tenant}}, {"term": {"collection": collection}}]}
    }


# --- the plan -----------------------------------------------------------------------------------


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
    # Files of types no reader handles: no failure, no line each; their chunks are kept too.
    ignored: list[dict[str, str]] = field(default_factory=list)  # {source, reason}
    # Documents of tenants the push met only through front matter, gone from the folder and
    # kept: (tenant, source). Only a push for that tenant deletes them.
    kept_foreign: list[tuple[str, str]] = field(default_factory=list)
    # Documents written for a tenant other than the push's own, named by their front matter:
    # source -> (tenant, whether it replaces an indexed document).
    written_foreign: dict[str, tuple[str, bool]] = field(default_factory=dict)
    empty: int = 0  # documents with no chunk and none indexed: nothing to do
    # Chunks of unchanged documents without the second reader's vector (``read_scope`` says
    # which): it alone is embedded for them.
    fills: list[SecondFill] = field(default_factory=list)

    @property
    def chunks(self) -> int:
        return self.kept_chunks + sum(len(doc.chunks) for doc in self.to_write)

    def report(self) -> PushReport:
        return PushReport(
            collection=self.collection,
            tenants=list(self.tenants),
            added=len(self.added),
            updated=len(self.updated),
            unchanged=self.unchanged,
            deleted=len(self.removed),
            empty=self.empty,
            chunks=self.chunks,
            failed=len(self.skipped),
            skipped=list(self.skipped),
            ignored=list(self.ignored),
            warnings=[
                *(
                    foreign_write_warning(owner, source)
                    for source, (owner, replaced) in self.written_foreign.items()
                    if replaced
                ),
                *(kept_foreign_warning(owner, source) for owner, source in self.kept_foreign),
            ],
        )

    def lines(self) -> list[str]:
        """One line per change, as ``loader push --dry-run`` prints them (and one per skipped
        file; ignored files have none: the push's one ``ignored_summary`` line counts them)."""
        by_source = {doc.document.source: doc for doc in self.to_write}
        deleted: dict[str, int] = {}
        for _, source in self.deletions:
            deleted[source] = deleted.get(source, 0) + 1
        lines = []
        for symbol, action, sources in (("+", "add", self.added), ("~", "update", self.updated)):
            for source in sources:
                doc = by_source[source]
                fresh = sum(1 for h in set(doc.hashes) if h not in self.known_vectors)
                owner = self.written_foreign.get(source, ("",))[0]
                lines.append(
                    f"{symbol} {action} {source} ({len(doc.chunks)} chunks, {fresh} to embed"
                    f"{f', {deleted[source]} stale deleted' if source in deleted else ''}"
                    f"{f'; tenant {owner!r}, named by its front matter' if owner else ''})"
                )
        if self.fills:
            documents = len({fill.source for fill in self.fills})
            lines.append(
                f"~ add the second reader's vectors to {len(self.fills)} chunks of {documents} "
                f"unchanged documents ({len({fill.content_hash for fill in self.fills})} to embed)"
            )
        for source in self.removed:
            lines.append(f"- delete {source} ({deleted.get(source, 0)} chunks)")
        for owner, source in self.kept_foreign:
            lines.append(
                f"= keep {source} (tenant {owner!r}: only a push with --tenant {owner!r} "
                "deletes it)"
            )
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
    could not be read now). Removed documents are deleted only in the push's own tenant
    (``tenant``, else the setting): a file whose front matter names another tenant writes that
    tenant's document, but gives the push no say over the tenant's other documents, which
    another team may have pushed from a folder of the same name.

    Files of types no reader handles (``Skipped.ignored``) go to ``ignored``, not ``skipped``:
    no failure, one ``ignored_summary`` line for them all through ``on_event`` once the items
    are read, and (as for a skipped file) their indexed chunks, if any, are kept.
    """
    if tenant is not None and (problem := tenant_problem(tenant)):
        raise ConfigError(f"tenant {tenant!r:.60} {problem}")
    planner = _Planner(settings, embedder, read_scope, collection, tenant, on_event)
    for item in items:
        planner.take(item)
    if planner.plan.ignored:
        planner.notify(ignored_summary(planner.plan.ignored))
    planner.plan_deletions(keep_removed)
    return planner.plan


class _Planner:
    """The running state of ``plan_push``: the plan so far, the index state of the tenants met
    so far, and how many chunks each readable document keeps."""

    def __init__(
        self,
        settings: Settings,
        embedder: Embedder,
        read_scope: Callable[[str], dict[str, dict[str, Any]]],
        collection: str,
        tenant: str | None,
        on_event: Callable[[str], None] | None,
    ) -> None:
        self.settings = settings
        self.embedder = embedder
        self.read_scope = read_scope
        self.collection = collection
        self.tenant = tenant
        self.notify = on_event or (lambda line: None)
        self.state: dict[str, dict[str, Any]] = {}
        self.plan = PushPlan(collection, [], [], [], [], 0, [], [], 0, {})
        self.chunk_counts: dict[str, int] = {}  # doc_id -> chunks it keeps, per readable document
        self.skipped_sources: set[str] = set()  # skipped or ignored: their chunks are kept
        self.owner_of: dict[str, str] = {}  # doc_id -> the tenant whose scope it was read from
        self.own_tenant = tenant or settings.tenant
        self.enter_scope(self.own_tenant)

    def enter_scope(self, owner: str) -> None:
        """Read a tenant's chunks the first time the push meets the tenant."""
        if owner not in self.plan.tenants:
            self.plan.tenants.append(owner)
            scope = self.read_scope(owner)
            self.state.update(scope)
            self.owner_of.update(dict.fromkeys(scope, owner))

    def skip(self, source: str, reason: str) -> None:
        self.plan.skipped.append({"source": source, "reason": reason})
        self.skipped_sources.add(source)
        self.notify(f"skipped {source}: {reason}")

    def ignore(self, source: str, reason: str) -> None:
        """Pass over a file of a type no reader handles: no failure, and no line of its own."""
        self.plan.ignored.append({"source": source, "reason": reason})
        self.skipped_sources.add(source)

    def was_skipped(self, source: str) -> bool:
        """Whether ``source`` was skipped, itself or as a file under a skipped folder (a folder
        the walk could not enter: its files are unreadable now, not removed)."""
        return any(is_within(source, skipped) for skipped in self.skipped_sources)

    def take(self, item: Document | Skipped) -> None:
        """Plan one item: ignore or skip it, keep it unchanged, or chunk it for writing."""
        if isinstance(item, Skipped):
            (self.ignore if item.ignored else self.skip)(item.source, item.reason)
            return
        try:
            doc_id, source_hash = identify(item, self.collection, self.settings, self.tenant)
        except InputError as exc:
            self.skip(item.source, str(exc))
            return
        self.enter_scope(item.metadata["tenant"])
        existing = self.state.get(doc_id)
        if is_unchanged(existing, source_hash):
            self.plan.unchanged += 1
            self.chunk_counts[doc_id] = len(existing["chunks"])
            self.plan.kept_chunks += len(existing["chunks"])
            self.plan.fills += [
                SecondFill(cid, item.source, content_hash, text)
                for cid, (content_hash, text) in sorted(existing.get("lacking", {}).items())
            ]
            return
        self.write(item, doc_id, source_hash, existing)

    def write(
        self, item: Document, doc_id: str, source_hash: str, existing: dict[str, Any] | None
    ) -> None:
        """Chunk a new or changed document and plan its chunks' writes."""
        try:
            planned = plan_document(item, doc_id, source_hash, self.settings, self.embedder)
        except LoaderError as exc:
            if isinstance(exc, ConfigError):
                raise  # a bad setting fails every document alike: stop at once
            self.skip(item.source, str(exc))
            return
        if not planned.chunks and existing is None:
            # An empty file: the index already mirrors it (no chunks). Counted as added, it was
            # "added" again on every push, so a re-push never read as a no-op.
            self.plan.empty += 1
            return
        (self.plan.added if existing is None else self.plan.updated).append(item.source)
        self.plan.to_write.append(planned)
        owner = item.metadata["tenant"]
        if owner != self.own_tenant:
            self.plan.written_foreign[item.source] = (owner, existing is not None)
            if existing is not None:
                self.notify(f"warning: {foreign_write_warning(owner, item.source)}")
        self.chunk_counts[doc_id] = len(planned.chunks)

    def plan_deletions(self, keep_removed: bool) -> None:
        """Note the vectors the scope holds, and delete every chunk in scope that no longer
        exists: stale positions of changed documents, and removed documents."""
        plan = self.plan
        for doc_id, entry in self.state.items():
            for cid, content_hash in entry["chunks"].items():
                plan.known_vectors.setdefault(content_hash, cid)
            if doc_id in self.chunk_counts:
                keep = {chunk_id(doc_id, position) for position in range(self.chunk_counts[doc_id])}
            elif keep_removed or self.was_skipped(entry["source"]):
                continue  # removed but kept on request, or unreadable now: never lose indexed text
            elif self.owner_of[doc_id] != self.own_tenant:
                plan.kept_foreign.append((self.owner_of[doc_id], entry["source"]))
                self.notify(f"warning: {kept_foreign_warning(*plan.kept_foreign[-1])}")
                continue
            else:
                keep = set()
                plan.removed.append(entry["source"])
            plan.deletions += [
                (cid, entry["source"]) for cid in sorted(set(entry["chunks"]) - keep)
            ]
