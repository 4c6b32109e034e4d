"""Why the learned reranker misses issue #46's targets (0.770 nDCG@10 on SciFact test with
MiniLM, 0.775 with bge-small-en-v1.5, +0.01 from 50 claims): features, data size, headroom.

Every learned figure is 5-fold cross-validation over SciFact's 809 train claims, whole claims per
fold (``learned_rerank_scifact.py``'s seeded folds), the current booster
(``loader.train.booster``: ``BOOSTER_PARAMS``, 300 rounds, ``PRIOR_SCALE``), the trees weighed 1.
Test is read only by ``headroom`` (the fused order and the labels: no model, no choice) and by
``per-claim`` (the model trained on all 809 train claims, as ``learned_rerank_scifact.py
final``, measured once).

    # the candidates cached by learned_rerank_scifact.py (curve, headroom) first, then:
    python3 benchmarks/learned_rerank_why.py all --out benchmarks/results/learned_rerank_why.json

- ``features``: the current features; the same plus a second reader of the passage, the other
  model's cosine of each candidate chunk against the claim (for the MiniLM index ``sfa``,
  bge-small-en-v1.5's: the chunk with the same id in ``sfb-scifact-structure``, used only when its
  text is the same; for ``sfb``, MiniLM's from ``sfa``; the claim embedded as ``loader`` embeds
  that model's questions), in the four per-question forms of the cosine features; that cosine
  alone as a ranker, and its RRF with the fused order;
- ``data-size``: the gain at 50 ... 647 training claims (seeded subsets of the fitting folds),
  its fit against log2(claims), and the claims the 0.770 target would need by that fit;
- ``headroom``: on test, the oracle over all the candidates, the first 50 and the first 10;
  the claims with no relevant candidate and what they cost; fusion's perfect and zero claims;
  where fusion puts the first relevant document;
- ``per-claim``: on test, claims better, unchanged and worse than fusion, and for the 10 that
  lost most, the features whose contributions (``pred_contrib``) lifted the candidates the model
  put above the relevant document.

The second reader's cosines are one ``_msearch`` per claim (the candidates' texts, and the other
index's ``knn_score`` restricted to the candidates and the tenant), pickled in ``--why-cache-dir``
beside the bge index's candidates, which ``sfb-candidates`` searches and pickles as
``learned_rerank_scifact.py`` does (``LOADER_EMBEDDING_MODEL=bge-small-en-v1.5 python3
benchmarks/learned_rerank_why.py sfb-candidates``); ``features`` and ``headroom`` add ``sfb``'s
figures where its candidates are cached.
Not a test. Requests go only to the settings' cluster (a loopback URL).
"""

from __future__ import annotations

import argparse
import json
import pickle
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

import learned_rerank_ablation as ablation  # noqa: E402
import learned_rerank_scifact as harness  # noqa: E402

from loader.eval.configs import index_alias  # noqa: E402
from loader.eval.indexes import EVAL_TENANT  # noqa: E402
from loader.models.rerank.features import (  # noqa: E402
    FEATURE_NAMES,
    _minmax,
    _ratio,
    _reciprocal_rank,
    _zscore,
    feature_set_of_width,
)
from loader.train.booster import BOOSTER_PARAMS, PRIOR_SCALE, ROUNDS, train_booster  # noqa: E402
from loader.train.examples import Example  # noqa: E402
from loader.train.learn import LearnRequest  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results" / "learned_rerank_why.json"
RRF_K = 60  # the rank constant of OpenSearch's RRF (the hybrid-rrf pipeline's default)
SIZES = (50, 100, 200, 400, 647)  # 647: all the fitting folds (4/5 of 809)
SEEDS = 3
WORST = 10


# --- the second reader: the other model's cosine of each candidate -------------------------------

# Candidates of an index -> the index whose model reads them a second time, and that model. The
# keys are the two indices' roles (MiniLM's, bge's); --index-prefixes names the real indices.
SECOND_READER = {"sfa": ("sfb", "bge-small-en-v1.5"), "sfb": ("sfa", "all-MiniLM-L6-v2")}
# The targets over each index's hybrid-rrf on test (0.7334 and 0.7311).
TARGETS = {"sfa": 0.770 - 0.7334, "sfb": 0.775 - 0.7311}


