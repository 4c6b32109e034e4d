"""Raters' agreement, against kappas computed by hand."""

from __future__ import annotations

import pytest

from loader.eval.agreement import agreement, cohen_kappa
from loader.query.grades import Grade, JudgingState, resolved_grade


def test_kappa_equals_the_hand_computation():
    # Six results both graded: four alike. Rater a gave 2 three times, 1 once, 0 twice; rater b
    # gave 2 twice, 1 three times, 0 once. p_o = 4/6; p_e = (3*2 + 1*3 + 2*1) / 36 = 11/36;
    # kappa = (24/36 - 11/36) / (1 - 11/36) = 13/25.
    pairs = [(2, 2), (2, 1), (1, 1), (0, 0), (0, 1), (2, 2)]
    assert cohen_kappa(pairs) == pytest.approx(13 / 25)
    assert cohen_kappa([(2, 2), (1, 0), (0, 0)]) == pytest.approx(0.5)
    assert cohen_kappa([(0, 2), (2, 0)]) == pytest.approx(-1.0)  # p_o 0, p_e 1/2


def test_kappa_is_undefined_without_shared_results_or_with_one_grade_only():
    assert cohen_kappa([]) is None
    assert cohen_kappa([(1, 1), (1, 1)]) is None  # p_e = 1


def test_the_resolution_is_the_mean_rounded_down():
    assert [resolved_grade(g) for g in ([2, 1], [2, 0], [1, 0], [2, 2, 1], [2])] == [1, 1, 0, 1, 2]


def test_agreement_gives_progress_kappa_and_what_to_settle():
    state = JudgingState()
    given = {  # (question, chunk): (alice, bob)
        (0, "a"): (2, 2),
        (0, "b"): (2, 1),
        (0, "c"): (1, 1),
        (1, "d"): (0, 0),
        (1, "e"): (0, 1),
        (1, "f"): (2, 2),
    }
    for (number, chunk), (alice, bob) in given.items():
        state.add(Grade(number, chunk, alice, rater="alice"))
        state.add(Grade(number, chunk, bob, rater="bob"))
    state.add(Grade(2, "g", 1, rater="alice"))  # graded by alice only
    state.add(Grade(2, "h", 0))  # no rater (signed in without keys): no one's
    result = agreement(state.ratings)
    assert result.progress == {"alice": (7, 3), "bob": (6, 2)}
    assert [(p.raters, p.both) for p in result.pairs] == [(("alice", "bob"), 6)]
    assert result.pairs[0].kappa == pytest.approx(13 / 25)
    assert [(d.question_index, d.chunk_id, d.grades, d.resolved) for d in result.disagreements] == [
        (0, "b", {"alice": 2, "bob": 1}, 1),
        (1, "e", {"alice": 0, "bob": 1}, 0),
    ]
    # Both grades kept; the set's one grade per result is the resolved one.
    assert state.grades[0]["b"].grade == 1 and state.grades[1]["e"].grade == 0
    assert state.mine("alice")[0]["b"].grade == 2 and state.mine("bob")[0]["b"].grade == 1
