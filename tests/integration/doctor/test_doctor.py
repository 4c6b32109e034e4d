"""`loader doctor` on the real cluster: all green on a fresh `loader apply` and push, and each
planted fault found, one by one -- a deleted pipeline, a template edited by hand, an index of a
wrong dimension behind the alias, replicas changed by hand, chunks cut with other settings, a
write block on the index (set by hand, or left by a SIGKILLed `loader apply`), documents a
SIGKILLed push left half-written."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from loader.cli import cli
from loader.doctor.checks import run_doctor
from loader.index import bulk_load, copy_check
from loader.index.apply import apply_config
from loader.index.render import render_config
from loader.ingest.sync import push
from loader.modes import HYBRID_MODES, search_mode
from tests.killed import apply_killed_at_first_reindex_poll, push_killed_after_first_bulk

DOCS = {
    "refunds.md": "---\ntenant: A\n---\n# Refund policy\n\n## Late deliveries\n\n"
    "Orders delayed by more than 45 minutes get a full refund.\n",
    "printer.md": "---\ntenant: B\n---\n# Printer manual\n\n## Error codes\n\n"
    "Error E1043 means the paper tray is empty.\n",
}


@pytest.fixture
def settings(client, base_settings, unique_name, embedder, tmp_path):
    settings = base_settings.replace(index_name=unique_name)
    apply_config(settings, dimension=embedder.dimension, client=client)
    folder = tmp_path / "kb"
    folder.mkdir()
    for name, text in DOCS.items():
        (folder / name).write_text(text, encoding="utf-8")
    assert push(folder, settings, client=client, embedder=embedder).failed == 0
    return settings


def _doctor(settings, client, embedder):
    return run_doctor(settings, client=client, dimension=embedder.dimension)


def _failed(report) -> dict[str, str]:
    return {check.name: check.detail for check in report.failures}


def test_all_green_on_a_fresh_apply(settings, client, embedder):
    report = _doctor(settings, client, embedder)
    assert _failed(report) == {}, report.lines()
    names = {check.name: check for check in report.checks}
    alias = settings.index_name
    assert names["alias"].detail == f"{alias} -> {alias}-v1"
    assert names["chunks per tenant"].detail == "2 chunks: A 1, B 1"
    assert names["chunking"].status == "ok"
    assert names["index blocks"].detail == f"no write or read block on {alias}-v1"
    assert names["half-written documents"].detail == "the chunks of each of the 2 documents agree"
    for mode in map(search_mode, HYBRID_MODES):  # every mode's pipeline, read by its technique
        check = names[f"fused scores {alias}-hybrid | {alias}-{mode.pipeline}"]
        assert check.status == "ok" and check.detail.startswith(f"{mode.technique}, top score ")
    assert names[f"k-NN filter {alias}-hybrid"].status == "ok"
    assert names[f"k-NN filter {alias}-vector"].status == "ok"
    result = CliRunner().invoke(
        cli, ["doctor", "--url", settings.opensearch_url, "--index", alias, "--json"]
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["healthy"] is True


def test_finds_an_index_a_killed_bulk_load_push_left_relaxed(settings, client, embedder):
    # What `loader push --bulk-load` killed with SIGKILL leaves: the record and refresh off.
    bulk_load.relax(client, settings)
    failed = _failed(_doctor(settings, client, embedder))
    assert "update bulk-load settings" in failed.pop("index drift")
    assert failed == {}
    apply_config(settings, dimension=embedder.dimension, client=client)  # the fix it names
    assert _failed(_doctor(settings, client, embedder)) == {}


def test_finds_a_deleted_pipeline(settings, client, embedder):
    alias = settings.index_name
    client.transport.perform_request("DELETE", f"/_search/pipeline/{alias}-rrf")
    failed = _failed(_doctor(settings, client, embedder))
    assert failed.pop(f"search pipeline {alias}-rrf") == "missing"
    assert "is not defined" in failed.pop(f"fused scores {alias}-hybrid | {alias}-rrf")
    assert failed == {}
    result = CliRunner().invoke(cli, ["doctor", "--url", settings.opensearch_url, "--index", alias])
    assert result.exit_code == 5
    assert f"FAIL  search pipeline {alias}-rrf: missing; fix: run `loader apply`" in result.output


def test_finds_a_template_edited_by_hand(settings, client, embedder):
    alias = settings.index_name
    stored = client.get_script(id=f"{alias}-bm25")["script"]
    client.put_script(
        id=f"{alias}-bm25",
        body={"script": {"lang": "mustache", "source": stored["source"] + "\n"}},
    )
    failed = _failed(_doctor(settings, client, embedder))
    assert failed == {f"search template {alias}-bm25": "differs from the files (changed by hand?)"}


def test_finds_an_index_of_a_wrong_dimension_behind_the_alias(settings, client, embedder):
    alias = settings.index_name
    wrong = render_config(settings, dimension=8).index
    client.indices.create(index=f"{alias}-v2", body=wrong)
    client.indices.update_aliases(
        body={
            "actions": [
                {"remove": {"index": f"{alias}-v1", "alias": alias}},
                {"add": {"index": f"{alias}-v2", "alias": alias}},
            ]
        }
    )
    report = _doctor(settings, client, embedder)
    failed = _failed(report)
    assert failed["vector dimension"] == (
        f"the index stores 8-dimensional vectors, {settings.embedding_model} makes "
        f"{embedder.dimension}"
    )
    assert "dimension 8 -> 384" in failed["index drift"]
    with pytest.raises(Exception) as raised:
        report.check()
    assert raised.value.exit_code == 5


def test_finds_replicas_changed_by_hand(settings, client, embedder):
    alias = settings.index_name
    client.indices.put_settings(index=alias, body={"index": {"number_of_replicas": 1}})
    failed = _failed(_doctor(settings, client, embedder))
    assert failed == {
        "index drift": f"~ update index settings {alias}-v1 (number_of_replicas: 1 -> 0)"
    }


def test_finds_chunks_cut_with_other_settings(settings, client, embedder):
    failed = _failed(_doctor(settings.replace(chunk_target_tokens=60), client, embedder))
    assert set(failed) == {"chunking"}
    assert failed["chunking"].startswith("2 documents (2 chunks) were cut with other chunking")


@pytest.fixture
def block(settings, client):
    """Set an ``index.blocks.*`` setting on the alias's index; every block set is lifted when the
    test ends (an index with a read_only block cannot be deleted)."""
    index = f"{settings.index_name}-v1"
    names: list[str] = []

    def set_block(name: str) -> str:
        names.append(name)
        client.indices.put_settings(index=index, body={f"index.blocks.{name}": True})
        return index

    yield set_block
    if names:
        client.indices.put_settings(
            index=index, body={f"index.blocks.{name}": None for name in names}
        )


# Not read_only_allow_delete: OpenSearch lifts it itself within 30 s on a node below the high
# disk watermark, so the test would race the disk monitor (the unit tests cover its message).
@pytest.mark.parametrize(
    ("name", "effect"),
    [
        ("write", "every `loader push` fails"),
        ("read_only", "every `loader push` and `loader apply` fails"),
    ],
)
def test_finds_a_block_on_the_index(settings, client, embedder, block, name, effect):
    index = block(name)
    failed = _failed(_doctor(settings, client, embedder))
    assert failed == {"index blocks": f"{index} has index.blocks.{name} = true: {effect}"}
    result = CliRunner().invoke(
        cli, ["doctor", "--url", settings.opensearch_url, "--index", settings.index_name]
    )
    assert result.exit_code == 5, result.output
    assert (
        f"FAIL  index blocks: {index} has index.blocks.{name} = true: {effect}; fix: PUT "
        f'{index}/_settings {{"index.blocks.{name}": null}} once whoever set it is done'
    ) in result.output


def _write_block(client, index: str) -> str | None:
    answer = client.indices.get_settings(index=index, name="index.blocks.write", flat_settings=True)
    return ((answer.get(index) or {}).get("settings") or {}).get("index.blocks.write")


def test_a_block_set_by_hand_is_left_alone_by_apply(settings, client, embedder, block):
    """No record in _meta: the block is someone else's; apply plans nothing and lifts nothing."""
    index = block("write")
    where = ["--url", settings.opensearch_url, "--index", settings.index_name]
    dry = CliRunner().invoke(cli, ["apply", "--dry-run", *where])
    assert dry.exit_code == 0, dry.output
    assert "write block" not in dry.output
    assert dry.output.splitlines()[-1] == "no changes"
    applied = CliRunner().invoke(cli, ["apply", *where])
    assert applied.exit_code == 0, applied.output
    assert _write_block(client, index) == "true"
    failed = _failed(_doctor(settings, client, embedder))
    assert failed == {
        "index blocks": f"{index} has index.blocks.write = true: every `loader push` fails"
    }


