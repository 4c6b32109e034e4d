"""`loader serve` against clients that stop sending their body, over raw sockets, on the
session's cluster: with ``serve_body_timeout`` at 1 s, headers declaring 1000 bytes and 11 bytes
of body are answered 408 within a bounded time and the connection is closed, on a route FastAPI
parses (``POST /search``) and on one that reads its body itself (``POST /judge/login``); a body
that keeps arriving slower than that in all, but never stalling 1 s, is read whole; and the
server answers normally after.
"""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator

import pytest

from loader.serve.app import create_app
from tests.integration.serve.http_server import Server

TIMEOUT = 1.0
WAIT = 6.0  # the most a test waits for an answer: a server without the timeout never answers


@pytest.fixture(scope="module")
def server(base_settings) -> Iterator[Server]:
    settings = base_settings.replace(serve_body_timeout=TIMEOUT)
    with Server(create_app(settings, load_models=False)) as running:
        yield running


def send_head(port: int, path: str, length: int, content_type: str) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=WAIT)
    head = (
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: {content_type}\r\n"
        f"Content-Length: {length}\r\n\r\n"
    )
    sock.sendall(head.encode("ascii"))
    return sock


def read_until_closed(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection (``TimeoutError`` after
    ``WAIT`` seconds if it never does)."""
    received = b""
    while chunk := sock.recv(4096):
        received += chunk
    return received


@pytest.mark.parametrize(
    ("path", "content_type"),
    [("/search", "application/json"), ("/judge/login", "application/x-www-form-urlencoded")],
)
def test_a_stalled_body_is_a_408_and_the_connection_closed(server, path, content_type) -> None:
    sock = send_head(server.port, path, 1000, content_type)
    with sock:
        started = time.monotonic()
        sock.sendall(b'{"question"')  # 11 of the 1000 bytes declared, then silence
        try:
            answer = read_until_closed(sock)
        except TimeoutError:
            pytest.fail(f"no answer and the connection still open after {WAIT} s")
        elapsed = time.monotonic() - started
    head, _, body = answer.partition(b"\r\n\r\n")
    assert head.split(b"\r\n")[0] == b"HTTP/1.1 408 Request Timeout", answer[:200]
    assert b"connection: close" in head.lower()
    assert "serve_body_timeout" in json.loads(body)["error"]
    assert TIMEOUT * 0.9 < elapsed < TIMEOUT + 3, elapsed
    # The server answers the next client as ever.
    status, health = server.request("GET", "/health")
    assert status == 200 and health["status"] == "ok", health


def read_answer(sock: socket.socket) -> bytes:
    """One answer, head and body (its Content-Length), the connection left open."""
    received = b""
    while b"\r\n\r\n" not in received:
        received += sock.recv(4096)
    head, _, body = received.partition(b"\r\n\r\n")
    length = next(
        int(line.split(b":", 1)[1])
        for line in head.split(b"\r\n")
        if line.lower().startswith(b"content-length:")
    )
    while len(body) < length:
        body += sock.recv(4096)
    return head + b"\r\n\r\n" + body


def test_a_body_that_keeps_arriving_is_not_cut(server) -> None:
    body = json.dumps({"question": "refund", "mode": "bm25"}).encode()  # no tenant: 422
    sock = send_head(server.port, "/search", len(body), "application/json")
    with sock:
        started = time.monotonic()
        for start in range(0, len(body), 8):  # 5 parts 0.5 s apart: 2 s in all, no 1 s stall
            time.sleep(0.5)
            sock.sendall(body[start : start + 8])
        answer = read_answer(sock)
        assert time.monotonic() - started > 2 * TIMEOUT
    assert answer.startswith(b"HTTP/1.1 422 "), answer[:200]
    assert b"tenant: Field required" in answer  # the whole body was read and parsed
