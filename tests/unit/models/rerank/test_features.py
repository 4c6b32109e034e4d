"""The learned reranker's features from hits and lookup answers, each against a value worked out
by hand; the lookup filters on the candidates and the tenant; the fingerprint follows the list."""

from __future__ import annotations

import math

import numpy as np
import pytest

from loader.models.rerank import RerankQuery
from loader.models.rerank.features import (
    FEATURE_NAMES,
    feature_lookup,
    feature_matrix,
    parse_lookup,
    prior,
)
from loader.query.result import SearchHit

QUERY = RerankQuery(
    question="How long do refunds take for late deliveries?",
    index="docs",
    tenant="A",
    query_text="How long do refunds take for late deliveries?",
    query_vector=[0.1, 0.2],
    exact_terms=("E1043", "R-2207"),
)


def hit(chunk_id, doc_id, text, retrieval, rank, *, title="", heading=(), position=0):
    made = SearchHit(
        chunk_id=chunk_id, doc_id=doc_id, body=text, text=text, title=title,
        heading_path=tuple(heading), position=position,
    )  # fmt: skip
    made.scores["retrieval"], made.ranks["retrieval"] = retrieval, rank
    return made


HITS = [
    hit("a-0", "a", "refunds take five days", 0.05, 1, title="Refunds",
        heading=("Refunds", "Late deliveries"), position=0),
    hit("a-1", "a", "late deliveries are refunded later than other orders", 0.03, 2,
        title="Refunds", heading=("Refunds", "Other"), position=1),
    hit("b-3", "b", "error E1043 means the tray is empty", 0.01, 3, title="Printer", position=3),
]  # fmt: skip


def answer(scores: dict[str, float]) -> dict:
    return {
        "hits": {"hits": [{"_source": {"chunk_id": c}, "_score": s} for c, s in scores.items()]}
    }


ANSWERS = [
    answer({"a-0": 4.0, "a-1": 2.0}),  # content: b-3 does not match
    answer({"a-0": 3.0}),  # heading
    answer({"a-0": 0.9, "a-1": 0.7, "b-3": 0.5}),  # vector
    answer({"b-3": 1.0}),  # exact: b-3 holds one of the two identifiers
]


def column(matrix: np.ndarray, name: str) -> list[float]:
    return matrix[:, FEATURE_NAMES.index(name)].tolist()


def test_each_feature_is_the_value_worked_out_by_hand():
    matrix = feature_matrix(QUERY, HITS, ANSWERS)
    assert matrix.shape == (3, len(FEATURE_NAMES))
    # content scores 4, 2, 0: min-max 1, 0.5, 0; ratio the same; ranks 1, 2 and unmatched.
    assert column(matrix, "content_minmax") == pytest.approx([1.0, 0.5, 0.0])
    assert column(matrix, "content_ratio") == pytest.approx([1.0, 0.5, 0.0])
    mean, spread = 2.0, math.sqrt(((4 - 2) ** 2 + 0 + (0 - 2) ** 2) / 3)
    assert column(matrix, "content_zscore") == pytest.approx(
        [(4 - mean) / spread, 0.0, (0 - mean) / spread]
    )
    assert column(matrix, "content_rank") == pytest.approx([1.0, 0.5, 0.0])
    assert column(matrix, "heading_rank") == pytest.approx([1.0, 0.0, 0.0])
    # vector 0.9, 0.7, 0.5: min-max 1, 0.5, 0; ratio to 0.9.
    assert column(matrix, "vector_minmax") == pytest.approx([1.0, 0.5, 0.0])
    assert column(matrix, "vector_ratio") == pytest.approx([1.0, 0.7 / 0.9, 0.5 / 0.9])
    assert column(matrix, "vector_rank") == pytest.approx([1.0, 0.5, 1 / 3])
    assert column(matrix, "exact_share") == pytest.approx([0.0, 0.0, 0.5])
    assert column(matrix, "fused_minmax") == pytest.approx([1.0, 0.5, 0.0])
    assert column(matrix, "fused_rank") == pytest.approx([1.0, 0.5, 1 / 3])
    # The question's content words: long, refunds, take, late, deliveries (5).
    assert column(matrix, "question_terms") == [5.0] * 3
    assert column(matrix, "heading_overlap") == pytest.approx([3 / 5, 1 / 5, 0.0])
    assert column(matrix, "title_overlap") == pytest.approx([1 / 5, 1 / 5, 0.0])
    assert column(matrix, "body_overlap") == pytest.approx([2 / 5, 2 / 5, 0.0])
    assert column(matrix, "has_identifiers") == [1.0] * 3
    # 4, 8 and 7 words: the median is 7.
    assert column(matrix, "length_ratio") == pytest.approx([4 / 7, 8 / 7, 1.0])
    assert column(matrix, "position") == pytest.approx([1.0, 0.5, 0.25])
    assert column(matrix, "doc_candidates") == [2.0, 2.0, 1.0]
    assert prior(HITS).tolist() == pytest.approx([1.0, 1 / math.log2(3), 0.5])


def test_without_a_vector_or_identifiers_those_sub_queries_are_not_run():
    bare = RerankQuery(question="refunds", index="docs", tenant="A", query_text="refunds")
    lines = feature_lookup(bare, HITS)
    assert len(lines) == 4  # content and heading: a header and a body each
    matrix = feature_matrix(bare, HITS, ANSWERS[:2])
    assert all(math.isnan(v) for v in column(matrix, "vector_minmax"))
    assert column(matrix, "exact_share") == [0.0] * 3
    assert column(matrix, "has_identifiers") == [0.0] * 3
    with pytest.raises(ValueError, match="3 lookup answers for 2 sub-queries"):
        parse_lookup(bare, ANSWERS[:3])


def test_the_lookup_holds_only_the_candidates_of_the_tenant():
    lines = feature_lookup(QUERY, HITS)
    assert len(lines) == 8
    for header, body in zip(lines[::2], lines[1::2], strict=True):
        assert header == {"index": "docs"}
        assert body["size"] == 3
        filters = body["query"]["bool"]["filter"]
        assert {"terms": {"chunk_id": ["a-0", "a-1", "b-3"]}} in filters
        assert {"term": {"tenant": "A"}} in filters
    with pytest.raises(ValueError, match="index and tenant"):
        feature_lookup(RerankQuery(question="q", index="docs"), HITS)
