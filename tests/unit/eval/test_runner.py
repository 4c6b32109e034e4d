"""`loader eval` without a cluster: the request, the run's JSON and gate, and the errors that
must come before any search."""

from __future__ import annotations

import copy
import io

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.cli.eval import Progress, show_progress
from loader.errors import RegressionError
from loader.eval.compare import compare_reports
from loader.eval.metrics import metric_names
from loader.eval.runner import EvalRequest, EvalRun
from tests.paths import FIXTURES as ALL_FIXTURES
from tests.unit.eval.sample_report import make_report

FIXTURES = ALL_FIXTURES / "eval"


def test_cli_eval_bad_sweep_is_a_config_error(tmp_path):
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            str(FIXTURES / "tiny-beir"),
            "--sweep",
            "chunk_strategy=fixed",
            "--url",
            "http://127.0.0.1:9",
            "--out-dir",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 2
    assert "Error: --sweep: chunk_strategy cannot be swept (use --strategy)" in result.output


def test_cli_eval_a_sweep_value_out_of_bounds_fails_before_searching(tmp_path):
    result = CliRunner().invoke(
        cli,
        ["eval", str(FIXTURES / "tiny-beir"), "--sweep", "rrf_rank_constant=20,0",
         "--url", "http://127.0.0.1:9", "--out-dir", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 2, result.output  # not 3: no connection was tried
    assert (
        "Error: --sweep rrf_rank_constant=0: setting 'rrf_rank_constant' must be at least 1, got 0"
        in result.output
    )


def test_cli_eval_missing_previous_results_fails_before_searching(tmp_path):
    result = CliRunner().invoke(
        cli,
        [
            "eval",
            str(FIXTURES / "tiny-beir"),
            "--compare",
            str(tmp_path / "old.json"),
            "--url",
            "http://127.0.0.1:9",
            "--out-dir",
            str(tmp_path),
        ],
    )
    assert result.exit_code == 7
    assert f"Error: results file {tmp_path / 'old.json'} does not exist" in result.output


@pytest.mark.parametrize("option", ["--out-dir", "--output"])
def test_cli_eval_an_output_folder_that_cannot_be_made_fails_before_searching(tmp_path, option):
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder", encoding="utf-8")
    target = blocker / "x" if option == "--out-dir" else blocker / "x" / "results.json"
    result = CliRunner().invoke(
        cli,
        ["eval", str(FIXTURES / "tiny-beir"), "--url", "http://127.0.0.1:9", "--out-dir",
         str(tmp_path / "out"), option, str(target)],
    )  # fmt: skip
    assert result.exit_code == 2, result.output  # not 3: no connection was tried
    assert f"Error: {option} {blocker / 'x'}: cannot create the folder (" in result.output


@pytest.mark.parametrize(
    ("configurations", "message"),
    [
        ("[1, 2]", "configuration 1: expected an object, got 1"),
        ("[]", "has no configurations: the gate would compare nothing"),
        ('[{"name": "structure:bm25", "metrics": {}}]', "holds none of the gated metrics"),
    ],
)
def test_cli_eval_previous_results_of_the_wrong_shape_fail_before_searching(
    tmp_path, configurations, message
):
    old = tmp_path / "old.json"
    old.write_text(f'{{"configurations": {configurations}}}', encoding="utf-8")
    result = CliRunner().invoke(
        cli,
        ["eval", str(FIXTURES / "tiny-beir"), "--compare", str(old), "--url",
         "http://127.0.0.1:9", "--out-dir", str(tmp_path / "out")],
    )  # fmt: skip
    assert result.exit_code == 7, result.output  # not 3: no connection was tried
    assert f"Error: {old}" in result.output and message in result.output


@pytest.mark.parametrize(
    ("metric", "message"),
    [
        ("ndcg@11", "--gate-metric 'ndcg@11' is not a metric `loader eval` reports; it reports "
         "recall@k, ndcg@k and mrr@k for k in 1, 5, 10, 50, 100"),
        ("NDCG@10", "--gate-metric 'NDCG@10' is not a metric `loader eval` reports (did you mean "
         "ndcg@10?)"),
        ("bogus", "--gate-metric 'bogus' is not a metric"),
    ],
)  # fmt: skip
def test_cli_eval_an_unknown_gate_metric_fails_before_anything(tmp_path, metric, message):
    old = tmp_path / "old.json"
    old.write_text('{"configurations": []}', encoding="utf-8")  # would be refused later
    result = CliRunner().invoke(
        cli,
        ["eval", str(FIXTURES / "tiny-beir"), "--compare", str(old), "--gate-metric", "ndcg@10",
         "--gate-metric", metric, "--url", "http://127.0.0.1:9", "--out-dir", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert f"Error: --gate-metric {metric!r} is not a metric" in result.output
    assert message in result.output


def test_cli_eval_a_gate_metric_without_compare_is_refused(tmp_path):
    result = CliRunner().invoke(
        cli,
        ["eval", str(FIXTURES / "tiny-beir"), "--gate-metric", "ndcg@10", "--url",
         "http://127.0.0.1:9", "--out-dir", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 2, result.output  # not 3: no connection was tried
    assert "Error: --gate-metric is what the --compare gate checks (or --tune's objective)" in (
        result.output
    )


def test_cli_eval_tune_checks_its_metric_before_connecting(tmp_path):
    result = CliRunner().invoke(
        cli,
        ["eval", str(FIXTURES / "tiny-beir"), "--tune", "--gate-metric", "bogus", "--url",
         "http://127.0.0.1:9", "--out-dir", str(tmp_path)],
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "Error: --gate-metric 'bogus' is not a metric" in result.output


def test_metric_names_cover_what_a_run_reports():
    names = metric_names(top_k=5)
    report = make_report().to_dict()
    assert all(m in names for c in report["configurations"] for m in c["metrics"])
    assert {"section_recall@10", "section_mrr@10", "context_recall@5", "mrr@10"} <= set(names)
    assert "context_recall@3" not in names and "ndcg@11" not in names


def test_cli_eval_questions_file_needs_docs(tmp_path):
    result = CliRunner().invoke(
        cli, ["eval", str(FIXTURES / "questions.jsonl"), "--out-dir", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert "--docs FOLDER" in result.output


def test_eval_request_defaults_leave_the_choices_to_the_library():
    request = EvalRequest("datasets/scifact")
    assert (request.modes, request.strategies, request.gate_metrics) == ((), (), ())
    assert (request.rerank, request.candidates, request.threshold) == (
        None,
        100,
        0.01,
    )  # rerank: the setting
    assert (request.out_dir, request.index_prefix, request.chart) == ("eval-results", "eval", True)


def test_eval_run_json_and_gate():
    report = make_report()
    data = report.to_dict()
    alone = EvalRun(report, {"json": "out/results.json"})
    assert alone.to_dict() == {**data, "outputs": {"json": "out/results.json"}}
    alone.check()  # no comparison: no gate
    previous = copy.deepcopy(data)
    previous["configurations"][0]["metrics"]["ndcg@10"] += 0.05
    compared = EvalRun(report, {}, compare_reports(data, previous))
    assert compared.to_dict()["comparison"]["passed"] is False
    with pytest.raises(RegressionError, match="structure:bm25 ndcg@10 0.6500 -> 0.6000"):
        compared.check()


@pytest.mark.parametrize("command", ["eval", "fine-tune"])
@pytest.mark.parametrize("prefix", ["", "Eval", "ev*l", "_eval", "ev al"])
def test_cli_an_index_prefix_no_index_can_start_with_is_refused_up_front(tmp_path, command, prefix):
    args = [command, str(FIXTURES / "tiny-beir"), "--index-prefix", prefix]
    args += ["--out", str(tmp_path / "model")] if command == "fine-tune" else []
    result = CliRunner().invoke(cli, [*args, "--url", "http://127.0.0.1:9"])
    assert result.exit_code == 2, result.output
    assert "Invalid value for '--index-prefix'" in result.output
    assert "is not a valid index name" in result.output


class _Terminal(io.StringIO):
    def isatty(self) -> bool:
        return True


def test_progress_goes_to_a_terminal_stderr_with_json_too():
    """--json keeps stdout for the document; an 18-minute eval must not be silent on a terminal."""
    assert show_progress(False, True, _Terminal()) == Progress(bars=True, lines=True)
    assert show_progress(False, False, _Terminal()) == Progress(bars=True, lines=True)
    # a script capturing stderr: no bars; the step lines unless --json
    assert show_progress(False, True, io.StringIO()) == Progress(bars=False, lines=False)
    assert show_progress(False, False, io.StringIO()) == Progress(bars=False, lines=True)
    assert show_progress(True, False, _Terminal()) == Progress(bars=False, lines=False)  # --quiet
