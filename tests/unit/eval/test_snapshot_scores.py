"""A snapshot's stored rankings against today's, both scored with today's grades (pure): hand
computations of nDCG@10, and the point of re-scoring both sides, a grade given after the
snapshot moves then and now alike."""

from __future__ import annotations

import math
import re

import pytest

from loader.errors import InputError
from loader.eval.live import question_score, ranking_score, top_documents
from loader.eval.snapshot_scores import aligned, compare, direction
from loader.query.snapshots import check_label, question_digest

RANK_2 = 1 / math.log2(3)  # DCG weight of rank 2: 0.6309


def _grades(**by_source: int) -> list[dict]:
    return [{"source": f"{source}.md", "grade": grade} for source, grade in by_source.items()]


def _docs(*names: str) -> list[str]:
    return [f"{name}.md" for name in names]


def test_a_document_pushed_above_the_answer_is_worse_by_the_hand_computed_figure():
    then = [{"bm25": _docs("a", "b", "c")}]
    now = [{"bm25": _docs("new", "a", "b")}]
    result = compare(then, now, [_grades(a=2)], ["bm25"])
    scores = result["questions"][0]["scores"]["bm25"]
    # One relevant document: then at rank 1 (DCG 1 = IDCG), now at rank 2 (1 / log2(3)).
    assert scores["then"] == pytest.approx(1.0)
    assert scores["now"] == pytest.approx(RANK_2)
    assert scores["delta"] == pytest.approx(RANK_2 - 1.0)  # -0.369
    assert scores["direction"] == "worse"
    assert result["counts"]["bm25"] == {"better": 0, "worse": 1, "unchanged": 0}


def test_a_grade_given_after_the_snapshot_moves_then_and_now_alike():
    # The search did not change: the same ranking then and now.
    then = [{"bm25": _docs("a", "b", "c")}]
    now = [{"bm25": _docs("a", "b", "c")}]
    before = compare(then, now, [_grades(b=2)], ["bm25"])["questions"][0]["scores"]["bm25"]
    assert before["then"] == pytest.approx(RANK_2) and before["delta"] == 0.0
    # A rater grades "a" after the snapshot: both sides are scored with it, both move, and the
    # delta stays 0 (with grades frozen at the snapshot's time it would read +0.37 here).
    after = compare(then, now, [_grades(a=2, b=2)], ["bm25"])
    scores = after["questions"][0]["scores"]["bm25"]
    assert scores["then"] == pytest.approx(1.0) and scores["now"] == pytest.approx(1.0)
    assert scores["delta"] == 0.0 and scores["direction"] == "unchanged"
    assert after["counts"]["bm25"] == {"better": 0, "worse": 0, "unchanged": 1}


def test_a_later_grade_can_turn_a_swap_into_no_change():
    # The search swapped a and b. With only a graded it reads worse; once b is graded as high,
    # the swap costs nothing, and the comparison says so on both sides.
    then, now = [{"bm25": _docs("a", "b")}], [{"bm25": _docs("b", "a")}]
    assert compare(then, now, [_grades(a=2)], ["bm25"])["counts"]["bm25"]["worse"] == 1
    even = compare(then, now, [_grades(a=2, b=2)], ["bm25"])
    assert even["counts"]["bm25"] == {"better": 0, "worse": 0, "unchanged": 1}