def _prefix(args: argparse.Namespace, role: str) -> str:
    """The index prefix of a role (``sfa``: MiniLM's eval indices, ``sfb``: bge's)."""
    return dict(zip(SECOND_READER, args.index_prefixes.split(","), strict=True))[role]


def _lookup_lines(
    prefixes: tuple[str, str], ids: list[str], vector: list[float]
) -> list[dict[str, Any]]:
    """The candidates' texts in their own index, and the second reader's index's cosine of the
    same chunk ids (``knn_score``: (1 + cosine) / 2), both restricted to the tenant."""
    restrict = [{"terms": {"chunk_id": ids}}, {"term": {"tenant": EVAL_TENANT}}]
    texts = {"bool": {"filter": restrict}}
    cosine = {
        "script_score": {
            "query": {"bool": {"filter": restrict}},
            "script": {
                "lang": "knn",
                "source": "knn_score",
                "params": {
                    "field": "embedding",
                    "query_value": vector,
                    "space_type": "cosinesimil",
                },
            },
        }
    }
    lines: list[dict[str, Any]] = []
    for index, query in zip(prefixes, (texts, cosine), strict=True):
        body = {"size": len(ids), "_source": ["chunk_id", "content"], "query": query}
        lines.extend(({"index": index_alias(index, "scifact", "structure")}, body))
    return lines


def _matched_scores(answers: list[dict[str, Any]], ids: list[str]) -> np.ndarray:
    """Each candidate's second ``knn_score``, NaN where the second index holds no chunk of that
    id with the same text."""
    texts = {h["_source"]["chunk_id"]: h["_source"]["content"] for h in answers[0]["hits"]["hits"]}
    scores = {
        h["_source"]["chunk_id"]: float(h["_score"])
        for h in answers[1]["hits"]["hits"]
        if texts.get(h["_source"]["chunk_id"]) == h["_source"]["content"]
    }
    return np.array([scores.get(i, np.nan) for i in ids])


def second_scores(
    args: argparse.Namespace, prefix: str, train: Mapping[str, Example]
) -> dict[str, np.ndarray]:
    """Claim id -> each candidate's second-reader score (NaN: no same-text chunk), the claim
    embedded as ``loader`` embeds the second model's questions; searched once, pickled."""
    name = f"learned-rerank-{_prefix(args, prefix)}-train-second-reader.pickle"
    cache = Path(args.why_cache_dir) / name
    if cache.is_file():
        with cache.open("rb") as file:
            return pickle.load(file)
    from loader.cluster.client import connect
    from loader.models.embedding import embedder_for

    settings = harness._settings(args)
    queries = harness.claim_texts(args.dataset)
    claims = sorted(train)
    reader = embedder_for(settings.replace(embedding_model=SECOND_READER[prefix][1]))
    vectors = reader.embed_queries([queries[q] for q in claims])
    client = connect(settings)
    found = {}
    for claim, vector in zip(claims, vectors, strict=True):
        ids = [chunk for _tenant, chunk in train[claim].chunks]
        indices = (_prefix(args, prefix), _prefix(args, SECOND_READER[prefix][0]))
        lines = _lookup_lines(indices, ids, [float(x) for x in vector])
        found[claim] = _matched_scores(client.msearch(body=lines)["responses"], ids)
    cache.parent.mkdir(parents=True, exist_ok=True)
    with cache.open("wb") as file:
        pickle.dump(found, file)
    return found


def reader_columns(scores: np.ndarray) -> np.ndarray:
    """The four per-question forms of the cosine features (``features._score_forms``: min-max,
    ratio to the best, z-score, 1 / rank) over the candidates with a score; NaN elsewhere
    (LightGBM's missing value)."""
    matched = ~np.isnan(scores)
    columns = np.full((len(scores), 4), np.nan)
    if matched.any():
        values = scores[matched]
        ranks = _reciprocal_rank(values, np.ones(len(values), bool))
        columns[matched] = np.column_stack(
            [_minmax(values), _ratio(values), _zscore(values), ranks]
        )
    return columns


# --- cross-validation ----------------------------------------------------------------------------