def test_finds_the_block_a_killed_apply_left_and_apply_lifts_it(
    settings, client, embedder, tmp_path
):
    """A real `loader apply` (a new version: 2 shards) SIGKILLed at the first poll of its reindex:
    the alias still points at v1, which keeps the write block. Before, doctor's fix was the
    generic PUT, and `loader apply` (nothing else to change) left v1 blocked, so every push
    failed with exit 8; now doctor names the interrupted apply and apply lifts the block."""
    alias = settings.index_name
    v1, v2 = f"{alias}-v1", f"{alias}-v2"
    apply_killed_at_first_reindex_poll(settings, embedder.dimension, number_of_shards=2)
    assert client.indices.get_alias(name=alias) == {v1: {"aliases": {alias: {}}}}
    assert _write_block(client, v1) == "true"
    record = client.indices.get_mapping(index=v1)[v1]["mappings"]["_meta"]["loader_reindex_block"]
    assert record["dest"] == v2
    left_by = (
        f"left by a `loader apply` copying {v1} to {v2}, started {record['started_at']} that "
        "did not finish"
    )

    where = ["--url", settings.opensearch_url, "--index", alias]
    doctor = CliRunner().invoke(cli, ["doctor", *where])
    assert doctor.exit_code == 5, doctor.output
    assert (
        f"FAIL  index blocks: {v1} has index.blocks.write = true: every `loader push` fails; "
        f"{left_by}; fix: run `loader apply`: it lifts the write block (see `loader apply "
        "--dry-run`)"
    ) in doctor.output
    lift_line = f"~ update write block {v1} (lift index.blocks.write: {left_by})"
    assert f"FAIL  index drift: {lift_line}; fix: run `loader apply`" in doctor.output

    folder = tmp_path / "kb"
    refunds = folder / "refunds.md"
    refunds.write_text(refunds.read_text().replace("45 minutes", "30 minutes"), encoding="utf-8")
    pushed = CliRunner().invoke(cli, ["push", str(folder), *where])
    assert pushed.exit_code == 8, pushed.output  # what every push meets until the block goes
    assert f"index {v1} is write-blocked" in pushed.output

    dry = CliRunner().invoke(cli, ["apply", "--dry-run", *where])
    assert dry.exit_code == 0, dry.output
    assert lift_line in dry.output.splitlines()
    assert _write_block(client, v1) == "true"  # a dry run changes nothing
    applied = CliRunner().invoke(cli, ["apply", *where])
    assert applied.exit_code == 0, applied.output
    assert _write_block(client, v1) is None
    meta = client.indices.get_mapping(index=v1)[v1]["mappings"]["_meta"]
    assert "loader_reindex_block" not in meta and "doc_id_scheme" in meta
    again = CliRunner().invoke(cli, ["apply", "--dry-run", "--delete-old", *where])
    assert f"- delete index {v2} (left by an apply that did not finish)" in again.output
    assert "write block" not in again.output

    pushed = CliRunner().invoke(cli, ["push", str(folder), *where])
    assert pushed.exit_code == 0, pushed.output
    assert client.count(index=alias, q="content:30")["count"] == 1
    assert _failed(_doctor(settings, client, embedder)) == {}


