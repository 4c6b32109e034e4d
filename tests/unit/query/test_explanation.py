"""The pure parts of `loader explain`: the expected section, each side's share of a fused score,
the stored pipeline's fusion, and the plain-words sentence."""

from __future__ import annotations

import pytest

from loader.errors import ConfigError
from loader.modes import Fusion
from loader.query.explanation import (
    Expected,
    Explanation,
    StageRank,
    contributions,
    fusion_weights,
    minmax_contributions,
    plain_words,
    rrf_contributions,
)
from loader.query.fusion import min_max_fusion, rrf, weighted_arithmetic_mean, z_score_normalize


def test_expected_parses_source_and_heading_path():
    assert Expected.parse("./docs\\refunds.md#Refund policy > Late deliveries") == Expected(
        "docs/refunds.md", ("Refund policy", "Late deliveries")
    )
    assert Expected.parse("refunds.md") == Expected("refunds.md")
    with pytest.raises(ConfigError, match="names no source"):
        Expected.parse("#Late deliveries")


def test_expected_readings_try_every_hash_longest_source_first():
    assert Expected.readings("C#-guide.md#Using C#") == [
        Expected("C#-guide.md#Using C#"),
        Expected("C#-guide.md#Using C"),  # a '#' with nothing after it: no heading
        Expected("C#-guide.md", ("Using C#",)),
        Expected("C", ("-guide.md#Using C#",)),
    ]
    assert Expected.readings("./F#\\intro.md#Setup > Step 1") == [
        Expected("F#/intro.md#Setup > Step 1"),
        Expected("F#/intro.md", ("Setup", "Step 1")),
        Expected("F", ("\\intro.md#Setup", "Step 1")),  # only a source is a path
    ]
    # Without a '#' there is one reading; the last reading is always parse's.
    assert Expected.readings("refunds.md") == [Expected("refunds.md")]
    assert Expected.readings("refunds.md#Late deliveries")[-1] == Expected.parse(
        "refunds.md#Late deliveries"
    )
    with pytest.raises(ConfigError, match="names no source"):
        Expected.readings("#notes.md")


def test_expected_choose_prefers_the_tenants_indexed_source():
    readings = Expected.readings("C#-guide.md#Using C#")
    guide = Expected("C#-guide.md", ("Using C#",))
    assert Expected.choose(readings, {"C#-guide.md": {"acme"}}, "acme") == guide
    # Another tenant's document is still chosen (the explanation then says "tenant").
    assert Expected.choose(readings, {"C#-guide.md": {"globex"}}, "acme") == guide
    # Nothing indexed: today's split at the first '#', so the message names what was typed.
    fallback = Expected.choose(readings, {}, "acme")
    assert fallback == Expected("C", ("-guide.md#Using C#",))
    assert fallback.label() == "C#-guide.md#Using C#"
    # A whole file name holding '#'.
    notes = Expected.readings("notes#2.md")
    assert Expected.choose(notes, {"notes#2.md": {"acme"}}, "acme") == Expected("notes#2.md")
    # Two readings indexed: the tenant's own document wins over a longer one of another tenant,
    # and of the tenant's, the longest.
    both = Expected.readings("a.md#b.md")
    owners = {"a.md#b.md": {"globex"}, "a.md": {"acme"}}
    assert Expected.choose(both, owners, "acme") == Expected("a.md", ("b.md",))
    assert Expected.choose(both, owners, "globex") == Expected("a.md#b.md")
    assert Expected.choose(both, {"a.md#b.md": {"acme"}, "a.md": {"acme"}}, "acme") == Expected(
        "a.md#b.md"
    )


def test_expected_matches_with_or_without_the_title():
    expected = Expected.parse("refunds.md#late deliveries")
    assert expected.matches("refunds.md", "Refund policy", ("Late deliveries", "UPI"))
    assert Expected.parse("refunds.md#Refund policy > Late deliveries").matches(
        "refunds.md", "Refund policy", ("Late deliveries",)
    )
    assert not expected.matches("refunds.md", "Refund policy", ("Missing items",))
    assert not expected.matches("other.md", "Refund policy", ("Late deliveries",))
    assert Expected("refunds.md").matches("refunds.md", "", ())


def test_rrf_shares_add_up_to_client_side_rrf():
    shares = rrf_contributions({"bm25": 3, "vector": None, "exact": 1}, 60)
    assert [share.value for share in shares] == pytest.approx([1 / 63, 0.0, 1 / 61])
    assert shares[0].formula == "bm25: 1/(60+3)"
    fused = dict(rrf([["x", "y", "a"], ["b"], ["a"]], rank_constant=60))
    assert sum(share.value for share in shares) == pytest.approx(fused["a"])
    weighted = rrf_contributions({"bm25": 1, "vector": 2}, 20, {"bm25": 0.2, "vector": 0.2})
    assert [share.value for share in weighted] == pytest.approx([0.2 / 21, 0.2 / 22])
    assert weighted[1].formula == "vector: 0.2/(20+2)"


