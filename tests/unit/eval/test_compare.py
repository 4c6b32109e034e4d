"""The regression gate: a run compared with a previous results file."""

from __future__ import annotations

import copy

import pytest

from loader.errors import InputError, RegressionError
from loader.eval.compare import compare_reports, load_results, render_comparison
from tests.unit.eval.sample_report import make_report


def test_identical_reports_pass_the_gate():
    data = make_report().to_dict()
    comparison = compare_reports(data, copy.deepcopy(data))
    assert comparison.regressions == []
    assert all(delta.delta == 0 for delta in comparison.deltas)
    assert {d.metric for d in comparison.deltas if d.gated} == {
        "ndcg@10",
        "recall@10",
        "recall@100",
    }
    assert render_comparison(comparison).endswith(
        "passed: no gated metric (* ndcg@10, recall@10, recall@100) dropped by more than 0.01"
    )


def test_a_drop_beyond_the_threshold_fails_only_for_gated_metrics():
    current = make_report().to_dict()
    previous = copy.deepcopy(current)
    bm25 = previous["configurations"][0]["metrics"]
    bm25["ndcg@10"] += 0.05  # previous was better: a regression
    bm25["recall@1"] += 0.30  # not gated: listed, never failing
    bm25["recall@10"] += 0.01  # exactly the threshold: allowed
    comparison = compare_reports(current, previous)
    assert [(d.configuration, d.metric) for d in comparison.regressions] == [
        ("structure:bm25", "ndcg@10")
    ]
    assert comparison.failure_message() == (
        "1 metric(s) dropped by more than 0.01: structure:bm25 ndcg@10 0.6500 -> 0.6000 (-0.0500)"
    )
    text = render_comparison(comparison)
    assert (
        "| structure:bm25              | ndcg@10 *    |   0.6500 |  0.6000 | -0.0500 | REGRESSION |"
        in text
    )
    assert (
        "| structure:bm25              | recall@1     |   0.8050 |  0.5050 | -0.3000 |            |"
        in text
    )
    assert (
        "| structure:bm25              | recall@10 *  |   0.5600 |  0.5500 | -0.0100 | ok         |"
        in text
    )
    assert text.splitlines()[-1].startswith("FAILED: 1 metric(s) dropped")


def test_gate_metric_and_threshold_are_chosen_by_the_caller():
    current = make_report().to_dict()
    previous = copy.deepcopy(current)
    previous["configurations"][1]["metrics"]["mrr@10"] += 0.04
    assert compare_reports(current, previous).regressions == []
    assert len(compare_reports(current, previous, gate_metrics=["mrr@10"]).regressions) == 1
    assert compare_reports(current, previous, ["mrr@10"], threshold=0.05).regressions == []


def test_a_gate_metric_the_run_does_not_measure_is_an_error_not_a_pass():
    current = make_report().to_dict()
    with pytest.raises(InputError, match=r"^gate metric bogus@7 is not measured by this run; "):
        compare_reports(current, copy.deepcopy(current), gate_metrics=["ndcg@10", "bogus@7"])


def test_improvements_and_unmatched_configurations_never_fail():
    current = make_report().to_dict()
    previous = copy.deepcopy(current)
    previous["configurations"][0]["metrics"]["ndcg@10"] -= 0.2  # we improved
    previous["configurations"][1]["name"] = "fixed:vector"
    previous["queries"] = 300
    comparison = compare_reports(current, previous)
    assert comparison.regressions == []
    assert comparison.only_current == ["structure:hybrid-rrf+rerank"]
    assert comparison.only_previous == ["fixed:vector"]
    assert comparison.notes == ["queries differs: previous 300, current 2"]
    text = render_comparison(comparison)
    assert "new configuration (not compared): structure:hybrid-rrf+rerank" in text
    assert "configuration no longer run: fixed:vector" in text


def test_load_results_errors(tmp_path):
    with pytest.raises(InputError, match="does not exist"):
        load_results(tmp_path / "none.json")
    (tmp_path / "bad.json").write_text("{", encoding="utf-8")
    with pytest.raises(InputError, match="cannot read results file"):
        load_results(tmp_path / "bad.json")
    (tmp_path / "other.json").write_text('{"a": 1}', encoding="utf-8")
    with pytest.raises(InputError, match="not a `loader eval` results file"):
        load_results(tmp_path / "other.json")


def test_check_raises_regression_error_naming_the_drop():
    current = make_report().to_dict()
    previous = copy.deepcopy(current)
    compare_reports(current, previous).check()  # passes: no error
    previous["configurations"][0]["metrics"]["ndcg@10"] += 0.05
    with pytest.raises(RegressionError) as error:
        compare_reports(current, previous).check()
    assert str(error.value) == (
        "1 metric(s) dropped by more than 0.01: structure:bm25 ndcg@10 0.6500 -> 0.6000 (-0.0500)"
    )
    assert error.value.exit_code == 10
