"""`loader apply` against the test cluster: create, no-op, dry run, in-place and versioned changes,
the atomic alias swap under search load, and the dimension guard."""

from __future__ import annotations

import json
import threading
import time

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.cluster.client import connect
from loader.errors import ClusterError, ConfigError, IncompatibleIndexError
from loader.index import apply as apply_module
from loader.index.apply import apply_config, check_index_compatible
from loader.index.render import INDEX_FILE, config_names, packaged_file

DIMENSION = 8  # a test dimension; production reads it from the embedding model


@pytest.fixture
def settings(base_settings, unique_name):
    return base_settings.replace(index_name=unique_name)


def snapshot(client, alias: str) -> dict:
    """Everything apply may touch for this alias, as the cluster reports it."""
    names = config_names(alias)
    indices = client.indices.get(index=f"{alias}*", expand_wildcards="all")
    pipelines = {
        name: client.transport.perform_request("GET", f"/_search/pipeline/{name}")
        for name in (names.rrf_pipeline, names.minmax_pipeline)
    }
    ingest = client.ingest.get_pipeline(id=names.ingest_pipeline)
    scripts = {
        name: client.get_script(id=name)
        for name in (names.hybrid_template, names.bm25_template, names.vector_template)
    }
    return {"indices": indices, "pipelines": pipelines, "ingest": ingest, "scripts": scripts}


def index_docs(client, alias: str, count: int = 6, dimension: int = DIMENSION) -> None:
    actions = []
    for n in range(count):
        vector = [0.0] * dimension
        vector[n % dimension] = 1.0
        actions.append({"index": {"_index": alias, "_id": f"c{n}"}})
        actions.append(
            {
                "chunk_id": f"c{n}",
                "doc_id": f"d{n}",
                "tenant": "A",
                "title": f"Document {n}",
                "heading_path": "Intro",
                "content": f"Document {n} > Intro\n\nrefund policy number {n}",
                "body": f"refund policy number {n}",
                "embedding": vector,
            }
        )
    result = client.bulk(body=actions, refresh=True)
    assert not result["errors"], result


def test_apply_creates_everything_and_a_second_apply_changes_nothing(client, settings):
    alias = settings.index_name
    names = config_names(alias)
    plan = apply_config(settings, dimension=DIMENSION, client=client)
    assert plan.applied
    assert plan.summary() == "8 created, 0 updated, 0 deleted, 0 unchanged"

    assert client.indices.get_alias(name=alias) == {
        names.version_index(1): {"aliases": {alias: {}}}
    }
    mapping = client.indices.get_mapping(index=alias)[names.version_index(1)]["mappings"]
    assert mapping["properties"]["embedding"]["dimension"] == DIMENSION
    assert mapping["properties"]["embedding"]["method"]["engine"] == "lucene"
    state = snapshot(client, alias)
    rrf = state["pipelines"][names.rrf_pipeline][names.rrf_pipeline]
    exact = settings.exact_weight  # the exact-identifier sub-query's weight; the rest is shared
    assert rrf["phase_results_processors"][0]["score-ranker-processor"]["combination"] == {
        "technique": "rrf",
        "rank_constant": 60,
        "parameters": {"weights": [(1 - exact) / 2, (1 - exact) / 2, exact]},
    }
    assert state["scripts"][names.hybrid_template]["script"]["lang"] == "mustache"

    again = apply_config(settings, dimension=DIMENSION, client=client)
    assert not again.has_changes and not again.applied
    assert again.summary() == "no changes"
    assert f"= alias {alias} -> {names.version_index(1)} (no change)" in again.lines()
    assert snapshot(client, alias) == state


def test_dry_run_leaves_the_cluster_untouched(client, settings):
    alias = settings.index_name
    plan = apply_config(settings, dimension=DIMENSION, client=client, dry_run=True)
    assert plan.has_changes and not plan.applied
    assert client.indices.get(index=f"{alias}*", expand_wildcards="all") == {}
    assert not client.indices.exists_alias(name=alias)

    apply_config(settings, dimension=DIMENSION, client=client)
    before = snapshot(client, alias)
    changed = settings.replace(rrf_rank_constant=20, number_of_shards=2)
    plan = apply_config(changed, dimension=DIMENSION, client=client, dry_run=True)
    assert plan.has_changes and not plan.applied
    assert snapshot(client, alias) == before


