"""A push running while `loader apply` copies the index into a new version (issue #31), three
times: every chunk the push reports written is in the version the alias ends on (the copy, or
the old version when the apply refused a copy that differs and says why); what the write block
refused the push names as failed. Before, writes acknowledged just before the block but not yet
refreshed were not copied (a reindex reads what is refreshed), and the moved alias lost them
while the push reported them written.

The first round holds the push mid-way until the apply has set its write block, so the push
always writes into the block there; the other two race freely, as the probe did (on a quiet
machine the push may end before the block, so a free round alone could not fail for a push
the block did not stop)."""

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
HELD_AFTER = 120  # bulk requests the held round's push sends before it waits for the block
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


def _pushing(
    folder, settings, embedder, reports: list, released: threading.Event | None = None
) -> threading.Thread:
    """A thread that pushes ``folder`` as tenant t and appends its report to ``reports``. With
    ``released``, its bulk request number HELD_AFTER + 1 waits until the event is set."""

    def run() -> None:
        client = connect(settings)
        if released is not None:
            bulk = client.bulk
            sent = 0

            def held_bulk(*args, **kwargs):
                nonlocal sent
                sent += 1
                if sent > HELD_AFTER:
                    released.wait(ROUND_SECONDS)
                return bulk(*args, **kwargs)

            client.bulk = held_bulk
        reports.append(push(folder, settings, tenant="t", client=client, embedder=embedder))

    return threading.Thread(target=run)


def _reindex_after_the_push(pushing: threading.Thread, released: threading.Event):
    """apply's ``_reindex``, run once the held push, released when the copied version is already
    write-blocked, has finished writing into the block."""
    reindex = apply_module._reindex

    def reindex_after_the_push(*args, **kwargs):
        released.set()
        pushing.join(ROUND_SECONDS)
        return reindex(*args, **kwargs)

    return reindex_after_the_push


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
        held = round_number == 0
        released = threading.Event() if held else None
        pushing = _pushing(folder, settings, embedder, reports, released)
        if held:
            monkeypatch.setattr(
                apply_module, "_reindex", _reindex_after_the_push(pushing, released)
            )
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
        pushing.join(timeout=max(1.0, deadline - time.monotonic()))
        assert not pushing.is_alive(), "the push did not finish in time"

        (report,) = reports
        (target,) = client.indices.get_alias(name=alias)
        failed = {error["source"] for error in report.errors}
        if held:  # it wrote on into the block, which refused it
            assert failed, "the held push wrote nothing into the write block"
            assert all("block" in error["reason"].lower() for error in report.errors), report.errors
        stored = _chunks_by_source(client, alias, collection)
        written = {f"f{number:03d}.md" for number in range(FILES)} - failed
        lost = sorted(path for path in written if stored[path] != CHUNKS)
        assert not lost, (
            f"round {round_number}: {len(lost)} written documents not whole in {target}"
        )
        check = check_copy(client, settings, target)
        assert check.status != "fail", check.line()
