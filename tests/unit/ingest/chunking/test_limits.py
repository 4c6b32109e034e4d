"""The one rule every strategy keeps: count_tokens(chunk.text) <= max_tokens."""

from __future__ import annotations

import pytest

from loader.ingest.chunking import STRATEGIES, ChunkingConfig, chunk_document

CONFIGS = {
    "default": {},
    "small": {
        "target_tokens": 40,
        "max_tokens": 64,
        "overlap_tokens": 8,
        "semantic_min_tokens": 10,
    },
}


@pytest.mark.parametrize("config_name", sorted(CONFIGS))
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_no_chunk_exceeds_max_tokens(
    strategy: str, config_name: str, long_document, embed, count_tokens
) -> None:
    config = ChunkingConfig(strategy=strategy, **CONFIGS[config_name])
    chunks = chunk_document(long_document, config, count_tokens, embed)
    assert len(chunks) > 5
    assert [chunk.position for chunk in chunks] == list(range(len(chunks)))
    over = [
        (c.position, count_tokens(c.text))
        for c in chunks
        if count_tokens(c.text) > config.max_tokens
    ]
    assert over == []
    assert all(chunk.body.strip() for chunk in chunks)


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_every_word_of_the_document_is_kept(strategy: str, long_document, embed, count_tokens):
    config = ChunkingConfig(strategy=strategy)
    chunks = chunk_document(long_document, config, count_tokens, embed)
    words = {w for s in long_document.sections for w in s.text.split()}
    assert words <= {w for chunk in chunks for w in chunk.body.split()}
