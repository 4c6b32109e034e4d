"""`loader doctor` checks the learned reranker the settings name as every reader does (issue #52,
item 2): an intact folder is ok with its trees and hash, a damaged booster or a folder without a
model fails with exit code 6 naming the file, no setting no line. No cluster."""

from __future__ import annotations

import shutil

import pytest

from loader.doctor.models import learned_model_checks
from loader.doctor.report import DoctorReport
from loader.errors import ModelError
from loader.models.rerank.check import LEARNED_MODEL_FILE
from loader.settings import Settings
from tests.unit.models.rerank.test_learned_files import train


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    return train(tmp_path_factory.mktemp("doctor-model"), rounds=6, seed=2)


def test_an_intact_model_is_ok_with_its_trees_and_hash(model):
    (check,) = learned_model_checks(str(model), "")
    assert check.status == "ok" and check.name == "learned reranker", check
    assert check.detail.startswith(f"{model}: 6 trees, SHA-256 ")


def test_a_damaged_model_fails_with_exit_code_6_naming_the_file(model, tmp_path):
    damaged = tmp_path / "damaged"
    shutil.copytree(model, damaged)
    data = (damaged / LEARNED_MODEL_FILE).read_bytes()
    (damaged / LEARNED_MODEL_FILE).write_bytes(data[: len(data) // 3])
    (check,) = learned_model_checks("", str(damaged))
    assert check.status == "fail" and check.error is ModelError, check
    assert f"learned reranker {damaged}/{LEARNED_MODEL_FILE} is " in check.detail
    with pytest.raises(ModelError, match="first: learned reranker") as raised:
        DoctorReport([check]).check()
    assert raised.value.exit_code == 6


def test_a_folder_without_a_model_fails_and_no_setting_is_no_line(tmp_path):
    (check,) = learned_model_checks(str(tmp_path), "")
    assert check.status == "fail" and "has no learned_reranker.txt" in check.detail, check
    assert learned_model_checks("", Settings().reranker_model) == []


def test_each_tenants_model_in_the_folder_is_checked(model, tmp_path):
    """``learned_reranker`` names a folder of one model folder per tenant (issue #53): each is
    checked, a damaged one fails naming its file, the others stay ok."""
    shutil.copytree(model, tmp_path / "A")
    train(tmp_path / "B", rounds=4, seed=3, tenant="B")
    (tmp_path / "B" / LEARNED_MODEL_FILE).write_bytes(b"tree\n")
    checks = learned_model_checks(str(tmp_path), "")
    assert [check.status for check in checks] == ["ok", "fail"], checks
    assert checks[0].detail.endswith("tenant 'A'")
    assert str(tmp_path / "B" / LEARNED_MODEL_FILE) in checks[1].detail
