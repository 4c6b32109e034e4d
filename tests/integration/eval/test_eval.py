"""`loader eval` against the test cluster, on the tiny fixture datasets (tests/fixtures/eval).

The fixtures are built so BM25's numbers are known exactly (see tests/fixtures/eval/README.md):
q1-q3 find their one document at rank 1; q4 ranks its grade-1 document above its grade-2 one.
"""

from __future__ import annotations

import json
import math
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.errors import RegressionError
from loader.eval.datasets import read_trec_run
from loader.models.readers import reader_settings
from loader.modes import SEARCH_MODES
from tests.paths import FIXTURES as ALL_FIXTURES

FIXTURES = ALL_FIXTURES / "eval"
MODES = SEARCH_MODES  # eval runs every mode unless told
Q4_NDCG = (1 + 2 / math.log2(3)) / (2 + 1 / math.log2(3))


def table_rows(output: str) -> dict[str, list[str]]:
    """configuration -> its cells, from the Markdown table printed by `loader eval`."""
    rows = {}
    for line in output.splitlines():
        if line.startswith("| ") and not line.startswith("| configuration"):
            cells = [cell.strip() for cell in line.strip("|").split("|")]
            if not cells[0].startswith("-"):
                rows[cells[0]] = cells[1:]
    return rows


def run_eval(base_settings, prefix: str, out_dir: Path, *args: str):
    return CliRunner().invoke(
        cli,
        [
            "eval",
            *args,
            "--url",
            base_settings.opensearch_url,
            "--index-prefix",
            prefix,
            "--out-dir",
            str(out_dir),
        ],
    )