def test_compatible_changes_are_applied_in_place(client, settings, tmp_path):
    alias = settings.index_name
    names = config_names(alias)
    apply_config(settings, dimension=DIMENSION, client=client)
    index_docs(client, alias)

    # A project file that adds a field, and settings that change a dynamic index setting.
    mapping = packaged_file(INDEX_FILE)
    (tmp_path / "mappings").mkdir()
    (tmp_path / "mappings" / "chunks.json.j2").write_text(
        mapping.replace(
            '"strategy": {"type": "keyword"},',
            '"strategy": {"type": "keyword"},\n      "reviewer": {"type": "keyword"},',
        )
    )
    changed = settings.replace(hnsw_ef_search=64, rrf_rank_constant=20)
    plan = apply_config(changed, dimension=DIMENSION, client=client, project_dir=tmp_path)
    pending = [change.line() for change in plan.pending]
    v1 = names.version_index(1)
    assert pending == [
        f"~ update mapping {v1} (add fields: reviewer)",
        f"~ update index settings {v1} (knn.algo_param.ef_search: 100 -> 64)",
        f"~ update search pipeline {names.rrf_pipeline}",
        # ef_search is also sent in the k-NN queries; the BM25 template does not change
        f"~ update search template {names.hybrid_template}",
        f"~ update search template {names.vector_template}",
    ]
    assert client.indices.get_alias(name=alias) == {v1: {"aliases": {alias: {}}}}
    properties = client.indices.get_mapping(index=v1)[v1]["mappings"]["properties"]
    assert properties["reviewer"] == {"type": "keyword"}
    index_settings = client.indices.get_settings(index=v1, flat_settings=True)[v1]["settings"]
    assert index_settings["index.knn.algo_param.ef_search"] == "64"
    assert client.count(index=alias)["count"] == 6
    again = apply_config(changed, dimension=DIMENSION, client=client, project_dir=tmp_path)
    assert not again.has_changes


def test_incompatible_change_swaps_to_a_new_version_while_searches_answer(client, settings):
    alias = settings.index_name
    names = config_names(alias)
    v1, v2 = names.version_index(1), names.version_index(2)
    apply_config(settings, dimension=DIMENSION, client=client)
    index_docs(client, alias)

    stop = threading.Event()
    errors: list[Exception] = []
    totals: list[int] = []

    def search_in_a_loop() -> None:
        searcher = connect(settings)
        while not stop.is_set():
            try:
                response = searcher.search_template(
                    index=alias,
                    body={
                        "id": names.bm25_template,
                        "params": {"query_text": "refund policy", "tenant": "A", "size": 10},
                    },
                )
                totals.append(len(response["hits"]["hits"]))
            except Exception as exc:  # any failure during the switch is a test failure
                errors.append(exc)

    thread = threading.Thread(target=search_in_a_loop, daemon=True)
    thread.start()
    try:
        while not totals and not errors:
            time.sleep(0.01)
        changed = settings.replace(text_analyzer="standard")
        plan = apply_config(changed, dimension=DIMENSION, client=client)
        time.sleep(0.3)  # keep searching after the swap too
    finally:
        stop.set()
        thread.join(timeout=30)

    assert not errors, errors[:3]
    assert totals and min(totals) == 6, (len(totals), min(totals))
    pending = [change.line() for change in plan.pending]
    assert pending == [
        f"+ create index {v2} (replaces {v1}: field content: analyzer 'english' -> 'standard'; "
        f"field title: analyzer 'english' -> 'standard'; "
        f"field heading_path: analyzer 'english' -> 'standard')",
        f"+ create reindex {v1} -> {v2}",
        f"~ update alias {alias} -> {v2} (was {v1}; one atomic _aliases call)",
    ]
    assert f"kept {v1}; `loader apply --delete-old` deletes older versions" in plan.notes
    assert client.indices.get_alias(name=alias) == {v2: {"aliases": {alias: {}}}}
    assert client.count(index=v2)["count"] == 6
    assert client.indices.exists(index=v1)  # kept without --delete-old
    content = client.indices.get_mapping(index=v2)[v2]["mappings"]["properties"]["content"]
    assert content["analyzer"] == "standard"
    # vectors came along: a k-NN search on the new version finds the document
    knn = client.search_template(
        index=alias,
        body={
            "id": names.vector_template,
            "params": {"query_vector": [0, 1, 0, 0, 0, 0, 0, 0], "tenant": "A", "size": 1},
        },
    )
    assert [hit["_id"] for hit in knn["hits"]["hits"]] == ["c1"]

    cleanup = apply_config(changed, dimension=DIMENSION, client=client, delete_old=True)
    assert [change.line() for change in cleanup.pending] == [f"- delete index {v1} (old version)"]
    assert not client.indices.exists(index=v1)
    assert client.count(index=alias)["count"] == 6


