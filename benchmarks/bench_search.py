"""Search latency per mode, with and without rerank, and the rerank step alone per backend.

    python benchmarks/bench_search.py --url http://127.0.0.1:9200 --index scifact \\
        [--tenant default] [--count 50] [--reranker-model PATH] [--candidates 50] \\
        [--batch-size 8]

The index alias must already hold a pushed corpus (e.g. SciFact: ``loader apply`` then
``loader push``); the questions are the first ``--count`` test queries of
``../shared/datasets/scifact/queries.jsonl``. Prints, as p50 / p95 milliseconds:

- end-to-end ``search`` latency of each mode without rerank, then with rerank (and the retrieve
  and rerank stages inside it);
- the rerank step alone on the same ``--candidates`` candidates per question, each backend in
  turn (torch, ONNX, ONNX int8), and how often their top 5 agree with torch's (same set; same
  order; how many of the 5 are shared), with what decides that agreement: torch's score gap
  between the k-th and the (k+1)-th passage, against each backend's score error. A top-k set
  survives a lossy backend only where the gap is larger than the error.

Not a test. Requests go only to a loopback ``--url``; at most ``--count`` x 9 searches are sent.
Without a loadable ``--reranker-model`` (the default ms-marco model cannot be downloaded here) the
rerank rows are skipped with the reason.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

from loader.cluster.client import connect  # noqa: E402
from loader.errors import LoaderError  # noqa: E402
from loader.eval.datasets import load_qrels  # noqa: E402
from loader.eval.metrics import percentile  # noqa: E402
from loader.models.embedding import embedder_for  # noqa: E402
from loader.models.rerank.cross_encoder import CrossEncoderReranker  # noqa: E402
from loader.query.request import SearchRequest  # noqa: E402
from loader.query.result import SearchHit  # noqa: E402
from loader.query.search import search  # noqa: E402
from loader.resolve import resolve_settings  # noqa: E402
from loader.settings import RERANK_BACKENDS, SEARCH_MODES  # noqa: E402

DEFAULT_DATASET = Path(__file__).resolve().parents[2] / "shared" / "datasets" / "scifact"
MAX_COUNT = 300  # bounds the number of requests: 9 searches per question
LOOPBACK = {"127.0.0.1", "localhost", "::1"}


def read_questions(dataset: Path, count: int) -> list[str]:
    """The first ``count`` queries of the test split (all queries if there is no test qrels)."""
    qrels_path = dataset / "qrels" / "test.tsv"
    wanted = set(load_qrels(qrels_path)) if qrels_path.is_file() else None
    questions = []
    with (dataset / "queries.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            if wanted is None or record["_id"] in wanted:
                questions.append(record["text"])
            if len(questions) == count:
                break
    return questions


def hybrid_candidates(
    question: str, settings: Any, tenant: str, count: int, client: Any, embedder: Any
) -> list[SearchHit]:
    """The ``count`` hybrid-rrf hits a reranker is given for the question (no rerank)."""
    request = SearchRequest(
        question=question,
        tenant=tenant,
        mode="hybrid-rrf",
        rerank=False,
        k=count,
        candidates=count,
    )
    return search(request, settings, client=client, embedder=embedder).hits


def p50_p95(values: list[float]) -> str:
    return f"{percentile(values, 50):8.1f} {percentile(values, 95):8.1f}"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("OPENSEARCH_URL", "http://127.0.0.1:9200"))
    parser.add_argument("--index", required=True, help="alias of an already pushed index")
    parser.add_argument("--tenant", default="default")
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--count", type=int, default=50, help=f"questions (at most {MAX_COUNT})")
    parser.add_argument("--candidates", type=int, default=50)
    parser.add_argument("--k", type=int, default=5)
    parser.add_argument("--reranker-model", default=None, help="local CrossEncoder folder")
    parser.add_argument(
        "--batch-size", type=int, default=None, help="pairs per forward pass (rerank_batch_size)"
    )
    args = parser.parse_args()
    if urlsplit(args.url).hostname not in LOOPBACK:
        parser.error(f"--url must point at this machine (127.0.0.1), got {args.url}")
    args.count = max(1, min(args.count, MAX_COUNT))
    return args


def load_rerankers(settings: Any) -> tuple[dict[str, CrossEncoderReranker], str]:
    """Every backend that loads, and a note on those that do not."""
    rerankers: dict[str, CrossEncoderReranker] = {}
    skipped = ""
    for backend in RERANK_BACKENDS:
        try:
            rerankers[backend] = CrossEncoderReranker(
                settings.reranker_model,
                backend=backend,
                max_tokens=settings.rerank_max_tokens,
                batch_size=settings.rerank_batch_size,
                device=settings.device,
            )
        except LoaderError as exc:
            skipped += f"\n  rerank {backend} skipped: {exc}"
    return rerankers, skipped


def end_to_end(args, settings, questions, client, embedder, reranker) -> None:
    """p50 / p95 of ``search`` per mode, without and (with a reranker) with rerank."""
    print(f"\n{'end to end (ms)':<34}{'p50':>8} {'p95':>8}   {'retrieve p50/p95':>18}")
    for rerank in (False, True) if reranker else (False,):
        for mode in SEARCH_MODES:
            timings = []
            for question in questions:
                request = SearchRequest.from_settings(
                    settings, question, tenant=args.tenant, mode=mode, rerank=rerank
                )
                result = search(
                    request, settings, client=client, embedder=embedder, reranker=reranker
                )
                timings.append(result.timings)
            label = f"{mode} {'+ rerank (torch)' if rerank else 'no rerank'}"
            extra = f"   {p50_p95([t['retrieve_ms'] for t in timings])}"
            if rerank:
                extra += f"   rerank {p50_p95([t['rerank_ms'] for t in timings])}"
            print(f"{label:<34}{p50_p95([t['total_ms'] for t in timings])}{extra}")


def rerank_alone(args, rerankers, candidates) -> dict[str, list[list[float]]]:
    """Time each backend on the same candidate lists; return the scores per backend."""
    title = f"rerank alone, {args.candidates} candidates (ms)"
    print(f"\n{title:<34}{'p50':>8} {'p95':>8}")
    # One backend after the other, not interleaved per question: a backend's idle threads still
    # spin for a while after its run, and would slow whichever backend ran next.
    times: dict[str, list[float]] = {}
    scores: dict[str, list[list[float]]] = {}
    for backend, reranker in rerankers.items():
        reranker.rerank(*candidates[0])  # warm-up
        times[backend], scores[backend] = [], []
        for question, passages in candidates:
            started = time.perf_counter()
            scores[backend].append(reranker.rerank(question, passages))
            times[backend].append((time.perf_counter() - started) * 1000)
    torch_p50 = percentile(times["torch"], 50)
    for backend, values in times.items():
        speedup = torch_p50 / percentile(values, 50)
        print(f"{backend:<34}{p50_p95(values)}   {speedup:.2f}x torch (p50)")
    return scores


def agreement(k: int, scores: dict[str, list[list[float]]]) -> None:
    """How often each backend's top k is torch's, against the margin the top k has."""
    tops = {
        backend: [sorted(range(len(s)), key=lambda i: -s[i])[:k] for s in lists]
        for backend, lists in scores.items()
    }
    total = len(scores["torch"])
    gaps = [boundary_gap(s, k) for s in scores["torch"]]
    print(
        f"\ntorch score gap between passage {k} and {k + 1}: "
        f"p10 {percentile(gaps, 10):.4f}, p50 {percentile(gaps, 50):.4f}, "
        f"min {min(gaps):.4f}"
    )
    for backend in scores:
        if backend == "torch":
            continue
        pairs = list(zip(tops["torch"], tops[backend], strict=True))
        same_set = sum(set(a) == set(b) for a, b in pairs)
        same_order = sum(a == b for a, b in pairs)
        shared = sum(len(set(a) & set(b)) for a, b in pairs) / total
        errors = [
            max(abs(a - b) for a, b in zip(mine, theirs, strict=True))
            for mine, theirs in zip(scores["torch"], scores[backend], strict=True)
        ]
        within = sum(gap <= error for gap, error in zip(gaps, errors, strict=True))
        print(
            f"top-{k} agreement torch vs {backend}: same set {same_set}/{total}, "
            f"same order {same_order}/{total}, {shared:.2f} of {k} shared on average; "
            f"largest score error per question p50 {percentile(errors, 50):.4f}, "
            f"gap within it on {within}/{total}"
        )


def main() -> int:
    args = parse_args()
    overrides = {"opensearch_url": args.url, "index_name": args.index}
    if args.reranker_model:
        overrides["reranker_model"] = args.reranker_model
    settings, _ = resolve_settings(overrides=overrides)
    settings = settings.replace(candidates=args.candidates, top_k=args.k)
    if args.batch_size:
        settings = settings.replace(rerank_batch_size=args.batch_size)

    questions = read_questions(args.dataset, args.count)
    client = connect(settings)
    embedder = embedder_for(settings)
    embedder.embed_queries(["warm up"])
    rerankers, skipped = load_rerankers(settings)
    print(
        f"{len(questions)} questions; index {args.index} on {args.url}; tenant {args.tenant!r}; "
        f"{args.candidates} candidates, k={args.k}; rerank batches of "
        f"{settings.rerank_batch_size}; {os.cpu_count()} cpus{skipped}"
    )
    try:  # warm the cluster's caches and the HTTP connection
        hybrid_candidates(questions[0], settings, args.tenant, args.k, client, embedder)
    except LoaderError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    end_to_end(args, settings, questions, client, embedder, rerankers.get("torch"))

    if "torch" not in rerankers or "onnx" not in rerankers:
        print("\nrerank alone: needs both the torch and onnx backends" + (skipped or ""))
        return 0
    candidates = [
        (question, [hit.text for hit in hybrid_candidates(
            question, settings, args.tenant, args.candidates, client, embedder)])
        for question in questions
    ]  # fmt: skip
    agreement(args.k, rerank_alone(args, rerankers, candidates))
    return 0


def boundary_gap(scores: list[float], k: int) -> float:
    """Score gap between the k-th and (k+1)-th best passage: the margin a top-k set has."""
    ranked = sorted(scores, reverse=True)
    return ranked[k - 1] - ranked[k] if len(ranked) > k else float("inf")


if __name__ == "__main__":
    sys.exit(main())
