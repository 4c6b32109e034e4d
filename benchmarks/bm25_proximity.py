"""Does term proximity lift the BM25 side, and with it the fusion? Sequential-dependence BM25 on
an index `loader eval` built.

Each question's BM25 side is the templates' text match (``content`` and ``heading_path``) plus,
per variant, a sequential-dependence-model clause for every pair of adjacent analysed terms: an
ordered pair (``span_near``, slop 0) and an unordered window of 8, at the boosts below (Metzler
and Croft's SDM weighs them 0.1 and 0.05 against 0.85 for the terms). The vector side is the
question's chunk ranking through ``loader.query.search``, with and without the query instruction.
Both are fused by weighted RRF as the pipeline does (BM25 weight 0.5, rank constants 20 and 60),
and scored at each document's best chunk, as eval scores them, on the train and test splits:
choose on train, read on test. The exact-identifier sub-query is left out of both sides.

    LOADER_EMBEDDING_MODEL=bge-small-en-v1.5 LOADER_EMBEDDING_BACKEND=onnx-int8 \\
        python3 benchmarks/bm25_proximity.py /work/shared/datasets/scifact \\
        --index eval-bge-int8-scifact-structure
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from loader.cluster.client import connect  # noqa: E402
from loader.eval.indexes import EVAL_TENANT  # noqa: E402
from loader.eval.metrics import score_run  # noqa: E402
from loader.eval.tasks import load_task  # noqa: E402
from loader.query.fusion import best_rank_per_document, rrf  # noqa: E402
from loader.query.request import SearchRequest  # noqa: E402
from loader.query.search import bm25_text, search  # noqa: E402
from loader.resolve import resolve_settings  # noqa: E402

# (ordered pair boost, unordered window boost); (0, 0) is the templates' BM25 as it is.
VARIANTS = ((0.0, 0.0), (0.1, 0.05), (0.2, 0.1), (0.3, 0.0), (0.0, 0.3), (0.5, 0.25))
WINDOW = 8
RANK_CONSTANTS = (20, 60)


def analysed_terms(client, index: str, text: str) -> list[str]:
    answer = client.indices.analyze(index=index, body={"field": "content", "text": text})
    return [token["token"] for token in answer["tokens"]]


def bm25_clauses(text: str, terms: list[str], ordered: float, unordered: float) -> list[dict]:
    clauses = [
        {"match": {"content": {"query": text}}},
        {"match": {"heading_path": {"query": text}}},
    ]
    for first, second in zip(terms, terms[1:], strict=False):
        pair = [{"span_term": {"content": first}}, {"span_term": {"content": second}}]
        for boost, slop, in_order in ((ordered, 0, True), (unordered, WINDOW, False)):
            if boost:
                near = {"clauses": pair, "slop": slop, "in_order": in_order, "boost": boost}
                clauses.append({"span_near": near})
    return clauses


def bm25_ranking(client, index: str, text: str, clauses: list[dict], depth: int):
    body = {
        "size": depth,
        "_source": ["chunk_id", "source"],
        "query": {
            "bool": {
                "must": {"bool": {"should": clauses, "minimum_should_match": 1}},
                "filter": [{"term": {"tenant": EVAL_TENANT}}],
            }
        },
    }
    hits = client.search(index=index, body=body)["hits"]["hits"]
    return [(hit["_source"]["chunk_id"], hit["_source"]["source"]) for hit in hits]


def vector_ranking(settings, text: str, depth: int):
    request = SearchRequest(
        question=text,
        tenant=EVAL_TENANT,
        mode="vector",
        rerank=False,
        k=depth,
        candidates=depth,
        exact_match=False,
        one_per_document=False,
    )
    return [(hit.chunk_id, hit.source) for hit in search(request, settings).hits]


def fused_documents(bm25, vector, rank_constant: int) -> list[str]:
    document_of = dict(bm25 + vector)
    fused = rrf([[c for c, _ in bm25], [c for c, _ in vector]], rank_constant=rank_constant)
    return best_rank_per_document([(chunk, document_of[chunk]) for chunk, _ in fused])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("dataset", type=Path, help="BEIR folder the index was built from")
    parser.add_argument("--index", required=True, help="alias of an index loader eval built")
    parser.add_argument("--depth", type=int, default=100, help="chunks per side and question")
    args = parser.parse_args()
    settings, _ = resolve_settings(overrides={"index_name": args.index})
    client = connect(settings)
    by_instruction = {flag: settings.replace(query_instruction=flag) for flag in (True, False)}
    for split in ("train", "test"):
        task = load_task(args.dataset, split=split)
        texts = {query.id: bm25_text(query.text) for query in task.queries}
        vectors = {
            instruction: {qid: vector_ranking(s, text, args.depth) for qid, text in texts.items()}
            for instruction, s in by_instruction.items()
        }
        terms = {qid: analysed_terms(client, args.index, text) for qid, text in texts.items()}
        print(f"{split}: {len(texts)} questions, {args.depth} chunks per side")
        for ordered, unordered in VARIANTS:
            bm25 = {}
            for qid, text in texts.items():
                clauses = bm25_clauses(text, terms[qid], ordered, unordered)
                bm25[qid] = bm25_ranking(client, args.index, text, clauses, args.depth)
            alone = {qid: best_rank_per_document(hits) for qid, hits in bm25.items()}
            cells = [f"bm25 {score_run(alone, task.qrels)['ndcg@10']:.4f}"]
            for instruction, rankings in vectors.items():
                for constant in RANK_CONSTANTS:
                    run = {qid: fused_documents(bm25[qid], rankings[qid], constant) for qid in bm25}
                    cells.append(
                        f"rrf instruction={instruction!s:<5} k={constant} "
                        f"{score_run(run, task.qrels)['ndcg@10']:.4f}"
                    )
            variant = f"ordered {ordered:<4} unordered {unordered:<4}"
            print(f"  {variant} " + "  ".join(cells), flush=True)


if __name__ == "__main__":
    main()
