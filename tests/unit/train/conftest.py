"""One tiny embedding model per session, for the tests of the training loop's mechanics."""

from __future__ import annotations

import pytest

from tests.models import make_tiny_embedder


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_tiny_embedder(tmp_path_factory.mktemp("tiny-embedder"))
