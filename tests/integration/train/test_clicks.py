"""Judgments from clicks on the session's cluster: searches logged by the library (query_log =
"ubi") for two tenants, click events posted against them, `loader judgments clicks` writing one
tenant's judgments, and `loader eval` reading the file."""

from __future__ import annotations

import json
import math
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.index.apply import apply_config
from loader.ingest.sync import push
from loader.query.query_log import Event, events_index, record_event
from loader.query.request import SearchRequest
from loader.query.search import search

FIXTURE_DOCS = Path(__file__).parents[2] / "fixtures" / "eval" / "docs"
# Each tenant's questions (asked in two spellings, one after normalisation) and the document whose
# chunk its readers click.
ASKED = {
    "A": {
        "compensation for late deliveries": "refunds.md",
        "UPI bank account 48 hours": "payments.md",
    },
    "B": {"card payments accepted": "payments.md", "missing item photo": "refunds.md"},
}
SEARCHES_PER_QUESTION = 4


def _search_and_click(client, settings, tenant: str, question: str, answer: str) -> str:
    """One logged search of ``tenant``; its reader clicks the first chunk of ``answer`` shown.
    The search's query id."""
    request = SearchRequest.from_settings(settings, question, tenant=tenant, mode="bm25", k=3)
    result = search(request, settings, client=client)
    assert result.query_id
    rank, hit = next((n, h) for n, h in enumerate(result.hits, 1) if h.source == answer)
    record_event(
        client,
        settings.index_name,
        tenant,
        Event(result.query_id, "click", object_id=hit.chunk_id, position=rank),
        query_log=settings.query_log,
    )
    return result.query_id


def _cli(settings, *args: str):
    return CliRunner().invoke(
        cli, [*args, "--url", settings.opensearch_url, "--index", settings.index_name]
    )


def _chunk_ids(client, settings, tenant: str) -> set[str]:
    client.indices.refresh(index=settings.index_name)
    answer = client.search(
        index=settings.index_name,
        body={"query": {"term": {"tenant": tenant}}, "size": 1000, "_source": ["chunk_id"]},
    )
    return {hit["_source"]["chunk_id"] for hit in answer["hits"]["hits"]}


@pytest.fixture
def logged(client, base_settings, embedder, unique_name):
    """Two tenants' documents, searches and clicks in one index and one query log."""
    settings = base_settings.replace(index_name=unique_name, query_log="ubi", rerank="off")
    apply_config(settings, dimension=embedder.dimension, client=client)
    query_ids: dict[str, list[str]] = {"A": [], "B": []}
    for tenant, asked in ASKED.items():
        report = push(FIXTURE_DOCS, settings, tenant=tenant, client=client, embedder=embedder)
        assert report.failed == 0, report
        for question, answer in asked.items():
            for number in range(SEARCHES_PER_QUESTION):
                spelled = f"  {question.upper()}?" if number == 0 else question
                query_ids[tenant].append(
                    _search_and_click(client, settings, tenant, spelled, answer)
                )
    return settings, query_ids


