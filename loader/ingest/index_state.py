"""What the index holds of a push's scope: chunk ids and hashes to plan against, and the stored
vectors of known texts to reuse (so an unchanged text is never embedded twice).

Example::

    state = read_index_state(client, "docs", "acme", "handbook")   # doc_id -> {source, chunks}
    vectors = fetch_vectors(client, "docs", {"<content hash>": "<chunk id>"})
"""

from __future__ import annotations

from typing import Any

from opensearchpy import OpenSearch, helpers

from loader.ingest.plan import scope_query

# Fields read back from the index to plan a push: small, so planning stays cheap.
STATE_FIELDS = ["doc_id", "source", "content_hash", "doc_hash"]


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
