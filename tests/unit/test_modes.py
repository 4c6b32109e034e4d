"""The mode registry: every record's files exist and its rendered pipeline reads back as its own
technique, the settings, the CLI, tune and the names all list the same modes, and a pipeline is
read by its technique."""

from __future__ import annotations

import pytest

from loader.errors import ConfigError
from loader.eval.tune import TUNE_SPACE
from loader.index.render import config_names, list_config_files, render_config
from loader.modes import (
    HYBRID_MODES,
    MODES,
    SEARCH_MODES,
    Fusion,
    SearchMode,
    modes_tuning,
    read_fusion,
    search_mode,
)
from loader.settings import Settings, setting_choices, setting_help


def test_every_mode_has_its_files_and_its_pipeline_reads_back_as_its_technique(tmp_path):
    files = set(list_config_files(project_dir=tmp_path))
    config = render_config(Settings(index_name="kb"), 384, project_dir=tmp_path)
    for mode in MODES:
        assert f"search_templates/{mode.template}.json.j2" in files, mode.name
        template, pipeline = config_names("kb").for_search_mode(mode.name)
        assert template == f"kb-{mode.template}" and template in config.search_templates
        if not mode.hybrid:
            assert pipeline is None
            continue
        assert f"pipelines/search/{mode.pipeline}.json.j2" in files, mode.name
        fusion = read_fusion(config.search_pipelines[pipeline])
        assert (fusion.technique, fusion.combination) == (mode.technique, mode.combination)
        assert fusion.mode() == mode
        # One weight per sub-query of the hybrid template: BM25, vector, exact.
        assert len(fusion.weights) == 3 and sum(fusion.weights) == pytest.approx(1.0)


def test_the_settings_tune_and_the_names_list_the_registrys_modes():
    assert setting_choices("search_mode") == SEARCH_MODES == tuple(m.name for m in MODES)
    assert set(HYBRID_MODES) == {m.name for m in MODES if m.pipeline}
    assert TUNE_SPACE["search_mode"] == HYBRID_MODES
    for mode in MODES:
        assert f"{mode.name} ({mode.summary})" in setting_help()["search_mode"]
        for setting in mode.tunes:
            assert setting in TUNE_SPACE and mode.name in modes_tuning(setting)
    assert modes_tuning("bm25_weight") == tuple(m.name for m in MODES if "bm25_weight" in m.tunes)
    assert modes_tuning("candidates") == ()
    assert not search_mode("bm25").embeds and search_mode("vector").embeds
    with pytest.raises(ConfigError, match="search_mode 'nope' is not one of bm25, vector"):
        search_mode("nope")


def test_a_record_must_be_consistent():
    with pytest.raises(ValueError, match="a pipeline and a technique go together"):
        SearchMode("x", "x", template="hybrid", pipeline="x")
    with pytest.raises(ValueError, match="combination must be one of"):
        SearchMode("x", "x", template="hybrid", pipeline="x", technique="z_score")
    with pytest.raises(ValueError, match="unknown technique"):
        SearchMode("x", "x", template="hybrid", pipeline="x", technique="max", combination="rrf")


def _normalization(body):
    return {"phase_results_processors": [{"normalization-processor": body}]}


def test_a_pipeline_is_read_by_its_technique():
    assert read_fusion(_normalization({})) == Fusion("min_max", "arithmetic_mean")
    zscore = read_fusion(
        _normalization(
            {
                "normalization": {"technique": "z_score"},
                "combination": {"parameters": {"weights": [0.2, 0.8]}},
            }
        )
    )
    assert zscore == Fusion("z_score", "arithmetic_mean", 0, (0.2, 0.8))
    assert zscore.score_bound() is None and zscore.side_weights(2) == [0.2, 0.8]
    l2 = read_fusion(_normalization({"normalization": {"technique": "l2"}}))
    assert (l2.technique, l2.score_bound(), l2.mode()) == ("l2", 1.0, None)
    rrf = read_fusion(
        {
            "request_processors": [{"script": {}}],
            "phase_results_processors": [
                {"score-ranker-processor": {"combination": {"technique": "rrf"}}}
            ],
        }
    )
    assert rrf == Fusion("rrf", "rrf", 60) and rrf.score_bound(3) == pytest.approx(3 / 61)
    assert rrf.mode() == search_mode("hybrid-rrf")
    with pytest.raises(ConfigError, match="unknown normalization 'max'"):
        read_fusion(_normalization({"normalization": {"technique": "max"}}))
    with pytest.raises(ConfigError, match="no score-ranker or normalization processor"):
        read_fusion({"phase_results_processors": [{"other": {}}]})