def cv_per_claim(
    train: Mapping[str, Example], matrix: Callable[[Example], np.ndarray], rounds: int = ROUNDS
) -> tuple[np.ndarray, np.ndarray]:
    """(hybrid-rrf, model) nDCG@10 per train claim, each scored by the fold model that did not
    see it: ``BOOSTER_PARAMS``, ``rounds`` rounds, ``PRIOR_SCALE``, seed 0, over ``matrix``'s
    columns (``ablation.train``: ``train_booster`` without its fixed feature names)."""
    params = {**BOOSTER_PARAMS, "seed": 0}
    base, model = [], []
    for fitted, scored in harness._folds(train, 5):
        pairs = [(matrix(e), e) for e in fitted]
        booster = ablation.train(pairs, params, rounds, PRIOR_SCALE, early=False)
        for e in scored:
            scores = PRIOR_SCALE * e.prior + booster.predict(matrix(e), num_threads=2)
            base.append(harness.ndcg(e, harness.fused_scores(e)))
            model.append(harness.ndcg(e, scores))
    return np.array(base), np.array(model)


def _rounded(values: Sequence[float]) -> list[float]:
    return [round(float(v), 4) for v in values]


def _ranker(train: Mapping[str, Example], scorer: Callable[[Example], np.ndarray]) -> float:
    return float(np.mean([harness.ndcg(e, scorer(e)) for e in train.values()]))


def _rrf(*orders: np.ndarray) -> np.ndarray:
    """RRF over the candidates of score arrays (higher first; NaN last)."""
    total = 0.0
    for scores in orders:
        ranks = np.empty(len(scores))
        ranks[np.argsort(-np.nan_to_num(scores, nan=-np.inf), kind="stable")] = np.arange(
            1, len(scores) + 1
        )
        total = total + 1.0 / (RRF_K + ranks)
    return total


def features(args: argparse.Namespace, prefix: str) -> dict[str, Any]:
    """The current features, the same plus the second reader's, and the cosines as rankers, on
    ``prefix``'s train candidates."""
    train = _load(_pickle(args, prefix, "train"))
    second = second_scores(args, prefix, train)
    matched = np.concatenate(list(second.values()))
    extra = {q: reader_columns(s) for q, s in second.items()}
    base, current = cv_per_claim(train, lambda e: e.features, args.rounds)
    print(f"{prefix}: {base.mean():.4f} -> {current.mean():.4f}", file=sys.stderr, flush=True)
    _, both = cv_per_claim(
        train, lambda e: np.hstack([e.features, extra[e.question_id]]), args.rounds
    )
    print(f"{prefix} + second reader: {both.mean():.4f}", file=sys.stderr, flush=True)
    vector = FEATURE_NAMES.index("vector_ratio")
    return {
        "claims": len(train),
        "second_reader": f"{SECOND_READER[prefix][1]} ({SECOND_READER[prefix][0]})",
        "candidates": int(matched.size),
        "text_matched_share": round(float(np.mean(~np.isnan(matched))), 4),
        "hybrid_rrf": round(float(base.mean()), 4),
        "current": round(float(current.mean()), 4),
        "current_gain": _rounded(harness.gain_interval(base, current)),
        "target_gain": round(TARGETS[prefix], 4),
        "current_plus_second_reader": round(float(both.mean()), 4),
        "current_plus_second_reader_gain": _rounded(harness.gain_interval(base, both)),
        "second_reader_adds": _rounded(harness.gain_interval(current, both)),
        "rankers_over_the_candidates": {
            "own_cosine_alone": round(_ranker(train, lambda e: e.features[:, vector]), 4),
            "second_cosine_alone": round(
                _ranker(train, lambda e: np.nan_to_num(second[e.question_id], nan=-1.0)), 4
            ),
            "rrf_hybrid_and_second_cosine": round(
                _ranker(train, lambda e: _rrf(harness.fused_scores(e), second[e.question_id])), 4
            ),
        },
    }


INDEPENDENT_RUNS = (
    "learned_rerank_ablation.py (sfa): current + independent runs (raw too), 15 leaves of 20+, "
    "rate 0.05, 300 rounds, no prior: 0.7663 (+0.0337) vs 0.7620 (+0.0294) without the runs"
)


# --- data size -----------------------------------------------------------------------------------


