"""Bulk-load mode: a first push of SciFact documents with and without ``bulk_load``.

    python benchmarks/bench_bulk_load.py --url http://127.0.0.1:9200 --limit 2000 --repeat 3

The chunk texts are embedded once by the real model before the clock runs (that time is
printed); every push then gets those vectors back from a replaying embedder, so the runs compare
what bulk-load mode changes -- writing and refreshing -- and not the model's speed on two busy
cores. Runs alternate (off, on, off, on ...), each into a fresh index, so a busy machine slows
both alike. Per run: chunks, push seconds, chunks/s, the segments the index holds right after
the push (before any merge catches up), the write phase alone (from the first bulk request to
the end of the push: writes, the refresh, and in bulk-load mode the restore) and chunks/s of the
whole push with the measured embedding time added back. ``--vectors-cache FILE`` keeps the
vectors between runs of the benchmark (an ``.npz``; embedding 5k chunks takes minutes on two busy
cores). Traffic goes only to --url; each index is deleted afterwards.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

import numpy as np  # noqa: E402

from loader.cluster.client import connect  # noqa: E402
from loader.eval.datasets import corpus_to_documents, load_beir  # noqa: E402
from loader.index.apply import apply_config  # noqa: E402
from loader.ingest.chunking import chunk_document, chunking_config  # noqa: E402
from loader.ingest.sync import sync_documents  # noqa: E402
from loader.models.embedding import embedder_for  # noqa: E402
from loader.settings import Settings  # noqa: E402

DEFAULT_DATASET = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"


class ReplayingEmbedder:
    """The real embedder, but ``embed_passages`` answers from vectors it computed before."""

    def __init__(self, embedder: Any, vectors: dict[str, np.ndarray]) -> None:
        self._embedder = embedder
        self._vectors = vectors

    def __getattr__(self, name: str) -> Any:
        return getattr(self._embedder, name)

    def embed_passages(self, texts: list[str], show_progress: bool = False) -> np.ndarray:
        return np.stack([self._vectors[text] for text in texts])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("OPENSEARCH_URL", "http://127.0.0.1:9200"))
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--limit", type=int, default=2000, help="first N documents")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--vectors-cache", type=Path, default=None, help="an .npz to reuse")
    args = parser.parse_args()

    settings = Settings(opensearch_url=args.url)
    corpus = dict(list(load_beir(args.dataset).corpus.items())[: args.limit])
    embedder = embedder_for(settings)
    config = chunking_config(settings, embedder.max_text_tokens)
    texts = sorted(
        {
            chunk.text
            for document in corpus_to_documents(corpus)
            for chunk in chunk_document(document, config, embedder.count_tokens)
        }
    )
    vectors, embed_seconds = embed_once(embedder, texts, args.vectors_cache)
    print(
        f"corpus: {len(corpus)} documents, {len(texts)} distinct chunk texts embedded once in "
        f"{embed_seconds:.1f} s ({len(texts) / embed_seconds:.1f} chunks/s, "
        f"{settings.embedding_model} {settings.embedding_backend}); {os.cpu_count()} cpus"
    )
    replaying = ReplayingEmbedder(embedder, vectors)
    client = connect(settings)
    bulk_started: list[float] = []
    send_bulk = client.bulk

    def timed_bulk(*args: Any, **kwargs: Any) -> Any:
        bulk_started.append(time.perf_counter())
        return send_bulk(*args, **kwargs)

    client.bulk = timed_bulk  # this client only: the benchmark's own instrument
    rates: dict[bool, list[float]] = {False: [], True: []}
    write_rates: dict[bool, list[float]] = {False: [], True: []}
    for run in range(args.repeat):
        for bulk_load in (False, True):
            bulk_started.clear()
            row = first_push(client, settings.replace(bulk_load=bulk_load), corpus, replaying)
            write_seconds = row["ended"] - bulk_started[0]
            rates[bulk_load].append(row["chunks"] / row["seconds"])
            write_rates[bulk_load].append(row["chunks"] / write_seconds)
            with_embedding = row["chunks"] / (row["seconds"] + embed_seconds)
            print(
                f"run {run + 1} bulk_load={'on ' if bulk_load else 'off'} chunks={row['chunks']} "
                f"push_s={row['seconds']:.1f} chunks_per_s={rates[bulk_load][-1]:.1f} "
                f"write_s={write_seconds:.1f} write_chunks_per_s={write_rates[bulk_load][-1]:.1f} "
                f"segments_after={row['segments']} "
                f"chunks_per_s_with_embedding={with_embedding:.1f}"
            )
    for name, values in (("push", rates), ("write phase", write_rates)):
        off, on = (statistics.median(values[flag]) for flag in (False, True))
        print(f"median {name} chunks/s: off {off:.1f}, on {on:.1f}, on/off {on / off:.2f}")


def embed_once(
    embedder: Any, texts: list[str], cache: Path | None
) -> tuple[dict[str, np.ndarray], float]:
    """Every text's vector by the real model (or from ``cache``), and the seconds it took."""
    if cache and cache.exists():
        stored = np.load(cache)
        if list(stored["texts"]) == texts:
            return dict(zip(texts, stored["vectors"], strict=True)), float(stored["seconds"])
    started = time.perf_counter()
    vectors = embedder.embed_passages(texts)
    seconds = time.perf_counter() - started
    if cache:
        np.savez(cache, texts=np.array(texts), vectors=vectors, seconds=seconds)
    return dict(zip(texts, vectors, strict=True)), seconds


def first_push(client: Any, settings: Settings, corpus: dict, embedder: Any) -> dict[str, Any]:
    """A first push into a fresh index; its time, chunks and segments right after."""
    alias = f"bench-bulk-{uuid.uuid4().hex[:8]}"
    run_settings = settings.replace(index_name=alias)
    try:
        apply_config(run_settings, dimension=embedder.dimension, client=client)
        report = sync_documents(
            corpus_to_documents(corpus),
            run_settings,
            collection="scifact",
            client=client,
            embedder=embedder,
        )
        ended = time.perf_counter()
        segments = client.indices.segments(index=alias)["indices"]
        count = sum(
            len(copy["segments"])
            for index in segments.values()
            for shard in index["shards"].values()
            for copy in shard
        )
    finally:
        for index in client.indices.get(index=f"{alias}-v*"):
            client.indices.delete(index=index)
    assert report.failed == 0, report.errors[:3]
    return {"chunks": report.chunks, "seconds": report.seconds, "segments": count, "ended": ended}


if __name__ == "__main__":
    main()
