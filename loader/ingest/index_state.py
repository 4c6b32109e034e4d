"""What the index holds of a push's scope: chunk ids and hashes to plan against, the chunks that
lack the second reader's vector (``loader.models.readers``), and the stored vectors of known texts
to reuse (so an unchanged text is never embedded twice).

Example::

    state = read_index_state(client, "docs", "acme", "handbook")   # doc_id -> {source, chunks}
    vectors = fetch_vectors(client, "docs", {"<content hash>": "<chunk id>"})
"""

from __future__ import annotations

from typing import Any

from opensearchpy import OpenSearch, helpers

from loader.ingest.plan import scope_query
from loader.models.readers import FIRST_FIELD

# Fields read back from the index to plan a push: small, so planning stays cheap.
STATE_FIELDS = ["doc_id", "source", "content_hash", "doc_hash"]


def read_index_state(
    client: OpenSearch,
    alias: str,
    tenant: str,
    collection: str,
    second_field: str | None = None,
) -> dict[str, dict[str, Any]]:
    """What the index holds for one tenant's collection:
    doc_id -> {source, doc_hashes, chunks: {id: hash}, lacking: {id: (hash, text)}}.

    ``lacking`` holds the chunks without a vector in ``second_field`` (the second reader's; none
    without one), with the text their first vector was embedded from: what a push embeds for
    the second reader alone."""
    state: dict[str, dict[str, Any]] = {}
    for hit in _scan(client, alias, scope_query(tenant, collection), STATE_FIELDS):
        source = hit["_source"]
        entry = state.setdefault(
            source["doc_id"],
            {"source": source["source"], "doc_hashes": set(), "chunks": {}, "lacking": {}},
        )
        entry["doc_hashes"].add(source.get("doc_hash"))
        entry["chunks"][hit["_id"]] = source.get("content_hash")
    if second_field is None:
        return state
    lacking = {"bool": {**scope_query(tenant, collection)["bool"],
                        "must_not": [{"exists": {"field": second_field}}]}}  # fmt: skip
    for hit in _scan(client, alias, lacking, ["doc_id", "content_hash", "content"]):
        source = hit["_source"]
        entry = state.get(source["doc_id"])
        if entry is not None:  # a chunk written since the first scan has both vectors
            entry["lacking"][hit["_id"]] = (source.get("content_hash"), source.get("content", ""))
    return state


def _scan(client: OpenSearch, alias: str, query: dict[str, Any], fields: list[str]) -> Any:
    return helpers.scan(
        client,
        index=alias,
        query={"query": query, "_source": fields},
        size=2000,
        preserve_order=False,
    )


def fetch_vectors(
    client: OpenSearch, alias: str, ids_by_hash: dict[str, str], field: str = FIRST_FIELD
) -> dict[str, list]:
    """Vectors of ``field`` the index already holds, by content hash (one representative chunk id
    each; a chunk without one gives none)."""
    vectors: dict[str, list] = {}
    ids = list(ids_by_hash.items())
    for start in range(0, len(ids), 500):
        batch = dict(ids[start : start + 500])
        response = client.mget(
            index=alias, body={"ids": list(batch.values())}, _source_includes=[field]
        )
        by_id = {doc["_id"]: doc for doc in response["docs"] if doc.get("found")}
        for content_hash, doc_id in batch.items():
            doc = by_id.get(doc_id)
            if doc and doc["_source"].get(field):
                vectors[content_hash] = doc["_source"][field]
    return vectors
