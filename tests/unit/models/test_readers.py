"""The second reader the settings name: ``auto`` is bge-small-en-v1.5 exactly when its jar is on
the machine and the first reader is another model; ``none`` is one reader."""

from __future__ import annotations

import pytest

from loader.errors import ConfigError
from loader.models import readers
from loader.models.readers import reader_settings, second_reader
from loader.settings import Settings

BGE = "bge-small-en-v1.5"


@pytest.mark.parametrize(("jar", "expected"), [(True, BGE), (False, None)])
def test_auto_is_bge_when_its_jar_is_on_the_machine(monkeypatch, jar, expected):
    monkeypatch.setattr(readers, "jar_on_machine", lambda name: jar and name == BGE)
    assert second_reader("all-MiniLM-L6-v2", "auto") == expected
    assert second_reader("all-MiniLM-L6-v2", "none") is None
    assert second_reader("all-MiniLM-L6-v2", "") is None


def test_auto_adds_nothing_to_a_bge_index(monkeypatch):
    monkeypatch.setattr(readers, "jar_on_machine", lambda name: True)
    assert second_reader(BGE, "auto") is None
    assert second_reader("BAAI/bge-small-en-v1.5", "auto") is None


def test_a_named_second_reader_must_be_another_model():
    assert second_reader(BGE, "all-MiniLM-L6-v2") == "all-MiniLM-L6-v2"
    with pytest.raises(ConfigError, match="is the embedding_model again"):
        second_reader(BGE, "BAAI/bge-small-en-v1.5")


def test_the_second_reader_keeps_its_own_instructions_and_the_first_readers_runtime():
    settings = Settings(
        second_embedding_model=BGE,
        query_prefix="query: ",
        passage_prefix="passage: ",
        embedding_backend="onnx-int8",
        embedding_batch_size=16,
    )
    second = reader_settings(settings)
    assert (second.embedding_model, second.second_embedding_model) == (BGE, "none")
    assert (second.query_prefix, second.passage_prefix) == ("", "")  # bge's own, not these
    assert (second.embedding_backend, second.embedding_batch_size) == ("onnx-int8", 16)
    assert reader_settings(Settings(second_embedding_model="none")) is None
    own = reader_settings(settings.replace(second_embedding_backend="onnx"))
    assert (own.embedding_backend, own.second_embedding_backend) == ("onnx", "")
    inherited = reader_settings(settings.replace(second_embedding_backend=""))
    assert inherited.embedding_backend == "onnx-int8"  # empty: the first reader's
    assert reader_settings(Settings(second_embedding_model=BGE)).embedding_backend == "onnx-int8"
