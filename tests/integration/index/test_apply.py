"""`loader apply` against the test cluster: create, no-op, dry run, in-place and versioned changes,
the atomic alias swap under search load, the write block on the version a reindex copies (a write
meanwhile is refused; lifted when the apply stops before the swap), and the dimension guard."""

from __future__ import annotations

import json
import threading
import time

import pytest
from click.testing import CliRunner
from opensearchpy import helpers

from loader.cli import cli
from loader.cluster.client import connect
from loader.errors import ClusterError, ConfigError, IncompatibleIndexError
from loader.index import apply as apply_module
from loader.index.apply import apply_config
from loader.index.compatible import check_index_compatible
from loader.index.render import INDEX_FILE, config_names, packaged_file
from loader.models.readers import reader_settings
from tests.killed import apply_killed_at_first_reindex_poll

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
        for name in (names.rrf_pipeline, names.minmax_pipeline, names.object_name("zscore"))
    }
    ingest = client.ingest.get_pipeline(id=names.ingest_pipeline)
    scripts = {
        name: client.get_script(id=name)
        for name in (names.hybrid_template, names.bm25_template, names.vector_template)
    }
    return {"indices": indices, "pipelines": pipelines, "ingest": ingest, "scripts": scripts}


def chunk(n: int, text: str = "refund policy", dimension: int = DIMENSION) -> dict:
    """Chunk ``c<n>`` of document ``d<n>`` (tenant A) as the strict mapping takes it."""
    vector = [0.0] * dimension
    vector[n % dimension] = 1.0
    return {
        "chunk_id": f"c{n}",
        "doc_id": f"d{n}",
        "tenant": "A",
        "title": f"Document {n}",
        "heading_path": "Intro",
        "content": f"Document {n} > Intro\n\n{text} number {n}",
        "body": f"{text} number {n}",
        "embedding": vector,
    }


def index_docs(client, alias: str, count: int = 6, dimension: int = DIMENSION) -> None:
    actions = []
    for n in range(count):
        actions.append({"index": {"_index": alias, "_id": f"c{n}"}})
        actions.append(chunk(n, dimension=dimension))
    result = client.bulk(body=actions, refresh=True)
    assert not result["errors"], result


def documents(client, index: str) -> dict[str, dict]:
    """chunk id -> source, straight from ``index``."""
    client.indices.refresh(index=index)
    return {hit["_id"]: hit["_source"] for hit in helpers.scan(client, index=index)}


def write_block(client, index: str) -> str | None:
    """``index.blocks.write`` of ``index`` as the cluster reports it ("true"), else ``None``."""
    answer = client.indices.get_settings(index=index, name="index.blocks.write", flat_settings=True)
    return ((answer.get(index) or {}).get("settings") or {}).get("index.blocks.write")


def block_record(client, index: str):
    """The record of the block apply set on ``index`` (``_meta.loader_reindex_block``), if any."""
    meta = client.indices.get_mapping(index=index)[index]["mappings"].get("_meta") or {}
    return meta.get("loader_reindex_block")


def copy_record(client, index: str):
    """What apply recorded on ``index`` when it found the copy whole (``_meta.loader_copy``)."""
    meta = client.indices.get_mapping(index=index)[index]["mappings"].get("_meta") or {}
    return meta.get("loader_copy")


def on_first_reindex_poll(monkeypatch, client, action) -> list[int]:
    """Run ``action()`` when apply first polls its reindex task (``tasks.get`` of the real
    client), then let the poll go on: something happens on cue while the copy runs (the copy of a
    few documents may already be done, but the alias has not moved yet). Returns the polls."""
    real_get = client.tasks.get
    polls: list[int] = []

    def get(*args, **kwargs):
        polls.append(1)
        if len(polls) == 1:
            action()
        return real_get(*args, **kwargs)

    monkeypatch.setattr(client.tasks, "get", get)
    return polls