def test_eval_beir_fixture_table_json_runs_and_gate(base_settings, unique_name, tmp_path):
    first = run_eval(base_settings, unique_name, tmp_path / "first", str(FIXTURES / "tiny-beir"))
    assert first.exit_code == 0, first.output

    # the table: exact BM25 numbers, every mode finds everything within its 100 candidates
    stdout = first.stdout
    # the caption says the rerank was off, and why (rerank = auto, no cross-encoder here)
    caption = (
        "tiny-beir (test): 4 queries, 5 documents, 100 candidates\n"
        "rerank: off (auto: no cross-encoder on this machine)\n\n"
    )
    assert stdout.startswith(caption)
    rows = table_rows(stdout)
    assert list(rows) == [f"structure:{mode}" for mode in MODES]
    # recall@1, @5, @10, @50, @100, mrr@10, ndcg@10 (then latency p50, p95)
    assert rows["structure:bm25"][:7] == [
        "0.8750",
        "1.0000",
        "1.0000",
        "1.0000",
        "1.0000",
        "1.0000",
        f"{(3 + Q4_NDCG) / 4:.4f}",
    ]
    for mode in MODES[1:]:
        assert rows[f"structure:{mode}"][1:5] == ["1.0000"] * 4
    alias = f"{unique_name}-tiny-beir-structure"
    assert f"{alias}: 5 added, 0 updated, 0 unchanged, 0 deleted, 0 failed" in first.stderr

    # the JSON file
    data = json.loads((tmp_path / "first" / "results.json").read_text(encoding="utf-8"))
    assert (data["dataset"], data["split"], data["queries"], data["documents"]) == (
        "tiny-beir",
        "test",
        4,
        5,
    )
    # rerank = auto with no cross-encoder here: the file says its figures are without rerank
    (warning,) = data["warnings"]
    assert warning.startswith("no rerank (rerank = auto): reranker_model ")
    bm25 = data["configurations"][0]
    assert (bm25["name"], bm25["mode"], bm25["rerank"], bm25["index"]) == (
        "structure:bm25",
        "bm25",
        False,
        alias,
    )
    assert bm25["metrics"]["recall@1"] == pytest.approx(0.875)
    assert bm25["metrics"]["mrr@10"] == pytest.approx(1.0)
    assert bm25["metrics"]["ndcg@10"] == pytest.approx((3 + Q4_NDCG) / 4)
    assert bm25["latency_ms"]["p95"] >= bm25["latency_ms"]["p50"] > 0
    assert data["indexes"][0]["push"]["embedded"] == 5

    # a TREC run per configuration; BM25's run holds exactly the documents sharing a term
    bm25_run = read_trec_run(bm25["run_file"])
    assert [doc for doc, _ in bm25_run["q4"]] == ["keeper", "coast"]
    assert [doc for doc, _ in bm25_run["q1"]][:1] == ["bees"]
    assert all(Path(c["run_file"]).is_file() for c in data["configurations"])
    assert (tmp_path / "first" / "results.png").read_bytes().startswith(b"\x89PNG")
    assert (tmp_path / "first" / "results.md").read_text(encoding="utf-8").startswith(caption)

    # an identical re-run embeds and writes nothing, and passes the gate
    previous = tmp_path / "first" / "results.json"
    again = run_eval(
        base_settings,
        unique_name,
        tmp_path / "again",
        str(FIXTURES / "tiny-beir"),
        "--compare",
        str(previous),
    )
    assert again.exit_code == 0, again.output
    assert (
        f"{alias}: 0 added, 0 updated, 5 unchanged, 0 deleted, 0 failed; 5 chunks, 0 embedded"
        in (again.stderr)
    )
    assert (
        "passed: no gated metric (* ndcg@10, recall@10, recall@100) dropped by more than 0.01"
        in (again.stdout)
    )
    assert "REGRESSION" not in again.stdout

    # an injected regression: the previous file claims a better BM25
    data["configurations"][0]["metrics"]["ndcg@10"] += 0.05
    data["configurations"][0]["metrics"]["recall@1"] += 0.10  # not gated by default
    better = tmp_path / "better.json"
    better.write_text(json.dumps(data), encoding="utf-8")
    failed = run_eval(
        base_settings,
        unique_name,
        tmp_path / "failed",
        str(FIXTURES / "tiny-beir"),
        "--mode",
        "bm25",
        "--compare",
        str(better),
        "--quiet",
    )
    assert failed.exit_code == RegressionError.exit_code == 10
    ndcg = (3 + Q4_NDCG) / 4
    assert failed.stderr.strip() == (
        "Error: 1 metric(s) dropped by more than 0.01: structure:bm25 ndcg@10 "
        f"{ndcg + 0.05:.4f} -> {ndcg:.4f} (-0.0500)"
    )
    assert "configuration no longer run: structure:vector" in failed.stdout
    # the results were still written before the gate failed
    assert (tmp_path / "failed" / "results.json").is_file()

    # a gate on recall@1 with a loose threshold passes the same comparison
    loose = run_eval(
        base_settings,
        unique_name,
        tmp_path / "loose",
        str(FIXTURES / "tiny-beir"),
        "--mode",
        "bm25",
        "--compare",
        str(better),
        "--gate-metric",
        "recall@1",
        "--threshold",
        "0.1",
        "--json",
    )
    assert loose.exit_code == 0, loose.output
    payload = json.loads(loose.stdout)
    assert payload["comparison"]["passed"] is True
    assert payload["comparison"]["gate_metrics"] == ["recall@1"]


def test_eval_questions_file_with_sections_and_a_query_side_sweep(
    base_settings, client, unique_name, tmp_path
):
    result = run_eval(
        base_settings,
        unique_name,
        tmp_path,
        str(FIXTURES / "questions.jsonl"),
        "--docs",
        str(FIXTURES / "docs"),
        "--mode",
        "bm25",
        "--mode",
        "hybrid-minmax",
        "--sweep",
        "bm25_weight=0.3,0.9",
        "--json",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["dataset"], data["kind"], data["queries"], data["documents"]) == (
        "docs",
        "questions",
        3,
        2,
    )
    names = [c["name"] for c in data["configurations"]]
    assert names == [
        "structure:bm25:bm25_weight=0.3",
        "structure:hybrid-minmax:bm25_weight=0.3",
        "structure:bm25:bm25_weight=0.9",
        "structure:hybrid-minmax:bm25_weight=0.9",
    ]
    # one index for the whole query-side sweep
    assert [index["index"] for index in data["indexes"]] == [f"{unique_name}-docs-structure"]
    bm25 = data["configurations"][0]["metrics"]
    assert bm25["recall@1"] == 1.0
    assert bm25["section_recall@1"] == 1.0  # the two questions that name a heading
    assert bm25["section_mrr@10"] == 1.0
    for configuration in data["configurations"]:
        assert configuration["metrics"]["recall@5"] == 1.0
    # the swept pipeline is left as the settings render it (bm25_weight 0.3), not at 0.9
    pipeline = client.transport.perform_request(
        "GET", f"/_search/pipeline/{unique_name}-docs-structure-minmax"
    )[f"{unique_name}-docs-structure-minmax"]
    processor = pipeline["phase_results_processors"][0]["normalization-processor"]
    shared = 1 - base_settings.exact_weight  # BM25 and vector share it; the exact sub-query last
    vector = [0.7 * shared]
    if reader_settings(base_settings) is not None:  # the readers share the vector side
        share = base_settings.second_reader_share
        vector = [0.7 * shared * (1 - share), 0.7 * shared * share]
    assert processor["combination"]["parameters"]["weights"] == pytest.approx(
        [0.3 * shared, *vector, base_settings.exact_weight]
    )


