"""Half-written documents: a push stopped between two bulk requests (SIGKILL, a lost machine) can
leave a document with some chunks of the new version and others old, or missing.

Every chunk carries its document's ``doc_hash``, which records the document's chunk count
(``loader.ingest.plan.stored_doc_hash``: ``<hash>:<chunks>``). A document is whole when its
chunks carry one ``doc_hash`` and there are as many as it records -- what a push asks before it
takes a document for unchanged (``loader.ingest.plan.is_unchanged``); any other document is
rewritten by the next push of its folder. Doctor finds the others with one composite aggregation
over ``(doc_id, doc_hash)``, paged (``loader.index.copy_check.chunk_groups``: keys and counts
only, no chunk is read), names the first ``SHOWN_DOCUMENTS`` and counts the rest.

Copied versions: the version the alias points at against the kept version a `loader apply`
copied it from, with the comparison apply makes before its swap (``check_copy``).

Example::

    scan = scan_documents(rows)       # rows: composite buckets, sorted by doc_id
    scan.count, scan.shown            # 2, [DocumentChunks(doc_id=..., counts={'<h>:3': 1})]
    half_written_check(scan, {"<doc_id>": "guide.md"}).line()
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from loader.cluster.client import cluster_errors
from loader.doctor.report import Check
from loader.index import copy_check, reindex_block
from loader.index.render import version_of
from loader.ingest.plan import recorded_chunk_count
from loader.models.readers import SECOND_FIELD, reader_settings
from loader.settings import Settings

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

NAME = "half-written documents"
COPY_NAME = "copied version"
# Documents named in the report; the others are counted.
SHOWN_DOCUMENTS = 10


@dataclass(frozen=True)
class DocumentChunks:
    """One document's chunks as the index holds them: how many carry each ``doc_hash``."""

    doc_id: str
    tenant: str
    collection: str
    counts: Mapping[str, int]

    @property
    def whole(self) -> bool:
        """One doc_hash and as many chunks as it records (a doc_hash that records no count
        cannot be checked: whole)."""
        if len(self.counts) != 1:
            return False
        ((doc_hash, count),) = self.counts.items()
        return recorded_chunk_count(doc_hash) in (None, count)

    def state(self) -> str:
        """``1 of 3 chunks``, or ``chunks of 2 pushes (3 of 3, 1 of 4)``, most chunks first."""
        parts = []
        for doc_hash, count in sorted(self.counts.items(), key=lambda item: -item[1]):
            recorded = recorded_chunk_count(doc_hash)
            parts.append(f"{count} of {recorded}" if recorded is not None else str(count))
        if len(parts) == 1:
            return f"{parts[0]} chunks"
        return f"chunks of {len(parts)} pushes ({', '.join(parts)})"


@dataclass
class DocumentScan:
    """What the scan found: documents seen, the first half-written ones, how many in all, and
    the ``(tenant, collection)`` of every half-written one (what to push again)."""

    documents: int = 0
    count: int = 0
    shown: list[DocumentChunks] = field(default_factory=list)
    places: set[tuple[str, str]] = field(default_factory=set)


def documents(rows: Iterable[Mapping[str, Any]]) -> Iterator[DocumentChunks]:
    """Group composite buckets (``key``: doc_id, doc_hash, tenant, collection; ``doc_count``),
    sorted by doc_id as the composite aggregation returns them, into documents."""
    for doc in copy_check.stored_documents(rows):
        yield DocumentChunks(str(doc.doc_id), str(doc.tenant), str(doc.collection), doc.counts)


def scan_documents(rows: Iterable[Mapping[str, Any]], limit: int = SHOWN_DOCUMENTS) -> DocumentScan:
    """Count the documents of ``rows`` and keep the first ``limit`` half-written ones."""
    scan = DocumentScan()
    for document in documents(rows):
        scan.documents += 1
        if document.whole:
            continue
        scan.count += 1
        scan.places.add((document.tenant, document.collection))
        if len(scan.shown) < limit:
            scan.shown.append(document)
    return scan


def half_written_check(scan: DocumentScan, sources: Mapping[str, str]) -> Check:
    """The report's line: ok, or the half-written documents by name (``sources``: doc_id ->
    source path) and the pushes that rewrite them."""
    if not scan.documents:
        return Check(NAME, "skip", "no documents to check")
    if not scan.count:
        return Check(NAME, "ok", f"the chunks of each of the {scan.documents} documents agree")
    named = sorted(
        (doc.collection, sources.get(doc.doc_id, doc.doc_id), doc.tenant, doc.state())
        for doc in scan.shown
    )
    shown = "; ".join(
        f"{collection}/{source} (tenant {tenant!r}): {state}"
        for collection, source, tenant, state in named
    )
    more = f"; and {scan.count - len(named)} more" if scan.count > len(named) else ""
    detail = (
        f"{scan.count} of {scan.documents} documents are half-written (a push stopped in the "
        f"middle of them, or one is running now): {shown}{more}"
    )
    places = sorted(scan.places)
    pushes = ", ".join(
        f"`loader push <folder> --tenant {shlex.quote(tenant)}` (collection {collection!r})"
        for tenant, collection in places[:SHOWN_DOCUMENTS]
    )
    others = len(places) - SHOWN_DOCUMENTS
    fix = f"run {pushes}{f' and {others} more' if others > 0 else ''}: it rewrites them"
    return Check(NAME, "fail", detail, fix)


