"""The gate of `loader judgments compare` and its lines (pure): the served column's mean
nDCG@10 against the snapshot's, both from today's grades."""

from __future__ import annotations

import pytest

from loader.errors import InputError, RegressionError
from loader.eval.set_searches import check_served_column
from loader.eval.snapshot_scores import comparison_lines


def _result(then: float | None, now: float | None, served: str = "hybrid-rrf") -> dict:
    delta = None if then is None or now is None else now - then
    mean = {"then": then, "now": now, "delta": delta, "questions": 0 if delta is None else 4}
    return {
        "snapshot": {"snapshot": "0123456789abcdef0123", "label": "before", "timestamp": "T"},
        "columns": ["bm25", "hybrid-rrf"],
        "means": {"bm25": {"then": 0.5, "now": 0.75, "delta": 0.25, "questions": 4}, served: mean},
        "counts": {
            "bm25": {"better": 1, "worse": 0, "unchanged": 3},
            served: {"better": 0, "worse": 1, "unchanged": 3},
        },
        "served_column": served,
        "only_then": [],
        "only_now": ["learned"],
    }


def test_a_drop_past_the_threshold_is_a_regression_naming_the_column():
    with pytest.raises(RegressionError, match=r"hybrid-rrf: mean nDCG@10 0\.8000 -> 0\.7800"):
        check_served_column(_result(0.80, 0.78), threshold=0.01)


def test_a_drop_within_the_threshold_and_a_gain_pass():
    check_served_column(_result(0.80, 0.795), threshold=0.01)
    check_served_column(_result(0.80, 0.90), threshold=0.0)


def test_a_column_compared_on_no_question_has_not_passed():
    with pytest.raises(InputError, match="compared on no question"):
        check_served_column(_result(None, None), threshold=0.01)
    with pytest.raises(InputError, match="'learned'"):
        check_served_column(
            _result(0.8, 0.8, served="hybrid-rrf") | {"served_column": "learned"}, 0.01
        )


def test_the_lines_name_the_snapshot_each_column_and_the_served_one():
    lines = comparison_lines(_result(0.80, 0.78))
    assert lines[0] == "against snapshot 0123456789abcdef0123 'before' of T"
    assert " ".join(lines[1].split()) == (
        "bm25 0.5000 -> 0.7500 (+0.2500) over 4: 1 better, 0 worse, 3 unchanged"
    )
    assert lines[2].endswith("0 better, 1 worse, 3 unchanged  (served)")
    assert lines[-1] == "not in the snapshot: learned"