def test_a_document_the_push_could_not_index_is_named_even_in_json_mode(
    base_settings, unique_name, tmp_path, caplog
):
    docs = tmp_path / "docs"
    shutil.copytree(FIXTURES / "docs", docs)
    (docs / "broken.md").write_bytes(b"# Broken\n\n\x00\x01 binary")
    result = run_eval(
        base_settings,
        unique_name,
        tmp_path / "out",
        str(FIXTURES / "questions.jsonl"),
        "--docs",
        str(docs),
        "--mode",
        "bm25",
        "--json",
    )
    assert result.exit_code == 0, result.output
    json.loads(result.stdout)  # stdout stays one JSON document
    # A warning (stderr in a real process): the questions on it would score 0 unexplained.
    assert (
        f"{unique_name}-docs-structure: broken.md was not indexed (binary file); questions "
        "judged on it cannot find it"
    ) in caplog.text


def test_an_ignored_file_is_named_only_when_a_question_is_judged_on_it(
    base_settings, unique_name, tmp_path, caplog
):
    """Images beside the documents are no failure and go unmentioned, unless a question names
    one as its source: then its questions score 0, so it is named like an unreadable file."""
    docs = tmp_path / "docs"
    shutil.copytree(FIXTURES / "docs", docs)
    (docs / "img").mkdir()
    (docs / "img" / "logo.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR")
    (docs / "arch.svg").write_text('<svg xmlns="http://www.w3.org/2000/svg"/>\n')
    questions = tmp_path / "questions.jsonl"
    asked = {"id": "arch", "question": "architecture diagram", "source": "arch.svg"}
    text = (FIXTURES / "questions.jsonl").read_text(encoding="utf-8")
    questions.write_text(text + json.dumps(asked) + "\n", encoding="utf-8")
    result = run_eval(
        base_settings,
        unique_name,
        tmp_path / "out",
        str(questions),
        "--docs",
        str(docs),
        "--mode",
        "bm25",
        "--no-rerank",  # else rerank = auto warns that there is no cross-encoder here
        "--json",
    )
    assert result.exit_code == 0, result.output
    (index,) = json.loads(result.stdout)["indexes"]
    assert (index["push"]["failed"], index["push"]["skipped"]) == (0, [])
    assert index["push"]["ignored"] == [
        {"source": "arch.svg", "reason": "unsupported file type .svg"},
        {"source": "img/logo.png", "reason": "unsupported file type .png"},
    ]
    warned = [
        record.getMessage()
        for record in caplog.records
        if record.levelname == "WARNING" and record.name.startswith("loader.eval.")
    ]  # neither img/logo.png nor "arch.svg is no document of" the folder
    assert warned == [
        f"{unique_name}-docs-structure: arch.svg was not indexed (unsupported file type .svg); "
        "questions judged on it cannot find it"
    ]


