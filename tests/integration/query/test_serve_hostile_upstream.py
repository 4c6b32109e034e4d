"""`loader serve` in front of a hostile upstream (``tests.hostile_upstream``): a proxy on
127.0.0.1 standing where the cluster should be, echoing the request's credentials in every answer.

The real process (``python -m loader serve --debug``, so opensearch-py logs every answer's body)
is asked for /search and /health while the upstream answers each status (400, 401, 403, 5xx) with
OpenSearch's JSON, plain text or an HTML page: no error body and no line the process writes holds
any form of the password or of its Basic token. A 200 that is not JSON is the cluster's fault: a
502 on /search and the 503 of an unhealthy cluster on /health, each with a one-line reason, never
a 500. No OpenSearch is involved: the searches are bm25 without rerank.
"""

from __future__ import annotations

import http.client
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.hostile_upstream import BODY_KINDS, PASSWORD, USER, EchoUpstream, assert_no_credential
from tests.integration.query.http_server import free_port
from tests.paths import REPO

SEARCH = {"question": "refund", "tenant": "A", "mode": "bm25", "rerank": False}
NOT_JSON = (
    "OpenSearch's address answered something that is not OpenSearch's JSON (a proxy's or web "
    "server's page); the server's log has the reason"
)


class ServeProcess:
    """``loader serve --debug`` in a child process, its output in two files."""

    def __init__(self, upstream: EchoUpstream, folder: Path) -> None:
        self.port = free_port()
        self.stdout, self.stderr = folder / "stdout", folder / "stderr"
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("OPENSEARCH_", "LOADER_"))},
            "PYTHONPATH": str(REPO),  # this checkout's package, from any folder
            "OPENSEARCH_URL": upstream.url,
            "OPENSEARCH_USER": USER,
            "OPENSEARCH_PASSWORD": PASSWORD,
            "LOADER_INDEX_NAME": "hostile-kb",
            "LOADER_RERANK": "false",
        }
        command = [sys.executable, "-m", "loader", "serve", "--port", str(self.port), "--debug"]
        with self.stdout.open("wb") as out, self.stderr.open("wb") as err:
            self.process = subprocess.Popen(command, cwd=folder, env=env, stdout=out, stderr=err)
        deadline = time.monotonic() + 120  # the embedding model loads at startup
        while not self.answers():
            assert self.process.poll() is None, self.stderr.read_text()
            assert time.monotonic() < deadline, "loader serve did not start"
            time.sleep(0.2)

    def answers(self) -> bool:
        try:
            self.raw("GET", "/openapi.json")
        except OSError:
            return False
        return True

    def raw(self, method: str, path: str, body: dict | None = None) -> tuple[int, str]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            headers = {"Content-Type": "application/json"}
            connection.request(method, path, json.dumps(body) if body else None, headers)
            response = connection.getresponse()
            return response.status, response.read().decode("utf-8", "replace")
        finally:
            connection.close()

    def output(self) -> str:
        """Everything the process wrote so far."""
        return self.stdout.read_text("utf-8", "replace") + self.stderr.read_text("utf-8", "replace")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)


@pytest.fixture(scope="module")
def upstream() -> Iterator[EchoUpstream]:
    # A proxy that let the server start (serve asks for the banner before loading its models)
    # and went hostile after.
    with EchoUpstream(banner=True) as running:
        yield running


@pytest.fixture(scope="module")
def server(upstream, tmp_path_factory) -> Iterator[ServeProcess]:
    running = ServeProcess(upstream, tmp_path_factory.mktemp("serve-hostile"))
    try:
        yield running
    finally:
        running.stop()
        assert_no_credential(running.output())  # shutdown included


def one_line_error(text: str) -> str:
    body = json.loads(text)
    assert list(body) == ["error"] and "\n" not in body["error"], body
    return body["error"]


@pytest.mark.parametrize("kind", BODY_KINDS)
@pytest.mark.parametrize("status", [400, 401, 403, 500, 502, 503])
def test_no_error_body_or_log_line_holds_the_echoed_password(server, upstream, status, kind):
    upstream.answer(status, kind)
    before = len(server.output())
    search_status, search_text = server.raw("POST", "/search", SEARCH)
    health_status, health_text = server.raw("GET", "/health")
    assert health_status == 503, health_text
    one_line_error(health_text)
    if status == 400 and kind == "json":  # OpenSearch's own 400: the caller's, with its reason
        assert search_status == 400, search_text
        assert one_line_error(search_text).startswith(
            "OpenSearch refused the search as a bad request: echo_exception: Authorization: "
            "Basic ****; password ****; json"
        )
    else:
        assert search_status == 502, search_text
        one_line_error(search_text)
    output = server.output()[before:]
    assert f"[status:{status} request:" in output and "DEBUG opensearch: <" in output  # logged
    assert_no_credential(search_text, health_text, output)


def test_a_200_that_is_not_json_is_a_502_with_a_reason_not_a_500(server, upstream):
    upstream.answer(200, "page")
    before = len(server.output())
    status, text = server.raw("POST", "/search", SEARCH)
    assert (status, one_line_error(text)) == (502, NOT_JSON)
    status, text = server.raw("GET", "/health")
    assert (status, one_line_error(text)) == (503, NOT_JSON)
    output = server.output()[before:]
    assert "answered something that is not OpenSearch's JSON while searching" in output
    assert "Traceback" not in output and "AttributeError" not in output
    assert_no_credential(output)
