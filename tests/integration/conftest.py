"""Fixtures shared by the integration tests: the embedding model and a small local
cross-encoder, each made once per test session."""

from __future__ import annotations

import pytest

from loader.embedding import get_embedder
from tests.integration.search_corpus import make_cross_encoder


@pytest.fixture(scope="session")
def embedder(base_settings):
    return get_embedder(base_settings.embedding_model, device=base_settings.device)


@pytest.fixture(scope="session")
def cross_encoder_path(tmp_path_factory: pytest.TempPathFactory) -> str:
    return make_cross_encoder(tmp_path_factory.mktemp("search-cross-encoder"))