def _sections(title: str, count: int, version: str) -> str:
    parts = "".join(
        f"## Part {number}\n\nPart {number} of the {title}, {version}.\n\n"
        for number in range(count)
    )
    return f"---\ntenant: A\n---\n# {title}\n\n{parts}"


# A real push, SIGKILLed after its first bulk request (4 chunks): guide.md's 3 new chunks are
# written but its stale 4th is not deleted yet (deletes come last), manual.md has 1 of 3.


@pytest.fixture
def half_written(settings, client, embedder, tmp_path):
    """guide.md pushed whole (4 chunks), then a push of its new version (3 chunks) and of a new
    manual.md (3 chunks) SIGKILLed after its first bulk request; the handbook folder."""
    folder = tmp_path / "handbook"
    folder.mkdir()
    (folder / "guide.md").write_text(_sections("Guide", 4, "first edition"), encoding="utf-8")
    first = push(folder, settings, client=client, embedder=embedder)
    assert (first.failed, first.chunks) == (0, 4)
    (folder / "guide.md").write_text(_sections("Guide", 3, "second edition"), encoding="utf-8")
    (folder / "manual.md").write_text(_sections("Manual", 3, "first edition"), encoding="utf-8")
    push_killed_after_first_bulk(settings, folder, bulk_batch_size=4)
    client.indices.refresh(index=settings.index_name)  # what the index's refresh does within 1 s
    return folder


