"""`loader eval` without a cluster: hit-to-document mapping, sweeps, configurations, rendering,
and the regression gate."""

from __future__ import annotations

import copy
import json
import math
from pathlib import Path

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.errors import ConfigError, InputError
from loader.eval.datasets import read_trec_run
from loader.eval.report import (
    compare_reports,
    load_results,
    render_comparison,
    render_table,
    run_file_name,
    write_outputs,
)
from loader.eval.runner import (
    ConfigResult,
    EvalConfig,
    EvalQuery,
    EvalReport,
    Sweep,
    document_ranking,
    heading_matches,
    index_alias,
    latency_summary,
    load_task,
    parse_sweep,
    plan_configurations,
    score_run,
    section_ranking,
)
from tests.paths import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "eval"


# --- hits -> documents ---------------------------------------------------------------------


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


# --- sweeps and configurations -------------------------------------------------------------


def test_parse_sweep_types_values_like_the_setting():
    assert parse_sweep("chunk_target_tokens=120, 180,240") == Sweep(
        "chunk_target_tokens", (120, 180, 240)
    )
    assert parse_sweep("bm25_weight=0.2,0.5,0.2") == Sweep("bm25_weight", (0.2, 0.5))
    assert parse_sweep("chunk_target_tokens=120").changes_index
    assert not parse_sweep("rrf_rank_constant=20,60").changes_index
    assert not parse_sweep("candidates=50,100").changes_index


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("chunk_target_tokens", "expected SETTING=VALUE1,VALUE2"),
        ("no_such_setting=1", "unknown setting 'no_such_setting'"),
        ("chunk_strategy=fixed", "chunk_strategy cannot be swept (use --strategy)"),
        ("search_mode=bm25", "search_mode cannot be swept (use --mode)"),
        ("opensearch_url=http://x", "opensearch_url cannot be swept"),
        ("chunk_target_tokens=", "give at least one value"),
        ("chunk_target_tokens=120,big", "'big' is not a valid int"),
        ("bm25_weight=0.3,heavy", "'heavy' is not a valid float"),
    ],
)
def test_parse_sweep_errors_name_the_problem(text, message):
    with pytest.raises(ConfigError, match=message.replace("(", r"\(").replace(")", r"\)")):
        parse_sweep(text)


def test_plan_configurations_order_and_names():
    configs = plan_configurations(["structure", "fixed"], ["bm25", "hybrid-rrf"], [False, True])
    assert [c.name for c in configs] == [
        "structure:bm25",
        "structure:bm25+rerank",
        "structure:hybrid-rrf",
        "structure:hybrid-rrf+rerank",
        "fixed:bm25",
        "fixed:bm25+rerank",
        "fixed:hybrid-rrf",
        "fixed:hybrid-rrf+rerank",
    ]


def test_plan_configurations_with_a_sweep_groups_rows_by_value():
    sweep = Sweep("chunk_target_tokens", (120, 240))
    configs = plan_configurations(["structure"], ["bm25", "vector"], [False], sweep)
    assert [c.name for c in configs] == [
        "structure:bm25:chunk_target_tokens=120",
        "structure:vector:chunk_target_tokens=120",
        "structure:bm25:chunk_target_tokens=240",
        "structure:vector:chunk_target_tokens=240",
    ]
    assert configs[0].sweep == {"chunk_target_tokens": 120}


def test_plan_configurations_rejects_an_unknown_mode():
    with pytest.raises(ConfigError, match="mode 'bm42' is not one of"):
        plan_configurations(["structure"], ["bm42"], [False])


def test_index_alias_per_strategy_and_index_side_sweep_value():
    assert index_alias("eval", "SciFact", "sentence-window") == "eval-scifact-sentence-window"
    chunked = EvalConfig("structure", "bm25", sweep_setting="chunk_target_tokens", sweep_value=120)
    assert index_alias("eval", "scifact", "structure", chunked) == (
        "eval-scifact-structure-chunk_target_tokens-120"
    )
    # query-side sweeps search the strategy's own index
    weighted = EvalConfig(
        "structure", "hybrid-minmax", sweep_setting="bm25_weight", sweep_value=0.5
    )
    assert index_alias("eval", "scifact", "structure", weighted) == "eval-scifact-structure"
    assert index_alias("eval", "my docs:v2", "fixed") == "eval-my-docs-v2-fixed"


# --- loading tasks -------------------------------------------------------------------------


def test_load_task_beir_keeps_the_split_and_limit():
    task = load_task(FIXTURES / "tiny-beir")
    assert (task.name, task.kind, task.split, task.document_count) == (
        "tiny-beir",
        "beir",
        "test",
        5,
    )
    assert [q.id for q in task.queries] == ["q1", "q2", "q3", "q4"]
    assert task.qrels["q4"] == {"coast": 2, "keeper": 1}
    assert [d.source for d in task.documents()] == ["bees", "lava", "bread", "keeper", "coast"]
    limited = load_task(FIXTURES / "tiny-beir", limit=2)
    assert list(limited.qrels) == ["q1", "q2"]
    assert load_task(FIXTURES / "tiny-beir", split="train").qrels == {"q5": {"bees": 1}}


def test_load_task_questions_file_over_a_docs_folder():
    task = load_task(FIXTURES / "questions.jsonl", docs=FIXTURES / "docs")
    assert (task.name, task.kind, task.document_count) == ("docs", "questions", 2)
    assert [(q.id, q.source, q.heading_path) for q in task.queries] == [
        ("late", "refunds.md", ("Late deliveries",)),
        ("upi", "payments.md", ("Payments", "UPI")),
        ("photo", "refunds.md", ()),
    ]
    assert task.qrels == {
        "late": {"refunds.md": 1},
        "upi": {"payments.md": 1},
        "photo": {"refunds.md": 1},
    }
    assert sorted(d.source for d in task.documents()) == ["payments.md", "refunds.md"]


