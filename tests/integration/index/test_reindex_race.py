"""A push running while `loader apply` copies the index into a new version (issue #31), three
times: every chunk the push reports written is in the version the alias ends on (the copy, or
the old version when the apply refused a copy that differs and says why); what the write block
refused the push names as failed. Before, writes acknowledged just before the block but not yet
refreshed were not copied (a reindex reads what is refreshed), and the moved alias lost them
while the push reported them written.

The overlap is made certain, never left to timing (issue #44: on a quiet machine a free push
once ended before the block): the push writes freely until bulk request HELD_AFTER, then waits
for the block, and apply's pause point (``apply.write_blocked_hook``, called once the block is
set, before the copy) releases it and holds the apply until the push has sent AFTER_BLOCK bulk
requests into the block -- in the first round until the push has ended, so the copy starts after
every write; in the others the copy then runs beside the rest of the push. Each round asserts
the overlap: the push was still running when the block landed and wrote into it."""

from __future__ import annotations

import threading
import time
from collections import Counter

import pytest
from opensearchpy import helpers

from loader.cluster.client import connect
from loader.doctor.documents import check_copy
from loader.errors import ClusterError
from loader.index import apply as apply_module
from loader.index.apply import apply_config
from loader.ingest.sync import push

ROUNDS = 3  # one analyzer of ``analyzers`` each
FILES = 80  # of CHUNKS chunks each, written one chunk a bulk request
CHUNKS = 3
STARTED = 50  # chunks visible before the apply starts
HELD_AFTER = 120  # bulk requests the push sends before it waits for the block
AFTER_BLOCK = 3  # bulk requests the push sends into the block before the copy may start
ROUND_SECONDS = 240


def race_folder(root, name: str, files: int = FILES):
    """A folder ``name`` of ``files`` Markdown files of CHUNKS sections each (also the hostile
    probe's, benchmarks/probe_hostile.py)."""
    folder = root / name
    folder.mkdir()
    for number in range(files):
        parts = "".join(
            f"## Part {part}\n\nPart {part} of file {number} of {name}.\n\n"
            for part in range(CHUNKS)
        )
        (folder / f"f{number:03d}.md").write_text(f"# File {number}\n\n{parts}", encoding="utf-8")
    return folder


def _visible(client, alias: str, collection: str) -> int:
    body = {"query": {"term": {"collection": collection}}}
    return client.count(index=alias, body=body)["count"]


def _chunks_by_source(client, alias: str, collection: str) -> Counter:
    """source path -> chunks of ``collection`` in the index behind ``alias`` (refreshed first)."""
    client.indices.refresh(index=alias)
    hits = helpers.scan(
        client,
        index=alias,
        query={"query": {"term": {"collection": collection}}, "_source": ["source"]},
    )
    return Counter(hit["_source"]["source"] for hit in hits)


class Overlap:
    """The push and the apply held against each other: the push's bulk request number
    HELD_AFTER + 1 waits until the block is set; apply's pause point (``hook``) records whether
    the push was still running, releases it and waits until it has written into the block."""

    def __init__(self, until_the_push_ends: bool) -> None:
        self.until_the_push_ends = until_the_push_ends
        self.blocked = threading.Event()
        self.sent = 0
        self.sent_after_block = 0
        self.running_at_block: bool | None = None
        self.blocked_index: str | None = None
        self.pushing: threading.Thread | None = None
        self.gave_up = False
        self.lock = threading.Lock()

    def held_bulk(self, bulk):
        def send(*args, **kwargs):
            with self.lock:
                self.sent += 1
                held = self.sent > HELD_AFTER and not self.gave_up
            if held and not self.blocked.wait(ROUND_SECONDS):
                self.gave_up = True  # no block came: the round's assertions say so
            if self.blocked.is_set():
                with self.lock:
                    self.sent_after_block += 1
            return bulk(*args, **kwargs)

        return send

    def hook(self, index: str) -> None:
        assert self.pushing is not None
        self.blocked_index = index
        self.running_at_block = self.pushing.is_alive()
        self.blocked.set()
        if self.until_the_push_ends:
            self.pushing.join(ROUND_SECONDS)
            return
        deadline = time.monotonic() + ROUND_SECONDS
        while self.sent_after_block < AFTER_BLOCK and self.pushing.is_alive():
            assert time.monotonic() < deadline, "the push wrote nothing after the block"
            time.sleep(0.01)


def _pushing(folder, settings, embedder, reports: list, overlap: Overlap) -> threading.Thread:
    """A thread that pushes ``folder`` as tenant t through ``overlap``'s held bulk requests and
    appends its report to ``reports``."""

    def run() -> None:
        client = connect(settings)
        client.bulk = overlap.held_bulk(client.bulk)
        reports.append(push(folder, settings, tenant="t", client=client, embedder=embedder))

    return threading.Thread(target=run, daemon=True)  # a failed round leaves no process behind


def test_a_push_during_the_reindex_loses_no_chunk_it_wrote(
    client, base_settings, unique_name, embedder, tmp_path, monkeypatch: pytest.MonkeyPatch
):
    alias = unique_name
    settings = base_settings.replace(index_name=alias, bulk_batch_size=1)
    apply_config(settings, dimension=embedder.dimension, client=client)
    analyzers = ("standard", "simple", "whitespace")  # one new index version a round
    for round_number in range(ROUNDS):
        collection = f"round{round_number}"
        folder = race_folder(tmp_path, collection)
        reports: list = []
        overlap = Overlap(until_the_push_ends=round_number == 0)
        pushing = overlap.pushing = _pushing(folder, settings, embedder, reports, overlap)
        monkeypatch.setattr(apply_module, "write_blocked_hook", overlap.hook)
        deadline = time.monotonic() + ROUND_SECONDS
        pushing.start()
        while _visible(client, alias, collection) < STARTED:
            assert pushing.is_alive() and time.monotonic() < deadline, "the push did not start"
            time.sleep(0.02)
        changed = settings.replace(text_analyzer=analyzers[round_number])
        source = next(iter(client.indices.get_alias(name=alias)))
        try:
            apply_config(changed, dimension=embedder.dimension, client=client)
        except ClusterError as exc:  # the copy differed: the alias stays, the apply says why
            assert f"does not hold the chunks of {source}, so the alias was not moved" in str(exc)
        monkeypatch.undo()
        # The overlap happened: the block landed mid-push, and the push wrote on into it.
        assert overlap.blocked_index == source, "apply set no write block on the copied version"
        assert overlap.running_at_block, f"round {round_number}: the push ended before the block"
        pushing.join(timeout=max(1.0, deadline - time.monotonic()))
        assert not pushing.is_alive(), "the push did not finish in time"

        (report,) = reports
        (target,) = client.indices.get_alias(name=alias)
        failed = {error["source"] for error in report.errors}
        assert overlap.sent_after_block >= AFTER_BLOCK, overlap.sent_after_block
        assert failed, "the push wrote nothing into the write block"
        assert all("block" in error["reason"].lower() for error in report.errors), report.errors
        stored = _chunks_by_source(client, alias, collection)
        written = {f"f{number:03d}.md" for number in range(FILES)} - failed
        lost = sorted(path for path in written if stored[path] != CHUNKS)
        assert not lost, (
            f"round {round_number}: {len(lost)} written documents not whole in {target}"
        )
        check = check_copy(client, settings, target)
        assert check.status != "fail", check.line()
