"""Two ONNX files of one embedding model, A against B: speed on a busy machine, and their vectors.

Both run with one intra-op thread, batch by batch in alternation (A then B, then B then A) over
the first ``--passages`` SciFact passages sorted by length in batches of 8 (4 to 256 tokens), so a
load change on a shared machine hits both alike; the median of the per-batch time ratios B / A
is printed, then how far B's pooled vectors are from A's. ``--int8`` compares the int8 copies
(made once beside each file). Needs no cluster.

    python3 benchmarks/bench_onnx_ab.py path/to/scifact A/model.onnx B/model.onnx --int8

(The torch-traced MiniLM file of export format 3 is ``~/.cache/loader/models/
all-MiniLM-L6-v2-f95a6b635c061981/model.onnx`` on a machine that ran an earlier version.)
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.bench_embedding import read_passages  # noqa: E402
from loader.models.embedding import resolve_model_path  # noqa: E402
from loader.models.onnx_embedding import load_tokenizer, pool, quantized  # noqa: E402
from loader.models.registry import known_spec  # noqa: E402

BATCH = 8


def feeds_of(encodings: list) -> dict[str, np.ndarray]:
    width = max(len(e.ids) for e in encodings)
    ids = np.zeros((len(encodings), width), dtype=np.int64)
    mask = np.zeros_like(ids)
    for row, encoding in enumerate(encodings):
        ids[row, : len(encoding.ids)] = encoding.ids
        mask[row, : len(encoding.ids)] = 1
    return {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}


def session(path: Path):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    options.intra_op_num_threads = 1
    return ort.InferenceSession(str(path), options, providers=["CPUExecutionProvider"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path, help="a BEIR folder (corpus.jsonl[.gz])")
    parser.add_argument("a", type=Path)
    parser.add_argument("b", type=Path)
    parser.add_argument("--int8", action="store_true")
    parser.add_argument("--model", default="all-MiniLM-L6-v2")
    parser.add_argument("--passages", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=4)
    args = parser.parse_args()

    spec = known_spec(args.model)
    tokenizer = load_tokenizer(
        Path(resolve_model_path(args.model)) / "tokenizer.json", spec.max_tokens
    )
    encodings = tokenizer.encode_batch(read_passages(args.dataset, args.passages))
    encodings.sort(key=lambda e: len(e.ids))
    batches = [feeds_of(encodings[i : i + BATCH]) for i in range(0, len(encodings), BATCH)]
    files = [quantized(p) if args.int8 else p for p in (args.a, args.b)]
    sessions = [session(p) for p in files]
    for runner in sessions:
        runner.run(None, batches[len(batches) // 2])  # warm-up
    ratios: list[float] = []
    vectors: list[list[np.ndarray]] = [[], []]
    for round_ in range(args.rounds):
        for feeds in batches:
            took = [0.0, 0.0]
            for which in (0, 1) if round_ % 2 == 0 else (1, 0):
                started = time.perf_counter()
                (states,) = sessions[which].run(None, feeds)
                took[which] = time.perf_counter() - started
                if round_ == 0:
                    vectors[which].append(pool(states, feeds["attention_mask"], spec))
            ratios.append(took[1] / took[0])
    a, b = (np.concatenate(v) for v in vectors)
    quartiles = statistics.quantiles(ratios, n=4)
    print(
        f"{'int8' if args.int8 else 'fp32'} time B / A: median {statistics.median(ratios):.3f} "
        f"(quartiles {quartiles[0]:.3f}-{quartiles[2]:.3f}) over {len(ratios)} batch pairs"
    )
    print(
        f"vectors: lowest cosine {float((a * b).sum(axis=1).min()):.7f}, "
        f"largest difference {float(np.abs(a - b).max()):.2e}"
    )


if __name__ == "__main__":
    main()
