"""Query-side abuse: very long, empty, punctuation-only and non-Latin queries, and injection
attempts in every template parameter, through the stored templates directly, through
``loader.query.search.search`` and through ``loader search``.

Each attempt gives a normal result or a clear error — never a server error (HTTP 5xx) and never a
document of another tenant. The fixture index holds two tenants pushed with ``loader.ingest.sync.push``;
tenant A's chunks all carry the word SECRET-A so a leak is easy to see.
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
from loader.errors import ClusterError, ConfigError
from loader.index.apply import apply_config
from loader.index.render import config_names
from loader.ingest.sync import push
from loader.query.search import SEARCH_MODES, SearchFilters, search
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


def run_search(settings, client, embedder, question: str, **kwargs) -> set[str] | str:
    """``loader.query.search.search`` without rerank; the hits' tenants, or the error message."""
    try:
        result = search(
            question, settings, client=client, embedder=embedder, rerank=False, k=20, **kwargs
        )
    except (ConfigError, ClusterError) as error:
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
        long = search(
            LONG, settings, client=client, embedder=embedder, rerank=False, mode=mode, tenant="B"
        )
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
