"""Fine-tune a small cross-encoder on a BEIR train split, for measuring the rerank stage offline.

    python benchmarks/train_reranker.py --url http://127.0.0.1:9200 \\
        --index eval-scifact-structure --tenant eval --out /tmp/scifact-reranker \\
        [--dataset ../shared/datasets/scifact] [--negatives 3] [--epochs 2]

No trained cross-encoder can be downloaded on these machines, and an untrained head scores every
passage within ~0.01 of the others: fine for proving that reranking runs, useless for measuring
its quality or for checking that the ONNX backends keep the same top 5. This script makes a
reranker that has learnt something:

- start: the bundled all-MiniLM-L6-v2 weights with a fresh one-logit head (a ``CrossEncoder``);
- examples: for each query of the *train* split, the loader's own hybrid-rrf candidates (no
  rerank) from an index that ``loader eval`` built. Per judged-relevant document, its best-ranked
  chunk is a positive (the chunk retrieval thinks holds the evidence); the best-ranked chunks of
  the first ``--negatives`` other documents are hard negatives. Queries whose relevant documents
  were not retrieved are skipped. The passage text is what ``search`` gives the reranker;
- loss: binary cross-entropy on the logit; AdamW with linear warm-up and decay.

The test split is never read. Measure the result with ``loader eval --rerank`` and
``benchmarks/bench_search.py --reranker-model OUT``.

The model is a measuring device, not a reranker to deploy: its scores spread like a trained
model's, which is what comparing backends needs, but 800 training queries are far too few. On
SciFact test, reranking the hybrid-rrf top 50 with it lowers nDCG@10 from 0.722 to 0.460.

Not a test; requests go only to a loopback ``--url`` (one search per train query).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import sys
import time
from pathlib import Path
from urllib.parse import urlsplit

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

# The script's folder is on sys.path when it runs: share the candidate fetch with the benchmark.
from bench_search import DEFAULT_DATASET, LOOPBACK, hybrid_candidates  # noqa: E402

from loader.cluster.client import connect  # noqa: E402
from loader.eval.datasets import load_qrels  # noqa: E402
from loader.models.embedding import embedder_for, resolve_model_path  # noqa: E402
from loader.resolve import resolve_settings  # noqa: E402


def training_pairs(args: argparse.Namespace) -> list[tuple[str, str, float]]:
    """(question, passage, label) pairs from the retriever's candidates for the train queries."""
    qrels = load_qrels(args.dataset / "qrels" / f"{args.split}.tsv")
    questions = {}
    with (args.dataset / "queries.jsonl").open(encoding="utf-8") as lines:
        for line in lines:
            record = json.loads(line)
            if record["_id"] in qrels:
                questions[record["_id"]] = record["text"]
    settings, _ = resolve_settings(overrides={"opensearch_url": args.url, "index_name": args.index})
    client = connect(settings)
    embedder = embedder_for(settings)
    pairs: list[tuple[str, str, float]] = []
    skipped = 0
    for query_id, question in questions.items():
        hits = hybrid_candidates(question, settings, args.tenant, args.candidates, client, embedder)
        relevant = {doc for doc, grade in qrels[query_id].items() if grade > 0}
        seen: set[str] = set()
        positives, negatives = [], []
        for hit in hits:
            if hit.source in seen:
                continue
            seen.add(hit.source)
            passage = hit.text  # what search gives the reranker
            if hit.source in relevant:
                positives.append(passage)
            elif len(negatives) < args.negatives:
                negatives.append(passage)
        if not positives:
            skipped += 1
            continue
        pairs += [(question, passage, 1.0) for passage in positives]
        pairs += [(question, passage, 0.0) for passage in negatives]
    print(
        f"{len(questions)} {args.split} queries: {len(pairs)} pairs "
        f"({sum(label for *_, label in pairs):.0f} positive); {skipped} queries skipped "
        "(no relevant document among the candidates)",
        flush=True,
    )
    return pairs


def _is_head(parameter_name: str) -> bool:
    return parameter_name.startswith(("classifier.", "bert.pooler.", "pooler."))


def train(pairs: list[tuple[str, str, float]], args: argparse.Namespace) -> None:
    import torch
    from sentence_transformers import CrossEncoder

    torch.manual_seed(args.seed)
    model = CrossEncoder(
        resolve_model_path("all-MiniLM-L6-v2"), num_labels=1, max_length=args.max_tokens
    )
    network = model.model.train()
    tokenizer = model.tokenizer
    steps = args.epochs * -(-len(pairs) // args.batch_size)
    # The head (pooler + classifier) starts from nothing while the encoder is already a good
    # sentence model, so the head learns faster; with one rate the head barely leaves the prior.
    head = [param for name, param in network.named_parameters() if _is_head(name)]
    body = [param for name, param in network.named_parameters() if not _is_head(name)]
    optimizer = torch.optim.AdamW(
        [{"params": body}, {"params": head, "lr": args.head_learning_rate}],
        lr=args.learning_rate,
        weight_decay=0.01,
    )
    warmup = max(1, steps // 10)
    schedule = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: min((step + 1) / warmup, max(0.0, (steps - step) / max(1, steps - warmup))),
    )
    loss_function = torch.nn.BCEWithLogitsLoss()
    shuffler = random.Random(args.seed)
    started = time.perf_counter()
    step = 0
    for epoch in range(args.epochs):
        shuffler.shuffle(pairs)
        for start in range(0, len(pairs), args.batch_size):
            batch = pairs[start : start + args.batch_size]
            encoded = tokenizer(
                [question for question, _, _ in batch],
                [passage for _, passage, _ in batch],
                padding=True,
                truncation="longest_first",
                max_length=args.max_tokens,
                return_tensors="pt",
            )
            labels = torch.tensor([label for *_, label in batch])
            loss = loss_function(network(**encoded).logits.view(-1), labels)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(network.parameters(), 1.0)
            optimizer.step()
            schedule.step()
            optimizer.zero_grad()
            step += 1
            if step % 25 == 0 or step == steps:
                print(
                    f"epoch {epoch + 1} step {step}/{steps} loss {loss.item():.3f} "
                    f"{time.perf_counter() - started:.0f} s",
                    flush=True,
                )
    network.eval()
    model.save(str(args.out))
    print(f"saved {args.out} after {time.perf_counter() - started:.0f} s of training")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--url", default=os.environ.get("OPENSEARCH_URL", "http://127.0.0.1:9200"))
    parser.add_argument("--index", required=True, help="alias of an index `loader eval` built")
    parser.add_argument("--tenant", default="eval")
    parser.add_argument("--dataset", type=Path, default=DEFAULT_DATASET)
    parser.add_argument("--split", default="train", help="qrels split to learn from")
    parser.add_argument("--out", type=Path, required=True, help="folder of the trained model")
    parser.add_argument("--candidates", type=int, default=30)
    parser.add_argument("--negatives", type=int, default=3, help="hard negatives per query")
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--learning-rate", type=float, default=5e-5, help="encoder")
    parser.add_argument("--head-learning-rate", type=float, default=1e-3, help="pooler, classifier")
    parser.add_argument("--max-tokens", type=int, default=256)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    if urlsplit(args.url).hostname not in LOOPBACK:
        parser.error(f"--url must point at this machine (127.0.0.1), got {args.url}")
    if args.split == "test":
        parser.error("--split test would train on the queries the evaluation measures")
    train(training_pairs(args), args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