def test_an_alias_another_apply_moved_meanwhile_is_left_where_it_is(client, settings):
    """Two applies planned the same swap from v1; the second finds the alias on v2 already. Its
    swap must fail whole, not remove nothing and add: the alias on two indices (seen in a race
    of two `loader apply` runs: every push then failed, searches returned chunks twice)."""
    alias = settings.index_name
    names = config_names(alias)
    v1, v2, v3 = (names.version_index(n) for n in (1, 2, 3))
    apply_config(settings, dimension=DIMENSION, client=client)
    body = {"settings": {"index": {"number_of_replicas": 0}}}
    client.indices.create(index=v2, body=body)
    client.indices.create(index=v3, body=body)
    apply_module._move_alias(client, alias, {"remove": v1, "add": v2})  # the first apply
    with pytest.raises(ClusterError, match=rf"alias '{alias}' no longer points at '{v1}'"):
        apply_module._move_alias(client, alias, {"remove": v1, "add": v3})  # the second
    assert client.indices.get_alias(name=alias) == {v2: {"aliases": {alias: {}}}}


def test_an_index_body_opensearch_refuses_is_a_bad_setting_named_not_the_cluster(client, settings):
    bad = settings.replace(text_analyzer="nonexistent")
    with pytest.raises(ConfigError) as raised:
        apply_config(bad, dimension=DIMENSION, client=client)
    message = str(raised.value)
    assert message.startswith(
        f"OpenSearch refused the index {settings.index_name}-v1 rendered from the configuration "
        "files and settings: mapper_parsing_exception: "
    ), message
    assert "nonexistent" in message and ConfigError.exit_code == 2


def test_dimension_mismatch_is_refused_and_apply_makes_a_new_version(client, settings):
    alias = settings.index_name
    names = config_names(alias)
    v1, v2 = names.version_index(1), names.version_index(2)
    with pytest.raises(IncompatibleIndexError, match=r"does not exist.*loader apply"):
        check_index_compatible(client, settings, DIMENSION)
    apply_config(settings, dimension=DIMENSION, client=client)
    index_docs(client, alias)
    assert check_index_compatible(client, settings, DIMENSION) == v1

    with pytest.raises(IncompatibleIndexError) as error:
        check_index_compatible(client, settings, 16)
    message = str(error.value)
    assert v1 in message and alias in message
    assert "stores 8-dimensional vectors" in message and "16-dimensional" in message
    assert "run `loader apply` to create a new index version" in message

    plan = apply_config(settings, dimension=16, client=client)
    assert [change.line() for change in plan.pending] == [
        f"+ create index {v2} (replaces {v1}: vector field embedding: dimension 8 -> 16)",
        f"~ update alias {alias} -> {v2} (was {v1}; one atomic _aliases call)",
    ]
    assert any("loader push" in note for note in plan.notes)
    assert client.count(index=v2)["count"] == 0  # not reindexed: old vectors are useless
    assert check_index_compatible(client, settings, 16) == v2


def test_cli_apply_prints_the_plan(client, settings, opensearch_url):
    alias = settings.index_name
    names = config_names(alias)
    runner = CliRunner()
    args = ["apply", "--url", opensearch_url, "--index", alias]
    dry = runner.invoke(cli, [*args, "--dry-run"])
    assert dry.exit_code == 0, dry.output
    v1 = names.version_index(1)
    assert dry.output.splitlines() == [
        f"+ create ingest pipeline {names.ingest_pipeline}",
        f"+ create index {v1}",
        f"+ create alias {alias} -> {v1}",
        f"+ create search pipeline {names.minmax_pipeline}",
        f"+ create search pipeline {names.rrf_pipeline}",
        f"+ create search template {names.bm25_template}",
        f"+ create search template {names.hybrid_template}",
        f"+ create search template {names.vector_template}",
        "8 to create, 0 to update, 0 to delete, 0 unchanged (dry run: nothing changed)",
    ]
    assert not client.indices.exists_alias(name=alias)

    first = runner.invoke(cli, args)
    assert first.exit_code == 0, first.output
    assert first.output.splitlines()[-1] == "8 created, 0 updated, 0 deleted, 0 unchanged"
    # the production path reads the dimension from the embedding model
    mapping = client.indices.get_mapping(index=v1)[v1]["mappings"]["properties"]["embedding"]
    assert mapping["dimension"] == 384

    second = runner.invoke(cli, [*args, "--json"])
    assert second.exit_code == 0, second.output
    data = json.loads(second.output)
    assert data["summary"] == "no changes" and data["applied"] is False
    assert {change["action"] for change in data["changes"]} == {"none"}


def test_cli_apply_reports_an_unreachable_cluster(unique_name):
    result = CliRunner().invoke(
        cli, ["apply", "--url", "http://127.0.0.1:9", "--index", unique_name]
    )
    assert result.exit_code == 3
    assert "cannot connect to http://127.0.0.1:9" in result.output
