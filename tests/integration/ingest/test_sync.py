"""`loader push` against the test cluster: the sync life cycle, asserted from the index.

push -> re-push (nothing embedded, nothing written) -> edit one file (only its chunks change)
-> delete one file (its chunks are gone) -> bad files (good ones indexed, each bad one reported,
nothing already indexed lost).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from opensearchpy import helpers

from loader.cli import cli
from loader.cluster.client import connect
from loader.errors import PartialFailure
from loader.index.apply import apply_config
from loader.ingest.sync import push
from loader.query.request import SearchRequest
from loader.query.search import search
from tests.paths import SAMPLE_DOCS

REFUNDS = """---
title: Refund policy
tags: [refunds]
published: 2026-01-10
---
# Refund policy

## Late deliveries

Orders delayed by more than 45 minutes past the promised time qualify for compensation.
Compensation is a full refund of the order value, paid to the original payment method within
5 to 7 working days.

## Missing items

Report a missing item within 2 hours of delivery and attach a photo.
"""

PAYMENTS = """# Payments

## UPI

Refunds for UPI payments usually reach your bank within 48 hours of approval.

## Cards

Card refunds take 5 to 7 working days.
"""

FAQ = "Opening hours\n\nSupport answers every day from 8 to 22.\n"


@pytest.fixture
def settings(base_settings, unique_name, embedder):
    settings = base_settings.replace(index_name=unique_name)
    apply_config(settings, dimension=embedder.dimension)
    return settings


@pytest.fixture
def folder(tmp_path: Path) -> Path:
    root = tmp_path / "helpdesk"
    root.mkdir()
    (root / "refunds.md").write_text(REFUNDS, encoding="utf-8")
    (root / "payments.md").write_text(PAYMENTS, encoding="utf-8")
    (root / "faq.txt").write_text(FAQ, encoding="utf-8")
    return root


def indexed(client, alias: str) -> dict[str, dict]:
    """chunk id -> source fields, straight from the index."""
    client.indices.refresh(index=alias)
    hits = helpers.scan(client, index=alias, query={"_source": {"excludes": ["embedding"]}})
    return {hit["_id"]: hit["_source"] for hit in hits}


def sources(chunks: dict[str, dict]) -> dict[str, int]:
    counts: dict[str, int] = {}
    for chunk in chunks.values():
        counts[chunk["source"]] = counts.get(chunk["source"], 0) + 1
    return counts


def test_push_life_cycle(client, settings, folder, embedder):
    alias = settings.index_name

    first = push(folder, settings, client=client, embedder=embedder)
    assert (first.added, first.updated, first.unchanged, first.failed) == (3, 0, 0, 0)
    chunks = indexed(client, alias)
    assert len(chunks) == first.chunks == first.chunks_written == first.embedded
    assert set(sources(chunks)) == {"refunds.md", "payments.md", "faq.txt"}
    late = [c for c in chunks.values() if "45 minutes" in c["content"]]
    assert len(late) == 1
    assert late[0]["content"].startswith("Refund policy > Late deliveries\n\n")
    assert late[0]["tags"] == ["refunds"] and late[0]["tenant"] == "default"
    assert late[0]["heading_path"] == "Late deliveries"

    again = push(folder, settings, client=client, embedder=embedder)
    assert (again.unchanged, again.embedded, again.chunks_written, again.chunks_deleted) == (
        3,
        0,
        0,
        0,
    )
    assert indexed(client, alias) == chunks

    (folder / "payments.md").write_text(
        PAYMENTS.replace("48 hours", "24 hours")
        + "\n## Wallet\n\nWallet credit expires after 90 days.\n",
        encoding="utf-8",
    )
    edited = push(folder, settings, client=client, embedder=embedder)
    assert (edited.added, edited.updated, edited.unchanged) == (0, 1, 2)
    after_edit = indexed(client, alias)
    for chunk_id, chunk in chunks.items():  # the other files' chunks are untouched
        if chunk["source"] != "payments.md":
            assert after_edit[chunk_id] == chunk
    payments = [c for c in after_edit.values() if c["source"] == "payments.md"]
    assert any("24 hours" in c["content"] for c in payments)
    assert not any("48 hours" in c["content"] for c in payments)
    assert any(c["heading_path"] == "Wallet" for c in payments)
    # The unchanged "Cards" section's vector was reused, not recomputed.
    assert edited.reused_vectors >= 1 and edited.embedded < len(payments)

    (folder / "refunds.md").write_text(REFUNDS.split("## Missing items")[0], encoding="utf-8")
    shrunk = push(folder, settings, client=client, embedder=embedder)
    assert (shrunk.updated, shrunk.embedded, shrunk.chunks_deleted) == (1, 0, 1)
    after_shrink = indexed(client, alias)
    assert not any("Missing items" in c["content"] for c in after_shrink.values())
    assert sources(after_shrink)["refunds.md"] == sources(after_edit)["refunds.md"] - 1

    (folder / "faq.txt").unlink()
    removed = push(folder, settings, client=client, embedder=embedder)
    assert removed.deleted == 1 and removed.chunks_deleted == sources(after_edit)["faq.txt"]
    assert "faq.txt" not in sources(indexed(client, alias))


def test_bad_files_are_reported_and_nothing_indexed_is_lost(client, settings, folder, embedder):
    alias = settings.index_name
    push(folder, settings, client=client, embedder=embedder)
    before = indexed(client, alias)

    # faq.txt turns bad after being indexed: its chunks must stay.
    (folder / "faq.txt").write_bytes(b"Opening hours \xff\xfe broken")
    (folder / "empty.md").write_text("   \n", encoding="utf-8")
    (folder / "image.md").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00binary")
    (folder / "notes.docx").write_bytes(b"PK\x03\x04")
    os.symlink(folder, folder / "loop")
    (folder / "new.md").write_text(
        "# New page\n\nA brand new page about vouchers.\n", encoding="utf-8"
    )

    result = CliRunner().invoke(
        cli, ["push", str(folder), "--json", "--url", settings.opensearch_url, "--index", alias]
    )
    assert result.exit_code == PartialFailure.exit_code, result.output
    report = json.loads(result.stdout)
    reasons = {item["source"]: item["reason"] for item in report["skipped"]}
    assert set(reasons) == {"faq.txt", "empty.md", "image.md", "notes.docx", "loop"}
    assert "UTF-8" in reasons["faq.txt"] and "empty" in reasons["empty.md"]
    assert "binary" in reasons["image.md"] and "loop" in reasons["loop"]
    assert report["added"] == 1 and report["unchanged"] == 2 and report["failed"] == 5

    after = indexed(client, alias)
    assert {k: v for k, v in after.items() if v["source"] != "new.md"} == before
    assert sources(after)["new.md"] >= 1


def test_a_push_into_a_write_blocked_index_says_why_and_loses_nothing(
    client, settings, folder, embedder
):
    """The block `loader apply` puts on the version it copies (or a full disk's): the push names
    the index, the cause and the remedy in one line, exits 8, and the index is as it was."""
    alias = settings.index_name
    index = f"{alias}-v1"
    push(folder, settings, client=client, embedder=embedder)
    before = indexed(client, alias)
    (folder / "payments.md").write_text(PAYMENTS.replace("48 hours", "24 hours"), encoding="utf-8")
    (folder / "faq.txt").unlink()
    client.indices.put_settings(index=index, body={"index.blocks.write": True})
    try:
        result = CliRunner().invoke(
            cli, ["push", str(folder), "--url", settings.opensearch_url, "--index", alias]
        )
        after = indexed(client, alias)
    finally:
        client.indices.put_settings(index=index, body={"index.blocks.write": None})

    assert result.exit_code == PartialFailure.exit_code, result.output
    counts = sources(before)
    failures = [line for line in result.stderr.splitlines() if line.startswith("failed")]
    assert failures == [
        f"failed faq.txt, payments.md: index {index} is write-blocked (a `loader apply` copying "
        f"it to a new version, or a full disk): {counts['payments.md']} chunks of these "
        f"documents were not written, {counts['faq.txt']} not deleted; push again when "
        "`loader doctor` shows no block"
    ]
    assert after == before  # nothing already indexed lost, nothing half-written
    again = push(folder, settings, client=client, embedder=embedder)
    assert (again.updated, again.deleted, again.failed) == (1, 1, 0)


def test_push_refuses_an_index_of_another_dimension(client, base_settings, unique_name, folder):
    settings = base_settings.replace(index_name=unique_name)
    apply_config(settings, dimension=8)
    result = CliRunner().invoke(
        cli, ["push", str(folder), "--url", settings.opensearch_url, "--index", unique_name]
    )
    assert result.exit_code == 5
    assert "stores 8-dimensional vectors" in result.output
    assert client.count(index=unique_name)["count"] == 0


SEED_QUESTION = "Do I get a refund if my order is more than 45 minutes late, and how is it paid?"


@pytest.mark.parametrize("mode", ["hybrid-rrf", "hybrid-minmax"])
def test_sample_docs_answer_the_seed_question(client, settings, embedder, tmp_path, mode):
    docs = SAMPLE_DOCS
    copy = shutil.copytree(docs, tmp_path / "docs")
    report = push(copy, settings, client=client, embedder=embedder)
    assert report.failed == 0 and report.warnings == []
    assert client.count(index=settings.index_name)["count"] == report.chunks > 0

    request = SearchRequest.from_settings(
        settings, SEED_QUESTION, tenant="default", mode=mode, rerank=False, k=1
    )
    result = search(request, settings, client=client, embedder=embedder)
    top = result.hits[0]
    assert top.source == "refund-policy.md"
    # Both answer sentences, in the one chunk the prompt would get.
    assert "delayed by more than 45 minutes past the promised time" in top.text
    assert "paid to the original payment method within 5 to 7 working days" in top.text


GUIDE = "# Guide\n\n" + "".join(
    f"## Step {n}\n\nStep {n} of the guide: turn dial {n} to position {n * 7}.\n\n"
    for n in range(1, 6)
)


def write_blocked_client(settings, index: str):
    """A client of its own whose bulk requests holding a write go out while ``index`` has a
    write block, and whose delete-only requests go out once it is lifted: a block (a `loader
    apply` copy, a full disk) that ends while a push runs."""
    spy = connect(settings)
    send = spy.bulk

    def bulk(*args, body, **kwargs):
        blocked = b'{"index":{' in body
        spy.indices.put_settings(index=index, body={"index.blocks.write": blocked or None})
        return send(*args, body=body, **kwargs)

    spy.bulk = bulk
    return spy


def test_a_changed_document_whose_writes_failed_keeps_its_old_chunks(
    client, settings, folder, embedder
):
    """Its stale chunks are not deleted when its new chunks were not all written (nothing
    indexed is lost); the removed file's chunks still go; the next push writes it whole."""
    alias = settings.index_name
    index = f"{alias}-v1"
    (folder / "guide.md").write_text(GUIDE, encoding="utf-8")
    push(folder, settings, client=client, embedder=embedder)
    before = indexed(client, alias)
    old_guide = {cid: c for cid, c in before.items() if c["source"] == "guide.md"}
    shorter = GUIDE.split("## Step 3")[0].replace("dial 1", "knob 1")
    (folder / "guide.md").write_text(shorter, encoding="utf-8")
    (folder / "faq.txt").unlink()

    spy = write_blocked_client(settings.replace(bulk_batch_size=1), index)
    try:
        report = push(folder, settings.replace(bulk_batch_size=1), client=spy, embedder=embedder)
    finally:
        client.indices.put_settings(index=index, body={"index.blocks.write": None})
    after = indexed(client, alias)

    assert (report.updated, report.deleted, report.failed) == (1, 1, 1)
    assert {error["source"] for error in report.errors} == {"guide.md"}
    stale = len(old_guide) - sum(1 for e in report.errors if e["source"] == "guide.md")
    assert stale >= 2
    # The old version is whole; the removed file is gone; the others are untouched.
    assert {cid: c for cid, c in after.items() if c["source"] == "guide.md"} == old_guide
    assert "faq.txt" not in sources(after)
    assert {cid: c for cid, c in after.items() if c["source"] != "guide.md"} == {
        cid: c for cid, c in before.items() if c["source"] not in ("guide.md", "faq.txt")
    }
    assert report.warnings == [
        f"kept {stale} old chunks of guide.md: its new chunks were not all written; "
        "the next push writes it again"
    ]
    assert report.chunks_written == 0 and report.chunks_deleted == sources(before)["faq.txt"]

    again = push(folder, settings, client=client, embedder=embedder)
    assert (again.updated, again.unchanged, again.failed) == (1, 2, 0)
    guide = {cid: c for cid, c in indexed(client, alias).items() if c["source"] == "guide.md"}
    assert again.chunks_deleted == stale and len(guide) == len(old_guide) - stale
    assert len({c["doc_hash"] for c in guide.values()}) == 1
    assert any("knob 1" in c["content"] for c in guide.values())
    assert not any("Step 3" in c["content"] for c in guide.values())
    assert push(folder, settings, client=client, embedder=embedder).unchanged == 3


def test_a_changed_document_the_mapping_refuses_keeps_its_old_chunks(
    client, settings, folder, embedder
):
    """One bulk request (the default batch) holds the changed document's writes and its stale
    deletions: the index refuses the writes (a tag longer than Lucene's 32766-byte term), so its
    stale chunks stay; once the file is fixed, the next push writes it whole."""
    alias = settings.index_name
    (folder / "guide.md").write_text(GUIDE, encoding="utf-8")
    push(folder, settings, client=client, embedder=embedder)
    old_guide = {c: v for c, v in indexed(client, alias).items() if v["source"] == "guide.md"}
    shorter = GUIDE.split("## Step 3")[0]
    (folder / "guide.md").write_text(f"---\ntags: [{'x' * 40_000}]\n---\n{shorter}", "utf-8")

    report = push(folder, settings, client=client, embedder=embedder)

    assert (report.updated, report.failed, report.chunks_written) == (1, 1, 0)
    assert all("immense term" in e["reason"] for e in report.errors)
    stale = len(old_guide) - len(report.errors)
    after = indexed(client, alias)
    assert {c: v for c, v in after.items() if v["source"] == "guide.md"} == old_guide
    assert report.warnings == [
        f"kept {stale} old chunks of guide.md: its new chunks were not all written; "
        "the next push writes it again"
    ]

    (folder / "guide.md").write_text(shorter, encoding="utf-8")
    again = push(folder, settings, client=client, embedder=embedder)
    assert (again.updated, again.failed, again.chunks_deleted) == (1, 0, stale)
    guide = [v for v in indexed(client, alias).values() if v["source"] == "guide.md"]
    assert len(guide) == len(old_guide) - stale
