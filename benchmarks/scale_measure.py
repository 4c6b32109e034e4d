"""What ``bench_scale.py`` measures on one built index: sizes, memory, latency and HNSW recall.

Latency goes through ``loader.query.search.search`` (the path of ``loader search``: the stored
template of each mode, the fusion pipeline for the hybrid modes, no rerank) with the questions'
vectors computed beforehand, so the figures exclude query embedding; the embedding time of each
question, measured in the same run, is added per question for the "embedding included" columns.
"""

from __future__ import annotations

import time
from typing import Any

import numpy as np
from opensearchpy import OpenSearch
from scale_corpus import TENANT

from loader.eval.metrics import percentile
from loader.query.request import SearchRequest
from loader.query.search import search
from loader.settings import SEARCH_MODES, Settings

# Segment files that hold the vectors (.vec raw float32, .veq quantized) and the HNSW graph (.vex),
# with their metadata (.vem, .vemf, .vemq): what a vector search reads.
VECTOR_FILE_KEYS = ("vec", "vex", "veq", "vem", "vemf", "vemq")


class PrecomputedEmbedder:
    """Serves the questions' vectors made beforehand by the real model, so no model runs while a
    search is timed; a question it was not given is an error, never a made-up vector."""

    def __init__(self, questions: list[str], vectors: np.ndarray) -> None:
        self.by_question = {q: v for q, v in zip(questions, vectors, strict=True)}

    def embed_queries(self, texts: list[str]) -> np.ndarray:
        return np.stack([self.by_question[text] for text in texts])


def index_figures(client: OpenSearch, index: str) -> dict[str, Any]:
    """Store bytes, docs, segment file sizes by extension, k-NN native memory, JVM heap."""
    stats = client.indices.stats(
        index=index, metric="store,docs,segments", params={"include_segment_file_sizes": "true"}
    )["indices"][index]["primaries"]
    files = {key: value["size_in_bytes"] for key, value in stats["segments"]["file_sizes"].items()}
    vector_bytes = sum(files.get(key, 0) for key in VECTOR_FILE_KEYS)
    knn = client.transport.perform_request("GET", "/_plugins/_knn/stats")
    knn_node = next(iter(knn["nodes"].values()))
    jvm = next(iter(client.nodes.stats(metric="jvm")["nodes"].values()))["jvm"]["mem"]
    return {
        "docs": stats["docs"]["count"],
        "segments": stats["segments"]["count"],
        "store_bytes": stats["store"]["size_in_bytes"],
        "segment_file_bytes": sum(files.values()),
        "vector_file_bytes": vector_bytes,
        "file_sizes": files,
        "knn_graph_memory_kb": knn_node.get("graph_memory_usage", 0),
        "heap_used_bytes": jvm["heap_used_in_bytes"],
        "heap_max_bytes": jvm["heap_max_in_bytes"],
    }


def _request(settings: Settings, question: str, mode: str, k: int | None = None) -> SearchRequest:
    return SearchRequest.from_settings(
        settings, question, tenant=TENANT, mode=mode, rerank=False, k=k
    )


def latencies(
    settings: Settings,
    client: OpenSearch,
    embedder: PrecomputedEmbedder,
    timed: list[str],
    warmup: list[str],
    embed_ms: list[float],
) -> dict[str, dict[str, float]]:
    """p50/p95 ms per mode, sequential: embedding excluded, and with each question's measured
    embedding time added (not for bm25, which embeds nothing)."""
    figures = {}
    for mode in SEARCH_MODES:
        for question in warmup:
            search(_request(settings, question, mode), settings, client=client, embedder=embedder)
        totals = []
        for question in timed:
            result = search(
                _request(settings, question, mode), settings, client=client, embedder=embedder
            )
            totals.append(result.timings["total_ms"])
        added = embed_ms if mode != "bm25" else [0.0] * len(timed)
        included = [total + embed for total, embed in zip(totals, added, strict=True)]
        figures[mode] = {
            "p50": percentile(totals, 50),
            "p95": percentile(totals, 95),
            "p50_embed": percentile(included, 50),
            "p95_embed": percentile(included, 95),
        }
    return figures


def exact_top(client: OpenSearch, index: str, vector: np.ndarray, k: int) -> list[str]:
    """The exact k nearest chunks by cosine: a brute-force ``knn_score`` script over every
    chunk of the tenant (no graph involved)."""
    body = {
        "size": k,
        "_source": False,
        "query": {
            "script_score": {
                "query": {"bool": {"filter": [{"term": {"tenant": TENANT}}]}},
                "script": {
                    "source": "knn_score",
                    "lang": "knn",
                    "params": {
                        "field": "embedding",
                        "query_value": vector.tolist(),
                        "space_type": "cosinesimil",
                    },
                },
            }
        },
    }
    response = client.search(index=index, body=body, params={"request_timeout": 120})
    return [hit["_id"] for hit in response["hits"]["hits"]]


def hnsw_recall(
    settings: Settings,
    client: OpenSearch,
    embedder: PrecomputedEmbedder,
    questions: list[str],
    exact: list[list[str]],
    k: int = 10,
) -> float:
    """Mean share of the exact top k that ``loader search --mode vector -k 10`` returns (its
    k-NN clause asks for ``candidates`` neighbours with the template's ef_search)."""
    shares = []
    for question, truth in zip(questions, exact, strict=True):
        result = search(
            _request(settings, question, "vector", k=k), settings, client=client, embedder=embedder
        )
        found = {hit.chunk_id for hit in result.hits}
        shares.append(len(found & set(truth)) / len(truth))
    return float(np.mean(shares))


def numpy_tops(chunks: np.ndarray, queries: np.ndarray, chunk_id, k: int = 10) -> list[list[str]]:
    """The exact k nearest chunks of each query by cosine (all vectors are unit norm)."""
    tops = []
    for start in range(0, len(queries), 16):
        scores = queries[start : start + 16] @ chunks.T
        best = np.argpartition(-scores, k, axis=1)[:, :k]
        for row, candidates in zip(scores, best, strict=True):
            ordered = candidates[np.argsort(-row[candidates])]
            tops.append([chunk_id(int(i)) for i in ordered])
    return tops


def exact_tops(client: OpenSearch, index: str, vectors: np.ndarray, k: int = 10):
    """The exact top k of each vector, and the mean ms one exact search took."""
    started = time.perf_counter()
    tops = [exact_top(client, index, vector, k) for vector in vectors]
    return tops, (time.perf_counter() - started) * 1000 / max(1, len(vectors))
