"""How far fusion settings alone can lift hybrid nDCG@10: an oracle over the eval's test split.

Takes an index `loader eval` already built (``--index``, the alias), fetches every question's
BM25 and vector chunk rankings through ``loader.query.search`` (``--depth`` chunks each, the
settings' ``exact_match`` as `loader search` applies it), then fuses them on the client with
``loader.query.fusion`` over a grid: weighted RRF (BM25 weight x rank constant) and min-max
(BM25 weight). Each fused chunk ranking becomes a document ranking at each document's best chunk,
as eval scores it. The best cell is chosen on the very queries it is scored on, so it is an upper
bound for tuning these settings, not a result to expect on new questions. The exact-identifier
sub-query is left out (it is empty for questions without identifiers; its weight is
`exact_weight`, swept by `loader eval --sweep`).

    LOADER_EMBEDDING_MODEL=bge-small-en-v1.5 python3 benchmarks/fusion_ceiling.py \\
        /work/shared/datasets/scifact --index eval-bge-onnx-scifact-structure
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from loader.eval.indexes import EVAL_TENANT  # noqa: E402
from loader.eval.metrics import score_run  # noqa: E402
from loader.eval.tasks import load_task  # noqa: E402
from loader.query.fusion import best_rank_per_document, min_max_fusion, rrf  # noqa: E402
from loader.query.request import MAX_CANDIDATES, SearchRequest  # noqa: E402
from loader.query.search import search  # noqa: E402
from loader.resolve import resolve_settings  # noqa: E402

RRF_BM25_WEIGHTS = (0.3, 0.4, 0.5, 0.6, 0.7)
RANK_CONSTANTS = (5, 10, 20, 40, 60, 100)
MIN_MAX_BM25_WEIGHTS = (0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7)


def side_rankings(task, settings, depth: int) -> dict[str, dict[str, list[tuple[str, str, float]]]]:
    """question id -> {"bm25" | "vector": [(chunk id, document key, score)], best first}."""
    rankings = {}
    for query in task.queries:
        rankings[query.id] = {}
        for mode in ("bm25", "vector"):
            request = SearchRequest(
                question=query.text,
                tenant=EVAL_TENANT,
                mode=mode,
                rerank=False,
                k=depth,
                candidates=depth,
                exact_match=settings.exact_match,
                one_per_document=False,
            )
            hits = search(request, settings).hits
            rankings[query.id][mode] = [
                (hit.chunk_id, hit.source, float(hit.scores["retrieval"])) for hit in hits
            ]
    return rankings


def document_run(fused: list[tuple[str, float]], document_of: dict[str, str]) -> list[str]:
    return best_rank_per_document([(chunk, document_of[chunk]) for chunk, _score in fused])


def ndcg(task, rankings, fuse) -> float:
    run = {}
    for qid, sides in rankings.items():
        document_of = {chunk: doc for chunk, doc, _ in sides["bm25"] + sides["vector"]}
        run[qid] = document_run(fuse(sides), document_of)
    return round(score_run(run, task.qrels)["ndcg@10"], 4)


def grid(task, rankings) -> list[dict]:
    rows = []
    for mode in ("bm25", "vector"):
        rows.append(
            {"fusion": mode, "ndcg@10": ndcg(task, rankings, lambda s, m=mode: _alone(s[m]))}
        )
    for weight in RRF_BM25_WEIGHTS:
        for constant in RANK_CONSTANTS:
            score = ndcg(task, rankings, lambda s, w=weight, c=constant: _rrf(s, w, c))
            rows.append(
                {
                    "fusion": "rrf",
                    "bm25_weight": weight,
                    "rank_constant": constant,
                    "ndcg@10": score,
                }
            )
    for weight in MIN_MAX_BM25_WEIGHTS:
        score = ndcg(task, rankings, lambda s, w=weight: _min_max(s, w))
        rows.append({"fusion": "min-max", "bm25_weight": weight, "ndcg@10": score})
    return rows


def _alone(hits):
    return [(chunk, score) for chunk, _doc, score in hits]


def _rrf(sides, bm25_weight: float, rank_constant: int):
    lists = [[chunk for chunk, _doc, _score in sides[m]] for m in ("bm25", "vector")]
    return rrf(lists, rank_constant=rank_constant, weights=[bm25_weight, 1 - bm25_weight])


def _min_max(sides, bm25_weight: float):
    scores = [{chunk: score for chunk, _doc, score in sides[m]} for m in ("bm25", "vector")]
    return min_max_fusion(scores, weights=[bm25_weight, 1 - bm25_weight])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path, help="BEIR folder the index was built from")
    parser.add_argument("--index", required=True, help="alias of an index loader eval built")
    parser.add_argument("--split", default="test")
    parser.add_argument("--depth", type=int, default=300, help="chunks per side and question")
    parser.add_argument("--output", type=Path, help="write the grid as JSON here")
    args = parser.parse_args()
    if not 1 <= args.depth <= MAX_CANDIDATES:
        parser.error(f"--depth must be between 1 and {MAX_CANDIDATES}")
    settings, _ = resolve_settings(overrides={"index_name": args.index})
    task = load_task(args.dataset, split=args.split)
    rankings = side_rankings(task, settings, args.depth)
    rows = grid(task, rankings)
    defaults = {
        "rrf": ndcg(
            task, rankings, lambda s: _rrf(s, settings.rrf_bm25_weight, settings.rrf_rank_constant)
        ),
        "min-max": ndcg(task, rankings, lambda s: _min_max(s, settings.bm25_weight)),
    }
    print(
        f"{args.index}: {len(task.queries)} questions, {args.depth} chunks per side, "
        f"{settings.embedding_model} ({settings.embedding_backend})"
    )
    for row in rows[:2]:
        print(f"  {row['fusion']:<8} alone                      nDCG@10 {row['ndcg@10']:.4f}")
    for fusion in ("rrf", "min-max"):
        cells = [row for row in rows if row["fusion"] == fusion]
        best = max(cells, key=lambda row: row["ndcg@10"])
        knobs = ", ".join(f"{k} {v}" for k, v in best.items() if k not in ("fusion", "ndcg@10"))
        print(
            f"  {fusion:<8} settings' {defaults[fusion]:.4f}; best of {len(cells)} "
            f"({knobs}) {best['ndcg@10']:.4f}"
        )
    if args.output:
        args.output.write_text(
            json.dumps({"index": args.index, "defaults": defaults, "grid": rows}, indent=2) + "\n",
            encoding="utf-8",
        )


if __name__ == "__main__":
    main()
