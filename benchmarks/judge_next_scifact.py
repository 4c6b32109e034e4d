"""What to judge next, measured on SciFact's train claims (issue #54, item 8): how many judged
claims the guard needs before it keeps a learned model, when a team judges them in one order or
another, and what is served meanwhile.

A team judges train claims in batches (``--batch``, grades from the qrels) drawn from a pool;
after each batch the guard runs as ``loader learn`` runs it on every claim judged so far
(``cross_validated_guard``: 5-fold cross-validation, the one-sided 90 % bound, against what is
served now: fusion, or the model the guard kept before, retrained in place), and the model it
keeps (``train_booster`` on all of them, ``residual_weight``) is what is served from then on.
Per seed, ``--held-out`` train claims are set apart before any judging: what is served after
each batch is scored there (nDCG@10), the same claims for every order. The orders:

- ``random``: the pool shuffled by the seed;
- ``modes``: the judging page's fallback, ``mode_disagreement`` of the five modes' top 10
  documents, highest first. The candidates cache holds only hybrid-rrf's candidates, so each
  mode's top 10 is rebuilt within them from the features: bm25 by BM25 on content, vector by
  cosine, hybrid-rrf the fused order, hybrid-minmax and hybrid-zscore the sum of the content and
  vector scores min-max normalised and z-scored over the candidates (an approximation: the
  pipeline normalises over each sub-query's own results);
- ``learned``: after the first batch (``random``'s own), ``ranking_difference`` of the top 10
  documents of fusion and of the model trained on every claim judged so far, kept or not;
- ``page``: what the judging page does: ``modes`` until the guard keeps a model, then the
  difference between the served model's top 10 and fusion's (a refused model is not written,
  so the page has no other).

Reads only the candidates ``learned_rerank_scifact.py`` cached (``--index-prefix sfa`` names the
pickle; no request is made when it exists) and SciFact's train split, never test.

    python3 benchmarks/judge_next_scifact.py --index-prefix sfa --cache-dir /tmp/learned-rerank \\
        --out benchmarks/results/judge_next_scifact.json

Not a test. Requests go only to the settings' cluster (a loopback URL), and only when the
candidates are not cached yet.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import time
from collections.abc import Callable, Mapping, Sequence
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

from loader.errors import ConfigError  # noqa: E402
from loader.eval.live import mode_disagreement, ranking_difference  # noqa: E402
from loader.models.rerank.features import FEATURE_NAMES  # noqa: E402
from loader.train.booster import (  # noqa: E402
    GUARD_FOLDS,
    PRIOR_SCALE,
    cross_validated_guard,
    guard_keeps,
    held_out_ndcgs,
    residual_weight,
    train_booster,
)
from loader.train.examples import Example  # noqa: E402
from loader.train.learn import LearnRequest  # noqa: E402

ORDERS = ("random", "modes", "learned", "page")
CHECKPOINTS = (100, 200, 400)
COLUMN = {name: i for i, name in enumerate(FEATURE_NAMES)}


def top_documents(example: Example, scores: np.ndarray, k: int = 10) -> list[str]:
    """The first ``k`` documents of ``example``'s candidates ordered by ``scores`` (best first;
    a document at its best chunk)."""
    ranked = [example.keys[i] for i in np.argsort(-scores, kind="stable")]
    return list(dict.fromkeys(ranked))[:k]


def mode_orders(example: Example) -> dict[str, np.ndarray]:
    """Each mode's scores of the candidates, rebuilt from the features (see the module)."""
    feature = {name: example.features[:, COLUMN[name]] for name in COLUMN}
    content, vector = feature["content_rank"], feature["vector_rank"]  # 1 / rank, 0 unmatched
    return {
        "bm25": np.where(content > 0, content, -1.0),
        "vector": np.where(vector > 0, vector, -1.0),
        "hybrid-rrf": fused_scores(example),
        "hybrid-minmax": feature["content_minmax"] + feature["vector_minmax"],
        "hybrid-zscore": feature["content_zscore"] + feature["vector_zscore"],
    }


def modes_measure(example: Example) -> float | None:
    """``mode_disagreement`` of the five modes' top 10 documents (label-free)."""
    orders = mode_orders(example)
    return mode_disagreement({mode: top_documents(example, s) for mode, s in orders.items()})


def learned_measure(example: Example, model: tuple[Any, float]) -> float | None:
    """``ranking_difference`` of fusion's top 10 documents and the model's."""
    booster, weight = model[:2]
    scores = model_scores(booster, PRIOR_SCALE, example, weight)
    return ranking_difference(
        top_documents(example, fused_scores(example)), top_documents(example, scores)
    )


