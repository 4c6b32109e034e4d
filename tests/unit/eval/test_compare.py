"""The regression gate: a run compared with a previous results file."""

from __future__ import annotations

import copy
import json

import pytest

from loader.errors import ConfigError, InputError, RegressionError
from loader.eval.compare import (
    check_comparable,
    compare_reports,
    load_results,
    render_comparison,
)
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


def _edited(tmp_path, edit) -> str:
    """A results file written by a run, then edited by hand with ``edit(data)``."""
    data = make_report().to_dict()
    edit(data)
    path = tmp_path / "results.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return str(path)


_RRF = "configuration 2: 'structure:hybrid-rrf+rerank' "


def _set_metric(value):
    def edit(data):
        data["configurations"][1]["metrics"]["ndcg@10"] = value

    return edit


@pytest.mark.parametrize(
    ("edit", "problem"),
    [
        (_set_metric("abc"), "configuration 2: 'structure:hybrid-rrf+rerank' metric 'ndcg@10' "
         'is "abc", not a finite number'),
        (_set_metric(None), _RRF + "metric 'ndcg@10' is null, not a finite number"),
        (_set_metric(True), _RRF + "metric 'ndcg@10' is true, not a finite number"),
        (_set_metric(float("nan")), _RRF + "metric 'ndcg@10' is NaN, not a finite number"),
        (_set_metric(float("inf")), _RRF + "metric 'ndcg@10' is Infinity, not a finite number"),
        (lambda data: data["configurations"][0].pop("name"),
         "configuration 1: has no 'name' (a non-empty string)"),
        (lambda data: data["configurations"][0].update(name=7),
         "configuration 1: has no 'name' (a non-empty string)"),
        (lambda data: data.update(configurations=[1, 2]),
         "configuration 1: expected an object, got 1"),
        (lambda data: data["configurations"][0].update(metrics=[1]),
         "configuration 1: 'structure:bm25' has no 'metrics' object"),
        (lambda data: data["configurations"][0].pop("metrics"),
         "configuration 1: 'structure:bm25' has no 'metrics' object"),
        (lambda data: data["configurations"][1].update(name="structure:bm25"),
         "configuration 2: 'structure:bm25' appears twice"),
    ],
)  # fmt: skip
def test_load_results_refuses_a_hand_edited_file_of_the_wrong_shape(tmp_path, edit, problem):
    path = _edited(tmp_path, edit)
    with pytest.raises(InputError) as raised:
        load_results(path)
    assert str(raised.value) == f"{path}: {problem}"


def test_load_results_keeps_a_well_formed_file(tmp_path):
    path = _edited(tmp_path, _set_metric(1))  # an int is a number too
    assert load_results(path)["configurations"][1]["metrics"]["ndcg@10"] == 1


def test_a_gate_that_compared_nothing_fails_instead_of_passing():
    current = make_report().to_dict()
    renamed = copy.deepcopy(current)
    for configuration in renamed["configurations"]:
        configuration["name"] = "other:" + configuration["name"]
    comparison = compare_reports(current, renamed, previous_name="old.json")
    assert comparison.regressions == [] and not comparison.passed
    assert comparison.to_dict()["passed"] is False
    message = (
        "the gate compared nothing: no configuration of this run is in old.json (it has "
        "other:structure:bm25, other:structure:hybrid-rrf+rerank); gated metrics: ndcg@10, "
        "recall@10, recall@100"
    )
    assert render_comparison(comparison).splitlines()[-1] == f"FAILED: {message}"
    with pytest.raises(InputError) as raised:
        comparison.check()
    assert str(raised.value) == message and raised.value.exit_code == 7

    empty = {**copy.deepcopy(current), "configurations": []}
    with pytest.raises(InputError, match="it has no configurations"):
        compare_reports(current, empty).check()

    no_metrics = copy.deepcopy(current)
    for configuration in no_metrics["configurations"]:
        configuration["metrics"] = {"mrr@10": 0.5}
    comparison = compare_reports(current, no_metrics, previous_name="old.json")
    assert [d.gated for d in comparison.deltas] == [False, False]
    with pytest.raises(
        InputError,
        match=r"no gated metric \(ndcg@10, recall@10, recall@100\) is "
        "in both this run and old.json for structure:bm25, ",
    ):
        comparison.check()


def test_a_nan_metric_is_never_compared():
    current = make_report().to_dict()
    previous = copy.deepcopy(current)
    for configuration in previous["configurations"]:
        configuration["metrics"]["ndcg@10"] = float("nan")
    comparison = compare_reports(current, previous, gate_metrics=["ndcg@10"])
    assert comparison.deltas == [] or all(d.metric != "ndcg@10" for d in comparison.deltas)
    with pytest.raises(InputError, match="the gate compared nothing"):
        comparison.check()


def test_previous_results_that_cannot_be_compared_are_refused_up_front():
    previous = make_report().to_dict()
    check_comparable(previous, ["ndcg@10"], "old.json")  # fine
    with pytest.raises(InputError, match="^old.json has no configurations: the gate would "):
        check_comparable({**previous, "configurations": []}, ["ndcg@10"], "old.json")
    bare = copy.deepcopy(previous)
    for configuration in bare["configurations"]:
        configuration["metrics"] = {}
    with pytest.raises(
        InputError, match=r"^old.json holds none of the gated metrics \(ndcg@10, recall@10\)"
    ):
        check_comparable(bare, ["ndcg@10", "recall@10"], "old.json")


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


def test_a_context_recall_gate_at_any_k_is_left_to_the_run():
    # top_k may be swept (--sweep top_k=3,10): context_recall@10 is then measured, not @5.
    from loader.eval.compare import check_gate_metrics

    check_gate_metrics(["context_recall@10", "ndcg@10"], top_k=5)
    with pytest.raises(ConfigError, match="context_recall@0"):
        check_gate_metrics(["context_recall@0"], top_k=5)
