"""`loader serve` over real HTTP: uvicorn serves the app on 127.0.0.1 in a background thread, the
tests talk to it with http.client, and the app searches the fixture corpus on the session's
cluster. Valid requests return ranked results; bad ones a 4xx with a message, never a 500.
"""

from __future__ import annotations

import http.client
import json
import socket
from collections.abc import Iterator

import pytest

from loader.index.render import ConfigNames
from loader.query.request import MAX_QUESTION_CHARS
from loader.serve.app import create_app
from loader.serve.responses import MAX_BODY_BYTES
from tests.conftest import cleanup_owned
from tests.integration.query.search_corpus import build_corpus
from tests.integration.serve.http_server import Server, free_port


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
        # hostile input the cluster used to answer with a 5xx (issue 13): refused up front
        (
            {"question": "refund", "tenant": "A", "filters": {"published_from": "2020-13-45"}},
            422,
            "published_from '2020-13-45' is not a date; give an ISO date such as 2024-05-01",
        ),
        (
            {"question": "refund", "tenant": "A", "filters": {"published_to": "2024-05-01 10:30"}},
            422,
            "published_to '2024-05-01 10:30' is not a date",
        ),
        (
            {"question": "refund", "tenant": "A", "filters": {"decay_scale": "0d"}},
            422,
            "decay_scale '0d' is out of range; give a duration between 1ms and 10000d",
        ),
        (
            {"question": "refund", "tenant": "A", "filters": {"decay_scale": "1.5d"}},
            422,
            "decay_scale '1.5d' is not a time value; give a whole number and a unit",
        ),
        ({"question": "refund", "tenant": "A", "candidates": 0}, 422, "candidates: Input should"),
        ({"question": "refund", "tenant": "A", "k": 5.0}, 422, "k: Input should be a valid int"),
        (
            {"question": ["refund", "late"], "tenant": "A"},
            422,
            "question: Input should be a valid string",
        ),
        ({"question": {"q": "refund"}, "tenant": "A"}, 422, "question: Input should be a valid"),
        (
            {"question": "refund", "tenant": "A", "query_vector": ["0.1", "0.2"]},
            422,
            "query_vector: Extra inputs are not permitted",
        ),
        (
            {"question": "refund", "tenant": "A", "query_text": ["refund"]},
            422,
            "query_text: Extra inputs are not permitted",
        ),
        ({"question": "refund", "tenant": "A", "rerank": "false"}, 422, "rerank: Input should"),
        (
            {"question": "refund", "tenant": "A", "filters": {"tags": ["a", 1]}},
            422,
            "filters.tags.1: Input should be a valid string",
        ),
        # half a UTF-16 pair, sent as a JSON escape: no UTF-8 (nor the cluster) can carry it
        (
            {"question": "refund \ud800", "tenant": "A"},
            422,
            "question: Input should be a valid string, unable to parse raw data as a unicode",
        ),
        ({"question": "refund", "tenant": "A\udce9"}, 422, "tenant: Input should be a valid str"),
        (
            {"question": "refund", "tenant": "A", "filters": {"tags": ["\udfff"]}},
            422,
            "filters.tags holds text that is not valid UTF-8",
        ),
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


def test_bodies_no_parser_can_read_are_a_422_in_the_apis_shape(server):
    invalid_utf8 = b'{"question": "refund \xff", "tenant": "A"}'
    status, answer = server.request("POST", "/search", invalid_utf8)
    assert (status, answer["error"]) == (422, "the body is not valid UTF-8"), answer
    nested = '{"question": "refund", "tenant": "A", "pad": ' + "[" * 5000 + "]" * 5000 + "}"
    status, answer = server.request("POST", "/search", nested)
    assert status == 422 and answer["error"].startswith("the body is not valid JSON"), answer


def test_a_transfer_encoding_is_refused_whatever_the_content_length_says(server):
    # Content-Length 10 and a chunked body: the HTTP parser reads the chunks, to any length, so
    # a declared small length would let a 21 MB body through to the JSON parser. The answer
    # comes before the body is sent.
    head = (
        b"POST /search HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        b"Content-Length: 10\r\nTransfer-Encoding: chunked\r\n\r\n"
    )
    with socket.create_connection(("127.0.0.1", server.port), timeout=30) as connection:
        connection.sendall(head + f"{MAX_BODY_BYTES:x}\r\n".encode() + b"x" * 1000)
        response = http.client.HTTPResponse(connection)
        response.begin()
        assert response.status == 411
        assert json.loads(response.read()) == {
            "error": "send a Content-Length header and no Transfer-Encoding"
        }


def test_unknown_paths_and_methods_answer_in_the_apis_shape(server):
    assert server.request("GET", "/nope") == (404, {"error": "Not Found"})
    assert server.request("DELETE", "/search") == (405, {"error": "Method Not Allowed"})
    # No redirect to "/search" built from the client's Host header.
    status, _ = server.request("POST", "/search/", {"question": "refund", "tenant": "A"})
    assert status == 404