def next_batch(
    pool: Sequence[str], measure: Callable[[str], float | None] | None, size: int
) -> list[str]:
    """The ``size`` claims of ``pool`` (in its seeded order) with the highest ``measure``
    (unmeasured last, ties in pool order); the first ``size`` without a measure."""
    if measure is None:
        return list(pool[:size])
    values = {q: measure(q) for q in pool}
    ranked = sorted(pool, key=lambda q: (values[q] is None, -(values[q] or 0.0)))
    return ranked[:size]


def guard(
    subset: list[Example], served: tuple[Any, ...] | None, seed: int, args: argparse.Namespace
) -> tuple[bool, dict[str, float]]:
    """The guard ``loader learn`` runs on ``subset`` against what is served (``served``: the
    model kept before, retrained in place, and the claims it learnt from; else fusion). With
    ``--served-judged-on all`` the served model is judged over every claim, the questions it
    learnt from too (the rule before ``model.learnt_from``). Too few relevant claims for a fold
    is a refusal (``loader learn`` says "judge more questions")."""
    request = LearnRequest(
        sources=(), out=Path("unused"), folds=args.folds, seed=seed, rounds=args.rounds
    )
    current = unseen = None
    if served is not None:
        _, current = held_out_ndcgs(served[0], subset, PRIOR_SCALE, served[1])
        if args.served_judged_on == "unseen":
            unseen = np.array([example.question_id not in served[2] for example in subset])
    try:
        figures = cross_validated_guard(subset, request, args.folds, current, unseen=unseen)
    except ConfigError:
        return False, {}
    return guard_keeps(figures), figures


def trained(subset: list[Example], seed: int, rounds: int) -> tuple[Any, float, frozenset[str]]:
    """The model ``loader learn`` writes for ``subset``, its residual weight and the claims it
    learnt from (what its provenance records)."""
    request = LearnRequest(sources=(), out=Path("unused"), seed=seed, rounds=rounds)
    useful = sum(bool(example.labels.max() > 0) for example in subset)
    learnt = frozenset(example.question_id for example in subset)
    return train_booster(subset, request), residual_weight(useful), learnt


