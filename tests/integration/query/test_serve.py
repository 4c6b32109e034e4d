"""`loader serve` over real HTTP: uvicorn serves the app on 127.0.0.1 in a background thread, the
tests talk to it with http.client, and the app searches the fixture corpus on the session's
cluster. Valid requests return ranked results; bad ones a 4xx with a message, never a 500.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Iterator

import pytest

from loader.query.search import MAX_QUESTION_CHARS
from loader.query.serve import MAX_BODY_BYTES, create_app
from tests.conftest import cleanup_owned
from tests.integration.query.search_corpus import build_corpus

uvicorn = pytest.importorskip("uvicorn")


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class Server:
    """A uvicorn server of an app in a daemon thread, on 127.0.0.1."""

    def __init__(self, app) -> None:
        self.port = _free_port()
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        deadline = time.monotonic() + 120  # the models load at startup
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.05)
        return self

    def __exit__(self, *exc_info) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    def request(self, method: str, path: str, body=None, headers=None) -> tuple[int, dict]:
        connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        try:
            if isinstance(body, dict | list):
                body = json.dumps(body)
            all_headers = {"Content-Type": "application/json", **(headers or {})}
            connection.request(method, path, body=body, headers=all_headers)
            response = connection.getresponse()
            return response.status, json.loads(response.read() or b"null")
        finally:
            connection.close()


@pytest.fixture(scope="module")
def settings(client, base_settings, tmp_path_factory, embedder, cross_encoder_path) -> Iterator:
    built = None
    try:
        built = build_corpus(client, base_settings, tmp_path_factory.mktemp("serve"), embedder)
        yield built.replace(reranker_model=cross_encoder_path)
    finally:
        if built is not None:
            cleanup_owned(client, built.index_name)


@pytest.fixture(scope="module")
def server(settings) -> Iterator[Server]:
    with Server(create_app(settings)) as running:
        yield running


def test_health_reports_the_cluster(server):
    status, body = server.request("GET", "/health")
    assert status == 200 and body["status"] == "ok" and body["cluster"] in ("green", "yellow")


def test_search_returns_ranked_results(server):
    status, body = server.request(
        "POST", "/search", {"question": "E1043", "tenant": "A", "mode": "bm25", "rerank": False}
    )
    assert status == 200, body
    top = body["hits"][0]
    assert (top["source"], top["tenant"], top["ranks"]["retrieval"]) == ("printer.md", "A", 1)
    assert body["reranked"] is False and body["timings"]["total_ms"] > 0


def test_search_with_rerank_and_every_option(server):
    request = {
        "question": "my food came really late, can I get my money back?",
        "tenant": "A",
        "mode": "hybrid-rrf",
        "rerank": True,
        "k": 3,
        "candidates": 20,
        "filters": {"tags": []},
        "merge_adjacent": True,
        "prompt_order": False,
    }
    status, body = server.request("POST", "/search", request)
    assert status == 200, body
    assert body["reranked"] is True and 1 <= len(body["hits"]) <= 3
    assert [hit["ranks"]["rerank"] for hit in body["hits"]] == sorted(
        hit["ranks"]["rerank"] for hit in body["hits"]
    )
    assert all(hit["tenant"] == "A" for hit in body["hits"])


def test_tenants_stay_apart(server):
    for tenant in ("A", "B"):
        status, body = server.request(
            "POST", "/search", {"question": "refund", "tenant": tenant, "k": 10, "rerank": False}
        )
        assert status == 200, body
        assert {hit["tenant"] for hit in body["hits"]} <= {tenant}


@pytest.mark.parametrize(
    ("body", "status", "message"),
    [
        ({"question": "refund"}, 422, "tenant: Field required"),
        ({"question": "refund", "tenant": ""}, 422, "tenant:"),
        ({"tenant": "A"}, 422, "question: Field required"),
        ({"question": "refund", "tenant": "A", "k": "five"}, 422, "k:"),
        ({"question": "refund", "tenant": "A", "k": "5"}, 422, "k:"),  # strings are not numbers
        ({"question": "refund", "tenant": "A", "k": 0}, 422, "k:"),
        ({"question": "refund", "tenant": "A", "mode": "fuzzy"}, 422, "mode:"),
        ({"question": "refund", "tenant": ["A", "B"]}, 422, "tenant:"),
        ({"question": "refund", "tenant": "A", "filters": {"tags": "x"}}, 422, "filters.tags"),
        ({"question": "refund", "tenant": "A", "size": 10}, 422, "size:"),  # unknown field
        (
            {"question": "refund", "tenant": "A", "filters": {"published_from": "yesterday"}},
            422,
            "published_from",
        ),
        ({"question": "x" * (MAX_QUESTION_CHARS + 1), "tenant": "A"}, 413, "question:"),
        (["refund"], 422, "valid dictionary"),
    ],
)
def test_bad_requests_get_a_4xx_with_a_message(server, body, status, message):
    got, answer = server.request("POST", "/search", body)
    assert got == status, answer
    assert message in answer["error"], answer


def test_malformed_json_and_oversized_bodies(server):
    status, answer = server.request("POST", "/search", '{"question": "refund", "tenant": ')
    assert status == 422 and "not valid JSON" in answer["error"]
    huge = json.dumps({"question": "refund", "tenant": "A", "pad": "x" * MAX_BODY_BYTES})
    status, answer = server.request("POST", "/search", huge)
    assert status == 413 and "larger than" in answer["error"]


def test_openapi_describes_the_api(server):
    status, schema = server.request("GET", "/openapi.json")
    assert status == 200
    assert {"/search", "/health"} <= set(schema["paths"])
    request_schema = schema["components"]["schemas"]["SearchRequest"]
    assert {"question", "tenant"} <= set(request_schema["required"])


def test_unreachable_cluster_answers_503(settings):
    down = settings.replace(opensearch_url=f"http://127.0.0.1:{_free_port()}", request_timeout=2.0)
    with Server(create_app(down, load_models=False)) as running:
        status, body = running.request("GET", "/health")
        assert status == 503 and "cannot connect" in body["error"]
        status, body = running.request(
            "POST",
            "/search",
            {"question": "refund", "tenant": "A", "mode": "bm25", "rerank": False},
        )
        assert status == 503 and "cannot connect" in body["error"]
