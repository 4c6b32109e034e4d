"""Conversations without a cluster: the history's checks, the history file, the concat fallback,
the rewrite and HyDE hooks of the search (against the fake client), the HTTP body's history, and
`loader chat` / `loader search --history` up to the first search."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.errors import ConfigError
from loader.query.conversation import (
    MAX_HISTORY_TURNS,
    ConcatRewriter,
    check_history,
    load_history,
    needs_context,
)
from loader.query.request import MAX_QUESTION_CHARS, SearchRequest
from loader.query.result import format_result
from loader.query.rewrite import Rewrite
from loader.settings import Settings
from tests.unit.query.fakes import CORPUS, SETTINGS, FakeClient, FakeEmbedder, FakeReranker, run

HISTORY = [
    {"role": "user", "content": "How long do card refunds take?"},
    {"role": "assistant", "content": "5 to 7 working days."},
]


@pytest.mark.parametrize(
    ("history", "message"),
    [
        ("text", "history must be a list of {role, content} turns, got str"),
        ({"role": "user"}, "history must be a list of {role, content} turns, got dict"),
        ([["user", "x"]], "history[0] must be an object with role and content, got ['user', 'x']"),
        ([{"role": "bot", "content": "x"}], "history[0].role must be one of user, assistant"),
        ([{"role": "user", "content": 5}], "history[0].content must be a string, got 5"),
        ([{"role": "user", "content": "x", "name": "a"}], "history[0] has unknown field(s) name"),
        ([{"role": "user", "content": "x" * 9000}], "history[0].content has 9000 characters"),
        ([{"role": "user", "content": "x"}] * 51, "history has 51 turns, more than the limit"),
    ],
)
def test_a_bad_history_is_refused_naming_the_turn(history, message) -> None:
    with pytest.raises(ConfigError) as caught:
        check_history(history)
    assert str(caught.value).startswith(message)
    with pytest.raises(ConfigError):
        SearchRequest.from_settings(SETTINGS, "q", tenant="A", history=history)


def test_a_history_is_kept_as_checked_turns() -> None:
    assert check_history(None) == () and check_history([]) == ()
    assert check_history(HISTORY) == tuple(HISTORY)
    request = SearchRequest.from_settings(SETTINGS, "q", tenant="A", history=HISTORY)
    assert request.history == tuple(HISTORY)
    assert len(check_history([HISTORY[0]] * MAX_HISTORY_TURNS)) == MAX_HISTORY_TURNS


def test_load_history_names_the_file(tmp_path: Path) -> None:
    good = tmp_path / "good.json"
    good.write_text(json.dumps(HISTORY), encoding="utf-8")
    assert load_history(good) == tuple(HISTORY)
    cases = {
        "missing.json": None,
        "broken.json": "[{",
        "latin1.json": b"\xff\xfe",
        "deep.json": "[" * 100_000 + "]" * 100_000,  # past the JSON parser's recursion limit
        "shape.json": json.dumps({"role": "user"}),
        "turn.json": json.dumps([{"role": "user"}]),
    }
    messages = {
        "missing.json": "history file {} does not exist",
        "broken.json": "history file {} is not valid JSON (Expecting",
        "latin1.json": "history file {} is not UTF-8 text (byte 0x",
        "deep.json": "history file {} is not valid JSON (nested too deeply)",
        "shape.json": "history file {}: history must be a list",
        "turn.json": "history file {}: history[0].content must be a string, got None",
    }
    for name, content in cases.items():
        path = tmp_path / name
        if isinstance(content, bytes):
            path.write_bytes(content)
        elif content is not None:
            path.write_text(content, encoding="utf-8")
        with pytest.raises(ConfigError) as caught:
            load_history(path)
        assert str(caught.value).startswith(messages[name].format(path)), name


@pytest.mark.parametrize(
    ("message", "follow_up"),
    [
        ("and for UPI?", True),
        ("what about partners?", True),
        ("How about cancelling it after the restaurant accepted?", True),
        ("Is it refunded in full?", False),
        ("it takes how long for a refund to arrive?", True),
        ("How long do UPI refunds take?", False),
        ("why?", True),
        ("Android logs export", True),  # three words: too short to trust on its own
    ],
)
def test_needs_context(message: str, follow_up: bool) -> None:
    assert needs_context(message) is follow_up


def test_concat_joins_the_last_standalone_question() -> None:
    rewriter = ConcatRewriter()
    assert rewriter.rewrite(HISTORY, "and for UPI?") == [
        "How long do card refunds take? and for UPI?"
    ]
    three = [*HISTORY, {"role": "user", "content": "and for UPI?"}]
    assert rewriter.rewrite(three, "what about the wallet?") == [
        "How long do card refunds take? what about the wallet?"
    ]
    assert rewriter.rewrite(HISTORY, "How do I delete my account?") == [
        "How do I delete my account?"
    ]
    assert rewriter.rewrite([], "and for UPI?") == ["and for UPI?"]


def test_concat_from_the_settings_reaches_the_search() -> None:
    settings = SETTINGS.replace(rewrite="concat")
    client = FakeClient({"How long do card refunds take? and for UPI?": CORPUS})
    request = SearchRequest.from_settings(
        settings, "and for UPI?", tenant="A", history=HISTORY, rerank=False
    )
    from loader.query.search import search

    result = search(request, settings, client=client, embedder=FakeEmbedder())
    assert result.queries == ["How long do card refunds take? and for UPI?"]
    assert [hit.chunk_id for hit in result.hits] == ["a-0", "b-0", "c-0"]


class _Hyde:
    def rewrite(self, history, message):
        return Rewrite(["standalone q"], "standalone q", "a made-up answer", ("note",))


def test_hyde_embeds_the_passage_bm25_gets_the_query_and_rerank_the_standalone() -> None:
    client, embedder, reranker = (
        FakeClient({"standalone q": CORPUS}),
        FakeEmbedder(),
        FakeReranker(),
    )
    result = run("latest", client=client, embedder=embedder, reranker=reranker, rewriter=_Hyde())
    assert embedder.texts == ["a made-up answer"]
    (call,) = client.calls
    assert call["body"]["params"]["query_text"] == "standalone q"
    assert "query_vector" in call["body"]["params"]
    assert reranker.calls[0][0] == "standalone q" and result.rerank_query == "standalone q"
    assert result.hypothetical == "a made-up answer" and result.warnings == ["note"]
    lines = format_result(result)
    assert lines[0] == "! note"
    assert "hypothetical answer (vector side): a made-up answer" in lines


class _Decomposed:
    def rewrite(self, history, message):
        return Rewrite(["part one", "part two"], "the whole question")


def test_a_decomposition_is_reranked_against_the_whole_question() -> None:
    client = FakeClient({"part one": CORPUS[:1], "part two": CORPUS[1:]})
    reranker = FakeReranker()
    result = run("latest", client=client, reranker=reranker, rewriter=_Decomposed())
    assert result.queries == ["part one", "part two"]
    assert reranker.calls[0][0] == "the whole question"


def test_serve_body_checks_the_history() -> None:
    pytest.importorskip("fastapi")
    from pydantic import ValidationError

    from loader.serve.body import SearchRequest as Body

    body = Body(question="and for UPI?", tenant="A", history=HISTORY)
    request = body.to_request(SETTINGS, "A")
    assert request.history == tuple(HISTORY)
    with pytest.raises(ValidationError, match="history.0.role"):
        Body(question="q", tenant="A", history=[{"role": "bot", "content": "x"}])
    with pytest.raises(ValidationError, match="history"):
        Body(question="q", tenant="A", history=[HISTORY[0]] * (MAX_HISTORY_TURNS + 1))


def test_search_history_file_errors_name_the_file(tmp_path: Path) -> None:
    missing = tmp_path / "nope.json"
    result = CliRunner().invoke(cli, ["search", "and for UPI?", "--history", str(missing)])
    assert result.exit_code == 2
    assert f"history file {missing} does not exist" in result.output


@pytest.fixture
def cluster_check_skipped(monkeypatch: pytest.MonkeyPatch) -> None:
    """These tests are about chat's commands, which never reach a cluster; the check that one
    answers when the session starts is tested on its own (test_chat_with_standard_input_closed_...)
    and would otherwise make them pass or fail with whatever listens on the default address."""
    from loader.query import chat as chat_module

    monkeypatch.setattr(chat_module.ChatSession, "connect", lambda session: None)


def test_chat_commands_without_a_search(
    monkeypatch: pytest.MonkeyPatch, cluster_check_skipped: None
) -> None:
    monkeypatch.setenv("LOADER_REWRITE_API_KEY", "sk-chat-unit-SECRET")
    script = ":k 0\n:k 3\n:mode vector\n:mode nope\n:tenant acme\n:rewrite concat\n"
    script += ":rewrite hyde\n:rewrite bogus\n:frobnicate\n:k\n:history\n:help\n:reset\n:q\n"
    result = CliRunner().invoke(cli, ["chat"], input=script)
    assert result.exit_code == 0, result.output
    out = result.output
    assert out.startswith("tenant 'default', rewrite concat; :help for commands")
    for line in (
        "! k must be a positive whole number, got '0'",
        "k 3",
        "search mode vector",
        "! mode 'nope' is not one of bm25, vector, hybrid-rrf, hybrid-minmax",
        "tenant 'acme'",
        "rewrite concat",
        "! rewrite = llm needs rewrite_url",
        "! rewrite 'bogus' is not one of off, llm, concat, standalone",
        "! unknown command ':frobnicate'; :help lists the commands",
        "! :k needs a value; :help lists the commands",
        "(no turns yet)",
        ":quit           leave (or end of input)",
        "conversation cleared",
    ):
        assert line in out, line
    assert "sk-chat-unit-SECRET" not in out


def test_chat_refuses_bad_arguments_when_given_and_goes_on(cluster_check_skipped: None) -> None:
    script = b":k \xc2\xb2\n:k 99999\n:tenant ab\xffcd\n:tenant  acme \n:tenant a\n:k 2\n:q\n"
    result = CliRunner().invoke(cli, ["chat", "--json"], input=script)
    assert result.exit_code == 0, result.output
    lines = [json.loads(line) for line in result.stdout.splitlines()]  # every one valid JSON
    errors = [line["error"] for line in lines if "error" in line]
    assert errors == [
        "k must be a positive whole number, got '²'",  # "²".isdigit() is true; int() refuses it
        "k must be at most 10000, got 99999",
        "a line that is not UTF-8 text was skipped",
    ]
    done = [line["lines"] for line in lines if "command" in line]
    assert done == [["tenant 'acme'"], ["tenant 'a'"], ["k 2"]]


def test_chat_keeps_a_long_turn_as_it_was_searched(monkeypatch: pytest.MonkeyPatch) -> None:
    # A 12,000-character line once went into the history whole: every later turn then failed
    # ("history[0].content has 12000 characters").
    from loader.query import chat as chat_module

    monkeypatch.setattr(chat_module, "search", lambda request, settings, client: request)
    session = chat_module.ChatSession(Settings(), tenant="A", client=object())
    session.ask("refund " * 2000)
    session.ask("and for UPI?")
    assert len(session.history[0]["content"]) <= MAX_QUESTION_CHARS
    assert session.history[1]["content"] == "and for UPI?"


def test_chat_with_standard_input_closed_ends_at_once() -> None:
    # `loader chat <&-` (a service manager, cron): Python's sys.stdin is None, not a stream. No
    # cluster answers here: the session ends at once with that error (as JSON too), no crash.
    done = subprocess.run(
        [sys.executable, "-m", "loader", "chat", "--json"],
        preexec_fn=lambda: os.close(0),
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "OPENSEARCH_URL": "http://127.0.0.1:1", "HF_HUB_OFFLINE": "1"},
    )
    message = (
        "cannot connect to http://127.0.0.1:1 while checking that OpenSearch answers; is "
        "OpenSearch running? (`loader up` starts a local one; OPENSEARCH_URL names another)"
    )
    assert done.returncode == 3, done.stderr
    assert json.loads(done.stdout) == {"error": message, "exit_code": 3}
    assert done.stderr == f"Error: {message}\n"


def test_chat_refuses_unusable_rewrite_settings_up_front() -> None:
    result = CliRunner().invoke(cli, ["chat", "--rewrite", "llm"], input="hello\n")
    assert result.exit_code == 2 and "rewrite = llm needs rewrite_url" in result.output


@pytest.mark.parametrize(
    "args, message",
    [
        (["--tenant", " x"], "Invalid value for '--tenant': must not start or end with whitespace"),
        (["--tenant", ""], "Invalid value for '--tenant': must not be empty or blank"),
        (["--k", "20000"], "Error: k must be at most 10000, got 20000"),
    ],
)
def test_chat_refuses_a_tenant_or_k_no_turn_could_use_before_it_starts(args, message) -> None:
    result = CliRunner().invoke(cli, ["chat", *args], input="refunds?\n")
    assert result.exit_code == 2 and message in result.output, result.output
