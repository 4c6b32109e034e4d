"""The learned reranker's guard chosen on SciFact's train claims alone, then measured on test once
(issue #53, item 1).

``choose`` (train only): the guard is simulated on seeded subsets of the 809 train claims, as a
team that judged that many questions would run it (``loader learn``: ``folds``-fold
cross-validation over the subset, the model kept when the one-sided lower bound of its
out-of-fold gain over fusion is above zero, then trained on the whole subset). Each verdict is
scored on the train claims the subset left out: the model's true gain there, with its 95 %
interval. A setting (folds, confidence) is safe when no model it keeps is significantly below
fusion on the left-out claims; among the safe ones, the one that serves the most gain wins.

``curve`` (test, read once, with the chosen setting): 25 / 50 / 100 / 200 / 400 / 809 claims x 5
seeds; for each, the guard's verdict, the model's test nDCG@10 and gain over hybrid-rrf with its
95 % paired-bootstrap interval (10,000 draws over the 300 test claims), and what is served.

Both read the candidates ``loader learn --candidates 50`` collects (``collect_examples``), cached
by ``learned_rerank_scifact.py``'s ``examples`` (one search per claim, once), and run the very
functions ``loader learn`` runs (``cross_validated_guard``, ``train_booster``,
``residual_weight``) on them.

    python3 benchmarks/learned_guard_scifact.py choose --index-prefix sfa --out choose.json
    python3 benchmarks/learned_guard_scifact.py curve --index-prefix sfa --folds 5 \\
        --confidence 0.95 --out curve.json

Not a test. Requests go only to the settings' cluster (a loopback URL), and only when the
candidates are not cached yet.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from learned_rerank_scifact import (  # noqa: E402
    _cache,
    _settings,
    examples,
    fused_scores,
    gain_interval,
    harness_arguments,
    judged,
    model_scores,
    per_claim,
    print_figures,
)

from loader.train.booster import (  # noqa: E402
    PRIOR_SCALE,
    cross_validated_guard,
    out_of_fold_ndcgs,
    residual_weight,
    train_booster,
)
from loader.train.examples import Example  # noqa: E402
from loader.train.guard import gain_lower_bound  # noqa: E402
from loader.train.learn import LearnRequest  # noqa: E402

CHOOSE_SIZES = (25, 50, 100, 200, 400)
CURVE_SIZES = (25, 50, 100, 200, 400, 809)
FOLDS = (3, 5, 10)
CONFIDENCES = (0.8, 0.9, 0.95, 0.975)


def kept_model(judged_examples: Sequence[Example], seed: int, rounds: int) -> tuple[Any, float]:
    """The model ``loader learn`` writes for these judged questions: trained on all of them,
    with its residual weight."""
    request = LearnRequest(sources=(), out=Path("unused"), seed=seed, rounds=rounds)
    booster = train_booster(judged_examples, request)
    useful = sum(bool(example.labels.max() > 0) for example in judged_examples)
    return booster, residual_weight(useful)


def true_gain(
    booster: Any, weight: float, scored: Mapping[str, Example]
) -> tuple[float, float, float]:
    """The model's gain over fusion on ``scored`` claims, with its 95 % interval."""
    base = per_claim(scored, fused_scores)
    model = per_claim(scored, lambda e: model_scores(booster, PRIOR_SCALE, e, weight))
    return gain_interval(base, model)


def choose(args: argparse.Namespace) -> dict[str, Any]:
    """Train only: every (folds, confidence) simulated on subsets, scored on the rest."""
    settings = _settings(args)
    pairs = judged(args.dataset, "train", settings, args.index_prefix)
    train = examples(pairs, settings, _cache(args, "train"))
    ids = sorted(train)
    runs = []
    for size in args.sizes or CHOOSE_SIZES:
        for seed in range(args.seeds):
            picked = list(np.random.default_rng(1000 + seed).choice(ids, size, replace=False))
            rest = {q: train[q] for q in ids if q not in set(picked)}
            subset = [train[q] for q in picked]
            booster, weight = kept_model(subset, seed, args.rounds)
            gain, low, high = true_gain(booster, weight, rest)
            for folds in args.fold_choices:
                request = LearnRequest(
                    sources=(), out=Path("unused"), folds=folds, seed=seed, rounds=args.rounds
                )
                fused, learned = out_of_fold_ndcgs(subset, request, folds)
                bounds = {
                    str(c): round(gain_lower_bound(fused, learned, seed, c), 5) for c in CONFIDENCES
                }
                runs.append(
                    {
                        "size": size,
                        "seed": seed,
                        "folds": folds,
                        "cv_gain": round(float((learned - fused).mean()), 5),
                        "bounds": bounds,
                        "rest_gain": [round(gain, 4), round(low, 4), round(high, 4)],
                    }
                )
                print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    table = score_settings(runs, args.fold_choices)
    return {"train_claims": len(ids), "runs": runs, "settings": table}


def score_settings(runs: list[dict[str, Any]], fold_choices: Sequence[int]) -> list[dict[str, Any]]:
    """Per (folds, confidence): models kept per size, kept models significantly below fusion on
    the left-out claims (upper end of the interval below zero), kept models below zero at all,
    and the mean gain served per size (a refused model serves fusion: 0)."""
    table = []
    for folds in fold_choices:
        for confidence in CONFIDENCES:
            mine = [r for r in runs if r["folds"] == folds]
            kept = [r for r in mine if r["cv_gain"] > 0 and r["bounds"][str(confidence)] > 0]
            served = {}
            for size in sorted({r["size"] for r in mine}):
                at = [r for r in mine if r["size"] == size]
                gains = [r["rest_gain"][0] if r in kept else 0.0 for r in at]
                served[str(size)] = [
                    sum(r in kept for r in at),
                    len(at),
                    round(float(np.mean(gains)), 4),
                ]
            table.append(
                {
                    "folds": folds,
                    "confidence": confidence,
                    "kept": len(kept),
                    "kept_significantly_below": sum(r["rest_gain"][2] < 0 for r in kept),
                    "kept_below_zero": sum(r["rest_gain"][0] < 0 for r in kept),
                    "served_gain_by_size": served,
                    "served_gain_total": round(sum(v[2] for v in served.values()), 4),
                }
            )
    return table


