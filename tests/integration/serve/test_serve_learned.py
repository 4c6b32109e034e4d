"""Two tenants, two learned models, one `loader serve`: each tenant's searches are reranked by
the model learnt from its own judged questions and never by the other's; a tenant without a
model gets no learned rerank (and the answer says so), and a rerank it asks for is refused.

Tenants come from API keys, as a deployment serving several tenants would have them. Each model
is trained by `loader learn --tenant T --out <folder>` on the tenant's own corpus (the planted
corpus of tests/integration/train/test_learn.py, learnt with another seed for B, so the two
models differ)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.models.rerank.learned import load_learned
from loader.query.request import SearchRequest
from loader.query.search import search
from loader.serve.app import create_app
from tests.integration.serve.http_server import Server
from tests.integration.train.test_learn import (  # the planted corpus and its questions
    DOCS_PER_TOPIC,
    SECTIONS,
    chunk_ids,
    questions_file,
    topic_words,
    write_corpus,
)

KEYS = {
    "A": "key-a-Lr8uT3nQ6wE9yR2iO5pA",
    "B": "key-b-Lr7mK2jH5gF8dS1aZ4xC",
    "C": "key-c-Lr6nB9vC2xZ5aS8dF1gH",
}
QUESTION = "What is the " + " of the ".join(topic_words(0)) + "?"


@pytest.fixture
def served(client, base_settings, unique_name, embedder, tmp_path) -> Iterator:
    """One serve over an index of tenants A and B, each with its own learned model; C has
    neither chunks nor a model."""
    from loader.index.apply import apply_config
    from loader.ingest.sync import push

    settings = base_settings.replace(index_name=unique_name)
    apply_config(settings, dimension=embedder.dimension, client=client)
    for tenant, filler in (("A", "described"), ("B", "many things")):
        folder = tmp_path / tenant / "docs"
        write_corpus(folder, filler)
        assert push(folder, settings, client=client, embedder=embedder, tenant=tenant).failed == 0
    client.indices.refresh(index=unique_name)
    models = tmp_path / "models"
    # B's features equal A's once normalised (same layout, other words): another seed (its
    # split, its trees' samples) makes B's model another model.
    for tenant, seed in (("A", "0"), ("B", "1")):
        questions = questions_file(
            tmp_path / f"{tenant}.jsonl", chunk_ids(client, settings, tenant), shuffled=False
        )
        done = CliRunner().invoke(
            cli,
            ["learn", str(questions), "--out", str(models), "--tenant", tenant,
             "--url", settings.opensearch_url, "--index", settings.index_name, "--mode", "bm25",
             "--rounds", "160", "--folds", "3", "--seed", seed, "--json"],
            env={"LOADER_SEARCH_MODE": "bm25"},  # the guard judges against bm25's fusion
        )  # fmt: skip
        assert done.exit_code == 0, done.output
        assert json.loads(done.stdout)["out"] == str(models / tenant)
    keys = tmp_path / "api-keys.toml"
    keys.write_text(
        "[keys]\n" + "".join(f'"{key}" = "{tenant}"\n' for tenant, key in KEYS.items()),
        encoding="utf-8",
    )
    keys.chmod(0o600)
    serving = settings.replace(
        learned_reranker=str(models),
        reranker_model=str(tmp_path / "no-cross-encoder"),  # rerank = auto: the learned model
        api_keys_file=str(keys),
    )
    with Server(create_app(serving)) as running:
        yield running, serving, models


def _ask(server, tenant: str, **body) -> tuple[int, dict]:
    question = {"question": QUESTION, "mode": "bm25", "k": DOCS_PER_TOPIC * SECTIONS, **body}
    return server.request(
        "POST", "/search", question, headers={"Authorization": f"Bearer {KEYS[tenant]}"}
    )


def _scores(hits) -> list[tuple[str, float]]:
    return [(hit["chunk_id"], round(hit["scores"]["rerank"], 6)) for hit in hits]


def _reranked_by(settings, client, tenant: str, model: Path) -> list[tuple[str, float]]:
    """The tenant's search, reranked by ``model`` (as the library runs it)."""
    request = SearchRequest.from_settings(
        settings, QUESTION, tenant=tenant, mode="bm25", k=DOCS_PER_TOPIC * SECTIONS, rerank=True
    )
    result = search(request, settings, client=client, reranker=load_learned(str(model)))
    return _scores([hit.to_dict() for hit in result.hits])


def test_each_tenant_is_reranked_by_its_own_model_and_never_the_others(served, client):
    server, settings, models = served
    for tenant, other in (("A", "B"), ("B", "A")):
        status, body = _ask(server, tenant)
        assert status == 200, body
        assert body["reranked"] is True and body["warnings"] == []
        assert {hit["tenant"] for hit in body["hits"]} == {tenant}
        own = _reranked_by(settings, client, tenant, models / tenant)
        crossed = _reranked_by(settings, client, tenant, models / other)
        assert _scores(body["hits"]) == own
        assert own != crossed  # the two models rank these chunks differently


def test_a_tenant_without_a_model_gets_no_learned_rerank(served):
    server, _settings, _models = served
    status, body = _ask(server, "C")
    assert status == 200, body
    assert body["reranked"] is False and body["rerank_depth"] == 0
    assert any("nor a learned reranker of this tenant" in warning for warning in body["warnings"])
    status, body = _ask(server, "C", rerank=True)
    assert status == 422, body
    assert "models" not in json.dumps(body)  # the server's folders stay on the server
