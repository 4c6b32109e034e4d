"""Exact identifiers win, and one result per document, on the real cluster.

A generated table of 60 error codes (``identifier_table``), pushed as one Markdown file that the
chunker splits into several chunks repeating the header: for every code, every hybrid mode ranks
the chunk holding it first, through the library and through the stored templates called as an
application would (its own ``exact_terms`` from ``loader.query.identifiers``). A z-score has no
upper bound, so ``exact_weight`` cannot promise that in hybrid-zscore: there it holds for a code
one chunk holds (a sub-query's lone hit keeps its raw score, the holder's 1000); a code two
tables share is a weighted vote. Three such documents, then ``collapse_doc`` /
``one_per_document``: distinct documents through every template.
"""

from __future__ import annotations

import uuid
from pathlib import Path

import pytest

from loader.index.apply import apply_config
from loader.index.render import config_names
from loader.ingest.sync import push
from loader.modes import HYBRID_MODES, search_mode
from loader.query.identifiers import exact_terms
from loader.query.request import SearchRequest
from loader.query.search import search
from tests.integration.query.identifier_table import error_code_table

TEMPLATE_MODES = ("bm25", "vector", *HYBRID_MODES)
# Modes whose fused scores are bounded (rrf, min_max): exact_weight > 0.5 puts a holder first.
BOUNDED_MODES = tuple(mode for mode in HYBRID_MODES if search_mode(mode).technique != "z_score")
TENANT = "acme"


@pytest.fixture(scope="module")
def code_index(client, base_settings, embedder, tmp_path_factory):
    """The error-code table and two more like it (other seeds), pushed under a fresh alias."""
    from tests.conftest import cleanup_owned

    alias = f"t-exact-{uuid.uuid4().hex[:8]}"
    settings = base_settings.replace(index_name=alias, rerank=False)
    folder = tmp_path_factory.mktemp("codes")
    tables = {seed: error_code_table(rows=60, seed=seed) for seed in (18, 19, 20)}
    for seed, (text, _codes) in tables.items():
        (folder / f"codes-{seed}.md").write_text(text, encoding="utf-8")
    apply_config(settings, dimension=embedder.dimension, client=client)
    report = push(
        Path(folder), settings, collection="codes", tenant=TENANT, client=client, embedder=embedder
    )
    assert report.failed == 0, report
    yield settings, tables
    cleanup_owned(client, alias)


def holds(body: str, code: str) -> bool:
    return f"| {code} |" in body


def promised(mode: str, code: str, tables) -> bool:
    """Whether ``mode`` promises to rank the chunk holding ``code`` first: always in a bounded
    fusion, in hybrid-zscore when one chunk alone holds it."""
    if mode in BOUNDED_MODES:
        return True
    return sum(code in codes for _text, codes in tables.values()) == 1


def test_the_table_is_split_into_several_chunks(client, code_index):
    settings, tables = code_index
    response = client.search(
        index=settings.index_name,
        body={"size": 100, "query": {"term": {"source": "codes-18.md"}}, "_source": ["body"]},
    )
    bodies = [hit["_source"]["body"] for hit in response["hits"]["hits"]]
    holding = [body for body in bodies if "| code | meaning | action |" in body]
    assert len(holding) >= 4  # the header is repeated in every piece
    _text, codes = tables[18]
    assert len(codes) >= 50
    assert all(sum(holds(body, code) for body in bodies) == 1 for code in codes)


def test_every_identifier_ranks_first_in_every_hybrid_mode_through_the_library(
    client, code_index, embedder
):
    settings, tables = code_index
    _text, codes = tables[18]
    missed = []
    for code in codes:
        for mode in (mode for mode in HYBRID_MODES if promised(mode, code, tables)):
            request = SearchRequest.from_settings(
                settings, f"what does {code} mean", tenant=TENANT, mode=mode, k=3
            )
            top = search(request, settings, client=client, embedder=embedder).hits[0]
            if not holds(top.body, code):
                missed.append((mode, code, top.chunk_id))
    assert missed == []


def test_every_identifier_ranks_first_through_the_stored_templates(client, code_index, embedder):
    settings, tables = code_index
    names = config_names(settings.index_name)
    _text, codes = tables[18]
    missed = []
    for code in codes:
        question = f"error {code}: what should support do?"
        params = {
            "tenant": TENANT,
            "query_text": question,
            "query_vector": embedder.embed_queries([question])[0].tolist(),
            "exact_terms": list(exact_terms(question)),
            "size": 3,
        }
        assert params["exact_terms"] == [code]
        for mode in ("bm25", *(mode for mode in HYBRID_MODES if promised(mode, code, tables))):
            template, pipeline = names.for_search_mode(mode)
            response = client.search_template(
                index=names.alias,
                body={"id": template, "params": params},
                params={"search_pipeline": pipeline} if pipeline else {},
            )
            top = response["hits"]["hits"][0]["_source"]
            if not holds(top["body"], code):
                missed.append((mode, code, top["chunk_id"]))
    assert missed == []


def test_without_identifiers_the_exact_sub_query_changes_nothing(client, code_index, embedder):
    """An empty exact_terms (or none) leaves both fusions' order as two sub-queries give it."""
    settings, _tables = code_index
    names = config_names(settings.index_name)
    question = "the card was declined by the bank"
    params = {
        "tenant": TENANT,
        "query_text": question,
        "query_vector": embedder.embed_queries([question])[0].tolist(),
        "size": 20,
    }
    for mode in HYBRID_MODES:
        template, pipeline = names.for_search_mode(mode)
        orders = []
        for extra in ({}, {"exact_terms": []}):
            response = client.search_template(
                index=names.alias,
                body={"id": template, "params": params | extra},
                params={"search_pipeline": pipeline},
            )
            orders.append([hit["_id"] for hit in response["hits"]["hits"]])
        assert orders[0] == orders[1] and len(orders[0]) > 3


def test_collapse_returns_distinct_documents_through_every_template(client, code_index, embedder):
    settings, _tables = code_index
    names = config_names(settings.index_name)
    question = "the payment was declined by the bank during checkout"
    params = {
        "tenant": TENANT,
        "query_text": question,
        "query_vector": embedder.embed_queries([question])[0].tolist(),
        "size": 10,
    }
    for mode in TEMPLATE_MODES:
        template, pipeline = names.for_search_mode(mode)
        documents = {}
        for collapse in (False, True):
            response = client.search_template(
                index=names.alias,
                body={
                    "id": template,
                    "params": params | ({"collapse_doc": True} if collapse else {}),
                },
                params={"search_pipeline": pipeline} if pipeline else {},
            )
            documents[collapse] = [hit["_source"]["doc_id"] for hit in response["hits"]["hits"]]
        assert len(documents[False]) > len(set(documents[False])), mode  # chunks repeat documents
        assert len(documents[True]) == len(set(documents[True])) == 3, mode
        assert documents[True][0] == documents[False][0], mode  # each at its best chunk


def test_one_per_document_through_the_library(client, code_index, embedder):
    settings, _tables = code_index
    for mode in TEMPLATE_MODES:
        request = SearchRequest.from_settings(
            settings,
            "declined by the bank",
            tenant=TENANT,
            mode=mode,
            k=10,
            one_per_document=True,
        )
        hits = search(request, settings, client=client, embedder=embedder).hits
        assert len(hits) == len({hit.doc_id for hit in hits}) == 3, mode