def test_eval_index_side_sweep_builds_an_index_per_value(base_settings, unique_name, tmp_path):
    result = run_eval(
        base_settings,
        unique_name,
        tmp_path,
        str(FIXTURES / "tiny-beir"),
        "--mode",
        "bm25",
        "--sweep",
        "chunk_target_tokens=64,128",
        "--json",
        "--no-chart",
    )
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert [index["index"] for index in data["indexes"]] == [
        f"{unique_name}-tiny-beir-structure-chunk_target_tokens-64",
        f"{unique_name}-tiny-beir-structure-chunk_target_tokens-128",
    ]
    assert [index["sweep"] for index in data["indexes"]] == [
        {"chunk_target_tokens": 64},
        {"chunk_target_tokens": 128},
    ]
    for configuration in data["configurations"]:
        assert configuration["metrics"]["recall@1"] == pytest.approx(0.875)
    assert "chart" not in data["outputs"]


# Two tenants' documents in one folder, as a shared docs/ holds them: each names its tenant.
TENANT_DOCS = {
    "rates.md": ("partners", "Commission rates", "Partners earn a commission of 12 percent on "
                 "every referred subscription, paid monthly."),
    "onboarding.md": ("partners", "Partner onboarding", "A new partner signs the reseller "
                      "agreement and receives a sandbox account within two days."),
    "payouts.md": ("partners", "Payouts", "Payouts reach the partner's bank account by wire "
                   "transfer on the fifth working day."),
    "plans.md": ("acme", "Plans", "Acme sells the starter, team and enterprise plans."),
    "support.md": ("acme", "Support hours", "Acme support answers tickets around the clock."),
}  # fmt: skip


def two_tenants_docs(folder: Path) -> Path:
    folder.mkdir()
    for name, (tenant, title, text) in TENANT_DOCS.items():
        page = f"---\ntenant: {tenant}\n---\n# {title}\n\n{text}\n"
        (folder / name).write_text(page, encoding="utf-8")
    return folder


def partners_export(path: Path, judged: dict[str, str]) -> Path:
    """The questions file `loader judgments export` writes for tenant partners' set: each
    question graded 2 on the one chunk of ``judged[question]``."""
    from loader.eval.judgments import questions_lines
    from loader.query.judgments import Grade, JudgingState, QuerySet

    questions = list(judged)
    query_set = QuerySet("set-1", "week-49", "partners", "frequent", questions)
    state = JudgingState(
        grades={
            number: {f"c{number}": Grade(number, f"c{number}", 2, judged[question], [])}
            for number, question in enumerate(questions)
        }
    )
    lines = questions_lines(query_set, state)
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return path