def size_gain(
    train: Mapping[str, Example], size: int, seed: int, rounds: int = ROUNDS
) -> dict[str, float]:
    """The CV gain over hybrid-rrf when each fold's model learns from ``size`` claims drawn
    (``seed``) from its fitting folds: ``train_booster`` as ``loader learn`` calls it, the
    trees weighed 1 and, as ``loader learn`` would weigh them, n / (n + 200)."""
    from loader.train.booster import residual_weight

    request = LearnRequest(sources=(), out=Path("unused"), seed=seed, rounds=rounds)
    base, full, shrunk = [], [], []
    for fitted, scored in harness._folds(train, 5):
        if size < len(fitted):
            picks = np.random.default_rng(seed).choice(len(fitted), size, replace=False)
            fitted = [fitted[i] for i in sorted(picks)]
        booster = train_booster(fitted, request)
        weight = residual_weight(sum(bool(e.labels.max() > 0) for e in fitted))
        for e in scored:
            residual = booster.predict(e.features, num_threads=2)
            base.append(harness.ndcg(e, harness.fused_scores(e)))
            full.append(harness.ndcg(e, PRIOR_SCALE * e.prior + residual))
            shrunk.append(harness.ndcg(e, PRIOR_SCALE * e.prior + weight * residual))
    base_mean = float(np.mean(base))
    return {
        "size": size,
        "seed": seed,
        "gain": round(float(np.mean(full)) - base_mean, 4),
        "gain_shrunk": round(float(np.mean(shrunk)) - base_mean, 4),
    }


def data_size(args: argparse.Namespace, train: Mapping[str, Example]) -> dict[str, Any]:
    """``size_gain`` at ``--sizes`` (``SEEDS`` draws each; one at the last, 647 by default: all
    the fitting folds), the least-squares fit gain = a + b log2(claims), and the claims it needs
    for ``TARGETS["sfa"]``."""
    sizes = [int(size) for size in args.sizes.split(",")]
    runs = []
    for size in sizes:
        for seed in range(1 if size == sizes[-1] else SEEDS):
            runs.append(size_gain(train, size, seed, args.rounds))
            print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    x = np.log2([run["size"] for run in runs])
    y = np.array([run["gain"] for run in runs])
    slope, intercept = np.polyfit(x, y, 1)
    residuals = y - (intercept + slope * x)
    means = {
        size: round(float(np.mean([r["gain"] for r in runs if r["size"] == size])), 4)
        for size in sizes
    }
    return {
        "runs": runs,
        "mean_gain_by_size": means,
        "fit": {
            "intercept": round(float(intercept), 4),
            "slope_per_doubling": round(float(slope), 4),
            "r2": round(float(1 - residuals.var() / y.var()), 3),
        },
        "target_gain": round(TARGETS["sfa"], 4),
        "claims_for_target_by_fit": int(round(2 ** ((TARGETS["sfa"] - intercept) / slope)))
        if slope > 0
        else None,
    }


# --- headroom (test: the fused order and the labels only) ----------------------------------------

RANK_BUCKETS = ((1, 1), (2, 3), (4, 10), (11, 50), (51, 10**6))


def _first_relevant(example: Example) -> int | None:
    """The fused rank (1-based) of the first relevant candidate, ``None`` without one."""
    found = np.flatnonzero(example.labels > 0)
    return int(found[0]) + 1 if found.size else None


def headroom(test: Mapping[str, Example]) -> dict[str, Any]:
    """The oracle over all the candidates and the first 50 and 10; what missing relevant
    documents cost; fusion's perfect and zero claims; the gap by fusion's first relevant rank."""
    claims = sorted(test)
    base = harness.per_claim(test, harness.fused_scores)
    best = harness.per_claim(test, harness.oracle_scores)
    first = [_first_relevant(test[q]) for q in claims]
    none = np.array([rank is None for rank in first])
    gap = best - base
    buckets = {}
    for low, high in RANK_BUCKETS:
        inside = np.array([rank is not None and low <= rank <= high for rank in first])
        name = f"{low}" if low == high else (f"{low}-{high}" if high < 10**6 else f"{low}+")
        buckets[name] = {
            "claims": int(inside.sum()),
            "hybrid_rrf": round(float(base[inside].mean()), 4) if inside.any() else None,
            "share_of_the_gap": round(float(gap[inside].sum() / gap.sum()), 3),
        }
    return {
        "claims": len(claims),
        "candidates_median": float(np.median([len(test[q].labels) for q in claims])),
        "hybrid_rrf": round(float(base.mean()), 4),
        "oracle_all": round(float(best.mean()), 4),
        **{
            f"oracle_first_{depth}": round(
                float(
                    harness.per_claim(test, lambda e, d=depth: harness.oracle_scores(e, d)).mean()
                ),
                4,
            )
            for depth in (50, 10)
        },  # fmt: skip
        "claims_without_a_relevant_candidate": int(none.sum()),
        "their_cost": round(float(none.sum() / len(claims)), 4),
        "cost_of_other_relevant_documents_missing": round(
            float((1 - best[~none]).sum()) / len(claims), 4
        ),
        "claims_perfect_under_fusion": int((base > 1 - 1e-9).sum()),
        "claims_zero_under_fusion": int((base == 0).sum()),
        "zero_claims_with_a_relevant_candidate": int(((base == 0) & ~none).sum()),
        "by_first_relevant_fused_rank": buckets,
    }


