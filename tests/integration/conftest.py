"""Fixtures shared by the integration tests: the embedding model, loaded once per session."""

from __future__ import annotations

import pytest

from loader.models.embedding import get_embedder


@pytest.fixture(scope="session")
def embedder(base_settings):
    return get_embedder(base_settings.embedding_model, device=base_settings.device)
