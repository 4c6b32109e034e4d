"""Each framework's retriever returns what ``loader search`` returns: for ten questions over
docs/ and every mode, the same top-5 chunks in the same order, with their metadata, sync and
async alike."""

from __future__ import annotations

import asyncio

import pytest

from loader.query.request import SearchRequest
from loader.query.search import search
from loader.settings import SEARCH_MODES
from tests.integration.integrations.conftest import QUESTIONS
from tests.integration.integrations.frameworks import (
    FRAMEWORKS,
    aresults,
    chunk_ids,
    make,
    results,
)


def loader_search(settings, question: str, **options):
    request = SearchRequest.from_settings(settings, question, tenant="default", **options)
    return search(request, settings)


@pytest.mark.parametrize("mode", SEARCH_MODES)
def test_every_retriever_returns_loader_search_s_top_5(corpus, mode) -> None:
    retrievers = {
        framework: make(framework, "default", settings=corpus.settings, mode=mode, k=5)
        for framework in FRAMEWORKS
    }
    for question in QUESTIONS:
        expected = loader_search(corpus.settings, question, mode=mode, k=5)
        assert len(expected.hits) == 5, question
        expected_ids = [hit.chunk_id for hit in expected.hits]
        for framework, retriever in retrievers.items():
            rows = results(framework, retriever, question)
            assert chunk_ids(rows) == expected_ids, (framework, mode, question)
            async_rows = asyncio.run(aresults(framework, retriever, question))
            assert chunk_ids(async_rows) == expected_ids, (framework, mode, question, "async")
            for row, hit in zip(rows, expected.hits, strict=True):
                assert row["heading_path"] == list(hit.heading_path)
                assert row["source"] == hit.source and row["tenant"] == "default"
                assert row["score"] == pytest.approx(hit.scores["retrieval"], rel=1e-5)
                assert row["mode"] == mode
                # the text as indexed: title and heading path first, then the chunk
                assert hit.body in row["text"] and row["text"].startswith(hit.title)
                if row["framework_score"] is not None:
                    assert row["framework_score"] == row["score"]


def test_the_first_hit_is_the_section_asked_about(corpus) -> None:
    retriever = make("langchain", "default", settings=corpus.settings, k=5)
    docs = retriever.invoke("How long do refunds take for late deliveries?")
    assert docs[0].metadata["heading"] == "Refund policy > Late deliveries"
    assert docs[0].metadata["source"] == "refund-policy.md"
    assert docs[0].id == docs[0].metadata["chunk_id"]
