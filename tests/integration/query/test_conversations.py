"""Follow-up questions over the sample docs/, with a real chat-model server on 127.0.0.1.

The server is ``tests/fake_llm.py`` run as its own process: it speaks OpenAI's
``/v1/chat/completions`` and answers from ``tests/fixtures/eval/conversations.jsonl`` (the
standalone questions, decompositions, paraphrases and HyDE passages written there), checks the
bearer key, and writes an access log. docs/ is pushed once into an index of this module's own;
the search runs without a rerank unless a test says so (no trained cross-encoder exists offline).
"""

from __future__ import annotations

import json
import logging
import subprocess
import sys
import uuid
from pathlib import Path

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.index.apply import apply_config
from loader.ingest.sync import push
from loader.query.request import SearchRequest
from loader.query.search import search
from tests.conftest import cleanup_owned
from tests.paths import FIXTURES, REPO, SAMPLE_DOCS

API_KEY = "sk-conv-TEST-9f8e7d6c5b4a"
CONVERSATIONS = FIXTURES / "eval" / "conversations.jsonl"
RECORDS = {
    record["id"]: record
    for record in map(json.loads, CONVERSATIONS.read_text(encoding="utf-8").splitlines())
}


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # A proxy from the environment must not capture the loopback chat server's traffic.
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture(scope="module")
def chat_server(tmp_path_factory: pytest.TempPathFactory):
    """The fake chat model as a process: (base URL, access log path)."""
    folder = tmp_path_factory.mktemp("fake-llm")
    key_file, access_log = folder / "key", folder / "access.log"
    key_file.write_text(API_KEY + "\n", encoding="utf-8")
    command = [sys.executable, "-m", "tests.fake_llm", "--conversations", str(CONVERSATIONS)]
    command += ["--api-key-file", str(key_file), "--access-log", str(access_log)]
    command += ["--slow-seconds", "3", "--max-seconds", "600"]
    process = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, text=True)
    try:
        line = process.stdout.readline()
        assert line.startswith("listening on "), line
        yield line.removeprefix("listening on ").strip(), access_log
    finally:
        process.terminate()
        process.wait(timeout=10)


@pytest.fixture(scope="module")
def docs_settings(base_settings, client, embedder, chat_server):
    """docs/ pushed into this module's index; settings with the rewriter pointing at the fake."""
    alias = f"t-conv-{uuid.uuid4().hex[:8]}"
    settings = base_settings.replace(
        index_name=alias,
        rerank=False,
        rewrite_url=chat_server[0],
        rewrite_model="fake",
        rewrite_api_key=API_KEY,
        rewrite_timeout=1.0,
    )
    apply_config(settings, dimension=embedder.dimension, client=client)
    report = push(SAMPLE_DOCS, settings, collection="docs", client=client, embedder=embedder)
    assert report.failed == 0, report
    yield settings
    cleanup_owned(client, alias)


def ask(settings, client, embedder, record_id, *, reranker=None, **changes):
    """Search a conversation's follow-up with ``changes`` to the settings."""
    record = RECORDS[record_id]
    settings = settings.replace(**changes)
    request = SearchRequest.from_settings(
        settings,
        record["question"],
        tenant="default",
        k=5,
        history=record["history"],
        rerank=reranker is not None,
    )
    return search(request, settings, client=client, embedder=embedder, reranker=reranker)


def sections(result) -> list[tuple[str, str]]:
    return [(hit.source, " > ".join(hit.heading_path)) for hit in result.hits]


def test_standalone_rewrite_finds_what_the_follow_up_means(docs_settings, client, embedder):
    off = ask(docs_settings, client, embedder, "late-card-upi", rewrite="off")
    llm = ask(docs_settings, client, embedder, "late-card-upi", rewrite="llm")
    concat = ask(docs_settings, client, embedder, "late-card-upi", rewrite="concat")
    expected = ("refund-policy.md", "Refund timelines")
    assert off.queries == ["and for UPI?"] and expected not in sections(off)
    assert llm.queries == ["How long do UPI refunds take?"] and sections(llm)[0] == expected
    assert concat.queries == ["How long do card refunds take? and for UPI?"]
    assert sections(concat)[0] == expected
    assert llm.warnings == off.warnings == [] and llm.timings["rewrite_ms"] > 0


