"""The learned reranker on SciFact, measured the honest way (issue #46), and its carry-over.

Every figure compares the same candidates per claim, as ``loader learn`` collects them for a BEIR
folder (``collect_examples``, ``--candidates 50``: the hybrid-rrf search ``loader eval`` makes,
each document at its best chunk, 150 chunks deep, so up to 150 documents), in fusion order (the
baseline), in the learned reranker's order (``LearnedReranker.score``'s formula on the features
the search's own lookup computed), and in the order a perfect judge would give them (the oracle:
relevant documents first, by grade). Training reads SciFact's train claims only; ``diagnose``
chooses on train alone (5-fold cross-validation); every test figure is measured once per model.

    # the eval indices first (tenant eval; guide/models.md has the commands), then:
    python3 benchmarks/learned_rerank_scifact.py headroom --index-prefix sfa
    python3 benchmarks/learned_rerank_scifact.py curve --index-prefix sfa --out curve.json
    python3 benchmarks/learned_rerank_scifact.py diagnose --index-prefix sfa
    python3 benchmarks/learned_rerank_scifact.py final --index-prefix sfa --prior-scale 0
    python3 benchmarks/learned_rerank_scifact.py carry-over --model /tmp/learned-rerank/sfa-400-1

- ``headroom``: test nDCG@10 of hybrid-rrf and of the oracle over all the candidates and over
  the first 50;
- ``curve``: ``loader learn`` (the library function) on seeded subsets of the train claims
  (25 ... 809), each model measured on test: nDCG@10, the gain over hybrid-rrf with its 95 %
  paired-bootstrap interval (10,000 draws over the claims), the share of the oracle gap closed,
  the guard's verdict and the training time (searches included); a model the guard refused is
  retrained from the cached examples the same way (``_replica``) to say what it would have done;
- ``diagnose``: on train alone, the prior's weight, each feature group left out, importance;
- ``final``: the variant ``diagnose`` chose, trained on all the train claims, measured on test;
- ``carry-over``: a SciFact-trained model on the 52 standalone questions over ``docs/``
  (``tests/fixtures/eval/conversations.jsonl``, judged by source file and section), 50 chunks.

The candidates and their features are pickled in ``--cache-dir`` (one search per claim, once).
Not a test. Requests go only to the settings' cluster (a loopback URL).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import pickle
import shutil
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from loader.eval.configs import index_alias  # noqa: E402
from loader.eval.indexes import EVAL_TENANT  # noqa: E402
from loader.eval.metrics import _SECTION_MATCH as SECTION_MATCH  # noqa: E402
from loader.eval.metrics import ndcg_at_k, section_ranking  # noqa: E402
from loader.eval.tasks import EvalTask, load_task  # noqa: E402
from loader.models.rerank.features import feature_set_of_width  # noqa: E402
from loader.models.rerank.learned import LearnedReranker  # noqa: E402
from loader.query.request import SearchRequest  # noqa: E402
from loader.query.search import search  # noqa: E402
from loader.resolve import resolve_settings  # noqa: E402
from loader.settings import Settings  # noqa: E402
from loader.train.booster import PRIOR_SCALE, ROUNDS, residual_weight, train_booster  # noqa: E402
from loader.train.examples import Example, collect_examples, searched_features  # noqa: E402
from loader.train.guard import gain_lower_bound  # noqa: E402
from loader.train.learn import LearnRequest, _sample, learn  # noqa: E402
from loader.train.sources import read_source  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_DATASET = ROOT.parent / "shared" / "datasets" / "scifact"
CONVERSATIONS = ROOT / "tests" / "fixtures" / "eval" / "conversations.jsonl"
CANDIDATES = 50  # the rerank depth the issue sets (loader learn's --candidates)
BOOTSTRAP_DRAWS = 10_000  # as guide/models.md's other SciFact intervals
SIZES = (25, 50, 100, 200, 400, 809)
# Seeds per training-set size: the small subsets vary most from one draw to the next.
SEEDS = {25: 5, 50: 5, 100: 3, 200: 3, 400: 2, 809: 1}


def judged(dataset: str, split: str, settings: Settings, prefix: str) -> list[tuple[Any, Any]]:
    """The split's judged claims as ``loader learn`` reads them: (source, question) pairs."""
    source = read_source(
        dataset,
        split=split,
        tenant=EVAL_TENANT,
        index_prefix=prefix,
        index_name=settings.index_name,
        chunk_strategy=settings.chunk_strategy,
    )
    return [(source, question) for question in source.questions]


