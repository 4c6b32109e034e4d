"""Fixtures for the chunking tests: the real tokenizer (loaded once) and a nasty long document."""

from __future__ import annotations

import os

import pytest

from loader.documents import Block, Document, Section
from tests.unit.ingest.chunking.sample_text import long_code, long_sentence, long_table, prose

os.environ.setdefault("HF_HUB_OFFLINE", "1")


@pytest.fixture(scope="session")
def embedder():
    from loader.models.embedding import get_embedder

    return get_embedder("all-MiniLM-L6-v2")


@pytest.fixture(scope="session")
def embed(embedder):
    """``embedder.embed`` with a memo: the tests embed the same sentences many times."""
    import numpy as np

    vectors: dict[str, np.ndarray] = {}

    def cached(texts: list[str]) -> np.ndarray:
        missing = [text for text in dict.fromkeys(texts) if text not in vectors]
        if missing:
            vectors.update(zip(missing, embedder.embed(missing), strict=True))
        return np.stack([vectors[text] for text in texts]) if texts else embedder.embed([])

    return cached


@pytest.fixture(scope="session")
def count_tokens(embedder):
    return embedder.count_tokens


@pytest.fixture(scope="session")
def tokenizer_count():
    """The tokenizer's own count, one call per text: what ``count_tokens`` (word by word,
    ``loader.models.token_count``) must always equal."""
    from pathlib import Path

    from tokenizers import Tokenizer

    from loader.models.embedding import resolve_model_path

    tokenizer = Tokenizer.from_file(
        str(Path(resolve_model_path("all-MiniLM-L6-v2")) / "tokenizer.json")
    )
    tokenizer.no_truncation()
    tokenizer.no_padding()
    return lambda text: len(tokenizer.encode(text, add_special_tokens=False).ids)


@pytest.fixture(scope="session")
def long_document() -> Document:
    """Long prose, a long table, a long code block, a 400-word sentence, nested sections."""
    paragraphs = prose(6, 5)
    return Document(
        source="guides/long.md",
        title="Operations handbook",
        sections=[
            Section((), [Block("paragraph", "An introduction of one sentence.")]),
            Section(
                ("Deliveries",),
                [Block("paragraph", p) for p in paragraphs[:3]]
                + [Block("list", "- first item of the list\n- second item of the list")],
            ),
            Section(("Deliveries", "Error codes"), [Block("table", long_table())]),
            Section(("Deliveries", "Scripts"), [Block("code", long_code())]),
            Section(("Legal",), [Block("paragraph", long_sentence())]),
            Section(("Legal", "More"), [Block("paragraph", p) for p in paragraphs[3:]]),
        ],
        metadata={"lang": "en", "tags": ["ops"]},
    )
