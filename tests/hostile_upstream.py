"""A hostile upstream on 127.0.0.1: what a proxy in front of the cluster (or a broken cluster) may
answer, for the tests that check no credential leaves the process and that a page where
OpenSearch's JSON should be is the cluster's error, not a crash.

``EchoUpstream`` answers every request with one status (changeable between requests) and a body
that echoes the request's ``Authorization`` header and the password decoded from it in every form
a server or library may write it back: raw, JSON-escaped, as Python's ``repr`` writes it,
percent-encoded and HTML-escaped. The body is OpenSearch's error JSON (``"json"``, with the echo
as the root cause's reason), plain text (``"text"``) or an HTML page served as ``text/plain``
(``"page"``, what opensearch-py hands back as a string).

``PASSWORD`` holds an ESC, both quotes, a backslash, reserved characters, a space and a Latin-1
letter between distinctive words (``WORDS``): no form of it can show without one of its words, so
``assert_no_credential`` checks the words and the Basic token.

Example::

    with EchoUpstream() as upstream:
        upstream.answer(400, "json")
        settings = upstream.settings(index_name="kb")   # its URL, USER and PASSWORD
"""

from __future__ import annotations

import base64
import html
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import quote

from loader.settings import Settings

USER = "admin"
PASSWORD = "Kq7Esc\x1bQu2ote\"Bs3lash\\Ap4ost'Pc5nt%Sp6ace Rs7vd:/?#@Lt8né"
WORDS = re.findall(r"[A-Za-z0-9]{3,}", PASSWORD)
TOKEN = base64.b64encode(f"{USER}:{PASSWORD}".encode("latin-1")).decode("ascii")
BODY_KINDS = ("json", "text", "page")
# What an OpenSearch node answers to GET / (the part loader.cluster.client.require_cluster reads).
BANNER = {"version": {"distribution": "opensearch", "number": "3.6.0"}, "tagline": "OpenSearch"}
# Sent raw after the echo: a terminal would clear its screen (nothing may print it unescaped).
TERMINAL_SEQUENCE = "\x1b[2J"


def echo_of(authorization: str) -> str:
    """What the upstream writes back: the header, and the password decoded from it in each form."""
    password = base64.b64decode(authorization.removeprefix("Basic ")).decode("latin-1")
    password = password.partition(":")[2]
    return (
        f"Authorization: {authorization}; password {password}; json {json.dumps(password)}; "
        f"repr {password!r}; url {quote(password)}; html {html.escape(password)}; "
        f"{TERMINAL_SEQUENCE}"
    )


class _EchoHandler(BaseHTTPRequestHandler):
    server: EchoUpstream

    def answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        if self.server.banner and self.command == "GET" and self.path == "/":
            self.reply(200, json.dumps(BANNER), "application/json")
            return
        status, kind = self.server.status, self.server.kind
        echo = echo_of(self.headers.get("Authorization", ""))
        if kind == "json":
            cause = {"type": "echo_exception", "reason": echo}
            body = json.dumps({"error": {"root_cause": [cause], **cause}, "status": status})
            content_type = "application/json"
        elif kind == "text":
            body, content_type = echo, "text/plain"
        else:
            body = f"<html><body><h1>Proxy</h1><p>{html.escape(echo)}</p></body></html>"
            content_type = "text/plain"  # as some proxies label their pages
        self.reply(status, body, content_type)

    def reply(self, status: int, body: str, content_type: str) -> None:
        data = body.encode("utf-8")
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = answer

    def log_message(self, *args: object) -> None:  # keep the test output clean
        pass


class EchoUpstream(ThreadingHTTPServer):
    """The echoing upstream, serving in a daemon thread while the ``with`` block runs."""

    daemon_threads = True

    def __init__(self, status: int = 400, kind: str = "json", banner: bool = False) -> None:
        """``banner``: answer ``GET /`` as an OpenSearch node does, so that a command that
        checks the cluster first (``loader serve``) gets past its start; every other request
        gets the hostile answer."""
        super().__init__(("127.0.0.1", 0), _EchoHandler)
        self.banner = banner
        self.answer(status, kind)

    def answer(self, status: int, kind: str) -> None:
        """Answer every request from now on with ``status`` and a body of ``kind``."""
        assert kind in BODY_KINDS, kind
        self.status, self.kind = status, kind

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def settings(self, **overrides: Any) -> Settings:
        """Settings that send ``USER`` and ``PASSWORD`` to this upstream."""
        return Settings(
            opensearch_url=self.url, opensearch_user=USER, opensearch_password=PASSWORD
        ).replace(**overrides)

    def __enter__(self) -> EchoUpstream:
        threading.Thread(target=self.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.shutdown()
        self.server_close()


CREDENTIAL_PIECES = (*WORDS, *(TOKEN[start : start + 8] for start in range(len(TOKEN) - 8)))


def shown_credential(text: str) -> str | None:
    """The first word of ``PASSWORD`` (so of any form of it) or 8 characters of its Basic token
    that ``text`` holds, else None."""
    return next((piece for piece in CREDENTIAL_PIECES if piece in text), None)


def assert_no_credential(*texts: str) -> None:
    """No word of ``PASSWORD`` (so no form of it) and no 8 characters of its Basic token."""
    for text in texts:
        piece = shown_credential(text)
        if piece is not None:
            at = text.find(piece)
            raise AssertionError(f"{piece!r} shows in ...{text[max(at - 120, 0) : at + 80]!r}...")
