"""The retrievers' shared core without a cluster: options checked when a retriever is made,
a call that names a tenant refused, every template call made for the retriever's tenant, and
the hits carried into each framework's document type."""

from __future__ import annotations

import asyncio
import importlib

import pytest

from loader.errors import ConfigError
from loader.integrations.core import TenantSearch, as_filters
from loader.query.request import SearchFilters
from tests.unit.query.fakes import (
    CORPUS,
    SETTINGS,
    FakeAsyncClient,
    FakeClient,
    FakeEmbedder,
    FakeReranker,
)


def searcher(**options) -> tuple[TenantSearch, FakeClient, FakeAsyncClient]:
    client, async_client = FakeClient({"q": CORPUS}), FakeAsyncClient({"q": CORPUS})
    made = TenantSearch(
        "A",
        settings=SETTINGS,
        client=client,
        async_client=async_client,
        embedder=FakeEmbedder(),
        reranker=FakeReranker(),
        **options,
    )
    return made, client, async_client


def test_filters_are_the_templates_own() -> None:
    assert as_filters(None) == SearchFilters()
    assert as_filters({"tags": "x", "lang": "en"}) == SearchFilters(lang="en", tags=("x",))
    with pytest.raises(ConfigError, match=r"not tenant \(the tenant is fixed"):
        as_filters({"tenant": "B"})
    with pytest.raises(ConfigError, match="filters take lang, tags, .*; not field, operator"):
        as_filters({"field": "meta.lang", "operator": "==", "value": "en"})
    with pytest.raises(ConfigError, match="filters must be a mapping"):
        as_filters("lang:en")


@pytest.mark.parametrize("tags", [5, 1.5, {"x": 1}, b"x", object()])
def test_tags_that_are_no_string_nor_list_are_a_config_error_not_a_type_error(tags) -> None:
    # tuple(5) raised TypeError, which no caller of a retriever expects (hostile probe).
    with pytest.raises(ConfigError, match="filters: tags must be a string or a list of strings"):
        as_filters({"tags": tags})


def test_options_are_checked_when_made() -> None:
    with pytest.raises(ConfigError, match="unknown search option history, index_name"):
        searcher(index_name="other", history=[])
    with pytest.raises(ConfigError, match="mode 'fuzzy' is not one of"):
        searcher(mode="fuzzy")
    with pytest.raises(ConfigError, match="published_from '2020-13-45' is not a date"):
        searcher(filters={"published_from": "2020-13-45"})
    with pytest.raises(ConfigError, match="tenant is required"):
        TenantSearch(" ", settings=SETTINGS, client=FakeClient({}))
    with pytest.raises(ConfigError, match="give settings or config, not both"):
        TenantSearch("A", settings=SETTINGS, config="loader.toml")


def test_a_call_takes_k_and_filters_and_never_a_tenant() -> None:
    made, client, async_client = searcher(filters={"lang": "en"}, k=1)
    with pytest.raises(ConfigError, match="tenant 'A' is fixed when the retriever is made"):
        made.search("q", tenant="B")
    with pytest.raises(ConfigError, match="a call takes k, filters"):
        made.search("q", mode="bm25")
    result = made.search("q", k=2, filters={"tags": ["x"]})
    asyncio.run(made.asearch("q", filters={"lang": "fr"}))
    assert len(result.hits) == 2
    sync_params = client.calls[0]["body"]["params"]
    async_params = async_client.calls[0]["body"]["params"]
    assert (sync_params["lang"], sync_params["tags"]) == ("en", ["x"])  # merged
    assert async_params["lang"] == "fr" and "tags" not in async_params  # replaced
    assert {call["body"]["params"]["tenant"] for call in client.calls + async_client.calls} == {"A"}
    assert made.tenant == "A"


def models() -> dict:
    """A fake client answering "q", and fake models: no cluster, nothing loaded."""
    return {
        "settings": SETTINGS,
        "client": FakeClient({"q": CORPUS}),
        "embedder": FakeEmbedder(),
        "reranker": FakeReranker(),
    }


def test_langchain_documents() -> None:
    from loader.integrations.langchain import LoaderRetriever

    retriever = LoaderRetriever("A", k=2, **models())
    docs = retriever.invoke("q")
    assert [doc.id for doc in docs] == ["b-0", "c-0"]  # reranked: most "z" first
    assert docs[0].page_content == "Guide > Part > Section\n\nbravo zz"
    meta = docs[0].metadata
    assert meta["heading_path"] == ["Part", "Section"]
    assert meta["heading"] == "Guide > Part > Section"
    assert (meta["source"], meta["chunk_id"], meta["tenant"]) == ("b-0.md", "b-0", "A")
    assert meta["score"] == meta["scores"]["rerank"] == 2.0
    with pytest.raises(ConfigError, match="tenant 'A' is fixed"):
        retriever.invoke("q", tenant="B")
    assert retriever.invoke("q", verbose=True)  # LangChain's own keyword is not the search's


def test_llamaindex_nodes() -> None:
    from loader.integrations.llamaindex import LoaderRetriever

    retriever = LoaderRetriever("A", **models())
    nodes = retriever.retrieve("q")
    assert [node.node.node_id for node in nodes] == ["b-0", "c-0", "a-0"]
    assert nodes[0].score == 2.0 and nodes[0].node.ref_doc_id == "b"
    assert nodes[0].node.metadata["heading_path"] == ["Part", "Section"]


def test_haystack_documents_and_serialization() -> None:
    from loader.integrations.haystack import LoaderRetriever

    retriever = LoaderRetriever("A", top_k=1, **models())
    (document,) = retriever.run(query="q")["documents"]
    assert (document.id, document.score, document.meta["source"]) == ("b-0", 2.0, "b-0.md")
    with pytest.raises(ConfigError, match="made with settings, client, embedder, reranker cannot"):
        retriever.to_dict()
    plain = LoaderRetriever("A", config=None, mode="bm25", filters={"lang": "en"})
    assert plain.to_dict()["init_parameters"] == {
        "tenant": "A",
        "top_k": None,
        "config": None,
        "mode": "bm25",
        "filters": {"lang": "en"},
    }


@pytest.mark.parametrize("framework", ["core", "langchain", "llamaindex", "haystack"])
def test_a_missing_tenant_is_the_documented_config_error(framework: str) -> None:
    """``tenant=None`` went on to SearchRequest as no tenant at all: a TypeError."""
    if framework == "core":
        made = TenantSearch
    else:
        pytest.importorskip({"langchain": "langchain_core", "llamaindex": "llama_index.core",
                             "haystack": "haystack"}[framework])  # fmt: skip
        module = importlib.import_module(f"loader.integrations.{framework}")
        made = module.LoaderRetriever
    with pytest.raises(ConfigError, match="^tenant is required: .*, got None$"):
        made(tenant=None, settings=SETTINGS, client=FakeClient({}))