def claim_texts(dataset: str) -> dict[str, str]:
    """Claim id -> claim text, from the BEIR folder's ``queries.jsonl``."""
    texts = {}
    with (Path(dataset) / "queries.jsonl").open(encoding="utf-8") as file:
        for line in file:
            row = json.loads(line)
            texts[str(row["_id"])] = row["text"]
    return texts


def examples(
    pairs: Sequence[tuple[Any, Any]], settings: Settings, cache: Path | None
) -> dict[str, Example]:
    """Each claim's hybrid-rrf candidates and their features, as ``loader learn --candidates
    50`` collects them (``collect_examples``: the rerank's own lookup), by claim id; pickled to
    ``cache`` so a second command searches nothing."""
    if cache is not None and cache.is_file():
        with cache.open("rb") as file:
            return pickle.load(file)
    from loader.cluster.client import connect

    # The figures' base is hybrid-rrf: `loader learn --mode hybrid-rrf` (no choice of base).
    request = LearnRequest(sources=(), out=Path("unused"), mode="hybrid-rrf")
    client = connect(settings)
    found = {
        e.question_id: e
        for e in collect_examples(
            pairs, settings, client, mode=request.mode, candidates=request.candidates
        )
    }
    if cache is not None:
        cache.parent.mkdir(parents=True, exist_ok=True)
        with cache.open("wb") as file:
            pickle.dump(found, file)
    return found


def ndcg(example: Example, scores: np.ndarray) -> float:
    """nDCG@10 of the documents of ``example``'s candidates ordered by ``scores`` (each
    document at its best chunk, as ``loader eval`` scores a run)."""
    order = np.argsort(-scores, kind="stable")
    return ndcg_at_k([example.keys[i] for i in order], example.relevant, 10)


def fused_scores(example: Example) -> np.ndarray:
    """The candidates' own order: hybrid-rrf alone."""
    return -np.arange(len(example.labels), dtype=float)


def oracle_scores(example: Example, depth: int | None = None) -> np.ndarray:
    """The same candidates, relevant first by grade (ties in fused order): the best any
    reranker of these candidates (of the first ``depth`` of them) can do."""
    labels = example.labels
    if depth is not None:
        labels = np.where(np.arange(len(labels)) < depth, labels, 0.0)
    return labels * len(labels) + fused_scores(example)


def model_scores(
    booster: Any, prior_scale: float, example: Example, weight: float = 1.0
) -> np.ndarray:
    """The learned reranker's score, as ``LearnedReranker.score`` computes it (``weight``: its
    ``residual_weight``)."""
    return prior_scale * example.prior + weight * booster.predict(example.features, num_threads=1)


def per_claim(test: Mapping[str, Example], scorer: Callable[[Example], np.ndarray]) -> np.ndarray:
    """nDCG@10 per test claim (sorted by id: every array pairs the same claims)."""
    return np.array([ndcg(test[qid], scorer(test[qid])) for qid in sorted(test)])


def gain_interval(
    baseline: np.ndarray, other: np.ndarray, seed: int = 0
) -> tuple[float, float, float]:
    """The mean gain of ``other`` over ``baseline`` and its 95 % interval: a paired bootstrap over
    the claims (both scored on the same resampled claims), the percentile interval."""
    differences = other - baseline
    rng = np.random.default_rng(seed)
    picks = rng.integers(0, len(differences), size=(BOOTSTRAP_DRAWS, len(differences)))
    means = differences[picks].mean(axis=1)
    low, high = np.quantile(means, [0.025, 0.975])
    return float(differences.mean()), float(low), float(high)


def closed_share(baseline: float, model: float, best: float) -> float:
    """The share of the gap from hybrid-rrf to the oracle that the model closes."""
    return (model - baseline) / (best - baseline) if best > baseline else 0.0


