"""Query rewriting, against a tiny chat-completions server on 127.0.0.1 (no other network): the
adapter's modes, its fallbacks, and the factory that builds a rewriter from the settings."""

from __future__ import annotations

import json
import logging
import socket
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest

from loader.errors import ConfigError
from loader.query.chat_model import MODE_PROMPTS, OpenAICompatibleRewriter
from loader.query.conversation import ConcatRewriter
from loader.query.rewrite import (
    IdentityRewriter,
    QueryRewriter,
    Rewrite,
    parse_queries,
    rewrite_question,
)
from loader.query.rewriters import rewriter_from_settings
from loader.settings import Settings, secret_values

API_KEY = "sk-test-SECRET-0123456789"
HISTORY = [
    {"role": "user", "content": "How do refunds for late orders work?"},
    {"role": "assistant", "content": "Orders more than 45 minutes late are refunded in full."},
]


def _completion(content: str) -> dict[str, Any]:
    return {
        "id": "chatcmpl-1",
        "object": "chat.completion",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": content}}],
    }


class ChatServer:
    """Answers POST /v1/chat/completions with whatever the test sets; records the requests."""

    def __init__(self) -> None:
        self.status = 200
        self.reply: bytes = b""
        self.delay = 0.0
        self.trickle = 0.0  # seconds between the reply's bytes
        self.headers: dict[str, str] = {}  # sent with the reply (a redirect's Location)
        self.requests: list[dict[str, Any]] = []
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 (http.server's naming)
                length = int(self.headers.get("Content-Length", 0))
                server.requests.append(
                    {
                        "path": self.path,
                        "headers": dict(self.headers),
                        "body": json.loads(self.rfile.read(length)),
                    }
                )
                time.sleep(server.delay)
                self.send_response(server.status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(server.reply)))
                for name, value in server.headers.items():
                    self.send_header(name, value)
                self.end_headers()
                if not server.trickle:
                    self.wfile.write(server.reply)
                for byte in server.reply if server.trickle else b"":
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(server.trickle)

            do_GET = do_POST  # what a followed 302 would become

            def log_message(self, *args: Any) -> None:  # keep test output quiet
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.base_url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def answer(self, content: str) -> None:
        self.status, self.reply = 200, json.dumps(_completion(content)).encode()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # A proxy from the environment must not capture the loopback test server's traffic.
    for name in (
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
    ):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def chat_server() -> Iterator[ChatServer]:
    server = ChatServer()
    yield server
    server.close()


def test_identity_rewriter() -> None:
    rewriter = IdentityRewriter()
    assert rewriter.rewrite(HISTORY, "what about for UPI?") == ["what about for UPI?"]
    assert isinstance(rewriter, QueryRewriter)


def test_parse_queries() -> None:
    reply = '1. refund time for UPI\n- "late order refund"\n\n2) Refund time for UPI\n* other\n'
    assert parse_queries(reply, 5) == ["refund time for UPI", "late order refund", "other"]
    assert parse_queries(reply, 1) == ["refund time for UPI"]
    assert parse_queries("  \n", 3) == []
    assert parse_queries("3.5 inch screen refunds\nQuery 2: -5 degrees storage", 3) == [
        "3.5 inch screen refunds",
        "-5 degrees storage",
    ]


def test_openai_rewriter_posts_and_parses(chat_server: ChatServer) -> None:
    chat_server.answer("refund time for late orders paid by UPI\nUPI refund delay\n")
    rewriter = OpenAICompatibleRewriter(chat_server.base_url + "/", "tiny-model", api_key=API_KEY)
    assert isinstance(rewriter, QueryRewriter)
    rewrite = rewriter.rewrite(HISTORY, "what about for UPI?")
    assert rewrite.queries == ["refund time for late orders paid by UPI"]  # standalone: one
    assert rewrite.standalone == rewrite.queries[0] and rewrite.warnings == ()
    (request,) = chat_server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == f"Bearer {API_KEY}"
    assert request["body"]["model"] == "tiny-model"
    prompt = request["body"]["messages"][-1]["content"]
    assert "45 minutes late" in prompt and "what about for UPI?" in prompt


def test_openai_rewriter_caps_queries_and_sends_no_key_when_none(chat_server: ChatServer) -> None:
    chat_server.answer("q1\nq2\nq3\nq4")
    rewriter = OpenAICompatibleRewriter(
        chat_server.base_url, "m", max_queries=2, mode="multi-query"
    )
    assert rewriter.rewrite([], "x").queries == ["q1", "q2"]
    assert "Authorization" not in chat_server.requests[0]["headers"]


