"""A damaged learned model never kills the process (issue #52, item 2): a real booster file,
truncated at 28 points and with 30 of its fields edited, is a ``ModelError`` naming the file --
refused by its recorded size and SHA-256, and, with the provenance rewritten to match the damage,
by the line-by-line check before LightGBM reads a byte; files LightGBM crashes on kill only the
child process that tries them first. The provenance's kind of file, size and values are checked
(a FIFO, /dev/zero, a NaN weight, a list), a folder without a recorded hash is refused, and a
changed folder is read again while the model read before keeps serving until the new one passes.

No cluster: the booster is trained on synthetic examples (``test_learned.synthetic``).
"""

from __future__ import annotations

import json
import logging
import os
import re
import shutil
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

from loader.errors import ModelError
from loader.models.rerank.check import LEARNED_MODEL_FILE
from loader.models.rerank.features import feature_fingerprint
from loader.models.rerank.learned import LearnedReranker, load_learned
from loader.models.rerank.learned_files import (
    PROVENANCE_FILE,
    CheckedModel,
    model_file_facts,
    probe_booster,
    read_checked,
)
from loader.train.booster import train_booster
from loader.train.learn import LearnRequest
from loader.train.model_store import write_model
from tests.unit.models.rerank.test_learned import synthetic

TRUNCATIONS = 28


def train(folder: Path, rounds: int, seed: int, tenant: str = "A") -> Path:
    request = LearnRequest(sources=("synthetic",), out=Path("unused"), rounds=rounds, seed=seed)
    booster = train_booster(synthetic(120, seed=seed), request)
    provenance = {
        "model": {"feature_fingerprint": feature_fingerprint(), "feature_version": 1,
                  "prior_scale": 2.0, "residual_weight": 0.5, "tenant": tenant}
    }  # fmt: skip
    write_model(folder, booster, provenance)
    return folder


@pytest.fixture(scope="module")
def trained(tmp_path_factory) -> Path:
    return train(tmp_path_factory.mktemp("learned"), rounds=20, seed=1)


def copy_with(source: Path, folder: Path, data: bytes, reseal: bool) -> Path:
    """A copy of the model folder ``source`` whose booster file holds ``data``; ``reseal``: its
    provenance rewritten to record that file's size and hash (a hostile, consistent edit)."""
    shutil.copytree(source, folder)
    (folder / LEARNED_MODEL_FILE).write_bytes(data)
    if reseal:
        provenance = json.loads((folder / PROVENANCE_FILE).read_text(encoding="utf-8"))
        provenance["model"].update(model_file_facts(data))
        (folder / PROVENANCE_FILE).write_text(json.dumps(provenance), encoding="utf-8")
    return folder


def with_provenance(source: Path, folder: Path, **changes) -> Path:
    shutil.copytree(source, folder)
    provenance = json.loads((folder / PROVENANCE_FILE).read_text(encoding="utf-8"))
    provenance["model"].update(changes)
    (folder / PROVENANCE_FILE).write_text(json.dumps(provenance), encoding="utf-8")
    return folder


# --- the edits: each a function of the booster's text ---------------------------------------------


def reseal_sizes(text: str) -> str:
    """``tree_sizes`` recomputed from the trees as they now are (the edit made consistent)."""
    starts = [match.start() for match in re.finditer(r"^Tree=", text, re.M)]
    end = text.find("end of trees")
    if end < 0:
        return text
    sizes = [b - a for a, b in zip(starts, [*starts[1:], end], strict=True)]
    sized = "tree_sizes=" + " ".join(map(str, sizes))
    return re.sub(r"^tree_sizes=.*$", sized, text, count=1, flags=re.M)


def in_tree(key: str, value: Callable[[str], str]) -> Callable[[str], str]:
    """An edit of line ``key=`` of the first tree with more than two leaves (a real split tree):
    its value becomes ``value(old value)``."""

    def edit(text: str) -> str:
        start = re.search(r"^num_leaves=([3-9]|\d\d+)$", text, re.M).start()
        line = re.compile(rf"^{key}=(.*)$", re.M).search(text, start)
        assert line is not None, key
        return text[: line.start()] + f"{key}={value(line[1])}" + text[line.end() :]

    return edit


def in_header(key: str, value: str, old: str = ".*") -> Callable[[str], str]:
    """An edit of the header's line ``key=``: its ``old`` part becomes ``value``."""
    return lambda text: re.sub(rf"^{key}={old}", f"{key}={value}", text, count=1, flags=re.M)


