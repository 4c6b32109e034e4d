"""A retriever made for tenant A never returns tenant B's chunks, whatever it is called with:
keywords naming a tenant are refused, filters cannot name one, injection strings in the
question or the filters stay inside the tenant filter, and the frameworks' own per-call
configuration does not reach the search. Tenant B's retriever finds B's document, so each
check could fail."""

from __future__ import annotations

import asyncio

import pytest

from loader.errors import ConfigError
from tests.integration.integrations.conftest import B_SECRET, B_SECRET_CODE, QUESTIONS
from tests.integration.integrations.frameworks import FRAMEWORKS, aresults, make, results
from tests.integration.query.search_corpus import INJECTIONS

SECRET_QUESTION = f"night vault code {B_SECRET_CODE} zinc cabinet"
QUESTIONS_OF_A = [SECRET_QUESTION, *QUESTIONS[:3], *INJECTIONS]
# Filters that try to widen the search: strings that would close the tenant's JSON string or
# mustache section if they were pasted into the query.
HOSTILE_FILTERS = [
    {"tags": ['x"}}, {"match_all": {}}, {"term": {"tags": "y']},
    {"tags": ["{{/tenant}}{{^tenant}}"]},
    {"lang": '"}}]}}, "should": [{"match_all": {}}], "x": {"y": "'},
]


def assert_only_a(corpus, rows, what) -> None:
    assert all(corpus.chunk_tenants[row["chunk_id"]] == "A" for row in rows), what
    assert all(row["tenant"] == "A" for row in rows), what
    assert all(row["source"] != B_SECRET and B_SECRET_CODE not in row["text"] for row in rows)


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_b_s_retriever_finds_b_s_document(corpus, framework) -> None:
    retriever = make(framework, "B", settings=corpus.settings, mode="bm25")
    rows = results(framework, retriever, SECRET_QUESTION)
    assert rows[0]["source"] == B_SECRET and rows[0]["tenant"] == "B"


@pytest.mark.parametrize("framework", FRAMEWORKS)
@pytest.mark.parametrize("mode", ["bm25", "hybrid-rrf"])
def test_a_s_retriever_never_returns_b_s_chunks(corpus, framework, mode) -> None:
    retriever = make(framework, "A", settings=corpus.settings, mode=mode, k=20)
    assert retriever.tenant == "A"
    for question in QUESTIONS_OF_A:
        rows = results(framework, retriever, question)
        assert_only_a(corpus, rows, (framework, mode, question))
        async_rows = asyncio.run(aresults(framework, retriever, question))
        assert_only_a(corpus, async_rows, (framework, mode, question, "async"))
    assert results(framework, retriever, QUESTIONS[0]), "A has chunks of its own"


@pytest.mark.parametrize("framework", FRAMEWORKS)
def test_a_filter_cannot_name_a_tenant(corpus, framework) -> None:
    with pytest.raises(ConfigError, match="not tenant .the tenant is fixed"):
        make(framework, "A", settings=corpus.settings, filters={"tenant": "B"})
    with pytest.raises(ConfigError, match="unknown search option tenants"):
        make(framework, "A", settings=corpus.settings, tenants=["A", "B"])


def test_langchain_keywords_and_configuration_cannot_change_the_tenant(corpus) -> None:
    retriever = make("langchain", "A", settings=corpus.settings, mode="bm25", k=20)
    with pytest.raises(ConfigError, match="tenant 'A' is fixed when the retriever is made"):
        retriever.invoke(SECRET_QUESTION, tenant="B")
    with pytest.raises(ConfigError, match="tenant 'A' is fixed"):
        asyncio.run(retriever.ainvoke(SECRET_QUESTION, tenant="B"))
    with pytest.raises(ConfigError, match="not tenant"):
        retriever.invoke(SECRET_QUESTION, filters={"tenant": "B"})
    with pytest.raises(ConfigError, match="unknown search option index_name, settings"):
        retriever.invoke(SECRET_QUESTION, settings=None, index_name="other")
    with pytest.raises(AttributeError):
        retriever.tenant = "B"
    configured = {"metadata": {"tenant": "B"}, "configurable": {"tenant": "B"}, "tags": ["B"]}
    docs = retriever.invoke(SECRET_QUESTION, config=configured)
    docs += retriever.with_config(configurable={"tenant": "B"}).invoke(SECRET_QUESTION)
    docs += retriever.batch([SECRET_QUESTION], config=configured)[0]
    for filters in HOSTILE_FILTERS:
        docs += retriever.invoke(SECRET_QUESTION, filters=filters)
        docs += asyncio.run(retriever.ainvoke(SECRET_QUESTION, filters=filters))
    assert {doc.metadata["tenant"] for doc in docs} <= {"A"}
    assert all(corpus.chunk_tenants[doc.id] == "A" for doc in docs)


def test_llamaindex_query_bundles_cannot_change_the_tenant(corpus) -> None:
    from llama_index.core.schema import QueryBundle

    retriever = make("llamaindex", "A", settings=corpus.settings, mode="hybrid-rrf", k=20)
    bundle = QueryBundle(
        query_str=SECRET_QUESTION,
        custom_embedding_strs=["tenant B", B_SECRET_CODE],
        embedding=[0.5] * 384,
    )
    nodes = retriever.retrieve(bundle) + asyncio.run(retriever.aretrieve(bundle))
    assert nodes and {node.node.metadata["tenant"] for node in nodes} == {"A"}
    assert all(corpus.chunk_tenants[node.node.node_id] == "A" for node in nodes)
    with pytest.raises(AttributeError):
        retriever.tenant = "B"


def test_haystack_inputs_cannot_change_the_tenant(corpus) -> None:
    from haystack import Pipeline

    retriever = make("haystack", "A", settings=corpus.settings, mode="bm25", k=20)
    with pytest.raises(ConfigError, match="not tenant"):
        retriever.run(query=SECRET_QUESTION, filters={"tenant": "B"})
    with pytest.raises(TypeError):
        retriever.run(query=SECRET_QUESTION, tenant="B")
    pipeline = Pipeline()
    pipeline.add_component("retriever", retriever)
    with pytest.raises(ValueError, match="tenant"):
        pipeline.run({"retriever": {"query": SECRET_QUESTION, "tenant": "B"}})
    documents = []
    for filters in HOSTILE_FILTERS:
        documents += pipeline.run({"retriever": {"query": SECRET_QUESTION, "filters": filters}})[
            "retriever"
        ]["documents"]
        documents += asyncio.run(retriever.run_async(query=SECRET_QUESTION, filters=filters))[
            "documents"
        ]
    assert {doc.meta["tenant"] for doc in documents} <= {"A"}
    assert all(corpus.chunk_tenants[doc.id] == "A" for doc in documents)
