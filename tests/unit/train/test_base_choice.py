"""`loader learn` chooses the model's base by the score it serves: the mode whose candidates the
model reranks best on the questions it did not learn from, over the questions every mode scored,
the first mode named on a tie."""

from __future__ import annotations

import pytest

from loader.train.booster import choose_base


def test_the_base_is_the_mode_the_model_serves_best_over():
    scores = {
        "hybrid-rrf": {("s", "q1"): (0.60, 0.62), ("s", "q2"): (0.40, 0.42)},
        "hybrid-minmax": {("s", "q1"): (0.50, 0.70), ("s", "q2"): (0.30, 0.40)},
        "hybrid-zscore": {
            ("s", "q1"): (0.55, 0.66),
            ("s", "q2"): (0.35, 0.50),
            ("s", "q3"): (0, 1),
        },
    }
    chosen, figures = choose_base(scores)
    # zscore's third question is not scored by the others: left out, or it would win.
    assert chosen == "hybrid-zscore"
    assert figures["hybrid-zscore"]["questions"] == 2
    assert figures["hybrid-zscore"]["ndcg@10_learned"] == pytest.approx(0.58)
    assert figures["hybrid-minmax"]["gain"] == pytest.approx(0.15)
    # The largest gain over its own fusion is not the criterion: what users get is.
    assert figures["hybrid-minmax"]["gain"] > figures["hybrid-zscore"]["gain"]
    tie = {"hybrid-rrf": {("s", "q"): (0.5, 0.6)}, "hybrid-zscore": {("s", "q"): (0.4, 0.6)}}
    assert choose_base(tie)[0] == "hybrid-rrf"
