"""`loader serve` in front of a hostile upstream (``tests.hostile_upstream``): a proxy on
127.0.0.1 standing where the cluster should be, echoing the request's credentials in every answer.

The real process (``python -m loader serve``, with ``--debug``, so opensearch-py logs every
answer's body, and without; the password in the settings or in the URL; API keys and the query
log on, so that every route is there) is asked
for every route of the app (/search, /health, /events, /log and the judging page's, signed in)
while the upstream answers each status (400, 401, 403, 429, 5xx) with OpenSearch's JSON, plain
text or an HTML page: each answers the 502 or 503 of the one error mapping (a search OpenSearch
refuses as a bad request 400), never a 500, and no error body and no line the process writes
holds any form of the password or of its Basic token. A 200 that is not JSON is the cluster's
fault: a 502 on /search and the 503 of an unhealthy cluster on /health, each with a one-line
reason, never a 500. No OpenSearch is involved: the searches are bm25 without rerank.
"""

from __future__ import annotations

import html
import http.client
import json
import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote

import pytest

from loader.serve.auth import Sessions, session_key
from loader.serve.judge_page import COOKIE
from tests.hostile_upstream import BODY_KINDS, PASSWORD, USER, EchoUpstream, assert_no_credential
from tests.integration.serve.http_server import free_port
from tests.paths import REPO

SEARCH = {"question": "refund", "tenant": "A", "mode": "bm25", "rerank": False}
KEY = "hostile-key-a-Zp3m9QvR2xL7wT4nB8"
SET = "0123456789abcdef0123"
# Every route that asks the cluster, and its body.
ROUTES = (
    ("POST", "/events", {"query_id": "q-1", "action_name": "click"}),
    ("GET", "/log", None),
    ("GET", "/judge", None),
    ("GET", f"/judge/sets/{SET}", None),
    ("GET", f"/judge/sets/{SET}/0", None),
    ("GET", f"/judge/sets/{SET}/0/compare?a=bm25&b=vector", None),
    ("POST", f"/judge/sets/{SET}/0/grade", {"chunk_id": "c-1", "grade": 2}),
    ("POST", f"/judge/sets/{SET}/0/skip", {}),
    ("POST", f"/judge/sets/{SET}/snapshots", {"label": "before"}),
    ("GET", f"/judge/sets/{SET}/snapshots", None),
    ("GET", f"/judge/sets/{SET}/snapshots/{SET}/compare", None),
)
NOT_JSON = (
    "OpenSearch's address answered something that is not OpenSearch's JSON (a proxy's or web "
    "server's page); the server's log has the reason"
)


class ServeProcess:
    """``loader serve`` (``--debug`` or not) in a child process, its output in two files, with
    API keys in ``folder``; ``sign_in`` makes the judging page's session."""

    def __init__(
        self, upstream: EchoUpstream, folder: Path, debug: bool = True, in_url: bool = False
    ) -> None:
        self.port = free_port()
        self.debug = debug
        self.stdout, self.stderr = folder / "stdout", folder / "stderr"
        self.keys = folder / "api-keys.toml"
        self.keys.write_text(f'[keys]\n"{KEY}" = "A"\n', encoding="utf-8")
        self.keys.chmod(0o600)
        self.headers: dict[str, str] = {"Authorization": f"Bearer {KEY}"}
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith(("OPENSEARCH_", "LOADER_"))},
            "PYTHONPATH": str(REPO),  # this checkout's package, from any folder
            "OPENSEARCH_URL": upstream.url,
            "OPENSEARCH_USER": USER,
            "OPENSEARCH_PASSWORD": PASSWORD,
            "LOADER_INDEX_NAME": "hostile-kb",
            "LOADER_RERANK": "false",
            "LOADER_QUERY_LOG": "ubi",
            "LOADER_API_KEYS_FILE": str(self.keys),
        }
        if in_url:  # the credentials in the URL only, percent-encoded
            del env["OPENSEARCH_USER"], env["OPENSEARCH_PASSWORD"]
            env["OPENSEARCH_URL"] = upstream.url.replace(
                "//", f"//{USER}:{quote(PASSWORD, safe='')}@", 1
            )
        command = [sys.executable, "-m", "loader", "serve", "--port", str(self.port)]
        command += ["--debug"] if debug else []
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

    def raw(
        self, method: str, path: str, body: dict | str | None = None, headers: dict | None = None
    ) -> tuple[int, str]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            sent = {"Content-Type": "application/json", **self.headers, **(headers or {})}
            data = body if isinstance(body, str) or body is None else json.dumps(body)
            if method == "POST":
                sent["Content-Length"] = str(len((data or "").encode()))
            connection.request(method, path, data, sent)
            response = connection.getresponse()
            return response.status, response.read().decode("utf-8", "replace")
        finally:
            connection.close()

    def sign_in(self) -> None:
        """A judging session of the key's tenant, and the page's token for its POSTs (the
        signing key is the file beside the API keys: no page of the cluster's is needed)."""
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        form = f"key={KEY}"
        type_ = "application/x-www-form-urlencoded"
        connection.request("POST", "/judge/login", form, {"Content-Type": type_})
        response = connection.getresponse()
        response.read()
        assert response.status == 303
        cookie = response.getheader("set-cookie").split(";")[0].partition("=")[2]
        token = Sessions(session_key(self.keys)).csrf(cookie)
        self.headers |= {"Cookie": f"{COOKIE}={cookie}", "X-CSRF-Token": token}

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


