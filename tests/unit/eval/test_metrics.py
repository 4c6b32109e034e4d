from __future__ import annotations

import math

import numpy as np
import pytest

from loader.eval.metrics import (
    document_ranking,
    evaluate_queries,
    evaluate_run,
    heading_matches,
    latency_summary,
    ndcg_at_k,
    percentile,
    recall_at_k,
    reciprocal_rank,
    score_run,
    section_ranking,
)
from loader.eval.tasks import EvalQuery

LOG2_3 = math.log2(3)  # 1.5849625


def test_recall_with_several_relevant_documents() -> None:
    relevant = {"a": 1, "b": 1, "c": 1, "d": 1}
    ranked = ["a", "x", "b", "y", "c"]
    assert recall_at_k(ranked, relevant, 1) == 0.25
    assert recall_at_k(ranked, relevant, 3) == 0.5  # a, b of 4
    assert recall_at_k(ranked, relevant, 5) == 0.75  # a, b, c of 4


def test_recall_k_larger_than_the_list() -> None:
    assert recall_at_k(["a"], {"a": 1, "b": 1}, 100) == 0.5


def test_empty_results_score_zero() -> None:
    relevant = {"a": 2}
    assert recall_at_k([], relevant, 10) == 0.0
    assert reciprocal_rank([], relevant) == 0.0
    assert ndcg_at_k([], relevant) == 0.0


def test_grade_zero_is_not_relevant() -> None:
    relevant = {"a": 0, "b": 1}
    assert recall_at_k(["a"], relevant, 1) == 0.0
    assert reciprocal_rank(["a", "b"], relevant) == 0.5
    assert recall_at_k(["a", "b"], {"a": 0}, 2) == 0.0  # no relevant document at all


def test_duplicates_are_ignored_after_the_first() -> None:
    # The repeated "x" does not take a slot: the first two distinct ids are x, a.
    assert recall_at_k(["x", "x", "a"], {"a": 1}, 2) == 1.0
    assert reciprocal_rank(["x", "x", "a"], {"a": 1}) == 0.5
    # A relevant id repeated is counted once: the ideal list is [a], so DCG = IDCG = 1.
    assert ndcg_at_k(["a", "a"], {"a": 1}, 10) == pytest.approx(1.0)


def test_reciprocal_rank_cut_off() -> None:
    ranked = [f"x{i}" for i in range(10)] + ["a"]
    assert reciprocal_rank(ranked, {"a": 1}, k=10) == 0.0
    assert reciprocal_rank(ranked, {"a": 1}, k=11) == pytest.approx(1 / 11)


def test_ndcg_graded_ideal_order_is_one() -> None:
    # DCG = 2/log2(2) + 1/log2(3) = 2 + 0.6309 = IDCG
    assert ndcg_at_k(["a", "b"], {"a": 2, "b": 1}, 10) == pytest.approx(1.0)


def test_ndcg_graded_swapped_order() -> None:
    # DCG  = 1/log2(2) + 2/log2(3) = 1 + 1.26186 = 2.26186
    # IDCG = 2/log2(2) + 1/log2(3) = 2 + 0.63093 = 2.63093
    # nDCG = 2.26186 / 2.63093 = 0.85972
    value = ndcg_at_k(["b", "a"], {"a": 2, "b": 1}, 10)
    assert value == pytest.approx((1 + 2 / LOG2_3) / (2 + 1 / LOG2_3))
    assert value == pytest.approx(0.85972, abs=1e-5)


def test_ndcg_graded_with_a_miss_first() -> None:
    # DCG  = 0 + 2/log2(3) + 1/log2(4) = 1.26186 + 0.5 = 1.76186
    # IDCG = 2.63093  ->  nDCG = 0.66968
    assert ndcg_at_k(["x", "a", "b"], {"a": 2, "b": 1}, 10) == pytest.approx(0.66968, abs=1e-5)


def test_ndcg_cut_counts_only_the_first_k() -> None:
    # k=1: DCG = 1 (b, grade 1); IDCG@1 = 2 (a, grade 2) -> 0.5
    assert ndcg_at_k(["b", "a"], {"a": 2, "b": 1}, 1) == pytest.approx(0.5)


