"""Does an index version hold the same chunks as the version it was copied from?

``loader apply`` asks before it moves the alias onto the copy a reindex made (``apply``), and
``loader doctor`` asks of the version the alias points at and the kept version it was copied from
(``loader.doctor.documents``): one comparison, ``compare_versions``. The chunks of each version
are counted per document and ``doc_hash`` (which records the document's version and chunk
count) by one composite aggregation over ``(doc_id, doc_hash, tenant, collection)``, paged
(``PAGE`` buckets a request, keys and counts only: no chunk is read). Both answers come in the
aggregation's order, so they are merged document by document and nothing is held but the
differences shown (``SHOWN``) and their counts. Chunks missing one of the fields are counted too
(``missing_bucket``): every chunk is in a bucket, so equal buckets mean equal chunk counts.

A copy apply checked carries ``_meta.loader_copy`` (``copy_record``): the version it was copied
from and what it held when the alias moved; later pushes make the two differ, so doctor compares
only a copy without it (one made before apply checked).

Example::

    found = compare_versions(client, "kb-v2", "kb-v3")
    found.equal                          # False
    found.describe(source_paths(client, "kb-v2,kb-v3", found.shown_ids()))
    # "39 of 120 documents differ (by tenant: 't' 39): many/f012.md (tenant 't'): 3 chunks in ..."
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import groupby
from typing import Any

from opensearchpy import OpenSearch

# Composite buckets (one per document and doc_hash) a request: ~130 bytes each in the answer.
PAGE = 10_000
# Documents named in a message; the others are counted.
SHOWN = 10
FIELDS = ("doc_id", "doc_hash", "tenant", "collection")
META_KEY = "loader_copy"  # on a copy apply checked: {"from", "chunks", "documents", "checked_at"}


def chunk_groups(client: OpenSearch, index: str, page: int | None = None) -> Iterator[dict]:
    """Every ``(doc_id, doc_hash, tenant, collection)`` bucket of ``index`` with its chunk count
    (``{"key": {...}, "doc_count": n}``), page by page in doc_id order; a chunk missing a field
    has ``None`` there. Raises opensearch-py's errors (callers name what they were doing)."""
    size = page or PAGE
    composite: dict[str, Any] = {
        "size": size,
        "sources": [{name: {"terms": {"field": name, "missing_bucket": True}}} for name in FIELDS],
    }
    keep = [
        f"aggregations.documents.{part}"
        for part in ("after_key", "buckets.key", "buckets.doc_count")
    ]
    while True:
        answer = client.search(
            index=index,
            body={"size": 0, "aggs": {"documents": {"composite": composite}}},
            filter_path=keep,
        )
        found = (answer.get("aggregations") or {}).get("documents") or {}
        buckets = found.get("buckets") or []
        yield from buckets
        if len(buckets) < size or not found.get("after_key"):
            return
        composite["after"] = found["after_key"]


@dataclass(frozen=True)
class StoredDocument:
    """One document's chunks in one version: how many carry each ``doc_hash``."""

    doc_id: str | None
    tenant: str | None
    collection: str | None
    counts: Mapping[str | None, int]

    @property
    def chunks(self) -> int:
        return sum(self.counts.values())


def stored_documents(rows: Iterable[Mapping[str, Any]]) -> Iterator[StoredDocument]:
    """Group the buckets of ``chunk_groups`` (sorted by doc_id) into documents."""
    for doc_id, group in groupby(rows, key=lambda row: row["key"]["doc_id"]):
        buckets = list(group)
        key = buckets[0]["key"]
        counts = {bucket["key"]["doc_hash"]: bucket["doc_count"] for bucket in buckets}
        yield StoredDocument(doc_id, key["tenant"], key["collection"], counts)


def _order(doc_id: str | None) -> tuple[int, str]:
    """The composite aggregation's order of doc_ids: a missing one first, then by code point
    (the order of their UTF-8 bytes, which OpenSearch compares)."""
    return (0, "") if doc_id is None else (1, doc_id)


@dataclass(frozen=True)
class DocumentDifference:
    """A document whose chunks differ between the two versions (``None``: not in that one)."""

    source: StoredDocument | None
    dest: StoredDocument | None

    @property
    def document(self) -> StoredDocument:
        return self.source or self.dest  # type: ignore[return-value]

    def state(self, source: str, dest: str) -> str:
        """``3 chunks in kb-v2, none in kb-v3``; ``... 3 of another version in kb-v3``."""
        have = self.source.chunks if self.source else 0
        copied = self.dest.chunks if self.dest else 0
        if not copied:
            return f"{_chunks(have)} in {source}, none in {dest}"
        if not have:
            return f"none in {source}, {_chunks(copied)} in {dest}"
        if set(self.source.counts) != set(self.dest.counts):  # type: ignore[union-attr]
            return f"{_chunks(have)} in {source}, {copied} of another version in {dest}"
        return f"{_chunks(have)} in {source}, {copied} in {dest}"