@pytest.fixture(
    scope="module",
    params=[(True, False), (True, True), (False, True)],
    ids=["debug", "debug-password-in-url", "password-in-url"],
)
def server(upstream, tmp_path_factory, request) -> Iterator[ServeProcess]:
    upstream.answer(400, "json")
    debug, in_url = request.param
    running = ServeProcess(upstream, tmp_path_factory.mktemp("serve-hostile"), debug, in_url)
    running.sign_in()
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
@pytest.mark.parametrize("status", [400, 401, 403, 429, 500, 502, 503])
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
    else:  # the cluster's failure; an overloaded OpenSearch (429, its JSON) is worth a retry
        assert search_status == (503 if (status, kind) == (429, "json") else 502), search_text
        one_line_error(search_text)
    texts = [search_text, health_text]
    for method, path, body in ROUTES:
        route_status, text = server.raw(method, path, body)
        assert route_status in (502, 503), (method, path, route_status, text)
        texts.append(one_line_error(text) if "/judge" not in path or method == "POST" else text)
    output = server.output()[before:]
    if server.debug:
        assert f"[status:{status} request:" in output and "DEBUG opensearch: <" in output
    assert "Exception in ASGI application" not in output
    assert_no_credential(*texts, output)


def test_ids_too_long_for_any_document_are_the_callers_fault(server, upstream):
    upstream.answer(400, "json")  # what OpenSearch answers an id over 512 bytes
    long_set = "s" * 4000  # a URL past 4 KB
    for method, path, body in (
        ("GET", f"/judge/sets/{long_set}", None),
        ("GET", f"/judge/sets/{long_set}/0", None),
        ("GET", f"/judge/sets/{long_set}/0/compare", None),
        ("POST", f"/judge/sets/{long_set}/0/grade", {"chunk_id": "c", "grade": 1}),
        ("POST", f"/judge/sets/{long_set}/0/skip", {}),
        ("POST", f"/judge/sets/{SET}/0/grade", {"chunk_id": "c" * 4000, "grade": 1}),
        ("POST", "/events", {"query_id": "q" * 4000, "action_name": "click"}),
    ):
        status, text = server.raw(method, path, body)
        assert 400 <= status < 500, (path[:40], status, text[:200])


def test_a_200_that_is_not_json_is_a_502_with_a_reason_not_a_500(server, upstream):
    upstream.answer(200, "page")
    before = len(server.output())
    status, text = server.raw("POST", "/search", SEARCH)
    assert (status, one_line_error(text)) == (502, NOT_JSON)
    status, text = server.raw("GET", "/health")
    assert (status, one_line_error(text)) == (503, NOT_JSON)
    for method, path, body in ROUTES:
        route_status, text = server.raw(method, path, body)
        assert route_status in (502, 503), (method, path, route_status, text)
        assert NOT_JSON in html.unescape(text)  # the judging page's is HTML
    output = server.output()[before:]
    assert "answered something that is not OpenSearch's JSON while searching" in output
    assert "Traceback" not in output and "AttributeError" not in output
    assert_no_credential(output)
