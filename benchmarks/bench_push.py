"""Push throughput on the SciFact corpus: first push, unchanged re-push, and the model alone.

    python benchmarks/bench_push.py --url http://127.0.0.1:9200 [--limit N] [--repeat 3]

Prints, per repetition and as medians:
- chunks per second of a first push into a fresh index, and the share of its wall time spent
  embedding;
- the time the model alone needs to embed the same chunk texts (same batch size);
- an unchanged re-push.
Targets on the 2-core machine: first push <= 1.25 x model alone; re-push >= 20 x faster than the
first push. Traffic goes only to --url (loopback); the index is deleted afterwards.
"""

from __future__ import annotations

import argparse
import os
import statistics
import time
import uuid
from pathlib import Path

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from loader.cluster.client import connect  # noqa: E402
from loader.eval.datasets import corpus_to_documents, load_beir  # noqa: E402
from loader.index.apply import apply_config  # noqa: E402
from loader.ingest.chunking import chunk_document, chunking_config  # noqa: E402
from loader.ingest.sync import sync_documents  # noqa: E402
from loader.models.embedding import embedder_for  # noqa: E402
from loader.settings import Settings  # noqa: E402

DEFAULT_DATASET = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("OPENSEARCH_URL", "http://127.0.0.1:9200"))
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--limit", type=int, default=0, help="first N documents only")
    parser.add_argument("--repeat", type=int, default=1)
    args = parser.parse_args()

    settings = Settings(opensearch_url=args.url)
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
        try:
            apply_config(run_settings, dimension=embedder.dimension, client=client)
            first = sync_documents(
                corpus_to_documents(corpus),
                run_settings,
                collection="scifact",
                client=client,
                embedder=embedder,
            )
            again = sync_documents(
                corpus_to_documents(corpus),
                run_settings,
                collection="scifact",
                client=client,
                embedder=embedder,
            )
        finally:
            for index in client.indices.get(index=f"{alias}-v*"):
                client.indices.delete(index=index)
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


if __name__ == "__main__":
    main()