def test_load_task_errors(tmp_path):
    with pytest.raises(ConfigError, match="--docs FOLDER"):
        load_task(FIXTURES / "questions.jsonl")
    with pytest.raises(ConfigError, match="--docs is only for a questions file"):
        load_task(FIXTURES / "tiny-beir", docs=FIXTURES / "docs")
    with pytest.raises(InputError, match="neither a BEIR folder nor a questions file"):
        load_task(tmp_path / "missing")
    with pytest.raises(InputError, match="documents folder .* does not exist"):
        load_task(FIXTURES / "questions.jsonl", docs=tmp_path / "nowhere")


# --- rendering -----------------------------------------------------------------------------


def make_report() -> EvalReport:
    def metrics(scale: float) -> dict[str, float]:
        values = {}
        for k in (1, 5, 10, 50, 100):
            values[f"recall@{k}"] = min(1.0, scale * (0.5 + k / 200))
            values[f"ndcg@{k}"] = scale * 0.6
            values[f"mrr@{k}"] = scale * 0.7
        return values

    report = EvalReport(
        dataset="tiny",
        kind="beir",
        split="test",
        queries=2,
        documents=3,
        candidates=100,
        settings={"chunk_strategy": "structure"},
    )
    report.configurations = [
        ConfigResult(
            EvalConfig("structure", "bm25"),
            "eval-tiny-structure",
            metrics(1.0),
            {"p50": 12.25, "p95": 30.0, "mean": 15.0},
            2,
            run={"q1": [("d1", 3.5), ("d2", 1.25)], "q2": [("my doc.md", 0.5)]},
        ),
        ConfigResult(
            EvalConfig("structure", "hybrid-rrf", rerank=True),
            "eval-tiny-structure",
            metrics(1.2),
            {"p50": 40.0, "p95": 81.04, "mean": 50.0},
            2,
            run={"q1": [("d2", 0.9)], "q2": []},
        ),
    ]
    return report


def test_render_table_is_markdown_with_one_row_per_configuration():
    assert render_table(make_report().to_dict()).splitlines() == [
        "tiny (test): 2 queries, 3 documents, 100 candidates",
        "",
        "| configuration               | recall@1 | recall@5 | recall@10 | recall@50 | recall@100 "
        "| mrr@10 | ndcg@10 | p50 ms | p95 ms |",
        "| --------------------------- | -------: | -------: | --------: | --------: | ---------: "
        "| -----: | ------: | -----: | -----: |",
        "| structure:bm25              |   0.5050 |   0.5250 |    0.5500 |    0.7500 |     1.0000 "
        "| 0.7000 |  0.6000 |   12.2 |   30.0 |",
        "| structure:hybrid-rrf+rerank |   0.6060 |   0.6300 |    0.6600 |    0.9000 |     1.0000 "
        "| 0.8400 |  0.7200 |   40.0 |   81.0 |",
    ]


def test_render_table_adds_section_columns_when_present():
    data = make_report().to_dict()
    data["configurations"][0]["metrics"].update({"section_recall@10": 0.5, "section_mrr@10": 0.25})
    header = render_table(data).splitlines()[2]
    assert header.split("|")[-5:-3] == [" section_recall@10 ", " section_mrr@10 "]
    second_row = render_table(data).splitlines()[5]
    assert [cell.strip() for cell in second_row.split("|")][-5:-3] == ["-", "-"]


def test_write_outputs_json_runs_table_and_chart(tmp_path):
    report = make_report()
    written = write_outputs(report, tmp_path / "out")
    data = json.loads(Path(written["json"]).read_text(encoding="utf-8"))
    assert written["json"] == str(tmp_path / "out" / "results.json")
    assert [c["name"] for c in data["configurations"]] == [
        "structure:bm25",
        "structure:hybrid-rrf+rerank",
    ]
    first = data["configurations"][0]
    assert first["metrics"]["ndcg@10"] == 0.6
    assert first["latency_ms"] == {"p50": 12.25, "p95": 30.0, "mean": 15.0}
    assert first["run_file"] == str(tmp_path / "out" / "runs" / "structure_bm25.trec")
    # a source with a space is percent-encoded: TREC runs are whitespace-separated
    assert read_trec_run(first["run_file"]) == {
        "q1": [("d1", 3.5), ("d2", 1.25)],
        "q2": [("my%20doc.md", 0.5)],
    }
    assert Path(written["table"]).read_text(encoding="utf-8") == render_table(data) + "\n"
    png = Path(written["chart"]).read_bytes()
    assert png.startswith(b"\x89PNG") and len(png) > 5000
    assert run_file_name("structure:hybrid-rrf+rerank:bm25_weight=0.5") == (
        "structure_hybrid-rrf+rerank_bm25_weight=0.5.trec"
    )


def test_write_outputs_to_a_named_json_file(tmp_path):
    written = write_outputs(make_report(), tmp_path / "out", tmp_path / "named.json", chart=False)
    assert Path(written["json"]) == tmp_path / "named.json"
    assert Path(written["table"]) == tmp_path / "out" / "named.md"
    assert "chart" not in written


# --- the regression gate -------------------------------------------------------------------


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


# --- CLI errors that need no cluster -------------------------------------------------------


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


def test_cli_eval_questions_file_needs_docs(tmp_path):
    result = CliRunner().invoke(
        cli, ["eval", str(FIXTURES / "questions.jsonl"), "--out-dir", str(tmp_path)]
    )
    assert result.exit_code == 2
    assert "--docs FOLDER" in result.output