def test_decomposition_searches_each_part_and_reranks_against_the_whole(
    docs_settings, client, embedder, cross_encoder_path
):
    from loader.models.rerank import load_reranker

    record = RECORDS["decompose-cancel-card"]
    reranker = load_reranker(docs_settings.replace(reranker_model=cross_encoder_path))
    off = ask(docs_settings, client, embedder, "decompose-cancel-card", rewrite="off")
    parts = ask(
        docs_settings, client, embedder, "decompose-cancel-card", rewrite="llm",
        rewrite_mode="decompose",
    )  # fmt: skip
    assert parts.queries == record["decompose"]
    # Each part's best section is among the five (with two readers "Refund timelines", first for
    # its part, is fourth: fusing the parts ranks higher what two of them find).
    top = sections(parts)
    assert ("refund-policy.md", "Cancellations") in top
    assert ("refund-policy.md", "Refund timelines") in top
    assert ("refund-policy.md", "Cancellations") not in sections(off)
    reranked = ask(
        docs_settings, client, embedder, "decompose-cancel-card", reranker=reranker,
        rewrite="llm", rewrite_mode="decompose",
    )  # fmt: skip
    assert reranked.queries == record["decompose"] and reranked.reranked
    assert reranked.rerank_query == record["standalone"]  # not one part: the whole question


def test_multi_query_fuses_the_paraphrases(docs_settings, client, embedder):
    record = RECORDS["courier-phone"]
    off = ask(docs_settings, client, embedder, "courier-phone", rewrite="off")
    one = ask(docs_settings, client, embedder, "courier-phone", rewrite="llm")
    many = ask(
        docs_settings, client, embedder, "courier-phone", rewrite="llm", rewrite_mode="multi-query"
    )
    assert many.queries == [record["standalone"], *record["paraphrases"]]
    expected = ("account-and-privacy.md", "What we collect")
    assert sections(off)[0] != expected and sections(many)[0] == expected
    assert sections(many) != sections(one)  # the paraphrases changed the fused ranking
    assert {"query_1", "query_2", "query_3"} <= set(many.hits[0].ranks)


def test_hyde_embeds_the_passage_and_bm25_keeps_the_question(docs_settings, client, embedder):
    record = RECORDS["wallet-cash"]

    def run(mode, **changes):
        return ask(docs_settings, client, embedder, "wallet-cash", search_mode=mode, **changes)

    hyde = {"rewrite": "llm", "rewrite_mode": "hyde"}
    vector_hyde, vector_question = run("vector", **hyde), run("vector", rewrite="llm")
    assert vector_hyde.queries == [record["standalone"]]
    assert vector_hyde.hypothetical == record["passage"]
    # The vector side searched the passage: the same ranking as searching the passage itself.
    passage = SearchRequest.from_settings(
        docs_settings, record["passage"], tenant="default", k=5, mode="vector", rerank=False
    )
    assert sections(vector_hyde) == sections(search(passage, docs_settings, client=client))
    assert sections(vector_hyde) != sections(vector_question)
    # BM25 kept the rewritten question.
    assert sections(run("bm25", **hyde)) == sections(run("bm25", rewrite="llm"))
    assert sections(run("hybrid-rrf", **hyde))[0] == ("refund-policy.md", "Wallet credit")


@pytest.mark.parametrize(
    ("model", "reason"),
    [
        ("fail-500", "query rewrite failed (HTTP 500)"),
        ("garbage", "query rewrite failed (the reply is not a chat completion)"),
        ("no-choices", "query rewrite failed (the reply is not a chat completion)"),
        ("slow", "query rewrite failed (no answer within 1 s)"),
    ],
)
def test_a_failing_rewriter_falls_back_with_a_warning(
    docs_settings, client, embedder, chat_server, model, reason, caplog, capsys
):
    with caplog.at_level(logging.DEBUG):
        result = ask(docs_settings, client, embedder, "late-card-upi", rewrite="llm", **{
            "rewrite_model": model
        })  # fmt: skip
    off = ask(docs_settings, client, embedder, "late-card-upi", rewrite="off")
    assert result.queries == ["and for UPI?"] and sections(result) == sections(off)
    assert result.warnings == [f"{reason}; searched the message as it is"]
    assert "query rewrite through" in caplog.text
    captured = capsys.readouterr()
    everything = caplog.text + captured.out + captured.err + json.dumps(result.to_dict())
    assert API_KEY not in everything and API_KEY not in chat_server[1].read_text()


def test_a_wrong_key_is_refused_by_the_server_and_never_shown(docs_settings, client, embedder):
    result = ask(
        docs_settings, client, embedder, "late-card-upi", rewrite="llm", rewrite_api_key="wrong"
    )
    assert result.warnings == ["query rewrite failed (HTTP 401); searched the message as it is"]


