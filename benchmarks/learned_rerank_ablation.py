"""Why the learned reranker gains +0.005 on SciFact where a rough version gained +0.031: an
ablation on the train claims alone (issue #46).

The rough version reranked with document-level evidence from independent retrievers (each
mode's own top 100 over the whole index: score, rank, presence); ours looks up BM25 and the
cosine restricted to the fused candidates. This script adds that evidence to the cached
candidates (``learned_rerank_scifact.py``'s train pickle, the rerank's own features) and trains
one small LightGBM model per variant and fold: 5-fold cross-validation over the 809 train claims,
whole claims per fold (the same seeded folds as ``learned_rerank_scifact.py diagnose``). Test is
never read.

    python3 benchmarks/learned_rerank_ablation.py --index-prefix sfa

The independent evidence is one ``_msearch`` per claim (BM25 on ``content`` and the k-NN query,
each alone, tenant-filtered, 300 chunks deep, so about 100 documents at their best chunk),
pickled in ``--cache-dir`` beside the candidates. Not a test. Requests go only to the settings'
cluster (a loopback URL).
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import learned_rerank_scifact as harness  # noqa: E402

from loader.eval.indexes import EVAL_TENANT  # noqa: E402
from loader.models.rerank.features import FEATURE_NAMES, feature_set_of_width  # noqa: E402
from loader.train.booster import BOOSTER_PARAMS  # noqa: E402
from loader.train.examples import Example  # noqa: E402

DEPTH = 300  # chunks per retriever: about 100 documents at their best chunk, as eval's runs
RUN_DOCUMENTS = 100  # a document beyond a run's 100th is absent from it
SIDES = ("bm25", "vector")
# The booster before 50df28d, which every variant starts from (the table's rows were measured
# with it; 50df28d made "15 leaves, min leaf 20, lr 0.05, 300 rounds" the default).
EARLIER_RECIPE = {"num_leaves": 7, "min_data_in_leaf": 40, "learning_rate": 0.2}


# --- the independent runs ------------------------------------------------------------------------


def run_lines(index: str, text: str, vector: list[float]) -> list[dict[str, Any]]:
    """One claim's ``_msearch`` lines: BM25 on content and the k-NN query, each alone over the
    whole index (tenant-filtered, not restricted to the candidates)."""
    tenant = {"term": {"tenant": EVAL_TENANT}}
    bm25 = {"bool": {"must": {"match": {"content": {"query": text}}}, "filter": [tenant]}}
    knn = {"knn": {"embedding": {"vector": vector, "k": DEPTH, "filter": tenant}}}
    lines: list[dict[str, Any]] = []
    for query in (bm25, knn):
        body = {"size": DEPTH, "_source": ["source"], "track_total_hits": False, "query": query}
        lines.extend(({"index": index}, body))
    return lines


def document_run(answer: dict[str, Any]) -> dict[str, tuple[int, float, int, float]]:
    """Document -> (rank at its best chunk, best chunk's score, chunks in the run, their summed
    score), the first ``RUN_DOCUMENTS`` documents of a chunk run."""
    found: dict[str, list[float]] = {}
    for hit in answer["hits"]["hits"]:
        key = str(hit["_source"]["source"])
        if key not in found:
            if len(found) == RUN_DOCUMENTS:
                continue
            found[key] = [len(found) + 1, float(hit["_score"]), 0, 0.0]
        found[key][2] += 1
        found[key][3] += float(hit["_score"])
    return {key: (int(r), s, int(n), total) for key, (r, s, n, total) in found.items()}


def independent_runs(args: argparse.Namespace, train: Mapping[str, Example]) -> dict[str, Any]:
    """Claim id -> {side: document run}, pickled in the cache directory (searched once)."""
    cache = Path(args.cache_dir) / f"learned-rerank-{args.index_prefix}-train-runs.pickle"
    if cache.is_file():
        with cache.open("rb") as file:
            return pickle.load(file)
    from loader.cluster.client import connect
    from loader.eval.configs import index_alias
    from loader.models.embedding import embedder_for

    settings = harness._settings(args)
    queries = harness.claim_texts(args.dataset)
    ids = sorted(train)
    vectors = embedder_for(settings).embed_queries([queries[q] for q in ids])
    index = index_alias(args.index_prefix, "scifact", "structure")
    client = connect(settings)
    runs = {}
    for qid, vector in zip(ids, vectors, strict=True):
        lines = run_lines(index, queries[qid], [float(x) for x in vector])
        answers = client.msearch(body=lines)["responses"]
        runs[qid] = {side: document_run(a) for side, a in zip(SIDES, answers, strict=True)}
    with cache.open("wb") as file:
        pickle.dump(runs, file)
    return runs


# --- the extra columns ---------------------------------------------------------------------------

EXTRA = (
    # per side: 1/rank (0 absent), presence, raw best-chunk score, score / the run's best
    *(f"{side}_run_{form}" for side in SIDES for form in ("rank", "present", "raw", "ratio")),
    # per side: the document's chunks in the run, their summed raw score
    *(f"{side}_run_{form}" for side in SIDES for form in ("chunks", "sum")),
    "question_words",
)


def _aggregate(row: tuple[int, float, int, float] | None) -> list[float]:
    return [float(row[2]), row[3]] if row else [0.0, 0.0]


def extra_columns(example: Example, runs: dict[str, Any], words: int) -> np.ndarray:
    """The independent runs' evidence per candidate document, ``EXTRA``'s columns."""
    columns = []
    for side in SIDES:
        run = runs[side]
        best = max((s for _, s, _, _ in run.values()), default=1.0) or 1.0
        rows = [run.get(key) for key in example.keys]
        columns.append([
            [1.0 / r[0], 1.0, r[1], r[1] / best] if r else [0.0, 0.0, 0.0, 0.0] for r in rows
        ])  # fmt: skip
    per_side = np.hstack([np.array(c) for c in columns])
    aggregates = np.array([
        [value for side in SIDES for value in _aggregate(runs[side].get(key))]
        for key in example.keys
    ])  # fmt: skip
    words_column = np.full((len(example.keys), 1), float(words))
    return np.hstack([per_side, aggregates, words_column])


# --- training and scoring ------------------------------------------------------------------------


def train(
    examples: list[tuple[np.ndarray, Example]], params: dict[str, Any], rounds: int,
    prior_scale: float, early: bool,
) -> Any:  # fmt: skip
    """A lambdarank booster over (matrix, example) pairs, the residual over the scaled prior;
    with ``early``, early stopping on a seeded 20 % of the fitted claims (as ``train_booster``
    did before 50df28d)."""
    import lightgbm

    useful = [pair for pair in examples if pair[1].labels.max() > 0]

    def dataset(pairs: list[tuple[np.ndarray, Example]]) -> Any:
        return lightgbm.Dataset(
            np.vstack([m for m, _ in pairs]),
            label=np.concatenate([e.labels for _, e in pairs]),
            group=[len(e.labels) for _, e in pairs],
            init_score=np.concatenate([prior_scale * e.prior for _, e in pairs]),
            free_raw_data=False,
        )

    valid_sets, callbacks = [], []
    if early:
        order = np.random.default_rng(1).permutation(len(useful))
        cut = len(useful) // 5
        valid_sets = [dataset([useful[i] for i in order[:cut]])]
        useful = [useful[i] for i in order[cut:]]
        callbacks = [lightgbm.early_stopping(15, verbose=False)]
    return lightgbm.train(
        params, dataset(useful), num_boost_round=rounds, valid_sets=valid_sets,
        callbacks=callbacks,
    )  # fmt: skip


def cross_validate(
    train_set: Mapping[str, Example], matrix: Callable[[Example], np.ndarray], *,
    params: dict[str, Any] | None = None, rounds: int = 100, prior_scale: float = 2.0,
    early: bool = True,
) -> tuple[float, float, float]:  # fmt: skip
    """(hybrid-rrf, model) mean nDCG@10 over the 5 folds, and the model's mean trees."""
    params = {**BOOSTER_PARAMS, **EARLIER_RECIPE, "seed": 0, **(params or {})}
    base, model, trees = [], [], []
    for fitted, scored in harness._folds(train_set, 5):
        booster = train([(matrix(e), e) for e in fitted], params, rounds, prior_scale, early)
        trees.append(booster.num_trees())
        for example in scored:
            scores = prior_scale * example.prior + booster.predict(matrix(example), num_threads=2)
            base.append(harness.ndcg(example, harness.fused_scores(example)))
            model.append(harness.ndcg(example, scores))
    return float(np.mean(base)), float(np.mean(model)), float(np.mean(trees))


