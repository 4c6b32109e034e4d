"""The sample docs/ folder reads cleanly and chunks the way the seed example needs."""

from __future__ import annotations

from pathlib import Path

import pytest

from loader.ingest.chunking import STRATEGIES, ChunkingConfig, chunk_document
from loader.ingest.readers import Skipped, iter_documents
from tests.paths import SAMPLE_DOCS

DOCS = SAMPLE_DOCS
LATE = "Orders delayed by more than 45 minutes past the promised time qualify for compensation."
PAID = (
    "Compensation is a full refund of the order value, paid to the original payment method "
    "within 5 to 7 working days."
)


@pytest.fixture(scope="module")
def documents():
    items = list(iter_documents(DOCS, 10_000_000))
    assert [item for item in items if isinstance(item, Skipped)] == []
    return items


def test_sample_docs_cover_the_formats(documents) -> None:
    suffixes = {Path(doc.source).suffix for doc in documents}
    assert {".md", ".html", ".txt"} <= suffixes
    assert 5 <= len(documents) <= 7
    for doc in documents:
        if doc.source.endswith(".md"):
            assert (
                doc.metadata["lang"] == "en" and doc.metadata["tags"] and doc.metadata["published"]
            )


def test_late_delivery_answer_stays_in_one_chunk(documents, count_tokens) -> None:
    refund = next(doc for doc in documents if doc.title == "Refund policy")
    late = next(s for s in refund.sections if s.heading_path == ("Late deliveries",))
    assert f"{LATE} {PAID}" in [block.text for block in late.blocks]
    chunks = chunk_document(refund, ChunkingConfig(), count_tokens)
    holding = [chunk for chunk in chunks if LATE in chunk.body]
    assert len(holding) == 1
    assert PAID in holding[0].body
    assert holding[0].text.startswith("Refund policy > Late deliveries\n\n")


@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s != "semantic"])
def test_sample_docs_respect_the_limit(
    documents, count_tokens, tokenizer_count, strategy: str
) -> None:
    config = ChunkingConfig(strategy=strategy)
    for doc in documents:
        chunks = chunk_document(doc, config, count_tokens)
        for chunk in chunks:
            assert tokenizer_count(chunk.text) <= config.max_tokens
        # Counting word by word cuts exactly where one tokenizer call per text cuts.
        assert chunks == chunk_document(doc, config, tokenizer_count), doc.source
