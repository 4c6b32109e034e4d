"""`loader search` through click's CliRunner on the fixture corpus of search_corpus.py: exact output
lines, JSON, the default tenant, tenant isolation and filters, rerank, and clear errors."""

from __future__ import annotations

import json
import re

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.models.rerank import load_reranker
from loader.query.request import SearchRequest
from loader.query.search import search
from tests.conftest import cleanup_owned
from tests.integration.query.search_corpus import (
    INJECTIONS,
    build_corpus,
)


@pytest.fixture(scope="module")
def settings(client, base_settings, tmp_path_factory, embedder):
    built = None
    try:
        built = build_corpus(client, base_settings, tmp_path_factory.mktemp("cli-corpus"), embedder)
        yield built
    finally:
        if built is not None:
            cleanup_owned(client, built.index_name)


@pytest.fixture
def invoke(settings, tmp_path):
    config = tmp_path / "loader.toml"
    config.write_text("", encoding="utf-8")  # no loader.toml of the working directory

    def run(*args: str, env: dict[str, str] | None = None):
        arguments = [
            "search",
            *args,
            "--url",
            settings.opensearch_url,
            "--index",
            settings.index_name,
            "--config",
            str(config),
        ]
        return CliRunner().invoke(cli, arguments, env=env, catch_exceptions=False)

    return run


SUMMARY = re.compile(
    r"^(\d+) results? of (\d+) candidates? for tenant '(.*)' \((\S+), (reranked|no rerank)\) in "
    r"[\d.]+ ms: embed [\d.]+ ms, retrieve [\d.]+ ms, rerank [\d.]+ ms$"
)


def test_bm25_prints_exact_lines(invoke, settings, client):
    result = invoke("E1043", "--tenant", "A", "--mode", "bm25", "--no-rerank")
    assert result.exit_code == 0, result.output
    request = SearchRequest.from_settings(settings, "E1043", tenant="A", mode="bm25", rerank=False)
    expected = search(request, settings, client=client)
    (hit,) = expected.hits
    lines = result.output.splitlines()
    assert lines[:3] == [
        "1. Printer manual > Error codes  (printer.md)",
        f"   chunk {hit.chunk_id} | retrieval #1 {hit.scores['retrieval']:.4f}",
        "   Error E1043 means the paper tray is empty. Refill the tray and press resume.",
    ]
    assert SUMMARY.match(lines[3]).groups() == ("1", "1", "A", "bm25", "no rerank")
    assert len(lines) == 4


def test_default_tenant_is_the_tenant_setting(invoke):
    result = invoke("E1043", "--mode", "bm25", "--no-rerank")
    assert result.exit_code == 0, result.output
    (line,) = result.output.splitlines()
    assert SUMMARY.match(line).groups() == ("0", "0", "default", "bm25", "no rerank")


def test_json_prints_the_full_result(invoke, settings, client, embedder):
    result = invoke("late delivery refund", "--tenant", "A", "--no-rerank", "--k", "2", "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    request = SearchRequest.from_settings(
        settings, "late delivery refund", tenant="A", rerank=False, k=2
    )
    expected = search(request, settings, client=client).to_dict()
    assert set(data) == set(expected)
    for key in ("question", "queries", "mode", "tenant", "reranked", "candidates", "truncated"):
        assert data[key] == expected[key], key
    assert [h["chunk_id"] for h in data["hits"]] == [h["chunk_id"] for h in expected["hits"]]
    top = data["hits"][0]
    assert top["source"] == "refunds.md" and top["heading_path"] == ["Late deliveries"]
    assert top["title"] == "Refund policy" and top["text"].startswith("Refund policy > Late")
    assert top["ranks"] == {"retrieval": 1} and data["mode"] == "hybrid-rrf"
    assert set(data["timings"]) >= {"embed_ms", "retrieve_ms", "rerank_ms", "total_ms"}


def _tenants(result) -> set[str] | None:
    """Tenants of the printed hits, or None for a refusal: a one-line error on stderr and, as
    the command was given --json, the same error as JSON on stdout."""
    if result.exit_code != 0:
        assert result.exit_code == 2, result.output
        (line,) = result.stderr.splitlines()
        assert line.startswith("Error: ")
        assert json.loads(result.stdout) == {"error": line[len("Error: ") :], "exit_code": 2}
        return None
    return {hit["tenant"] for hit in json.loads(result.stdout)["hits"]}


def test_tenant_isolation_and_injection_through_the_cli(invoke):
    base = ("--no-rerank", "--json", "--k", "50")
    assert _tenants(invoke("refund", "--tenant", "B", *base)) == {"B"}
    refused = 0
    for payload in INJECTIONS[:6]:
        attempts = [
            invoke(payload, "--tenant", "B", *base),
            invoke("refund", "--tenant", payload, *base),
            invoke("refund", "--tenant", "B", "--lang", payload, *base),
            invoke("refund", "--tenant", "B", "--tag", payload, "--tag", "billing", *base),
            invoke("refund", "--tenant", "B", "--published-from", payload, *base),
            invoke("refund", "--tenant", "B", "--decay-scale", payload, *base),
        ]
        for attempt in attempts:
            tenants = _tenants(attempt)
            if tenants is None:
                refused += 1
            else:
                assert tenants <= {"B"}, (payload, attempt.output[:300])
    assert refused > 0


