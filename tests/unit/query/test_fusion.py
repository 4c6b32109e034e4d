from __future__ import annotations

import pytest

from loader.query.fusion import (
    MIN_MAX_FLOOR,
    best_rank_per_document,
    l2_normalize,
    min_max_fusion,
    min_max_normalize,
    rrf,
    weighted_arithmetic_mean,
    z_score_normalize,
)


def test_rrf_seed_example() -> None:
    # "doc" is rank 1 in keyword and rank 4 in vector; "other" is absent from keyword, rank 2 in
    # vector.
    keyword = ["doc", "k2", "k3"]
    vector = ["v1", "other", "v3", "doc"]
    fused = dict(rrf([keyword, vector]))
    assert fused["doc"] == pytest.approx(1 / 61 + 1 / 64)
    assert fused["doc"] == pytest.approx(0.0320, abs=5e-5)
    assert fused["other"] == pytest.approx(1 / 62)
    assert fused["other"] == pytest.approx(0.0161, abs=5e-5)


def test_rrf_order_and_ties_by_first_appearance() -> None:
    # a and c both score 1/61 + ...; a (rank 1 in list 1) and c (rank 1 in list 2) tie exactly.
    fused = rrf([["a", "b"], ["c", "d"]])
    assert [doc_id for doc_id, _ in fused] == ["a", "c", "b", "d"]
    assert fused[0][1] == fused[1][1]


def test_rrf_duplicates_rank_constant_and_weights() -> None:
    # The repeated "a" does not take a rank: b is rank 2.
    assert dict(rrf([["a", "a", "b"]]))["b"] == pytest.approx(1 / 62)
    assert dict(rrf([["a"]], rank_constant=0))["a"] == 1.0
    fused = dict(rrf([["a"], ["b"]], weights=[2.0, 1.0]))
    assert fused["a"] == pytest.approx(2 / 61)
    with pytest.raises(ValueError):
        rrf([["a"], ["b"]], weights=[1.0])
    assert rrf([]) == []


def test_min_max_normalize() -> None:
    assert min_max_normalize({"a": 10.0, "b": 5.0, "c": 0.0}) == {
        "a": 1.0,
        "b": 0.5,
        "c": MIN_MAX_FLOOR,
    }
    assert min_max_normalize({"a": 3.0, "b": 1.0}, floor=0.0) == {"a": 1.0, "b": 0.0}
    assert min_max_normalize({"a": 2.0, "b": 2.0}) == {"a": 1.0, "b": 1.0}
    assert min_max_normalize({"a": 7.0}) == {"a": 1.0}
    assert min_max_normalize({}) == {}


def test_weighted_arithmetic_mean_missing_document_counts_zero() -> None:
    fused = weighted_arithmetic_mean([{"a": 1.0, "b": 0.5}, {"b": 1.0}], weights=[0.3, 0.7])
    assert [doc_id for doc_id, _ in fused] == ["b", "a"]
    assert dict(fused)["b"] == pytest.approx(0.3 * 0.5 + 0.7 * 1.0)
    # a is missing from the second sub-query: 0 for it, weight kept in the denominator.
    assert dict(fused)["a"] == pytest.approx(0.3)


def test_weighted_arithmetic_mean_equal_weights_and_unnormalised_weights() -> None:
    fused = dict(weighted_arithmetic_mean([{"a": 1.0}, {"a": 0.5, "b": 1.0}]))
    assert fused == {"a": pytest.approx(0.75), "b": pytest.approx(0.5)}
    # Weights that do not sum to 1 are divided by their sum, like OpenSearch.
    fused = dict(weighted_arithmetic_mean([{"a": 1.0}, {"a": 0.0}], weights=[3, 1]))
    assert fused["a"] == pytest.approx(0.75)
    with pytest.raises(ValueError):
        weighted_arithmetic_mean([{"a": 1.0}], weights=[0.5, 0.5])


def test_min_max_fusion() -> None:
    bm25 = {"a": 12.0, "b": 6.0, "c": 3.0}
    knn = {"c": 0.9, "d": 0.7}
    fused = dict(min_max_fusion([bm25, knn], weights=[0.3, 0.7]))
    # a: 0.3*1 + 0.7*0; b: 0.3*(3/9); c: 0.3*0.001 + 0.7*1; d: 0.7*0.001
    assert fused["c"] == pytest.approx(0.3 * MIN_MAX_FLOOR + 0.7)
    assert fused["a"] == pytest.approx(0.3)
    assert fused["b"] == pytest.approx(0.1)
    assert fused["d"] == pytest.approx(0.7 * MIN_MAX_FLOOR)
    assert next(iter(fused)) == "c"


def test_best_rank_per_document() -> None:
    hits = [("d1#0", "d1"), ("d2#3", "d2"), ("d1#4", "d1"), ("d3#1", "d3"), ("d2#0", "d2")]
    assert best_rank_per_document(hits) == ["d1", "d2", "d3"]
    assert best_rank_per_document([]) == []


def test_z_score_matches_the_scores_a_node_fused() -> None:
    # A hybrid query on an OpenSearch 3.6 node through a z_score / arithmetic_mean pipeline
    # (weights 0.5, 0.5): the sub-queries' raw scores, and the fused scores the node returned.
    bm25 = {"1": 0.058211833, "2": 0.058211833, "3": 0.043277908, "4": 0.043277908}
    bm25["5"] = 0.043277908
    knn = {"3": 1.0, "4": 0.99801886, "2": 0.99778974, "5": 0.99260587, "1": 0.99083245}
    fused = dict(weighted_arithmetic_mean([z_score_normalize(bm25), z_score_normalize(knn)]))
    served = {"2": 0.7953724, "1": 0.54822254, "3": 0.5302459, "4": 0.27739257, "5": 0.001}
    assert fused == pytest.approx(served, rel=1e-4)


def test_z_score_keeps_opensearchs_raw_score_edge_cases() -> None:
    # A score equal to the mean takes the list's highest raw score, a lone hit keeps its own:
    # the node fused {1: 3, 2: 2, 3: 1} and {4: 5} (weights 0.5, 0.5) into 4: 2.5, 2: 1.5,
    # 1: 0.5, 3: 0.0005.
    normalized = z_score_normalize({"1": 3.0, "2": 2.0, "3": 1.0})
    assert normalized == pytest.approx({"1": 1.0, "2": 3.0, "3": MIN_MAX_FLOOR})
    fused = weighted_arithmetic_mean([normalized, z_score_normalize({"4": 5.0})])
    assert [doc_id for doc_id, _ in fused] == ["4", "2", "1", "3"]
    assert dict(fused) == pytest.approx({"4": 2.5, "2": 1.5, "1": 0.5, "3": 0.0005})
    assert z_score_normalize({}) == {}


def test_l2_divides_by_the_norm() -> None:
    assert l2_normalize({"a": 3.0, "b": 4.0}) == pytest.approx({"a": 0.6, "b": 0.8})
    assert l2_normalize({"a": 0.0}) == {"a": 0.0}
