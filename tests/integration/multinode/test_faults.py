"""Faults during a push, on the 3-node cluster: a node killed mid-push, the `loader push` process
interrupted (SIGINT, SIGKILL), and a node whose write queue overflows (429s).

After each, the index must hold exactly what an uninterrupted push of the folder writes: the same
chunk ids with the same content and document hashes (``planned_chunks``, computed by the push's
own planning code), no duplicates, no stale chunks, and replicas that agree with their primaries.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import threading
import time

import pytest
from opensearchpy import helpers

from loader.index.apply import apply_config
from loader.ingest.sync import push
from loader.settings import Settings

from .cluster_fixtures import (
    assert_copies_agree,
    delete_index,
    indexed_chunks,
    planned_chunks,
    push_through_node_loss,
    shard_copies,
    wait_for,
    write_corpus,
)
from .conftest import SLOW_NODE


def writes(client, alias: str) -> int:
    """Documents indexed into the alias's primaries so far, refreshed or not."""
    stats = client.indices.stats(index=alias, metric="indexing")
    return stats["_all"]["primaries"]["indexing"]["index_total"]


def count_matching(client, alias: str, phrase: str) -> int:
    """Chunks whose content has ``phrase`` (visible after the 1 s refresh interval)."""
    body = {"query": {"match_phrase": {"content": phrase}}}
    return client.count(index=alias, body=body)["count"]


@pytest.fixture
def replicated(three_nodes, index_name, embedder):
    """Settings of a 3-shard, 1-replica index on the 3-node cluster; deleted afterwards."""
    settings = Settings(
        opensearch_url=three_nodes.url,
        index_name=index_name,
        number_of_shards=3,
        number_of_replicas=1,
    )
    client = three_nodes.client()
    apply_config(settings, dimension=embedder.dimension, client=client)
    client.cluster.health(index=index_name, wait_for_status="green", request_timeout=60)
    yield settings
    delete_index(three_nodes.client(), index_name)


def test_node_loss_mid_push(three_nodes, replicated, embedder, tmp_path):
    """SIGKILL node 3 while a push of 300 documents is writing; start it again. The push
    completes or fails loudly; a rerun completes; the index is exactly the planned chunks."""
    settings = replicated.replace(bulk_batch_size=5)  # many small requests: the kill lands mid-way
    alias = settings.index_name
    client = three_nodes.client()
    folder = tmp_path / "stations"
    write_corpus(folder, range(300))
    expected = planned_chunks(folder, settings, embedder)

    loss = push_through_node_loss(
        three_nodes,
        folder,
        settings,
        embedder,
        request_timeout=60,
        start_timeout=180,
        join_timeout=300,
    )
    assert loss.written_before < len(expected)
    report = loss.report
    rerun = push(folder, settings, client=client, embedder=embedder)
    assert rerun.failed == 0, rerun.errors
    assert rerun.chunks_deleted == 0  # nothing stale was ever written
    if report is not None and not report.failed:
        assert (rerun.unchanged, rerun.chunks_written) == (300, 0)

    assert indexed_chunks(client, alias) == expected
    assert client.count(index=alias)["count"] == len(expected)
    assert_copies_agree(client, alias, len(expected))
    print(
        f"node loss: {loss.written_before} of {len(expected)} chunks written before the kill; "
        f"push {'completed' if report and not report.failed else 'failed'} "
        f"{loss.seconds_after_kill:.1f} s after it (retries {getattr(report, 'retries', '-')}); "
        f"rerun wrote {rerun.chunks_written}"
    )


def loader_push_command(folder) -> list[str]:
    """`loader push FOLDER`, run by the interpreter running the tests (the entry point's code)."""
    return [sys.executable, "-c", "from loader.cli import cli; cli()", "push", str(folder)]