def test_filters_through_the_cli(invoke):
    def sources(*args: str) -> set[str]:
        result = invoke("refund", "--tenant", "A", "--mode", "vector", "--no-rerank", "--json",
                        "--k", "50", *args)  # fmt: skip
        assert result.exit_code == 0, result.output
        return {hit["source"] for hit in json.loads(result.output)["hits"]}

    assert sources("--lang", "fr") == {"remboursement.md"}
    assert sources("--tag", "support") == {"printer.md"}
    assert sources("--tag", "support", "--tag", "account") == {"printer.md", "security.md"}
    assert sources("--published-to", "2020-01-01") == {"printer.md"}
    assert "printer.md" not in sources("--published-from", "2024-01-01")
    assert sources("--decay-scale", "180d") == set(sources())


def test_rerank_through_the_cli(invoke, settings, client, cross_encoder_path):
    env = {"LOADER_RERANKER_MODEL": cross_encoder_path}
    result = invoke("refund for a late order", "--tenant", "A", "--k", "3", "--json", env=env)
    assert result.exit_code == 0, result.output
    data = json.loads(result.output)
    reranked = settings.replace(reranker_model=cross_encoder_path)
    request = SearchRequest.from_settings(reranked, "refund for a late order", tenant="A", k=3)
    expected = search(request, reranked, client=client, reranker=load_reranker(reranked))
    assert [h["chunk_id"] for h in data["hits"]] == [h.chunk_id for h in expected.hits]
    assert [h["ranks"]["rerank"] for h in data["hits"]] == [1, 2, 3]
    assert data["reranked"] is True and data["rerank_query"] == "refund for a late order"
    assert data["warnings"] == []  # rerank = auto, and the model is there
    assert data["reranker"] == {"kind": "cross-encoder", "model": cross_encoder_path}
    assert data["rerank_skipped"] == ""


def test_rerank_auto_without_a_cross_encoder_searches_and_says_so(invoke, tmp_path):
    """The default (rerank = auto) with no cross-encoder on the machine: the search answers,
    not reranked, and one line on stderr (and the JSON's warnings) says why, naming the fix."""
    for model in (str(tmp_path / "no-such-cross-encoder"), "acme/no-such-model"):
        env = {"LOADER_RERANKER_MODEL": model, "HF_HUB_CACHE": str(tmp_path / "hub")}
        result = invoke("refund for a late order", "--tenant", "A", env=env)
        assert result.exit_code == 0, result.output
        warning = f"warning: no rerank (rerank = auto): reranker_model {model!r}"
        assert result.stderr.startswith(warning) and result.stderr.count("\n") == 1
        assert "set reranker_model (LOADER_RERANKER_MODEL) to a local CrossEncoder" in result.stderr
        assert "(hybrid-rrf, no rerank)" in result.stdout.splitlines()[-1]
        result = invoke("refund", "--tenant", "A", "--json", env=env)
        data = json.loads(result.stdout)
        assert result.exit_code == 0 and data["reranked"] is False and data["hits"]
        assert [w.split(":")[0] for w in data["warnings"]] == ["no rerank (rerank = auto)"]
        assert (data["reranker"], data["rerank_skipped"]) == (None, "unavailable")
    # test_rerank_through_the_cli: a folder that is a cross-encoder turns it on, no warning.


def test_an_explicit_rerank_without_a_cross_encoder_fails_at_once(invoke, tmp_path):
    """--rerank (or rerank = on) with no cross-encoder on the machine: exit code 6 with the
    setting named, decided from the files (no 20-s attempt to load a model hub's copy)."""
    hub = {"HF_HUB_CACHE": str(tmp_path / "hub")}
    missing = str(tmp_path / "no-such-cross-encoder")
    cases = [
        (("--rerank",), {"LOADER_RERANKER_MODEL": missing}, f"there is no folder {missing}"),
        ((), {"LOADER_RERANKER_MODEL": missing, "LOADER_RERANK": "on"}, "there is no folder"),
        (("--rerank",), {"LOADER_RERANKER_MODEL": "acme/no-such-model"}, "is neither a folder"),
    ]
    for flags, env, reason in cases:
        result = invoke("refund", "--tenant", "A", *flags, env=env | hub)
        assert result.exit_code == 6, result.output
        assert result.stderr.startswith(
            f"Error: rerank is on but reranker_model {env['LOADER_RERANKER_MODEL']!r}"
        )
        assert reason in result.stderr and result.stderr.count("\n") == 1
        assert "or rerank = off (--no-rerank)" in result.stderr


def test_clear_errors(invoke, tmp_path, settings):
    result = invoke("   ", "--tenant", "A", "--no-rerank")
    assert (result.exit_code, result.output) == (
        2,
        "Error: question is empty; give the text to search for\n",
    )
    result = invoke("refund", "--tenant", "", "--no-rerank")
    assert result.exit_code == 2 and result.output.startswith("Error: tenant is required")
    result = invoke("refund", "--tenant", "A", "--no-rerank", "--published-from", "last week")
    assert (result.exit_code, result.output) == (
        2,
        "Error: published_from 'last week' is not a date; give an ISO date such as 2024-05-01 "
        "or date math such as now-1y\n",
    )
    result = invoke("refund", "--tenant", "A", "--no-rerank", "--k", "0")
    assert (result.exit_code, result.output) == (
        2,
        "Error: k must be a positive whole number, got 0\n",
    )
    result = CliRunner().invoke(
        cli,
        ["search", "refund", "--no-rerank", "--url", settings.opensearch_url, "--index",
         f"{settings.index_name}-missing", "--mode", "bm25"],
    )  # fmt: skip
    assert result.exit_code == 3
    assert "answered 404" in result.output and "run `loader apply`" in result.output


def test_help():
    result = CliRunner().invoke(cli, ["search", "--help"])
    assert result.exit_code == 0
    for option in ("--tenant", "--mode", "--rerank / --no-rerank", "--expand", "--json"):
        assert option in result.output
    assert "'default'" in result.output