def test_click_judgments_hold_one_tenants_log_and_eval_reads_them(
    logged, client, tmp_path, unique_name
):
    settings, query_ids = logged
    # An event that says tenant A but names B's search (written past record_event, which
    # refuses it): A's export must not learn from it.
    b_chunk = sorted(_chunk_ids(client, settings, "B"))[0]
    client.index(
        index=events_index(unique_name),
        id=str(uuid.uuid4()),
        body={
            "action_name": "click",
            "query_id": query_ids["B"][0],
            "timestamp": "2026-12-04T12:00:00.000Z",
            "event_attributes": {"tenant": "A", "object": {"object_id": b_chunk}},
        },
        params={"refresh": "true"},
    )

    output = tmp_path / "clicks.jsonl"
    result = _cli(
        settings,
        *("judgments", "clicks", "--tenant", "A", "-o", str(output)),
        *("--min-impressions", "3", "--json"),
    )
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["searches"], summary["clicks"], summary["questions"]) == (8, 8, 2)
    assert summary["model"] == "pbm" and summary["examination"][0] == 1.0
    assert summary["identified"][0] is True

    lines = [json.loads(line) for line in output.read_text(encoding="utf-8").splitlines()]
    assert sorted(line["question"] for line in lines) == sorted(ASKED["A"])
    a_chunks = _chunk_ids(client, settings, "A")
    for line in lines:
        assert line["implicit"] is True and line["model"] == "pbm"
        assert line["source"] == ASKED["A"][line["question"]]
        best = line["judgments"][0]
        assert (best["grade"], best["impressions"], best["clicks"]) == (2, 4, 4)
        assert best["estimate"] > 0.5
        assert {j["chunk_id"] for j in line["judgments"]} <= a_chunks
        assert all(j["grade"] == 0 and j["clicks"] == 0 for j in line["judgments"][1:])

    # B's own export: B's questions and chunks only.
    b_output = tmp_path / "clicks-b.jsonl"
    result = _cli(
        settings,
        "judgments",
        "clicks",
        "--tenant",
        "B",
        "-o",
        str(b_output),
        "--min-impressions",
        "3",
    )
    assert result.exit_code == 0, result.output
    printed = result.stdout.splitlines()
    assert printed[0].startswith(f"{b_output}: 2 questions, ")
    assert printed[0].endswith(
        " judgments (implicit, pbm) from 8 searches and 8 clicks of tenant 'B'"
    )
    # One mode, one ranking per question: nothing ties rank 2 to rank 1.
    assert printed[1].startswith("examination by rank: 1.00 0.50* ")
    assert printed[2] == "  * not told apart from relevance by this log: kept at the guess, 1/rank"
    b_lines = [json.loads(line) for line in b_output.read_text(encoding="utf-8").splitlines()]
    assert sorted(line["question"] for line in b_lines) == sorted(ASKED["B"])
    assert {j["chunk_id"] for line in b_lines for j in line["judgments"]} <= _chunk_ids(
        client, settings, "B"
    )

    # loader eval reads the file: its grades are the qrels of nDCG.
    out_dir = tmp_path / "eval"
    result = CliRunner().invoke(
        cli,
        [
            *("eval", str(output), "--docs", str(FIXTURE_DOCS), "--mode", "bm25", "--no-rerank"),
            *("--json", "--url", settings.opensearch_url),
            *("--index-prefix", f"{unique_name}-eval", "--out-dir", str(out_dir)),
        ],
    )
    assert result.exit_code == 0, result.output
    metrics = json.loads(result.stdout)["configurations"][0]["metrics"]
    runs = {}
    for row in (out_dir / "runs" / "structure_bm25.trec").read_text().splitlines():
        qid, _, doc, _rank, _score, _tag = row.split()
        runs.setdefault(qid, []).append(doc)
    expected = sum(_ndcg(runs[line["id"]], {line["source"]: 2}) for line in lines) / len(lines)
    assert metrics["ndcg@10"] == pytest.approx(expected, abs=1e-4)


def _ndcg(ranked: list[str], qrels: dict[str, int], k: int = 10) -> float:
    gains = [qrels.get(doc, 0) for doc in ranked[:k]]
    ideal = sorted(qrels.values(), reverse=True)[:k]

    def dcg(values):
        return sum(value / math.log2(position + 2) for position, value in enumerate(values))

    return dcg(gains) / dcg(ideal)


def test_a_log_without_clicks_is_refused_by_name(
    client, base_settings, embedder, unique_name, tmp_path
):
    settings = base_settings.replace(index_name=unique_name, query_log="ubi", rerank="off")
    apply_config(settings, dimension=embedder.dimension, client=client)
    push(FIXTURE_DOCS, settings, tenant="A", client=client, embedder=embedder)
    search(
        SearchRequest.from_settings(settings, "refund", tenant="A", mode="bm25"),
        settings,
        client=client,
    )
    output = tmp_path / "clicks.jsonl"
    result = _cli(settings, "judgments", "clicks", "--tenant", "A", "-o", str(output))
    assert result.exit_code == 15  # not enough evidence: not a document's code (7)
    assert result.stderr == (
        "Error: tenant 'A' has 1 logged searches and no click on them: nothing to learn from "
        '(query_log = "ubi"; clients post click events to /events)\n'
    )
    assert not output.exists()