def test_a_tenants_judged_export_is_scored_against_that_tenants_documents(
    base_settings, unique_name, tmp_path
):
    """Eval filed the documents under tenant `eval` and the push skipped every file naming
    `partners`: nDCG 0.0000 and exit 0. The export names its tenant; eval pushes and searches
    that tenant's documents and leaves acme's out."""
    docs = two_tenants_docs(tmp_path / "docs")
    questions = partners_export(
        tmp_path / "partners.jsonl",
        {
            "what commission rate do partners earn on a referred subscription": "rates.md",
            "how long until a new partner gets a sandbox account": "onboarding.md",
            "when do payouts reach the bank account by wire transfer": "payouts.md",
        },
    )
    result = run_eval(
        base_settings, unique_name, tmp_path / "out", str(questions), "--docs", str(docs),
        "--mode", "bm25", "--no-rerank", "--no-chart", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["configurations"][0]["metrics"]["ndcg@10"] > 0.5  # each finds its document
    assert (data["tenant"], data["documents"], data["queries"]) == ("partners", 3, 3)
    (index,) = data["indexes"]
    assert (index["push"]["added"], index["push"]["failed"]) == (3, 0)  # acme's left out


def test_a_tenant_of_one_document_is_said_to_score_by_source(base_settings, unique_name, tmp_path):
    """Issue #52: `loader eval FILE --docs DIR` scores by source, so a tenant with one document
    scored 1.0 whatever the order, and nothing said so."""
    docs = tmp_path / "docs"
    docs.mkdir()
    text = "\n\n".join(
        f"## {title}\n\n{body}"
        for title, body in (
            ("Rates", "Partners earn a commission rate of 20 percent on a referred subscription."),
            ("Payouts", "Payouts reach the bank account by wire transfer on the fifth."),
            ("Sandbox", "A new partner gets a sandbox account within two days."),
        )
    )
    (docs / "handbook.md").write_text(f"---\ntenant: partners\n---\n# Handbook\n\n{text}\n")
    questions = partners_export(
        tmp_path / "partners.jsonl",
        {
            "what commission rate do partners earn": "handbook.md",
            "when do payouts reach the bank account": "handbook.md",
        },
    )
    result = run_eval(
        base_settings, unique_name, tmp_path / "out", str(questions), "--docs", str(docs),
        "--mode", "bm25", "--no-rerank", "--no-chart",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    assert result.stdout.splitlines()[2].startswith(
        "scored by source: every question's candidates came from one source (document)"
    )
    data = json.loads((tmp_path / "out" / "results.json").read_text(encoding="utf-8"))
    assert data["single_source"] is True and data["configurations"][0]["metrics"]["ndcg@10"] == 1
    assert any(w.startswith("every question's candidates came from one") for w in data["warnings"])


def test_a_set_whose_judged_documents_are_absent_exits_2_with_the_count(
    base_settings, client, unique_name, tmp_path
):
    docs = two_tenants_docs(tmp_path / "docs")
    questions = partners_export(
        tmp_path / "partners.jsonl",
        {
            "what commission rate do partners earn": "rates.md",
            "which discounts do partners get on hardware": "hardware.md",
            "how are partner disputes settled": "disputes.md",
        },
    )
    result = run_eval(
        base_settings, unique_name, tmp_path / "out", str(questions), "--docs", str(docs),
        "--mode", "bm25", "--no-rerank", "--no-chart",
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert (
        f"Error: 2 of 3 judged documents are not in the indexed corpus (tenant 'partners', "
        f"{docs}): 'disputes.md', 'hardware.md'; is {docs} the folder the questions were judged "
        "on, and 'partners' their tenant (--tenant)?"
    ) in result.output
    assert not client.indices.exists_alias(name=f"{unique_name}-docs-structure")  # nothing pushed


def test_eval_json_shows_progress_when_stderr_is_a_terminal(base_settings, unique_name, tmp_path):
    """`loader eval --json` printed nothing for 18 minutes: stdout is the JSON document, but a
    terminal on stderr still gets the progress."""
    import os
    import pty
    import subprocess
    import sys
    import threading

    from tests.paths import REPO

    command = [
        sys.executable, "-m", "loader", "eval", str(FIXTURES / "tiny-beir"), "--mode", "bm25",
        "--no-rerank", "--no-chart", "--json", "--url", base_settings.opensearch_url,
        "--index-prefix", unique_name, "--out-dir", str(tmp_path / "out"),
    ]  # fmt: skip
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")]),
    }
    env["HF_HUB_OFFLINE"] = "1"
    terminal, stderr = pty.openpty()
    shown = bytearray()

    def read_terminal() -> None:
        while True:
            try:
                chunk = os.read(terminal, 4096)
            except OSError:  # EIO: the process closed its end
                return
            if not chunk:
                return
            shown.extend(chunk)

    reader = threading.Thread(target=read_terminal, daemon=True)
    reader.start()
    try:
        done = subprocess.run(
            command, cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=stderr, timeout=600
        )
    finally:
        os.close(stderr)
        reader.join(timeout=10)
        os.close(terminal)
    assert done.returncode == 0, shown.decode(errors="replace")
    data = json.loads(done.stdout)  # stdout: the document alone
    assert data["configurations"][0]["name"] == "structure:bm25"
    progress = shown.decode(errors="replace")
    assert f"{unique_name}-tiny-beir-structure: 5 added" in progress
    assert "structure:bm25: ndcg@10 " in progress


def test_eval_seconds_include_reading_the_documents(
    base_settings, unique_name, tmp_path, monkeypatch
):
    """A PDF folder was read for 260 s before eval's clock started, missing from its seconds."""
    import time

    from loader.ingest import readers

    real_read = readers._read

    def slow_read(path, *args, **kwargs):
        time.sleep(1.0)
        return real_read(path, *args, **kwargs)

    monkeypatch.setattr(readers, "_read", slow_read)
    result = run_eval(
        base_settings, unique_name, tmp_path, str(FIXTURES / "questions.jsonl"),
        "--docs", str(FIXTURES / "docs"), "--mode", "bm25", "--no-rerank", "--no-chart", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert data["seconds"] >= data["read_seconds"] >= 2.0  # two documents, a second each
