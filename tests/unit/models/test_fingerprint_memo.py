"""``model_fingerprint`` hashes a model's files once: later processes read the result kept under
the files' identity, and any write to a file (even one keeping its size) is a new fingerprint."""

from __future__ import annotations

from loader.models.onnx_file import model_fingerprint


def test_the_fingerprint_is_kept_and_follows_every_write(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "cache"))
    model = tmp_path / "model"
    model.mkdir()
    (model / "config.json").write_text('{"hidden_size": 384}', encoding="utf-8")
    (model / "tokenizer.json").write_text("{}", encoding="utf-8")
    first = model_fingerprint(model)
    (memo,) = (tmp_path / "cache" / "loader" / "models" / "fingerprints").iterdir()
    assert memo.read_text(encoding="ascii") == first
    assert model_fingerprint(model) == first  # read back, not hashed again
    (model / "config.json").write_text('{"hidden_size": 512}', encoding="utf-8")  # same size
    second = model_fingerprint(model)
    assert second != first
    # Content decides, not the path or times: a fresh copy of the same bytes has the same one.
    (model / "config.json").write_text('{"hidden_size": 384}', encoding="utf-8")
    assert model_fingerprint(model) == first
