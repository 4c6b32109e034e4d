"""One model, one instance: the embedder cache does not depend on how it is called."""

from __future__ import annotations

from loader.models.embedding import embedder_for, get_embedder
from loader.settings import Settings


def test_every_call_style_gives_the_same_embedder():
    settings = Settings()
    styles = [
        get_embedder(settings.embedding_model),
        get_embedder(settings.embedding_model, "cpu"),
        get_embedder(settings.embedding_model, device="cpu"),
        get_embedder(settings.embedding_model, settings.device, settings.embedding_batch_size),
        get_embedder(name=settings.embedding_model, device="cpu", batch_size=64),
        embedder_for(settings),
    ]
    assert all(embedder is styles[0] for embedder in styles)


def test_another_batch_size_shares_the_loaded_model():
    settings = Settings()
    small = embedder_for(settings.replace(embedding_batch_size=8))
    default = embedder_for(settings)
    assert small is not default and small.batch_size == 8
    assert small.model is default.model