def test_minmax_shares_add_up_to_client_side_min_max_fusion():
    scores = {"bm25": {"a": 4.0, "b": 2.0, "c": 1.0}, "vector": {"b": 0.9, "c": 0.5}}
    weights = {"bm25": 0.3, "vector": 0.7}
    shares = minmax_contributions(scores, "b", weights)
    # b: bm25 normalised (2-1)/(4-1) = 1/3, vector normalised 1.0
    assert [share.value for share in shares] == pytest.approx([0.3 / 3, 0.7])
    assert [share.rank for share in shares] == [2, 1]
    fused = dict(min_max_fusion([scores["bm25"], scores["vector"]], [0.3, 0.7]))
    assert sum(share.value for share in shares) == pytest.approx(fused["b"])
    missing = minmax_contributions(scores, "a", weights)
    assert (missing[1].rank, missing[1].value) == (None, 0.0)
    # A third, empty side keeps its weight in the denominator, as OpenSearch's mean does.
    three = minmax_contributions({**scores, "exact": {}}, "b", {**weights, "exact": 1.0})
    assert sum(share.value for share in three) == pytest.approx((0.3 / 3 + 0.7) / 2)


def test_fusion_weights_read_from_a_stored_pipeline():
    rrf_pipeline = {
        "request_processors": [{"script": {}}],
        "phase_results_processors": [
            {
                "score-ranker-processor": {
                    "combination": {
                        "technique": "rrf",
                        "rank_constant": 20,
                        "parameters": {"weights": [0.2, 0.2, 0.6]},
                    }
                }
            }
        ],
    }
    assert fusion_weights(rrf_pipeline, ["bm25", "vector", "exact"]) == ("rrf", 20, [0.2, 0.2, 0.6])
    minmax = {
        "phase_results_processors": [
            {"normalization-processor": {"combination": {"technique": "arithmetic_mean"}}}
        ]
    }
    assert fusion_weights(minmax, ["bm25", "vector"]) == ("min_max", 0, [1.0, 1.0])
    with pytest.raises(ConfigError):
        fusion_weights({}, ["bm25"])
    # By technique, not by processor: a normalization-processor is not always min-max.
    zscore = {
        "phase_results_processors": [
            {"normalization-processor": {"normalization": {"technique": "z_score"}}}
        ]
    }
    assert fusion_weights(zscore, ["bm25"]) == ("z_score", 0, [1.0])


def test_z_score_shares_add_up_to_client_side_z_score_fusion():
    scores = {"bm25": {"a": 4.0, "b": 2.5, "c": 1.0}, "vector": {"b": 0.9, "c": 0.5, "a": 0.1}}
    fusion = Fusion("z_score", "arithmetic_mean", weights=(0.3, 0.7))
    ranks = {"bm25": 2, "vector": 1}
    shares = contributions(fusion, ranks, scores, "b")
    fused = dict(
        weighted_arithmetic_mean(
            [z_score_normalize(scores["bm25"]), z_score_normalize(scores["vector"])], [0.3, 0.7]
        )
    )
    assert sum(share.value for share in shares) == pytest.approx(fused["b"])
    assert shares[0].formula.startswith("bm25: 0.3 x z_score ")
    # RRF from the ranks; a combination whose shares do not add up gives none.
    rrf_shares = contributions(Fusion("rrf", "rrf", 60), ranks, scores, "b")
    assert [share.value for share in rrf_shares] == pytest.approx([1 / 62, 1 / 61])
    assert contributions(Fusion("min_max", "harmonic_mean"), ranks, scores, "b") == []


def _explanation(*stages, cut=None, detail=""):
    return Explanation("refunds.md", stages=list(stages), cut=cut, cut_detail=detail)


def test_plain_words_found_missed_fused_and_cut_by_k():
    explanation = _explanation(
        StageRank("bm25", 3, 50, "c-1"),
        StageRank("vector", None, 50),
        StageRank("fused", 7, 50, "c-1"),
        StageRank("context", None, 5),
        cut="k",
        detail="cut by k=5",
    )
    assert plain_words(explanation) == (
        "found by BM25 at 3, missed by the vector side (rank > 50), fused to 7, cut by k=5"
    )


def test_plain_words_reranked_and_kept():
    explanation = _explanation(
        StageRank("bm25", 1, 50, "c"),
        StageRank("rerank", 2, 50, "c"),
        StageRank("context", 2, 5, "c"),
    )
    assert plain_words(explanation) == "found by BM25 at 1, reranked to 2, kept at 2 of 5"


def test_plain_words_of_the_cuts_before_retrieval():
    assert (
        plain_words(_explanation(StageRank("bm25", None, 50), cut="tenant", detail="tenant words"))
        == "tenant words"
    )
    candidates = _explanation(
        StageRank("bm25", None, 10),
        StageRank("vector", None, 10),
        StageRank("fused", None, 10),
        cut="candidates",
        detail="cut by candidates=10: no list ranked it in its top 10",
    )
    assert plain_words(candidates) == (
        "missed by BM25 (rank > 10), missed by the vector side (rank > 10), not in the fused "
        "list (rank > 10), cut by candidates=10: no list ranked it in its top 10"
    )


def test_the_report_names_the_reranker_that_ran() -> None:
    """explain's text and --json named no reranker: "reranked to 2" did not say whether the
    cross-encoder or which tenant's learned model ran (search --json names it)."""
    from loader.query.explanation import ExplainReport, format_report

    report = ExplainReport("refund help", "acme", "hybrid-rrf", 5, 50)
    assert report.to_dict()["reranker"] is None
    assert format_report(report)[-1].endswith("candidates 50, k 5, no rerank")
    report.reranker = {"kind": "learned", "model": "models/learned/acme"}
    assert report.to_dict()["reranker"] == {"kind": "learned", "model": "models/learned/acme"}
    assert format_report(report)[-1].endswith(
        "candidates 50, k 5, reranked by learned models/learned/acme"
    )