def test_http_error_falls_back_without_leaking_the_key(
    chat_server: ChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    chat_server.status = 401
    chat_server.reply = json.dumps({"error": f"invalid key {API_KEY}"}).encode()
    rewriter = OpenAICompatibleRewriter(chat_server.base_url, "m", api_key=API_KEY)
    with caplog.at_level(logging.WARNING, logger="loader.query.rewrite"):
        rewrite = rewriter.rewrite(HISTORY, "what about for UPI?")
    assert rewrite.queries == ["what about for UPI?"]
    assert rewrite.warnings == ("query rewrite failed (HTTP 401); searched the message as it is",)
    assert "HTTP 401" in caplog.text and "****" in caplog.text
    assert API_KEY not in caplog.text
    assert API_KEY not in repr(rewriter)


@pytest.mark.parametrize(
    "reply",
    [b"not json", json.dumps({"choices": []}).encode(), json.dumps(_completion("  ")).encode()],
)
def test_bad_replies_fall_back(
    chat_server: ChatServer, caplog: pytest.LogCaptureFixture, reply: bytes
) -> None:
    chat_server.reply = reply
    rewriter = OpenAICompatibleRewriter(chat_server.base_url, "m", api_key=API_KEY)
    with caplog.at_level(logging.WARNING, logger="loader.query.rewrite"):
        rewrite = rewriter.rewrite(HISTORY, "msg")
    assert rewrite.queries == ["msg"] and len(rewrite.warnings) == 1
    assert "query rewrite" in caplog.text
    assert API_KEY not in caplog.text


def test_timeout_falls_back(chat_server: ChatServer, caplog: pytest.LogCaptureFixture) -> None:
    chat_server.answer("never read")
    chat_server.delay = 1.0
    rewriter = OpenAICompatibleRewriter(chat_server.base_url, "m", api_key=API_KEY, timeout=0.2)
    with caplog.at_level(logging.WARNING, logger="loader.query.rewrite"):
        rewrite = rewriter.rewrite(HISTORY, "msg")
    assert rewrite.queries == ["msg"]
    assert rewrite.warnings == ("query rewrite failed (no answer within 0.2 s); searched the "
                                "message as it is",)  # fmt: skip
    assert "failed" in caplog.text and API_KEY not in caplog.text


def test_an_answer_trickled_in_is_given_up_at_the_timeout(chat_server: ChatServer) -> None:
    # Each byte arrives well within the timeout; the whole answer would take 4 s.
    chat_server.answer("refund time for UPI orders")
    chat_server.trickle = 4.0 / len(chat_server.reply)
    rewriter = OpenAICompatibleRewriter(chat_server.base_url, "m", timeout=0.5)
    started = time.monotonic()
    rewrite = rewriter.rewrite(HISTORY, "msg")
    assert time.monotonic() - started < 1.5  # the deadline, plus at most one wait
    assert rewrite.warnings == ("query rewrite failed (no answer within 0.5 s); searched the "
                                "message as it is",)  # fmt: skip


def test_a_redirect_is_not_followed_so_the_key_goes_nowhere_else(chat_server: ChatServer) -> None:
    elsewhere = ChatServer()
    try:
        elsewhere.answer("REWRITTEN")
        chat_server.status, chat_server.reply = 302, b""
        chat_server.headers = {"Location": elsewhere.base_url + "/chat/completions"}
        rewriter = OpenAICompatibleRewriter(chat_server.base_url, "m", api_key=API_KEY)
        rewrite = rewriter.rewrite(HISTORY, "msg")
    finally:
        elsewhere.close()
    assert elsewhere.requests == []
    assert rewrite.queries == ["msg"]
    assert rewrite.warnings == ("query rewrite failed (HTTP 302 (redirects are not followed)); "
                                "searched the message as it is",)  # fmt: skip


def test_a_reply_that_echoes_the_key_is_refused(chat_server: ChatServer) -> None:
    chat_server.answer(f"refunds Bearer {API_KEY}")
    rewrite = OpenAICompatibleRewriter(chat_server.base_url, "m", api_key=API_KEY).rewrite(
        HISTORY, "msg"
    )
    assert rewrite.queries == ["msg"] and API_KEY not in repr(rewrite)
    assert rewrite.warnings == ("query rewrite failed (the reply holds the API key); searched "
                                "the message as it is",)  # fmt: skip


def test_a_placeholder_key_may_be_a_word_of_the_answer(chat_server: ChatServer) -> None:
    # Local servers take any key; "ollama" is a common one, and a fine word of a rewrite.
    chat_server.answer("how to run ollama offline")
    rewrite = OpenAICompatibleRewriter(chat_server.base_url, "m", api_key="ollama").rewrite(
        HISTORY, "and offline?"
    )
    assert rewrite.queries == ["how to run ollama offline"] and rewrite.warnings == ()


def test_the_deadline_of_the_body_starts_when_the_answer_does(chat_server: ChatServer) -> None:
    # The model thinks 0.6 s before answering, within the 1 s wait; the body then comes at once.
    chat_server.answer("refund time for UPI orders")
    chat_server.delay = 0.6
    rewriter = OpenAICompatibleRewriter(chat_server.base_url, "m", timeout=1.0)
    assert rewriter.rewrite(HISTORY, "msg").queries == ["refund time for UPI orders"]


def test_json_nested_too_deeply_for_the_parser_falls_back(chat_server: ChatServer) -> None:
    chat_server.reply = b"[" * 200_000 + b"]" * 200_000
    rewrite = OpenAICompatibleRewriter(chat_server.base_url, "m").rewrite(HISTORY, "msg")
    assert rewrite.queries == ["msg"]
    assert rewrite.warnings == ("query rewrite failed (the reply is not a chat completion); "
                                "searched the message as it is",)  # fmt: skip


def test_an_error_page_is_masked_before_it_is_cut(
    chat_server: ChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    chat_server.status = 500
    chat_server.reply = ("x" * 265 + f" Authorization: Bearer {API_KEY}").encode()  # across 300
    rewriter = OpenAICompatibleRewriter(chat_server.base_url, "m", api_key=API_KEY)
    with caplog.at_level(logging.WARNING, logger="loader.query.rewrite"):
        rewriter.rewrite(HISTORY, "msg")
    assert "HTTP 500" in caplog.text
    assert not any(API_KEY[:n] in caplog.text for n in range(8, len(API_KEY) + 1))


def test_refused_connection_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    rewriter = OpenAICompatibleRewriter(f"http://127.0.0.1:{port}/v1", "m", api_key=API_KEY)
    with caplog.at_level(logging.WARNING, logger="loader.query.rewrite"):
        rewrite = rewriter.rewrite([], "msg")
    assert rewrite.queries == ["msg"]
    assert rewrite.warnings == ("query rewrite failed (cannot reach the rewriter); searched the "
                                "message as it is",)  # fmt: skip
    assert "failed" in caplog.text and API_KEY not in caplog.text


def test_blank_message_is_not_sent(chat_server: ChatServer) -> None:
    rewriter = OpenAICompatibleRewriter(chat_server.base_url, "m")
    assert rewriter.rewrite(HISTORY, "  ").queries == ["  "]
    assert chat_server.requests == []


@pytest.mark.parametrize(
    ("mode", "reply", "queries", "standalone", "hypothetical"),
    [
        ("standalone", "How long do UPI refunds take?\nextra", ["How long do UPI refunds take?"],
         "How long do UPI refunds take?", ""),
        ("decompose", "Refund time and fee for late UPI orders?\nUPI refund time\nlate order fee",
         ["UPI refund time", "late order fee"], "Refund time and fee for late UPI orders?", ""),
        ("decompose", "UPI refund time", ["UPI refund time"], "UPI refund time", ""),
        ("multi-query", "UPI refund time\nwhen does a UPI refund arrive",
         ["UPI refund time", "when does a UPI refund arrive"], "UPI refund time", ""),
        ("hyde", "query: UPI refund time\npassage: UPI refunds arrive\nwithin 48 hours.",
         ["UPI refund time"], "UPI refund time", "UPI refunds arrive within 48 hours."),
        ("hyde", "UPI refund time\nUPI refunds arrive within 48 hours.", ["UPI refund time"],
         "UPI refund time", "UPI refunds arrive within 48 hours."),
    ],
)  # fmt: skip
def test_each_mode_reads_its_reply(
    chat_server: ChatServer, mode, reply, queries, standalone, hypothetical
) -> None:
    chat_server.answer(reply)
    rewriter = OpenAICompatibleRewriter(chat_server.base_url, "m", mode=mode, max_queries=3)
    rewrite = rewriter.rewrite(HISTORY, "what about for UPI?")
    assert (rewrite.queries, rewrite.standalone, rewrite.hypothetical) == (
        queries,
        standalone,
        hypothetical,
    )
    system = chat_server.requests[0]["body"]["messages"][0]["content"]
    assert system == MODE_PROMPTS[mode].format(max_queries=3, paraphrases=2)


def test_the_prompt_lays_out_the_conversation_one_turn_per_line(chat_server: ChatServer) -> None:
    chat_server.answer("x")
    history = [{"role": "user", "content": "How do\nrefunds work?"}]
    OpenAICompatibleRewriter(chat_server.base_url, "m").rewrite(history, "and  for UPI?")
    prompt = chat_server.requests[0]["body"]["messages"][-1]["content"]
    assert prompt == (
        "Conversation so far:\nuser: How do refunds work?\n\nLatest message:\nand for UPI?"
    )


def test_a_non_text_content_falls_back(chat_server: ChatServer) -> None:
    chat_server.reply = json.dumps(_completion(None)).encode()  # type: ignore[arg-type]
    rewrite = OpenAICompatibleRewriter(chat_server.base_url, "m").rewrite([], "msg")
    assert rewrite.warnings == (
        "query rewrite failed (the reply is not a chat completion); searched the message as it is",
    )


def test_an_unknown_mode_is_refused() -> None:
    with pytest.raises(ConfigError, match="rewrite_mode must be one of standalone, decompose"):
        OpenAICompatibleRewriter("http://127.0.0.1:1/v1", "m", mode="summary")


def test_the_rewrite_stage_bounds_any_answer() -> None:
    class Lists:
        def rewrite(self, history, message):
            return [" a ", "A", "", "b"]

    rewrite = rewrite_question(Lists(), [], "q")
    assert rewrite == Rewrite(["a", "b"], "a")
    assert rewrite_question(None, [], "q") == Rewrite(["q"], "q")
    empty = rewrite_question(_Empty(), [], "q")
    assert empty.queries == ["q"] and empty.warnings == (
        "the query rewriter returned no query; searched the message as it is",
    )
    assert Rewrite(["a", "b"], hypothetical="p").vector_texts == ["p", "p"]
    assert Rewrite(["a"]).vector_texts is None


class _Empty:
    def rewrite(self, history, message):
        return []


def test_rewriter_from_settings(tmp_path) -> None:
    assert rewriter_from_settings(Settings(rewrite="off")) is None
    # concat by default: follow-ups are searched with the question they follow.
    assert isinstance(rewriter_from_settings(Settings()), ConcatRewriter)
    key_file = tmp_path / "key"
    key_file.write_text(API_KEY + "\n", encoding="utf-8")
    settings = Settings(
        rewrite="llm",
        rewrite_url="http://127.0.0.1:8000/v1/",
        rewrite_model="m",
        rewrite_api_key_file=str(key_file),
        rewrite_mode="hyde",
        rewrite_max_queries=2,
        rewrite_timeout=3.0,
    )
    rewriter = rewriter_from_settings(settings)
    assert isinstance(rewriter, OpenAICompatibleRewriter)
    assert (rewriter.url, rewriter.mode, rewriter.max_queries, rewriter.timeout) == (
        "http://127.0.0.1:8000/v1/chat/completions",
        "hyde",
        2,
        3.0,
    )
    assert API_KEY in secret_values(settings)  # so the CLI's log filter masks it
    assert API_KEY not in repr(rewriter) + repr(settings) + str(settings.public_items())


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({}, "rewrite = llm needs rewrite_url"),
        ({"rewrite_url": "ftp://host/v1"}, "rewrite = llm needs rewrite_url"),
        ({"rewrite_url": "http://u:pw-SECRET@/v1"}, "'http://u:\\*\\*\\*\\*@/v1'"),
        ({"rewrite_url": "http://h/v1", "rewrite_model": " "}, "needs rewrite_model"),
        ({"rewrite_url": "http://h/v1", "rewrite_timeout": 0.0}, "rewrite_timeout must be"),
        ({"rewrite_url": "http://h/v1", "rewrite_max_queries": 9}, "rewrite_max_queries must"),
        ({"rewrite_url": "http://h/v1", "rewrite_api_key_file": "/nonexistent/key"},
         "rewrite_api_key_file /nonexistent/key does not exist"),
    ],
)  # fmt: skip
def test_unusable_llm_settings_are_refused(changes, message) -> None:
    settings = Settings(rewrite="llm", rewrite_model="m").replace(**changes)
    with pytest.raises(ConfigError, match=message) as caught:
        rewriter_from_settings(settings)
    assert "pw-SECRET" not in str(caught.value)
