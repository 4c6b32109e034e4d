"""The OpenSearch node itself: plugins, modules, k-NN, analyzers, fusion pipelines, templates.

These tests use tiny 3-dimensional vectors so each expected order can be worked out by hand.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NODE_CONFIG = Path(__file__).resolve().parents[2] / "opensearch" / "opensearch.yml"

DOCS = {
    "refund": {"body": "Our refund policy explains when you get your money back.", "v": [1, 0, 0]},
    "late": {"body": "Late deliveries qualify for a refund after 45 minutes.", "v": [0.6, 0.8, 0]},
    "wallet": {"body": "Wallet credit expires after 90 days.", "v": [0, 0.6, 0.8]},
    "areas": {"body": "We deliver to every district of the city.", "v": [0, 0, 1]},
}
QUERY_VECTOR = [0.1, 0.2, 0.97]


@pytest.fixture
def small_index(client, unique_name):
    index = f"{unique_name}-idx"
    client.indices.create(
        index=index,
        body={
            "settings": {"index.knn": True, "number_of_shards": 1, "number_of_replicas": 0},
            "mappings": {
                "properties": {
                    "body": {"type": "text", "analyzer": "english"},
                    "tenant": {"type": "keyword"},
                    "v": {
                        "type": "knn_vector",
                        "dimension": 3,
                        "method": {"name": "hnsw", "engine": "lucene", "space_type": "cosinesimil"},
                    },
                }
            },
        },
    )
    for doc_id, doc in DOCS.items():
        client.index(index=index, id=doc_id, body={**doc, "tenant": "acme"})
    client.indices.refresh(index=index)
    return index


def ids(response) -> list[str]:
    return [hit["_id"] for hit in response["hits"]["hits"]]


def test_plugins_and_modules_are_loaded(client):
    plugins = {row["component"] for row in client.cat.plugins(format="json")}
    assert {"opensearch-knn", "opensearch-neural-search"} <= plugins

    nodes = client.nodes.info(metric="plugins")["nodes"]
    modules = {m["name"] for node in nodes.values() for m in node["modules"]}
    assert {"lang-painless", "lang-mustache", "analysis-common", "reindex"} <= modules


def project_node_settings() -> dict[str, str]:
    """The plugin and breaker settings of the image's ``opensearch.yml`` (``key: value`` lines;
    network and cluster names are left out: test clusters set their own)."""
    settings = {}
    for line in NODE_CONFIG.read_text().splitlines():
        key, separator, value = line.partition(":")
        project_key = key.startswith(("indices.", "knn.", "plugins."))
        if separator and project_key and not line.startswith("#"):
            settings[key.strip()] = value.strip()
    return settings


def test_the_node_runs_the_projects_configuration(client):
    """An image built from an older opensearch.yml fails here (build-image.sh rebuilds an image
    whose inputs changed; a machine that skipped that would test the old configuration)."""
    expected = project_node_settings()
    assert "indices.breaker.total.use_real_memory" in expected
    nodes = client.nodes.info(metric="settings", flat_settings=True)["nodes"]
    for node in nodes.values():
        running = {key: node["settings"].get(key) for key in expected}
        assert running == expected, node["name"]


def test_knn_and_english_analyzer(client, small_index):
    nearest = client.search(
        index=small_index,
        body={"size": 1, "query": {"knn": {"v": {"vector": [0, 0.1, 1], "k": 1}}}},
    )
    assert ids(nearest) == ["areas"]

    stemmed = client.search(index=small_index, body={"query": {"match": {"body": "refunds"}}})
    assert set(ids(stemmed)) == {"refund", "late"}


def sub_query_rankings(client, index, text, vector):
    bm25 = client.search(index=index, body={"query": {"match": {"body": text}}})
    knn = client.search(index=index, body={"query": {"knn": {"v": {"vector": vector, "k": 4}}}})
    as_scores = lambda r: {h["_id"]: h["_score"] for h in r["hits"]["hits"]}  # noqa: E731
    return as_scores(bm25), as_scores(knn)


def hybrid_body(text, vector):
    return {
        "size": 4,
        "query": {
            "hybrid": {
                "queries": [{"match": {"body": text}}, {"knn": {"v": {"vector": vector, "k": 4}}}]
            }
        },
    }


def test_rrf_pipeline_fuses_by_rank(client, small_index, unique_name):
    pipeline = f"{unique_name}-rrf"
    client.transport.perform_request(
        "PUT",
        f"/_search/pipeline/{pipeline}",
        body={
            "phase_results_processors": [
                {
                    "score-ranker-processor": {
                        "combination": {"technique": "rrf", "rank_constant": 60}
                    }
                }
            ]
        },
    )
    bm25, knn = sub_query_rankings(client, small_index, "refund", QUERY_VECTOR)
    expected: dict[str, float] = {}
    for ranking in (bm25, knn):
        for rank, doc_id in enumerate(sorted(ranking, key=ranking.get, reverse=True), start=1):
            expected[doc_id] = expected.get(doc_id, 0.0) + 1 / (60 + rank)

    fused = client.search(
        index=small_index,
        body=hybrid_body("refund", QUERY_VECTOR),
        params={"search_pipeline": pipeline},
    )
    assert ids(fused) == sorted(expected, key=expected.get, reverse=True)
    for hit in fused["hits"]["hits"]:
        assert hit["_score"] == pytest.approx(expected[hit["_id"]], rel=1e-4)


def test_min_max_pipeline_fuses_weighted_scores(client, small_index, unique_name):
    pipeline = f"{unique_name}-minmax"
    weights = [0.3, 0.7]
    client.transport.perform_request(
        "PUT",
        f"/_search/pipeline/{pipeline}",
        body={
            "phase_results_processors": [
                {
                    "normalization-processor": {
                        "normalization": {"technique": "min_max"},
                        "combination": {
                            "technique": "arithmetic_mean",
                            "parameters": {"weights": weights},
                        },
                    }
                }
            ]
        },
    )
    bm25, knn = sub_query_rankings(client, small_index, "refund", QUERY_VECTOR)

    def normalized(scores):
        low, high = min(scores.values()), max(scores.values())
        return {d: (s - low) / (high - low) if high > low else 1.0 for d, s in scores.items()}

    bm25_n, knn_n = normalized(bm25), normalized(knn)
    expected = {
        d: (weights[0] * bm25_n.get(d, 0.0) + weights[1] * knn_n.get(d, 0.0)) / sum(weights)
        for d in set(bm25) | set(knn)
    }
    fused = client.search(
        index=small_index,
        body=hybrid_body("refund", QUERY_VECTOR),
        params={"search_pipeline": pipeline},
    )
    assert ids(fused) == sorted(expected, key=expected.get, reverse=True)
    # By hand: knn (score (1 + cos) / 2) normalizes to areas 1, wallet 0.92, late 0.14, refund 0,
    # and BM25's two hits to 1 and 0, so under weights 0.3 / 0.7 the vector side leads:
    # areas 0.70, wallet 0.64, then the BM25 leader at 0.30 or more.
    assert ids(fused)[:2] == ["areas", "wallet"]


def test_stored_mustache_hybrid_template_with_hostile_query_text(client, small_index, unique_name):
    pipeline = f"{unique_name}-rrf"
    client.transport.perform_request(
        "PUT",
        f"/_search/pipeline/{pipeline}",
        body={
            "phase_results_processors": [
                {"score-ranker-processor": {"combination": {"technique": "rrf"}}}
            ]
        },
    )
    # The source is a string so that toJson renders the vector as a JSON array.
    source = (
        json.dumps(
            {
                "size": "{{size}}",
                "query": {
                    "hybrid": {
                        "queries": [
                            {
                                "bool": {
                                    "must": {"match": {"body": "{{query_text}}"}},
                                    "filter": {"term": {"tenant": "{{tenant}}"}},
                                }
                            },
                            {
                                "knn": {
                                    "v": {
                                        "vector": "VECTOR",
                                        "k": 4,
                                        "filter": {"term": {"tenant": "{{tenant}}"}},
                                    }
                                }
                            },
                        ]
                    }
                },
            }
        )
        .replace('"VECTOR"', "{{#toJson}}query_vector{{/toJson}}")
        .replace('"{{size}}"', "{{size}}")
    )
    template = f"{unique_name}-hybrid"
    client.put_script(id=template, body={"script": {"lang": "mustache", "source": source}})

    hostile = 'refund "policy" {braces} back\\slash }} {{tenant}} " } ] ,'
    response = client.search_template(
        index=small_index,
        body={
            "id": template,
            "params": {
                "query_text": hostile,
                "query_vector": [1, 0, 0],
                "size": 2,
                "tenant": "acme",
            },
        },
        params={"search_pipeline": pipeline},
    )
    assert ids(response)[0] == "refund"
    assert len(ids(response)) == 2
