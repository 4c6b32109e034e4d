"""Search under concurrent load: a single node against a 3-node cluster.

    python benchmarks/bench_load.py --start [--limit 1000] [--requests 200] [--threads 8]
    python benchmarks/bench_load.py --target single=http://127.0.0.1:9200 \\
        --target three=http://127.0.0.1:9201 [--shards 3 --replicas 1]

For each target: create a fresh index (``--start``: 1 shard / 0 replicas on the single node,
3 shards / 1 replica on the 3-node cluster), push the first ``--limit`` SciFact documents, then
send ``--requests`` searches per mode (bm25, vector, hybrid-rrf; no rerank) from ``--threads``
client threads, cycling through the SciFact test questions. Prints throughput, p50/p95/p99
latency and the error count (expected: 0) per target and mode.

What is measured is the cluster: question vectors are computed once before the timed runs (the
embedding model is client-side CPU work, shared by all threads through one GIL), and the rerank
is off. ``--start`` starts both clusters from the project's image with the tests' cluster starter
(tests/integration/multinode/cluster_fixtures.py) and removes them afterwards. Traffic goes only
to 127.0.0.1; indices made here are deleted afterwards.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from loader.cluster.client import connect  # noqa: E402
from loader.eval.datasets import corpus_to_documents, load_beir  # noqa: E402
from loader.index.apply import apply_config  # noqa: E402
from loader.ingest.sync import sync_documents  # noqa: E402
from loader.models.embedding import embedder_for  # noqa: E402
from loader.query.request import SearchRequest  # noqa: E402
from loader.query.search import search  # noqa: E402
from loader.settings import Settings  # noqa: E402

REPOSITORY = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = REPOSITORY.parent / "shared" / "datasets" / "scifact"
MODES = ("bm25", "vector", "hybrid-rrf")


class MemoEmbedder:
    """The embedder with a cache of vectors by text: each question is embedded once, before
    the timed runs, and each corpus once for all targets."""

    def __init__(self, embedder: Any) -> None:
        self._embedder = embedder
        self._vectors: dict[str, Any] = {}
        self._lock = threading.Lock()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._embedder, name)

    def embed(self, texts: list[str], kind: str = "passage", show_progress: bool = False):
        import numpy as np

        with self._lock:
            missing = [t for t in dict.fromkeys(texts) if (kind, t) not in self._vectors]
        if missing:
            vectors = self._embedder.embed(missing, kind=kind, show_progress=show_progress)
            with self._lock:
                self._vectors.update(zip(((kind, t) for t in missing), vectors, strict=True))
        if not texts:
            return self._embedder.embed([])
        return np.stack([self._vectors[kind, t] for t in texts])

    def embed_passages(self, texts: list[str], show_progress: bool = False):
        return self.embed(texts, kind="passage", show_progress=show_progress)

    def embed_queries(self, texts: list[str]):
        return self.embed(texts, kind="query")


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def run_mode(
    settings: Settings, client: Any, embedder: Any, questions: list[str], mode: str, args: Any
) -> dict[str, float]:
    """``args.requests`` searches of one mode from ``args.threads`` threads."""
    latencies: list[float] = []
    errors: list[str] = []
    lock = threading.Lock()

    def one(number: int) -> None:
        question = questions[number % len(questions)]
        started = time.perf_counter()
        try:
            request = SearchRequest.from_settings(
                settings, question, tenant="default", mode=mode, rerank=False, k=10
            )
            result = search(request, settings, client=client, embedder=embedder)
            ok = bool(result.hits)
        except Exception as exc:  # every failure counts; the figure must be 0
            ok, reason = False, f"{type(exc).__name__}: {exc}"
        else:
            reason = "no hits"
        elapsed = time.perf_counter() - started
        with lock:
            if ok:
                latencies.append(elapsed)
            else:
                errors.append(reason)

    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=args.threads) as pool:
        list(pool.map(one, range(args.requests)))
    wall = time.perf_counter() - started
    if errors:
        print(f"    first error: {errors[0][:200]}")
    ms = [1000 * x for x in latencies] or [0.0]
    return {
        "qps": len(latencies) / wall,
        "p50": percentile(ms, 0.50),
        "p95": percentile(ms, 0.95),
        "p99": percentile(ms, 0.99),
        "mean": statistics.fmean(ms),
        "errors": len(errors),
    }


def bench_target(
    name: str, url: str, shards: int, replicas: int, corpus: dict, questions: list[str], args
) -> list[tuple[str, str, dict[str, float]]]:
    alias = f"bench-load-{uuid.uuid4().hex[:8]}"
    settings = Settings(
        opensearch_url=url, index_name=alias, number_of_shards=shards, number_of_replicas=replicas
    )
    client = connect(settings)
    embedder = args.embedder
    rows = []
    try:
        apply_config(settings, dimension=embedder.dimension, client=client)
        client.cluster.health(index=alias, wait_for_status="green", request_timeout=120)
        started = time.perf_counter()
        report = sync_documents(
            corpus_to_documents(corpus),
            settings,
            collection="scifact",
            client=client,
            embedder=embedder,
        )
        print(
            f"{name}: {url}, {shards} shards x {replicas} replicas; pushed {report.chunks} chunks "
            f"in {time.perf_counter() - started:.1f} s ({report.failed} failed)"
        )
        for mode in MODES:  # warm up: caches, JIT, connections
            request = SearchRequest.from_settings(
                settings, questions[0], tenant="default", mode=mode, rerank=False
            )
            search(request, settings, client=client, embedder=embedder)
        for mode in MODES:
            rows.append((name, mode, run_mode(settings, client, embedder, questions, mode, args)))
    finally:
        for index in client.indices.get_alias(name=alias, ignore=[404]):
            if index != "error" and index != "status":
                client.indices.delete(index=index, ignore=[404])
    return rows


class _Finalizers:
    """Stands in for pytest's request: collects the clusters' clean-ups."""

    def __init__(self) -> None:
        self.calls: list[Any] = []

    def addfinalizer(self, call: Any) -> None:
        self.calls.append(call)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--target", action="append", default=[], metavar="NAME=URL", help="a cluster to load"
    )
    parser.add_argument("--shards", type=int, default=3, help="shards of --target indices")
    parser.add_argument("--replicas", type=int, default=1, help="replicas of --target indices")
    parser.add_argument("--start", action="store_true", help="start a 1-node and a 3-node cluster")
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--limit", type=int, default=1000, help="first N documents (0: all)")
    parser.add_argument("--requests", type=int, default=200, help="searches per mode")
    parser.add_argument("--threads", type=int, default=8)
    args = parser.parse_args()

    data = load_beir(args.dataset)
    corpus = data.corpus
    if args.limit:
        corpus = dict(list(corpus.items())[: args.limit])
    questions = list(data.queries.values())
    settings = Settings()
    args.embedder = MemoEmbedder(embedder_for(settings))
    args.embedder.embed_queries(questions)  # once, outside the timed runs
    print(
        f"corpus: {len(corpus)} SciFact documents; {len(questions)} questions; "
        f"{args.threads} threads x {args.requests} requests per mode; {os.cpu_count()} cpus"
    )

    targets: list[tuple[str, str, int, int]] = []
    for entry in args.target:
        name, _, url = entry.partition("=")
        targets.append((name, url, args.shards, args.replicas))
    finalizers = _Finalizers()
    rows = []
    try:
        if args.start:
            sys.path.insert(0, str(REPOSITORY / "tests" / "integration"))
            from multinode.cluster_fixtures import start_cluster

            # Full JIT here (the tests use C1 only, to start faster): steady state matters.
            opts = "-Xms1g -Xmx1g"
            single = start_cluster(finalizers, 1, java_opts=opts)
            three = start_cluster(finalizers, 3, java_opts=opts)
            targets += [("single", single.url, 1, 0), ("three", three.url, 3, 1)]
        for name, url, shards, replicas in targets:
            rows += bench_target(name, url, shards, replicas, corpus, questions, args)
    finally:
        for call in finalizers.calls:
            call()

    print(
        f"\n{'target':8} {'mode':11} {'req/s':>7} {'p50 ms':>8} {'p95 ms':>8} {'p99 ms':>8} errors"
    )
    for name, mode, row in rows:
        print(
            f"{name:8} {mode:11} {row['qps']:7.1f} {row['p50']:8.1f} {row['p95']:8.1f} "
            f"{row['p99']:8.1f} {row['errors']:6d}"
        )
    if any(row["errors"] for _, _, row in rows):
        raise SystemExit(1)


if __name__ == "__main__":
    main()
