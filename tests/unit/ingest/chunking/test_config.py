from __future__ import annotations

import pytest

from loader.documents import Block, Document, Section
from loader.errors import ConfigError
from loader.ingest.chunking import STRATEGIES, ChunkingConfig, chunk_document, chunking_config
from loader.settings import Settings


def test_defaults_use_the_model_limit() -> None:
    config = chunking_config(Settings(), 254)
    assert config == ChunkingConfig(strategy="structure", target_tokens=180, max_tokens=254)


def test_max_tokens_is_capped_at_the_model_limit() -> None:
    assert chunking_config(Settings(chunk_max_tokens=500), 254).max_tokens == 254
    assert chunking_config(Settings(chunk_max_tokens=200), 254).max_tokens == 200


def test_every_strategy_is_accepted() -> None:
    for strategy in STRATEGIES:
        assert chunking_config(Settings(chunk_strategy=strategy), 254).strategy == strategy


@pytest.mark.parametrize(
    ("changes", "setting"),
    [
        ({"chunk_strategy": "paragraphs"}, "chunk_strategy"),
        ({"chunk_overlap_tokens": 180}, "chunk_overlap_tokens"),
        ({"chunk_overlap_tokens": -1}, "chunk_overlap_tokens"),
        ({"chunk_target_tokens": 300}, "chunk_target_tokens"),
        ({"chunk_target_tokens": 150, "chunk_max_tokens": 100}, "chunk_target_tokens"),
        ({"chunk_max_tokens": -5}, "chunk_max_tokens"),
        ({"semantic_threshold": 1.5}, "semantic_threshold"),
        ({"sentence_window": -1}, "sentence_window"),
    ],
)
def test_inconsistent_settings_name_the_setting(changes: dict, setting: str) -> None:
    with pytest.raises(ConfigError, match=setting):
        chunking_config(Settings(**changes), 254)


def test_semantic_needs_the_embedding_model() -> None:
    doc = Document("a.md", "A", [Section((), [Block("paragraph", "Text.")])])
    with pytest.raises(ConfigError, match="semantic chunking needs the embedding model"):
        chunk_document(doc, ChunkingConfig(strategy="semantic"), len)