# --- per claim (test, the 809-claim model) -------------------------------------------------------


def contributors(width: int) -> tuple[str, ...]:
    """The names of a model's contributions over rows ``width`` wide (both readers' features
    with two), then the prior's."""
    return (*feature_set_of_width(width).names, "prior")


def flip_drivers(
    booster: Any, example: Example, scores: np.ndarray
) -> tuple[int, int, np.ndarray] | None:
    """Why the first relevant candidate (in fused order) moved: its fused and model ranks, and
    per ``contributors`` entry the mean over the candidates it swapped places with of (theirs -
    its) contribution when it fell, (its - theirs) when it rose; positive drove the move.
    ``None`` when no relevant candidate or it kept its place among the others."""
    first = _first_relevant(example)
    if first is None:
        return None
    r = first - 1
    fused = np.arange(len(scores))
    above_now, above_before = scores > scores[r], fused < r
    fell = above_now & ~above_before
    rose = above_before & ~above_now
    others = fell if fell.any() else rose
    if not others.any():
        return None
    contrib = booster.predict(example.features, pred_contrib=True, num_threads=2)[:, :-1]
    table = np.column_stack([contrib, PRIOR_SCALE * example.prior])
    difference = table[others].mean(axis=0) - table[r]
    model_rank = int((scores > scores[r]).sum()) + 1
    return first, model_rank, (difference if fell.any() else -difference)


def _top(difference: np.ndarray, count: int, names: tuple[str, ...]) -> list[list[Any]]:
    order = np.argsort(-difference)[:count]
    return [[names[i], round(float(difference[i]), 3)] for i in order]


def per_claim(
    train: Mapping[str, Example], test: Mapping[str, Example], rounds: int = ROUNDS
) -> dict[str, Any]:
    """The 809-claim model (``learned_rerank_scifact.py final``: all the train claims, prior 2,
    trees weighed 1) against fusion, claim by claim, and the drivers of its 10 worst losses."""
    request = LearnRequest(sources=(), out=Path("unused"), rounds=rounds)
    booster = train_booster(list(train.values()), request)
    claims = sorted(test)
    scores = {q: harness.model_scores(booster, PRIOR_SCALE, test[q]) for q in claims}
    base = harness.per_claim(test, harness.fused_scores)
    model = np.array([harness.ndcg(test[q], scores[q]) for q in claims])
    change = model - base
    worst = [i for i in np.argsort(change, kind="stable")[:WORST] if change[i] < 0]
    names = contributors(test[claims[0]].features.shape[1])
    rows, total = [], np.zeros(len(names))
    for i in worst:
        found = flip_drivers(booster, test[claims[i]], scores[claims[i]])
        row = {"claim": claims[i], "hybrid_rrf": round(float(base[i]), 4),
               "model": round(float(model[i]), 4)}  # fmt: skip
        if found is not None:
            row["relevant_rank"] = [found[0], found[1]]
            row["drivers"] = _top(found[2], 3, names)
            total += found[2]
        rows.append(row)
    best = [i for i in np.argsort(-change, kind="stable")[:WORST] if change[i] > 0]
    lifted = [flip_drivers(booster, test[claims[i]], scores[claims[i]]) for i in best]
    lifted_total = sum((f[2] for f in lifted if f is not None), np.zeros(len(names)))
    return {
        "hybrid_rrf": round(float(base.mean()), 4),
        "model": round(float(model.mean()), 4),
        "better_unchanged_worse": [
            int((change > 1e-9).sum()),
            int((abs(change) <= 1e-9).sum()),
            int((change < -1e-9).sum()),
        ],  # fmt: skip
        "gained_lost": [
            round(float(change[change > 0].sum()) / len(claims), 4),
            round(float(change[change < 0].sum()) / len(claims), 4),
        ],  # fmt: skip
        "worst": rows,
        "worst_drivers_summed": _top(total, 5, names),
        "best_drivers_summed": _top(lifted_total, 5, names),
    }


