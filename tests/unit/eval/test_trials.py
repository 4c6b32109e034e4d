"""The pure core of a trial: fusion of sub-query lists as OpenSearch fuses them (RRF by rank and
weight, z-score and min-max by normalised score, 32-bit ties to the chunk first in the index), one
hit per document, nDCG@10 now and tried, and what a trial may set."""

from __future__ import annotations

import math

import pytest

from loader.errors import ConfigError
from loader.eval.trials import (
    SubHit,
    best_trial,
    check_trial,
    fused_sources,
    sweep_lines,
    sweep_summary,
    sweep_trials,
    toml_lines,
    trial_from_options,
    trial_lines,
    trial_table,
)
from loader.modes import Fusion

BM25 = [SubHit("a#0", "a", "a.md", 9.0, 3), SubHit("b#0", "b", "b.md", 5.0, 1),
        SubHit("a#1", "a", "a.md", 4.0, 4)]  # fmt: skip
VECTOR = [SubHit("c#0", "c", "c.md", 0.9, 2), SubHit("b#0", "b", "b.md", 0.8, 1),
          SubHit("d#0", "d", "d.md", 0.1, 5)]  # fmt: skip


def test_rrf_weights_move_the_documents():
    # Equal weights: b is on both sides (1/62 + 1/62) and beats a and c (1/61 each).
    assert fused_sources([BM25, VECTOR], Fusion("rrf", "rrf", 60, (0.5, 0.5))) == [
        "b.md", "c.md", "a.md", "d.md"]  # fmt: skip
    # BM25 alone: its order, then the vector side's documents at 0, in index order.
    assert fused_sources([BM25, VECTOR], Fusion("rrf", "rrf", 60, (1.0, 0.0))) == [
        "a.md", "b.md", "c.md", "d.md"]  # fmt: skip
    # A tie (a and c, 1/61 each at equal weights without b) goes to the chunk first in the index.
    assert fused_sources([BM25[:1], VECTOR[:1]], Fusion("rrf", "rrf", 60, (0.5, 0.5))) == [
        "c.md", "a.md"]  # fmt: skip


def test_min_max_fusion_and_one_hit_per_document():
    fused = fused_sources([BM25, VECTOR], Fusion("min_max", "arithmetic_mean", 0, (0.9, 0.1)))
    # a: 0.9*1 = 0.9; b: 0.9*0.2 + 0.1*0.875 = 0.2675; c: 0.1*1; d: 0.1*0.001; a#1 collapsed.
    assert fused == ["a.md", "b.md", "c.md", "d.md"]
    # Equal weights: b (0.2 + 0.875) / 2, then a and c tie at 0.5: c is first in the index.
    assert fused_sources([BM25, VECTOR], Fusion("min_max", "arithmetic_mean"), k=2) == [
        "b.md", "c.md"]  # fmt: skip
    with pytest.raises(ConfigError, match="arithmetic_mean"):
        fused_sources([BM25], Fusion("min_max", "geometric_mean"))


def test_the_table_scores_now_and_tried_with_the_same_grades():
    graded = [[{"source": "a.md", "grade": 2}], [], [{"source": "c.md", "grade": 1}]]
    now = [["b.md", "a.md"], ["a.md"], ["c.md"]]
    tried = [["a.md", "b.md"], ["b.md"], ["c.md"]]
    result = trial_table(["q0", "q1", "q2"], graded, now, tried)
    first, second, third = result["questions"]
    assert (first["now"], first["trial"]) == pytest.approx((1 / math.log2(3), 1.0))
    assert first["direction"] == "better" and first["delta"] == pytest.approx(1 - 1 / math.log2(3))
    assert second["now"] is None and second["delta"] is None  # nothing graded
    assert third["direction"] == "unchanged"
    assert result["counts"] == {"better": 1, "worse": 0, "unchanged": 1}
    assert result["means"]["questions"] == 2
    assert result["means"]["now"] == pytest.approx((1 / math.log2(3) + 1) / 2)
    assert result["means"]["trial"] == pytest.approx(1.0)
    shown = result | {"mode_now": "hybrid-rrf", "mode_trial": "hybrid-rrf",
                      "toml": toml_lines({"rrf_bm25_weight": 0.4})}  # fmt: skip
    lines = trial_lines(shown)
    assert lines[1].startswith("   2  1.0000 -> 1.0000 =")  # worst loss first, then unchanged
    assert "  rrf_bm25_weight = 0.4" in lines


