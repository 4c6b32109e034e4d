"""Scratch folders: a new one removes those of its prefix and place that a killed process left
more than STALE_AFTER ago, and nothing else."""

from __future__ import annotations

import os
import time

from loader.models.scratch import STALE_AFTER, remove_stale, scratch_folder


def _folder(path, age: float):
    path.mkdir(parents=True)
    (path / "model.onnx").write_bytes(b"half written")
    then = time.time() - age
    os.utime(path, (then, then))
    return path


def test_a_new_scratch_folder_removes_the_stale_ones_of_its_prefix_only(tmp_path):
    cache = tmp_path / "models"
    stale = _folder(cache / ".export-k3x9", STALE_AFTER + 60)
    live = _folder(cache / ".export-a1b2", 60)  # another process, still at work
    other = _folder(cache / ".quantize-z9y8", STALE_AFTER + 60)  # another step's
    model = _folder(cache / "all-MiniLM-L6-v2-0123456789abcdef", STALE_AFTER + 60)

    made = scratch_folder(cache, ".export-")

    assert made.is_dir() and made.parent == cache and made.name.startswith(".export-")
    assert not list(made.iterdir())
    assert not stale.exists()
    assert live.is_dir() and other.is_dir() and model.is_dir()


def test_a_file_with_the_prefix_is_not_a_scratch_folder(tmp_path):
    (tmp_path / ".export-notes.txt").write_text("mine", encoding="utf-8")
    then = time.time() - 2 * STALE_AFTER
    os.utime(tmp_path / ".export-notes.txt", (then, then))
    assert remove_stale(tmp_path, ".export-") == []
    assert (tmp_path / ".export-notes.txt").is_file()


def test_a_missing_place_is_made(tmp_path):
    made = scratch_folder(tmp_path / "new" / "cache", ".extract-")
    assert made.is_dir() and made.parent == tmp_path / "new" / "cache"
