"""Live scores of the judging page: the same figures `loader eval` computes."""

from __future__ import annotations

import math

import pytest

from loader.eval.live import mean_scores, mode_disagreement, question_score, spread, top_documents


def test_a_questions_score_is_ndcg_at_10_over_documents_from_its_grades():
    # Two chunks of refunds.md, then late.md: documents refunds.md (rank 1), late.md (rank 2).
    hits = [("r#0", "refunds.md", 3.0), ("r#1", "refunds.md", 2.5), ("l#0", "late.md", 2.0)]
    judgments = [
        {"source": "late.md", "grade": 2},
        {"source": "refunds.md", "grade": 1},
        {"source": "refunds.md", "grade": 0},  # a source's best grade counts
    ]
    # DCG = 1/1 + 2/log2(3); ideal = 2/1 + 1/log2(3).
    expected = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))
    assert question_score(hits, judgments) == pytest.approx(expected)
    assert question_score(hits, [{"source": "late.md", "grade": 0}]) is None  # nothing relevant
    assert question_score([], [{"source": "late.md", "grade": 2}]) == 0.0


def test_spread_and_means_leave_unscored_out():
    assert spread({"bm25": 0.25, "vector": 1.0, "hybrid-rrf": None}) == pytest.approx(0.75)
    assert spread({"bm25": None}) is None
    means = mean_scores([{"bm25": 1.0, "vector": None}, {"bm25": 0.5, "vector": 0.25}])
    assert means == {"bm25": pytest.approx(0.75), "vector": pytest.approx(0.25)}


def test_mode_disagreement_is_one_minus_the_mean_overlap_of_top_documents():
    # bm25/vector share 1 of 2 (0.5), bm25/rrf 2 of 2 (1.0), vector/rrf 1 of 2 (0.5): mean 2/3.
    rankings = {"bm25": ["a", "b"], "vector": ["a", "c"], "hybrid-rrf": ["b", "a"], "x": []}
    assert mode_disagreement(rankings) == pytest.approx(1 - 2 / 3)
    assert mode_disagreement({"bm25": ["a"], "vector": ["a"]}) == 0.0
    assert mode_disagreement({"bm25": ["a"], "vector": []}) is None
    hits = [("a#0", "a", 3.0), ("a#1", "a", 2.0), ("b#0", "b", 1.0)]
    assert top_documents(hits, k=1) == ["a"] and top_documents(hits) == ["a", "b"]
