"""The report's outputs without a cluster: the Markdown table, JSON, TREC runs and chart."""

from __future__ import annotations

import json
from pathlib import Path

from loader.eval.datasets import read_trec_run
from loader.eval.report import render_table, run_file_name, write_outputs
from tests.unit.eval.sample_report import make_report


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


def test_render_table_captions_the_rerank_under_the_title():
    data = make_report().to_dict()
    data["rerank"] = "rerank: off (auto: no cross-encoder on this machine)"
    assert render_table(data).splitlines()[:3] == [
        "tiny (test): 2 queries, 3 documents, 100 candidates",
        "rerank: off (auto: no cross-encoder on this machine)",
        "",
    ]


def test_write_outputs_puts_the_rerank_caption_in_the_markdown_table(tmp_path):
    report = make_report()
    report.rerank = "rerank: off (auto: no cross-encoder on this machine)"
    written = write_outputs(report, tmp_path / "out", chart=False)
    table = Path(written["table"]).read_text(encoding="utf-8")
    assert table.splitlines()[1] == "rerank: off (auto: no cross-encoder on this machine)"
    assert json.loads(Path(written["json"]).read_text(encoding="utf-8"))["rerank"] == (
        "rerank: off (auto: no cross-encoder on this machine)"
    )


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


def test_config_result_summary_line():
    assert make_report().configurations[0].summary() == (
        "structure:bm25: ndcg@10 0.6000, recall@100 1.0000, p50 12.25 ms"
    )


def test_trec_document_ids_change_only_where_a_run_cannot_hold_them():
    from loader.eval.report import _trec_id

    # BEIR ids as the dataset's own qrels spell them: a run must match them in trec_eval.
    for key in ("12345", "MED-10", "café", "d#1", "a\\lava", "蜂/巣:1"):
        assert _trec_id(key) == key
    assert _trec_id("my doc.md#Late deliveries") == "my%20doc.md#Late%20deliveries"
    assert _trec_id("x\tz") == "x%09z"
    assert _trec_id("d%201") == "d%25201"  # the escape escaped: reads back unambiguously


def test_a_set_whose_questions_find_one_source_each_says_its_document_metrics_cannot_tell():
    """Issue #52: `loader eval FILE --docs DIR` scores by source, so a tenant with one document
    scores 1.0 whatever the order; results.md and results.json say so."""
    from loader.eval.configs import EvalConfig
    from loader.eval.runner import run_configuration
    from loader.eval.tasks import EvalQuery, EvalTask
    from loader.settings import Settings
    from tests.unit.query.fakes import FakeClient, chunk

    one_document = [
        chunk("m-0", "refunds", source="manual.md"),
        chunk("m-1", "upi", source="manual.md"),
    ]
    task = EvalTask(
        name="one-doc",
        kind="questions",
        split="",
        documents=list,
        queries=[EvalQuery("q1", "refunds", "manual.md"), EvalQuery("q2", "upi", "manual.md")],
        qrels={"q1": {"manual.md": 1}, "q2": {"manual.md": 1}},
        tenant="A",
    )
    client = FakeClient({"refunds": one_document, "upi": one_document[::-1]})
    settings = Settings(index_name="eval-one-doc", rerank="off")
    result = run_configuration(
        task, EvalConfig("structure", "bm25"), settings, candidates=10, client=client
    )
    assert result.metrics["ndcg@10"] == 1.0 and result.single_source
    report = make_report()
    report.configurations = report.configurations[:1]
    report.note_single_source()  # two sources for q1: the metrics can tell
    assert not report.single_source and report.warnings == []
    report.configurations.append(result)
    report.note_single_source()
    data = report.to_dict()
    assert data["single_source"] is True
    assert data["warnings"][0].startswith("every question's candidates came from one source")
    assert (
        render_table(data)
        .splitlines()[1]
        .startswith("scored by source: every question's candidates came from one source (document)")
    )
    assert "heading_path (section_recall" in render_table(data).splitlines()[1]