@pytest.mark.parametrize(
    "signal_number", [signal.SIGINT, signal.SIGKILL], ids=["sigint", "sigkill"]
)
def test_interrupted_push_converges(three_nodes, replicated, embedder, tmp_path, signal_number):
    """Interrupt a `loader push` process that is updating, adding and removing documents; a
    rerun leaves the index exactly as an uninterrupted push would."""
    settings = replicated
    alias = settings.index_name
    client = three_nodes.client()
    folder = tmp_path / "stations"
    write_corpus(folder, range(150))
    first = push(folder, settings, client=client, embedder=embedder)
    assert (first.added, first.failed) == (150, 0)

    # The new state: 100 revised (one chunk more each), 20 removed, 50 new, 30 unchanged.
    write_corpus(folder, range(100), revision=2)
    for number in range(130, 150):
        (folder / f"station-{number:04d}.md").unlink()
    write_corpus(folder, range(150, 200))
    expected = planned_chunks(folder, settings, embedder)
    revised_total = 100  # one "revised log" section per revised document

    env = {k: v for k, v in os.environ.items() if not k.startswith("LOADER_")}
    env.update(
        OPENSEARCH_URL=three_nodes.url,
        LOADER_INDEX_NAME=alias,
        LOADER_NUMBER_OF_SHARDS="3",
        LOADER_NUMBER_OF_REPLICAS="1",
        LOADER_BULK_BATCH_SIZE="2",  # a long write phase to interrupt
        HF_HUB_OFFLINE="1",
        TOKENIZERS_PARALLELISM="false",
    )
    writes_before = writes(client, alias)
    process = subprocess.Popen(
        loader_push_command(folder),
        cwd=tmp_path,  # no loader.toml of the repository is read
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        # A job started in the background (nohup, `&`, some CI runners) inherits SIGINT ignored,
        # and Python then installs no KeyboardInterrupt handler: restore the default first.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    try:
        # Indexing stats count each write at once (a search waits for a refresh, and on an
        # idle machine the whole write phase can end within that second).
        wait_for(
            lambda: process.poll() is not None or writes(client, alias) - writes_before >= 10,
            timeout=240,
            what="`loader push` to start writing",
            interval=0.05,
        )
        assert process.poll() is None, f"push ended before the signal: {process.communicate()}"
        process.send_signal(signal_number)
        _, stderr = process.communicate(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    if signal_number == signal.SIGKILL:
        assert process.returncode == -signal.SIGKILL
    else:  # Ctrl-C: 130, as a shell reports an interrupted command
        assert process.returncode == 130 and "interrupted" in stderr, (process.returncode, stderr)

    interrupted = indexed_chunks(client, alias)
    assert interrupted != expected, "the push finished before the signal: nothing was tested"
    assert count_matching(client, alias, "revised log") < revised_total

    rerun = subprocess.run(
        [*loader_push_command(folder), "--json"],
        cwd=tmp_path,
        env={**env, "LOADER_BULK_BATCH_SIZE": "500"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert rerun.returncode == 0, rerun.stderr
    report = json.loads(rerun.stdout)
    assert report["failed"] == 0 and report["chunks"] == len(expected)
    assert report["deleted"] == 20  # the removed files, whatever the interruption left

    assert indexed_chunks(client, alias) == expected
    assert client.count(index=alias)["count"] == len(expected)
    assert_copies_agree(client, alias, len(expected))


def test_backpressure_is_retried(three_nodes, index_name, embedder, tmp_path):
    """Bulk requests against a node with a one-slot write queue, under concurrent pressure, get
    429s; the push retries them with backoff and completes with exactly the planned chunks."""
    slow = three_nodes.nodes[SLOW_NODE]
    client = three_nodes.client()
    settings = Settings(
        opensearch_url=three_nodes.url,
        index_name=index_name,
        number_of_shards=4,
        number_of_replicas=0,
        bulk_batch_size=10,
    )
    pressure_index = f"{index_name}-pressure"
    pinned = {"index.routing.allocation.require._name": slow.name}
    apply_config(settings, dimension=embedder.dimension, client=client)
    try:
        (versioned,) = client.indices.get_alias(name=index_name)
        client.indices.put_settings(index=versioned, body=pinned)
        client.indices.create(
            index=pressure_index,
            body={"settings": {"number_of_shards": 4, "number_of_replicas": 0, **pinned}},
        )
        client.cluster.health(
            index=f"{index_name}*",
            wait_for_status="green",
            wait_for_no_relocating_shards=True,
            request_timeout=60,
        )
        # The allocation filter moves shards asynchronously: health may answer before the
        # relocation has even started.
        wait_for(
            lambda: {row["node"] for row in shard_copies(client, index_name)} == {slow.name},
            timeout=120,
            what=f"every shard of {index_name} to move to {slow.name}",
        )

        stop = threading.Event()
        rejected = []

        def pressure(worker: int) -> None:
            """Small bulk requests to the slow node with short pauses: they collide with the
            push's requests in its one-slot queue, yet leave the push room to get through."""
            own = three_nodes.client()
            number = 0
            while not stop.is_set():
                actions = [
                    {"_index": pressure_index, "_id": f"{worker}-{number + i}", "n": number + i}
                    for i in range(20)
                ]
                number += 20
                _, errors = helpers.bulk(own, actions, raise_on_error=False, max_retries=0)
                rejected.extend(e for e in errors if e.get("index", {}).get("status") == 429)
                time.sleep(0.05)

        workers = [threading.Thread(target=pressure, args=(i,), daemon=True) for i in range(2)]
        for worker in workers:
            worker.start()
        try:
            folder = tmp_path / "stations"
            write_corpus(folder, range(100))
            report = push(folder, settings, client=client, embedder=embedder)
        finally:
            stop.set()
            for worker in workers:
                worker.join(timeout=60)

        assert rejected, "the pressure never filled the write queue: nothing was tested"
        assert report.retries > 0, "the push saw no 429 under pressure"
        assert report.failed == 0 and not report.errors, report.errors
        expected = planned_chunks(folder, settings, embedder)
        assert report.chunks_written == len(expected)
        assert indexed_chunks(client, index_name) == expected
        stats = client.nodes.stats(node_id=slow.name, metric="thread_pool")
        (node_stats,) = stats["nodes"].values()
        assert node_stats["thread_pool"]["write"]["rejected"] > 0
        print(
            f"backpressure: push retried {report.retries} items; pressure saw "
            f"{len(rejected)} rejections; {report.seconds:.1f} s"
        )
    finally:
        client.indices.delete(index=pressure_index, ignore=[404])
        delete_index(client, index_name)
