"""Query rewriting, against a tiny chat-completions server on 127.0.0.1 (no other network)."""

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

from loader.query.rewrite import (
    IdentityRewriter,
    OpenAICompatibleRewriter,
    QueryRewriter,
    parse_queries,
)

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
                self.end_headers()
                self.wfile.write(server.reply)

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
    queries = rewriter.rewrite(HISTORY, "what about for UPI?")
    assert queries == ["refund time for late orders paid by UPI", "UPI refund delay"]
    (request,) = chat_server.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["headers"]["Authorization"] == f"Bearer {API_KEY}"
    assert request["body"]["model"] == "tiny-model"
    prompt = request["body"]["messages"][-1]["content"]
    assert "45 minutes late" in prompt and "what about for UPI?" in prompt


def test_openai_rewriter_caps_queries_and_sends_no_key_when_none(chat_server: ChatServer) -> None:
    chat_server.answer("q1\nq2\nq3\nq4")
    rewriter = OpenAICompatibleRewriter(chat_server.base_url, "m", max_queries=2)
    assert rewriter.rewrite([], "x") == ["q1", "q2"]
    assert "Authorization" not in chat_server.requests[0]["headers"]


def test_http_error_falls_back_without_leaking_the_key(
    chat_server: ChatServer, caplog: pytest.LogCaptureFixture
) -> None:
    chat_server.status = 401
    chat_server.reply = json.dumps({"error": f"invalid key {API_KEY}"}).encode()
    rewriter = OpenAICompatibleRewriter(chat_server.base_url, "m", api_key=API_KEY)
    with caplog.at_level(logging.WARNING, logger="loader.query.rewrite"):
        assert rewriter.rewrite(HISTORY, "what about for UPI?") == ["what about for UPI?"]
    assert "HTTP 401" in caplog.text
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
        assert rewriter.rewrite(HISTORY, "msg") == ["msg"]
    assert "query rewrite" in caplog.text
    assert API_KEY not in caplog.text


def test_timeout_falls_back(chat_server: ChatServer, caplog: pytest.LogCaptureFixture) -> None:
    chat_server.answer("never read")
    chat_server.delay = 1.0
    rewriter = OpenAICompatibleRewriter(chat_server.base_url, "m", api_key=API_KEY, timeout=0.2)
    with caplog.at_level(logging.WARNING, logger="loader.query.rewrite"):
        assert rewriter.rewrite(HISTORY, "msg") == ["msg"]
    assert "failed" in caplog.text and API_KEY not in caplog.text


def test_refused_connection_falls_back(caplog: pytest.LogCaptureFixture) -> None:
    with socket.socket() as probe:  # a loopback port nobody listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    rewriter = OpenAICompatibleRewriter(f"http://127.0.0.1:{port}/v1", "m", api_key=API_KEY)
    with caplog.at_level(logging.WARNING, logger="loader.query.rewrite"):
        assert rewriter.rewrite([], "msg") == ["msg"]
    assert "failed" in caplog.text and API_KEY not in caplog.text


def test_blank_message_is_not_sent(chat_server: ChatServer) -> None:
    rewriter = OpenAICompatibleRewriter(chat_server.base_url, "m")
    assert rewriter.rewrite(HISTORY, "  ") == ["  "]
    assert chat_server.requests == []
