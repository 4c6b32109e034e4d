"""`loader learn`'s base chosen by the guard's cross-validation (issue #53): every mode is scored
out of fold over the same questions, the base is the mode whose model scores best there, and
the guard judges against what is served. Pure: no cluster."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

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


def test_a_retraining_is_judged_against_the_served_model_only_where_it_never_learnt():
    """The served model scores itself in-sample on what it learnt from; judged there, no new
    model could replace it (the first one kept was served for good). Where it records what it
    learnt from, the new model must beat fusion over all the questions and not lose to the served
    model on the questions it never saw."""
    from loader.train.booster import guard_figures, guard_keeps

    fused = np.full(8, 0.5)
    learned = np.full(8, 0.7)
    # The served model: perfect on the six questions it learnt from, fair on the two it did not.
    current = np.array([1.0] * 6 + [0.6, 0.6])
    unseen = np.array([False] * 6 + [True, True])
    old_rule = guard_figures(fused, learned, current, None, seed=0)  # in-sample: refused
    assert old_rule["gain"] < 0 and not guard_keeps(old_rule)
    fair = guard_figures(fused, learned, current, unseen, seed=0)
    assert fair["gain"] == pytest.approx(0.2) and fair["served_unseen"] == 2
    assert fair["gain_over_served"] == pytest.approx(0.1) and guard_keeps(fair)
    # Worse than the served model where it never learnt: kept out.
    worse = guard_figures(fused, learned, np.array([1.0] * 6 + [0.8, 0.8]), unseen, seed=0)
    assert worse["gain_over_served"] == pytest.approx(-0.1) and not guard_keeps(worse)
    # Nothing it did not learn from: nothing to judge it on, so it stays.
    nothing_new = guard_figures(fused, learned, current, np.zeros(8, dtype=bool), seed=0)
    assert not guard_keeps(nothing_new)
    # And fusion's bar stays: a model no better than fusion is refused whatever was served.
    flat = guard_figures(fused, fused.copy(), current, unseen, seed=0)
    assert not guard_keeps(flat)


def test_what_a_model_learnt_from_is_named_by_the_questions_text():
    from loader.models.rerank.learned_files import question_digest
    from loader.train.cross_fit import learnt_from, unseen_questions

    examples = [
        replace(example, question=f"What is  topic {number}?")
        for number, example in enumerate(synthetic(4, seed=3))
    ]
    digests = learnt_from(examples[:3])
    assert len(digests) == 3 and digests == sorted(digests)
    # Spaces and case aside: a file exported again names the same questions.
    assert question_digest("what is topic 0?") in digests

    class Served:
        learnt_from = frozenset(digests)

    assert unseen_questions(Served(), examples).tolist() == [False, False, False, True]
    assert unseen_questions(None, examples) is None