def test_apply_creates_everything_and_a_second_apply_changes_nothing(client, settings):
    alias = settings.index_name
    names = config_names(alias)
    plan = apply_config(settings, dimension=DIMENSION, client=client)
    assert plan.applied
    assert plan.summary() == "9 created, 0 updated, 0 deleted, 0 unchanged"

    assert client.indices.get_alias(name=alias) == {
        names.version_index(1): {"aliases": {alias: {}}}
    }
    mapping = client.indices.get_mapping(index=alias)[names.version_index(1)]["mappings"]
    assert mapping["properties"]["embedding"]["dimension"] == DIMENSION
    assert mapping["properties"]["embedding"]["method"]["engine"] == "lucene"
    state = snapshot(client, alias)
    rrf = state["pipelines"][names.rrf_pipeline][names.rrf_pipeline]
    exact = settings.exact_weight  # the exact-identifier sub-query's weight; the rest is shared
    # With a second reader (bge's jar on this machine) the two readers share the vector side.
    share = settings.second_reader_share
    vector = [(1 - exact) / 2]
    if reader_settings(settings) is not None:
        vector = [(1 - exact) / 2 * (1 - share), (1 - exact) / 2 * share]
    assert rrf["phase_results_processors"][0]["score-ranker-processor"]["combination"] == {
        "technique": "rrf",
        "rank_constant": 60,
        "parameters": {"weights": pytest.approx([(1 - exact) / 2, *vector, exact])},
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
        f"+ create reindex {v1} -> {v2} (write-blocks {v1} first: a push during the copy fails "
        "instead of being lost)",
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


def test_a_write_during_the_reindex_is_refused_not_lost(client, settings, monkeypatch):
    """A push (another team's cron job) writing through the alias while apply copies the index:
    before, its writes went into v1 after the copy's snapshot and vanished with the swap; now v1
    is write-blocked from before the copy, so they are refused, and the push can say so."""
    alias = settings.index_name
    names = config_names(alias)
    v1, v2 = names.version_index(1), names.version_index(2)
    apply_config(settings, dimension=DIMENSION, client=client)
    index_docs(client, alias)
    before = documents(client, v1)
    items: list[dict] = []

    def push_meanwhile() -> None:
        body = [
            {"index": {"_index": alias, "_id": "c0"}},
            chunk(0, "updated refund policy"),
            {"delete": {"_index": alias, "_id": "c1"}},
            {"index": {"_index": alias, "_id": "c99"}},
            chunk(99),
        ]
        items.extend(client.bulk(body=body, refresh=True)["items"])

    applying = connect(settings)
    polls = on_first_reindex_poll(monkeypatch, applying, push_meanwhile)
    changed = settings.replace(text_analyzer="standard")
    plan = apply_config(changed, dimension=DIMENSION, client=applying)

    assert polls and plan.applied
    refused = f"index [{v1}] blocked by: [FORBIDDEN/8/index write (api)];"
    assert [(op, item["status"], item["error"]) for item in items for op, item in item.items()] == [
        (op, 403, {"type": "cluster_block_exception", "reason": refused})
        for op in ("index", "delete", "index")
    ]
    assert client.indices.get_alias(name=alias) == {v2: {"aliases": {alias: {}}}}
    assert documents(client, v2) == before  # every document, none of the refused writes
    assert write_block(client, v1) == "true"  # no alias points at it: nothing should write there
    assert block_record(client, v1)["dest"] == v2  # kept beside the block it explains
    assert write_block(client, v2) is None
    checked = copy_record(client, v2)  # the check before the swap found every chunk copied
    assert (checked["from"], checked["chunks"], checked["documents"]) == (v1, 6, 6)
    written = client.index(index=alias, id="c99", body=chunk(99), refresh=True)
    assert written["_index"] == v2 and written["result"] == "created"

    cleanup = apply_config(changed, dimension=DIMENSION, client=client, delete_old=True)
    assert [change.line() for change in cleanup.pending] == [f"- delete index {v1} (old version)"]
    assert not client.indices.exists(index=v1)  # the block does not stop --delete-old
    assert client.count(index=alias)["count"] == 7


def test_a_copy_that_misses_a_write_is_refused_before_the_swap(client, settings, monkeypatch):
    """A write the block did not stop (here: another apply lifted the block, as two applies
    racing can) lands in v1 once the copy is done: the check before the swap finds v1's chunks
    not all in v2, so the alias stays on v1, which takes writes again, and the apply names the
    document."""
    alias = settings.index_name
    names = config_names(alias)
    v1, v2 = names.version_index(1), names.version_index(2)
    apply_config(settings, dimension=DIMENSION, client=client)
    index_docs(client, alias)
    applying = connect(settings)
    real_get = applying.tasks.get
    late = {**chunk(99), "source": "late.md", "collection": "kb", "doc_hash": "h99:1"}

    def write_after_the_copy(*args, **kwargs):
        task = real_get(*args, **kwargs)
        if task.get("completed") and not client.exists(index=v1, id="c99"):
            client.indices.put_settings(index=v1, body={"index.blocks.write": None})
            client.index(index=v1, id="c99", body=late)
        return task

    monkeypatch.setattr(applying.tasks, "get", write_after_the_copy)
    changed = settings.replace(text_analyzer="standard")
    with pytest.raises(ClusterError) as refused:
        apply_config(changed, dimension=DIMENSION, client=applying)

    assert str(refused.value) == (
        f"the copy {v2} does not hold the chunks of {v1}, so the alias was not moved: 1 of 7 "
        f"documents differ (by tenant: 'A' 1): kb/late.md (tenant 'A'): 1 chunk in {v1}, none in "
        f"{v2} (written during the copy: is another `loader apply` running?). The alias stays on "
        f"{v1}; run `loader apply` again (`loader apply --delete-old` deletes {v2})"
    )
    assert client.indices.get_alias(name=alias) == {v1: {"aliases": {alias: {}}}}
    assert write_block(client, v1) is None
    assert block_record(client, v1) is None
    assert copy_record(client, v2) is None
    written = client.index(index=alias, id="c100", body=chunk(100), refresh=True)
    assert written["_index"] == v1 and written["result"] == "created"


def test_a_reindex_keeps_the_block_another_apply_recorded_until_its_swap(
    client, settings, monkeypatch
):
    """Two applies racing: the first (here SIGKILLed as it polls its copy; it could as well
    still be copying) recorded and set the block on v1. The second, copying v1 too, takes the
    block over instead of lifting it first: before, its plan lifted the block, then set its own,
    and a push in between wrote into v1 while the first apply copied it."""
    alias = settings.index_name
    names = config_names(alias)
    v1, v3 = names.version_index(1), names.version_index(3)
    apply_config(settings, dimension=DIMENSION, client=client)
    index_docs(client, alias)
    apply_killed_at_first_reindex_poll(settings, DIMENSION, number_of_shards=2)
    assert write_block(client, v1) == "true"
    applying = connect(settings)
    real_put_settings = applying.indices.put_settings
    lifted: list[str] = []

    def put_settings(*args, **kwargs):
        if (kwargs.get("body") or {}).get("index.blocks.write", True) is None:
            lifted.append(kwargs.get("index"))
        return real_put_settings(*args, **kwargs)

    monkeypatch.setattr(applying.indices, "put_settings", put_settings)
    plan = apply_config(
        settings.replace(text_analyzer="standard"), dimension=DIMENSION, client=applying
    )

    assert plan.applied and lifted == []  # never writable while it was being copied
    assert client.indices.get_alias(name=alias) == {v3: {"aliases": {alias: {}}}}
    assert write_block(client, v1) == "true"
    assert block_record(client, v1)["dest"] == v3
    assert documents(client, v3) == documents(client, v1)


def test_a_failed_reindex_lifts_the_block_and_leaves_the_alias(
    client, settings, tmp_path, monkeypatch
):
    """A copy OpenSearch refuses (the new mapping makes ``tenant`` an integer; every chunk's is
    "A") stops the apply before the swap: the alias stays on v1, which takes writes again."""
    alias = settings.index_name
    names = config_names(alias)
    v1, v2 = names.version_index(1), names.version_index(2)
    apply_config(settings, dimension=DIMENSION, client=client)
    index_docs(client, alias)
    (tmp_path / "mappings").mkdir()
    (tmp_path / "mappings" / "chunks.json.j2").write_text(
        packaged_file(INDEX_FILE).replace(
            '"tenant": {"type": "keyword"}', '"tenant": {"type": "integer"}'
        )
    )
    during: list[str | None] = []
    applying = connect(settings)
    on_first_reindex_poll(monkeypatch, applying, lambda: during.append(write_block(client, v1)))
    with pytest.raises(ClusterError, match=rf"reindex {v1} -> {v2} failed for 6 document\(s\)"):
        apply_config(settings, dimension=DIMENSION, client=applying, project_dir=tmp_path)

    assert during == ["true"]  # blocked while the copy ran
    assert client.indices.get_alias(name=alias) == {v1: {"aliases": {alias: {}}}}
    assert write_block(client, v1) is None
    assert block_record(client, v1) is None
    written = client.index(index=alias, id="c99", body=chunk(99), refresh=True)
    assert written["_index"] == v1 and written["result"] == "created"


def test_ctrl_c_during_the_reindex_lifts_the_block(client, settings, monkeypatch):
    """Ctrl-C while apply waits for its copy (the poll raises what SIGINT raises there): the
    task is cancelled, the alias stays on v1, and v1 takes writes again."""
    alias = settings.index_name
    names = config_names(alias)
    v1 = names.version_index(1)
    apply_config(settings, dimension=DIMENSION, client=client)
    index_docs(client, alias)

    def ctrl_c() -> None:
        assert write_block(client, v1) == "true"  # blocked before the copy started
        raise KeyboardInterrupt

    applying = connect(settings)
    on_first_reindex_poll(monkeypatch, applying, ctrl_c)
    with pytest.raises(KeyboardInterrupt):
        apply_config(settings.replace(number_of_shards=2), dimension=DIMENSION, client=applying)

    assert client.indices.get_alias(name=alias) == {v1: {"aliases": {alias: {}}}}
    assert write_block(client, v1) is None
    written = client.index(index=alias, id="c99", body=chunk(99), refresh=True)
    assert written["_index"] == v1 and written["result"] == "created"


def test_a_swap_another_apply_beat_lifts_the_block(client, settings, monkeypatch):
    """Another apply moved the alias while this one copied v1: this one's swap fails whole (the
    test below), and v1 is not left write-blocked by an apply that did not finish."""
    alias = settings.index_name
    names = config_names(alias)
    v1, v3 = names.version_index(1), names.version_index(3)
    apply_config(settings, dimension=DIMENSION, client=client)
    index_docs(client, alias)

    def other_apply_swaps() -> None:
        assert write_block(client, v1) == "true"  # blocked before the copy started
        client.indices.create(index=v3, body={"settings": {"index": {"number_of_replicas": 0}}})
        apply_module._move_alias(client, alias, {"remove": v1, "add": v3})

    applying = connect(settings)
    on_first_reindex_poll(monkeypatch, applying, other_apply_swaps)
    with pytest.raises(ClusterError, match=rf"alias '{alias}' no longer points at '{v1}'"):
        apply_config(settings.replace(number_of_shards=2), dimension=DIMENSION, client=applying)

    assert client.indices.get_alias(name=alias) == {v3: {"aliases": {alias: {}}}}
    assert write_block(client, v1) is None


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
        f"+ create search pipeline {names.object_name('zscore')}",
        f"+ create search template {names.bm25_template}",
        f"+ create search template {names.hybrid_template}",
        f"+ create search template {names.vector_template}",
        "9 to create, 0 to update, 0 to delete, 0 unchanged (dry run: nothing changed)",
    ]
    assert not client.indices.exists_alias(name=alias)

    first = runner.invoke(cli, args)
    assert first.exit_code == 0, first.output
    assert first.output.splitlines()[-1] == "9 created, 0 updated, 0 deleted, 0 unchanged"
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


def test_apply_reads_the_clusters_banner_once(base_settings, unique_name, embedder, monkeypatch):
    """The check that the cluster answers gives the version the pipelines are rendered for."""
    banners = []

    def counting_connect(settings):
        client = connect(settings)
        info = client.info

        def counted_info(*args, **kwargs):
            banners.append(kwargs)
            return info(*args, **kwargs)

        client.info = counted_info
        return client

    monkeypatch.setattr(apply_module, "connect", counting_connect)
    plan = apply_config(base_settings.replace(index_name=unique_name), dimension=embedder.dimension)
    assert plan.applied and len(banners) == 1
