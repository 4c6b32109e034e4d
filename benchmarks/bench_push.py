"""Push throughput on the SciFact corpus: first push, unchanged re-push, and the model alone.

    python benchmarks/bench_push.py --url http://127.0.0.1:9200 [--limit N] [--repeat 3]

Prints, per repetition and as medians:
- chunks per second of a first push into a fresh index, and the share of its wall time spent
  embedding;
- the time the model alone needs to embed the same chunk texts (same batch size);
- an unchanged re-push.
Targets on the 2-core machine: first push <= 1.25 x model alone; re-push >= 20 x faster than the
first push. Traffic goes only to --url (loopback); the index is deleted afterwards.

    python benchmarks/bench_push.py --limit 500 --embedding-location client,cluster

compares instead where chunks are embedded (``embedding_location``): per location, in the same
run and on the same corpus, a first push into a fresh index (chunks/s, seconds per bulk request)
and an unchanged re-push; the cluster's model is registered and deployed before the clock runs.

    python benchmarks/bench_push.py --limit 500 --workers 1,2 --repeat 2

compares ``push_workers``: per repetition, a first push into a fresh index per worker count (in
alternation, so a busy machine slows each alike; the pool's start is inside the push), then the
model alone over the same chunks with all cores and with one thread, and the start of a pool;
medians and the ratio of each count to the first.

    LOADER_EMBEDDING_MODEL=bge-small-en-v1.5 python3 benchmarks/bench_push.py --limit 300 \
        --embedding-backend onnx,onnx-int8 --repeat 3

compares ``embedding_backend`` the same way: per repetition and backend, in alternation, a first
push into a fresh index and the model alone over the same chunk texts; medians and the ratio of
each backend to the first. Settings come from the environment (``LOADER_*``) and ``loader.toml``
as for the CLI.

    python3 benchmarks/bench_push.py --limit 150 --readers none,onnx,onnx-int8 --repeat 3

compares the readers (issue #53): per repetition, in alternation, a first push into a fresh index
with one reader (``none``) and with the second reader (``second_embedding_model``, bge-small when
its jar is here) on each backend named; medians of wall and CPU seconds (this process: the
embedding), and each one's ratio to one reader's.

``--batch-tokens 8192`` runs the ONNX backends with that many padded tokens per onnxruntime call
instead of ``BATCH_TOKENS`` (in this process: with ``push_workers`` 1).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import resource
import statistics
import time
import uuid
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
# TOKENIZERS_PARALLELISM is left as `loader push` leaves it: unset for the ONNX backends (the
# tokenizer batches on every core before onnxruntime runs), "false" once torch is loaded.

from loader.cluster.client import connect  # noqa: E402
from loader.eval.datasets import corpus_to_documents, load_beir  # noqa: E402
from loader.index.apply import apply_config  # noqa: E402
from loader.ingest.chunking import chunk_document, chunking_config  # noqa: E402
from loader.ingest.sync import sync_documents  # noqa: E402
from loader.ingest.workers import BATCHES_PER_TASK, embed_passages  # noqa: E402
from loader.models import onnx_embedding  # noqa: E402
from loader.models.embedding import embedder_for  # noqa: E402
from loader.models.readers import reader_settings  # noqa: E402
from loader.resolve import resolve_settings  # noqa: E402

DEFAULT_DATASET = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("OPENSEARCH_URL", "http://127.0.0.1:9200"))
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--limit", type=int, default=0, help="first N documents only")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument(
        "--embedding-location",
        default="",
        help="comma-separated embedding_location values to compare (client,cluster)",
    )
    parser.add_argument(
        "--workers", default="", help="comma-separated push_workers values to compare (1,2)"
    )
    parser.add_argument(
        "--embedding-backend",
        default="",
        help="comma-separated embedding_backend values to compare (onnx,onnx-int8)",
    )
    parser.add_argument(
        "--batch-tokens",
        type=int,
        default=onnx_embedding.BATCH_TOKENS,
        help="padded tokens per onnxruntime call (ONNX backends)",
    )
    parser.add_argument(
        "--readers",
        default="",
        help="comma-separated second readers to compare: none, or a second_embedding_backend",
    )
    args = parser.parse_args()
    onnx_embedding.BATCH_TOKENS = args.batch_tokens

    settings, _sources = resolve_settings(overrides={"opensearch_url": args.url})
    corpus = load_beir(args.dataset).corpus
    if args.limit:
        corpus = dict(list(corpus.items())[: args.limit])
    embedder = embedder_for(settings)
    embedder.embed_passages(["warm up"])
    client = connect(settings)
    print(
        f"corpus: {len(corpus)} documents; model {settings.embedding_model} "
        f"({settings.embedding_backend}); {os.cpu_count()} cpus"
    )

    if args.embedding_location:
        compare_locations(args.embedding_location.split(","), settings, corpus, embedder, client)
        return
    if args.embedding_backend:
        backends = args.embedding_backend.split(",")
        compare_backends(backends, args.repeat, settings, corpus, client)
        return
    if args.readers:
        compare_readers(args.readers.split(","), args.repeat, settings, corpus, embedder, client)
        return
    if args.workers:
        counts = [int(value) for value in args.workers.split(",")]
        compare_workers(counts, args.repeat, settings, corpus, embedder, client)
        return
    rows = []
    for run in range(args.repeat):
        documents = corpus_to_documents(corpus)
        config = chunking_config(settings, embedder.max_text_tokens)
        texts = [
            c.text for d in documents for c in chunk_document(d, config, embedder.count_tokens)
        ]
        started = time.perf_counter()
        embedder.embed_passages(texts)
        model_alone = time.perf_counter() - started

        alias = f"bench-push-{uuid.uuid4().hex[:8]}"
        run_settings = settings.replace(index_name=alias)
        with fresh_index(run_settings, corpus, embedder, client) as push_corpus:
            first = push_corpus()
            again = push_corpus()
        assert first.failed == 0 and again.unchanged == len(corpus) and again.embedded == 0
        row = {
            "chunks": first.chunks,
            "first_s": first.seconds,
            "chunks_per_s": first.chunks / first.seconds,
            "embed_share": first.embed_seconds / first.seconds,
            "model_alone_s": model_alone,
            "first_vs_model": first.seconds / model_alone,
            "repush_s": again.seconds,
            "first_vs_repush": first.seconds / again.seconds,
        }
        rows.append(row)
        print(
            f"run {run + 1}: "
            + ", ".join(
                f"{k}={v:.3f}" if isinstance(v, float) else f"{k}={v}" for k, v in row.items()
            )
        )

    print("median over runs:")
    for key in rows[0]:
        print(f"  {key:16} {statistics.median(r[key] for r in rows):.3f}")
    print("targets: first_vs_model <= 1.25, first_vs_repush >= 20")


def compare_locations(locations, settings, corpus, embedder, client) -> None:
    """First push and unchanged re-push per ``embedding_location``, one after the other, with
    the duration of each bulk request (the cluster embeds inside them)."""
    bulk_seconds: list[float] = []
    send_bulk = client.bulk

    def timed_bulk(*args, **kwargs):
        started = time.perf_counter()
        try:
            return send_bulk(*args, **kwargs)
        finally:
            bulk_seconds.append(time.perf_counter() - started)

    client.bulk = timed_bulk  # this client only: the benchmark's own instrument
    for location in locations:
        alias = f"bench-push-{location}-{uuid.uuid4().hex[:8]}"
        run_settings = settings.replace(index_name=alias, embedding_location=location)
        with fresh_index(run_settings, corpus, embedder, client) as push_corpus:
            bulk_seconds.clear()
            first = push_corpus()
            first_bulks = list(bulk_seconds)
            again = push_corpus()
        assert first.failed == 0 and again.embedded == 0, (first.errors[:3], again.embedded)
        print(
            f"{location:8} chunks={first.chunks} embedded={first.embedded} "
            f"first_s={first.seconds:.1f} chunks_per_s={first.chunks / first.seconds:.1f} "
            f"bulks={len(first_bulks)} (batch {run_settings.bulk_batch_size}) "
            f"bulk_s_median={statistics.median(first_bulks):.1f} "
            f"bulk_s_max={max(first_bulks):.1f} repush_s={again.seconds:.2f}"
        )


def compare_workers(counts, repeat, settings, corpus, embedder, client) -> None:
    """First pushes per worker count, alternating, and what explains them: the model alone with
    every core and with one thread (a worker's share of two cores), and a pool's start. Beside
    each rate, the client's CPU seconds per 1000 chunks (this process and its workers; the
    node's own indexing excluded), which a machine shared with other work distorts less."""
    config = chunking_config(settings, embedder.max_text_tokens)
    documents = corpus_to_documents(corpus)
    texts = [c.text for d in documents for c in chunk_document(d, config, embedder.count_tokens)]
    sample = texts[::3]  # the same mix of lengths, a third of the time
    models = {"all cores": embedder, "1 thread": embedder_for(settings, threads=1)}
    rates: dict[str, list[float]] = {}
    for run in range(repeat):
        for workers in counts:
            cpu = _cpu_seconds()
            first = _push_with_workers(workers, settings, corpus, embedder, client)
            cpu_per_1000 = (_cpu_seconds() - cpu) * 1000 / first.chunks
            rate = first.chunks / first.seconds
            rates.setdefault(f"push, workers={workers}: chunks/s", []).append(rate)
            rates.setdefault(f"push, workers={workers}: cpu s/1000", []).append(cpu_per_1000)
            print(
                f"run {run + 1}: workers={workers} chunks={first.chunks} "
                f"first_s={first.seconds:.1f} chunks_per_s={rate:.1f} "
                f"embed_s={first.embed_seconds:.1f} cpu_s_per_1000={cpu_per_1000:.0f}"
            )
        for name, model in models.items():
            started, cpu = time.perf_counter(), _cpu_seconds()
            model.embed_passages(sample)
            rate = len(sample) / (time.perf_counter() - started)
            cpu_per_1000 = (_cpu_seconds() - cpu) * 1000 / len(sample)
            rates.setdefault(f"model alone, {name}: passages/s", []).append(rate)
            rates.setdefault(f"model alone, {name}: cpu s/1000", []).append(cpu_per_1000)
            print(
                f"run {run + 1}: model alone, {name}: {rate:.1f} passages/s, "
                f"cpu_s_per_1000={cpu_per_1000:.0f}"
            )
    started = time.perf_counter()
    pool_settings = settings.replace(push_workers=max(counts), embedding_batch_size=1)
    embed_passages(embedder, pool_settings, ["warm up"] * BATCHES_PER_TASK * max(counts))
    print(f"a {max(counts)}-worker pool's start: {time.perf_counter() - started:.1f} s")
    medians = _print_medians(rates, f"medians over {repeat} runs ({os.cpu_count()} cpus):")
    base = medians[f"push, workers={counts[0]}: chunks/s"]
    for workers in counts[1:]:
        ratio = medians[f"push, workers={workers}: chunks/s"] / base
        print(f"  workers={workers} / workers={counts[0]}: {ratio:.2f} x")


def compare_backends(backends, repeat, settings, corpus, client) -> None:
    """First pushes per ``embedding_backend``, alternating, each beside its model alone over the
    same chunk texts (chunked once, with the first backend's tokenizer: the same model's)."""
    embedders = {b: embedder_for(settings.replace(embedding_backend=b)) for b in backends}
    first_embedder = embedders[backends[0]]
    config = chunking_config(settings, first_embedder.max_text_tokens)
    documents = corpus_to_documents(corpus)
    texts = [
        c.text for d in documents for c in chunk_document(d, config, first_embedder.count_tokens)
    ]
    rates: dict[str, list[float]] = {}
    for run in range(repeat):
        for backend, embedder in embedders.items():
            embedder.embed_passages(["warm up"])
            alias = f"bench-push-{backend}-{uuid.uuid4().hex[:8]}"
            run_settings = settings.replace(index_name=alias, embedding_backend=backend)
            with fresh_index(run_settings, corpus, embedder, client) as push_corpus:
                first = push_corpus()
            assert first.failed == 0 and first.embedded == first.chunks, first.errors[:3]
            started = time.perf_counter()
            embedder.embed_passages(texts)
            alone = len(texts) / (time.perf_counter() - started)
            push_rate = first.chunks / first.seconds
            rates.setdefault(f"push, {backend}: chunks/s", []).append(push_rate)
            rates.setdefault(f"model alone, {backend}: chunks/s", []).append(alone)
            print(
                f"run {run + 1}: {backend:10} chunks={first.chunks} first_s={first.seconds:.1f} "
                f"push chunks_per_s={push_rate:.1f} embed_share="
                f"{first.embed_seconds / first.seconds:.2f} model alone chunks_per_s={alone:.1f}"
            )
    heading = f"medians over {repeat} runs ({os.cpu_count()} cpus, {settings.embedding_model}):"
    medians = _print_medians(rates, heading)
    for what in ("push", "model alone"):
        base = medians[f"{what}, {backends[0]}: chunks/s"]
        for backend in backends[1:]:
            ratio = medians[f"{what}, {backend}: chunks/s"] / base
            print(f"  {what}: {backend} / {backends[0]}: {ratio:.2f} x")


def compare_readers(readers, repeat, settings, corpus, embedder, client) -> None:
    """A first push per second reader (``none``: one reader; else the second reader on that
    backend), in alternation; medians of wall and CPU seconds and each one's ratio to the
    first named."""
    wall: dict[str, list[float]] = {reader: [] for reader in readers}
    cpu: dict[str, list[float]] = {reader: [] for reader in readers}
    for _ in range(repeat):
        for reader in readers:
            second = {"second_embedding_model": "none"} if reader == "none" else {
                "second_embedding_model": "bge-small-en-v1.5", "second_embedding_backend": reader
            }  # fmt: skip
            alias = f"bench-push-r-{uuid.uuid4().hex[:8]}"
            run_settings = settings.replace(index_name=alias, **second)
            if reader != "none":  # loaded and warm before the clock runs, as the first is
                embedder_for(reader_settings(run_settings)).embed_passages(["warm up"])
            with fresh_index(run_settings, corpus, embedder, client) as push_corpus:
                started = _cpu_seconds()
                first = push_corpus()
                cpu[reader].append(_cpu_seconds() - started)
            assert first.failed == 0 and first.embedded == first.chunks, first.errors[:3]
            wall[reader].append(first.seconds)
            print(f"  {reader:10} {first.seconds:7.1f} s wall {cpu[reader][-1]:7.1f} s cpu")
    walls = _print_medians(wall, "first push, wall seconds (median)")
    cpus = _print_medians(cpu, "first push, CPU seconds of this process (median)")
    base = readers[0]
    for reader in readers[1:]:
        print(
            f"  {reader} / {base}: wall {walls[reader] / walls[base]:.2f} x, "
            f"cpu {cpus[reader] / cpus[base]:.2f} x"
        )


def _print_medians(rates: dict[str, list[float]], heading: str) -> dict[str, float]:
    """Print the median of each measure under ``heading``; return them."""
    print(heading)
    medians = {name: statistics.median(values) for name, values in rates.items()}
    for name, value in medians.items():
        print(f"  {name:40} {value:.1f}")
    return medians


def _cpu_seconds() -> float:
    """User and system time of this process and of its children that have ended (a push's
    workers end with its pool)."""
    usages = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return sum(usage.ru_utime + usage.ru_stime for usage in usages)


def _push_with_workers(workers, settings, corpus, embedder, client):
    """A first push of the corpus into a fresh index (deleted after) with ``workers``."""
    alias = f"bench-push-w{workers}-{uuid.uuid4().hex[:8]}"
    run_settings = settings.replace(index_name=alias, push_workers=workers)
    with fresh_index(run_settings, corpus, embedder, client) as push_corpus:
        first = push_corpus()
    assert first.failed == 0 and first.embedded == first.chunks, first.errors[:3]
    return first


@contextlib.contextmanager
def fresh_index(run_settings, corpus, embedder, client):
    """A fresh index for ``run_settings.index_name``, deleted afterwards; yields a function that
    pushes the whole corpus into it (a first push, then re-pushes)."""

    def push_corpus():
        return sync_documents(
            corpus_to_documents(corpus),
            run_settings,
            collection="scifact",
            client=client,
            embedder=embedder,
        )

    try:
        apply_config(run_settings, dimension=embedder.dimension, client=client)
        yield push_corpus
    finally:
        for index in client.indices.get(index=f"{run_settings.index_name}-v*"):
            client.indices.delete(index=index)


if __name__ == "__main__":
    main()