def simulate(
    order: str,
    train: Mapping[str, Example],
    pool: list[str],
    scored: Mapping[str, Example],
    seed: int,
    args: argparse.Namespace,
    start: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """One team judging ``pool`` in ``order``, batch by batch up to ``--max-claims``; from
    ``start`` (another run's state at its first keep) when given."""
    base = per_claim(scored, fused_scores)
    state = start or {"judged": [], "served": None, "model": None, "steps": []}
    judged_ids, served, model = list(state["judged"]), state["served"], state["model"]
    steps = list(state["steps"])
    while len(judged_ids) < min(args.max_claims, len(pool)):
        left = [q for q in pool if q not in set(judged_ids)]
        if order == "random" or (order == "learned" and model is None):
            measure = None
        elif order == "learned" or (order == "page" and served is not None):
            chosen = model if order == "learned" else served
            measure = lambda q, m=chosen: learned_measure(train[q], m)  # noqa: E731
        else:
            measure = lambda q: modes_measure(train[q])  # noqa: E731
        judged_ids += next_batch(left, measure, args.batch)
        subset = [train[q] for q in judged_ids]
        kept, figures = guard(subset, served, seed, args)
        if kept or order == "learned":
            try:
                model = trained(subset, seed, args.rounds)
            except ConfigError:
                model = None
        if kept:
            served = model
        served_scores = (
            base
            if served is None
            else per_claim(scored, lambda e, s=served: model_scores(s[0], PRIOR_SCALE, e, s[1]))
        )
        step = {
            "claims": len(judged_ids),
            "kept": kept,
            "cv_gain": round(figures.get("gain", 0.0), 4),
            "cv_lower_bound": round(figures.get("gain_lower_bound", 0.0), 4),
            "served_ndcg@10": round(float(served_scores.mean()), 4),
        }
        if kept:
            gain, low, high = gain_interval(base, served_scores)
            step["kept_gain"] = [round(gain, 4), round(low, 4), round(high, 4)]
        steps.append(step)
        print(json.dumps({"order": order, "seed": seed, **step}), file=sys.stderr, flush=True)
        if order == "modes" and kept and "at_first_keep" not in state:
            state["at_first_keep"] = {
                "judged": list(judged_ids), "served": served, "model": model, "steps": list(steps)
            }  # fmt: skip
    first = next((step["claims"] for step in steps if step["kept"]), None)
    return {
        "order": order,
        "seed": seed,
        "first_keep": first,
        "steps": steps,
        "branch": state.get("at_first_keep"),
    }


def summary(runs: list[dict[str, Any]], base: Mapping[int, float]) -> dict[str, Any]:
    """Per order: claims to the first keep (median, range, seeds that never kept), the mean
    served nDCG@10 on the held-out claims and its gain over fusion at each checkpoint, and the
    kept models significantly below fusion there."""
    table = {}
    for order in dict.fromkeys(run["order"] for run in runs):
        mine = [run for run in runs if run["order"] == order]
        firsts = [run["first_keep"] for run in mine if run["first_keep"] is not None]
        row: dict[str, Any] = {
            "seeds": len(mine),
            "first_keep_median": statistics.median(firsts) if firsts else None,
            "first_keep_range": [min(firsts), max(firsts)] if firsts else None,
            "never_kept": len(mine) - len(firsts),
            # Kept models after each run's first: how often a retraining replaced the served one.
            "later_replacements": sum(
                max(0, sum(step["kept"] for step in run["steps"]) - 1) for run in mine
            ),
            "kept_significantly_below": sum(
                step.get("kept_gain", [0, 0, 1])[2] < 0 for run in mine for step in run["steps"]
            ),
        }
        for claims in CHECKPOINTS:
            at = [s for run in mine for s in run["steps"] if s["claims"] == claims]
            gains = [
                s["served_ndcg@10"] - base[run["seed"]]
                for run in mine
                for s in run["steps"]
                if s["claims"] == claims
            ]
            if at:
                row[f"served_ndcg@10_at_{claims}"] = round(
                    float(np.mean([s["served_ndcg@10"] for s in at])), 4
                )
                row[f"served_gain_at_{claims}"] = round(float(np.mean(gains)), 4)
                row[f"kept_by_{claims}"] = sum(
                    any(s["kept"] for s in run["steps"] if s["claims"] <= claims) for run in mine
                )
        table[order] = row
    return table


def print_table(table: Mapping[str, Any]) -> None:
    heads = ["order", "first keep: median [range]", "never", *(f"served@{c}" for c in CHECKPOINTS)]
    print(" | ".join(heads), file=sys.stderr)
    for order, row in table.items():
        span = row["first_keep_range"]
        first = f"{row['first_keep_median']} [{span[0]}-{span[1]}]" if span else "-"
        cells = [
            f"{row.get(f'served_ndcg@10_at_{c}', '-')} ({row.get(f'served_gain_at_{c}', 0):+.4f})"
            for c in CHECKPOINTS
        ]
        print(" | ".join([order, first, str(row["never_kept"]), *cells]), file=sys.stderr)


def run(args: argparse.Namespace) -> dict[str, Any]:
    settings = _settings(args)
    pairs = judged(args.dataset, "train", settings, args.index_prefix)
    train = examples(pairs, settings, _cache(args, "train"))
    ids = sorted(train)
    runs, base = [], {}
    started = time.perf_counter()
    for seed in range(args.seeds):
        shuffled = [str(q) for q in np.random.default_rng(3000 + seed).permutation(ids)]
        scored = {q: train[q] for q in shuffled[: args.held_out]}
        pool = shuffled[args.held_out :]
        base[seed] = float(per_claim(scored, fused_scores).mean())
        by_order = {}
        for order in args.orders:
            if order == "page" and "modes" in by_order:  # `modes` until its first keep
                branch = by_order["modes"]["branch"]
                if branch is None:  # never kept: the page ordered as `modes` throughout
                    by_order[order] = {**by_order["modes"], "order": order}
                    continue
                by_order[order] = simulate(order, train, pool, scored, seed, args, branch)
            else:
                by_order[order] = simulate(order, train, pool, scored, seed, args)
        for result in by_order.values():
            result.pop("branch", None)
            runs.append(result)
    table = summary(runs, base)
    print_table(table)
    return {
        "train_claims": len(ids),
        "held_out": args.held_out,
        "pool": len(ids) - args.held_out,
        "served_judged_on": args.served_judged_on,
        "batch": args.batch,
        "max_claims": args.max_claims,
        "folds": args.folds,
        "rounds": args.rounds,
        "fusion_ndcg@10_held_out": {str(s): round(v, 4) for s, v in base.items()},
        "seconds": round(time.perf_counter() - started, 1),
        "by_order": table,
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    harness_arguments(parser)
    parser.add_argument("--seeds", type=int, default=5)
    parser.add_argument("--folds", type=int, default=GUARD_FOLDS)
    parser.add_argument("--batch", type=int, default=25, help="claims judged between guards")
    parser.add_argument("--max-claims", type=int, default=400, help="claims judged at most")
    parser.add_argument("--held-out", type=int, default=250, help="claims scored, never judged")
    parser.add_argument(
        "--orders",
        type=lambda text: [part for part in text.split(",") if part],
        default=list(ORDERS),
        help=f"comma-separated, of {','.join(ORDERS)}",
    )
    parser.add_argument(
        "--served-judged-on",
        choices=("unseen", "all"),
        default="unseen",
        help="a retraining against the served model on the claims it never learnt from "
        "(loader learn's rule), or on all of them (the rule before)",
    )
    args = parser.parse_args(argv)
    unknown = set(args.orders) - set(ORDERS)
    if unknown:
        parser.error(f"--orders: unknown {sorted(unknown)}; choose among {', '.join(ORDERS)}")
    figures = run(args)
    print_figures(figures, args.out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