def test_evaluate_run_averages_over_judged_queries() -> None:
    run = {
        "q1": ["a", "b"],  # perfect
        "q3": ["z"],  # not judged: ignored
    }
    qrels = {"q1": {"a": 1}, "q2": {"c": 1}}  # q2 has no results: counts as 0
    metrics = evaluate_run(run, qrels, ks=(1, 10))
    assert metrics["recall@1"] == 0.5
    assert metrics["ndcg@10"] == 0.5
    assert metrics["mrr@10"] == 0.5
    assert set(metrics) == {"recall@1", "ndcg@1", "mrr@1", "recall@10", "ndcg@10", "mrr@10"}


def test_evaluate_run_default_keys_and_empty_qrels() -> None:
    metrics = evaluate_run({}, {})
    assert metrics["recall@100"] == 0.0 and metrics["mrr@10"] == 0.0
    assert "ndcg@10" in metrics and "recall@5" in metrics


def test_evaluate_queries_per_query() -> None:
    per_query = evaluate_queries({"q1": ["b", "a"]}, {"q1": {"a": 2, "b": 1}}, ks=(10,))
    assert per_query["q1"]["ndcg@10"] == pytest.approx(0.85972, abs=1e-5)
    assert per_query["q1"]["mrr@10"] == 1.0


@pytest.mark.parametrize("p", [0, 10, 50, 90, 95, 99, 100])
def test_percentile_matches_numpy(p: float) -> None:
    values = [12.0, 3.0, 7.5, 100.0, 41.0, 8.0]
    assert percentile(values, p) == pytest.approx(float(np.percentile(values, p)))


def test_percentile_simple_and_errors() -> None:
    assert percentile([10, 20, 30, 40], 50) == 25.0
    assert percentile([5], 99) == 5.0
    with pytest.raises(ValueError):
        percentile([], 50)
    with pytest.raises(ValueError):
        percentile([1], 101)


# --- chunk hits -> document and section rankings ------------------------------------------


def test_document_ranking_ranks_each_document_at_its_best_chunk():
    hits = [
        ("a-3", "a", 9.0),
        ("b-0", "b", 8.0),
        ("a-1", "a", 7.0),
        ("c-2", "c", 6.0),
        ("b-5", "b", 5.0),
    ]
    assert document_ranking(hits) == [("a", 9.0), ("b", 8.0), ("c", 6.0)]


def test_document_ranking_of_no_hits_is_empty():
    assert document_ranking([]) == []


def test_heading_matches_by_prefix_with_or_without_the_title():
    assert heading_matches(("Late deliveries",), "Refund policy", ("Late deliveries",))
    assert heading_matches(
        ("Refund policy", "Late deliveries"), "Refund policy", ("Late deliveries", "Fees")
    )
    assert heading_matches(("late DELIVERIES ",), "Refund policy", ("Late deliveries",))
    assert not heading_matches(("Missing items",), "Refund policy", ("Late deliveries",))
    assert not heading_matches(("Late deliveries", "Fees"), "Refund policy", ("Late deliveries",))
    assert heading_matches((), "Refund policy", ("Anything",))


def test_section_ranking_gives_matching_chunks_one_id():
    query = EvalQuery("q", "upi refunds", source="payments.md", heading_path=("Payments", "UPI"))
    hits = [
        ("p-1", "payments.md", "Payments", ("Cards",)),
        ("p-0", "payments.md", "Payments", ("UPI",)),
        ("r-0", "refunds.md", "Refunds", ("UPI",)),  # right heading, wrong file
        ("p-2", "payments.md", "Payments", ("UPI", "Limits")),
    ]
    ranking = section_ranking(hits, query)
    assert len(ranking) == 3  # both UPI chunks of payments.md collapse into one id
    metrics = score_run({"q": ["payments.md"]}, {"q": {"payments.md": 1}}, {"q": ranking})
    assert metrics["recall@1"] == 1.0
    assert metrics["section_recall@1"] == 0.0
    assert metrics["section_recall@5"] == 1.0
    assert metrics["section_mrr@10"] == 0.5


def test_score_run_without_sections_has_no_section_metrics():
    metrics = score_run({"q": ["a", "b"]}, {"q": {"b": 1}})
    assert metrics["mrr@10"] == 0.5
    assert metrics["recall@1"] == 0.0
    assert metrics["ndcg@10"] == pytest.approx(1 / math.log2(3))
    assert not any(name.startswith("section_") for name in metrics)


def test_latency_summary():
    assert latency_summary([10.0, 20.0, 30.0, 40.0]) == {"p50": 25.0, "p95": 38.5, "mean": 25.0}
    assert latency_summary([]) == {"p50": 0.0, "p95": 0.0, "mean": 0.0}
