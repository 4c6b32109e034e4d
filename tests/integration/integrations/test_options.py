"""The retrievers' options are ``loader search``'s: one result per document, identifiers first,
filters (tags, language, dates), recency and the rerank give the same chunks as the library
call with the same options, whether set when the retriever is made or, for ``k`` and
``filters``, per call."""

from __future__ import annotations

import asyncio

import pytest

from loader.errors import ConfigError
from loader.query.request import SearchFilters, SearchRequest
from loader.query.search import search
from tests.integration.integrations.frameworks import (
    FRAMEWORKS,
    aresults,
    chunk_ids,
    make,
    results,
)

QUESTION = "refund for a missing item or a late order, and error E1043"


def expected_ids(settings, question: str = QUESTION, **options) -> list[str]:
    request = SearchRequest.from_settings(settings, question, tenant="default", **options)
    return [hit.chunk_id for hit in search(request, settings).hits]


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_options_set_when_made_are_loader_search_s(corpus, framework) -> None:
    cases = [
        {"one_per_document": True, "k": 5},
        {"exact_match": False, "mode": "bm25", "k": 5},
        {"filters": {"tags": ["payments", "app"]}, "k": 5},
        {"filters": {"published_from": "2024-05-01", "lang": "en"}, "k": 5},
        {"filters": {"decay_scale": "30d"}, "mode": "hybrid-minmax", "k": 5},
        {"expand": "parent", "merge_adjacent": True, "candidates": 20, "k": 3},
    ]
    for options in cases:
        filters = SearchFilters(**options.get("filters", {}))
        library = {name: value for name, value in options.items() if name != "filters"}
        expected = expected_ids(corpus.settings, filters=filters, **library)
        assert expected, options
        retriever = make(framework, "default", settings=corpus.settings, **options)
        assert chunk_ids(results(framework, retriever, QUESTION)) == expected, options
        rows = asyncio.run(aresults(framework, retriever, QUESTION))
        assert chunk_ids(rows) == expected, options
    tagged = make(framework, "default", settings=corpus.settings, filters={"tags": "payments"})
    assert {row["source"] for row in results(framework, tagged, QUESTION)} == {"payments.md"}


def test_the_identifier_ranks_its_chunk_first(corpus) -> None:
    for framework in FRAMEWORKS:
        retriever = make(framework, "partners", settings=corpus.settings, mode="vector")
        top = results(framework, retriever, "what does E1043 mean")[0]
        assert "E1043" in top["text"], framework


def test_k_and_filters_per_call(corpus) -> None:
    settings = corpus.settings
    langchain = make("langchain", "default", settings=settings, filters={"lang": "en"}, k=5)
    haystack = make("haystack", "default", settings=settings, filters={"lang": "en"}, k=5)
    per_call = {"tags": ["refunds"], "published_to": "2024-12-31"}
    expected = expected_ids(settings, k=2, filters=SearchFilters(lang="en", **per_call))
    docs = langchain.invoke(QUESTION, k=2, filters=per_call)
    assert [doc.id for doc in docs] == expected
    documents = haystack.run(query=QUESTION, top_k=2, filters=per_call)["documents"]
    assert [doc.id for doc in documents] == expected
    # a filter given per call replaces the retriever's of the same name, and only that one
    french = langchain.invoke(QUESTION, filters={"lang": "fr"})
    assert french == [] and expected_ids(settings, filters=SearchFilters(lang="fr")) == []
    with pytest.raises(ConfigError, match="published_from 'yesterday' is not a date"):
        langchain.invoke(QUESTION, filters={"published_from": "yesterday"})
    with pytest.raises(ConfigError, match="k must be a positive whole number, got 0"):
        haystack.run(query=QUESTION, top_k=0)


def test_rerank_is_loader_search_s(corpus, cross_encoder_path) -> None:
    settings = corpus.settings.replace(reranker_model=cross_encoder_path)
    # 10 candidates, not 50: the cross-encoder runs 8 times on two shared cores
    expected = expected_ids(settings, rerank=True, k=3, candidates=10)
    plain = expected_ids(settings, rerank=False, k=3, candidates=10)
    assert expected != plain  # the (random-headed) cross-encoder reorders the candidates
    for framework in FRAMEWORKS:
        retriever = make(framework, "default", settings=settings, rerank=True, k=3, candidates=10)
        rows = results(framework, retriever, QUESTION)
        assert chunk_ids(rows) == expected, framework
        assert chunk_ids(asyncio.run(aresults(framework, retriever, QUESTION))) == expected
        assert [row["ranks"]["rerank"] for row in rows] == [1, 2, 3]
        assert rows[0]["score"] == rows[0]["scores"]["rerank"]
