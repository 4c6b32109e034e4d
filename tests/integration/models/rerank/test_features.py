"""The learned reranker's features on a real node: a tiny corpus of a few chunks, searched in
hybrid-rrf mode through ``search`` itself, every feature of every candidate checked against a
value worked out here from independent reads of the index (each sub-query's plain ``_search``
score, each chunk's stored vectors, both readers') and from the texts written below. Tenant B
holds the same file names with more of the question's words: none of its chunks or scores may
reach A's rows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from loader.index.apply import apply_config
from loader.ingest.sync import push
from loader.models.rerank.features import FEATURE_NAMES, ONE_READER, TWO_READERS
from loader.query.request import SearchRequest
from loader.query.rewrite import IdentityRewriter
from loader.query.search import search
from loader.train.examples import FeatureRecorder

QUESTION = "zebra refunds E1043"
TERMS = {"zebra", "refunds", "e1043"}  # the question's content words, worked out by hand
DOCS = {
    "refunds.md": "# Refunds\n\n## Late deliveries\n\nZebra orders delivered late are refunded "
    "within five days.\n\n## Error codes\n\nError E1043 means the zebra refund is blocked.\n",
    "shipping.md": "# Shipping\n\n## Zebra crates\n\nCrates ship on Mondays.\n",
    "other.md": "# Other\n\n## Notes\n\nNothing about that here, only refunds.\n",
}
B_DOCS = {name: text + "\nZebra refunds E1043 zebra refunds.\n" for name, text in DOCS.items()}


@pytest.fixture
def corpus(client, base_settings, unique_name, embedder, tmp_path):
    settings = base_settings.replace(index_name=unique_name)
    apply_config(settings, dimension=embedder.dimension, client=client)
    for tenant, docs in (("A", DOCS), ("B", B_DOCS)):
        folder = tmp_path / tenant / "docs"
        folder.mkdir(parents=True)
        for name, text in docs.items():
            (folder / name).write_text(text, encoding="utf-8")
        assert push(folder, settings, client=client, embedder=embedder, tenant=tenant).failed == 0
    client.indices.refresh(index=unique_name)
    return settings


def recorded(settings, client, embedder, features=ONE_READER):
    recorder = FeatureRecorder(None, features)
    request = SearchRequest(
        question=QUESTION, tenant="A", mode="hybrid-rrf", rerank=True, k=50, candidates=50
    )
    search(request, settings, client=client, embedder=embedder, reranker=recorder,
           rewriter=IdentityRewriter())  # fmt: skip
    assert recorder.recorded is not None
    return recorder.recorded


def plain_scores(client, settings, clause) -> dict[str, float]:
    """Tenant A's chunk id -> score of one clause, by a plain _search."""
    body = {"size": 100, "_source": ["chunk_id"],
            "query": {"bool": {"must": clause, "filter": [{"term": {"tenant": "A"}}]}}}  # fmt: skip
    answer = client.search(index=settings.index_name, body=body)
    return {h["_source"]["chunk_id"]: h["_score"] for h in answer["hits"]["hits"]}


def stored_vectors(client, settings, field="embedding") -> dict[str, np.ndarray]:
    body = {"size": 100, "_source": ["chunk_id", field],
            "query": {"term": {"tenant": "A"}}}  # fmt: skip
    answer = client.search(index=settings.index_name, body=body)
    return {h["_source"]["chunk_id"]: np.array(h["_source"][field]) for h in answer["hits"]["hits"]}


def forms(values: list[float], matched: list[bool]) -> dict[str, list[float]]:
    """min-max, ratio, z-score and reciprocal rank, by the textbook formulas."""
    low, high, n = min(values), max(values), len(values)
    mean = sum(values) / n
    spread = math.sqrt(sum((v - mean) ** 2 for v in values) / n)
    order = sorted(range(n), key=lambda i: (-values[i], i))
    rank = {i: position + 1 for position, i in enumerate(order)}
    return {
        "minmax": [(v - low) / (high - low) for v in values],
        "ratio": [v / high for v in values],
        "zscore": [(v - mean) / spread for v in values],
        "rank": [1 / rank[i] if matched[i] else 0.0 for i in range(n)],
    }


def words(text: str) -> set[str]:
    return {w for w in "".join(c if c.isalnum() else " " for c in text.lower()).split()}