def test_means_and_counts_over_the_questions_both_sides_score():
    then = [
        {"bm25": _docs("a", "b"), "vector": _docs("a")},
        {"bm25": _docs("x", "y"), "vector": _docs("y")},
        {"bm25": _docs("p"), "vector": _docs("p")},
        None,  # not in the snapshot (or another question at that place)
    ]
    now = [
        {"bm25": _docs("b", "a"), "vector": _docs("a")},
        {"bm25": _docs("y", "x"), "vector": _docs("y")},
        {"bm25": _docs("p"), "vector": _docs("p")},
        {"bm25": _docs("q"), "vector": _docs("q")},
    ]
    graded = [_grades(a=2), _grades(y=1), [], _grades(q=2)]  # the third has no grade above 0
    result = compare(then, now, graded, ["bm25", "vector"])
    rows = [row["scores"]["bm25"] for row in result["questions"]]
    assert [row["direction"] for row in rows] == ["worse", "better", None, None]
    assert rows[2] == {"then": None, "now": None, "delta": None, "direction": None}
    assert rows[3]["now"] == 1.0 and rows[3]["then"] is None  # scored now, not compared
    assert [row["compared"] for row in result["questions"]] == [True, True, True, False]
    mean = result["means"]["bm25"]
    # Over the two questions both sides score: then (1 + RANK_2) / 2, now (RANK_2 + 1) / 2.
    assert mean["questions"] == 2
    assert mean["then"] == pytest.approx((1 + RANK_2) / 2)
    assert mean["now"] == pytest.approx((RANK_2 + 1) / 2)
    assert mean["direction"] == "unchanged"
    assert result["counts"] == {
        "bm25": {"better": 1, "worse": 1, "unchanged": 0},
        "vector": {"better": 0, "worse": 0, "unchanged": 2},
    }


def test_a_column_one_side_lacks_is_not_compared():
    then = [{"bm25": _docs("a")}]
    now = [{"bm25": _docs("a"), "learned": _docs("b", "a")}]
    result = compare(then, now, [_grades(a=2)], ["bm25", "learned"])
    learned = result["questions"][0]["scores"]["learned"]
    assert learned["then"] is None and learned["now"] == pytest.approx(RANK_2)
    assert learned["delta"] is None
    assert result["counts"]["learned"] == {"better": 0, "worse": 0, "unchanged": 0}
    assert result["means"]["learned"]["then"] is None


def test_a_stored_top_10_scores_as_the_live_score_of_the_hits():
    # Chunk hits, several per document, as the live scores read them: the stored top 10
    # documents give the very figure the live score gives.
    hits = [("a#1", "a.md", 9.0), ("b#0", "b.md", 8.0), ("a#0", "a.md", 7.0)]
    hits += [(f"d{n}#0", f"d{n}.md", 6.0 - n / 10) for n in range(12)]
    hits += [("c#0", "c.md", 1.0)]  # the 15th document: below the top 10
    judged = _grades(b=1, c=2, a=1)
    stored = top_documents(hits)
    assert len(stored) == 10 and stored[:2] == ["a.md", "b.md"]
    assert ranking_score(stored, judged) == question_score(hits, judged)


def test_aligned_finds_each_question_wherever_the_snapshot_held_it():
    """A set replaced under its name may ask a question at another place: its snapshot ranking
    follows it (as its grades do, loader.query.grades.current_number)."""
    digests = [question_digest("refund"), question_digest("wallet")]
    rankings = [{"bm25": ["r.md"]}, {"bm25": ["w.md"]}]
    then = aligned(digests, rankings, ["refund", "top up", "late"])
    assert then == [{"bm25": ["r.md"]}, None, None]
    then = aligned(digests, rankings, ["wallet", "late", "refund"])
    assert then == [{"bm25": ["w.md"]}, None, {"bm25": ["r.md"]}]


def test_direction():
    assert [direction(d) for d in (None, 0.0, 1e-12, 0.2, -0.2)] == [
        None,
        "unchanged",
        "unchanged",
        "better",
        "worse",
    ]


@pytest.mark.parametrize(
    ("label", "why"),
    [
        ("", "give the snapshot a name"),
        ("   ", "give the snapshot a name"),
        ("x" * 121, "at most 120 characters"),
        ("before\ud800", "lone surrogate U+D800"),
        ("before\nafter", "control character U+000A"),
        ("bell\x07", "control character U+0007"),
        (7, "must be text"),
        (None, "must be text"),
    ],
)
def test_a_bad_label_is_refused_naming_the_field(label, why):
    with pytest.raises(InputError, match=f"^label: .*{re.escape(why)}"):
        check_label(label)


def test_a_label_is_kept_stripped_and_may_hold_any_script():
    assert check_label("  vor dem neuen Modell → β  ") == "vor dem neuen Modell → β"
    assert check_label("x" * 120) == "x" * 120
