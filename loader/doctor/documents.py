"""Half-written documents: a push stopped between two bulk requests (SIGKILL, a lost machine) can
leave a document with some chunks of the new version and others old, or missing.

Every chunk carries its document's ``doc_hash``, which records the document's chunk count
(``loader.ingest.plan.stored_doc_hash``: ``<hash>:<chunks>``). A document is whole when its
chunks carry one ``doc_hash`` and there are as many as it records -- what a push asks before it
takes a document for unchanged (``loader.ingest.plan.is_unchanged``); any other document is
rewritten by the next push of its folder. Doctor finds the others with one composite aggregation
over ``(doc_id, doc_hash)``, paged (``DOCUMENT_PAGE`` buckets a request, keys and counts only: no
chunk is read), names the first ``SHOWN_DOCUMENTS`` and counts the rest.

Example::

    scan = scan_documents(rows)       # rows: composite buckets, sorted by doc_id
    scan.count, scan.shown            # 2, [DocumentChunks(doc_id=..., counts={'<h>:3': 1})]
    half_written_check(scan, {"<doc_id>": "guide.md"}).line()
"""

from __future__ import annotations

import shlex
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from itertools import groupby
from typing import TYPE_CHECKING, Any

from loader.cluster.client import cluster_errors
from loader.doctor.report import Check
from loader.ingest.plan import recorded_chunk_count
from loader.settings import Settings

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

NAME = "half-written documents"
# Documents named in the report; the others are counted.
SHOWN_DOCUMENTS = 10
# Composite buckets (one per document and doc_hash) a request: ~130 bytes each in the answer.
DOCUMENT_PAGE = 10_000
_SOURCES = ("doc_id", "doc_hash", "tenant", "collection")


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
    for doc_id, group in groupby(rows, key=lambda row: row["key"]["doc_id"]):
        buckets = list(group)
        key = buckets[0]["key"]
        counts = {bucket["key"]["doc_hash"]: bucket["doc_count"] for bucket in buckets}
        yield DocumentChunks(doc_id, str(key["tenant"]), str(key["collection"]), counts)


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
    page in doc_id order."""
    composite: dict[str, Any] = {
        "size": DOCUMENT_PAGE,
        "sources": [{name: {"terms": {"field": name}}} for name in _SOURCES],
    }
    keep = [
        f"aggregations.documents.{part}"
        for part in ("after_key", "buckets.key", "buckets.doc_count")
    ]
    while True:
        with cluster_errors(
            settings, f"grouping the chunks of {settings.index_name!r} by document"
        ):
            answer = client.search(
                index=settings.index_name,
                body={"size": 0, "aggs": {"documents": {"composite": composite}}},
                filter_path=keep,
            )
        page = (answer.get("aggregations") or {}).get("documents") or {}
        buckets = page.get("buckets") or []
        yield from buckets
        if len(buckets) < DOCUMENT_PAGE or not page.get("after_key"):
            return
        composite["after"] = page["after_key"]


def _sources(client: OpenSearch, settings: Settings, doc_ids: list[str]) -> dict[str, str]:
    """doc_id -> source path, one chunk read per document."""
    if not doc_ids:
        return {}
    with cluster_errors(settings, f"reading the sources of {len(doc_ids)} documents"):
        answer = client.search(
            index=settings.index_name,
            body={
                "size": len(doc_ids),
                "query": {"terms": {"doc_id": doc_ids}},
                "collapse": {"field": "doc_id"},
                "_source": ["doc_id", "source"],
            },
        )
    return {hit["_source"]["doc_id"]: hit["_source"]["source"] for hit in answer["hits"]["hits"]}


def check_documents(client: OpenSearch, settings: Settings) -> Check:
    """The half-written documents check of the index behind ``settings.index_name``."""
    scan = scan_documents(_rows(client, settings))
    sources = _sources(client, settings, [doc.doc_id for doc in scan.shown])
    return half_written_check(scan, sources)