def harness_arguments(parser: argparse.ArgumentParser, index_prefix: str = "sfa") -> None:
    """The options every script over these cached candidates takes: where the split and the
    index are, where the candidates are cached, the boosting rounds and the JSON output."""
    parser.add_argument("--dataset", default=str(DEFAULT_DATASET), help="SciFact BEIR folder.")
    parser.add_argument("--index-prefix", default=index_prefix, help="The eval indices' prefix.")
    parser.add_argument("--url", default="http://127.0.0.1:9200", help="OpenSearch (loopback).")
    parser.add_argument("--cache-dir", default="/tmp/learned-rerank", help="Cached candidates.")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="Boosting rounds per model.")
    parser.add_argument("--out", type=Path, help="Write the figures as JSON here too.")


def print_figures(figures: Any, out: Path | None) -> None:
    """Print the figures as JSON, and write them to ``out`` too when given."""
    text = json.dumps(figures, indent=2)
    if out:
        Path(out).write_text(text + "\n", encoding="utf-8")
    print(text)


def _settings(args: argparse.Namespace) -> Settings:
    settings, _ = resolve_settings(overrides={"opensearch_url": getattr(args, "url", None)})
    return settings.replace(query_log="off")


def _test_examples(args: argparse.Namespace, settings: Settings) -> dict[str, Example]:
    pairs = judged(args.dataset, "test", settings, args.index_prefix)
    found = examples(pairs, settings, _cache(args, "test"))
    missing = len(pairs) - len(found)
    if missing:
        raise SystemExit(f"{missing} test claims found no candidate; every claim must be scored")
    return found


def _cache(args: argparse.Namespace, split: str) -> Path:
    """The pickle of a split's examples: named after the index and the features' set (both
    readers' when the settings have two: ``searched_features``), so features computed
    differently are collected afresh."""
    features = _features(_settings(args))
    name = f"learned-rerank-{args.index_prefix}-{split}-{features.fingerprint()}.pickle"
    return Path(args.cache_dir) / name


def _features(settings: Settings) -> Any:
    """The features the settings' hybrid-rrf search gives (both readers' with two)."""
    from loader.models.readers import second_reader

    second = second_reader(settings.embedding_model, settings.second_embedding_model)
    return searched_features("hybrid-rrf", second)


def collect(args: argparse.Namespace) -> dict[str, Any]:
    """Search every train and test claim once and cache their candidates and features (what
    the other commands read), nothing measured."""
    settings = _settings(args)
    counts = {}
    for split in ("train", "test"):
        pairs = judged(args.dataset, split, settings, args.index_prefix)
        counts[split] = len(examples(pairs, settings, _cache(args, split)))
        print(f"{split}: {counts[split]} claims cached", file=sys.stderr, flush=True)
    features = _features(settings)
    return {"claims": counts, "readers": features.readers, "features": list(features.names)}


def headroom(args: argparse.Namespace) -> dict[str, Any]:
    """Test nDCG@10 of hybrid-rrf's 50 candidates and of their oracle order."""
    test = _test_examples(args, _settings(args))
    base = per_claim(test, fused_scores)
    best = per_claim(test, oracle_scores)
    best_50 = per_claim(test, lambda example: oracle_scores(example, CANDIDATES))
    counts = [len(example.labels) for example in test.values()]
    return {
        "index_prefix": args.index_prefix,
        "claims": len(test),
        "candidates_median": float(np.median(counts)),
        "hybrid_rrf_ndcg@10": round(float(base.mean()), 4),
        "oracle_ndcg@10": round(float(best.mean()), 4),
        "oracle_first_50_ndcg@10": round(float(best_50.mean()), 4),
        "claims_with_a_relevant_candidate": round(
            float(np.mean([example.labels.max() > 0 for example in test.values()])), 4
        ),
    }


def _replica(request: LearnRequest, pairs: list, train: Mapping[str, Example]) -> Any:
    """The booster ``learn`` trains for ``request``, from cached examples: the same seeded
    sample (``loader.train.learn``'s own helper), every sampled question, the same
    ``train_booster``. For a model the guard refused (nothing written), to say what it would
    have done on test."""
    source = pairs[0][0]
    fitted = [train[q.id] for _s, q in _sample([source], request) if q.id in train]
    useful = sum(bool(example.labels.max() > 0) for example in fitted)
    return train_booster(fitted, request), residual_weight(useful)


