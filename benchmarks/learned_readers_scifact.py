"""The learned reranker over two readers on SciFact (issue #53, item 5): both readers' features,
chosen on the 809 train claims, the test split read once at the end.

The index holds both readers (all-MiniLM-L6-v2 in ``embedding``, bge-small-en-v1.5 in
``second_embedding``); the base is the default two-reader hybrid-rrf. The candidates and their
features are those ``loader learn --candidates 50`` collects (``collect_examples``: the
rerank's own lookup, both readers' cosine), cached by ``learned_rerank_scifact.py collect``.

- ``choose`` (train only): 5-fold cross-validation over the 809 train claims, as ``loader
  learn``'s guard runs it (``out_of_fold_ndcgs``, ``verdict_figures``), of the model over all
  the features (both readers' with two: ``all_features``) and over the first reader's alone
  (the same candidates, the first 24 columns), and the full model's feature importance (gain
  share);
- ``learn`` (train only): ``loader learn`` itself (the library function) on the 809 train claims,
  its base chosen by cross-validation among the hybrid modes unless ``--mode``; writes the
  model when the guard keeps it and the result as JSON;
- ``second-stage`` (train only): label-free reorderings of the base's candidates by the second
  reader's cosine (RRF of the fused rank with that cosine's rank, the fused score's min-max plus
  that cosine's), what "fuse bge's cosine over the candidates" gives without a judged question;
- ``test`` (read once): test nDCG@10 over the base's candidates of the base, of the model
  ``learn`` wrote (or its replica when refused), of the one-reader-features model trained the
  same way (the ablation), and of the oracle; gains with 95 % paired-bootstrap intervals
  (10,000 draws over the 300 claims).

    python3 benchmarks/learned_rerank_scifact.py collect --index-prefix eval --url URL
    python3 benchmarks/learned_readers_scifact.py choose --index-prefix eval --url URL
    python3 benchmarks/learned_readers_scifact.py learn --index-prefix eval --url URL
    python3 benchmarks/learned_readers_scifact.py second-stage --index-prefix eval --url URL
    python3 benchmarks/learned_readers_scifact.py test --index-prefix eval --url URL

Not a test. Requests go only to the settings' cluster (a loopback URL).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import shutil
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from learned_rerank_scifact import (  # noqa: E402
    _cache,
    _settings,
    closed_share,
    examples,
    fused_scores,
    gain_interval,
    harness_arguments,
    judged,
    model_scores,
    oracle_scores,
    per_claim,
    print_figures,
)

from loader.models.rerank.features import ONE_READER, feature_set_of_width  # noqa: E402
from loader.models.rerank.learned import LearnedReranker  # noqa: E402
from loader.train.booster import (  # noqa: E402
    PRIOR_SCALE,
    out_of_fold_ndcgs,
    residual_weight,
    train_booster,
    verdict_figures,
)
from loader.train.examples import Example  # noqa: E402
from loader.train.learn import LearnRequest, learn  # noqa: E402

ONE_READER_COLUMNS = len(ONE_READER.names)


def one_reader(example: Example) -> Example:
    """The same candidates with the first reader's features alone (a two-reader row begins
    with the one-reader row)."""
    return dataclasses.replace(example, features=example.features[:, :ONE_READER_COLUMNS])


def _cached(args: argparse.Namespace, split: str) -> dict[str, Example]:
    settings = _settings(args)
    pairs = judged(args.dataset, split, settings, args.index_prefix)
    return examples(pairs, settings, _cache(args, split))


def _request(args: argparse.Namespace, **more: Any) -> LearnRequest:
    return LearnRequest(sources=(), out=Path("unused"), rounds=args.rounds, **more)


def choose(args: argparse.Namespace) -> dict[str, Any]:
    """Train only: the cross-validated gain of each feature set, and the importance."""
    train = _cached(args, "train")
    ordered = [train[q] for q in sorted(train)]
    features = feature_set_of_width(ordered[0].features.shape[1])
    figures: dict[str, Any] = {
        "train_claims": len(ordered),
        "folds": args.folds,
        "readers": features.readers,  # 1: the settings have no second reader (no ablation)
    }
    for name, rows in (
        ("all_features", ordered),
        ("one_reader", [one_reader(e) for e in ordered]),
    ):
        fused, learned = out_of_fold_ndcgs(rows, _request(args), args.folds)
        verdict = verdict_figures(fused, learned, seed=0)
        figures[name] = {k: round(v, 4) for k, v in verdict.items()}
        print(name, json.dumps(figures[name]), file=sys.stderr, flush=True)
    booster = train_booster(ordered, _request(args))
    gains = booster.feature_importance("gain")
    total = float(sum(gains)) or 1.0
    ranked = sorted(zip(features.names, gains, strict=True), key=lambda pair: -pair[1])
    figures["importance"] = [[name, round(float(g) / total, 3)] for name, g in ranked]
    second = sum(float(g) for n, g in zip(features.names, gains, strict=True) if "second" in n)
    figures["second_reader_importance_share"] = round(second / total, 3)
    return figures


def _rank(scores: np.ndarray) -> np.ndarray:
    """1-based rank of each candidate by ``scores``, best first (ties in candidate order)."""
    ranks = np.empty(len(scores))
    ranks[np.argsort(-scores, kind="stable")] = np.arange(1, len(scores) + 1)
    return ranks


def second_stage(args: argparse.Namespace) -> dict[str, Any]:
    """Train only: the candidates reordered with the second reader's cosine and no label, each
    against the base with its 95 % paired-bootstrap interval."""
    train = _cached(args, "train")
    first = next(iter(train.values()))
    names = list(feature_set_of_width(first.features.shape[1]).names)
    if "second_vector_minmax" not in names:  # the settings have no second reader
        return {"train_claims": len(train), "readers": 1}
    column = {name: names.index(name) for name in ("fused_minmax", "second_vector_minmax")}

    def second(example: Example) -> np.ndarray:
        return np.nan_to_num(example.features[:, column["second_vector_minmax"]])

    def rrf_with_second(constant: int) -> Any:
        def scores(example: Example) -> np.ndarray:
            fused_rank = np.arange(1, len(example.labels) + 1)
            return 1 / (constant + fused_rank) + 1 / (constant + _rank(second(example)))

        return scores

    def minmax_sum(example: Example) -> np.ndarray:
        return np.nan_to_num(example.features[:, column["fused_minmax"]]) + second(example)

    base = per_claim(train, fused_scores)
    figures: dict[str, Any] = {"train_claims": len(train), "base_ndcg@10": round(base.mean(), 4)}
    for name, scorer in (
        ("second_reader_alone", second),
        ("rrf_20_fused_and_second", rrf_with_second(20)),
        ("rrf_60_fused_and_second", rrf_with_second(60)),
        ("fused_minmax_plus_second_minmax", minmax_sum),
    ):
        scores = per_claim(train, scorer)
        gain, low, high = gain_interval(base, scores)
        figures[name] = {
            "ndcg@10": round(float(scores.mean()), 4),
            "gain": [round(gain, 4), round(low, 4), round(high, 4)],
        }
    return figures


def learn_command(args: argparse.Namespace) -> dict[str, Any]:
    """Train only: ``loader learn`` on all the train claims (the guard, the base choice)."""
    settings = _settings(args)
    out = Path(args.model_dir)
    shutil.rmtree(out, ignore_errors=True)
    request = LearnRequest(
        sources=(args.dataset,),
        out=out,
        index_prefix=args.index_prefix,
        mode=args.mode,
        rounds=args.rounds,
    )
    result = learn(request, settings, on_event=lambda line: print(line, file=sys.stderr))
    return result.to_dict()


def _scores(test: Mapping[str, Example], booster: Any, weight: float, rows: Any = None) -> Any:
    rows = rows or (lambda example: example)
    return per_claim(
        test, lambda example: model_scores(booster, PRIOR_SCALE, rows(example), weight)
    )


def test_command(args: argparse.Namespace) -> dict[str, Any]:
    """Test, once: the base, the model ``learn`` wrote (else its replica), the one-reader
    ablation, the oracle."""
    learnt = json.loads(Path(args.learn_result).read_text(encoding="utf-8"))
    base_mode = learnt["provenance"]["base"]["chosen"]
    if base_mode != "hybrid-rrf":
        raise SystemExit(f"learn chose {base_mode}: collect its test candidates first")
    train, test = _cached(args, "train"), _cached(args, "test")
    ordered = [train[q] for q in sorted(train)]
    weight = residual_weight(sum(bool(e.labels.max() > 0) for e in ordered))
    if learnt["adopted"]:
        model = LearnedReranker(Path(learnt["out"]))
        booster, weight = model.booster, model.residual_weight
    else:
        booster = train_booster(ordered, _request(args))
    ablation = train_booster([one_reader(e) for e in ordered], _request(args))
    base, best = per_claim(test, fused_scores), per_claim(test, oracle_scores)
    two = _scores(test, booster, weight)
    one = _scores(test, ablation, weight, one_reader)
    figures: dict[str, Any] = {
        "test_claims": len(test),
        "base": base_mode,
        "guard": {"adopted": learnt["adopted"], "verdict": learnt["reason"]},
        "base_ndcg@10": round(float(base.mean()), 4),
        "oracle_ndcg@10": round(float(best.mean()), 4),
    }
    for name, scores in (("all_features", two), ("one_reader", one)):
        gain, low, high = gain_interval(base, scores)
        figures[name] = {
            "test_ndcg@10": round(float(scores.mean()), 4),
            "gain": [round(gain, 4), round(low, 4), round(high, 4)],
            "closed_share": round(closed_share(base.mean(), scores.mean(), best.mean()), 3),
        }
    gain, low, high = gain_interval(one, two)
    figures["readers"] = feature_set_of_width(ordered[0].features.shape[1]).readers
    figures["all_over_one_reader"] = [round(gain, 4), round(low, 4), round(high, 4)]
    return figures


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("choose", "learn", "second-stage", "test"))
    harness_arguments(parser, index_prefix="eval")
    parser.add_argument("--model-dir", default="/tmp/learned-rerank/two-readers")
    parser.add_argument("--mode", default=None, help="learn: the base (default: CV's choice)")
    parser.add_argument("--learn-result", default=None, help="test: learn's JSON")
    parser.add_argument("--folds", type=int, default=5)
    args = parser.parse_args(argv)
    commands = {
        "choose": choose,
        "learn": learn_command,
        "second-stage": second_stage,
        "test": test_command,
    }
    figures = commands[args.command](args)
    print_figures(figures, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