def test_search_history_from_the_command_line(docs_settings, chat_server, tmp_path):
    record = RECORDS["three-wallet"]
    history = tmp_path / "history.json"
    history.write_text(json.dumps(record["history"]), encoding="utf-8")
    env = {
        "LOADER_REWRITE_URL": chat_server[0],
        "LOADER_REWRITE_MODEL": "fake",
        "LOADER_REWRITE_API_KEY": API_KEY,
        "LOADER_RERANK": "false",
    }
    url, index = docs_settings.opensearch_url, docs_settings.index_name
    base = ["search", record["question"], "--history", str(history), "--url", url]
    base += ["--index", index, "--tenant", "default"]
    result = CliRunner().invoke(cli, [*base, "--rewrite", "llm", "--json"], env=env)
    assert result.exit_code == 0, result.output
    answer = json.loads(result.stdout)
    assert answer["queries"] == [record["standalone"]] and answer["warnings"] == []
    text = CliRunner().invoke(cli, [*base, "--rewrite", "concat"], env=env)
    assert text.exit_code == 0, text.output
    assert "queries: How long do card refunds take? what about the wallet?" in text.output
    assert "Refund policy > Refund timelines" in text.output
    assert API_KEY not in result.output + text.output


def test_chat_keeps_the_conversation(docs_settings, chat_server):
    env = {
        "LOADER_REWRITE": "llm",
        "LOADER_REWRITE_URL": chat_server[0],
        "LOADER_REWRITE_MODEL": "fake",
        "LOADER_REWRITE_API_KEY": API_KEY,
        "LOADER_RERANK": "false",
    }
    url, index = docs_settings.opensearch_url, docs_settings.index_name
    args = ["chat", "--url", url, "--index", index, "--tenant", "default"]
    script = "How long do card refunds take?\nand for UPI?\n:k 0\n:k 2\n:rewrite off\n"
    script += "and for UPI?\n:history\n:quit\nnever searched\n"
    result = CliRunner().invoke(cli, [*args, "--json"], input=script, env=env)
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]
    first, second, bad_k, k, rewrite, third, history = lines
    assert first["turn"] == 1 and first["queries"] == ["How long do card refunds take?"]
    assert second["queries"] == ["How long do UPI refunds take?"]
    assert second["hits"][0]["heading_path"] == ["Refund timelines"]
    assert bad_k == {"error": "k must be a positive whole number, got '0'", "exit_code": 2}
    assert k["lines"] == ["k 2"] and rewrite["lines"] == ["rewrite off"]
    assert third["queries"] == ["and for UPI?"] and len(third["hits"]) == 2
    assert history["lines"] == [
        "user: How long do card refunds take?",
        "user: and for UPI?",
        "user: and for UPI?",
    ]
    text = CliRunner().invoke(
        cli, args, input="How long do card refunds take?\nand for UPI?\n", env=env
    )
    assert text.exit_code == 0, text.output
    assert "[2] searched: How long do UPI refunds take?" in text.output
    assert "Refund policy > Refund timelines  (refund-policy.md)" in text.output
    assert API_KEY not in result.output + text.output


def test_serve_takes_history_and_warns_instead_of_failing(docs_settings, embedder, caplog, capfd):
    from loader.serve.app import create_app
    from tests.integration.serve.http_server import Server

    record = RECORDS["late-card-upi"]
    body = {"question": record["question"], "tenant": "default", "history": record["history"]}
    with caplog.at_level(logging.WARNING):
        settings = docs_settings.replace(rewrite="llm")
        with Server(create_app(settings, embedder=embedder), log_level="info") as server:
            status, answer = server.request("POST", "/search", body)
            bad_status, bad = server.request(
                "POST", "/search", {**body, "history": [{"role": "bot", "content": "x"}]}
            )
        failing = settings.replace(rewrite_model="fail-500")
        with Server(create_app(failing, embedder=embedder), log_level="info") as server:
            failed_status, failed = server.request("POST", "/search", body)
    assert status == 200 and answer["queries"] == [record["standalone"]]
    assert answer["hits"][0]["heading_path"] == ["Refund timelines"]
    assert answer["timings"]["rewrite_ms"] > 0 and answer["warnings"] == []
    assert bad_status == 422 and bad["error"].startswith("history.0.role:")
    assert failed_status == 200 and failed["queries"] == [record["question"]]
    assert failed["warnings"] == ["query rewrite failed (HTTP 500); searched the message as it is"]
    captured = capfd.readouterr()
    access_log = captured.out + captured.err  # uvicorn's access and server logs
    assert '"POST /search HTTP/1.1" 200' in access_log
    assert "query rewrite through" in caplog.text and "Bearer ****" in caplog.text
    assert API_KEY not in caplog.text + access_log + json.dumps([answer, bad, failed])


def test_conversations_file_is_a_questions_file_with_history() -> None:
    from loader.eval.tasks import load_task

    task = load_task(CONVERSATIONS, docs=SAMPLE_DOCS)
    assert len(task.queries) >= 40 and all(query.history for query in task.queries)
    assert sum(len(query.history) >= 4 for query in task.queries) >= 5  # three-turn ones
    assert Path(SAMPLE_DOCS / "partners").is_dir()  # its FAQ is tenant partners: not asked
    assert all(query.source != "partners/restaurant-partner-faq.md" for query in task.queries)