def one_run(
    args: argparse.Namespace, settings: Settings, size: int, seed: int, context: dict[str, Any]
) -> dict[str, Any]:
    """``loader learn --max-questions size --seed seed`` (the library function), its guard's
    verdict, and the model measured on test (the model the guard kept; else its replica)."""
    out = Path(args.model_dir) / f"{args.index_prefix}-{size}-{seed}"
    shutil.rmtree(out, ignore_errors=True)
    request = LearnRequest(
        sources=(args.dataset,),
        out=out,
        index_prefix=args.index_prefix,
        mode="hybrid-rrf",  # the figures' base (no choice among the fusions)
        max_questions=None if size >= len(context["pairs"]) else size,
        seed=seed,
        rounds=args.rounds,
    )
    result = learn(request, settings)
    if result.adopted:
        model = LearnedReranker(result.out)  # <out>/eval/: a BEIR folder's tenant
        booster, scale, weight = model.booster, model.prior_scale, model.residual_weight
    else:
        (booster, weight), scale = (
            _replica(request, context["pairs"], context["train"]),
            PRIOR_SCALE,
        )
    test, base, best = context["test"], context["base"], context["best"]
    scores = per_claim(test, lambda example: model_scores(booster, scale, example, weight))
    gain, low, high = gain_interval(base, scores)
    return {
        "size": size,
        "seed": seed,
        "adopted": result.adopted,
        "guard": result.metrics,
        "train_seconds": round(result.seconds, 1),
        "model_test_ndcg@10": round(float(scores.mean()), 4),
        "model_gain": [round(gain, 4), round(low, 4), round(high, 4)],
        "served_test_ndcg@10": round(float((scores if result.adopted else base).mean()), 4),
        "closed_share": round(closed_share(base.mean(), scores.mean(), best.mean()), 3),
        "trees": int(booster.num_trees()),
    }


def curve(args: argparse.Namespace) -> dict[str, Any]:
    """The learning curve: every size and seed of ``SIZES`` / ``SEEDS``, measured on test."""
    settings = _settings(args)
    test = _test_examples(args, settings)
    pairs = judged(args.dataset, "train", settings, args.index_prefix)
    context = {
        "pairs": pairs,
        "train": examples(pairs, settings, _cache(args, "train")),
        "test": test,
        "base": per_claim(test, fused_scores),
        "best": per_claim(test, oracle_scores),
    }
    runs = []
    sizes = [int(size) for size in args.sizes.split(",")]
    for size in sizes:
        for seed in range(args.seeds or SEEDS.get(size, 1)):
            runs.append(one_run(args, settings, size, seed, context))
            print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    return {
        "index_prefix": args.index_prefix,
        "embedding_model": settings.embedding_model,
        "test_claims": len(test),
        "hybrid_rrf_ndcg@10": round(float(context["base"].mean()), 4),
        "oracle_ndcg@10": round(float(context["best"].mean()), 4),
        "runs": runs,
    }


def _folds(train: Mapping[str, Example], folds: int) -> list[tuple[list, list]]:
    """Seeded ``folds``-fold splits of the train claims: (fitted, scored) example lists."""
    ids = sorted(train)
    np.random.default_rng(0).shuffle(ids)
    parts = [ids[i::folds] for i in range(folds)]
    return [
        (
            [train[q] for j, part in enumerate(parts) if j != i for q in part],
            [train[q] for q in parts[i]],
        )
        for i in range(folds)
    ]


def cross_validated(
    train: Mapping[str, Example],
    prior_scale: float,
    dropped: Sequence[int] = (),
    folds: int = 5,
    rounds: int = ROUNDS,
) -> tuple[float, float]:
    """Train-only: the mean nDCG@10 of hybrid-rrf and of ``train_booster`` (``rounds``
    rounds) over ``folds`` folds of the 809 train claims (each claim scored by the model that
    did not see it), at ``prior_scale`` and with the ``dropped`` feature columns zeroed."""
    request = LearnRequest(sources=(), out=Path("unused"), rounds=rounds)

    def masked(example: Example) -> Example:
        if not dropped:
            return example
        features = example.features.copy()
        features[:, list(dropped)] = 0.0
        return dataclasses.replace(example, features=features)

    base, model = [], []
    for fitted, scored in _folds(train, folds):
        booster = train_booster([masked(e) for e in fitted], request, prior_scale=prior_scale)
        for example in map(masked, scored):
            base.append(ndcg(example, fused_scores(example)))
            model.append(ndcg(example, model_scores(booster, prior_scale, example)))
    return float(np.mean(base)), float(np.mean(model))