def test_openapi_describes_the_api(server):
    status, schema = server.request("GET", "/openapi.json")
    assert status == 200
    assert {"/search", "/health"} <= set(schema["paths"])
    request_schema = schema["components"]["schemas"]["SearchRequest"]
    assert {"question", "tenant"} <= set(request_schema["required"])


def test_unreachable_cluster_answers_503_without_its_url(settings):
    port = free_port()
    down = settings.replace(
        opensearch_url=f"http://admin:pa55word@127.0.0.1:{port}", request_timeout=2.0
    )
    with Server(create_app(down, load_models=False)) as running:
        status, text = running.raw("GET", "/health")
        assert status == 503
        assert json.loads(text) == {"error": "cannot connect to OpenSearch; try again later"}
        status, text = running.raw(
            "POST",
            "/search",
            {"question": "refund", "tenant": "A", "mode": "bm25", "rerank": False},
        )
        assert status == 503
        assert json.loads(text) == {"error": "cannot connect to OpenSearch; try again later"}
        for secret in (str(port), "127.0.0.1", "admin", "pa55word", "Traceback"):
            assert secret not in text


def test_a_search_opensearch_refuses_is_a_400_with_its_reason(settings, client, unique_name):
    """A 400 that slips past the checks (here: a stored template that is itself broken) is a
    400 naming OpenSearch's reason, not a 5xx, and carries neither the URL nor internals."""
    from loader.index.apply import apply_config
    from loader.index.render import config_names

    broken = settings.replace(index_name=unique_name)
    apply_config(broken, dimension=384, client=client)
    template = config_names(unique_name).for_search_mode("bm25")[0]
    client.put_script(
        id=template,
        body={
            "script": {
                "lang": "mustache",
                "source": '{"query": {"range": {"published": {"gte": "not-a-date"}}}}',
            }
        },
    )
    with Server(create_app(broken, load_models=False)) as running:
        status, text = running.raw(
            "POST",
            "/search",
            {"question": "refund", "tenant": "A", "mode": "bm25", "rerank": False},
        )
    assert status == 400, text
    error = json.loads(text)["error"]
    assert error.startswith(
        "OpenSearch refused the search as a bad request: parse_exception: failed to parse date "
        "field [not-a-date]"
    ), error
    assert "127.0.0.1" not in text and unique_name not in text and "index_uuid" not in text


def test_an_index_never_applied_is_a_502_without_the_url(settings, unique_name):
    missing = settings.replace(index_name=unique_name)
    with Server(create_app(missing, load_models=False)) as running:
        status, text = running.raw(
            "POST",
            "/search",
            {"question": "refund", "tenant": "A", "mode": "bm25", "rerank": False},
        )
    assert status == 502, text
    assert json.loads(text) == {
        "error": "the index or its search templates are missing on OpenSearch (loader apply)"
    }


@pytest.fixture
def corpus_alias(client, settings, unique_name) -> Iterator[tuple[str, str]]:
    """A second alias of the corpus's index, with none of its pipelines or templates: what a
    test stores there is all the cluster has for it. Yields (alias, index)."""
    index = next(iter(client.indices.get_alias(name=settings.index_name)))
    client.indices.put_alias(index=index, name=unique_name)
    try:
        yield unique_name, index
    finally:
        client.indices.delete_alias(index=index, name=unique_name)


def test_a_search_pipeline_missing_on_the_cluster_is_a_502_not_the_callers_fault(
    client, settings, corpus_alias, embedder
):
    # The index and the hybrid template exist under a new alias, its search pipelines do not
    # (deleted by hand, or an apply that stopped half-way): OpenSearch answers 400 "Pipeline ...
    # is not defined", which is the server's state, not the request's.
    alias, _ = corpus_alias
    hybrid = ConfigNames(settings.index_name).hybrid_template
    stored = client.get_script(id=hybrid)["script"]
    client.put_script(id=ConfigNames(alias).hybrid_template, body={"script": stored})
    app = create_app(settings.replace(index_name=alias), embedder=embedder, load_models=False)
    with Server(app) as running:
        for mode in ("hybrid-rrf", "hybrid-minmax"):
            status, text = running.raw(
                "POST",
                "/search",
                {"question": "refund", "tenant": "A", "mode": mode, "rerank": False},
            )
            assert status == 502, text
            assert json.loads(text) == {
                "error": "the index's search pipelines are missing on OpenSearch (loader apply)"
            }


