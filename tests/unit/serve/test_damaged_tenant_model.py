"""A tenant's learned model damaged in place while serve runs: whatever stands where its files
were (a folder, a FIFO, a link to a device, a half-written provenance), the model read before
keeps serving the tenant's rerank requests, and a server that never read one answers them 503
(the server's model is at fault), never the 422 of a tenant without a model. These damages were
once read as "no model for this tenant": the tenant lost its rerank, and ``"rerank": true``
answered 422 as if the request were at fault.

No cluster: the booster is trained on synthetic examples (``test_learned.synthetic``)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

pytest.importorskip("fastapi")

from loader.errors import ModelError, RerankerUnavailableError  # noqa: E402
from loader.models.rerank.check import LEARNED_MODEL_FILE  # noqa: E402
from loader.models.rerank.learned_files import PROVENANCE_FILE  # noqa: E402
from loader.serve.service import SearchService  # noqa: E402
from loader.settings import Settings  # noqa: E402
from tests.unit.models.rerank.test_learned_files import train  # noqa: E402


def _folder(path: Path) -> None:
    path.mkdir()


def _fifo(path: Path) -> None:
    os.mkfifo(path)


def _dev_zero(path: Path) -> None:
    path.symlink_to("/dev/zero")


def _half(path: Path, data: bytes) -> None:
    path.write_bytes(data[: len(data) // 2])


DAMAGES = [
    (LEARNED_MODEL_FILE, _folder),
    (LEARNED_MODEL_FILE, _fifo),
    (LEARNED_MODEL_FILE, _dev_zero),
    (PROVENANCE_FILE, _folder),
    (PROVENANCE_FILE, _fifo),
    (PROVENANCE_FILE, _half),
    (PROVENANCE_FILE, lambda path, data: path.write_bytes(b"")),
]


def _damage(folder: Path, name: str, make) -> None:
    path = folder / name
    data = path.read_bytes()
    path.unlink()
    if make in (_folder, _fifo, _dev_zero):
        make(path)
    else:
        make(path, data)


def _service(root: Path) -> SearchService:
    settings = Settings(
        learned_reranker=str(root), reranker_model=str(root / "no-cross-encoder"), rerank="auto"
    )
    return SearchService(settings, client=None, embedder=None, reranker=None)


@pytest.mark.parametrize(("name", "make"), DAMAGES)
def test_the_model_read_before_keeps_serving_whatever_replaced_its_files(tmp_path, name, make):
    root = tmp_path / "models"
    root.mkdir()
    train(root / "A", rounds=10, seed=1)
    service = _service(root)
    first, failure = service.reranker_for("A")
    assert failure is None and first is not None
    _damage(root / "A", name, make)
    again, failure = service.reranker_for("A")
    assert (again, failure) == (first, None), failure
    assert service.default_rerank("A") == (True, ())


@pytest.mark.parametrize(("name", "make"), DAMAGES)
def test_a_model_damaged_before_it_was_read_is_the_servers_503(tmp_path, name, make):
    root = tmp_path / "models"
    root.mkdir()
    train(root / "A", rounds=10, seed=1)
    _damage(root / "A", name, make)
    model, failure = _service(root).reranker_for("A")
    assert model is None
    assert isinstance(failure, ModelError) and not isinstance(failure, RerankerUnavailableError)
    assert failure.http_status == 503, failure


def test_a_tenant_without_a_model_is_still_refused_as_the_requests_fault(tmp_path):
    root = tmp_path / "models"
    root.mkdir()
    train(root / "A", rounds=10, seed=1)
    shutil.rmtree(root / "A")
    model, failure = _service(root).reranker_for("A")
    assert model is None and isinstance(failure, RerankerUnavailableError)
    assert failure.http_status == 422
