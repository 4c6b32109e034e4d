"""Embedding speed per model and backend: passages per second, milliseconds per question, and how
close the int8 vectors are to the fp32 ones.

Reads the first ``--passages`` documents of a BEIR corpus (title + text, as eval pushes them),
embeds them with each backend after a warm-up, then embeds ``--queries`` questions one at a time
(what `loader search` does); the backends take turns for ``--rounds`` rounds and the best round
of each is printed, so a load change on a shared machine does not favour one. Needs no cluster.

    python3 benchmarks/bench_embedding.py /work/shared/datasets/scifact --passages 500
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from loader.errors import ModelError  # noqa: E402
from loader.models.embedding import get_embedder  # noqa: E402
from loader.settings import EMBEDDING_BACKENDS  # noqa: E402

MODELS = ("all-MiniLM-L6-v2", "bge-small-en-v1.5")


def read_passages(dataset: Path, limit: int) -> list[str]:
    corpus = dataset / "corpus.jsonl"
    if not corpus.is_file():
        corpus = dataset / "corpus.jsonl.gz"
    passages = []
    with (
        gzip.open(corpus, "rt", encoding="utf-8")
        if corpus.suffix == ".gz"
        else corpus.open(encoding="utf-8") as handle
    ):
        for line in handle:
            doc = json.loads(line)
            passages.append(f"{doc.get('title', '')}\n\n{doc.get('text', '')}".strip())
            if len(passages) == limit:
                break
    return passages


def read_questions(dataset: Path, limit: int) -> list[str]:
    questions = []
    with (dataset / "queries.jsonl").open(encoding="utf-8") as handle:
        for line in handle:
            questions.append(json.loads(line)["text"])
            if len(questions) == limit:
                break
    return questions


def load(model: str, backend: str, passages: list[str], batch: int):
    """The embedder, loaded and warmed up outside the timings, or ``None`` if unavailable."""
    try:
        embedder = get_embedder(model, batch_size=batch, backend=backend)
        embedder.embed_passages(passages[:batch])
    except ModelError as exc:
        print(f"  {model} {backend}: {exc}", file=sys.stderr)
        return None
    return embedder


def measure(embedder, passages: list[str], questions: list[str]):
    """``(passages/s, median ms per question, passage vectors, passages per CPU second)``: the
    CPU time of every thread of the process, which a busy machine inflates far less than the
    wall time (what two readers' push costs against one reader's is a ratio of these)."""
    started, cpu = time.perf_counter(), time.process_time()
    vectors = embedder.embed_passages(passages)
    per_cpu_second = len(passages) / (time.process_time() - cpu)
    per_second = len(passages) / (time.perf_counter() - started)
    timings = []
    for question in questions:
        started = time.perf_counter()
        embedder.embed_queries([question])
        timings.append((time.perf_counter() - started) * 1000)
    return per_second, statistics.median(timings), vectors, per_cpu_second


def model_rows(model: str, passages: list[str], questions: list[str], args) -> list[str]:
    """The table rows of one model: every backend measured ``--rounds`` times, interleaved (the
    machine's load changes between runs), best round kept."""
    embedders = {b: load(model, b, passages, args.batch_size) for b in args.backends}
    best: dict[str, tuple] = {}
    for _ in range(args.rounds):
        for backend, embedder in embedders.items():
            if embedder is not None:
                result = measure(embedder, passages, questions)
                if backend not in best or result[0] > best[backend][0]:
                    best[backend] = (
                        result[0],
                        min(result[1], best.get(backend, result)[1]),
                        result[2],
                        max(result[3], best.get(backend, result)[3]),
                    )
    rows = []
    for backend in args.backends:
        if backend not in best:
            rows.append(f"| {model} | {backend} | n/a | n/a | n/a | |")
            continue
        per_second, query_ms, vectors, per_cpu_second = best[backend]
        cosine = ""
        if backend == "onnx-int8" and "onnx" in best:
            agree = (vectors * best["onnx"][2]).sum(axis=1)
            cosine = f"{float(np.mean(agree)):.4f} / {float(np.min(agree)):.4f}"
        rows.append(
            f"| {model} | {backend} | {per_second:.1f} | {per_cpu_second:.1f} | {query_ms:.1f} "
            f"| {cosine} |"
        )
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("dataset", type=Path, help="a BEIR folder (corpus.jsonl, queries.jsonl)")
    parser.add_argument("--passages", type=int, default=500)
    parser.add_argument("--queries", type=int, default=30)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--models", nargs="+", default=list(MODELS))
    parser.add_argument("--rounds", type=int, default=2, help="interleaved runs; best is kept")
    parser.add_argument(
        "--backends", nargs="+", default=list(EMBEDDING_BACKENDS), choices=EMBEDDING_BACKENDS
    )
    args = parser.parse_args()
    passages = read_passages(args.dataset, args.passages)
    questions = read_questions(args.dataset, args.queries)
    print(f"{len(passages)} passages, {len(questions)} questions, batch {args.batch_size}")
    print(
        "| model | backend | passages/s | passages per CPU-s | query ms (median) "
        "| cosine to fp32 (mean / min) |"
    )
    print("|---|---|---|---|---|---|")
    for model in args.models:
        for row in model_rows(model, passages, questions, args):
            print(row, flush=True)


if __name__ == "__main__":
    main()
