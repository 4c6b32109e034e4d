"""Live scores of the judging page: the same figures `loader eval` computes."""

from __future__ import annotations

import math
import random

import pytest

from loader.eval.live import (
    LIVE_K,
    mean_scores,
    mode_disagreement,
    question_score,
    ranking_difference,
    spread,
    top_documents,
)
from loader.eval.metrics import ndcg_at_k


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


def test_ranking_difference_is_the_share_of_dcg_weight_that_moves():
    ten = list("abcdefghij")
    assert ranking_difference(ten, ten) == 0.0
    assert ranking_difference(ten, list("klmnopqrst")) == pytest.approx(1.0)
    assert ranking_difference(["a"], []) == 1.0 and ranking_difference([], []) is None
    # a and b swapped: each moves 1 - 1/log2(3); the two orders weigh 2 (1 + 1/log2(3)).
    swapped = ranking_difference(["a", "b"], ["b", "a"])
    assert swapped == pytest.approx((1 - 1 / math.log2(3)) / (1 + 1 / math.log2(3)))
    # A swap at the top moves more than one at the bottom; below the first k nothing counts.
    top = ranking_difference(ten, ["b", "a", *ten[2:]])
    bottom = ranking_difference(ten, [*ten[:8], "j", "i"])
    assert top > bottom > 0
    assert ranking_difference([*ten, "x"], [*ten, "y"]) == pytest.approx(0.0)
    assert ranking_difference(["a", "b"], ["b", "a"], k=1) == 1.0


def test_ranking_difference_bounds_how_far_ndcg_can_move():
    # For any binary grades the two orders' DCG@10 differ by at most the weight that moved.
    first = list("abcdefghij")
    second = ["c", "a", "x", "b", "d", "e", "y", "f", "g", "h"]
    weight = sum(1 / math.log2(1 + r) for r in range(1, LIVE_K + 1))
    moved = ranking_difference(first, second) * 2 * weight
    for relevant in ({"c": 1}, {"x": 1, "y": 1}, {"a": 1, "b": 1}, {"j": 1, "i": 1, "x": 1}):
        ideal = sum(1 / math.log2(1 + r) for r in range(1, len(relevant) + 1))
        gap = abs(ndcg_at_k(first, relevant, LIVE_K) - ndcg_at_k(second, relevant, LIVE_K))
        assert gap * ideal <= moved + 1e-9


def test_questions_that_move_alike_tie_exactly_whatever_their_documents_names():
    # The judging order breaks ties by question number: a figure that depended on the order a
    # set yields the documents in would break them differently in every process.
    rng = random.Random(7)
    figures = set()
    for _ in range(200):
        names = rng.sample([f"doc-{n}" for n in range(1000)], 12)
        first, second = (
            names[:10],
            [names[2], names[0], names[1], *names[3:8], names[10], names[11]],
        )
        figures.add(ranking_difference(first, second))
    assert len(figures) == 1