def test_a_template_that_lost_its_tenant_filter_still_shows_no_other_tenant(
    client, settings, corpus_alias, embedder
):
    # Without the security plugin anyone who reaches the cluster can overwrite _scripts: here a
    # bm25 template that matches every chunk of every tenant, under an alias of the corpus.
    alias, index = corpus_alias
    tampered = {
        "lang": "mustache",
        "source": '{"size": 50, "_source": {"excludes": ["embedding"]}, '
        '"query": {"match_all": {}}}',
    }
    client.put_script(id=ConfigNames(alias).bm25_template, body={"script": tampered})
    app = create_app(settings.replace(index_name=alias), embedder=embedder, load_models=False)
    with Server(app) as running:
        status, body = running.request(
            "POST",
            "/search",
            {"question": "refund", "tenant": "A", "mode": "bm25", "rerank": False, "k": 50},
        )
    assert status == 200, body
    assert body["hits"] and {hit["tenant"] for hit in body["hits"]} == {"A"}
    assert [hit["ranks"]["retrieval"] for hit in body["hits"]] == list(
        range(1, len(body["hits"]) + 1)
    )
    everything = client.search(
        index=index, body={"size": 0, "aggs": {"t": {"terms": {"field": "tenant"}}}}
    )
    assert {b["key"] for b in everything["aggregations"]["t"]["buckets"]} >= {"A", "B"}


def test_serve_starts_without_a_cross_encoder_and_serves_rerank_false(settings, embedder):
    """A reranker_model that does not exist does not stop the server: requests that leave
    rerank out are served without it (rerank = auto) and say so in their warnings; a request
    that asks for a rerank gets a 422 naming the setting, decided from the files at once."""
    no_model = settings.replace(reranker_model="/nonexistent/cross-encoder")
    with Server(create_app(no_model, embedder=embedder)) as running:
        for mode in ("bm25", "hybrid-rrf"):
            status, body = running.request(
                "POST",
                "/search",
                {"question": "E1043", "tenant": "A", "mode": mode, "rerank": False},
            )
            assert status == 200, body
            assert body["reranked"] is False and body["hits"][0]["source"] == "printer.md"
            assert body["warnings"] == []
            assert (body["reranker"], body["rerank_skipped"]) == (None, "off")
        status, body = running.request("POST", "/search", {"question": "E1043", "tenant": "A"})
        assert status == 200 and body["reranked"] is False, body
        assert body["hits"][0]["source"] == "printer.md"
        assert body["warnings"] == [
            "no rerank: rerank is auto and reranker_model '/nonexistent/cross-encoder' is not a "
            "cross-encoder on this server (its log says why)"
        ]
        assert (body["reranker"], body["rerank_skipped"]) == (None, "unavailable")
        status, body = running.request(
            "POST", "/search", {"question": "E1043", "tenant": "A", "rerank": True}
        )
        assert status == 422, body
        # The settings' names, never the server's folders.
        assert body["error"] == (
            "rerank: no reranker the server's settings name (reranker_model, learned_reranker) is "
            'available on this server; send "rerank": false, or leave rerank out (the server then '
            "reranks when it can)"
        )
        # bad input is still a 4xx, checked before the missing model is
        for request, message in (
            (
                {"question": "E1043", "tenant": "A", "filters": {"published_from": "2020-13-45"}},
                "published_from '2020-13-45' is not a date",
            ),
            ({"question": " ", "tenant": "A"}, "question is empty"),
            ({"question": "E1043", "tenant": " "}, "tenant is required"),
        ):
            status, body = running.request("POST", "/search", request)
            assert status == 422 and body["error"].startswith(message), body
        status, body = running.request("GET", "/health")
        assert status == 200, body


def test_a_cross_encoder_that_fails_to_load(settings, embedder, tmp_path):
    """A folder that looks like a model (config.json) but does not load: rerank = auto serves
    without it and warns; a request asking for a rerank gets the 503 of a model that failed."""
    broken = tmp_path / "broken-cross-encoder"
    broken.mkdir()
    (broken / "config.json").write_text('{"num_labels": 1}', encoding="utf-8")
    with Server(create_app(settings.replace(reranker_model=str(broken)), embedder=embedder)) as on:
        status, body = on.request("POST", "/search", {"question": "E1043", "tenant": "A"})
        assert status == 200 and body["reranked"] is False, body
        assert body["warnings"][0].startswith("no rerank: rerank is auto and reranker_model")
        request = {"question": "E1043", "tenant": "A", "rerank": True}
        status, body = on.request("POST", "/search", request)
        assert status == 503 and body["error"].startswith("no reranker available: "), body


def test_the_rerank_setting_is_the_default_of_requests(settings, embedder):
    """rerank=false (LOADER_RERANK=false) turns the rerank off for requests that do not ask; the
    reranker then loads at the first request that asks for one."""
    off = settings.replace(rerank=False)
    with Server(create_app(off, embedder=embedder)) as running:
        status, body = running.request("POST", "/search", {"question": "E1043", "tenant": "A"})
        assert status == 200 and body["reranked"] is False, body
        status, body = running.request(
            "POST", "/search", {"question": "E1043", "tenant": "A", "rerank": True}
        )
        assert status == 200 and body["reranked"] is True, body
    missing = off.replace(reranker_model="/nonexistent/cross-encoder")
    with Server(create_app(missing, embedder=embedder)) as running:
        status, body = running.request("POST", "/search", {"question": "E1043", "tenant": "A"})
        assert status == 200 and body["reranked"] is False, body
