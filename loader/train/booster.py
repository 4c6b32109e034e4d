"""The learned reranker's booster, pure (no cluster): LambdaMART (LightGBM's ``lambdarank``)
trained on examples' features as the residual over the fused order's prior (``train_booster``),
the trees' weight for the number of questions they learnt from (``residual_weight``), the
out-of-fold scores over k folds of whole questions (``out_of_fold_ndcgs``), the guard's
verdict (``verdict_figures``, ``cross_validated_guard``) and the choice of a base
(``choose_base``). ``loader.train.learn`` runs them (``loader.train.cross_fit``).
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Any, Protocol

import numpy as np

from loader.errors import ConfigError
from loader.models.rerank.features import feature_set_of_width
from loader.train.defaults import LEARN_BASE_MODES
from loader.train.examples import Example
from loader.train.guard import gain_lower_bound


class BoosterOptions(Protocol):
    """What training reads of a request (``loader.train.learn.LearnRequest`` has it)."""

    rounds: int
    seed: int
    implicit_weight: float


# The prior's weight: scores start at PRIOR_SCALE / log2(1 + fused rank), so the trees must
# overcome a gap of about 0.74 between the first and the second candidate to swap them.
# Chosen by 5-fold cross-validation on SciFact's train claims only (hybrid-rrf, MiniLM): 4 held
# the trees too close to fusion (+0.005 nDCG@10 at 647 claims), 2 gave +0.018, 0 less.
PRIOR_SCALE = 2.0
# The trees' output is weighed n / (n + SHRINK_QUESTIONS) for n training questions: the fewer
# the judgments, the closer the model stays to fusion (0.11 at 25 questions, 0.76 at 647).
SHRINK_QUESTIONS = 200
# Small, regularised trees, a slow rate and all the rounds. Chosen by 5-fold cross-validation on
# SciFact's 809 train claims only (benchmarks/learned_rerank_ablation.py): 7 leaves of 40+,
# rate 0.2 and early stopping on an inner fifth (it stopped after ~23 trees) gained +0.006
# nDCG@10 over hybrid-rrf; 15 leaves of 20+, rate 0.05 and 300 rounds, +0.029.
BOOSTER_PARAMS: dict[str, Any] = {
    "objective": "lambdarank",
    "metric": "ndcg",
    "eval_at": [10],
    "lambdarank_truncation_level": 20,
    "num_leaves": 15,
    "min_data_in_leaf": 20,
    "lambda_l2": 10.0,
    "learning_rate": 0.05,
    "feature_fraction": 0.8,
    "bagging_fraction": 0.8,
    "bagging_freq": 1,
    "deterministic": True,
    "force_row_wise": True,
    "num_threads": 2,
    "verbose": -1,
}
ROUNDS = 300
NDCG_DEPTH = 10
# The guard keeps a model when the one-sided lower bound of its cross-validated gain, at
# GUARD_CONFIDENCE (0.90: the 10th percentile of the paired-bootstrap means), is above zero.
# Both were chosen on SciFact's train claims alone (benchmarks/learned_guard_scifact.py
# choose/score): the guard simulated on 25-400 claims x 5 seeds, each verdict scored on the
# train claims left out. Of 3, 5 and 10 folds at 0.8-0.975, six settings kept no model
# significantly below fusion there with the kept models' mean gain above zero at every size;
# 5 folds at 0.90 served the most (+0.0149 mean at 400 claims, 4 of 5 kept; 0.95 kept one
# model at 100 claims that lost, 0.80 one at 50).
GUARD_FOLDS = 5
GUARD_CONFIDENCE = 0.90


def lightgbm_dataset(
    examples: Sequence[Example], prior_scale: float, implicit_weight: float
) -> Any:
    import lightgbm

    matrix = np.vstack([example.features for example in examples])
    labels = np.concatenate([example.labels for example in examples])
    init = np.concatenate([prior_scale * example.prior for example in examples])
    weights = np.concatenate(
        [
            np.full(len(example.labels), implicit_weight if example.implicit else 1.0)
            for example in examples
        ]
    )
    return lightgbm.Dataset(
        matrix,
        label=labels,
        group=[len(example.labels) for example in examples],
        init_score=init,
        weight=weights,
        feature_name=list(feature_set_of_width(matrix.shape[1]).names),
        free_raw_data=False,
    )


def train_booster(
    examples: Sequence[Example], options: BoosterOptions, prior_scale: float = PRIOR_SCALE
) -> Any:
    """A LambdaMART booster over the examples' features, the residual over the prior, all
    ``options.rounds`` rounds. Pure (no cluster).

    Raises:
        ConfigError: no example has a relevant candidate (nothing to learn).
    """
    import lightgbm

    useful = [example for example in examples if example.labels.max() > 0]
    if len(useful) < 2:
        raise ConfigError(
            "too few training questions find a relevant chunk among their candidates "
            f"({len(useful)}); judge more questions or raise --candidates"
        )
    params = {**BOOSTER_PARAMS, "seed": options.seed}
    train_set = lightgbm_dataset(useful, prior_scale, options.implicit_weight)
    return lightgbm.train(params, train_set, num_boost_round=options.rounds)


def residual_weight(trained_on: int) -> float:
    """The trees' weight in the score for ``trained_on`` training questions (see
    ``SHRINK_QUESTIONS``)."""
    return trained_on / (trained_on + SHRINK_QUESTIONS)


def _ndcg(example: Example, scores: np.ndarray) -> float:
    from loader.eval.metrics import ndcg_at_k

    order = np.argsort(-scores, kind="stable")
    return ndcg_at_k([example.keys[i] for i in order], example.relevant, NDCG_DEPTH)


def held_out_ndcgs(
    booster: Any, held: Sequence[Example], prior_scale: float, weight: float = 1.0
) -> tuple[np.ndarray, np.ndarray]:
    """Per question, nDCG@10 of the current search (the fused order) and of the model (its
    trees weighed ``weight``). A model of one reader's features scores two readers' rows by
    their first columns: they are one reader's (``features.TWO_READERS``). Pure."""
    current, learned = [], []
    columns = booster.num_feature()
    for example in held:
        fused = -np.arange(len(example.labels), dtype=float)  # the candidates' own order
        residual = booster.predict(example.features[:, :columns], num_threads=1)
        score = prior_scale * example.prior + weight * residual
        current.append(_ndcg(example, fused))
        learned.append(_ndcg(example, score))
    return np.array(current), np.array(learned)


