"""The rerank setting is auto, on or off, auto by default; true and false (TOML booleans, any
spelling in the environment, ``Settings(rerank=False)``) still mean on and off."""

from __future__ import annotations

import pytest

from loader.errors import ConfigError
from loader.models.rerank.check import default_rerank, reranker_problem
from loader.resolve import resolve_settings
from loader.settings import Settings


def test_auto_is_the_default_and_booleans_keep_their_meaning(tmp_path):
    assert Settings().rerank == "auto"
    assert (Settings(rerank=False).rerank, Settings(rerank=True).rerank) == ("off", "on")
    for value, meant in (("false", "off"), ("0", "off"), ("Yes", "on"), ("auto", "auto")):
        settings, sources = resolve_settings(
            config_path=_empty(tmp_path), env={"LOADER_RERANK": value}
        )
        assert (settings.rerank, sources["rerank"]) == (meant, "$LOADER_RERANK")
    config = tmp_path / "bool.toml"
    config.write_text("rerank = false\n", encoding="utf-8")
    assert resolve_settings(config_path=config, env={})[0].rerank == "off"
    with pytest.raises(ConfigError, match="setting 'rerank' from \\$LOADER_RERANK must be one of"):
        resolve_settings(config_path=_empty(tmp_path), env={"LOADER_RERANK": "sometimes"})


def test_auto_is_decided_from_the_files(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    folder = tmp_path / "cross-encoder"
    folder.mkdir()
    assert reranker_problem(str(folder)).startswith(f"reranker_model '{folder}': folder ")
    (folder / "config.json").write_text('{"id2label": {"0": "a", "1": "b"}}', encoding="utf-8")
    assert "has 2 output labels" in reranker_problem(str(folder))
    (folder / "config.json").write_text('{"num_labels": 1}', encoding="utf-8")
    assert reranker_problem(str(folder)) is None
    assert default_rerank(Settings(reranker_model=str(folder))) == (True, None)
    # A hub name is found in the model cache, as sentence-transformers finds it offline.
    name = "acme/tiny-reranker"
    assert "is neither a folder nor in the model cache" in reranker_problem(name)
    snapshot = tmp_path / "hub" / "models--acme--tiny-reranker" / "snapshots" / "abc123"
    snapshot.mkdir(parents=True)
    (snapshot / "config.json").write_text('{"num_labels": 1}', encoding="utf-8")
    assert reranker_problem(name) is None
    rerank, warning = default_rerank(Settings(reranker_model="acme/other"))
    assert not rerank and warning.startswith("no rerank (rerank = auto): reranker_model ")
    assert default_rerank(Settings(reranker_model="acme/other", rerank="off")) == (False, None)


def _empty(tmp_path):
    config = tmp_path / "empty.toml"
    config.write_text("", encoding="utf-8")
    return config