def first_value(new: str) -> Callable[[str], str]:
    return lambda old: " ".join([new, *old.split(" ")[1:]])


def cycle(old: str) -> str:
    """Node 1's left child made node 1 itself: LightGBM's walk would never end."""
    values = old.split(" ")
    values[1] = "1"
    return " ".join(values)


EDITS: dict[str, Callable[[str], str]] = {
    "num_class=0": in_header("num_class", "0"),
    "num_class=99999999": in_header("num_class", "99999999"),
    "max_feature_idx=2": in_header("max_feature_idx", "2"),
    "max_feature_idx=-5": in_header("max_feature_idx", "-5"),
    "num_tree_per_iteration=0": in_header("num_tree_per_iteration", "0"),
    "objective=multiclass": in_header("objective", "multiclass num_class:3"),
    "feature_names one short": in_header("feature_names", "", old=r"\S+ "),
    "feature_infos one short": in_header("feature_infos", "", old=r"\S+ "),
    "tree_sizes=9999999": in_header("tree_sizes", "9999999", old=r"\d+"),
    "tree_sizes=-1": in_header("tree_sizes", "-1", old=r"\d+"),
    "num_leaves=1000": in_tree("num_leaves", lambda old: "1000"),
    "num_leaves=-3": in_tree("num_leaves", lambda old: "-3"),
    "num_leaves=3": in_tree("num_leaves", lambda old: "3"),
    "split_feature=999": in_tree("split_feature", first_value("999")),
    "split_feature=-7": in_tree("split_feature", first_value("-7")),
    "threshold=nan": in_tree("threshold", first_value("nan")),
    "threshold=1e999": in_tree("threshold", first_value("1e999")),
    "leaf_value=garbage": in_tree("leaf_value", first_value("garbage")),
    "leaf_value=NaN": in_tree("leaf_value", first_value("NaN")),
    "leaf_value one short": in_tree("leaf_value", lambda old: old.rsplit(" ", 1)[0]),
    "left_child=100": in_tree("left_child", first_value("100")),
    "right_child=-200": in_tree("right_child", first_value("-200")),
    "left_child cycle": in_tree("left_child", cycle),
    "decision_type=255": in_tree("decision_type", first_value("255")),
    "decision_type=1 (categorical)": in_tree("decision_type", first_value("1")),
    "num_cat=5": in_tree("num_cat", lambda old: "5"),
    "is_linear=1": in_tree("is_linear", lambda old: "1"),
    "a NUL byte": in_tree("shrinkage", lambda old: old + "\0"),
    "no end of trees": lambda text: text.replace("end of trees", "", 1),
    "[linear_tree: 1]": lambda text: text.replace("[linear_tree: 0]", "[linear_tree: 1]"),
}


# --- the matrix -----------------------------------------------------------------------------------


