"""An ONNX file made here from a model's files (a local export, an int8 copy) that cannot be
loaded (a process killed while writing it, a damaged disk) is deleted and made again on the next
load, with a warning; a file this package did not make is never deleted."""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from loader.errors import ModelError
from loader.models import embedding
from loader.models.onnx_file import discard_derived_copy
from loader.models.registry import INT8_RECIPE

INT8_NAME = f"model_int8-{INT8_RECIPE}.onnx"
MINILM = "all-MiniLM-L6-v2"


def _file(path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"not onnx")
    return path


def test_only_copies_made_here_are_discarded(tmp_path):
    cache = tmp_path / "cache"
    int8 = _file(cache / "bge-small-en-v1.5" / INT8_NAME)
    agreement = _file(int8.with_name(int8.name + ".cpu-agreement.json"))
    export = _file(cache / "all-MiniLM-L6-v2-0123456789abcdef" / "model.onnx")
    jar_file = _file(cache / "bge-small-en-v1.5" / "model.onnx")  # extracted from a jar
    own = _file(tmp_path / "mine-0123456789abcdef" / "model.onnx")  # outside the cache

    assert discard_derived_copy(int8, cache_root=cache)
    assert not int8.exists() and not agreement.exists()
    assert discard_derived_copy(export, cache_root=cache)
    assert not export.parent.exists()
    assert not discard_derived_copy(jar_file, cache_root=cache) and jar_file.is_file()
    assert not discard_derived_copy(own, cache_root=cache) and own.is_file()


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    """An empty model cache, and no encoder of another test's cache loaded in this process."""
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    _forget_loaded()
    yield
    _forget_loaded()


def _forget_loaded() -> None:
    embedding._embedder.cache_clear()
    embedding._load_onnx_encoder.cache_clear()


@pytest.mark.parametrize("backend", ["onnx", "onnx-int8"])
def test_a_truncated_copy_is_made_again(fresh_cache, backend, caplog):
    path = embedding.resolve_model_path(MINILM)
    made = embedding.onnx_model_file(MINILM, path, backend)
    texts = ["Refunds are paid back within five working days.", "printer error E1043"]
    expected = embedding.get_embedder(MINILM, backend=backend).embed_passages(texts)
    size = made.stat().st_size
    with made.open("r+b") as handle:  # as a process killed mid-write leaves it
        handle.truncate(size // 3)
    _forget_loaded()

    with caplog.at_level(logging.WARNING, logger="loader.models.embedding"):
        vectors = embedding.get_embedder(MINILM, backend=backend).embed_passages(texts)
    assert np.allclose(vectors, expected, atol=1e-6)
    assert made.stat().st_size == size
    assert f"cannot load ONNX embedding model {made}" in caplog.text
    assert "made again" in caplog.text


def test_a_damaged_file_not_made_here_still_fails_with_its_name(fresh_cache, tmp_path):
    folder = Path(embedding.resolve_model_path(MINILM))
    onnx_path = _file(tmp_path / "elsewhere" / "model.onnx")
    tokenizer = folder / "tokenizer.json"
    from loader.models.onnx_embedding import OnnxEncoder
    from loader.models.registry import model_spec

    with pytest.raises(ModelError, match=f"cannot load ONNX embedding model {onnx_path}"):
        OnnxEncoder(onnx_path, tokenizer, model_spec(MINILM))
    assert onnx_path.is_file()