def verdict_figures(
    current: np.ndarray, learned: np.ndarray, seed: int, confidence: float = GUARD_CONFIDENCE
) -> dict[str, float]:
    """The mean nDCG@10 of both orders, the mean gain and its one-sided lower bound at
    ``confidence`` (the (1 - confidence) quantile of the paired-bootstrap means of the gain:
    at 0.95, the 5th percentile). Pure."""
    return {
        "questions": float(len(current)),
        "ndcg@10_current": float(current.mean()),
        "ndcg@10_learned": float(learned.mean()),
        "gain": float((learned - current).mean()),
        "gain_lower_bound": gain_lower_bound(current, learned, seed, confidence),
        "confidence": confidence,
    }


def fused_ndcgs(examples: Sequence[Example]) -> np.ndarray:
    """Per question, nDCG@10 of its candidates' fused order (the search without a model). Pure."""
    return np.array(
        [_ndcg(example, -np.arange(len(example.labels), dtype=float)) for example in examples]
    )


def fold_parts(examples: Sequence[Example], folds: int, seed: int) -> list[list[int]]:
    """A seeded partition of the examples' positions (whole questions) into ``folds`` parts."""
    order = list(range(len(examples)))
    random.Random(seed).shuffle(order)
    return [order[part::folds] for part in range(folds)]


