"""drop_local_onnx_exports deletes a scratch folder's exports, found by its name, and no other."""

from __future__ import annotations

from pathlib import Path

from loader.models.onnx_file import drop_local_onnx_exports

FINGERPRINT = "0123456789abcdef"


def test_only_the_folders_own_exports_are_dropped(tmp_path: Path):
    cache = tmp_path / "cache"
    names = [
        f".adapt-k3x_9-{FINGERPRINT}",  # the scratch folder's export: dropped
        f".adapt-k3x_9-{FINGERPRINT[::-1]}",  # another export format: dropped too
        ".adapt-k3x_9-notafingerprint",  # not an export
        f".adapt-k3x_9x-{FINGERPRINT}",  # another folder whose name starts alike
        f"all-MiniLM-L6-v2-{FINGERPRINT}",  # a model in use
    ]
    for name in names:
        (cache / name).mkdir(parents=True)
        (cache / name / "model.onnx").write_bytes(b"onnx")
    dropped = drop_local_onnx_exports(tmp_path / "models" / ".adapt-k3x_9", cache_root=cache)
    assert sorted(path.name for path in dropped) == sorted(names[:2])
    assert sorted(path.name for path in cache.iterdir()) == sorted(names[2:])


def test_a_folder_with_special_characters_in_its_name_matches_itself_only(tmp_path: Path):
    cache = tmp_path / "cache"
    for name in (f"run[1]-{FINGERPRINT}", f"run1-{FINGERPRINT}"):
        (cache / name).mkdir(parents=True)
    drop_local_onnx_exports(tmp_path / "run[1]", cache_root=cache)
    assert [path.name for path in cache.iterdir()] == [f"run1-{FINGERPRINT}"]


def test_a_missing_cache_drops_nothing(tmp_path: Path):
    assert drop_local_onnx_exports(tmp_path / "scratch", cache_root=tmp_path / "none") == []