def score(args: argparse.Namespace) -> dict[str, Any]:
    """The settings' table over the runs of several ``choose`` outputs (sizes run apart), and
    the setting chosen: among the safe ones -- no kept model significantly below fusion on the
    left-out claims, and the kept models' mean gain there above zero at every size (the issue's
    bar, read on train) -- the one that serves the most gain summed over the sizes."""
    runs = [run for path in args.runs_from for run in json.loads(path.read_text())["runs"]]
    table = score_settings(runs, args.fold_choices)
    for row in table:
        by_size = row["served_gain_by_size"].values()
        row["safe"] = row["kept_significantly_below"] == 0 and all(
            served > 0 for kept, _, served in by_size if kept
        )
    safe = [row for row in table if row["safe"]]
    chosen = max(safe, key=lambda row: row["served_gain_total"]) if safe else None
    return {"runs": len(runs), "settings": table, "chosen": chosen}


def curve(args: argparse.Namespace) -> dict[str, Any]:
    """Test, once, with the chosen guard: every size x seed, kept or not, and what is served."""
    settings = _settings(args)
    pairs = judged(args.dataset, "train", settings, args.index_prefix)
    train = examples(pairs, settings, _cache(args, "train"))
    test_pairs = judged(args.dataset, "test", settings, args.index_prefix)
    test = examples(test_pairs, settings, _cache(args, "test"))
    base = per_claim(test, fused_scores)
    ids = sorted(train)
    runs = []
    for size in args.sizes or CURVE_SIZES:
        for seed in range(args.seeds):
            picked = (
                ids
                if size >= len(ids)
                else list(np.random.default_rng(2000 + seed).choice(ids, size, replace=False))
            )
            subset = [train[q] for q in picked]
            request = LearnRequest(
                sources=(), out=Path("unused"), folds=args.folds, seed=seed, rounds=args.rounds
            )
            figures = cross_validated_guard(subset, request, args.folds, None, args.confidence)
            kept = figures["gain"] > 0 and figures["gain_lower_bound"] > 0
            booster = train_booster(subset, request)
            weight = residual_weight(sum(bool(e.labels.max() > 0) for e in subset))
            scores = per_claim(
                test, lambda e, b=booster, w=weight: model_scores(b, PRIOR_SCALE, e, w)
            )
            gain, low, high = gain_interval(base, scores)
            served = scores if kept else base
            runs.append(
                {
                    "size": len(subset),
                    "seed": seed,
                    "kept": kept,
                    "cv_gain": round(figures["gain"], 4),
                    "cv_lower_bound": round(figures["gain_lower_bound"], 4),
                    "model_test_ndcg@10": round(float(scores.mean()), 4),
                    "model_gain": [round(gain, 4), round(low, 4), round(high, 4)],
                    "served_test_ndcg@10": round(float(served.mean()), 4),
                }
            )
            print(json.dumps(runs[-1]), file=sys.stderr, flush=True)
    return {
        "folds": args.folds,
        "confidence": args.confidence,
        "test_claims": len(test),
        "hybrid_rrf_ndcg@10": round(float(base.mean()), 4),
        "runs": runs,
        "by_size": summary(runs, base),
    }


def summary(runs: list[dict[str, Any]], base: np.ndarray) -> dict[str, Any]:
    """Per size: models kept, mean served test nDCG@10, the kept models' mean test gain, and
    kept models significantly below fusion."""
    table = {}
    for size in dict.fromkeys(r["size"] for r in runs):
        at = [r for r in runs if r["size"] == size]
        kept = [r for r in at if r["kept"]]
        table[str(size)] = {
            "kept": f"{len(kept)} of {len(at)}",
            "served_test_ndcg@10": round(float(np.mean([r["served_test_ndcg@10"] for r in at])), 4),
            "kept_mean_gain": round(float(np.mean([r["model_gain"][0] for r in kept])), 4)
            if kept
            else None,
            "kept_significantly_below": sum(r["model_gain"][2] < 0 for r in kept),
        }
    return table


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("command", choices=("choose", "score", "curve"))
    harness_arguments(parser)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--folds", type=int, default=5, help="curve: the guard's folds")
    parser.add_argument(
        "--sizes",
        type=lambda text: [int(part) for part in text.split(",")],
        default=None,
        help="choose: the subset sizes (default: 25,50,100,200,400)",
    )
    parser.add_argument(
        "--runs-from",
        type=Path,
        nargs="*",
        default=(),
        help="score: the JSON files of earlier choose runs, scored together",
    )
    parser.add_argument(
        "--fold-choices",
        type=lambda text: [int(part) for part in text.split(",")],
        default=list(FOLDS),
        help="choose: the folds tried (comma-separated)",
    )
    parser.add_argument("--confidence", type=float, default=0.95)
    args = parser.parse_args(argv)
    Path(args.cache_dir).mkdir(parents=True, exist_ok=True)
    commands = {"choose": choose, "score": score, "curve": curve}
    figures = commands[args.command](args)
    print_figures(figures, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