# --- the command ---------------------------------------------------------------------------------


def _load(path: Path) -> dict[str, Example]:
    """A pickle ``learned_rerank_scifact.py`` wrote (never written here)."""
    if not path.is_file():
        raise SystemExit(f"{path} is missing: run learned_rerank_scifact.py curve first")
    return harness.examples([], None, path)  # type: ignore[arg-type]


def _pickle(args: argparse.Namespace, prefix: str, split: str) -> Path:
    folder = args.cache_dir if prefix == "sfa" else args.why_cache_dir
    index_prefix = _prefix(args, prefix)
    return harness._cache(argparse.Namespace(index_prefix=index_prefix, cache_dir=folder), split)


def sfb_candidates(args: argparse.Namespace) -> dict[str, Any]:
    """The bge index's train and test candidates, searched and pickled in ``--why-cache-dir``
    (``harness.examples``), with bge embedding the claims (``LOADER_EMBEDDING_MODEL``)."""
    settings = harness._settings(args)
    if settings.embedding_model != SECOND_READER["sfa"][1]:
        raise SystemExit("sfb-candidates: set LOADER_EMBEDDING_MODEL=bge-small-en-v1.5")
    counts = {}
    for split in ("train", "test"):
        pairs = harness.judged(args.dataset, split, settings, _prefix(args, "sfb"))
        counts[split] = len(harness.examples(pairs, settings, _pickle(args, "sfb", split)))
    return counts


def run(args: argparse.Namespace, command: str) -> dict[str, Any]:
    """One section's figures."""
    if command == "sfb-candidates":
        return sfb_candidates(args)
    if command == "headroom":
        found = {"sfa": headroom(_load(_pickle(args, "sfa", "test")))}
        if _pickle(args, "sfb", "test").is_file():
            found["sfb"] = headroom(_load(_pickle(args, "sfb", "test")))
        return found
    if command == "features":
        found = {"sfa": features(args, "sfa"), "independent_runs_cited": INDEPENDENT_RUNS}
        if _pickle(args, "sfb", "train").is_file():
            found["sfb"] = features(args, "sfb")
        return found
    train = _load(_pickle(args, "sfa", "train"))
    if command == "data-size":
        return data_size(args, train)
    return per_claim(train, _load(_pickle(args, "sfa", "test")), args.rounds)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sections = ["features", "data-size", "headroom", "per-claim"]
    parser.add_argument("command", choices=[*sections, "all", "sfb-candidates"])
    parser.add_argument("--cache-dir", default="/tmp", help="The MiniLM (sfa) candidates.")
    parser.add_argument(
        "--why-cache-dir", default="/tmp/why-cache", help="sfb's candidates, the readers' scores."
    )
    parser.add_argument("--dataset", default=str(harness.DEFAULT_DATASET), help="SciFact folder.")
    parser.add_argument("--url", default=None, help="OpenSearch URL (default: the settings').")
    parser.add_argument(
        "--index-prefixes", default="sfa,sfb", help="The eval indices' prefixes: MiniLM's,bge's."
    )
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="data-size: claims.")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="Boosting rounds per model.")
    parser.add_argument("--out", default=None, help="Merge the figures into this JSON file.")
    args = parser.parse_args()
    figures = {}
    for command in sections if args.command == "all" else [args.command]:
        figures[command] = run(args, command)
        print(json.dumps({command: figures[command]}), file=sys.stderr, flush=True)
    text = json.dumps(figures, indent=2)
    print(text)
    if args.out:
        out = Path(args.out)
        kept = json.loads(out.read_text(encoding="utf-8")) if out.is_file() else {}
        out.write_text(json.dumps({**kept, **figures}, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