def out_of_fold_ndcgs(
    examples: Sequence[Example], options: BoosterOptions, folds: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per question (in ``examples``' order), nDCG@10 of the fused order and of a model that
    never saw it: ``folds`` models, each trained as ``train_booster`` trains on the other parts
    and weighed as the final model would be for its size. Pure.

    Raises:
        ConfigError: a fold leaves too few relevant questions to train on.
    """
    fused, learned = np.zeros(len(examples)), np.zeros(len(examples))
    for held in fold_parts(examples, folds, options.seed):
        held_set = set(held)
        fitted = [example for i, example in enumerate(examples) if i not in held_set]
        booster = train_booster(fitted, options)
        weight = residual_weight(sum(bool(example.labels.max() > 0) for example in fitted))
        part = [examples[i] for i in held]
        fused[held], learned[held] = held_out_ndcgs(booster, part, PRIOR_SCALE, weight)
    return fused, learned


def cross_validated_guard(
    examples: Sequence[Example],
    options: BoosterOptions,
    folds: int,
    current: np.ndarray | None = None,
    confidence: float = GUARD_CONFIDENCE,
    unseen: np.ndarray | None = None,
) -> dict[str, float]:
    """The guard's figures over every question, each scored by a model that never saw it
    (``out_of_fold_ndcgs``; ``guard_figures``): all the questions judge, none is spent only on
    judging, and the model that is kept is trained on all of them. ``current``: each
    question's nDCG@10 under the model being served, when there is one; ``unseen``: which
    questions that model did not learn from. Pure.

    Raises:
        ConfigError: a fold leaves too few relevant questions to train on.
    """
    fused, learned = out_of_fold_ndcgs(examples, options, folds)
    figures = guard_figures(fused, learned, current, unseen, options.seed, confidence)
    figures["folds"] = float(folds)
    figures["ndcg@10_fused"] = float(fused.mean())
    return figures


def guard_figures(
    fused: np.ndarray,
    learned: np.ndarray,
    current: np.ndarray | None,
    unseen: np.ndarray | None,
    seed: int,
    confidence: float = GUARD_CONFIDENCE,
) -> dict[str, float]:
    """What the guard decides on (``guard_keeps``), from each question's out-of-fold nDCG@10
    of the new model (``learned``), of fusion (``fused``) and of the model served now
    (``current``, ``None`` for none). Pure.

    A served model scores itself in-sample on the questions it learnt from, so judged there a
    retraining could hardly replace it: the first small model it kept would be served for good
    (measured: benchmarks/judge_next_scifact.py). When the served model records what it learnt
    from (``unseen``: the questions it did not), the new model is judged as a first one is,
    against fusion over every question, and against the served model on the unseen questions
    alone (``served_unseen``, ``gain_over_served``). Without that record, against the served
    model over every question, as before."""
    if current is None or unseen is None:
        return verdict_figures(fused if current is None else current, learned, seed, confidence)
    figures = verdict_figures(fused, learned, seed, confidence)
    figures["served_unseen"] = float(unseen.sum())
    figures["gain_over_served"] = (
        float((learned[unseen] - current[unseen]).mean()) if unseen.any() else 0.0
    )
    return figures


def guard_keeps(figures: dict[str, float]) -> bool:
    """Whether the guard keeps the new model: its out-of-fold gain and the gain's one-sided
    lower bound above zero; and, retraining a model that records what it learnt from, at least
    one question that model never saw, where the new one is not worse on average. Pure.

    >>> guard_keeps({"gain": 0.02, "gain_lower_bound": 0.01})
    True
    >>> guard_keeps({"gain": 0.02, "gain_lower_bound": 0.01, "served_unseen": 0.0,
    ...              "gain_over_served": 0.0})
    False
    """
    if not (figures["gain"] > 0 and figures["gain_lower_bound"] > 0):
        return False
    if "served_unseen" in figures:
        return figures["served_unseen"] > 0 and figures["gain_over_served"] >= 0
    return True


# The fusions `loader learn` chooses the model's base among (without --mode).
BASE_MODES = LEARN_BASE_MODES


def choose_base(
    scores: dict[str, dict[tuple[str, str], tuple[float, float]]],
) -> tuple[str, dict[str, dict[str, float]]]:
    """The base search whose model serves best: the mode with the highest mean out-of-sample
    nDCG@10 of the model over its candidates (what users get once it is kept), over the
    questions every mode scored; a tie goes to the mode named first. Also each mode's figures
    (its fusion's mean, the model's, the gain, the questions), for the provenance. Pure.

    ``scores``: per mode, per question, (fused, learned) nDCG@10 on questions the model did not
    learn from (``out_of_fold_ndcgs``: each scored by a model trained on the other folds).

    >>> choose_base({"a": {("s", "q"): (0.5, 0.6)}, "b": {("s", "q"): (0.6, 0.7)}})[0]
    'b'
    """
    shared = set.intersection(*(set(by_question) for by_question in scores.values()))
    figures = {}
    for mode, by_question in scores.items():
        pairs = np.array([by_question[key] for key in sorted(shared)]).reshape(-1, 2)
        fused, learned = pairs[:, 0], pairs[:, 1]
        figures[mode] = {
            "ndcg@10_fused": float(fused.mean()) if len(pairs) else 0.0,
            "ndcg@10_learned": float(learned.mean()) if len(pairs) else 0.0,
            "gain": float((learned - fused).mean()) if len(pairs) else 0.0,
            "questions": float(len(pairs)),
        }
    best = max(scores, key=lambda mode: figures[mode]["ndcg@10_learned"])  # first of equals
    return best, figures
