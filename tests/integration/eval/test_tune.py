"""`loader eval --tune` and context recall against the test cluster, on the tiny fixtures.

The tiny BEIR fixture's train split judges one query no document answers, so the tuning below
runs on its test split (--train-split test): there, retrieving one candidate is known to be worse
than ten (q4 has two relevant documents), so the tuning must move `candidates` 1 -> 10, reuse one
index for both (a query-time setting), and --write must change only that line of loader.toml.
"""

from __future__ import annotations

import json

from click.testing import CliRunner

from loader.cli import cli
from loader.eval.runner import EvalRequest, run_eval
from tests.paths import FIXTURES

LOADER_TOML = """# the project's settings
tenant = "acme"  # who we are
candidates = 1  # shallow, on purpose
rerank = false
"""


def test_tune_picks_the_better_setting_and_writes_only_its_line(
    base_settings, unique_name, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "loader.toml").write_text(LOADER_TOML, encoding="utf-8")
    args = [
        "eval",
        str(FIXTURES / "eval" / "tiny-beir"),
        "--tune",
        "--train-split",
        "test",
        "--space",
        "candidates=1,10",
        "--budget",
        "2",
        "--index-prefix",
        unique_name,
        "--url",
        base_settings.opensearch_url,
        "--quiet",
    ]
    dry = CliRunner().invoke(cli, [*args, "--json"])
    assert dry.exit_code == 0, dry.output
    result = json.loads(dry.output)
    assert result["start"] == {"candidates": 1} and result["winner"] == {"candidates": 10}
    assert [trial["kept"] for trial in result["trials"]] == [True, True]
    assert result["test"]["winner"]["ndcg@10"] > result["test"]["start"]["ndcg@10"]
    assert len(result["indexes"]) == 1  # one index for both: candidates is query-time
    assert result["written"] is False
    assert (tmp_path / "loader.toml").read_text(encoding="utf-8") == LOADER_TOML
    written = CliRunner().invoke(cli, [*args, "--write"])
    assert written.exit_code == 0, written.output
    assert "-candidates = 1  # shallow, on purpose" in written.output
    assert "+candidates = 10  # shallow, on purpose" in written.output
    assert (tmp_path / "loader.toml").read_text(encoding="utf-8") == LOADER_TOML.replace(
        "candidates = 1 ", "candidates = 10 "
    )


def test_context_recall_column_for_questions_with_answers(base_settings, unique_name, tmp_path):
    questions = tmp_path / "questions.jsonl"
    lines = [
        {
            "question": "compensation for late deliveries",
            "source": "refunds.md",
            "heading_path": ["Late deliveries"],
            "answer": "A full refund of the order value, paid to the original payment method.",
        },
        {
            "question": "UPI bank account 48 hours",
            "source": "payments.md",
            "answer": "UPI payments come back to your bank account within 48 hours.",
        },
    ]
    questions.write_text("\n".join(json.dumps(line) for line in lines), encoding="utf-8")
    request = EvalRequest(
        questions,
        docs=FIXTURES / "eval" / "docs",
        modes=("bm25",),
        index_prefix=unique_name,
        out_dir=tmp_path / "out",
        chart=False,
    )
    run = run_eval(request, base_settings.replace(rerank=False, top_k=1))
    (configuration,) = run.report.configurations
    recall = configuration.metrics["context_recall@1"]
    # Each question's top chunk is the section that answers it: most answer words are there
    # ("come back" is not: the document says "returned").
    assert 0.7 < recall < 1.0
    assert "context_recall@1" in (tmp_path / "out" / "results.md").read_text(encoding="utf-8")
    assert configuration.metrics["section_recall@1"] == 1.0
