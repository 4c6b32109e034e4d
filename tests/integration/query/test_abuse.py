"""Query-side abuse: very long, empty, punctuation-only and non-Latin queries, and injection
attempts in every template parameter, through the stored templates directly, through
``loader.query.search.search``, through ``loader search`` and through ``loader serve`` (with and
without API keys).

Each attempt gives a normal result or a clear error — never a server error (HTTP 5xx) and never a
document of another tenant. One exception is known and asserted as such: OpenSearch's hybrid query
answers ``size: 0`` with a 500 when an application calls the stored template directly (the library,
the CLI and serve refuse a size below 1 before any request). The fixture index holds two tenants
pushed with ``loader.ingest.sync.push``; tenant A's chunks all carry the word SECRET-A so a leak is
easy to see.
"""

from __future__ import annotations

import contextlib
import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import opensearchpy
import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.errors import ClusterError, ConfigError, ModelError, QueryError
from loader.index.apply import apply_config
from loader.index.render import config_names
from loader.ingest.sync import push
from loader.query.request import SearchFilters, SearchRequest
from loader.query.search import search
from loader.settings import SEARCH_MODES
from tests.conftest import cleanup_owned

TENANT_A = {
    "refunds.md": "# Refund policy\n\n## Late deliveries\n\nSECRET-A: late orders are refunded "
    "in full. 退款 政策. سياسة الاسترداد. 🙂 refund.\n",
    "printer.md": "# Printer\n\n## Errors\n\nSECRET-A: error E1043 means the tray is empty.\n",
}
TENANT_B = {
    "refunds.md": "# Refund policy\n\n## Late deliveries\n\nTenant B: late orders get a voucher. "
    "退款 政策. سياسة الاسترداد. 🙂 refund.\n",
    "printer.md": "# Printer\n\n## Errors\n\nTenant B: error E1043 means the tray is jammed.\n",
}

LONG = ("refund late delivery order E1043 " * 2000)[:50_000]
QUESTIONS = {
    "50k chars": LONG,
    "50k CJK": "退款政策说明" * 8334,
    "50k emoji": "🙂" * 50_000,
    "50k no spaces": "a" * 50_000,
    "punctuation": "?!.,;:-_()[]{}<>\"'`~@#$%^&*+=|\\/" * 5,
    "question marks": "???",
    "chinese": "退款政策",
    "arabic": "سياسة الاسترداد",
    "emoji": "🙂🙂 refund 🙂",
    "zero width": "\u200b\u200d\ufeff",
    "control": "\u0000\u0001\u001b[31m",
    "lucene syntax": 'tenant:A OR (refund AND "late") ~2 ^10 field:* /.*/',
}
BLANK = ["", " ", "\n\t", "\u3000"]

INJECTIONS = [
    '"',
    '\\"',
    '"}}',
    "}}",
    "{{",
    "{{tenant}}",
    "{{#toJson}}tenant{{/toJson}}",
    "{{#toJson}}query_vector{{/toJson}}",
    "{{/tenant}}{{^tenant}}",
    "{{{tenant}}}",
    "{{=<% %>=}}<%tenant%>",
    'A" OR "B',
    'B", "A',
    'A" OR "B"',
    '"}}, {"match_all": {}}, {"term": {"tenant": "',
    '"}}]}}, "query": {"match_all": {}}, "x": {"y": [{"z": "',
    '{"match_all": {}}',
    "*",
    "A*",
    "\\u0022",
    "\n\t\u0000\u2028",
]
NUMBERS = ['10, "query": {"match_all": {}}', "10}}", "-1", "1e9", "99999999999", "A", "", "1.5"]
BAD_DATES = ["2020-13-45", "2023-02-29", "2024-05-01 10:30", "2024-05-01T10:30:00+19:00"]
BAD_SCALES = ["0d", "1nanos", "1.5d"]