def test_finds_documents_a_killed_push_left_half_written(
    settings, client, embedder, half_written, monkeypatch
):
    # One bucket a request: guide.md's two doc_hashes come in two pages of the aggregation.
    monkeypatch.setattr(copy_check, "PAGE", 1)
    failed = _failed(_doctor(settings, client, embedder))
    assert failed == {
        "half-written documents": "2 of 4 documents are half-written (a push stopped in the "
        "middle of them, or one is running now): handbook/guide.md (tenant 'A'): chunks of 2 "
        "pushes (3 of 3, 1 of 4); handbook/manual.md (tenant 'A'): 1 of 3 chunks"
    }
    where = ["--url", settings.opensearch_url, "--index", settings.index_name]
    result = CliRunner().invoke(cli, ["doctor", *where])
    assert result.exit_code == 5, result.output
    assert (
        "fix: run `loader push <folder> --tenant A` (collection 'handbook'): it rewrites them"
        in result.output
    )
    # The fix it names: the next push rewrites both documents.
    pushed = CliRunner().invoke(cli, ["push", str(half_written), "--tenant", "A", *where])
    assert pushed.exit_code == 0, pushed.output
    report = _doctor(settings, client, embedder)
    assert _failed(report) == {}
    names = {check.name: check.detail for check in report.checks}
    assert names["half-written documents"] == "the chunks of each of the 4 documents agree"


def test_finds_a_version_that_lacks_documents_of_the_version_it_was_copied_from(
    settings, client, embedder, tmp_path
):
    """What an apply that did not check its copy left (one before the check, copying while a
    push wrote): v2 behind the alias lacks a document v1, the version it was copied from, holds.
    Doctor compares the two as apply does before its swap and names it (not a document pushed
    since the swap, only in v2); the push it names writes it again."""
    alias = settings.index_name
    v1, v2 = f"{alias}-v1", f"{alias}-v2"
    apply_config(
        settings.replace(text_analyzer="standard"), dimension=embedder.dimension, client=client
    )
    names = {check.name: check for check in _doctor(settings, client, embedder).checks}
    assert names["copied version"].detail.startswith(
        f"{v2} held the 2 chunks of {v1} when the alias moved to it"
    )
    meta = client.indices.get_mapping(index=v2)[v2]["mappings"]["_meta"]
    unchecked = {key: value for key, value in meta.items() if key != "loader_copy"}
    client.indices.put_mapping(index=v2, body={"_meta": unchecked})
    # A document pushed since the swap is only in v2: no copy makes one, it is left out.
    (tmp_path / "kb" / "new.md").write_text("---\ntenant: A\n---\n# New\n\nA new page.\n")
    assert push(tmp_path / "kb", settings, client=client, embedder=embedder).added == 1
    client.delete_by_query(
        index=v2, body={"query": {"term": {"source": "refunds.md"}}}, refresh=True
    )

    report = _doctor(settings, client, embedder)
    (check,) = [check for check in report.failures if check.name == "copied version"]
    assert check.detail == (
        f"{v2} does not hold every document of {v1} as it is there, the version a `loader "
        "apply` copied it from (one that did not check its copy; a document changed or removed "
        "since the alias moved counts too): 1 of 2 documents differ (by tenant: 'A' 1): "
        f"kb/refunds.md (tenant 'A'): 1 chunk in {v1}, none in {v2}"
    )
    assert check.fix == (
        "push the folders of the tenants named again (`loader push <folder> --tenant <t>`): it "
        f"writes what {v2} lacks; then `loader apply --delete-old` deletes {v1}"
    )
    assert push(tmp_path / "kb", settings, client=client, embedder=embedder).failed == 0
    names = {check.name: check for check in _doctor(settings, client, embedder).checks}
    assert names["copied version"].line() == (
        f"ok    copied version: {v2} holds the chunks of each of the 2 documents of {v1}, the "
        "version it was copied from"
    )
