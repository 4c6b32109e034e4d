"""`loader learn`'s base chosen by the guard's cross-validation (issue #53): every mode is scored
out of fold over the same questions, the base is the mode whose model scores best there, and
the guard judges against what is served. Pure: no cluster."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np

from loader.models.rerank.features import FEATURE_NAMES
from loader.train.booster import choose_base, out_of_fold_ndcgs
from loader.train.cross_fit import aligned, base_scores, question_keys, served_ndcgs
from loader.train.learn import LearnRequest
from tests.unit.models.rerank.test_learned import SIGNAL, synthetic


def _without_signal(examples):
    rng = np.random.default_rng(7)
    flat = []
    for example in examples:
        features = example.features.copy()
        features[:, SIGNAL] = rng.random(len(features))
        flat.append(replace(example, features=features))
    return flat


def test_aligned_keeps_the_questions_every_mode_found_in_one_order():
    examples = synthetic(6, seed=1)
    found = {"a": examples, "b": list(reversed(examples[1:])), "c": examples[:5]}
    kept = aligned(found)
    assert [question_keys(kept[mode]) for mode in "abc"] == [question_keys(examples[1:5])] * 3


def test_the_base_is_the_mode_whose_model_scores_best_out_of_fold():
    signal = synthetic(60, seed=2)
    found = aligned({"no-signal": _without_signal(signal), "signal": signal})
    request = LearnRequest(sources=("synthetic",), out=Path("unused"), rounds=40)
    scores = base_scores(found, ("no-signal", "signal"), request, 3, lambda line: None)
    keys = question_keys(found["signal"])
    per_question = {
        m: dict(zip(keys, zip(*s, strict=True), strict=True)) for m, s in scores.items()
    }
    base, figures = choose_base(per_question)
    assert base == "signal", figures  # named second, and chosen
    assert figures["signal"]["ndcg@10_learned"] > figures["no-signal"]["ndcg@10_learned"]
    # The same folds in every mode: fusion scores the same per question in both.
    assert np.allclose(scores["signal"][0], scores["no-signal"][0])
    # Without a served model the guard judges against fusion: the fused order's scores.
    assert np.allclose(served_ndcgs(None, found["signal"]), scores["signal"][0])
    fused, learned = out_of_fold_ndcgs(found["signal"], request, 3)
    assert np.allclose(learned, scores["signal"][1]) and len(FEATURE_NAMES) > SIGNAL