def test_every_feature_is_the_value_worked_out_from_the_index(corpus, client, embedder):
    matrix, prior, hits = recorded(corpus, client, embedder)
    assert len(hits) == 4 and {hit.tenant for hit in hits} == {"A"}  # every chunk of A, no B
    ids = [hit.chunk_id for hit in hits]
    column = {name: matrix[:, i].tolist() for i, name in enumerate(FEATURE_NAMES)}

    for side, field in (("content", "content"), ("heading", "heading_path")):
        scores = plain_scores(client, corpus, {"match": {field: {"query": QUESTION}}})
        values = [scores.get(i, 0.0) for i in ids]
        for form, expected in forms(values, [i in scores for i in ids]).items():
            assert column[f"{side}_{form}"] == pytest.approx(expected, rel=1e-4), (side, form)

    question = embedder.embed_queries([QUESTION])[0]
    vectors = stored_vectors(client, corpus)
    cosines = [
        float(question @ vectors[i] / np.linalg.norm(question) / np.linalg.norm(vectors[i]))
        for i in ids
    ]
    for form, expected in forms([(1 + c) / 2 for c in cosines], [True] * 4).items():
        assert column[f"vector_{form}"] == pytest.approx(expected, rel=1e-3, abs=1e-4), form

    holds = ["E1043" in hit.text for hit in hits]
    assert sum(holds) == 1 and column["exact_share"] == [1.0 if h else 0.0 for h in holds]
    assert column["has_identifiers"] == [1.0] * 4 and column["question_terms"] == [3.0] * 4
    fused = [hit.scores["retrieval"] for hit in hits]
    ranks = [hit.ranks["retrieval"] for hit in hits]
    assert ranks == [1, 2, 3, 4]
    assert column["fused_minmax"] == pytest.approx(forms(fused, [True] * 4)["minmax"])
    assert column["fused_zscore"] == pytest.approx(forms(fused, [True] * 4)["zscore"])
    assert column["fused_rank"] == pytest.approx([1, 1 / 2, 1 / 3, 1 / 4])
    assert prior.tolist() == pytest.approx([1 / math.log2(1 + r) for r in ranks])

    by_text = {hit.chunk_id: hit for hit in hits}
    for row, chunk_id in enumerate(ids):
        hit = by_text[chunk_id]
        assert column["heading_overlap"][row] == pytest.approx(
            len(TERMS & words(" ".join(hit.heading_path))) / 3
        )
        assert column["title_overlap"][row] == pytest.approx(len(TERMS & words(hit.title)) / 3)
        assert column["body_overlap"][row] == pytest.approx(len(TERMS & words(hit.text)) / 3)
        assert column["position"][row] == pytest.approx(1 / (1 + hit.position))
    lengths = [len(hit.text.split()) for hit in hits]  # no punctuation-only tokens here
    median = sorted(lengths)[1:3]
    assert column["length_ratio"] == pytest.approx(
        [n / (sum(median) / 2) for n in lengths], rel=0.15
    )
    per_doc = [sum(other.doc_id == hit.doc_id for other in hits) for hit in hits]
    assert column["doc_candidates"] == per_doc and sorted(per_doc) == [1, 1, 2, 2]


def test_the_second_readers_features_are_its_cosine_with_each_chunks_second_vector(
    corpus, client, embedder
):
    """With two readers (bge-small-en-v1.5 in ``second_embedding``), the two-reader set's last
    four columns are the second reader's cosine in the four forms, worked out from its stored
    vectors, and its first columns are the one-reader set's."""
    from loader.models.readers import SECOND_FIELD, second_embedder_for

    second = second_embedder_for(corpus)
    assert second is not None, "the default settings' second reader (bge-small's jar) is here"
    one_matrix, _, one_hits = recorded(corpus, client, embedder)
    matrix, _, hits = recorded(corpus, client, embedder, TWO_READERS)
    assert [hit.chunk_id for hit in hits] == [hit.chunk_id for hit in one_hits]
    assert matrix.shape == (4, len(TWO_READERS.names))
    assert np.array_equal(matrix[:, : len(FEATURE_NAMES)], one_matrix)
    ids = [hit.chunk_id for hit in hits]
    question = second.embed_queries([QUESTION])[0]
    vectors = stored_vectors(client, corpus, SECOND_FIELD)
    cosines = [
        float(question @ vectors[i] / np.linalg.norm(question) / np.linalg.norm(vectors[i]))
        for i in ids
    ]
    column = {name: matrix[:, i].tolist() for i, name in enumerate(TWO_READERS.names)}
    for form, expected in forms([(1 + c) / 2 for c in cosines], [True] * 4).items():
        assert column[f"second_vector_{form}"] == pytest.approx(expected, rel=1e-3, abs=1e-4)