@pytest.mark.parametrize("point", range(TRUNCATIONS))
def test_every_truncation_is_a_model_error_naming_the_file(trained, tmp_path, point):
    data = (trained / LEARNED_MODEL_FILE).read_bytes()
    cut = data[: len(data) * point // TRUNCATIONS]
    damaged = copy_with(trained, tmp_path / "damaged", cut, reseal=False)
    file = re.escape(str(damaged / LEARNED_MODEL_FILE))
    with pytest.raises(ModelError, match=rf"{file}(: its SHA-256 is | is [\d,]+ bytes, )"):
        LearnedReranker(damaged)
    # Provenance rewritten to match: refused by the text's own check, LightGBM never called.
    resealed = copy_with(trained, tmp_path / "resealed", cut, reseal=True)
    file = re.escape(str(resealed / LEARNED_MODEL_FILE))
    empty = "provenance .*: model.file_bytes is 0, not between 1"
    with pytest.raises(ModelError, match=rf"learned reranker ({file}, line \d+: |{empty})"):
        read_checked(resealed)


@pytest.mark.parametrize("edit", EDITS, ids=list(EDITS))
def test_every_field_edit_is_a_model_error_naming_the_file(trained, tmp_path, edit):
    text = (trained / LEARNED_MODEL_FILE).read_text(encoding="ascii")
    edited = EDITS[edit](text)
    assert edited != text
    damaged = copy_with(trained, tmp_path / "damaged", edited.encode(), reseal=False)
    with pytest.raises(ModelError, match=re.escape(str(damaged / LEARNED_MODEL_FILE))):
        LearnedReranker(damaged)
    # The same edit made consistent: tree_sizes recomputed, provenance rewritten to match.
    data = (edited if edit.startswith("tree_sizes") else reseal_sizes(edited)).encode()
    resealed = copy_with(trained, tmp_path / "resealed", data, reseal=True)
    file = re.escape(str(resealed / LEARNED_MODEL_FILE))
    with pytest.raises(ModelError, match=rf"learned reranker {file}, line \d+: .*loader learn"):
        read_checked(resealed)


def test_the_intact_model_passes_every_check(trained):
    checked = read_checked(trained)
    assert checked.text == (trained / LEARNED_MODEL_FILE).read_text(encoding="ascii")
    assert checked.trees == 20 and (checked.prior_scale, checked.residual_weight) == (2.0, 0.5)
    provenance = json.loads((trained / PROVENANCE_FILE).read_text(encoding="utf-8"))["model"]
    assert provenance["file_sha256"] == checked.sha256 and provenance["trees"] == 20
    assert provenance["file_bytes"] == (trained / LEARNED_MODEL_FILE).stat().st_size


# --- what the line-by-line check might miss: the child process dies, not this one -----------------


@pytest.mark.parametrize(
    ("damage", "verdict"),
    [
        (lambda text: text[: text.index("\nTree=3\n") + 300], r"crashed on it \(SIG(ABRT|SEGV)"),
        (in_header("tree_sizes", "9999999", old=r"\d+"), r"crashed on it \(SIG(SEGV|ABRT|BUS)"),
        (in_header("num_tree_per_iteration", "0"), r"crashed on it \(SIGFPE"),
        (lambda text: text[: text.index("feature_infos=") + 40], r"refused it \(.*feature_infos"),
    ],
    ids=["truncated in a tree", "tree_sizes past the end", "no tree per iteration", "refused"],
)
def test_a_booster_lightgbm_dies_on_kills_only_the_probe(trained, damage, verdict):
    text = damage((trained / LEARNED_MODEL_FILE).read_text(encoding="ascii"))
    checked = CheckedModel(trained, text, 2.0, 0.5, 20, "0" * 64)
    file = re.escape(str(checked.model_file))
    with pytest.raises(ModelError, match=f"{file}: LightGBM {verdict}"):
        probe_booster(checked)


# --- the provenance -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "message"),
    [
        ({"residual_weight": float("nan")}, r"model.residual_weight is nan, not a finite number"),
        ({"prior_scale": [2.0]}, r"model.prior_scale is \[2.0\], not a finite number"),
        ({"prior_scale": True}, r"model.prior_scale is True, not a finite number"),
        ({"residual_weight": 7}, r"model.residual_weight is 7, not between 0.0 and 1.0"),
        ({"trees": "20"}, r"model.trees is '20', not an integer"),
        ({"file_sha256": ["x"]}, r"model.file_sha256 is \['x'\], not a SHA-256"),
        ({"file_bytes": 10**12}, r"model.file_bytes is 1000000000000, not between"),
        ({"feature_fingerprint": {"a": 1}}, r"was trained on features version 1 \(\{'a': 1\}\)"),
        # A base no search has: searches ignored it, and `loader learn` retraining in place
        # failed with "search_mode 'nonsense' is not one of ...; fix the setting", no file named.
        ({"base_mode": "nonsense"}, r"model.base_mode is 'nonsense', not a search mode \(bm25, "),
    ],
)
def test_provenance_values_of_the_wrong_type_or_range_are_named(
    trained, tmp_path, changes, message
):
    folder = with_provenance(trained, tmp_path / "model", **changes)
    with pytest.raises(ModelError, match=message):
        LearnedReranker(folder)


def test_a_model_written_before_the_hash_was_recorded_is_refused(trained, tmp_path):
    folder = tmp_path / "old"
    shutil.copytree(trained, folder)
    provenance = json.loads((folder / PROVENANCE_FILE).read_text(encoding="utf-8"))
    del provenance["model"]["file_sha256"], provenance["model"]["file_bytes"]
    (folder / PROVENANCE_FILE).write_text(json.dumps(provenance), encoding="utf-8")
    with pytest.raises(ModelError, match=r"records no size and SHA-256 .* `loader learn`"):
        LearnedReranker(folder)