# Feature groups for the ablation, by name prefix.
GROUPS = ("content_", "heading_", "vector_", "fused_", "_overlap", "second_vector_")


def diagnose(args: argparse.Namespace) -> dict[str, Any]:
    """Why the model gains what it gains, measured on train alone (5-fold cross-validation):
    the prior's weight, each feature group left out, and the full model's feature importance."""
    settings = _settings(args)
    pairs = judged(args.dataset, "train", settings, args.index_prefix)
    train = examples(pairs, settings, _cache(args, "train"))
    figures: dict[str, Any] = {"train_claims": len(train), "prior_scale": {}, "without": {}}
    for scale in (0.0, 1.0, 2.0, PRIOR_SCALE):
        base, model = cross_validated(train, scale, rounds=args.rounds)
        figures["prior_scale"][str(scale)] = [round(base, 4), round(model, 4)]
        print(f"prior {scale}: {base:.4f} -> {model:.4f}", file=sys.stderr, flush=True)
    names = feature_set_of_width(next(iter(train.values())).features.shape[1]).names
    for group in GROUPS:
        columns = [i for i, name in enumerate(names) if group in name]
        base, model = cross_validated(train, PRIOR_SCALE, columns, rounds=args.rounds)
        figures["without"][group] = round(model, 4)
    request = LearnRequest(sources=(), out=Path("unused"), rounds=args.rounds)
    booster = train_booster(list(train.values()), request)
    gains = booster.feature_importance("gain")
    ranked = sorted(zip(names, gains, strict=True), key=lambda pair: -pair[1])
    total = float(sum(gains)) or 1.0
    figures["importance"] = [[name, round(float(g) / total, 3)] for name, g in ranked[:10]]
    return figures


def final(args: argparse.Namespace) -> dict[str, Any]:
    """Test, once: ``train_booster`` on all the train claims at the prior weight that
    ``diagnose``'s cross-validation chose (``--prior-scale``), without the guard's hold-out."""
    settings = _settings(args)
    pairs = judged(args.dataset, "train", settings, args.index_prefix)
    train = examples(pairs, settings, _cache(args, "train"))
    test = _test_examples(args, settings)
    request = LearnRequest(sources=(), out=Path("unused"), rounds=args.rounds)
    booster = train_booster(list(train.values()), request, prior_scale=args.prior_scale)
    base, best = per_claim(test, fused_scores), per_claim(test, oracle_scores)
    scores = per_claim(test, lambda e: model_scores(booster, args.prior_scale, e))
    gain, low, high = gain_interval(base, scores)
    return {
        "prior_scale": args.prior_scale,
        "trees": int(booster.num_trees()),
        "hybrid_rrf_ndcg@10": round(float(base.mean()), 4),
        "model_test_ndcg@10": round(float(scores.mean()), 4),
        "gain": [round(gain, 4), round(low, 4), round(high, 4)],
        "closed_share": round(closed_share(base.mean(), scores.mean(), best.mean()), 3),
    }


def standalone_questions(conversations: Path, out: Path) -> Path:
    """The conversations file's standalone questions as a questions file (no history): the
    carry-over set, judged by source file and section."""
    with conversations.open(encoding="utf-8") as lines, out.open("w", encoding="utf-8") as file:
        for line in lines:
            record = json.loads(line)
            question = {"id": record["id"], "question": record["standalone"]}
            question.update({k: record[k] for k in ("source", "heading_path") if k in record})
            file.write(json.dumps(question) + "\n")
    return out


