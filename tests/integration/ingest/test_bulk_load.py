"""Bulk-load mode against the test cluster: the index is relaxed while a push writes, restored
after however the push ends, and restored by the next push or apply after a SIGKILL.

The relaxed state is observed from inside the push, deterministically: the push gets its own
client whose ``bulk`` reads the index's settings from the cluster before each request. The killed
push runs in a subprocess that blocks after its first bulk request, so the kill always lands while
the index is relaxed.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.cluster.client import connect
from loader.index.apply import apply_config
from loader.index.bulk_load import META_KEY
from loader.ingest.sync import push
from tests.killed import push_killed_after_first_bulk

# The index's own values, set by hand like an operator would: neither is a default, so a restore
# to the defaults or to the relaxed values cannot pass for a restore to these.
OWN_REFRESH = "5s"
OWN_REPLICAS = 1
RELAXED = ("-1", "0")


@pytest.fixture
def settings(base_settings, unique_name, embedder, client):
    settings = base_settings.replace(
        index_name=unique_name, number_of_replicas=OWN_REPLICAS, bulk_batch_size=2
    )
    apply_config(settings, dimension=embedder.dimension)
    client.indices.put_settings(index=unique_name, body={"refresh_interval": OWN_REFRESH})
    return settings


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "kb"
    root.mkdir()
    for number in range(4):
        (root / f"page{number}.md").write_text(
            f"# Page {number}\n\n## Part A\n\nFirst part of page {number}.\n\n"
            f"## Part B\n\nSecond part of page {number}.\n",
            encoding="utf-8",
        )
    return root


def concrete(client, alias: str) -> str:
    (index,) = client.indices.get_alias(name=alias)
    return index


def index_state(client, alias: str) -> tuple[tuple[str | None, str], dict | None]:
    """((refresh_interval, number_of_replicas), the bulk-load record) as the cluster has them."""
    index = concrete(client, alias)
    flat = client.indices.get_settings(index=index, flat_settings=True)[index]["settings"]
    meta = client.indices.get_mapping(index=index)[index]["mappings"].get("_meta") or {}
    values = (flat.get("index.refresh_interval"), flat["index.number_of_replicas"])
    return values, meta.get(META_KEY)


def own_state() -> tuple[tuple[str, str], None]:
    return (OWN_REFRESH, str(OWN_REPLICAS)), None


def observing_client(settings, seen: list, fail_on: int | None = None):
    """A client of its own whose bulk requests first read the index's state from the cluster;
    bulk request number ``fail_on`` raises instead of being sent."""
    spy = connect(settings)
    send = spy.bulk

    def bulk(*args, **kwargs):
        seen.append(index_state(spy, settings.index_name))
        if fail_on is not None and len(seen) == fail_on:
            raise RuntimeError("the push dies here")
        return send(*args, **kwargs)

    spy.bulk = bulk
    return spy


def test_bulk_load_relaxes_while_writing_and_restores_after(client, settings, folder, embedder):
    seen: list = []
    spy = observing_client(settings, seen)
    report = push(folder, settings.replace(bulk_load=True), client=spy, embedder=embedder)
    assert report.failed == 0 and report.warnings == []
    assert len(seen) == report.chunks // 2 >= 4  # bulk_batch_size 2
    record = {"refresh_interval": OWN_REFRESH, "number_of_replicas": OWN_REPLICAS}
    for values, seen_record in seen:
        assert values == RELAXED
        assert {key: seen_record[key] for key in record} == record
        assert seen_record["started_at"].endswith("Z")
    assert index_state(client, settings.index_name) == own_state()
    assert client.count(index=settings.index_name)["count"] == report.chunks

    # Nothing to write: a bulk-load push leaves the settings alone.
    seen.clear()
    again = push(folder, settings.replace(bulk_load=True), client=spy, embedder=embedder)
    assert (again.unchanged, again.chunks_written, seen) == (4, 0, [])
    assert index_state(client, settings.index_name) == own_state()


def test_a_push_without_bulk_load_and_an_index_without_record_are_untouched(
    client, settings, folder, embedder
):
    seen: list = []
    push(folder, settings, client=observing_client(settings, seen), embedder=embedder)
    assert seen and all(state == own_state() for state in seen)
    assert index_state(client, settings.index_name) == own_state()


def test_a_push_that_raises_mid_write_restores_and_refreshes(client, settings, folder, embedder):
    seen: list = []
    spy = observing_client(settings, seen, fail_on=3)
    with pytest.raises(RuntimeError, match="the push dies here"):
        push(folder, settings.replace(bulk_load=True), client=spy, embedder=embedder)
    assert [values for values, _ in seen] == [RELAXED] * 3
    assert index_state(client, settings.index_name) == own_state()
    # The two batches written before the error are searchable: the restore refreshed.
    assert client.count(index=settings.index_name)["count"] == 4


@pytest.fixture
def killed(client, settings, folder):
    """A bulk-load push SIGKILLed after its first bulk request: the index is left relaxed."""
    push_killed_after_first_bulk(
        settings, folder, bulk_batch_size=2, number_of_replicas=1, bulk_load=True
    )
    values, record = index_state(client, settings.index_name)
    assert values == RELAXED
    assert (record["refresh_interval"], record["number_of_replicas"]) == (OWN_REFRESH, 1)
    return settings


def run(args: list[str], settings, env: dict | None = None):
    base = ["--url", settings.opensearch_url, "--index", settings.index_name]
    return CliRunner(env=env).invoke(cli, [*args, *base])


def test_after_a_sigkill_the_next_push_restores(client, killed, folder):
    result = run(["push", str(folder), "--json"], killed)
    assert result.exit_code == 0, result.output
    assert index_state(client, killed.index_name) == own_state()
    # The killed push's first batch (one whole page) was seen by the plan, not written again.
    assert '"unchanged": 1' in result.stdout and '"added": 3' in result.stdout
    assert client.count(index=killed.index_name)["count"] == 8


def test_after_a_sigkill_a_bulk_load_push_keeps_the_recorded_values(client, killed, folder):
    seen: list = []
    spy = observing_client(killed, seen)
    report = push(folder, killed.replace(bulk_load=True), client=spy)
    assert report.failed == 0 and seen
    for values, record in seen:  # never the relaxed values recorded as the originals
        assert values == RELAXED
        assert (record["refresh_interval"], record["number_of_replicas"]) == (OWN_REFRESH, 1)
    assert index_state(client, killed.index_name) == own_state()


def test_after_a_sigkill_apply_plans_and_makes_the_restore(client, killed):
    index = concrete(client, killed.index_name)
    env = {"LOADER_NUMBER_OF_REPLICAS": "2"}  # the files now want 2 replicas: they win
    dry = run(["apply", "--dry-run"], killed, env)
    assert dry.exit_code == 0, dry.output
    assert [line for line in dry.output.splitlines() if line.startswith("~")] == [
        f"~ update bulk-load settings {index} (restore refresh_interval: -1 -> {OWN_REFRESH}, "
        "number_of_replicas: 0 -> 1: left relaxed by a bulk-load push that did not finish)",
        f"~ update index settings {index} (number_of_replicas: 1 -> 2)",
    ]
    assert index_state(client, killed.index_name)[0] == RELAXED  # a dry run changes nothing

    applied = run(["apply"], killed, env)
    assert applied.exit_code == 0, applied.output
    assert index_state(client, killed.index_name) == ((OWN_REFRESH, "2"), None)
    again = run(["apply", "--dry-run"], killed, env)
    assert again.output.splitlines()[-1] == "no changes", again.output


def test_a_hostile_record_is_restored_to_the_defaults_with_a_warning(
    client, settings, folder, embedder
):
    index = concrete(client, settings.index_name)
    meta = client.indices.get_mapping(index=index)[index]["mappings"]["_meta"]
    hostile = {"refresh_interval": "1s}]}", "number_of_replicas": "many"}
    client.indices.put_mapping(index=index, body={"_meta": {**meta, META_KEY: hostile}})
    client.indices.put_settings(index=index, body={"refresh_interval": "-1"})
    report = push(folder, settings, client=client, embedder=embedder)
    assert report.failed == 0
    assert [line.split(" is not")[0] for line in report.warnings] == [
        f"index {index}: _meta.{META_KEY}.refresh_interval '1s}}]}}'",
        f"index {index}: _meta.{META_KEY}.number_of_replicas 'many'",
    ]
    # the server default refresh interval (no own value) and the configured replicas
    assert index_state(client, settings.index_name) == ((None, str(OWN_REPLICAS)), None)
    assert client.indices.get_mapping(index=index)[index]["mappings"]["_meta"] == meta