def finishes(call: Callable[[], object], seconds: float = 20) -> BaseException | None:
    """What ``call`` raised, asserting it returned within ``seconds`` (a FIFO must not hang)."""
    outcome: list[BaseException | None] = []

    def run() -> None:
        try:
            call()
            outcome.append(None)
        except BaseException as exc:  # noqa: BLE001 - handed to the test
            outcome.append(exc)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(seconds)
    assert outcome, f"still reading after {seconds} s"
    return outcome[0]


@pytest.mark.parametrize("which", [PROVENANCE_FILE, LEARNED_MODEL_FILE])
def test_a_fifo_dev_zero_a_folder_or_a_huge_file_is_refused_without_reading_it(
    trained, tmp_path, which
):
    for kind, make, said in [
        ("fifo", os.mkfifo, "is a named pipe, not a regular file"),
        ("zero", lambda path: path.symlink_to("/dev/zero"), "is a character device"),
        ("folder", os.mkdir, "is a directory"),
        ("huge", lambda path: path.write_bytes(b"") or os.truncate(path, 3 * 10**9), "larger"),
    ]:
        folder = tmp_path / kind
        shutil.copytree(trained, folder)
        (folder / which).unlink()
        make(folder / which)
        error = finishes(lambda folder=folder: LearnedReranker(folder))
        assert isinstance(error, ModelError), error
        assert str(folder / which) in str(error) and said in str(error)


# --- read again when the files change -------------------------------------------------------------


def test_a_changed_model_is_read_again_and_the_old_one_serves_until_the_new_passes(
    trained, tmp_path, caplog
):
    folder = tmp_path / "served"
    shutil.copytree(trained, folder)
    first = load_learned(str(folder))
    assert load_learned(str(folder)) is first

    good = (folder / LEARNED_MODEL_FILE).read_bytes()
    (folder / LEARNED_MODEL_FILE).write_bytes(good[: len(good) // 2])  # damaged in place
    with caplog.at_level(logging.WARNING, "loader.models.rerank.learned"):
        assert load_learned(str(folder)) is first
        assert load_learned(str(folder)) is first  # refused once, not read on every call
    said = [r.getMessage() for r in caplog.records if "keeps serving" in r.getMessage()]
    assert len(said) == 1 and str(folder) in said[0] and "is 7," not in said[0], said

    train(folder, rounds=8, seed=5)  # retrained in place: the new model passes and serves
    second = load_learned(str(folder))
    assert second is not first and second.booster.num_trees() == 8
    assert second.sha256 != first.sha256


def test_a_damaged_model_read_first_is_an_error_until_it_is_replaced(trained, tmp_path):
    folder = tmp_path / "bad-first"
    data = (trained / LEARNED_MODEL_FILE).read_bytes()
    copy_with(trained, folder, data[:-100], reseal=False)
    for _ in range(2):
        with pytest.raises(ModelError, match="SHA-256|bytes"):
            load_learned(str(folder))
    (folder / LEARNED_MODEL_FILE).write_bytes(data)
    assert load_learned(str(folder)).booster.num_trees() == 20


@pytest.mark.parametrize(
    "learnt_from",
    ["0123456789abcdef", ["0123456789ABCDEF"], ["0123"], [1], ["0123456789abcdef"] * 20_001],
)
def test_a_damaged_record_of_what_the_model_learnt_from_is_refused(trained, tmp_path, learnt_from):
    folder = tmp_path / "model"
    shutil.copytree(trained, folder)
    provenance = json.loads((folder / PROVENANCE_FILE).read_text(encoding="utf-8"))
    provenance["model"]["learnt_from"] = learnt_from
    (folder / PROVENANCE_FILE).write_text(json.dumps(provenance), encoding="utf-8")
    with pytest.raises(ModelError, match="model.learnt_from is not a list"):
        read_checked(folder)


def test_what_the_model_learnt_from_is_read(trained, tmp_path):
    folder = tmp_path / "model"
    shutil.copytree(trained, folder)
    assert read_checked(folder).learnt_from is None  # before it was recorded
    provenance = json.loads((folder / PROVENANCE_FILE).read_text(encoding="utf-8"))
    provenance["model"]["learnt_from"] = ["0123456789abcdef"]
    (folder / PROVENANCE_FILE).write_text(json.dumps(provenance), encoding="utf-8")
    assert read_checked(folder).learnt_from == frozenset({"0123456789abcdef"})