def variants(
    train_set: Mapping[str, Example], runs: Mapping[str, Any], words: Mapping[str, int]
) -> dict[str, tuple[Callable[[Example], np.ndarray], dict[str, Any]]]:
    """Variant name -> (the feature matrix of an example, cross_validate's options)."""
    extra = {q: extra_columns(e, runs[q], words[q]) for q, e in train_set.items()}
    width = next(iter(train_set.values())).features.shape[1]  # both readers' with two
    names = list(feature_set_of_width(width).names) + list(EXTRA)

    def pick(*columns: str) -> Callable[[Example], np.ndarray]:
        index = [names.index(c) for c in columns]
        return lambda e: np.hstack([e.features, extra[e.question_id]])[:, index]

    current = list(FEATURE_NAMES)
    run_normalised = [f"{s}_run_{f}" for s in SIDES for f in ("rank", "present", "ratio")]
    run_raw = [f"{s}_run_raw" for s in SIDES]
    aggregates = [f"{s}_run_{f}" for s in SIDES for f in ("chunks", "sum")]
    rough = [
        *run_normalised, *run_raw, "fused_rank", "fused_minmax", "question_words",
        "length_ratio", "title_overlap", "body_overlap",
    ]  # fmt: skip
    fixed = {"early": False}
    return {
        "current features, the earlier recipe (early stopping)": (pick(*current), {}),
        "current, no prior": (pick(*current), {"prior_scale": 0.0}),
        "+ independent runs (normalised)": (pick(*current, *run_normalised), {}),
        "+ independent runs (normalised), no prior": (
            pick(*current, *run_normalised), {"prior_scale": 0.0}),
        "+ runs, normalised and raw": (pick(*current, *run_normalised, *run_raw), {}),
        "+ runs, normalised and raw, no prior": (
            pick(*current, *run_normalised, *run_raw), {"prior_scale": 0.0}),
        "+ runs + document aggregates": (
            pick(*current, *run_normalised, *run_raw, *aggregates), {}),
        "rough version's document features only, no prior": (pick(*rough), {"prior_scale": 0.0}),
        "rough version's features, 300 rounds fixed, lr 0.05, no prior": (
            pick(*rough), {"prior_scale": 0.0, "rounds": 300, **fixed,
                           "params": {"learning_rate": 0.05}}),
        "current, 300 rounds fixed, lr 0.05, no prior": (
            pick(*current), {"prior_scale": 0.0, "rounds": 300, **fixed,
                             "params": {"learning_rate": 0.05}}),
        "current, 300 rounds, lr 0.05, leaves 15, min leaf 20, no prior": (
            pick(*current), {"prior_scale": 0.0, "rounds": 300, **fixed,
                             "params": {"learning_rate": 0.05, "num_leaves": 15,
                                        "min_data_in_leaf": 20}}),
        "current, 300 rounds, lr 0.05, leaves 15, min leaf 20, prior 2": (
            pick(*current),
            {"prior_scale": 2.0, "rounds": 300, **fixed,
             "params": {"learning_rate": 0.05, "num_leaves": 15, "min_data_in_leaf": 20}}),
        "+ runs raw + aggregates, 300 rounds, lr 0.05, leaves 15, min leaf 20, no prior": (
            pick(*current, *run_normalised, *run_raw, *aggregates),
            {"prior_scale": 0.0, "rounds": 300, **fixed,
             "params": {"learning_rate": 0.05, "num_leaves": 15, "min_data_in_leaf": 20}}),
        "+ runs raw, 300 rounds fixed, lr 0.05, no prior": (
            pick(*current, *run_normalised, *run_raw),
            {"prior_scale": 0.0, "rounds": 300, **fixed, "params": {"learning_rate": 0.05}}),
        "+ runs raw, 300 rounds, lr 0.05, leaves 15, min leaf 20, no prior": (
            pick(*current, *run_normalised, *run_raw),
            {"prior_scale": 0.0, "rounds": 300, **fixed,
             "params": {"learning_rate": 0.05, "num_leaves": 15, "min_data_in_leaf": 20}}),
        "+ runs raw, 300 rounds, lr 0.05, truncation 100, no prior": (
            pick(*current, *run_normalised, *run_raw),
            {"prior_scale": 0.0, "rounds": 300, **fixed,
             "params": {"learning_rate": 0.05, "lambdarank_truncation_level": 100}}),
        "+ runs raw, 300 rounds, lr 0.05, prior 2": (
            pick(*current, *run_normalised, *run_raw),
            {"prior_scale": 2.0, "rounds": 300, **fixed, "params": {"learning_rate": 0.05}}),
        "+ runs raw, 300 rounds, lr 0.05, prior 0.5": (
            pick(*current, *run_normalised, *run_raw),
            {"prior_scale": 0.5, "rounds": 300, **fixed, "params": {"learning_rate": 0.05}}),
    }  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--index-prefix", default="sfa", help="The eval indices' prefix.")
    parser.add_argument("--cache-dir", default="/tmp", help="Where the candidates are pickled.")
    parser.add_argument("--dataset", default=str(harness.DEFAULT_DATASET), help="SciFact folder.")
    parser.add_argument("--url", default=None, help="OpenSearch URL (default: the settings').")
    parser.add_argument("--only", default=None, help="Run only the variants containing this.")
    parser.add_argument("--out", default=None, help="Write the table as JSON here too.")
    parser.add_argument(
        "--rounds", type=int, default=None, help="Every variant's rounds (default: its own)."
    )
    args = parser.parse_args()
    cache = harness._cache(args, "train")
    if not cache.is_file():
        raise SystemExit(f"{cache} is missing: run learned_rerank_scifact.py diagnose first")
    train_set = harness.examples([], None, cache)  # type: ignore[arg-type]
    runs = independent_runs(args, train_set)
    words = {
        q: int(e.features[0, FEATURE_NAMES.index("question_terms")]) for q, e in train_set.items()
    }
    rows = []
    print("| variant | hybrid-rrf | model | gain | trees |")
    print("| --- | ---: | ---: | ---: | ---: |")
    for name, (matrix, options) in variants(train_set, runs, words).items():
        if args.only and args.only not in name:
            continue
        if args.rounds is not None:
            options = {**options, "rounds": args.rounds}
        base, model, trees = cross_validate(train_set, matrix, **options)
        rows.append({"variant": name, "hybrid_rrf": round(base, 4), "model": round(model, 4),
                     "gain": round(model - base, 4), "trees": trees})  # fmt: skip
        print(
            f"| {name} | {base:.4f} | {model:.4f} | {model - base:+.4f} | {trees:.0f} |", flush=True
        )
    if args.out:
        Path(args.out).write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
