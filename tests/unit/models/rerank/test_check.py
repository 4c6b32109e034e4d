"""The rerank setting is auto, on or off, auto by default; true and false (TOML booleans, any
spelling in the environment, ``Settings(rerank=False)``) still mean on and off. Which reranker a
search uses: a cross-encoder when one loads, else the learned model when one is configured,
else none (``choose_reranker``), from the files alone."""

from __future__ import annotations

import json
import logging

import pytest

from loader.errors import ConfigError, RerankerUnavailableError
from loader.models.rerank import load_reranker
from loader.models.rerank.check import (
    LEARNED_MODEL_FILE,
    choose_reranker,
    default_rerank,
    require_rerank,
    reranker_problem,
)
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


# --- rerank = auto's choice: a cross-encoder when one loads, else the learned model -------------


def _cross_encoder(tmp_path):
    folder = tmp_path / "cross-encoder"
    folder.mkdir()
    (folder / "config.json").write_text('{"num_labels": 1}', encoding="utf-8")
    return str(folder)


def _learned(tmp_path, name="learned", tenant="A", **facts):
    """The folder of the learned rerankers, holding tenant ``tenant``'s model (its booster's
    text need not be a booster: the choice reads the files only)."""
    folder = tmp_path / name / tenant
    folder.mkdir(parents=True)
    (folder / LEARNED_MODEL_FILE).write_text("tree\n", encoding="utf-8")
    provenance = {"model": {"tenant": tenant, **facts}}
    (folder / "provenance.json").write_text(json.dumps(provenance), encoding="utf-8")
    return str(tmp_path / name)


@pytest.fixture
def torch_here(monkeypatch):
    """The torch extra counted as installed: the choice is made from the files alone."""
    from loader.models import torch_extra

    monkeypatch.setattr(torch_extra, "torch_extra_missing", lambda: False)


def test_auto_takes_the_cross_encoder_first_then_the_learned_model_then_none(
    tmp_path, monkeypatch, torch_here, caplog
):
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path / "hub"))
    cross, learned = _cross_encoder(tmp_path), _learned(tmp_path)
    both = Settings(reranker_model=cross, learned_reranker=learned)
    assert (choose_reranker(both).kind, choose_reranker(both).model) == ("cross-encoder", cross)
    assert default_rerank(both) == (True, None)

    missing = str(tmp_path / "no-such-cross-encoder")
    fallback = Settings(reranker_model=missing, learned_reranker=learned)
    choice = choose_reranker(fallback, "A")
    assert (choice.kind, choice.model) == ("learned", f"{learned}/A")  # tenant A's own
    assert "no cross-encoder" in choice.line and missing in choice.line
    with caplog.at_level(logging.WARNING, logger="loader.models.rerank.check"):
        assert default_rerank(fallback, "A") == (True, None)
        assert default_rerank(fallback, "A") == (True, None)
    said = [r.getMessage() for r in caplog.records if "the learned reranker" in r.getMessage()]
    assert len(said) == 1 and learned in said[0]  # one line, once per process
    # Tenant B has no model: no rerank, and the warning says whose model is missing.
    rerank, warning = default_rerank(fallback, "B")
    assert not rerank and "holds no model for tenant 'B'" in warning

    neither = Settings(reranker_model=missing)
    assert choose_reranker(neither).kind == ""
    rerank, warning = default_rerank(neither)
    assert not rerank and warning.startswith("no rerank (rerank = auto): reranker_model")
    with pytest.raises(RerankerUnavailableError, match="rerank is on but reranker_model"):
        require_rerank(neither.replace(rerank="on"))


def test_the_learned_model_is_named_by_either_setting(tmp_path, torch_here):
    learned = _learned(tmp_path)
    # reranker_model naming a learned model's folder turns it on, whatever rerank_backend.
    assert choose_reranker(Settings(reranker_model=f"{learned}/A"), "A").kind == "learned"
    by_backend = Settings(rerank_backend="learned", learned_reranker=learned)
    assert (choose_reranker(by_backend, "A").kind, choose_reranker(by_backend, "A").model) == (
        "learned",
        f"{learned}/A",
    )
    # keyword stays keyword: it names no model.
    assert choose_reranker(Settings(rerank_backend="keyword", learned_reranker=learned)).kind == (
        "keyword"
    )


def test_a_learned_setting_that_names_no_model_says_which(tmp_path, torch_here):
    unset = choose_reranker(Settings(rerank_backend="learned"))
    assert unset.kind == "" and "needs learned_reranker" in unset.problem
    empty = tmp_path / "empty"
    empty.mkdir()
    wrong = choose_reranker(Settings(rerank_backend="learned", learned_reranker=str(empty)), "A")
    assert wrong.kind == "" and "holds no model for tenant 'A'" in wrong.problem
    gone = choose_reranker(Settings(rerank_backend="learned", learned_reranker="/no/such"))
    assert "there is no folder" in gone.problem
    with pytest.raises(RerankerUnavailableError, match="learned_reranker '/no/such'"):
        load_reranker(Settings(rerank_backend="learned", learned_reranker="/no/such"))