def test_a_trial_takes_fusion_settings_only_and_names_a_bad_one():
    assert check_trial({"rrf_rank_constant": "20", "bm25_weight": 1}) == {
        "rrf_rank_constant": 20, "bm25_weight": 1.0}  # fmt: skip
    assert toml_lines({"search_mode": "hybrid-minmax"}) == ['search_mode = "hybrid-minmax"']
    refused = {
        "chunk_strategy": ("fixed", "chunking setting"),
        "embedding_model": ("x", "model setting"),
        "number_of_shards": (2, "index setting"),
        "candidates": (10, "query setting"),
        "rrf_bm25_weight": (1.5, "between 0 and 1"),
        "exact_weight": ("nan", "finite"),
        "rrf_rank_constant": (2.5, "whole number"),
        "second_reader_share": (True, "a number"),
        "search_mode": ("bm25", "hybrid-rrf, hybrid-minmax, hybrid-zscore"),
        "no_such": (1, "not a setting"),
    }
    for name, (value, said) in refused.items():
        with pytest.raises(ConfigError, match=said) as raised:
            check_trial({name: value})
        assert repr(name) in str(raised.value), name
    for empty in ({}, [], "rrf_bm25_weight=1", None):
        with pytest.raises(ConfigError, match="settings: "):
            check_trial(empty)


def test_a_sweep_is_one_trial_per_value_each_checked():
    assert sweep_trials({"rrf_rank_constant": 20}, {"rrf_bm25_weight": "0.3, 0.5"}) == [
        {"rrf_rank_constant": 20, "rrf_bm25_weight": 0.3},
        {"rrf_rank_constant": 20, "rrf_bm25_weight": 0.5},
    ]
    assert sweep_trials({}, {"search_mode": ["hybrid-rrf", "hybrid-minmax"]})[1] == {
        "search_mode": "hybrid-minmax"
    }
    refused = {
        "one setting": {},
        "2 to 10": {"rrf_bm25_weight": [0.3]},
        "sweep it or set it": {"rrf_rank_constant": [10, 20]},
        "twice": {"rrf_bm25_weight": "0.5,0.50"},
        "'rrf_bm25_weight'": {"rrf_bm25_weight": [0.3, 1.5]},
        "chunk_strategy": {"chunk_strategy": ["fixed", "structure"]},
    }
    for message, sweep in refused.items():
        with pytest.raises(ConfigError, match=message):
            sweep_trials({"rrf_rank_constant": 20}, sweep)
    with pytest.raises(ConfigError, match="2 to 10"):
        sweep_trials({}, {"rrf_bm25_weight": [round(0.05 * n, 2) for n in range(11)]})


def test_the_best_value_is_the_highest_mean_tried_the_first_of_equals():
    def table(mean):
        return {"means": {"now": 0.5, "trial": mean, "delta": None}, "counts": {}}

    assert best_trial([table(0.4), table(0.7), table(0.7)]) == 1
    assert best_trial([table(None), table(0.1)]) == 1
    assert best_trial([table(None), table(None)]) == 0
    trials = [{"rrf_bm25_weight": 0.3}, {"rrf_bm25_weight": 0.5}]
    summary = sweep_summary("rrf_bm25_weight", trials, [table(0.6), table(0.4)])
    assert summary["best"] == 0.3
    assert [row["value"] for row in summary["values"]] == [0.3, 0.5]
    values = [
        {"value": 0.3, "means": {"trial": 0.6, "delta": 0.1}, "counts": {"better": 1, "worse": 0}},
        {"value": 0.5, "means": {"trial": 0.4, "delta": -0.1}, "counts": {"better": 0, "worse": 1}},
    ]
    lines = sweep_lines({"sweep": summary | {"values": values}, "means": {"now": 0.5}})
    assert lines[1] == "  rrf_bm25_weight = 0.3: 0.6000 (+0.1000), 1 better, 0 worse  <- best"
    assert lines[-1] == "the best value, rrf_bm25_weight = 0.3, question by question:"


def test_the_command_lines_options_are_checked_before_any_search():
    assert trial_from_options(["rrf_bm25_weight=0.4"], None) == ({"rrf_bm25_weight": 0.4}, None)
    assert trial_from_options(["rrf_rank_constant=20"], "rrf_bm25_weight=0.3,0.5") == (
        {"rrf_rank_constant": "20"},
        {"rrf_bm25_weight": "0.3,0.5"},
    )
    refused = {
        "give --set NAME=VALUE or --sweep": ([], None),
        "--set 'rrf_bm25_weight'": (["rrf_bm25_weight"], None),
        "--sweep '=0.3,0.5'": ([], "=0.3,0.5"),
        "2 to 10": ([], "rrf_bm25_weight=0.3"),
        "chunk_strategy": (["chunk_strategy=fixed"], None),
    }
    for message, (assignments, sweep) in refused.items():
        with pytest.raises(ConfigError, match=message):
            trial_from_options(assignments, sweep)