def _rows(client: OpenSearch, settings: Settings) -> Iterator[Mapping[str, Any]]:
    """Every ``(doc_id, doc_hash, tenant, collection)`` bucket with its chunk count, page by
    page in doc_id order (``loader.index.copy_check.chunk_groups``)."""
    with cluster_errors(settings, f"grouping the chunks of {settings.index_name!r} by document"):
        yield from copy_check.chunk_groups(client, settings.index_name)


def _sources(client: OpenSearch, settings: Settings, index: str, doc_ids: list[str]) -> dict:
    """doc_id -> source path, one chunk read per document."""
    with cluster_errors(settings, f"reading the sources of {len(doc_ids)} documents"):
        return copy_check.source_paths(client, index, doc_ids)


def check_documents(client: OpenSearch, settings: Settings) -> Check:
    """The half-written documents check of the index behind ``settings.index_name``."""
    scan = scan_documents(_rows(client, settings))
    sources = _sources(client, settings, settings.index_name, [doc.doc_id for doc in scan.shown])
    return half_written_check(scan, sources)


def check_copy(client: OpenSearch, settings: Settings, index: str) -> Check:
    """``index`` (the alias's) against the kept version a `loader apply` copied it from (the
    one whose write-block record names it as the copy's destination), per document and
    doc_hash, as apply checks a copy before its swap (``copy_check.compare_versions``), leaving
    out documents only ``index`` holds (pushed since the swap: no copy makes one). A copy apply
    checked (``_meta.loader_copy``) is not compared again: pushes since the swap make the two
    differ."""
    alias = settings.index_name
    with cluster_errors(settings, f"reading the mappings of the versions of {alias!r}"):
        answer = client.indices.get_mapping(index=f"{alias}-v*")
    metas = {
        name: ((body.get("mappings") or {}).get("_meta") or {})
        for name, body in answer.items()
        if version_of(alias, name) is not None
    }
    checked = (metas.get(index) or {}).get(copy_check.META_KEY)
    if isinstance(checked, Mapping):
        return Check(
            COPY_NAME,
            "ok",
            f"{index} held the {checked.get('chunks', '?')} chunks of "
            f"{str(checked.get('from', '?'))[:60]} when the alias moved to it (checked by "
            "`loader apply`)",
        )
    sources = sorted(
        (name for name, meta in metas.items() if _copied_to(meta) == index),
        key=lambda name: version_of(alias, name) or 0,
    )
    if not sources:
        return Check(COPY_NAME, "skip", f"no kept version {index} was copied from")
    source = sources[-1]
    with cluster_errors(settings, f"comparing the chunks of {source} and {index}"):
        found = copy_check.compare_versions(client, source, index, dest_only=False)
    if found.equal:
        return Check(
            COPY_NAME,
            "ok",
            f"{index} holds the chunks of each of the {found.documents} documents of {source},"
            " the version it was copied from",
        )
    paths = _sources(client, settings, f"{source},{index}", found.shown_ids())
    detail = (
        f"{index} does not hold every document of {source} as it is there, the version a "
        "`loader apply` copied it from (one that did not check its copy; a document changed "
        f"or removed since the alias moved counts too): {found.describe(paths)}"
    )
    fix = (
        f"push the folders of the tenants named again (`loader push <folder> --tenant <t>`): "
        f"it writes what {index} lacks; then `loader apply --delete-old` deletes {source}"
    )
    return Check(COPY_NAME, "fail", detail, fix)


def _copied_to(meta: Mapping[str, Any]) -> Any:
    """The destination the write-block record of a version names (``reindex_block``)."""
    record = meta.get(reindex_block.META_KEY)
    return record.get("dest") if isinstance(record, Mapping) else None


SECOND_NAME = "second reader's vectors"


def second_reader_check(client: OpenSearch, settings: Settings) -> Check:
    """Whether every chunk holds the second reader's vector (``second_embedding_model``): the
    chunks of an index pushed before it was added lack it until a push gives it them."""
    second = reader_settings(settings)
    if second is None:
        return Check(SECOND_NAME, "skip", "one reader (second_embedding_model)")
    lacking = {"bool": {"must_not": [{"exists": {"field": SECOND_FIELD}}]}}
    with cluster_errors(settings, f"counting the chunks without {SECOND_FIELD}"):
        total = client.count(index=settings.index_name)["count"]
        missing = client.count(index=settings.index_name, body={"query": lacking})["count"]
    if not missing:
        return Check(SECOND_NAME, "ok", f"all {total} chunks hold {second.embedding_model}'s")
    return Check(
        SECOND_NAME,
        "fail",
        f"{missing} of {total} chunks lack {second.embedding_model}'s vector; the hybrid modes "
        "rank them on the first reader alone",
        "run `loader push` for their folders: it embeds only the second reader's vectors",
    )