def _chunks(count: int) -> str:
    return f"{count} chunk{'' if count == 1 else 's'}"


@dataclass
class VersionComparison:
    """What ``compare`` found: documents and chunks of the source, and the documents that differ
    (the first ``SHOWN``; all counted, per tenant)."""

    source: str
    dest: str
    documents: int = 0
    chunks: int = 0
    differing: int = 0
    shown: list[DocumentDifference] = field(default_factory=list)
    tenants: Counter = field(default_factory=Counter)  # tenant -> documents that differ

    @property
    def equal(self) -> bool:
        return not self.differing

    def shown_ids(self) -> list[str]:
        return [diff.document.doc_id for diff in self.shown if diff.document.doc_id is not None]

    def describe(self, paths: Mapping[str, str]) -> str:
        """``39 of 120 documents differ (by tenant: 't' 39): many/f012.md (tenant 't'): 3 chunks in
        kb-v2, none in kb-v3; ...; and 29 more``. ``paths``: doc_id -> source path."""
        tenants = ", ".join(f"{tenant!r} {n}" for tenant, n in sorted(self.tenants.items()))
        named = sorted(
            (_place(diff.document, paths), diff.document.tenant, diff.state(self.source, self.dest))
            for diff in self.shown
        )
        shown = "; ".join(f"{place} (tenant {tenant!r}): {state}" for place, tenant, state in named)
        more = f"; and {self.differing - len(named)} more" if self.differing > len(named) else ""
        return (
            f"{self.differing} of {self.documents} documents differ (by tenant: {tenants}): "
            f"{shown}{more}"
        )


def _place(document: StoredDocument, paths: Mapping[str, str]) -> str:
    """``<collection>/<source path>``, as a push names a document (the doc_id when unknown)."""
    path = paths.get(str(document.doc_id), str(document.doc_id))
    return f"{document.collection}/{path}" if document.collection is not None else path


def compare(
    source_rows: Iterable[Mapping[str, Any]],
    dest_rows: Iterable[Mapping[str, Any]],
    source: str,
    dest: str,
    limit: int = SHOWN,
    dest_only: bool = True,
) -> VersionComparison:
    """Compare two versions' ``chunk_groups`` document by document. Pure.

    A document differs when its chunk count under any ``doc_hash`` differs, or it is in one
    version only; with ``dest_only`` false a document only ``dest`` holds is left out (no copy
    makes one: doctor's, where it is a push since the swap). ``documents`` counts the documents
    compared."""
    found = VersionComparison(source, dest)
    olds, news = stored_documents(source_rows), stored_documents(dest_rows)
    old, new = next(olds, None), next(news, None)
    while old is not None or new is not None:
        if new is None or (old is not None and _order(old.doc_id) < _order(new.doc_id)):
            pair, old = DocumentDifference(old, None), next(olds, None)
        elif old is None or _order(new.doc_id) < _order(old.doc_id):
            pair, new = DocumentDifference(None, new), next(news, None)
            if not dest_only:
                continue
        else:
            pair, old, new = DocumentDifference(old, new), next(olds, None), next(news, None)
        found.documents += 1
        found.chunks += pair.source.chunks if pair.source else 0
        if pair.source and pair.dest and pair.source.counts == pair.dest.counts:
            continue
        found.differing += 1
        found.tenants[pair.document.tenant] += 1
        if len(found.shown) < limit:
            found.shown.append(pair)
    return found


def compare_versions(
    client: OpenSearch, source: str, dest: str, dest_only: bool = True
) -> VersionComparison:
    """Compare the chunks ``source`` and ``dest`` hold (what is refreshed in each), as
    ``compare``; raises opensearch-py's errors."""
    groups = chunk_groups(client, source), chunk_groups(client, dest)
    return compare(*groups, source, dest, dest_only=dest_only)


def source_paths(client: OpenSearch, index: str, doc_ids: list[str]) -> dict[str, str]:
    """doc_id -> source path, one chunk read per document (``index`` may name several)."""
    if not doc_ids:
        return {}
    answer = client.search(
        index=index,
        body={
            "size": len(doc_ids),
            "query": {"terms": {"doc_id": doc_ids}},
            "collapse": {"field": "doc_id"},
            "_source": ["doc_id", "source"],
        },
    )
    return {
        hit["_source"]["doc_id"]: hit["_source"].get("source", hit["_source"]["doc_id"])
        for hit in answer["hits"]["hits"]
    }


def copy_record(found: VersionComparison, now: datetime | None = None) -> dict[str, Any]:
    """``_meta.loader_copy`` of a copy found equal to its source when the alias moved."""
    return {
        "from": found.source,
        "chunks": found.chunks,
        "documents": found.documents,
        "checked_at": (now or datetime.now(UTC)).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