def write(folder: Path, files: dict[str, str]) -> Path:
    folder.mkdir(parents=True)
    for name, text in files.items():
        (folder / name).write_text(text, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def settings(client, base_settings, embedder, tmp_path_factory) -> Iterator[Any]:
    """Two tenants pushed into a fresh alias owned by this module."""
    alias = f"t-abuse-{uuid.uuid4().hex[:8]}"
    settings = base_settings.replace(index_name=alias)
    root = tmp_path_factory.mktemp("abuse")
    try:
        apply_config(settings, dimension=embedder.dimension, client=client)
        for files, tenant in ((TENANT_A, "A"), (TENANT_B, "B")):
            report = push(
                write(root / f"kb-{tenant.lower()}", files),
                settings,
                tenant=tenant,
                client=client,
                embedder=embedder,
            )
            assert report.failed == 0 and report.added == 2, report
        yield settings
    finally:
        cleanup_owned(client, alias)


def template_call(client, settings, mode: str, params: dict) -> dict:
    """One stored-template search, as any application would send it."""
    template, pipeline = config_names(settings.index_name).for_search_mode(mode)
    return client.search_template(
        index=settings.index_name,
        body={"id": template, "params": params},
        params={"search_pipeline": pipeline} if pipeline else {},
    )


def outcome(client, settings, mode: str, params: dict) -> set[str] | int:
    """The tenants of the hits, or the status code of a refusal (4xx only: a 5xx fails)."""
    try:
        response = template_call(client, settings, mode, params)
    except opensearchpy.TransportError as exc:
        assert isinstance(exc.status_code, int) and 400 <= exc.status_code < 500, (
            mode,
            {k: str(v)[:80] for k, v in params.items()},
            exc.status_code,
            str(exc.info)[:300],
        )
        return exc.status_code
    hits = response["hits"]["hits"]
    assert all("SECRET-A" not in json.dumps(hit["_source"]) for hit in hits), (mode, params)
    return {hit["_source"]["tenant"] for hit in hits}


def base_params(embedder, question: str = "refund for a late delivery") -> dict:
    return {
        "query_text": question,
        "query_vector": embedder.embed([question])[0].tolist(),
        "tenant": "B",
        "size": 10,
        "k": 10,
    }


def test_abusive_query_text_through_the_templates(client, settings, embedder):
    base = base_params(embedder)
    for mode in SEARCH_MODES:
        for name, question in {**QUESTIONS, **{repr(blank): blank for blank in BLANK}}.items():
            result = outcome(client, settings, mode, base | {"query_text": question})
            assert result == {"B"} or isinstance(result, int) or result == set(), (mode, name)
        # the plain question still finds tenant B, and only tenant B
        assert outcome(client, settings, mode, base) == {"B"}


def test_injection_in_every_template_parameter(client, settings, embedder):
    base = base_params(embedder)
    cases: list[dict] = []
    for payload in INJECTIONS:
        for key in ("query_text", "lang", "published_from", "published_to", "decay_scale"):
            cases.append(base | {key: payload})
        cases += [
            base | {"tags": [payload]},
            base | {"tags": ["billing", payload]},
            base | {"tags": payload},
            base | {"tenant": payload},
            base | {"tenant": "B" + payload},
            base | {"tenant": payload + "B"},
            base | {"query_vector": payload},
        ]
    for payload in NUMBERS:
        cases += [base | {"size": payload}, base | {"k": payload}]
    cases += [
        base | {"tenant": ["A", "B"]},
        base | {"tenant": {"term": "A"}},
        base | {"tenant": True},
        base | {"tenant": 1},
        base | {"query_vector": [1e308] * len(base["query_vector"])},
        base | {"query_vector": [0.0] * len(base["query_vector"])},
        base | {"query_vector": [0.1, 0.2]},  # another dimension
        base | {"query_vector": []},
        base | {"query_vector": ["a"] * len(base["query_vector"])},
        base | {"size": 10_000, "k": 10_000},
        # dates and scales OpenSearch refuses (400): the library refuses them before any request
        *(base | {"published_from": date} for date in BAD_DATES),
        *(base | {"published_to": date} for date in BAD_DATES),
        *(base | {"decay_scale": scale} for scale in BAD_SCALES),
        base | {"k": 0},
        base | {"k": "0"},
    ]
    statuses: dict[int, int] = {}
    answered = 0
    for mode in SEARCH_MODES:
        for params in cases:
            result = outcome(client, settings, mode, params)
            if isinstance(result, int):
                statuses[result] = statuses.get(result, 0) + 1
                continue
            assert result <= {"B"}, (mode, params, result)
            answered += result == {"B"}
    assert statuses and set(statuses) <= {400, 404}  # refused as bad requests
    assert answered > 0  # harmless text still finds tenant B


def test_what_opensearch_makes_of_wrong_types_in_the_templates(client, settings, embedder):
    """Stored templates called directly: what OpenSearch does with the wrong JSON types (the
    README says so; the library and serve accept only the right ones)."""
    base = base_params(embedder)
    for mode in ("vector", "hybrid-rrf", "hybrid-minmax"):
        # numeric strings: parsed as numbers by OpenSearch, the search runs as with floats
        as_text = [str(value) for value in base["query_vector"]]
        assert outcome(client, settings, mode, base | {"query_vector": as_text}) == {"B"}
    for mode in ("bm25", "hybrid-rrf"):
        # a list or object query_text is rendered as Java's text of it ({0=refund, 1=late}) and
        # searched as such; the tenant filter still holds
        for text in (["refund", "late"], {"a": "refund"}, 5, True):
            result = outcome(client, settings, mode, base | {"query_text": text})
            assert isinstance(result, set) and result <= {"B"}, (mode, text, result)


def test_size_zero_through_the_templates(client, settings, embedder):
    base = base_params(embedder)
    for mode in ("bm25", "vector"):
        for size in (0, "0"):
            assert outcome(client, settings, mode, base | {"size": size}) == set()
    for mode in ("hybrid-rrf", "hybrid-minmax"):
        for size in (0, "0"):
            # The fusion pipelines' request processor refuses it before the hybrid query runs
            # (left to the query, OpenSearch answers 500: "score normalization processor cannot
            # produce final query result").
            with pytest.raises(opensearchpy.TransportError) as refused:
                template_call(client, settings, mode, base | {"size": size})
            assert refused.value.status_code == 400, (mode, size, refused.value.info)
            assert "size must be at least 1 for a hybrid search" in str(refused.value.info)
        assert outcome(client, settings, mode, base | {"size": 1}) == {"B"}


def test_size_zero_is_refused_before_any_request(settings, client, embedder):
    for mode in SEARCH_MODES:
        for name in ("k", "candidates"):
            message = run_search(
                settings, client, embedder, "refund", tenant="B", mode=mode, **{name: 0}
            )
            assert message == f"{name} must be a positive whole number, got 0"


def run_search(settings, client, embedder, question: str, **kwargs) -> set[str] | str:
    """``loader.query.search.search`` without rerank; the hits' tenants, or the error message."""
    try:
        kwargs = {"rerank": False, "k": 20} | kwargs
        request = SearchRequest.from_settings(settings, question, **kwargs)
        result = search(request, settings, client=client, embedder=embedder)
    except (ConfigError, QueryError, ClusterError) as error:
        message = str(error)
        assert " answered 5" not in message, message  # never a server error
        assert "\n" not in message
        return message
    assert all("SECRET-A" not in hit.text for hit in result.hits)
    return {hit.tenant for hit in result.hits}


def test_abusive_questions_through_loader_search(settings, client, embedder):
    for mode in SEARCH_MODES:
        for name, question in QUESTIONS.items():
            result = run_search(settings, client, embedder, question, tenant="B", mode=mode)
            assert isinstance(result, set) and result <= {"B"}, (mode, name, result)
        for question in BLANK:
            result = run_search(settings, client, embedder, question, tenant="B", mode=mode)
            assert result == "question is empty; give the text to search for"
        request = SearchRequest.from_settings(settings, LONG, rerank=False, mode=mode, tenant="B")
        long = search(request, settings, client=client, embedder=embedder)
        assert long.truncated and len(long.question) < len(LONG)


def test_injection_through_loader_search(settings, client, embedder):
    refused = 0
    for mode in SEARCH_MODES:
        for payload in INJECTIONS:
            outcomes = [
                run_search(settings, client, embedder, payload, tenant="B", mode=mode),
                run_search(settings, client, embedder, "refund", tenant=payload, mode=mode),
                run_search(settings, client, embedder, "refund", tenant="B" + payload, mode=mode),
            ]
            for name in ("lang", "published_from", "published_to", "decay_scale"):
                outcomes.append(
                    run_search(
                        settings, client, embedder, "refund", tenant="B", mode=mode,
                        filters=SearchFilters(**{name: payload}),
                    )
                )  # fmt: skip
            outcomes.append(
                run_search(
                    settings, client, embedder, "refund", tenant="B", mode=mode,
                    filters=SearchFilters(tags=("billing", payload)),
                )
            )  # fmt: skip
            for result in outcomes:
                if isinstance(result, str):
                    refused += 1
                else:
                    assert result <= {"B"}, (mode, payload, result)
    assert refused > 0  # malformed dates and scales are refused before any request


def test_dates_scales_and_types_opensearch_refuses_through_loader_search(
    settings, client, embedder
):
    expected = {
        "published_from": "published_from '{}' is not a date; give an ISO date such as 2024-05-01",
        "published_to": "published_to '{}' is not a date; give an ISO date such as 2024-05-01",
    }
    for mode in SEARCH_MODES:
        for name, message in expected.items():
            for date in BAD_DATES:
                result = run_search(
                    settings, client, embedder, "refund", tenant="B", mode=mode,
                    filters=SearchFilters(**{name: date}),
                )  # fmt: skip
                assert isinstance(result, str) and result.startswith(message.format(date))
        for scale in BAD_SCALES:
            result = run_search(
                settings, client, embedder, "refund", tenant="B", mode=mode,
                filters=SearchFilters(decay_scale=scale),
            )  # fmt: skip
            assert isinstance(result, str) and result.startswith(f"decay_scale '{scale}' is ")
        for question in (["refund", "late"], {"q": "refund"}, 5):
            result = run_search(settings, client, embedder, question, tenant="B", mode=mode)
            assert result.startswith(f"question must be a string, got {type(question).__name__}")


def cli_search(settings, tmp_path: Path, *args: str):
    with contextlib.chdir(tmp_path):
        return CliRunner().invoke(
            cli,
            ["search", *args, "--index", settings.index_name, "--no-rerank", "--json"],
            env={"OPENSEARCH_URL": settings.opensearch_url},
        )


@pytest.mark.parametrize("mode", ["bm25", "hybrid-rrf"])
def test_abuse_through_the_cli(settings, tmp_path, mode):
    for name, question in QUESTIONS.items():
        if "\u0000" in question:
            continue  # a NUL cannot be a command-line argument
        result = cli_search(settings, tmp_path, question, "--tenant", "B", "--mode", mode)
        assert result.exit_code == 0, (name, result.output)
        hits = json.loads(result.stdout)["hits"]
        assert {hit["tenant"] for hit in hits} <= {"B"} and "SECRET-A" not in result.stdout
    for question in BLANK:
        result = cli_search(settings, tmp_path, question, "--tenant", "B", "--mode", mode)
        assert result.exit_code == ConfigError.exit_code
        assert result.stderr == "Error: question is empty; give the text to search for\n"
    for tenant in ('A" OR "B', 'B", "A', "{{tenant}}", "*", '"}}, {"match_all": {}}, {"x": "'):
        result = cli_search(settings, tmp_path, "refund", "--tenant", tenant, "--mode", mode)
        assert result.exit_code == 0, result.output
        assert json.loads(result.stdout)["hits"] == []  # no tenant has that name
    result = cli_search(settings, tmp_path, "refund", "--tenant", "", "--mode", mode)
    assert result.exit_code == ConfigError.exit_code
    assert result.stderr.startswith("Error: tenant is required")
    result = cli_search(
        settings, tmp_path, "refund", "--tenant", "B", "--published-from", '2024"}}', "--mode", mode
    )
    assert result.exit_code == ConfigError.exit_code and result.stderr.count("\n") == 1
    assert "published_from" in result.stderr


def test_the_rerank_setting_is_the_cli_default(settings, tmp_path):
    """LOADER_RERANK=false turns the rerank of `loader search` off (no cross-encoder needed);
    --rerank still asks for one (an error without it); the default, auto, searches without it
    and warns."""
    env = {
        "OPENSEARCH_URL": settings.opensearch_url,
        "LOADER_RERANKER_MODEL": str(tmp_path / "no-such-cross-encoder"),
    }
    args = ["search", "refund", "--tenant", "B", "--index", settings.index_name, "--json"]
    with contextlib.chdir(tmp_path):
        off = CliRunner().invoke(cli, args, env={**env, "LOADER_RERANK": "false"})
        asked = CliRunner().invoke(cli, [*args, "--rerank"], env={**env, "LOADER_RERANK": "false"})
        default = CliRunner().invoke(cli, args, env=env)
    assert off.exit_code == 0, off.output
    assert json.loads(off.stdout)["reranked"] is False and json.loads(off.stdout)["warnings"] == []
    assert asked.exit_code == ModelError.exit_code, asked.output
    assert asked.stderr.startswith("Error: rerank is on but reranker_model ")
    assert default.exit_code == 0, default.output
    assert json.loads(default.stdout)["reranked"] is False
    assert json.loads(default.stdout)["warnings"][0].startswith("no rerank (rerank = auto): ")


def serve_cases(embedder) -> list[dict]:
    """Every hostile body this suite knows, as ``loader serve`` would receive it."""
    base = {"question": "refund for a late delivery", "tenant": "B", "rerank": False}
    cases: list[dict] = [base | {"question": q} for q in QUESTIONS.values()]
    cases += [base | {"question": q} for q in BLANK]
    for payload in INJECTIONS:
        cases += [
            base | {"question": payload},
            base | {"tenant": payload},
            base | {"tenant": "B" + payload},
            base | {"mode": payload},
            base | {"expand": payload},
            base | {"filters": {"tags": [payload]}},
            base | {"filters": {"tags": payload}},
        ]
        for name in ("lang", "published_from", "published_to", "decay_scale"):
            cases.append(base | {"filters": {name: payload}})
    for payload in NUMBERS:
        for name in ("k", "candidates"):
            cases.append(base | {name: payload})
            with contextlib.suppress(ValueError):
                cases.append(base | {name: json.loads(payload)})
    vector = embedder.embed(["refund"])[0].tolist()
    cases += [
        base | {"k": 0},
        base | {"candidates": 0},
        base | {"size": 0},
        base | {"k": 10**9},
        base | {"k": 5.0},
        base | {"k": True},
        *(base | {"filters": {"published_from": date}} for date in BAD_DATES),
        *(base | {"filters": {"published_to": date}} for date in BAD_DATES),
        *(base | {"filters": {"decay_scale": scale}} for scale in BAD_SCALES),
        base | {"query_vector": [str(value) for value in vector]},
        base | {"query_vector": vector},
        base | {"query_text": ["refund", "late"]},
        base | {"question": ["refund", "late"]},
        base | {"question": {"text": "refund"}},
        base | {"question": 5},
        base | {"tenant": ["A", "B"]},
        base | {"tenant": {"term": "A"}},
        base | {"tenant": None},
        base | {"rerank": "false"},
        base | {"filters": None},
        base | {"filters": {"tags": [None]}},
        base | {"question": "refund", "rerank": True, "k": 3, "candidates": 5},
        base | {"question": '"}}, {"match_all": {}}', "rerank": True, "k": 3, "candidates": 5},
    ]
    return cases


def assert_no_5xx_through_serve(server, cases, headers=None) -> dict[int, int]:
    statuses: dict[int, int] = {}
    for number, body in enumerate(cases):
        body = body if "mode" in body else body | {"mode": SEARCH_MODES[number % len(SEARCH_MODES)]}
        status, text = server.raw("POST", "/search", body, headers)
        statuses[status] = statuses.get(status, 0) + 1
        summary = {key: str(value)[:60] for key, value in body.items()}
        assert status < 500, (summary, status, text[:300])
        assert "SECRET-A" not in text, summary
        assert "Traceback" not in text and ":9200" not in text, (summary, text[:300])
        answer = json.loads(text)
        if status == 200:
            assert {hit["tenant"] for hit in answer["hits"]} <= {"B"}, summary
        else:
            assert answer["error"], summary
    return statuses


@pytest.fixture(scope="module")
def serve_app(settings, embedder, cross_encoder_path):
    from loader.serve.app import create_app

    return lambda **changes: create_app(
        settings.replace(reranker_model=cross_encoder_path, **changes), embedder=embedder
    )


def test_zero_5xx_through_loader_serve(serve_app, embedder):
    from tests.integration.serve.http_server import Server

    with Server(serve_app()) as server:
        statuses = assert_no_5xx_through_serve(server, serve_cases(embedder))
    assert statuses[200] > 0 and statuses[422] > 0 and statuses[413] > 0, statuses
    assert set(statuses) <= {200, 413, 422}, statuses


def test_zero_5xx_through_loader_serve_with_api_keys(serve_app, embedder, tmp_path):
    from tests.integration.serve.http_server import Server

    key = "abuse-key-b-" + uuid.uuid4().hex
    keys = tmp_path / "keys.toml"
    keys.write_text(f'[keys]\n"{key}" = "B"\n', encoding="utf-8")
    keys.chmod(0o600)
    cases = serve_cases(embedder)
    with Server(serve_app(api_keys_file=str(keys))) as server:
        statuses = assert_no_5xx_through_serve(server, cases, {"Authorization": f"Bearer {key}"})
        assert statuses[403] > 0 and statuses[200] > 0, statuses  # injected tenants: 403
        assert set(statuses) <= {200, 403, 413, 422}, statuses
        no_key = assert_no_5xx_through_serve(server, cases[:20])
        assert no_key == {401: 20}
        injected = [{"Authorization": f"Bearer {p}"} for p in INJECTIONS if "\n" not in p]
        for headers in [
            *injected,
            {"X-API-Key": key + '"}'},
            {"Authorization": "Bearer " + key[:-1]},
        ]:
            assert assert_no_5xx_through_serve(server, cases[:1], headers) == {401: 1}
