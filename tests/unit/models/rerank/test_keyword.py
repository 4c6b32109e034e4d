"""The keyword reranker's formula, pure: final = (1 - weight) * min-max(retrieval score) + weight *
the share of the question's content terms the chunk holds; and how the settings select it (no
model, so rerank = auto reranks with it)."""

from __future__ import annotations

import pytest

from loader.errors import ConfigError
from loader.eval.tune import KEYWORD_SPACE, parse_space
from loader.models.rerank import load_reranker
from loader.models.rerank.check import default_rerank, require_rerank, rerank_problem
from loader.models.rerank.keyword import (
    KeywordReranker,
    content_terms,
    keyword_overlap,
    keyword_rerank_scores,
    min_max,
    words,
)
from loader.settings import Settings


def test_content_terms_are_distinct_lowercased_words_without_stopwords_or_punctuation():
    assert words("Error E1043: tray-empty, R-2207!") == [
        "error",
        "e1043",
        "tray",
        "empty",
        "r",
        "2207",
    ]
    assert content_terms("How long do REFUNDS take? Refunds, please: how long?") == {
        "long",
        "refunds",
        "take",
        "please",
    }
    assert content_terms("what is it and how") == frozenset()


def test_overlap_is_the_share_of_terms_the_text_holds():
    terms = content_terms("late delivery refund policy")
    assert keyword_overlap(terms, "Refund policy: a LATE order is refunded.") == 0.75
    assert keyword_overlap(terms, "deliveryman") == 0.0  # words, not substrings
    assert keyword_overlap(frozenset(), "anything") == 0.0


def test_min_max_over_the_candidates():
    assert min_max([2.0, 4.0, 3.0]) == [0.0, 1.0, 0.5]
    assert min_max([0.7, 0.7]) == [1.0, 1.0]
    assert min_max([]) == []


def test_the_formula_by_hand():
    question = (
        "How long do refunds take for late deliveries?"  # long, refunds, take, late, deliveries
    )
    passages = [
        "Shipping is free above 20 euros.",  # 0 of 5
        "Refunds take 5 days.",  # refunds, take: 2 of 5
        "Late deliveries: refunds take up to 10 days; how long depends on the bank.",  # 5 of 5
    ]
    retrieval = [0.032, 0.030, 0.016]  # min-max: 1.0, 0.875, 0.0
    scores = keyword_rerank_scores(question, passages, retrieval, weight=0.3)
    assert scores == pytest.approx([0.7 * 1.0, 0.7 * 0.875 + 0.3 * 0.4, 0.3 * 1.0])
    # 0 keeps the retrieval order, 1 orders by overlap alone.
    assert keyword_rerank_scores(question, passages, retrieval, 0.0) == pytest.approx(
        [1.0, 0.875, 0.0]
    )
    assert keyword_rerank_scores(question, passages, retrieval, 1.0) == pytest.approx(
        [0.0, 0.4, 1.0]
    )
    reranker = KeywordReranker(0.5)
    assert reranker.rerank(question, passages, retrieval) == pytest.approx(
        [0.5, 0.5 * 0.875 + 0.5 * 0.4, 0.5]
    )
    with pytest.raises(ValueError, match="needs the candidates' retrieval scores"):
        reranker.rerank(question, passages)
    with pytest.raises(ValueError, match="2 retrieval scores for 3 passages"):
        keyword_rerank_scores(question, passages, retrieval[:2], 0.3)
    with pytest.raises(ConfigError, match="keyword_rerank_weight must be between 0 and 1"):
        KeywordReranker(1.5)


def test_the_setting_is_checked_and_selects_a_reranker_without_a_model():
    with pytest.raises(ConfigError, match="setting 'keyword_rerank_weight' must be between 0"):
        Settings(keyword_rerank_weight=-0.1)
    settings = Settings(rerank_backend="keyword", reranker_model="/no/such/cross-encoder")
    assert settings.keyword_rerank_weight == 0.3
    reranker = load_reranker(settings.replace(keyword_rerank_weight=0.4))
    assert isinstance(reranker, KeywordReranker) and reranker.weight == 0.4
    # No model to find: auto reranks, on is no error; other backends still need the model.
    assert rerank_problem(settings) is None
    assert default_rerank(settings) == (True, None)
    require_rerank(settings.replace(rerank="on"))
    assert "there is no folder" in rerank_problem(settings.replace(rerank_backend="torch"))


def test_tune_tries_the_weight_only_with_the_keyword_reranker():
    keyword = Settings(rerank_backend="keyword")
    space = parse_space([], keyword)
    names = list(space)
    assert space["keyword_rerank_weight"] == KEYWORD_SPACE["keyword_rerank_weight"]
    assert names.index("keyword_rerank_weight") == names.index("candidates") - 1
    assert "keyword_rerank_weight" not in parse_space([], Settings())
    assert "keyword_rerank_weight" not in parse_space([], keyword.replace(rerank="off"))
    assert parse_space(["keyword_rerank_weight=0.2,0.4"], keyword) == {
        "keyword_rerank_weight": (0.2, 0.4)
    }
    with pytest.raises(ConfigError, match="keyword_rerank_weight changes nothing unless"):
        parse_space(["keyword_rerank_weight=0.2"], Settings())
