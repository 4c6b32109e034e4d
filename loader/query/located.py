"""Where the chunks of a source sit, whatever their tenant: read straight from the index (no
template, so every tenant is seen), for ``loader explain`` to say why a chunk is missing (not
indexed, another tenant's, a heading no chunk has) and to choose which source a user meant.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from loader.cluster.client import cluster_errors
from loader.documents import PATH_SEPARATOR
from loader.query.explanation import Expected

if TYPE_CHECKING:
    from opensearchpy import OpenSearch

    from loader.settings import Settings

# Chunks of the named sources read at most, the asking tenant's first.
LOCATE_CHUNKS = 500


@dataclass(frozen=True)
class IndexedChunk:
    """Where one chunk of a looked-up source sits: its tenant, title and heading path."""

    source: str
    tenant: str
    title: str
    heading_path: tuple[str, ...]


def indexed_chunks(
    client: OpenSearch, settings: Settings, sources: Sequence[str], tenant: str, typed: str
) -> list[IndexedChunk]:
    """Up to ``LOCATE_CHUNKS`` chunks of ``sources``, any tenant, ``tenant``'s first; read
    straight from the index (no template: it must see every tenant). ``typed`` is what the user
    named, for the error message."""
    alias = settings.index_name
    with cluster_errors(settings, f"looking for {typed!r} in {alias!r}"):
        answer = client.search(
            index=alias,
            body={
                "size": LOCATE_CHUNKS,
                "query": {
                    "bool": {
                        "filter": [{"terms": {"source": list(sources)}}],
                        "should": [{"term": {"tenant": tenant}}],  # ranks the tenant's first
                    }
                },
                "_source": ["source", "tenant", "title", "heading_path"],
            },
        )
    chunks = []
    for document in answer.get("hits", {}).get("hits", []):
        found = document.get("_source") or {}
        path = tuple(p for p in str(found.get("heading_path") or "").split(PATH_SEPARATOR) if p)
        chunks.append(
            IndexedChunk(
                str(found.get("source", "")),
                str(found.get("tenant", "")),
                str(found.get("title", "")),
                path,
            )
        )
    return chunks


def source_owners(chunks: Sequence[IndexedChunk]) -> dict[str, set[str]]:
    """Source -> the tenants with chunks of it."""
    owners: dict[str, set[str]] = {}
    for chunk in chunks:
        owners.setdefault(chunk.source, set()).add(chunk.tenant)
    return owners


def locate(
    expected: Expected, chunks: Sequence[IndexedChunk]
) -> tuple[dict[str, list[tuple[str, ...]]], dict[str, set[tuple[str, ...]]]]:
    """Tenant -> heading paths of the chunks of ``expected.source`` that sit under its heading
    path, and tenant -> every heading path of the source's chunks, any tenant."""
    found: dict[str, list[tuple[str, ...]]] = {}
    headings: dict[str, set[tuple[str, ...]]] = {}
    for chunk in chunks:
        if chunk.source != expected.source:
            continue
        headings.setdefault(chunk.tenant, set()).add(chunk.heading_path)
        if expected.matches(chunk.source, chunk.title, chunk.heading_path):
            found.setdefault(chunk.tenant, []).append(chunk.heading_path)
    return found, headings