def section_ndcgs(task: EvalTask, settings: Settings, *, rerank: bool) -> np.ndarray:
    """Per question, the section-level nDCG@10 of its top ``CANDIDATES`` hybrid-rrf chunks
    (reranked when asked) through ``loader.query.search``: a chunk is right when it sits in the
    question's source file under its heading path (``loader eval``'s section metrics)."""
    values = []
    for query in task.queries:
        request = SearchRequest(
            question=query.text,
            tenant=task.tenant,
            mode="hybrid-rrf",
            rerank=rerank,
            k=CANDIDATES,
            candidates=CANDIDATES,
            exact_match=settings.exact_match,
        )
        result = search(request, settings)
        if rerank and not result.reranked:
            raise SystemExit(f"{query.id}: the search was not reranked")
        hits = [(h.chunk_id, h.source, h.title, h.heading_path) for h in result.hits]
        values.append(ndcg_at_k(section_ranking(hits, query), {SECTION_MATCH: 1}, 10))
    return np.array(values)


def carry_over(args: argparse.Namespace) -> dict[str, Any]:
    """A SciFact-trained model on the standalone questions over ``docs/`` (an index ``loader
    eval`` built: ``<prefix>-docs-<strategy>``), and what the guard's rule says of it there."""
    if not args.model:
        raise SystemExit("carry-over needs --model (a folder `loader learn` wrote)")
    settings = _settings(args)
    questions = standalone_questions(CONVERSATIONS, Path(args.cache_dir) / "docs-standalone.jsonl")
    task = load_task(questions, docs=ROOT / "docs")
    settings = settings.replace(index_name=index_alias(args.docs_prefix, task.name, "structure"))
    base = section_ndcgs(task, settings, rerank=False)
    # SciFact's model (tenant eval, or whichever it records) lent to the docs' tenant:
    # carry-over is what it measures.
    from loader.models.rerank.tenants import recorded_facts

    owner = recorded_facts(Path(args.model))["tenant"] or EVAL_TENANT
    learned = settings.replace(
        rerank_backend="learned",
        learned_reranker=args.model,
        learned_reranker_tenants=f"{task.tenant}={owner}",
    )
    model = section_ndcgs(task, learned, rerank=True)
    gain, low, high = gain_interval(base, model)
    lower = gain_lower_bound(base, model, seed=0)
    return {
        "index": settings.index_name,
        "questions": len(task.queries),
        "model": args.model,
        "hybrid_rrf_section_ndcg@10": round(float(base.mean()), 4),
        "learned_section_ndcg@10": round(float(model.mean()), 4),
        "gain": [round(gain, 4), round(low, 4), round(high, 4)],
        "guard_lower_bound": round(lower, 4),
        "guard_would_keep": bool(gain > 0 and lower > 0),
        "questions_better_worse": [int((model > base).sum()), int((model < base).sum())],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "command", choices=["collect", "headroom", "curve", "diagnose", "final", "carry-over"]
    )
    parser.add_argument("--index-prefix", default="sfa", help="The eval indices' prefix.")
    parser.add_argument("--cache-dir", default="/tmp", help="Where the candidates are pickled.")
    parser.add_argument("--model-dir", default="/tmp/learned-rerank", help="Trained models.")
    parser.add_argument("--sizes", default=",".join(map(str, SIZES)), help="Training sizes.")
    parser.add_argument("--model", default=None, help="carry-over: the SciFact-trained model.")
    parser.add_argument("--docs-prefix", default="sfc", help="carry-over: the docs/ index prefix.")
    parser.add_argument("--prior-scale", type=float, default=PRIOR_SCALE, help="final: prior.")
    parser.add_argument("--seeds", type=int, default=None, help="Seeds per size (default: SEEDS).")
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="Boosting rounds per model.")
    parser.add_argument("--url", default=None, help="OpenSearch URL (default: the settings').")
    parser.add_argument("--dataset", default=str(DEFAULT_DATASET), help="SciFact BEIR folder.")
    parser.add_argument("--out", default=None, help="Write the figures as JSON here too.")
    args = parser.parse_args()
    commands = {
        "collect": collect,
        "headroom": headroom,
        "curve": curve,
        "diagnose": diagnose,
        "final": final,
        "carry-over": carry_over,
    }
    print_figures(commands[args.command](args), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
